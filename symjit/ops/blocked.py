"""Channel-blocked layout ops, created by passes/blocked_layout.py (hidden from the MXNet API).

A blocked tensor holds an NCHW tensor (N, C, H, W) as (N, C // 16, H, W, 16): element
(n, c, h, w) at [n, c // 16, h, w, c % 16], so that the 16 channels of a block at one pixel
are contiguous (one vector). C is a multiple of 16.

  * `_to_blocked`    — NCHW -> blocked;
  * `_from_blocked`  — blocked -> NCHW;
  * `_pool_blocked`  — a 2-D max / avg / sum Pooling (attrs `pool_attrs`, the Pooling's
                       parsed attributes) of blocked data into a blocked output;
  * `_conv_blocked`  — a 2-D convolution (attrs `conv_attrs`, the Convolution's parsed
                       attributes) giving a blocked output, optionally plus a blocked residual
                       (`residual`), optionally relu'd or relu6'd (`relu`: an activation
                       code of ops/fused.py); data
                       blocked (`data_blocked`, the default) or NCHW (the convolution where a
                       chain enters the layout: it stores blocked directly), weight and bias
                       in MXNet's layout.

The reference implementations convert to NCHW, run the registered ops and convert back, so
the interpreter computes exactly what the original nodes compute.
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Any_, Bool, Param
from .fused import ConvolutionRelu
from .registry import ComputeContext, Op, get_op, register

#: channels per block
BLOCK = 16


def blocked_shape(op: str, shape) -> tuple:
    """The blocked shape of an NCHW shape (MXNetError naming `op` unless C % 16 == 0)."""
    shape = tuple(int(d) for d in shape)
    if len(shape) != 4 or shape[1] % BLOCK != 0:
        raise MXNetError(f"{op}: expected an NCHW shape with channels a multiple of {BLOCK}, got {shape}")
    n, c, h, w = shape
    return (n, c // BLOCK, h, w, BLOCK)


def nchw_shape(op: str, shape) -> tuple:
    """The NCHW shape of a blocked shape (MXNetError naming `op` unless it is (N, Cb, H, W, 16))."""
    shape = tuple(int(d) for d in shape)
    if len(shape) != 5 or shape[4] != BLOCK:
        raise MXNetError(f"{op}: expected a blocked shape (N, C/{BLOCK}, H, W, {BLOCK}), got {shape}")
    n, cb, h, w, _ = shape
    return (n, cb * BLOCK, h, w)


def to_blocked(x: np.ndarray) -> np.ndarray:
    n, cb, h, w, _ = blocked_shape("_to_blocked", x.shape)
    return np.ascontiguousarray(x.reshape(n, cb, BLOCK, h, w).transpose(0, 1, 3, 4, 2))


def from_blocked(x: np.ndarray) -> np.ndarray:
    n, c, h, w = nchw_shape("_from_blocked", x.shape)
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, c, h, w))


class _Reorder(Op):
    inputs = ("data",)
    params = {}
    hidden = True
    differentiable = False
    kernel = "layout"
    _shape = staticmethod(blocked_shape)
    _convert = staticmethod(to_blocked)

    def infer_shape(self, attrs, in_shapes):
        (x,) = in_shapes
        if x is None:
            return [None], [None]
        return [tuple(x)], [self._shape(self.name, x)]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[0]]

    def compute(self, attrs, inputs, ctx: ComputeContext):
        return [self._convert(inputs[0])]


@register("_to_blocked")
class ToBlocked(_Reorder):
    """NCHW (N, C, H, W) -> blocked (N, C/16, H, W, 16)."""


@register("_from_blocked")
class FromBlocked(_Reorder):
    """Blocked (N, C/16, H, W, 16) -> NCHW (N, C, H, W)."""
    _shape = staticmethod(nchw_shape)
    _convert = staticmethod(from_blocked)


@register("_conv_blocked")
class ConvBlocked(ConvolutionRelu):
    """to_blocked(act(Convolution(from_blocked(data), weight[, bias]) [+ from_blocked(residual)])),
    ConvolutionRelu's attrs (`relu`: the activation code); with `data_blocked` false the data
    is NCHW (no from_blocked); with `residual` true the last input is a blocked array of the
    output's shape added before the activation (pointwise and general convolutions)."""
    params = dict(ConvolutionRelu.params, data_blocked=Param(Bool, True), residual=Param(Bool, False))
    kernel = "conv"

    def input_names(self, attrs):
        return super().input_names(attrs) + (["residual"] if attrs["residual"] else [])

    def infer_shape(self, attrs, in_shapes):
        x = in_shapes[0]
        conv_in = list(in_shapes[1:len(in_shapes) - 1] if attrs["residual"] else in_shapes[1:])
        nchw = x if x is None or not attrs["data_blocked"] else nchw_shape(self.name, x)
        ins, (y,) = get_op("Convolution").infer_shape(attrs["conv_attrs"], [nchw] + conv_in)
        out = None if y is None else blocked_shape(self.name, y)
        if attrs["residual"]:
            r = in_shapes[-1]
            if r is not None and out is not None and tuple(r) != out:
                raise MXNetError(f"{self.name}: residual shape {tuple(r)} differs from the output's {out}")
            return [x] + list(ins[1:]) + [out if r is None else tuple(r)], [out]
        return [x] + list(ins[1:]), [out]

    def infer_type(self, attrs, in_types):
        if not attrs["residual"]:
            return super().infer_type(attrs, in_types)
        ins, outs = super().infer_type(attrs, list(in_types[:-1]))
        return list(ins) + [outs[0]], outs

    def compute(self, attrs, inputs, ctx: ComputeContext):
        inputs = list(inputs)
        residual = from_blocked(inputs.pop()) if attrs["residual"] else None
        x = from_blocked(inputs[0]) if attrs["data_blocked"] else inputs[0]
        return [to_blocked(self.convolution_relu(attrs, [x] + inputs[1:], ctx, residual))]


@register("_pool_blocked")
class PoolBlocked(Op):
    """to_blocked(Pooling(from_blocked(data))) with the Pooling's parsed attrs `pool_attrs`."""
    inputs = ("data",)
    params = {"pool_attrs": Param(Any_), "members": Param(Any_, ())}
    hidden = True
    differentiable = False
    kernel = "pool"

    def infer_shape(self, attrs, in_shapes):
        (x,) = in_shapes
        if x is None:
            return [None], [None]
        _, (y,) = get_op("Pooling").infer_shape(attrs["pool_attrs"], [nchw_shape(self.name, x)])
        return [tuple(x)], [None if y is None else blocked_shape(self.name, y)]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[0]]

    def compute(self, attrs, inputs, ctx: ComputeContext):
        y = get_op("Pooling").compute(attrs["pool_attrs"], [from_blocked(inputs[0])], ctx)[0]
        return [to_blocked(y)]
