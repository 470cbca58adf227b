"""The Module API of MXNet 1.x: a Symbol with data/label names, bound to executors, trained
with an optimizer, and fit over data iterators.

With several contexts the batch is split along axis 0 across one executor per context;
gradients are summed over the executors (through the KVStore when one is given, else
directly) before one optimizer update per parameter, and the updated parameters are copied
back to every executor, so all replicas stay identical.
"""
from __future__ import annotations

import logging
import time
from collections import OrderedDict

import numpy as np

from .. import initializer as init_mod
from .. import metric as metric_mod
from .. import optimizer as opt_mod
from ..base import MXNetError
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

    def score(self, eval_data, eval_metric, num_batch=None, batch_end_callback=None, reset=True, epoch=0):
        if not (self.binded and self.params_initialized):
            raise MXNetError("score: call bind() and init_params() first")
        if reset:
            eval_data.reset()
        eval_metric = metric_mod.create(eval_metric)
        eval_metric.reset()
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.forward(batch, is_train=False)
            self.update_metric(eval_metric, batch.label)
            for cb in _as_list(batch_end_callback or []):
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

    def predict(self, eval_data, num_batch=None, merge_batches=True, reset=True, always_output_list=False):
        from .. import ndarray as nd
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
        for epoch in range(begin_epoch, num_epoch):
            tic = time.time()
            eval_metric.reset()
            train_data.reset()
            for nbatch, batch in enumerate(train_data):
                self.forward_backward(batch)
                self.update()
                self.update_metric(eval_metric, batch.label)
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
                                 epoch=epoch)
                for name, val in res:
                    self.logger.info("Epoch[%d] Validation-%s=%f", epoch, name, val)


class _BatchEndParam:
    def __init__(self, epoch, nbatch, eval_metric):
        self.epoch, self.nbatch, self.eval_metric, self.locals = epoch, nbatch, eval_metric, None


