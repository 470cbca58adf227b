"""BucketingModule (`mx.mod.BucketingModule`): one Module per bucket key, all sharing the
parameters (and optimizer) of the default bucket's module.

`sym_gen(bucket_key)` returns (symbol, data_names, label_names). A batch's `bucket_key` selects
(creating on first use) the module it runs on; modules of other keys are bound with the
default bucket's module as `shared_module`, so they update the same parameter arrays."""
from __future__ import annotations

import logging
import warnings

import numpy as np

from .. import initializer as init_mod
from ..base import MXNetError
from ..context import cpu
from .module import BaseModule, Module, _check_input_names

__all__ = ["BucketingModule"]


def _batch_shapes(data_batch, names, arrays):
    """provide_data / provide_label of a batch, or shapes of its arrays under `names`."""
    if arrays is None:
        return None
    return [(n, tuple(a.shape)) for n, a in zip(names, arrays)]


class BucketingModule(BaseModule):
    """Modules per bucket key over symbols from `sym_gen`, parameters shared."""

    def __init__(self, sym_gen, default_bucket_key=None, logger=logging, context=cpu(), work_load_list=None,
                 fixed_param_names=None, state_names=None, group2ctxs=None, compression_params=None):
        super().__init__(logger=logger)
        if default_bucket_key is None:
            raise MXNetError("BucketingModule: default_bucket_key must be given")
        self._default_bucket_key = default_bucket_key
        self._sym_gen = sym_gen
        symbol, data_names, label_names = sym_gen(default_bucket_key)
        data_names = list(data_names) if data_names is not None else []
        label_names = list(label_names) if label_names is not None else []
        state_names = list(state_names) if state_names is not None else []
        fixed_param_names = list(fixed_param_names) if fixed_param_names is not None else []
        _check_input_names(symbol, data_names, "data", True)
        _check_input_names(symbol, label_names, "label", False)
        _check_input_names(symbol, state_names, "state", True)
        _check_input_names(symbol, fixed_param_names, "fixed_param", True)
        self._compression_params = compression_params
        self._fixed_param_names = fixed_param_names
        self._state_names = state_names
        self._context = context
        self._work_load_list = work_load_list
        self._group2ctxs = group2ctxs
        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None
        self._params_dirty = False
        self._monitor = None
        self._grad_req = None
        self._preload = None   # (arg_params, aux_params) of `load`, set at bind

    def _reset_bind(self):
        self.binded = False
        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None

    def _new_module(self, bucket_key):
        symbol, data_names, label_names = self._sym_gen(bucket_key)
        return Module(symbol, data_names, label_names, logger=self.logger, context=self._context,
                      work_load_list=self._work_load_list, fixed_param_names=self._fixed_param_names,
                      state_names=self._state_names, group2ctxs=self._group2ctxs,
                      compression_params=self._compression_params)

    # ---- properties ---------------------------------------------------------------------------
    @property
    def data_names(self):
        if self.binded:
            return self._curr_module.data_names
        return self._sym_gen(self._default_bucket_key)[1]

    @property
    def output_names(self):
        if self.binded:
            return self._curr_module.output_names
        return self._sym_gen(self._default_bucket_key)[0].list_outputs()

    def _bound(self, what):
        if not self.binded:
            raise MXNetError(f"BucketingModule.{what}: call bind() first")
        return self._curr_module

    @property
    def data_shapes(self):
        return self._bound("data_shapes").data_shapes

    @property
    def label_shapes(self):
        return self._bound("label_shapes").label_shapes

    @property
    def output_shapes(self):
        return self._bound("output_shapes").output_shapes

    @property
    def symbol(self):
        return self._bound("symbol").symbol

    # ---- parameters ---------------------------------------------------------------------------
    def get_params(self):
        if not (self.binded and self.params_initialized):
            raise MXNetError("get_params: call bind() and init_params() first")
        params = self._curr_module.get_params()
        self._params_dirty = False
        return params

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True, allow_extra=False):
        if not allow_missing:
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             allow_missing=allow_missing, force_init=force_init, allow_extra=allow_extra)
            return
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. set_params call ignored.",
                          stacklevel=2)
            return
        self._curr_module.set_params(arg_params, aux_params, allow_missing=allow_missing, force_init=force_init,
                                     allow_extra=allow_extra)
        self._params_dirty = True
        self.params_initialized = True

    def init_params(self, initializer=init_mod.Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        if self.params_initialized and not force_init:
            return
        self._bound("init_params").init_params(initializer=initializer, arg_params=arg_params,
                                               aux_params=aux_params, allow_missing=allow_missing,
                                               force_init=force_init, allow_extra=allow_extra)
        self._params_dirty = False
        self.params_initialized = True

    def save_params(self, fname):
        self._curr_module.save_params(fname)

    def load_params(self, fname):
        self._curr_module.load_params(fname)
        self.params_initialized = True

    # ---- binding ------------------------------------------------------------------------------
    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req="write"):
        """Bind the default bucket's module (other buckets bind on first use)."""
        arg_params = aux_params = None
        if self._preload is not None:
            (arg_params, aux_params), self._preload = self._preload, None
        elif self.params_initialized:
            arg_params, aux_params = self.get_params()
        if force_rebind:
            self._reset_bind()
        if self.binded:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if shared_module is not None:
            raise MXNetError("bind: shared_module for BucketingModule is not supported")
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.binded = True
        self._grad_req = grad_req
        module = self._new_module(self._default_bucket_key)
        module.bind(data_shapes, label_shapes, for_training, inputs_need_grad, force_rebind=False,
                    shared_module=None, grad_req=grad_req)
        self._curr_module = module
        self._curr_bucket_key = self._default_bucket_key
        self._buckets[self._default_bucket_key] = module
        if arg_params is not None:
            self.set_params(arg_params, aux_params)

    def switch_bucket(self, bucket_key, data_shapes, label_shapes=None):
        """Make `bucket_key`'s module current, binding it (parameters shared) on first use."""
        if not self.binded:
            raise MXNetError("switch_bucket: call bind() first")
        if bucket_key not in self._buckets:
            if data_shapes is None:
                raise MXNetError(f"switch_bucket: bucket {bucket_key!r} is new; its data_shapes are needed")
            module = self._new_module(bucket_key)
            module.bind(data_shapes, label_shapes, self._curr_module.for_training,
                        self._curr_module.inputs_need_grad, force_rebind=False,
                        shared_module=self._buckets[self._default_bucket_key], grad_req=self._grad_req)
            if self._monitor is not None:
                module.install_monitor(self._monitor)
            if self.optimizer_initialized:
                module.borrow_optimizer(self._buckets[self._default_bucket_key])
            self._buckets[bucket_key] = module
        self._curr_module = self._buckets[bucket_key]
        self._curr_bucket_key = bucket_key

    def init_optimizer(self, kvstore="local", optimizer="sgd", optimizer_params=(("learning_rate", 0.01),),
                       force_init=False):
        if not (self.binded and self.params_initialized):
            raise MXNetError("init_optimizer: call bind() and init_params() first")
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring.")
            return
        self._curr_module.init_optimizer(kvstore, optimizer, optimizer_params, force_init=force_init)
        for mod in self._buckets.values():
            if mod is not self._curr_module:
                mod.borrow_optimizer(self._curr_module)
        self.optimizer_initialized = True

    # ---- execution ----------------------------------------------------------------------------
    def _switch_for(self, data_batch):
        key = data_batch.bucket_key if data_batch.bucket_key is not None else self._default_bucket_key
        data_shapes = data_batch.provide_data
        label_shapes = data_batch.provide_label
        if key not in self._buckets and data_shapes is None:
            _, data_names, label_names = self._sym_gen(key)
            data_shapes = _batch_shapes(data_batch, data_names, data_batch.data)
            label_shapes = _batch_shapes(data_batch, label_names, data_batch.label)
        self.switch_bucket(key, data_shapes, label_shapes)

    def prepare(self, data_batch, sparse_row_id_fn=None):
        if not (self.binded and self.params_initialized):
            raise MXNetError("prepare: call bind() and init_params() first")
        original = self._curr_bucket_key
        self._switch_for(data_batch)
        self._curr_module.prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)
        self.switch_bucket(original, None, None)

    def forward(self, data_batch, is_train=None):
        if not (self.binded and self.params_initialized):
            raise MXNetError("forward: call bind() and init_params() first")
        self._switch_for(data_batch)
        self._curr_module.forward(data_batch, is_train=is_train)

    def backward(self, out_grads=None):
        self._bound("backward").backward(out_grads=out_grads)

    def update(self):
        if not (self.binded and self.params_initialized and self.optimizer_initialized):
            raise MXNetError("update: call bind(), init_params() and init_optimizer() first")
        self._params_dirty = True
        self._curr_module.update()

    def get_outputs(self, merge_multi_context=True):
        return self._bound("get_outputs").get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        return self._bound("get_input_grads").get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        self._bound("update_metric").update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon):
        if not self.binded:
            raise MXNetError("install_monitor: call bind() first")
        self._monitor = mon
        for mod in self._buckets.values():
            mod.install_monitor(mon)

    # ---- checkpoints --------------------------------------------------------------------------
    def save_checkpoint(self, prefix, epoch, remove_amp_cast=False):
        """`prefix-%04d.params`, one `prefix-KEY-symbol.json` per bucket and `prefix.buckets`
        (the keys, int32)."""
        from .. import ndarray as nd
        if not self._buckets:
            raise MXNetError("Empty BucketingModule cannot be saved")
        self.save_params("%s-%04d.params" % (prefix, epoch))
        for bucket_key in self._buckets:
            self._sym_gen(bucket_key)[0].save("%s-%s-symbol.json" % (prefix, bucket_key))
        nd.save("%s.buckets" % prefix, nd.array(list(self._buckets.keys()), dtype=np.int32))

    @staticmethod
    def load(prefix, epoch, sym_gen=None, default_bucket_key=None, **kwargs):
        """A BucketingModule over `sym_gen` whose parameters, read from `prefix-%04d.params`,
        are set when it is bound (as Module.load)."""
        from ..model import load_params
        if sym_gen is None or default_bucket_key is None:
            raise MXNetError("BucketingModule.load: sym_gen and default_bucket_key are required")
        mod = BucketingModule(sym_gen=sym_gen, default_bucket_key=default_bucket_key, **kwargs)
        mod._preload = load_params(prefix, epoch)
        return mod
