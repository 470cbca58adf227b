"""BatchNorm followed by relu as one node, and its gradient with relu's mask applied to the
incoming gradient, as `passes/norm_relu.py` makes them in training graphs: a convolutional
network's BatchNorm output is read only by its relu, and the relu's gradient is read only by
BatchNorm's backward, so each pair is one pass over the tensor instead of two.

Both compute exactly what the pair computes (the registry's relu, NaN kept, applied to
BatchNorm's rounded output; relu's gradient dy * relu'(y), relu'(y) NaN where y is NaN, then
BatchNorm's backward), with BatchNorm's attributes, outputs and moving-average updates."""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .nn_norm import BatchNorm, BatchNormBackward
from .registry import merge_shape, register


def relu_array(y: np.ndarray) -> np.ndarray:
    """The registry's relu of an array: max(y, 0) with NaN kept."""
    return np.where((y > 0) | np.isnan(y), y, np.zeros((), y.dtype))


def relu_grad_array(dy: np.ndarray, y: np.ndarray) -> np.ndarray:
    """relu's gradient from its output y: dy * relu'(y), relu'(y) = y where y is NaN, else the step."""
    step = np.where(np.isnan(y), y, (y > 0).astype(y.dtype))
    return (dy * step).astype(dy.dtype, copy=False)


@register("_batch_norm_relu")
class BatchNormRelu(BatchNorm):
    """relu(BatchNorm(...)): BatchNorm's inputs, attributes, outputs and aux updates, output 0
    through relu."""
    hidden = True

    def compute(self, attrs, inputs, ctx):
        results = super().compute(attrs, inputs, ctx)
        return [relu_array(results[0])] + list(results[1:])

    def grad(self, F, attrs, inputs, outputs, ograds):
        x, gamma, _beta, mmean, mvar = inputs
        dx, dgamma, dbeta = F.apply("_backward_batch_norm_relu",
                                    [ograds[0], outputs[0], outputs[1], outputs[2], x, gamma], **attrs)
        return [dx, dgamma, dbeta, F.zeros_like(mmean), F.zeros_like(mvar)]


@register("_backward_batch_norm_relu")
class BatchNormReluBackward(BatchNormBackward):
    """`_backward_BatchNorm` of relu's gradient: the incoming gradient `ograd` of the relu's
    `output` masked by relu'(output), then BatchNorm's backward (data, gamma, beta gradients)."""
    inputs = ("ograd", "output", "mean", "invstd", "data", "gamma")
    forward_op = None

    def infer_shape(self, attrs, in_shapes):
        dy, y, *rest = in_shapes
        y = merge_shape(self.name, "input 'output'", y, dy)
        ins, outs = super().infer_shape(attrs, [y, *rest])
        return [ins[0], ins[0], *ins[1:]], outs

    def infer_type(self, attrs, in_types):
        dy, y, *rest = in_types
        ins, outs = super().infer_type(attrs, [dy or y, *rest])
        return [ins[0], y or ins[0], *ins[1:]], outs

    def compute(self, attrs, inputs, ctx):
        dy, y, *rest = inputs
        if y.shape != dy.shape:
            raise MXNetError(f"{self.name}: shape mismatch for input 'output': expected {dy.shape}, got {y.shape}")
        return super().compute(attrs, [relu_grad_array(dy, y), *rest], ctx)
