"""The Module API of MXNet 1.x: a Symbol with data/label names, bound to executors, trained
with an optimizer, and fit over data iterators.

With several contexts the batch is split along axis 0 across one executor per context;
gradients are summed over the executors (through the KVStore when one is given, else
directly) before one optimizer update per parameter, and the updated parameters are copied
back to every executor, so all replicas stay identical.
"""
from __future__ import annotations

import logging
import warnings
import time
from collections import OrderedDict

import numpy as np

from .. import initializer as init_mod
from .. import metric as metric_mod
from .. import optimizer as opt_mod
from ..base import MXNetError, MXNetValueError
from ..context import Context, cpu
from ..io import DataDesc

__all__ = ["BaseModule", "Module", "save_checkpoint", "load_checkpoint"]


def _as_list(obj):
    return list(obj) if isinstance(obj, (list, tuple)) else [obj]


def _check_input_names(symbol, names, typename, throw):
    args = symbol.list_arguments()
    for name in names:
        if name in args:
            continue
        candidates = [arg for arg in args if not arg.endswith(("_weight", "_bias", "_gamma", "_beta"))]
        msg = (f"You created Module with Module(..., {typename}_names={names}) but input with name "
               f"'{name}' is not found in symbol.list_arguments(). Did you mean one of:\n\t"
               + "\n\t".join(candidates))
        if throw:
            raise ValueError(msg)
        logging.warning(msg)


def _checked_names(symbol, data_names, label_names, state_names, fixed_param_names):
    """The four name lists as lists (None: empty), checked against the symbol's arguments
    (unknown data, state and fixed names raise ValueError, unknown labels only warn)."""
    lists = [list(n) if n is not None else [] for n in (data_names, label_names, state_names,
                                                         fixed_param_names)]
    for names, kind, throw in zip(lists, ("data", "label", "state", "fixed_param"), (True, False, True, True)):
        _check_input_names(symbol, names, kind, throw)
    return lists


def _parse_shapes(shapes):
    if shapes is None:
        return []
    out = []
    for s in shapes:
        out.append(s if isinstance(s, DataDesc) else DataDesc(s[0], s[1]))
    return out


