"""Sparse softmax cross-entropy as one op: `_log_softmax_nll(data, label)` is
`-pick(log_softmax(data, axis), label, axis, keepdims, mode)`, with the log-softmax kept as a
second, hidden output; `_backward_log_softmax_nll` is its gradient with respect to `data`.

Both are bit for bit the chain they replace (the same numpy computations: `softmax_reference`
for the log-softmax, pick's index rules, and `_backward_log_softmax`'s formula applied to the
one-hot head gradient that `_backward_pick` and `negative`'s gradient would have built), so an
eager loss may run one op and one gradient op instead of four of each. Gradients are written
with registered ops, so they differentiate again (create_graph).
"""
from __future__ import annotations

import math

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Enum, Int, Param
from .reduce import softmax_reference
from .registry import Op, get_op, merge_shape, register
from .shape import _PICK_MODES, _pick_positions, _pick_shapes

_PARAMS = {"axis": Param(Int, -1, "the class axis"),
           "keepdims": Param(Bool, False, "keep the class axis (size 1) in the result"),
           "mode": Param(Enum(*_PICK_MODES), "clip", "out-of-range labels: clip or wrap (as pick)")}


def _label_shape(name: str, attrs, data: tuple, label) -> tuple:
    """The label's shape checked against data's: data's shape without the class axis, or with
    it as size 1 (pick's index rule)."""
    ax, _, reduced = _pick_shapes(name, attrs, data)
    if label is not None and len(label) == len(data):
        return merge_shape(name, "input 'label'", tuple(data[:ax]) + (1,) + tuple(data[ax + 1:]), label)
    return merge_shape(name, "input 'label'", reduced, label)


def _flat_positions(shape: tuple, ax: int, j: np.ndarray) -> np.ndarray:
    """Flat indices into a C-contiguous array of `shape` of the positions `j` (shaped like
    `shape` with 1 at `ax`, values in [0, shape[ax])) picks: one per position of the other
    axes, in their C order, hence all distinct."""
    c, pre, post = shape[ax], math.prod(shape[:ax]), math.prod(shape[ax + 1:])
    rows = np.arange(pre, dtype=np.int64) * (c * post)
    if post == 1:
        return j.reshape(-1) + rows
    return (rows[:, None] + j.reshape(pre, post) * post + np.arange(post, dtype=np.int64)).reshape(-1)


def _one_hot_head(name: str, attrs, g: np.ndarray, label: np.ndarray, shape: tuple) -> np.ndarray:
    """The log-softmax's head gradient of the loss: zeros of `shape` with -g at the picked
    positions (what `negative`'s and `_backward_pick`'s gradients produce: a scatter-add of -g
    into zeros; the positions are distinct, so each is 0 + (-g), written directly)."""
    ax, j = _pick_positions(name, attrs, shape, label)
    kept = j.shape
    if g.size != math.prod(kept):
        raise MXNetError(f"{name}: shape mismatch for input 'ograd': expected {kept}, got {g.shape}")
    dy = np.zeros(shape, g.dtype)
    v = np.negative(g.reshape(-1))
    v += 0   # 0 + (-g) as the scatter-add computes it: -0.0 becomes +0.0
    dy.reshape(-1)[_flat_positions(shape, ax, j)] = v
    return dy


@register("_log_softmax_nll")
class LogSoftmaxNLL(Op):
    """-log(softmax(data)) at the label along `axis` (one value per row; the class axis kept
    as size 1 with `keepdims`). Output 1 (hidden) is log_softmax(data), which the gradient
    reads. The label is an index: its gradient is None (no contribution; zero where asked)."""
    inputs = ("data", "label")
    outputs = ("output", "log_softmax")
    params = _PARAMS
    kernel = "softmax"
    hidden = True
    grad_takes_missing_ograds = True

    def num_visible_outputs(self, attrs):
        return 1

    def infer_shape(self, attrs, in_shapes):
        data, label = in_shapes
        if data is None:
            return list(in_shapes), [None, None]
        data = tuple(data)
        _, out, _ = _pick_shapes(self.name, attrs, data)
        return [data, _label_shape(self.name, attrs, data, label)], [out, data]

    def infer_type(self, attrs, in_types):
        t = in_types[0]
        return [t, in_types[1] or t], [t, t]

    def compute(self, attrs, inputs, ctx):
        x, label = inputs
        ax, j = _pick_positions(self.name, attrs, x.shape, label)
        _, out_shape, _ = _pick_shapes(self.name, attrs, x.shape)
        y = softmax_reference(x, ax, log=True)   # C-contiguous
        return [np.negative(y.reshape(-1)[_flat_positions(y.shape, ax, j)]).reshape(out_shape), y]

    def grad(self, F, attrs, inputs, outputs, ograds):
        # ograds may hold None for an unused output (grad_takes_missing_ograds)
        data, label = inputs
        y, dx = outputs[1], None
        if ograds[0] is not None:
            dx = F._backward_log_softmax_nll(ograds[0], y, label, axis=attrs["axis"], keepdims=attrs["keepdims"],
                                             mode=attrs["mode"])
        if len(ograds) > 1 and ograds[1] is not None:   # the hidden output used directly
            dy = F._backward_log_softmax(ograds[1], y, axis=attrs["axis"])
            dx = dy if dx is None else F.elemwise_add(dx, dy)
        return [dx, None]


@register("_backward_log_softmax_nll")
class LogSoftmaxNLLGrad(Op):
    """The gradient of `_log_softmax_nll` with respect to its data, from the head gradient
    `ograd` (the loss's shape), the forward's log-softmax `output` and the `label`:
    g * (softmax - one_hot(label)) along `axis`, computed as `_backward_log_softmax` of the
    one-hot head gradient (float64 sums, one rounding)."""
    inputs = ("ograd", "output", "label")
    params = _PARAMS
    kernel = "softmax"
    hidden = True

    def infer_shape(self, attrs, in_shapes):
        g, y, label = in_shapes
        if y is None:
            return list(in_shapes), [None]
        y = tuple(y)
        _, out, _ = _pick_shapes(self.name, attrs, y)
        g = merge_shape(self.name, "input 'ograd'", out, g)
        return [g, y, _label_shape(self.name, attrs, y, label)], [y]

    def infer_type(self, attrs, in_types):
        t = in_types[0] or in_types[1]
        return [t, t, in_types[2] or t], [t]

    def compute(self, attrs, inputs, ctx):
        g, y, label = inputs
        dy = _one_hot_head(self.name, attrs, g, label, y.shape)
        ax = _pick_shapes(self.name, attrs, y.shape)[0]
        return get_op("_backward_log_softmax").compute({"axis": ax}, [dy, y], ctx)

    def grad(self, F, attrs, inputs, outputs, ograds):
        # dx = g * (p - onehot), p = exp(y): d g = sum(h * p) - pick(h), d y = g * h * p
        g, y, label = inputs
        h, ax = ograds[0], attrs["axis"]
        keep, mode = attrs["keepdims"], attrs["mode"]
        hp = F.elemwise_mul(h, F.exp(y))
        d_g = F.elemwise_sub(F.sum(hp, axis=(ax,), keepdims=keep), F.pick(h, label, axis=ax, keepdims=keep, mode=mode))
        g_kept = g if keep else F.expand_dims(g, axis=ax)
        return [d_g, F.broadcast_mul(hp, g_kept), None]
