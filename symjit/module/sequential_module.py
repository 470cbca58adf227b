"""SequentialModule (`mx.mod.SequentialModule`): modules chained output to input.

Each module's outputs are the next one's data; `backward` feeds each module's input gradients
to the previous one. Per-module metadata: `take_labels=True` gives that module the labels (and
makes it update metrics); `auto_wiring=True` renames the incoming data to its data_names."""
from __future__ import annotations

import copy
import logging

from .. import initializer as init_mod
from ..base import MXNetError
from .module import BaseModule

__all__ = ["SequentialModule"]


class SequentialModule(BaseModule):
    """A container of modules run one after the other."""

    META_TAKE_LABELS = "take_labels"
    META_AUTO_WIRING = "auto_wiring"

    def __init__(self, logger=logging):
        super().__init__(logger=logger)
        self._modules = []
        self._metas = []
        self._label_shapes = None
        self._data_shapes = None
        self._meta_keys = {SequentialModule.META_TAKE_LABELS, SequentialModule.META_AUTO_WIRING}

    def add(self, module, **kwargs):
        """Append `module` (with metadata `take_labels`, `auto_wiring`); returns self. The
        container must be bound and initialized again afterwards."""
        for key in kwargs:
            if key not in self._meta_keys:
                raise MXNetError(f'SequentialModule.add: unknown meta "{key}"; known: {sorted(self._meta_keys)}')
        self._modules.append(module)
        self._metas.append(kwargs)
        self.binded = False
        self.params_initialized = False
        self.optimizer_initialized = False
        return self

    def _check(self, what, optimizer=False):
        if not (self.binded and self.params_initialized and (self.optimizer_initialized or not optimizer)):
            raise MXNetError(f"SequentialModule.{what}: call bind(), init_params()"
                             + (" and init_optimizer()" if optimizer else "") + " first")

    @property
    def data_names(self):
        return self._modules[0].data_names if self._modules else []

    @property
    def output_names(self):
        return self._modules[-1].output_names if self._modules else []

    @property
    def data_shapes(self):
        if not self.binded:
            raise MXNetError("SequentialModule.data_shapes: call bind() first")
        return self._modules[0].data_shapes

    @property
    def label_shapes(self):
        if not self.binded:
            raise MXNetError("SequentialModule.label_shapes: call bind() first")
        return self._label_shapes

    @property
    def output_shapes(self):
        if not self.binded:
            raise MXNetError("SequentialModule.output_shapes: call bind() first")
        return self._modules[-1].output_shapes

    def get_params(self):
        self._check("get_params")
        arg_params, aux_params = {}, {}
        for module in self._modules:
            arg, aux = module.get_params()
            arg_params.update(arg)
            aux_params.update(aux)
        return arg_params, aux_params

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True, allow_extra=False):
        self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init, allow_extra=True)

    def init_params(self, initializer=init_mod.Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        if self.params_initialized and not force_init:
            return
        if not self.binded:
            raise MXNetError("SequentialModule.init_params: call bind() first")
        for module in self._modules:
            # each module takes its own parameters out of the shared tables
            module.init_params(initializer=initializer, arg_params=arg_params, aux_params=aux_params,
                               allow_missing=allow_missing, force_init=force_init, allow_extra=True)
        seen_arg, seen_aux = {}, {}
        for i, module in enumerate(self._modules):
            arg, aux = module.get_params()
            for known, names in ((seen_arg, arg), (seen_aux, aux)):
                for name in names:
                    if name in known:
                        raise MXNetError(f"Duplicated parameter names: name \"{name}\" in layer {i} "
                                         f"({type(module).__name__}) is already used in layer {known[name]} "
                                         f"({type(self._modules[known[name]]).__name__}).")
                    known[name] = i
        self.params_initialized = True

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req="write"):
        if self.binded and not force_rebind:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if inputs_need_grad and not for_training:
            raise MXNetError("SequentialModule.bind: inputs_need_grad needs for_training")
        if shared_module is not None:
            raise MXNetError("SequentialModule.bind: shared_module is not supported")
        if not self._modules:
            raise MXNetError("Attempting to bind an empty SequentialModule")
        self.binded = True
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._label_shapes = label_shapes
        my_data_shapes = data_shapes
        anybody_needs_label = False
        for i, (module, meta) in enumerate(zip(self._modules, self._metas)):
            my_label_shapes = None
            if meta.get(SequentialModule.META_TAKE_LABELS, False):
                my_label_shapes = label_shapes
                anybody_needs_label = True
            my_inputs_need_grad = bool(inputs_need_grad or (for_training and i > 0))
            if meta.get(SequentialModule.META_AUTO_WIRING, False):
                data_names = module.data_names
                if len(data_names) != len(my_data_shapes):
                    raise MXNetError(f"SequentialModule: module {i} takes {len(data_names)} inputs, the "
                                     f"previous one gives {len(my_data_shapes)}")
                my_data_shapes = [(new, shape) for new, (_, shape) in zip(data_names, my_data_shapes)]
            module.bind(data_shapes=my_data_shapes, label_shapes=my_label_shapes, for_training=for_training,
                        inputs_need_grad=my_inputs_need_grad, force_rebind=force_rebind, shared_module=None,
                        grad_req=grad_req)
            my_data_shapes = module.output_shapes
        if not anybody_needs_label:
            self._label_shapes = None

    def init_optimizer(self, kvstore="local", optimizer="sgd", optimizer_params=(("learning_rate", 0.01),),
                       force_init=False):
        self._check("init_optimizer")
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring.")
            return
        for module in self._modules:
            module.init_optimizer(kvstore=kvstore, optimizer=optimizer, optimizer_params=optimizer_params,
                                  force_init=force_init)
        self.optimizer_initialized = True

    def forward(self, data_batch, is_train=None):
        self._check("forward")
        data_batch = copy.copy(data_batch)   # keeps bucket_key, pad, ...
        for i, module in enumerate(self._modules):
            module.forward(data_batch, is_train=is_train)
            if i + 1 == len(self._modules):
                break
            data_batch.data = module.get_outputs()
            if getattr(data_batch, "provide_data", None) is not None:
                names = [x[0] for x in module.output_shapes]
                data_batch.provide_data = [(n, x.shape) for n, x in zip(names, data_batch.data)]

    def backward(self, out_grads=None):
        self._check("backward")
        for i in range(len(self._modules) - 1, -1, -1):
            self._modules[i].backward(out_grads=out_grads)
            if i == 0:
                break
            out_grads = self._modules[i].get_input_grads()

    def update(self):
        self._check("update", optimizer=True)
        for module in self._modules:
            module.update()

    def get_outputs(self, merge_multi_context=True):
        self._check("get_outputs")
        return self._modules[-1].get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        self._check("get_input_grads")
        if not self.inputs_need_grad:
            raise MXNetError("SequentialModule.get_input_grads: bind with inputs_need_grad=True")
        return self._modules[0].get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        self._check("update_metric")
        for meta, module in zip(self._metas, self._modules):
            if meta.get(SequentialModule.META_TAKE_LABELS, False):
                module.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon):
        if not self.binded:
            raise MXNetError("SequentialModule.install_monitor: call bind() first")
        for module in self._modules:
            module.install_monitor(mon)
