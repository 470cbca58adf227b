"""gluon.Trainer: applies an Optimizer to a set of Parameters (MXNet 1.x semantics).

`step(batch_size)` = rescale gradients by `rescale_grad / batch_size`, all-reduce them across
each Parameter's contexts, then update every context's copy of the weight with the optimizer
(one Updater, hence one set of optimizer states, per context, as MXNet with
update_on_kvstore=False). Gradients not written by a backward since the last step are
"stale" and raise UserWarning unless `ignore_stale_grad=True` (then those Parameters are
skipped).

Gradient aggregation: with `kvstore=None`, 'device' or 'local' (strings) and one context,
nothing is aggregated; with several contexts the gradients are summed in-process and the sum
is written back to every context. A KVStore object (anything with `pushpull` or
`push`/`pull`) given as `kvstore` is used for that reduction instead: `_reduce_grads` is the
single seam where the store is called.
"""
from __future__ import annotations

import pickle
import warnings

import numpy as np

from .. import autograd
from .. import optimizer as opt
from ..base import MXNetError
from .parameter import Parameter, ParameterDict

__all__ = ["Trainer"]

_KV_STRINGS = ("device", "local")


class Trainer:
    """Updates `params` with `optimizer` (a name and `optimizer_params`, or an Optimizer)."""

    def __init__(self, params, optimizer, optimizer_params=None, kvstore="device", compression_params=None,
                 update_on_kvstore=None):
        if isinstance(params, (dict, ParameterDict)):
            params = [params[key] for key in sorted(list(params.keys()))]
        if not isinstance(params, (list, tuple)):
            raise ValueError(f"First argument must be a list or dict of Parameters, got {type(params)}.")
        self._params = []
        self._param2idx = {}
        for i, param in enumerate(params):
            if not isinstance(param, Parameter):
                raise ValueError(f"First argument must be a list or dict of Parameters, got list of "
                                 f"{type(param)}.")
            self._param2idx[param.name] = i
            self._params.append(param)
            param._set_trainer(self)
        self._compression_params = compression_params
        if isinstance(kvstore, str) and kvstore not in _KV_STRINGS and not kvstore.startswith("dist"):
            raise ValueError(f"Unknown kvstore type {kvstore!r}; expected None, 'device', 'local' or a "
                             "KVStore")
        if isinstance(kvstore, str) and kvstore.startswith("dist"):
            from .. import kvstore as kv_mod
            kvstore = kv_mod.create(kvstore)  # a distributed store (MXNet updates on it by default)
            update_on_kvstore = True if update_on_kvstore is None else update_on_kvstore
        self._kvstore = None if isinstance(kvstore, str) or kvstore is None else kvstore
        if self._kvstore is not None and "async" in getattr(self._kvstore, "type", ""):
            if update_on_kvstore is False:
                raise ValueError("Please set update_on_kvstore=True when training in async mode.")
            update_on_kvstore = True
        if (update_on_kvstore and self._kvstore is not None and hasattr(self._kvstore, "is_capable")
                and not self._kvstore.is_capable("optimizer")):
            raise ValueError(f"Please set update_on_kvstore=False when training with "
                             f"{type(self._kvstore).__name__}")
        self._update_on_kvstore = bool(update_on_kvstore) and self._kvstore is not None
        self._kv_initialized = False
        self._contexts = self._check_contexts()
        optimizer_params = optimizer_params if optimizer_params else {}
        self._init_optimizer(optimizer, optimizer_params)
        self._scale = self._optimizer.rescale_grad
        if (self._kvstore is not None and "dist" in getattr(self._kvstore, "type", "")
                and all(p._data is not None for p in self._params if p.grad_req != "null")):
            self._init_kvstore()  # workers start from rank 0's values before their first forward

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

    def _on_set_data(self, param):
        """Called by Parameter.set_data. Weights live in the Parameters, except when a KVStore
        applies the updates: its copy, already initialized, keeps the old value (MXNet would
        re-initialize the store, which a user-given store refuses)."""
        if self._update_on_kvstore and self._kv_initialized and param.grad_req != "null":
            warnings.warn(f"Parameter '{param.name}' was set after its KVStore was initialized with "
                          "update_on_kvstore=True; the store keeps applying updates to the old value",
                          stacklevel=3)

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
        self._ensure_updaters()
        self._allreduce_grads()
        self._update(ignore_stale_grad)

    def _check_and_rescale_grad(self, scale):
        self._optimizer.rescale_grad = scale

    def allreduce_grads(self):
        """Reduce gradients over contexts without updating (for gradient clipping in between);
        call `update` afterwards."""
        self._ensure_updaters()
        self._allreduce_grads()

    def _allreduce_grads(self):
        for i, param in enumerate(self._params):
            if param.grad_req == "null":
                continue
            grads = param.list_grad()
            if len(grads) > 1 or self._kvstore is not None:
                self._reduce_grads(i, grads)

    def _init_kvstore(self):
        """Register every trainable weight with the KVStore (and the optimizer when the store
        applies the updates)."""
        kv = self._kvstore
        if self._compression_params:
            kv.set_gradient_compression(self._compression_params)
        for j, param in enumerate(self._params):
            if param.grad_req != "null":
                data = param.list_data()
                if hasattr(kv, "broadcast"):  # distributed stores: every worker starts from rank 0's
                    kv.broadcast(j, data[0], out=data)
                else:
                    kv.init(j, data[0])
        if self._update_on_kvstore:
            kv.set_optimizer(self._optimizer)
        self._kv_initialized = True

    def _reduce_grads(self, index, grads):
        """Sum `grads` (one per context) and write the sum into each: through the KVStore when one
        was given, else in-process. The one place a KVStore is used; when it applies the updates
        (update_on_kvstore) the gradients are pushed and the updated weights pulled."""
        kv = self._kvstore
        if kv is not None:
            if not self._kv_initialized:
                self._init_kvstore()
            if self._update_on_kvstore:
                kv.push(index, grads, priority=-index)
                kv.pull(index, self._params[index].list_data(), priority=-index)
            elif hasattr(kv, "pushpull"):
                kv.pushpull(index, grads, out=grads, priority=-index)
            else:
                kv.push(index, grads, priority=-index)
                kv.pull(index, grads, priority=-index)
            return
        total = np.array(grads[0]._data, copy=True)
        for g in grads[1:]:
            total += g._data
        for g in grads:
            g._data[...] = total

    def update(self, batch_size, ignore_stale_grad=False):
        """Apply the optimizer to already reduced gradients (after `allreduce_grads`)."""
        rescale_grad = self._scale / batch_size
        self._check_and_rescale_grad(rescale_grad)
        self._ensure_updaters()
        self._update(ignore_stale_grad)

    def _update(self, ignore_stale_grad=False):
        updates = [[] for _ in self._updaters]
        is_fresh, set_fresh = autograd.is_fresh_grad, autograd.set_fresh_grad
        for i, param in enumerate(self._params):
            if param.grad_req == "null":
                continue
            datas = param.list_data()
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
            if self._update_on_kvstore:
                for arr in datas:
                    set_fresh(arr, False)
                continue
            for upd, arr, grad in zip(updates, datas, param.list_grad()):
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
        self._ensure_updaters()
        if self._update_on_kvstore and not self._kv_initialized:
            self._init_kvstore()
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
        self._ensure_updaters()
        if self._update_on_kvstore:
            if not self._kv_initialized:
                self._init_kvstore()
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

