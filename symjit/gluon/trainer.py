"""gluon.Trainer: applies an Optimizer to a set of Parameters (MXNet 1.9.1 semantics).

`step(batch_size)` = rescale gradients by `rescale_grad / batch_size`, all-reduce them across
each Parameter's contexts, then update every context's copy of the weight with the optimizer.

The KVStore is created lazily, at the first `step` / `allreduce_grads` / `update` /
`save_states` (`_init_kvstore`), by MXNet's rules (`model._create_kvstore`): a store type given
as a string ('device', 'local', ...) makes a store only with several contexts or a distributed
type; a KVStore object is used as given. Then `_update_on_kvstore` is True when the store
applies the optimizer itself (gradients pushed, updated weights pulled), False when the
gradients are all-reduced through it and one Updater per context applies the optimizer
(MXNET_UPDATE_ON_KVSTORE=0, `update_on_kvstore=False`, or a store without the 'optimizer'
capability), and None when there is no store. Loading new values into a Parameter whose store
applies the updates drops the store (`_reset_kvstore`): the next step re-creates it from the
loaded values. Gradients not written by a backward since the last step are "stale" and raise
UserWarning unless `ignore_stale_grad=True` (then those Parameters are skipped).
"""
from __future__ import annotations

import os
import pickle

import numpy as np

from .. import autograd
from .. import optimizer as opt
from ..base import MXNetError
from .parameter import Parameter, ParameterDict

__all__ = ["Trainer"]


def _create_kvstore(kvstore, num_device: int, arg_arrays: dict):
    """(store or None, update_on_kvstore) as MXNet's `model._create_kvstore`."""
    from .. import kvstore as kvs
    update_on_kvstore = bool(int(os.getenv("MXNET_UPDATE_ON_KVSTORE", "1")))
    if kvstore is None:
        kv = None
    elif isinstance(kvstore, kvs.KVStoreBase):
        kv = kvstore
    elif isinstance(kvstore, str):
        if num_device == 1 and "dist" not in kvstore:
            kv = None   # no store for a single device of a single machine
        else:
            kv = kvs.create(kvstore)
            if kvstore == "local":   # large weights: aggregate on the store, update on the devices
                max_size = max((int(np.prod(a.shape)) for a in arg_arrays.values()), default=0)
                if max_size > 1024 * 1024 * 16:
                    update_on_kvstore = False
    else:
        raise TypeError("kvstore must be KVStore, str or None")
    if kv is None:
        update_on_kvstore = False
    else:
        update_on_kvstore &= kv.is_capable(kvs.KVStoreBase.OPTIMIZER)
    return kv, update_on_kvstore


def _create_sparse_kvstore(kvstore):
    """The store of row_sparse weights: always one, always applying the updates."""
    from .. import kvstore as kvs
    if isinstance(kvstore, kvs.KVStoreBase):
        kv = kvstore
    elif isinstance(kvstore, str):
        kv = kvs.create(kvstore)
    else:
        raise TypeError(f"Cannot create '{kvstore}' KVStore with row_sparse parameters. The type must be "
                        "KVStore or str.")
    if not kv.is_capable(kvs.KVStoreBase.OPTIMIZER):
        raise ValueError("KVStore with sparse weight requires optimizer support. However, type(kv) does "
                         "not support optimizer. Please consider other kvstore backends (e.g. dist_device) "
                         "instead.")
    return kv, True