class Module(BaseModule):
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
        data_names = list(data_names) if data_names is not None else []
        label_names = list(label_names) if label_names is not None else []
        state_names = list(state_names) if state_names is not None else []
        fixed_param_names = list(fixed_param_names) if fixed_param_names is not None else []
        _check_input_names(symbol, data_names, "data", True)
        _check_input_names(symbol, label_names, "label", False)
        _check_input_names(symbol, state_names, "state", True)
        _check_input_names(symbol, fixed_param_names, "fixed_param", True)
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
        self._updater = None
        self._work_load_list = list(work_load_list) if work_load_list is not None else None
        self._exec_group = None
        self._execs = []
        self._data_shapes = None
        self._label_shapes = None
        self._grad_req = None

    # ---- properties ---------------------------------------------------------------------------
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

    @property
    def output_shapes(self):
        return [(n, o.shape) for n, o in zip(self._output_names, self._execs[0].outputs)]

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
        if self.params_initialized:
            self._push_params()

    def _build_executors(self, shared_group=None):
        from .executor_group import DataParallelExecutorGroup
        self._exec_group = DataParallelExecutorGroup(
            self._symbol, self._context, self._work_load_list, self._data_shapes, self._label_shapes,
            self._param_names, self.for_training, self.inputs_need_grad, shared_group=shared_group,
            logger=self.logger, fixed_param_names=self._fixed_param_names, grad_req=self._grad_req,
            state_names=self._state_names)
        self._execs = self._exec_group.execs

    def reshape(self, data_shapes, label_shapes=None):
        if not self.binded:
            raise MXNetError("reshape: call bind() first")
        self._data_shapes = _parse_shapes(data_shapes)
        if label_shapes is not None:
            self._label_shapes = [d for d in _parse_shapes(label_shapes) if d.name in self._label_names]
        arg, aux = (self.get_params() if self.params_initialized else (None, None))
        self._build_executors()
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

        self._arg_params = OrderedDict((n, nd.zeros(ex.arg_dict[n].shape, cpu(), ex.arg_dict[n].dtype))
                                       for n in self._param_names)
        self._aux_params = OrderedDict((n, nd.zeros(ex.aux_dict[n].shape, cpu(), ex.aux_dict[n].dtype))
                                       for n in self._aux_names)
        for name, arr in self._arg_params.items():
            fill(name, arr, arg_params)
        for name, arr in self._aux_params.items():
            fill(name, arr, aux_params)
        if not allow_extra:
            for table, known in ((arg_params, self._arg_params), (aux_params, self._aux_params)):
                extra = [k for k in (table or {}) if k not in known]
                if extra:
                    raise MXNetError(f"init_params: parameters {extra} are not in the symbol "
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
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring...")
            return
        if not (self.binded and self.params_initialized):
            raise MXNetError("init_optimizer: call bind() and init_params() first")
        batch_size = self._data_shapes[0].shape[0] if self._data_shapes else 1
        idx2name = {i: n for i, n in enumerate(self._param_names)}
        if isinstance(optimizer, str):
            params = dict(optimizer_params)
            params.setdefault("rescale_grad", 1.0 / batch_size)
            optimizer = opt_mod.create(optimizer, sym=self._symbol, param_idx2name=idx2name, **params)
        elif not isinstance(optimizer, opt_mod.Optimizer):
            raise MXNetError("init_optimizer: optimizer must be a name or an Optimizer")
        self._optimizer = optimizer
        self._kvstore = self._create_kvstore(kvstore)
        self._updater = opt_mod.get_updater(optimizer)
        if self._kvstore is not None:
            for i, name in enumerate(self._param_names):
                self._kvstore.init(i, self._arg_params[name])
            if "dist" in getattr(self._kvstore, "type", ""):  # every worker starts from rank 0's weights
                for i, name in enumerate(self._param_names):
                    self._kvstore.pull(i, out=self._arg_params[name])
                self._push_params()
        self.optimizer_initialized = True

    def _create_kvstore(self, kvstore):
        """A KVStore only when gradients must be aggregated over several devices or processes."""
        if kvstore is None:
            return None
        if not isinstance(kvstore, str):
            return kvstore
        if len(self._context) == 1 and not kvstore.startswith("dist"):
            return None
        try:
            from .. import kvstore as kv_mod
        except ImportError:
            return None
        return kv_mod.create(kvstore)

    def update(self):
        if not (self.binded and self.params_initialized and self.optimizer_initialized):
            raise MXNetError("update: call bind(), init_params() and init_optimizer() first")
        from ..ndarray import NDArray
        for i, name in enumerate(self._param_names):
            grads = [ex.grad_dict.get(name) for ex in self._execs]
            if any(g is None for g in grads):
                continue
            weight = self._execs[0].arg_dict[name]
            if self._kvstore is not None:
                self._kvstore.push(i, grads)
                total = NDArray(np.zeros(grads[0].shape, grads[0]._data.dtype), weight.context)
                self._kvstore.pull(i, out=total)
            else:
                total = grads[0] if len(grads) == 1 else NDArray(
                    sum(g._data for g in grads), weight.context)
            self._updater(i, total, weight)
            for ex in self._execs[1:]:
                ex.arg_dict[name][:] = weight

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

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        self._exec_group.update_metric(eval_metric, labels, pre_sliced)

    # ---- checkpoints --------------------------------------------------------------------------------
    def save_checkpoint(self, prefix, epoch, save_optimizer_states=False, remove_amp_cast=True):
        self._symbol.save(f"{prefix}-symbol.json")
        self.save_params(f"{prefix}-{epoch:04d}.params")
        if save_optimizer_states:
            self.save_optimizer_states(f"{prefix}-{epoch:04d}.states")

    def save_optimizer_states(self, fname):
        if not self.optimizer_initialized:
            raise MXNetError("save_optimizer_states: call init_optimizer() first")
        with open(fname, "wb") as f:
            f.write(self._updater.get_states())

    def load_optimizer_states(self, fname):
        if not self.optimizer_initialized:
            raise MXNetError("load_optimizer_states: call init_optimizer() first")
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
    nd.save(f"{prefix}-{epoch:04d}.params", save)


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

