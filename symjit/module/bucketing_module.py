"""BucketingModule (MXNet 1.x): one Module per bucket key (e.g. sequence length), made by
`sym_gen(key) -> (symbol, data_names, label_names)`. The modules share one set of parameters,
gradient memory and optimizer: every bucket binds with the default bucket's module as its
shared module, and borrows its optimizer. Batches choose their module by `bucket_key`.
"""
from __future__ import annotations

import logging
import warnings

from .. import initializer as init_mod
from ..base import MXNetError
from ..context import cpu
from ..symbol.naming import NameManager
from .module import BaseModule, Module, _checked_names

__all__ = ["BucketingModule"]


class BucketingModule(BaseModule):
    """Modules per bucket over shared parameters (see the module docstring)."""

    def __init__(self, sym_gen, default_bucket_key=None, logger=logging, context=None, work_load_list=None,
                 fixed_param_names=None, state_names=None, group2ctxs=None, compression_params=None):
        super().__init__(logger=logger)
        if default_bucket_key is None:
            raise MXNetError("BucketingModule: default_bucket_key is required")
        self._default_bucket_key = default_bucket_key
        self._sym_gen = sym_gen
        symbol, data_names, label_names = self._call_sym_gen(default_bucket_key)
        _, _, state_names, fixed_param_names = _checked_names(symbol, data_names, label_names, state_names,
                                                              fixed_param_names)
        self._compression_params = compression_params
        self._fixed_param_names = fixed_param_names
        self._state_names = state_names
        self._context = context if context is not None else cpu()
        self._work_load_list = work_load_list
        self._group2ctxs = group2ctxs
        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None
        self._params_dirty = False
        self._monitor = None
        self._grad_req = None
        self._preloaded = None

    def _reset_bind(self):
        self.binded = False
        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None

    def _call_sym_gen(self, *args, **kwargs):
        """`sym_gen` under fresh automatic-name counters (as MXNet's), so every bucket's symbol
        names its nodes alike ('embedding0_weight') however many symbols were made before."""
        with NameManager():
            return self._sym_gen(*args, **kwargs)

    def _new_module(self, bucket_key):
        symbol, data_names, label_names = self._call_sym_gen(bucket_key)
        return Module(symbol, data_names, label_names, logger=self.logger, context=self._context,
                      work_load_list=self._work_load_list, fixed_param_names=self._fixed_param_names,
                      state_names=self._state_names, group2ctxs=self._group2ctxs,
                      compression_params=self._compression_params)

    # ---- properties ------------------------------------------------------------------------------
    @property
    def data_names(self):
        if self.binded:
            return self._curr_module.data_names
        return self._call_sym_gen(self._default_bucket_key)[1]

    @property
    def output_names(self):
        if self.binded:
            return self._curr_module.output_names
        return self._call_sym_gen(self._default_bucket_key)[0].list_outputs()

    @property
    def data_shapes(self):
        self._check_bound()
        return self._curr_module.data_shapes

    @property
    def label_shapes(self):
        self._check_bound()
        return self._curr_module.label_shapes

    @property
    def output_shapes(self):
        self._check_bound()
        return self._curr_module.output_shapes

    @property
    def symbol(self):
        self._check_bound()
        return self._curr_module.symbol

    def _check_bound(self, params=False, optimizer=False):
        if not self.binded or (params and not self.params_initialized) or \
                (optimizer and not self.optimizer_initialized):
            raise MXNetError("BucketingModule: call bind()" + (", init_params()" if params else "") +
                             (" and init_optimizer()" if optimizer else "") + " first")

    # ---- parameters --------------------------------------------------------------------------------
    def get_params(self):
        self._check_bound(params=True)
        self._curr_module._params_dirty = self._params_dirty
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
        self._check_bound()
        self._curr_module.init_params(initializer=initializer, arg_params=arg_params, aux_params=aux_params,
                                      allow_missing=allow_missing, force_init=force_init,
                                      allow_extra=allow_extra)
        self._params_dirty = False
        self.params_initialized = True

    def get_states(self, merge_multi_context=True):
        self._check_bound(params=True)
        return self._curr_module.get_states(merge_multi_context=merge_multi_context)

    def set_states(self, states=None, value=None):
        self._check_bound(params=True)
        self._curr_module.set_states(states, value)

    # ---- binding -------------------------------------------------------------------------------------
    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req="write"):
        """Bind the default bucket's module (other buckets bind on first use, sharing it)."""
        arg_params = aux_params = None
        if self.params_initialized:
            if self._preloaded is not None:
                arg_params, aux_params = self._preloaded
            else:
                arg_params, aux_params = self.get_params()
        if force_rebind:
            self._reset_bind()
        if self.binded:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if shared_module is not None:
            raise MXNetError("shared_module for BucketingModule is not supported")
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.binded = True
        self._grad_req = grad_req
        module = self._new_module(self._default_bucket_key)
        module.bind(data_shapes, label_shapes, for_training, inputs_need_grad, force_rebind=False,
                    shared_module=None, grad_req=self._grad_req)
        self._curr_module = module
        self._curr_bucket_key = self._default_bucket_key
        self._buckets[self._default_bucket_key] = module
        if self.params_initialized:
            self._preloaded = None
            self.set_params(arg_params, aux_params)

    def switch_bucket(self, bucket_key, data_shapes, label_shapes=None):
        """Make `bucket_key`'s module current (binding it, shared with the default one, if new)."""
        self._check_bound()
        if bucket_key not in self._buckets:
            module = self._new_module(bucket_key)
            module.bind(data_shapes, label_shapes, self._curr_module.for_training,
                        self._curr_module.inputs_need_grad, force_rebind=False,
                        shared_module=self._buckets[self._default_bucket_key], grad_req=self._grad_req)
            if self._monitor is not None:
                module.install_monitor(self._monitor)
            if self.optimizer_initialized:
                module.borrow_optimizer(self._buckets[self._default_bucket_key])
            self._buckets[bucket_key] = module
        else:
            module = self._buckets[bucket_key]
            if not module.binded:
                module.bind(data_shapes, label_shapes, self._curr_module.for_training,
                            self._curr_module.inputs_need_grad, force_rebind=False,
                            shared_module=self._buckets[self._default_bucket_key], grad_req=self._grad_req)
        self._curr_module = self._buckets[bucket_key]
        self._curr_bucket_key = bucket_key

    # ---- training ------------------------------------------------------------------------------------
    def init_optimizer(self, kvstore="local", optimizer="sgd", optimizer_params=(("learning_rate", 0.01),),
                       force_init=False):
        self._check_bound(params=True)
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring.")
            return
        self._curr_module.init_optimizer(kvstore, optimizer, optimizer_params, force_init=force_init)
        for mod in self._buckets.values():
            if mod is not self._curr_module:
                mod.borrow_optimizer(self._curr_module)
        self.optimizer_initialized = True

    def prepare(self, data_batch, sparse_row_id_fn=None):
        self._check_bound(params=True)
        original_bucket_key = self._curr_bucket_key
        self.switch_bucket(data_batch.bucket_key, data_batch.provide_data, data_batch.provide_label)
        self._curr_module.prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)
        self.switch_bucket(original_bucket_key, None, None)

    def forward(self, data_batch, is_train=None):
        self._check_bound(params=True)
        self.switch_bucket(data_batch.bucket_key, data_batch.provide_data, data_batch.provide_label)
        self._curr_module.forward(data_batch, is_train=is_train)

    def backward(self, out_grads=None):
        self._check_bound(params=True)
        self._curr_module.backward(out_grads=out_grads)

    def update(self):
        self._check_bound(params=True, optimizer=True)
        self._params_dirty = True
        self._curr_module.update()

    def get_outputs(self, merge_multi_context=True):
        self._check_bound(params=True)
        return self._curr_module.get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        self._check_bound(params=True)
        return self._curr_module.get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        self._check_bound(params=True)
        self._curr_module.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon):
        self._check_bound()
        self._monitor = mon
        for mod in self._buckets.values():
            mod.install_monitor(mon)

    # ---- checkpoints ---------------------------------------------------------------------------------
    def save_params(self, fname):
        from .. import ndarray as nd
        arg, aux = self.get_params()
        save = {f"arg:{k}": v for k, v in arg.items()}
        save.update({f"aux:{k}": v for k, v in aux.items()})
        nd.save(fname, save)

    def save_checkpoint(self, prefix, epoch, remove_amp_cast=False):
        """`prefix-<key>-symbol.json` for every bucket and `prefix-<epoch>.params`."""
        if not self._buckets:
            raise MXNetError("Empty BucketingModule cannot be saved")
        for bucket_key in self._buckets:
            symbol, _, _ = self._call_sym_gen(bucket_key)
            symbol.save("%s-%s-symbol.json" % (prefix, bucket_key))
        param_name = "%s-%04d.params" % (prefix, epoch)
        self.save_params(param_name)
        logging.info('Saved checkpoint to "%s"', param_name)

    @staticmethod
    def load(prefix, epoch, sym_gen=None, default_bucket_key=None, **kwargs):
        """A BucketingModule with the parameters of `prefix-<epoch>.params` (set at bind)."""
        if sym_gen is None or default_bucket_key is None:
            raise MXNetError("BucketingModule.load: sym_gen and default_bucket_key are required")
        from .. import ndarray as nd
        arg, aux = {}, {}
        for k, v in nd.load("%s-%04d.params" % (prefix, epoch)).items():
            kind, name = k.split(":", 1)
            (arg if kind == "arg" else aux)[name] = v
        mod = BucketingModule(sym_gen=sym_gen, default_bucket_key=default_bucket_key, **kwargs)
        mod._preloaded = (arg, aux)
        mod.params_initialized = True
        return mod