class BaseModule:
    """Training loop helpers shared by modules: fit, score, predict, iter_predict."""

    def __init__(self, logger=logging):
        self.logger = logger
        self.binded = False
        self.for_training = False
        self.inputs_need_grad = False
        self.params_initialized = False
        self.optimizer_initialized = False
        self._symbol = None

    @property
    def symbol(self):
        return self._symbol

    def forward_backward(self, data_batch):
        self.forward(data_batch, is_train=True)
        self.backward()

    def score(self, eval_data, eval_metric, num_batch=None, batch_end_callback=None, score_end_callback=None,
              reset=True, epoch=0):
        if not (self.binded and self.params_initialized):
            raise MXNetError("score: call bind() and init_params() first")
        if reset:
            eval_data.reset()
        eval_metric = metric_mod.create(eval_metric)
        eval_metric.reset()
        nbatch = 0
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.forward(batch, is_train=False)
            self.update_metric(eval_metric, batch.label)
            for cb in _as_list(batch_end_callback or []):
                cb(_BatchEndParam(epoch, nbatch, eval_metric))
        for cb in _as_list(score_end_callback or []):
            cb(_BatchEndParam(epoch, nbatch, eval_metric))
        return eval_metric.get_name_value()

    def iter_predict(self, eval_data, num_batch=None, reset=True):
        if reset:
            eval_data.reset()
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.forward(batch, is_train=False)
            pad = batch.pad or 0
            outputs = [out[0:out.shape[0] - pad] for out in self.get_outputs()]
            yield outputs, nbatch, batch

    def predict(self, eval_data, num_batch=None, merge_batches=True, reset=True, always_output_list=False,
                sparse_row_id_fn=None):
        """Outputs over `eval_data`: a DataIter (merged over batches unless told otherwise), or one
        NDArray / numpy array taken as a single batch (its first output is returned)."""
        from .. import ndarray as nd
        from ..io import DataBatch
        if isinstance(eval_data, (nd.NDArray, np.ndarray)):
            if isinstance(eval_data, np.ndarray):
                eval_data = nd.array(eval_data)
            self.forward(DataBatch([eval_data]))
            return self.get_outputs()[0]
        outputs = [[o.copy() for o in outs] for outs, _, _ in self.iter_predict(eval_data, num_batch, reset)]
        if not outputs:
            return []
        if merge_batches:
            merged = [nd.concatenate([b[i] for b in outputs]) for i in range(len(outputs[0]))]
            return merged[0] if len(merged) == 1 and not always_output_list else merged
        return outputs

    def fit(self, train_data, eval_data=None, eval_metric="acc", epoch_end_callback=None,
            batch_end_callback=None, kvstore="local", optimizer="sgd",
            optimizer_params=(("learning_rate", 0.01),), eval_end_callback=None,
            eval_batch_end_callback=None, initializer=init_mod.Uniform(0.01), arg_params=None,
            aux_params=None, allow_missing=False, force_rebind=False, force_init=False, begin_epoch=0,
            num_epoch=None, validation_metric=None, monitor=None, sparse_row_id_fn=None):
        if num_epoch is None:
            raise MXNetError("fit: please specify num_epoch")
        self.bind(data_shapes=train_data.provide_data, label_shapes=train_data.provide_label,
                  for_training=True, force_rebind=force_rebind)
        self.init_params(initializer=initializer, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init)
        self.init_optimizer(kvstore=kvstore, optimizer=optimizer, optimizer_params=optimizer_params)
        validation_metric = validation_metric or eval_metric
        eval_metric = metric_mod.create(eval_metric)
        if monitor is not None:
            self.install_monitor(monitor)
        for epoch in range(begin_epoch, num_epoch):
            tic = time.time()
            eval_metric.reset()
            train_data.reset()
            for nbatch, batch in enumerate(train_data):
                if monitor is not None:
                    monitor.tic()
                self.forward_backward(batch)
                self.update()
                self.update_metric(eval_metric, batch.label)
                if monitor is not None:
                    monitor.toc_print()
                for cb in _as_list(batch_end_callback or []):
                    cb(_BatchEndParam(epoch, nbatch, eval_metric))
            for name, val in eval_metric.get_name_value():
                self.logger.info("Epoch[%d] Train-%s=%f", epoch, name, val)
            self.logger.info("Epoch[%d] Time cost=%.3f", epoch, time.time() - tic)
            arg_params, aux_params = self.get_params()
            for cb in _as_list(epoch_end_callback or []):
                cb(epoch, self.symbol, arg_params, aux_params)
            if eval_data is not None:
                res = self.score(eval_data, validation_metric, batch_end_callback=eval_batch_end_callback,
                                 score_end_callback=eval_end_callback, epoch=epoch)
                for name, val in res:
                    self.logger.info("Epoch[%d] Validation-%s=%f", epoch, name, val)


class _BatchEndParam:
    def __init__(self, epoch, nbatch, eval_metric):
        self.epoch, self.nbatch, self.eval_metric, self.locals = epoch, nbatch, eval_metric, None


class StoredNamesAndShapes:
    """The names and shapes properties of a module that keeps them in `_data_names`,
    `_label_names`, `_output_names`, `_data_shapes` and `_label_shapes`."""

    @property
    def data_names(self):
        return self._data_names

    @property
    def label_names(self):
        return self._label_names

    @property
    def output_names(self):
        return self._output_names

    @property
    def data_shapes(self):
        return self._data_shapes

    @property
    def label_shapes(self):
        return self._label_shapes