class Trainer:
    """Updates `params` with `optimizer` (a name and `optimizer_params`, or an Optimizer)."""

    def __init__(self, params, optimizer, optimizer_params=None, kvstore="device", compression_params=None,
                 update_on_kvstore=None):
        if isinstance(params, (dict, ParameterDict)):
            params = [params[key] for key in sorted(list(params.keys()))]
        if not isinstance(params, (list, tuple)):
            raise ValueError(f"First argument must be a list or dict of Parameters, got {type(params)}.")
        self._params = []
        self._contains_sparse_weight = False
        self._contains_sparse_grad = False
        self._param2idx = {}
        for i, param in enumerate(params):
            if not isinstance(param, Parameter):
                raise ValueError(f"First argument must be a list or dict of Parameters, got list of "
                                 f"{type(param)}.")
            self._param2idx[param.name] = i
            self._params.append(param)
            param._set_trainer(self)
            if param._stype != "default":
                self._contains_sparse_weight = True
            if param._grad_stype != "default":
                self._contains_sparse_grad = True
        self._compression_params = compression_params
        self._contexts = self._check_contexts()
        optimizer_params = optimizer_params if optimizer_params else {}
        self._init_optimizer(optimizer, optimizer_params)
        self._scale = self._optimizer.rescale_grad
        if self._optimizer.aggregate_num > 1 and update_on_kvstore:
            raise ValueError("Cannot set update_on_kvstore=True when optimizer.aggregate_num > 1.")
        if update_on_kvstore is None and self._optimizer.aggregate_num > 1:
            update_on_kvstore = False
        self._kvstore_params = {"kvstore": kvstore, "update_on_kvstore": update_on_kvstore}
        self._kv_initialized = False
        self._kvstore = None
        self._update_on_kvstore = None
        self._distributed = None
        self._params_to_init = []
        self._scale_was_set = False
        self._reset_kvstore()
        if isinstance(kvstore, str) and "dist" in kvstore and all(
                p._data is not None for p in self._params if p.grad_req != "null"):
            self._init_kvstore()   # workers start from rank 0's values before their first forward
            self._init_params()

    def _check_contexts(self):
        contexts = None
        for param in self._params:
            try:
                ctx = param.list_ctx()
            except MXNetError:
                continue
            if contexts is not None and contexts != ctx:
                raise MXNetError(f"All Parameters must be initialized on the same set of contexts, but "
                                 f"Parameter {param.name} is initialized on {ctx} while previous "
                                 f"Parameters are initialized on {contexts}.")
            contexts = ctx
        return contexts

    def _init_optimizer(self, optimizer, optimizer_params):
        param_dict = {i: param for i, param in enumerate(self._params)}
        if isinstance(optimizer, opt.Optimizer):
            if optimizer_params:
                raise MXNetError("optimizer_params must be None if optimizer is an instance of Optimizer "
                                 "instead of str")
            self._optimizer = optimizer
            self._optimizer.param_dict = param_dict
        else:
            self._optimizer = opt.create(optimizer, param_dict=param_dict, **optimizer_params)
        n = len(self._contexts) if self._contexts else 1
        self._updaters = [opt.get_updater(self._optimizer) for _ in range(n)]

    def _ensure_updaters(self):
        """Contexts are known once deferred initialization has finished (after a forward)."""
        if self._contexts is None or len(self._updaters) != len(self._contexts):
            self._contexts = self._check_contexts()
            n = len(self._contexts) if self._contexts else 1
            while len(self._updaters) < n:
                self._updaters.append(opt.get_updater(self._optimizer))

    # ---- the KVStore ---------------------------------------------------------------------------
    def _reset_kvstore(self):
        """Forget the store: the next step creates it again from the Parameters' values."""
        if self._kvstore is not None and "dist" in self._kvstore.type:
            raise RuntimeError("Cannot reset distributed KVStore.")
        self._kv_initialized = False
        self._kvstore = None
        self._distributed = None
        self._update_on_kvstore = None
        self._params_to_init = list(self._params)

    def _init_kvstore(self):
        """Create the store and decide where the updates run (see the module docstring)."""
        self._ensure_updaters()
        config = self._kvstore_params
        n_ctx = len(self._contexts) if self._contexts else 1
        if self._contains_sparse_weight:
            kvstore, update_on_kvstore = _create_sparse_kvstore(config["kvstore"])
            self._distributed = "dist" in kvstore.type
            if config["update_on_kvstore"] is False:
                raise ValueError("Cannot set update_on_kvstore=False when sparse weights are present.")
        elif self._contains_sparse_grad:
            arg_arrays = {p.name: p.data(self._contexts[0]) for p in self._params}
            kvstore, _ = _create_kvstore(config["kvstore"], n_ctx, arg_arrays)
            self._distributed = "dist" in kvstore.type if kvstore else False
            update_on_kvstore = self._distributed
            if config["update_on_kvstore"] is not None:
                if config["update_on_kvstore"] is False and self._distributed:
                    raise ValueError("Cannot set update_on_kvstore=False on dist kvstore when sparse "
                                     "gradients are present.")
                update_on_kvstore = config["update_on_kvstore"]
        else:
            arg_arrays = {p.name: p.data(self._contexts[0]) for p in self._params}
            kvstore, update_on_kvstore = _create_kvstore(config["kvstore"], n_ctx, arg_arrays)
            self._distributed = "dist" in kvstore.type if kvstore else False
            if self._distributed and "async" in kvstore.type:
                update_on_kvstore = True
                if config["update_on_kvstore"] is False:
                    raise ValueError("Please set update_on_kvstore=True when training in async mode.")
            if config["update_on_kvstore"] is not None:
                update_on_kvstore = config["update_on_kvstore"]
            if update_on_kvstore and not kvstore.is_capable("optimizer"):
                if config["update_on_kvstore"]:
                    raise ValueError(f"Please set update_on_kvstore=False when training with "
                                     f"{type(kvstore)}")
                update_on_kvstore = False
        if kvstore:
            if self._compression_params:
                kvstore.set_gradient_compression(self._compression_params)
            if update_on_kvstore:
                kvstore.set_optimizer(self._optimizer)   # before init, for multi-precision
            self._kvstore = kvstore
            self._update_on_kvstore = update_on_kvstore
        else:
            self._kvstore = None
            self._update_on_kvstore = None
        self._kv_initialized = True

    def _init_params(self):
        """Put the initialized Parameters' values into the store (deferred ones wait)."""
        if not self._kv_initialized:
            raise MXNetError("Cannot initialize parameters in KVStore when KVStore is not initialized.")
        params_to_init = []
        if self._kvstore:
            for param in self._params_to_init:
                if param._deferred_init:
                    params_to_init.append(param)
                    continue
                arrays = param._check_and_get(param._data, list)
                idx = self._param2idx[param.name]
                if param._stype != "default" or not hasattr(self._kvstore, "broadcast"):
                    self._kvstore.init(idx, arrays[0])
                else:
                    self._kvstore.broadcast(idx, arrays[0], arrays)
        self._params_to_init = params_to_init

    def _prepare(self):
        if not self._kv_initialized:
            self._init_kvstore()
        if self._params_to_init:
            self._init_params()

    def _on_set_data(self, param):
        """Called when new values are loaded into `param`: a store that applies the updates holds
        the old values, so it is dropped and re-created at the next step (MXNet's rule)."""
        if self._kv_initialized and self._update_on_kvstore and param not in self._params_to_init:
            self._reset_kvstore()

    def _row_sparse_pull(self, parameter, out, row_id, full_idx=False):
        """Rows `row_id` of `parameter`'s value from the store into `out`."""
        self._prepare()
        idx = self._param2idx[parameter.name]
        if full_idx and "dist" not in self._kvstore.type:
            self._kvstore.pull(idx, out=out, priority=-idx, ignore_sparse=False)
        else:
            self._kvstore.row_sparse_pull(idx, out=out, row_ids=row_id, priority=-idx)

    # ---- learning rate -----------------------------------------------------------------------
    @property
    def learning_rate(self):
        if not isinstance(self._optimizer, opt.Optimizer):
            raise UserWarning("Optimizer has to be defined before its learning rate can be accessed.")
        return self._optimizer.learning_rate

    @property
    def optimizer(self):
        if isinstance(self._optimizer, opt.Optimizer):
            return self._optimizer
        raise UserWarning("Optimizer has not been initialized yet")

    def set_learning_rate(self, lr):
        if not isinstance(self._optimizer, opt.Optimizer):
            raise UserWarning("Optimizer has to be defined before its learning rate is mutated.")
        self._optimizer.set_learning_rate(lr)

    # ---- steps ------------------------------------------------------------------------------
    def step(self, batch_size, ignore_stale_grad=False):
        """One optimization step: gradients normalized by 1/batch_size, reduced, applied."""
        rescale_grad = self._scale / batch_size
        self._check_and_rescale_grad(rescale_grad)
        self._prepare()
        self._allreduce_grads()
        self._update(ignore_stale_grad)

    def _check_and_rescale_grad(self, scale):
        """Set the optimizer's gradient scale; a distributed store that applies the updates was
        given the optimizer at its first step, so a later change of batch size is refused (MXNet).
        A store created eagerly in `__init__` has not seen a step yet: its first step sets the scale."""
        if (self._update_on_kvstore and self._distributed and self._kv_initialized
                and self._scale_was_set):
            if self._optimizer.rescale_grad != scale:
                raise UserWarning("Possible change in the `batch_size` from previous `step` detected. "
                                  "Optimizer gradient normalizing factor will not change w.r.t new "
                                  "batch_size when update_on_kvstore=True and when distributed kvstore "
                                  "is used.")
        self._optimizer.rescale_grad = scale
        self._scale_was_set = True

    def allreduce_grads(self):
        """Reduce gradients over contexts without updating (for gradient clipping in between);
        call `update` afterwards. Not available when the store applies the updates."""
        self._prepare()
        if self._kvstore and self._update_on_kvstore:
            raise AssertionError("allreduce_grads() when parameters are updated on kvstore is not "
                                 "supported. Try setting `update_on_kvstore` to False when creating "
                                 "trainer.")
        self._allreduce_grads()

    def _allreduce_grads(self):
        kv = self._kvstore
        if not kv:
            return
        for i, param in enumerate(self._params):
            if param.grad_req == "null":
                continue
            grads = param.list_grad()
            if getattr(grads[0], "stype", "default") != "default":
                kv.push(i, grads, priority=-i)
                if param._stype == "default":
                    pull_list = param.list_data() if self._update_on_kvstore else grads
                    kv.pull(i, pull_list, priority=-i, ignore_sparse=self._distributed)
            elif self._update_on_kvstore:
                kv.pushpull(i, grads, out=param.list_data(), priority=-i)
            else:
                kv.pushpull(i, grads, priority=-i)

    def update(self, batch_size, ignore_stale_grad=False):
        """Apply the optimizer to already reduced gradients (after `allreduce_grads`)."""
        self._prepare()
        if self._kvstore and self._update_on_kvstore:
            raise AssertionError("update() when parameters are updated on kvstore is not supported. Try "
                                 "setting `update_on_kvstore` to False when creating trainer.")
        self._check_and_rescale_grad(self._scale / batch_size)
        self._update(ignore_stale_grad)

    def _update(self, ignore_stale_grad=False):
        loss_scaler = getattr(self, "_amp_loss_scaler", None)   # contrib.amp.init_trainer
        if loss_scaler is not None and loss_scaler.has_overflow(self._params):
            return   # skip the step on inf/NaN gradients
        self._ensure_updaters()
        updates = [[] for _ in self._updaters]
        is_fresh, set_fresh = autograd.is_fresh_grad, autograd.set_fresh_grad
        on_kv = bool(self._kvstore and self._update_on_kvstore)
        for i, param in enumerate(self._params):
            if param._grad_req == "null":
                continue
            datas = param._data
            if datas is None:
                datas = param._check_and_get(datas, list)   # raises: not initialized
            if not ignore_stale_grad:
                for data in datas:
                    if not is_fresh(data):
                        raise UserWarning(
                            f"Gradient of Parameter `{param.name}` on context {data.context} has not "
                            "been updated by backward since last `step`. This could mean a bug in your "
                            "model that made it only use a subset of the Parameters (Blocks) for this "
                            "iteration. If you are intentionally only using a subset, call step with "
                            "ignore_stale_grad=True to suppress this warning and skip updating of "
                            "Parameters with stale gradient")
            if on_kv:
                for arr in datas:
                    set_fresh(arr, False)
                continue
            grads = param._grad
            for upd, arr, grad in zip(updates, datas, grads if grads is not None else param.list_grad()):
                if not ignore_stale_grad or is_fresh(arr):
                    upd.append((i, grad, arr))
                    set_fresh(arr, False)
        for updater, upd in zip(self._updaters, updates):
            if upd:
                idx, g, w = zip(*upd)
                updater(list(idx), list(g), list(w))

    # ---- optimizer states --------------------------------------------------------------------
    def save_states(self, fname):
        """Write the optimizer and its states (pickled, as MXNet does) to `fname`."""
        self._prepare()
        if self._update_on_kvstore and self._params_to_init:
            raise MXNetError("Cannot save trainer states when some parameters are not yet initialized "
                             "in kvstore.")
        param_dict = self._optimizer.param_dict
        self._optimizer.param_dict = {}
        try:
            if self._update_on_kvstore:
                self._kvstore.save_optimizer_states(fname, dump_optimizer=True)
                return
            data = self._updaters[0].get_states(dump_optimizer=True)
        finally:
            self._optimizer.param_dict = param_dict
        with open(fname, "wb") as fout:
            fout.write(data)

    def load_states(self, fname):
        """Restore what `save_states` wrote (states are copied to every context)."""
        self._prepare()
        if self._update_on_kvstore:
            self._kvstore.load_optimizer_states(fname)
            self._optimizer = self._kvstore._updater.optimizer
            self._optimizer.param_dict = {i: param for i, param in enumerate(self._params)}
            return
        with open(fname, "rb") as f:
            states = f.read()
        try:
            pickle.loads(states)
        except Exception as e:  # noqa: BLE001 - a bad file must raise, not crash
            raise MXNetError(f"load_states: {fname!r} is not a Trainer states file: {e}") from None
        for updater in self._updaters:
            updater.set_states(states)
            updater.optimizer = self._updaters[0].optimizer
        self._optimizer = self._updaters[0].optimizer
        self._optimizer.param_dict = {i: param for i, param in enumerate(self._params)}
        if self._contexts:
            for updater, ctx in zip(self._updaters, self._contexts):
                updater.states = {k: updater.sync_state_context(v, ctx) for k, v in updater.states.items()}

