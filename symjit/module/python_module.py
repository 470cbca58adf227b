"""PythonModule and PythonLossModule (`mx.mod.PythonModule`, `mx.mod.PythonLossModule`):
modules computed in Python, without parameters, e.g. a custom loss at the end of a
SequentialModule."""
from __future__ import annotations

import logging

from .. import initializer as init_mod
from .. import ndarray as nd
from ..base import MXNetError
from .module import BaseModule, StoredNamesAndShapes

__all__ = ["PythonModule", "PythonLossModule"]


class PythonModule(StoredNamesAndShapes, BaseModule):
    """A parameterless module: subclasses define `_compute_output_shapes()` (the (name, shape)
    outputs for the bound data shapes), `forward`, `backward`, `get_outputs` and
    `get_input_grads`. The outputs are scores a metric can take when labels are bound."""

    def __init__(self, data_names, label_names, output_names, logger=logging):
        super().__init__(logger=logger)
        self._data_names = list(data_names) if isinstance(data_names, tuple) else data_names
        self._label_names = list(label_names) if isinstance(label_names, tuple) else label_names
        self._output_names = output_names
        self._data_shapes = None
        self._label_shapes = None
        self._output_shapes = None

    @property
    def output_shapes(self):
        return self._output_shapes

    def get_params(self):
        """No parameters: two empty dicts."""
        return {}, {}

    def init_params(self, initializer=init_mod.Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Nothing to initialize."""
        self.params_initialized = True

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True, allow_extra=False):
        self.params_initialized = True

    def update(self):
        """Nothing to update."""

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Feed the outputs to `eval_metric` when labels were bound (a module without labels
        computes no predictions)."""
        if self._label_shapes is None:
            return
        if pre_sliced:
            raise MXNetError("PythonModule does not support presliced labels")
        eval_metric.update(labels, self.get_outputs())

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req="write"):
        if self.binded and not force_rebind:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if grad_req != "write":
            raise MXNetError(f"PythonModule only supports grad_req='write', got {grad_req!r}")
        names = [x[0] for x in data_shapes]
        if names != list(self._data_names):
            raise MXNetError(f"PythonModule.bind: data_shapes name {names}, expected {self._data_names}")
        if label_shapes is not None:
            lnames = [x[0] for x in label_shapes]
            if self._label_names is None or lnames != list(self._label_names):
                raise MXNetError(f"PythonModule.bind: label_shapes name {lnames}, expected {self._label_names}")
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._data_shapes = data_shapes
        self._label_shapes = label_shapes
        self._output_shapes = self._compute_output_shapes()
        self.binded = True

    def _compute_output_shapes(self):
        raise MXNetError(f"{type(self).__name__}: subclasses of PythonModule define _compute_output_shapes()")

    def init_optimizer(self, kvstore="local", optimizer="sgd", optimizer_params=(("learning_rate", 0.01),),
                       force_init=False):
        """No parameters, no optimizer."""
        self.optimizer_initialized = True

    def install_monitor(self, mon):
        """No executors to monitor."""


class PythonLossModule(PythonModule):
    """A loss in Python: the output is the input scores; the gradient w.r.t. the scores is
    `grad_func(scores, labels)` (an NDArray or anything `nd.array` takes)."""

    def __init__(self, name="pyloss", data_names=("data",), label_names=("softmax_label",), logger=logging,
                 grad_func=None):
        super().__init__(data_names, label_names, [name + "_output"], logger=logger)
        self._name = name
        if len(data_names) != 1 or len(label_names) != 1:
            raise MXNetError(f"PythonLossModule takes one data and one label, got {list(data_names)} and "
                             f"{list(label_names)}")
        if grad_func is not None and not callable(grad_func):
            raise MXNetError("PythonLossModule: grad_func must be callable")
        self._scores = None
        self._labels = None
        self._scores_grad = None
        self._grad_func = grad_func

    def _compute_output_shapes(self):
        return [(self._name + "_output", self._data_shapes[0][1])]

    def forward(self, data_batch, is_train=None):
        self._scores = data_batch.data[0]
        if is_train is None:
            is_train = self.for_training
        if is_train:
            self._labels = data_batch.label[0]

    def get_outputs(self, merge_multi_context=True):
        return [self._scores]

    def backward(self, out_grads=None):
        if out_grads is not None:
            raise MXNetError("For a loss module, out_grads should be None")
        if not self.for_training:
            raise MXNetError("PythonLossModule.backward: bound with for_training=False")
        self._backward_impl()

    def _backward_impl(self):
        if self._grad_func is None:
            raise MXNetError("PythonLossModule: give grad_func or override _backward_impl() to compute the "
                             "gradient of the loss")
        grad = self._grad_func(self._scores, self._labels)
        self._scores_grad = grad if isinstance(grad, nd.NDArray) else nd.array(grad)

    def get_input_grads(self, merge_multi_context=True):
        return [self._scores_grad]