class Module(StoredNamesAndShapes, BaseModule):
    """A symbol bound for training or inference on one or several contexts."""

    def __init__(self, symbol, data_names=("data",), label_names=("softmax_label",), logger=logging,
                 context=None, work_load_list=None, fixed_param_names=None, state_names=None,
                 group2ctxs=None, compression_params=None):
        super().__init__(logger)
        context = context if context is not None else cpu()
        self._context = _as_list(context)
        for c in self._context:
            if not isinstance(c, Context):
                raise MXNetError(f"Module: context must be a Context or a list of them, got {c!r}")
        self._symbol = symbol
        data_names, label_names, state_names, fixed_param_names = _checked_names(
            symbol, data_names, label_names, state_names, fixed_param_names)
        arg_names = symbol.list_arguments()
        input_names = data_names + label_names + state_names
        self._param_names = [x for x in arg_names if x not in input_names]
        self._fixed_param_names = fixed_param_names
        self._aux_names = symbol.list_auxiliary_states()
        self._data_names = data_names
        self._label_names = [n for n in label_names if n in arg_names]
        self._state_names = state_names
        self._output_names = symbol.list_outputs()
        self._arg_params = None
        self._aux_params = None
        self._optimizer = None
        self._kvstore = None
        self._update_on_kvstore = None
        self._updater = None
        self._compression_params = compression_params
        self._group2ctxs = group2ctxs
        self._preload_opt_states = None
        self._work_load_list = list(work_load_list) if work_load_list is not None else None
        self._exec_group = None
        self._execs = []
        self._data_shapes = None
        self._label_shapes = None
        self._grad_req = None

    # ---- properties ---------------------------------------------------------------------------
    @property
    def output_shapes(self):
        return [(n, o.shape) for n, o in zip(self._output_names, self._execs[0].outputs)]

    @property
    def _total_exec_bytes(self) -> int:
        """The memory the bound executors allocated, as MXNet reports it (see the executor group)."""
        return self._exec_group._total_exec_bytes

    # ---- binding --------------------------------------------------------------------------------
    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req="write"):
        if self.binded and not force_rebind:
            self.logger.warning("Already bound, ignoring bind()")
            return
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._data_shapes = _parse_shapes(data_shapes)
        self._label_shapes = _parse_shapes(label_shapes) if label_shapes is not None else None
        if self._label_shapes is not None:
            self._label_shapes = [d for d in self._label_shapes if d.name in self._label_names]
        self._grad_req = grad_req
        shared_group = None
        if shared_module is not None:
            if not (shared_module.binded and shared_module.params_initialized):
                raise MXNetError("bind: shared_module must be bound and initialized")
            shared_group = shared_module._exec_group
        self._build_executors(shared_group)
        self.binded = True
        if shared_module is not None:
            # the executors share the shared module's parameter arrays, which hold the current
            # values (its `_arg_params` copies may be older): nothing to copy (MXNet)
            self.params_initialized = True
            self._arg_params = shared_module._arg_params
            self._aux_params = shared_module._aux_params
        elif self.params_initialized:
            self._push_params()

    def _build_executors(self, shared_group=None):
        from .executor_group import DataParallelExecutorGroup
        self._exec_group = DataParallelExecutorGroup(
            self._symbol, self._context, self._work_load_list, self._data_shapes, self._label_shapes,
            self._param_names, self.for_training, self.inputs_need_grad, shared_group=shared_group,
            logger=self.logger, fixed_param_names=self._fixed_param_names, grad_req=self._grad_req,
            state_names=self._state_names, group2ctxs=self._group2ctxs)
        self._execs = self._exec_group.execs

    def reshape(self, data_shapes, label_shapes=None):
        if not self.binded:
            raise MXNetError("reshape: call bind() first")
        self._data_shapes = _parse_shapes(data_shapes)
        if label_shapes is not None:
            self._label_shapes = [d for d in _parse_shapes(label_shapes) if d.name in self._label_names]
        arg, aux = (self.get_params() if self.params_initialized else (None, None))
        before = self._exec_group.execs
        self._build_executors()
        for old, new in zip(before, self._exec_group.execs):   # reshaped executors keep their monitor (MXNet)
            if old._monitor is not None:
                new.set_monitor_callback(*old._monitor)
        if self.params_initialized:
            self._arg_params, self._aux_params = arg, aux
            self._push_params()

    # ---- parameters -----------------------------------------------------------------------------
    def init_params(self, initializer=init_mod.Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        if self.params_initialized and not force_init:
            self.logger.warning("Parameters already initialized and force_init=False. init_params call ignored.")
            return
        if not self.binded:
            raise MXNetError("init_params: call bind() before initializing the parameters")
        from .. import ndarray as nd
        ex = self._execs[0]
        attrs = self._symbol.attr_dict()

        def fill(name, arr, cache):
            if cache is not None and name in cache:
                src = cache[name]
                if src is not arr:
                    if tuple(src.shape) != arr.shape:
                        raise MXNetError(f"init_params: {name} has shape {tuple(src.shape)}, expected {arr.shape}")
                    arr[:] = src
            elif cache is not None and not allow_missing:
                raise MXNetError(f"init_params: {name} is not presented")
            elif initializer is not None:
                initializer(init_mod.InitDesc(name, attrs.get(name, {})), arr)

        def like(a):   # MXNet keeps the parameters in their executors' storage types
            return nd.zeros(a.shape, cpu(), a.dtype, stype=a.stype)
        self._arg_params = OrderedDict((n, like(ex.arg_dict[n])) for n in self._param_names)
        self._aux_params = OrderedDict((n, like(ex.aux_dict[n])) for n in self._aux_names)
        for name, arr in self._arg_params.items():
            fill(name, arr, arg_params)
        for name, arr in self._aux_params.items():
            fill(name, arr, aux_params)
        if not allow_extra:
            for table, known in ((arg_params, self._arg_params), (aux_params, self._aux_params)):
                extra = [k for k in (table or {}) if k not in known]
                if extra:   # MXNet: ValueError from the executors' copy_params_from
                    raise MXNetValueError(f"init_params: parameters {extra} are not in the symbol "
                                          "(pass allow_extra=True to ignore them)")
        self.params_initialized = True
        self._push_params()

    def _push_params(self):
        for ex in self._execs:
            ex.copy_params_from(self._arg_params, self._aux_params, allow_extra_params=True)

    def _pull_params(self):
        ex = self._execs[0]
        for name, arr in self._arg_params.items():
            arr[:] = ex.arg_dict[name]
        for name, arr in self._aux_params.items():
            arr[:] = sum(e.aux_dict[name].asnumpy() for e in self._execs) / len(self._execs)

    def get_params(self):
        if not (self.binded and self.params_initialized):
            raise MXNetError("get_params: call bind() and init_params() first")
        self._pull_params()
        return (OrderedDict((k, v.copy()) for k, v in self._arg_params.items()),
                OrderedDict((k, v.copy()) for k, v in self._aux_params.items()))

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True, allow_extra=False):
        self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init, allow_extra=allow_extra)

    def save_params(self, fname):
        from .. import ndarray as nd
        arg, aux = self.get_params()
        save = {f"arg:{k}": v for k, v in arg.items()}
        save.update({f"aux:{k}": v for k, v in aux.items()})
        nd.save(fname, save)

    def load_params(self, fname):
        from .. import ndarray as nd
        arg, aux = {}, {}
        for k, v in nd.load(fname).items():
            kind, name = k.split(":", 1)
            if kind == "arg":
                arg[name] = v
            elif kind == "aux":
                aux[name] = v
            else:
                raise MXNetError(f"load_params: invalid key {k!r} in {fname}")
        self.set_params(arg, aux)

    # ---- optimizer ------------------------------------------------------------------------------
    def init_optimizer(self, kvstore="local", optimizer="sgd", optimizer_params=(("learning_rate", 0.01),),
                       force_init=False):
        """Create the optimizer and, by MXNet's rules (`_create_kvstore`), the KVStore: with several
        devices (or a distributed store) the store aggregates the gradients and, when it can,
        applies the optimizer itself (`_update_on_kvstore`); otherwise one Updater applies it,
        with index i * num_devices + k for parameter i on device k."""
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring...")
            return
        if not (self.binded and self.params_initialized):
            raise MXNetError("init_optimizer: call bind() and init_params() first")
        from ..gluon.trainer import _create_kvstore
        self._pull_params()
        kv, update_on_kvstore = _create_kvstore(kvstore, len(self._context), self._arg_params)
        batch_size = self._exec_group.batch_size
        if kv and "dist" in kv.type and "_sync" in kv.type:
            batch_size *= kv.num_workers
        rescale_grad = 1.0 / batch_size
        names = self._exec_group.param_names
        idx2name = {}
        if update_on_kvstore:
            idx2name.update(enumerate(names))
        else:
            for k in range(len(self._context)):
                idx2name.update({i * len(self._context) + k: n for i, n in enumerate(names)})
        if isinstance(optimizer, str):
            params = dict(optimizer_params)
            params.setdefault("rescale_grad", rescale_grad)
            optimizer = opt_mod.create(optimizer, sym=self._symbol, param_idx2name=idx2name, **params)
        elif isinstance(optimizer, opt_mod.Optimizer):
            if optimizer.rescale_grad != rescale_grad:
                warnings.warn(f"Optimizer created manually outside Module but rescale_grad is not "
                              f"normalized to 1.0/batch_size/num_workers ({optimizer.rescale_grad} vs. "
                              f"{rescale_grad}). Is this intended?", stacklevel=2)
            if not optimizer.idx2name:
                optimizer.idx2name = idx2name.copy()
        else:
            raise MXNetError("init_optimizer: optimizer must be a name or an Optimizer")
        self._optimizer = optimizer
        self._kvstore = kv
        self._update_on_kvstore = update_on_kvstore
        self._updater = None
        if kv:
            if self._compression_params:
                kv.set_gradient_compression(self._compression_params)
            if update_on_kvstore:
                kv.set_optimizer(self._optimizer)
            for i, name in enumerate(names):   # every device (and worker) starts from these values
                arrays = [ex.arg_dict[name] for ex in self._execs]
                if update_on_kvstore and hasattr(kv, "broadcast"):
                    kv.broadcast(i, self._arg_params[name], out=arrays)
                else:
                    kv.init(i, self._arg_params[name])
        if not update_on_kvstore:
            self._updater = opt_mod.get_updater(optimizer)
        self.optimizer_initialized = True
        preload = getattr(self, "_preload_opt_states", None)
        if preload is not None:
            self.load_optimizer_states(preload)
            self._preload_opt_states = None

    def update(self):
        """Apply the optimizer to the gradients of the last backward (summed over devices)."""
        if not (self.binded and self.params_initialized and self.optimizer_initialized):
            raise MXNetError("update: call bind(), init_params() and init_optimizer() first")
        kv = self._kvstore
        n_dev = len(self._context)
        for i, name in enumerate(self._exec_group.param_names):
            grads = [ex.grad_dict.get(name) for ex in self._execs]
            if any(g is None for g in grads):
                continue
            weights = [ex.arg_dict[name] for ex in self._execs]
            if self._update_on_kvstore:
                kv.pushpull(i, grads, out=weights, priority=-i)
                continue
            if kv:
                kv.pushpull(i, grads, priority=-i)
            for k, (w, g) in enumerate(zip(weights, grads)):
                self._updater(i * n_dev + k, g, w)

    # ---- execution --------------------------------------------------------------------------------
    def forward(self, data_batch, is_train=None):
        if not (self.binded and self.params_initialized):
            raise MXNetError("forward: call bind() and init_params() first")
        is_train = self.for_training if is_train is None else is_train
        data = _as_list(data_batch.data)
        shapes = [(n, tuple(d.shape)) for n, d in zip(self._data_names, data)]
        if shapes != [(d.name, tuple(d.shape)) for d in self._data_shapes]:
            label = getattr(data_batch, "label", None)
            lshapes = ([(n, tuple(l.shape)) for n, l in zip(self._label_names, label)]
                       if label and self._label_names else None)
            self.reshape(shapes, lshapes)
        self._exec_group.forward(data_batch, is_train)

    def backward(self, out_grads=None):
        if not (self.binded and self.params_initialized):
            raise MXNetError("backward: call bind() and init_params() first")
        self._exec_group.backward(out_grads)

    def get_outputs(self, merge_multi_context=True):
        return self._exec_group.get_outputs(merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        return self._exec_group.get_input_grads(merge_multi_context)

    def install_monitor(self, mon):
        """Install the Monitor `mon` on every executor of the module."""
        if not self.binded:
            raise MXNetError("install_monitor: call bind() first")
        for exe in self._exec_group.execs:
            mon.install(exe)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        self._exec_group.update_metric(eval_metric, labels, pre_sliced)

    # ---- states, shared optimizers (BucketingModule) ---------------------------------------------------
    def get_states(self, merge_multi_context=True):
        """The values of the `state_names` inputs (per context unless merged)."""
        if not (self.binded and self.params_initialized):
            raise MXNetError("get_states: call bind() and init_params() first")
        return self._exec_group.get_states(merge_multi_context=merge_multi_context)

    def set_states(self, states=None, value=None):
        """Set the `state_names` inputs from `states` (as get_states(False) returns) or to `value`."""
        if not (self.binded and self.params_initialized):
            raise MXNetError("set_states: call bind() and init_params() first")
        self._exec_group.set_states(states, value)

    def borrow_optimizer(self, shared_module):
        """Use `shared_module`'s optimizer, KVStore and updater (one optimizer state for all the
        modules of a BucketingModule)."""
        if not shared_module.optimizer_initialized:
            raise MXNetError("borrow_optimizer: the shared module has no optimizer yet")
        self._optimizer = shared_module._optimizer
        self._kvstore = shared_module._kvstore
        self._update_on_kvstore = shared_module._update_on_kvstore
        self._updater = shared_module._updater
        self.optimizer_initialized = True

    def prepare(self, data_batch, sparse_row_id_fn=None):
        """Get ready for `data_batch` (MXNet pulls row_sparse parameters here; dense parameters
        are always up to date)."""
        if not self.binded:
            raise MXNetError("prepare: call bind() first")

    # ---- checkpoints --------------------------------------------------------------------------------
    def save_checkpoint(self, prefix, epoch, save_optimizer_states=False, remove_amp_cast=True):
        self._symbol.save(f"{prefix}-symbol.json")
        param_name = f"{prefix}-{epoch:04d}.params"
        self.save_params(param_name)
        logging.info('Saved checkpoint to "%s"', param_name)
        if save_optimizer_states:
            state_name = f"{prefix}-{epoch:04d}.states"
            self.save_optimizer_states(state_name)
            logging.info('Saved optimizer state to "%s"', state_name)

    def save_optimizer_states(self, fname):
        """Write the optimizer states (the store's when it applies the updates) to `fname`."""
        if not self.optimizer_initialized:
            raise MXNetError("save_optimizer_states: call init_optimizer() first")
        if self._update_on_kvstore:
            self._kvstore.save_optimizer_states(fname)
            return
        with open(fname, "wb") as f:
            f.write(self._updater.get_states())

    def load_optimizer_states(self, fname):
        """Restore what `save_optimizer_states` wrote."""
        if not self.optimizer_initialized:
            raise MXNetError("load_optimizer_states: call init_optimizer() first")
        if self._update_on_kvstore:
            self._kvstore.load_optimizer_states(fname)
            return
        with open(fname, "rb") as f:
            self._updater.set_states(f.read())

    @staticmethod
    def load(prefix, epoch, load_optimizer_states=False, **kwargs):
        sym, args, auxs = load_checkpoint(prefix, epoch)
        mod = Module(symbol=sym, **kwargs)
        mod._arg_params, mod._aux_params = args, auxs
        mod.params_initialized = True
        mod._preload = (args, auxs)
        if load_optimizer_states:
            mod._preload_opt_states = f"{prefix}-{epoch:04d}.states"
        return mod


def save_checkpoint(prefix, epoch, symbol, arg_params, aux_params, remove_amp_cast=True):
    """Write `prefix-symbol.json` and `prefix-EPOCH.params` (MXNet's model.save_checkpoint)."""
    from .. import ndarray as nd
    if symbol is not None:
        symbol.save(f"{prefix}-symbol.json")
    save = {f"arg:{k}": v for k, v in arg_params.items()}
    save.update({f"aux:{k}": v for k, v in aux_params.items()})
    param_name = f"{prefix}-{epoch:04d}.params"
    nd.save(param_name, save)
    logging.info('Saved checkpoint to "%s"', param_name)


def load_checkpoint(prefix, epoch):
    """Read what `save_checkpoint` wrote: (symbol, arg_params, aux_params)."""
    from .. import ndarray as nd
    from .. import symbol as sym_mod
    symbol = sym_mod.load(f"{prefix}-symbol.json")
    arg, aux = {}, {}
    for k, v in nd.load(f"{prefix}-{epoch:04d}.params").items():
        kind, name = k.split(":", 1)
        (arg if kind == "arg" else aux)[name] = v
    return symbol, arg, aux

