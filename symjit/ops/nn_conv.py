"""Dense and convolutional network operators (MXNet 1.x semantics).

FullyConnected, Convolution, Deconvolution, Pooling, UpSampling, Embedding,
GridGenerator and BilinearSampler, with their hidden backward ops.

Gradients are written with registered ops only. Every backward kernel is a
single-output hidden op so that dead-code elimination can drop the gradients
nobody needs, and the convolution family is closed under differentiation:

  * ``_backward_Convolution_data(ograd, weight, data)``   transposed convolution,
    output shaped like ``data`` (this is also Deconvolution's forward);
  * ``_backward_Convolution_weight(ograd, data)``         weight gradient;
  * ``_backward_Deconvolution_data(ograd, weight, data)`` plain convolution whose
    output spatial size is taken from ``data`` (Deconvolution's data gradient);
  * ``_backward_bias(ograd, bias)`` / ``_broadcast_bias(bias, like)`` sum over /
    broadcast along every axis but the channel axis.

Each of these is linear in each argument, and their gradients are again ops of
the family, so second-order gradients work. Numpy references are vectorised
(im2col through ``sliding_window_view`` plus one batched matmul per call), so
real models (resnet18 at 224x224) run through them in tests.

Invariants: ``compute`` never mutates inputs and returns fresh contiguous arrays
of the dtype given by ``infer_type``; float16 is computed in float32 and rounded.
"""
from __future__ import annotations

import math
from itertools import product
from typing import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..base import MXNetError
from .attrs import Bool, Count, Dtype, Enum, Int, Optional, Param, Shape
from .registry import Op, forward_shapes, get_op, merge_shape, register, shape_known

__all__ = ["conv_forward", "conv_backward_data", "conv_backward_weight", "pool_forward",
           "pool_backward", "deconv_pad_adj"]

_FIRST_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}
_LAYOUTS = ("NCW", "NCHW", "NCDHW", "NWC", "NHWC", "NDHWC")


# ======================================================================================
# Small helpers
# ======================================================================================

def _acc_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype arithmetic runs in: float16 is computed in float32 (as MXNet's CPU does)."""
    dtype = np.dtype(dtype)
    if dtype == np.float16:
        return np.dtype(np.float32)
    if not np.issubdtype(dtype, np.floating):
        return np.dtype(np.float32)
    return dtype


def _out(x: np.ndarray, dtype) -> np.ndarray:
    """A fresh contiguous array of `dtype` (never a view of an input)."""
    return np.array(x, dtype=dtype, copy=True, order="C")


def _fill(op: str, what: str, value: tuple, nd: int, default: int) -> tuple:
    """MXNet fills an empty stride/dilate/pad with `default`; otherwise the length must match."""
    if len(value) == 0:
        return (default,) * nd
    if len(value) != nd:
        raise MXNetError(f"{op}: {what} must have the same number of dimensions as kernel "
                         f"({nd}), got {what}={value}")
    return tuple(value)


def _check_layout(op: str, layout, nd: int, channel_last_ok: bool = False) -> bool:
    """Validate `layout` for `nd` spatial dims; returns True for a channel-last layout."""
    if layout is None or layout == _FIRST_LAYOUTS.get(nd):
        return False
    if channel_last_ok and layout == {1: "NWC", 2: "NHWC", 3: "NDHWC"}.get(nd):
        return True
    if layout in ("NWC", "NHWC", "NDHWC") and len(layout) == nd + 2:
        raise MXNetError(f"{op}: layout {layout} is only supported on GPU; on CPU use "
                         f"{_FIRST_LAYOUTS[nd]}")
    raise MXNetError(f"{op}: layout {layout} does not match a {nd}-D kernel "
                     f"(expected {_FIRST_LAYOUTS.get(nd, 'NC + spatial')})")


def _dilated(kernel: Sequence[int], dilate: Sequence[int]) -> tuple:
    return tuple((k - 1) * d + 1 for k, d in zip(kernel, dilate))


def _shape_str(shape) -> str:
    return "None" if shape is None else str(tuple(shape))


def _known(d) -> bool:
    return d is not None and int(d) > 0


def _pad_spatial(x: np.ndarray, before: Sequence[int], after: Sequence[int], value=0.0) -> np.ndarray:
    """Pad (positive) or crop (negative) the trailing spatial axes of an N, C, ... array."""
    crop = tuple(slice(max(-b, 0), x.shape[2 + i] - max(-a, 0) if a < 0 else None)
                 for i, (b, a) in enumerate(zip(before, after)))
    x = x[(slice(None), slice(None)) + crop]
    widths = [(0, 0), (0, 0)] + [(max(b, 0), max(a, 0)) for b, a in zip(before, after)]
    if any(w != (0, 0) for w in widths):
        x = np.pad(x, widths, mode="constant", constant_values=value)
    return x


def _windows(xp: np.ndarray, kernel, stride, dilate, out_sp) -> np.ndarray:
    """View of shape (N, C, *out_sp, *kernel): xp[n, c, o*s + k*d] (xp already padded enough)."""
    nd = len(kernel)
    ext = _dilated(kernel, dilate)
    win = sliding_window_view(xp, ext, axis=tuple(range(2, 2 + nd)))
    sl = ((slice(None), slice(None))
          + tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(out_sp, stride))
          + tuple(slice(None, None, d) for d in dilate))
    return win[sl]


def _needed_after(in_sp, out_sp, kernel, stride, dilate, pad) -> list:
    """Right padding (may be negative: crop) so that windows for `out_sp` fit exactly."""
    ext = _dilated(kernel, dilate)
    return [(o - 1) * s + e - i - p for i, o, e, s, p in zip(in_sp, out_sp, ext, stride, pad)]


# ======================================================================================
# Convolution kernels (channel-first, any number of spatial dims)
# ======================================================================================

def conv_out_size(in_sp, kernel, stride, dilate, pad) -> tuple:
    """Output spatial size of a convolution: (in + 2p - dilated_k) // s + 1 per dim."""
    ext = _dilated(kernel, dilate)
    return tuple((i + 2 * p - e) // s + 1 for i, e, s, p in zip(in_sp, ext, stride, pad))


def conv_forward(x: np.ndarray, w: np.ndarray, stride, dilate, pad, groups: int,
                 out_sp: Sequence[int] | None = None) -> np.ndarray:
    """y[n, f, o] = sum_{c in group(f), k} x[n, c, o*s + k*d - p] * w[f, c, k] (zero outside x).

    `out_sp` (default: the usual formula) fixes the output spatial size; windows past
    the padded input read zeros, windows are never cropped at the start.
    """
    n, c = x.shape[:2]
    f = w.shape[0]
    kernel = w.shape[2:]
    g = groups
    cg, fg = c // g, f // g
    if out_sp is None:
        out_sp = conv_out_size(x.shape[2:], kernel, stride, dilate, pad)
    after = _needed_after(x.shape[2:], out_sp, kernel, stride, dilate, pad)
    xp = _pad_spatial(x, pad, after)
    win = _windows(xp, kernel, stride, dilate, out_sp)         # (N, C, *out, *k)
    nd = len(kernel)
    kk = int(np.prod(kernel, dtype=np.int64))
    p = int(np.prod(out_sp, dtype=np.int64))
    # (N, G, Cg, *k, *out) -> cols (N, G, Cg*K, P)
    perm = (0, 1) + tuple(range(2 + nd, 2 + 2 * nd)) + tuple(range(2, 2 + nd))
    cols = win.transpose(perm).reshape(n, g, cg * kk, p)
    wg = w.reshape(g, fg, cg * kk)
    out = np.matmul(wg, cols)                                   # (N, G, Fg, P)
    return out.reshape((n, f) + tuple(out_sp))


def conv_backward_data(dy: np.ndarray, w: np.ndarray, in_sp, stride, dilate, pad,
                       groups: int) -> np.ndarray:
    """Adjoint of `conv_forward` in x: dx[n, c, i] = sum dy[n, f, o] w[f, c, k] over o*s+k*d-p = i."""
    n, f = dy.shape[:2]
    out_sp = dy.shape[2:]
    kernel = w.shape[2:]
    g = groups
    cg, fg = w.shape[1], f // g
    c = cg * g
    kk = int(np.prod(kernel, dtype=np.int64))
    p = int(np.prod(out_sp, dtype=np.int64))
    wg = w.reshape(g, fg, cg * kk)
    dcols = np.matmul(wg.transpose(0, 2, 1), dy.reshape(n, g, fg, p))   # (N, G, Cg*K, P)
    dcols = dcols.reshape((n, c) + tuple(kernel) + tuple(out_sp))
    after = _needed_after(in_sp, out_sp, kernel, stride, dilate, pad)
    padded = tuple(i + pp + max(a, 0) for i, pp, a in zip(in_sp, pad, after))
    dxp = np.zeros((n, c) + padded, dtype=dcols.dtype)
    for kidx in product(*(range(k) for k in kernel)):
        sl = tuple(slice(k * d, k * d + (o - 1) * s + 1, s)
                   for k, d, o, s in zip(kidx, dilate, out_sp, stride))
        dxp[(slice(None), slice(None)) + sl] += dcols[(slice(None), slice(None)) + kidx]
    crop = tuple(slice(pp, pp + i) for pp, i in zip(pad, in_sp))
    return dxp[(slice(None), slice(None)) + crop]


def conv_backward_weight(dy: np.ndarray, x: np.ndarray, kernel, stride, dilate, pad,
                         groups: int) -> np.ndarray:
    """dw[f, c, k] = sum_{n, o} dy[n, f, o] * x[n, c, o*s + k*d - p] (outputs sized like dy)."""
    n, f = dy.shape[:2]
    out_sp = dy.shape[2:]
    c = x.shape[1]
    g = groups
    cg, fg = c // g, f // g
    nd = len(kernel)
    kk = int(np.prod(kernel, dtype=np.int64))
    p = int(np.prod(out_sp, dtype=np.int64))
    after = _needed_after(x.shape[2:], out_sp, kernel, stride, dilate, pad)
    xp = _pad_spatial(x, pad, after)
    win = _windows(xp, kernel, stride, dilate, out_sp)                 # (N, C, *out, *k)
    win = win.reshape((n, g, cg) + tuple(out_sp) + tuple(kernel))
    # -> (G, N, *out, Cg, *k) -> (G, N*P, Cg*K)
    perm = (1, 0) + tuple(range(3, 3 + nd)) + (2,) + tuple(range(3 + nd, 3 + 2 * nd))
    cols = win.transpose(perm).reshape(g, n * p, cg * kk)
    dyg = dy.reshape(n, g, fg, p).transpose(1, 2, 0, 3).reshape(g, fg, n * p)
    dw = np.matmul(dyg, cols)                                           # (G, Fg, Cg*K)
    return dw.reshape((f, cg) + tuple(kernel))


def deconv_pad_adj(attrs, in_sp) -> tuple[tuple, tuple]:
    """MXNet's DeconvolutionParam::InferPad: (pad, adj), derived from target_shape if it is set."""
    nd = len(attrs["kernel"])
    stride = _fill("Deconvolution", "stride", attrs["stride"], nd, 1)
    dilate = _fill("Deconvolution", "dilate", attrs["dilate"], nd, 1)
    pad = _fill("Deconvolution", "pad", attrs["pad"], nd, 0)
    adj = _fill("Deconvolution", "adj", attrs["adj"], nd, 0)
    target = tuple(attrs["target_shape"])
    if not any(t != 0 for t in target):
        return pad, adj
    if len(target) != nd:
        raise MXNetError(f"Deconvolution: target_shape {target} must have {nd} dimensions "
                         f"like kernel {attrs['kernel']}")
    ext = _dilated(attrs["kernel"], dilate)
    o_pad, o_adj = list(pad), [0] * nd     # with target_shape, the given adj is ignored (MXNet)
    for i in range(nd):
        if not _known(in_sp[i]):
            continue
        full = stride[i] * (in_sp[i] - 1) + ext[i]
        if full < target[i]:
            raise MXNetError(f"Deconvolution: too big target shape: target_shape[{i}]={target[i]} "
                             f"exceeds the largest reachable output {full}")
        excess = full - target[i]
        o_adj[i] = excess % 2
        o_pad[i] = (excess + 1) // 2
    return tuple(o_pad), tuple(o_adj)


# ======================================================================================
# FullyConnected
# ======================================================================================

_FC_PARAMS = {
    "num_hidden": Param(Int, doc="Number of hidden nodes of the output."),
    "no_bias": Param(Bool, False, "Whether to disable bias parameter."),
    "flatten": Param(Bool, True, "Whether to collapse all but the first axis of the input data tensor."),
}


def _fc_in_units(attrs, dshape) -> int:
    """in_units of the weight: product of non-batch dims (flatten) or the last dim; 0 if unknown."""
    if attrs["flatten"]:
        rest = dshape[1:]
        return int(np.prod(rest, dtype=np.int64)) if all(_known(d) for d in rest) else 0
    return int(dshape[-1]) if dshape else 0


def _fc_rows(x: np.ndarray, flatten: bool) -> np.ndarray:
    """data as the 2-D matrix the product uses: (batch, prod(rest)) or (prod(lead), last)."""
    if flatten:
        return x.reshape(x.shape[0], int(np.prod(x.shape[1:], dtype=np.int64)))
    return x.reshape(int(np.prod(x.shape[:-1], dtype=np.int64)), x.shape[-1])


@register("FullyConnected")
class FullyConnected(Op):
    """out = dot(data, weight.T) + bias. With flatten=True data is first reshaped to
    (batch, prod(rest)); with flatten=False the product applies to the last axis."""
    epilogue_host = True
    params = _FC_PARAMS
    inputs = ("data", "weight", "bias")
    kernel = "gemm"

    def input_names(self, attrs):
        return ["data", "weight"] if attrs["no_bias"] else ["data", "weight", "bias"]

    def infer_shape(self, attrs, in_shapes):
        h = attrs["num_hidden"]
        if h < 1:
            raise MXNetError(f"FullyConnected: num_hidden must be at least 1, got {h}")
        d, w = in_shapes[0], in_shapes[1]
        if d is None:   # MXNet deduces nothing (not even the weight's rows) before data's rank
            return list(in_shapes), [None]
        if len(d) < 1:
            raise MXNetError(f"FullyConnected: data must have at least 1 dimension, got {_shape_str(d)}")
        units = _fc_in_units(attrs, d) if d is not None else 0
        w = merge_shape(self.name, "weight", (h, units), w)
        if d is not None and w[1]:
            if not attrs["flatten"] and not _known(d[-1]):
                d = tuple(d[:-1]) + (w[1],)
            if units and units != w[1]:
                raise MXNetError(f"FullyConnected: shape mismatch for weight: expected "
                                 f"{(h, units)}, got {tuple(in_shapes[1])}")
        shapes = [d, w]
        if not attrs["no_bias"]:
            b = in_shapes[2]
            if b is not None and tuple(b) == (h, 1):
                shapes.append(tuple(b))
            else:
                shapes.append(merge_shape(self.name, "bias", (h,), b))
        out = (d[0], h) if attrs["flatten"] else tuple(d[:-1]) + (h,)
        return shapes, [out]

    def infer_shape_backward(self, attrs, in_shapes, out_shapes):
        """The data's leading dims (the batch; all but the last without flatten) from the output."""
        d, out = in_shapes[0], out_shapes[0]
        if d is None or out is None or not d:
            return list(in_shapes)
        lead = 1 if attrs["flatten"] else len(d) - 1
        d = tuple(o if not _known(x) else x for x, o in zip(d[:lead], out[:lead])) + tuple(d[lead:])
        return [d] + list(in_shapes[1:])

    def compute(self, attrs, inputs, ctx):
        x, w = inputs[0], inputs[1]
        in_shapes, _ = self.infer_shape(attrs, [x.shape, w.shape] + [b.shape for b in inputs[2:]])
        if tuple(in_shapes[1]) != w.shape:
            raise MXNetError(f"FullyConnected: shape mismatch for weight: expected {in_shapes[1]}, got {w.shape}")
        acc = _acc_dtype(x.dtype)
        h = attrs["num_hidden"]
        x2 = _fc_rows(x, attrs["flatten"])
        y = np.matmul(x2.astype(acc, copy=False), w.astype(acc, copy=False).T)
        if not attrs["no_bias"]:
            y = y + inputs[2].reshape(-1).astype(acc, copy=False)
        out_shape = (x.shape[0], h) if attrs["flatten"] else x.shape[:-1] + (h,)
        return [_out(y.reshape(out_shape), x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        dy = ograds[0]
        x, w = inputs[0], inputs[1]
        kw = dict(num_hidden=attrs["num_hidden"], no_bias=attrs["no_bias"], flatten=attrs["flatten"])
        grads = [F.apply("_backward_FullyConnected_data", [dy, w, x], **kw)[0],
                 F.apply("_backward_FullyConnected_weight", [dy, x], **kw)[0]]
        if not attrs["no_bias"]:
            grads.append(F.apply("_backward_bias", [dy, inputs[2]], axis=-1)[0])
        return grads


def _fc_forward_shapes(op: str, attrs, data, weight, ograd) -> tuple[list, tuple]:
    """([data, weight], ograd) as FullyConnected (without bias) infers them."""
    ins, ograds = forward_shapes(op, "FullyConnected", dict(attrs, no_bias=True), [data, weight], {0: ograd})
    return ins, ograds[0]


@register("_backward_FullyConnected_data")
class FullyConnectedBackwardData(Op):
    """d(data) of FullyConnected: dot(ograd, weight) reshaped like `data` (read for its shape)."""
    epilogue_host = True
    params = _FC_PARAMS
    inputs = ("ograd", "weight", "data")
    kernel = "gemm"
    hidden = True

    def infer_shape(self, attrs, in_shapes):
        dy, w, x = in_shapes
        (x, w), dy = _fc_forward_shapes(self.name, attrs, x, w, dy)
        return [dy, w, x], [x]

    def compute(self, attrs, inputs, ctx):
        dy, w, x = inputs
        h = attrs["num_hidden"]
        if dy.shape[-1] != h or w.shape[0] != h:
            raise MXNetError(f"_backward_FullyConnected_data: expected ograd (..., {h}) and weight "
                             f"({h}, in_units), got {dy.shape} and {w.shape}")
        acc = _acc_dtype(dy.dtype)
        dx = np.matmul(dy.reshape(-1, h).astype(acc, copy=False), w.astype(acc, copy=False))
        if dx.size != x.size:
            raise MXNetError(f"_backward_FullyConnected_data: gradient of size {dx.size} does not "
                             f"fit data shape {x.shape}")
        return [_out(dx.reshape(x.shape), dy.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        dy, w, x = inputs
        g = ograds[0]
        kw = dict(num_hidden=attrs["num_hidden"], no_bias=True, flatten=attrs["flatten"])
        return [F.apply("FullyConnected", [g, w], **kw)[0],
                F.apply("_backward_FullyConnected_weight", [dy, g], **kw)[0],
                F.zeros_like(x)]


@register("_backward_FullyConnected_weight")
class FullyConnectedBackwardWeight(Op):
    """d(weight) of FullyConnected: dot(ograd_2d.T, data_2d), shape (num_hidden, in_units)."""
    params = _FC_PARAMS
    inputs = ("ograd", "data")
    kernel = "gemm"
    hidden = True

    def infer_shape(self, attrs, in_shapes):
        dy, x = in_shapes
        (x, w), dy = _fc_forward_shapes(self.name, attrs, x, None, dy)
        return [dy, x], [w]

    def compute(self, attrs, inputs, ctx):
        dy, x = inputs
        h = attrs["num_hidden"]
        acc = _acc_dtype(dy.dtype)
        dy2 = dy.reshape(-1, h).astype(acc, copy=False)
        x2 = _fc_rows(x, attrs["flatten"]).astype(acc, copy=False)
        if x2.shape[0] != dy2.shape[0]:
            raise MXNetError(f"_backward_FullyConnected_weight: data {x.shape} does not match "
                             f"ograd {dy.shape}")
        return [_out(np.matmul(dy2.T, x2), dy.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        dy, x = inputs
        g = ograds[0]
        kw = dict(num_hidden=attrs["num_hidden"], no_bias=True, flatten=attrs["flatten"])
        return [F.apply("FullyConnected", [x, g], **kw)[0],
                F.apply("_backward_FullyConnected_data", [dy, g, x], **kw)[0]]


# ======================================================================================
# Bias helpers (sum over / broadcast along all axes but one)
# ======================================================================================

def _bias_axis(axis: int, ndim: int) -> int:
    return axis % ndim if ndim else 0


def _check_bias_channels(op: str, axis: int, full, bias, what: str) -> None:
    """`full`'s dim `axis` must hold one entry per element of `bias` (when both are known)."""
    if full is None or bias is None:
        return
    if not -len(full) <= axis < len(full):
        raise MXNetError(f"{op}: axis {axis} is out of range for {what} of shape {tuple(full)}")
    ax = _bias_axis(axis, len(full))
    channels = full[ax]
    size = int(np.prod(bias, dtype=np.int64))
    if shape_known(full) and shape_known(bias) and channels != size:
        raise MXNetError(f"{op}: {what} {tuple(full)} has {channels} channels on axis {ax}, "
                         f"bias {tuple(bias)} has {size}")


@register("_backward_bias")
class BackwardBias(Op):
    """Sum `ograd` over every axis except `axis`, reshaped like `bias` (the gradient of a
    per-channel bias add)."""
    params = {"axis": Param(Int, 1)}
    inputs = ("ograd", "bias")
    kernel = "reduce"
    hidden = True

    def infer_shape(self, attrs, in_shapes):
        _check_bias_channels(self.name, attrs["axis"], in_shapes[0], in_shapes[1], "ograd")
        return list(in_shapes), [in_shapes[1]]

    def compute(self, attrs, inputs, ctx):
        dy, b = inputs
        _check_bias_channels(self.name, attrs["axis"], dy.shape, b.shape, "ograd")
        ax = _bias_axis(attrs["axis"], dy.ndim)
        axes = tuple(i for i in range(dy.ndim) if i != ax)
        s = dy.sum(axis=axes, dtype=_acc_dtype(dy.dtype))
        return [_out(s.reshape(b.shape), dy.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        dy, b = inputs
        return [F.apply("_broadcast_bias", [ograds[0], dy], axis=attrs["axis"])[0], F.zeros_like(b)]


@register("_broadcast_bias")
class BroadcastBias(Op):
    """Broadcast a per-channel vector `bias` along every axis of `like` except `axis`."""
    params = {"axis": Param(Int, 1)}
    inputs = ("bias", "like")
    kernel = "shape"  # a broadcast (data movement), like broadcast_to
    hidden = True

    def infer_shape(self, attrs, in_shapes):
        _check_bias_channels(self.name, attrs["axis"], in_shapes[1], in_shapes[0], "like")
        return list(in_shapes), [in_shapes[1]]

    def compute(self, attrs, inputs, ctx):
        b, like = inputs
        _check_bias_channels(self.name, attrs["axis"], like.shape, b.shape, "like")
        ax = _bias_axis(attrs["axis"], like.ndim)
        shape = [1] * like.ndim
        shape[ax] = b.size
        return [_out(np.broadcast_to(b.reshape(shape), like.shape), b.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        b, like = inputs
        return [F.apply("_backward_bias", [ograds[0], b], axis=attrs["axis"])[0], F.zeros_like(like)]


# ======================================================================================
# Convolution
# ======================================================================================

_CONV_PARAMS = {
    "kernel": Param(Shape, doc="Convolution kernel size: (w,), (h, w) or (d, h, w)."),
    "stride": Param(Shape, (), "Convolution stride; defaults to 1 for each dimension."),
    "dilate": Param(Shape, (), "Convolution dilation; defaults to 1 for each dimension."),
    "pad": Param(Shape, (), "Zero pad for convolution; defaults to no padding."),
    "num_filter": Param(Int, doc="Convolution filter (channel) number."),
    "num_group": Param(Int, 1, "Number of group partitions."),
    "workspace": Param(Int, 1024, "Maximum temporary workspace allowed (MB)."),
    "no_bias": Param(Bool, False, "Whether to disable bias parameter."),
    "cudnn_tune": Param(Optional(Enum("off", "limited_workspace", "fastest")), None,
                        "Whether to pick convolution algorithm by running performance test."),
    "cudnn_off": Param(Bool, False, "Turn off cudnn for this layer."),
    "layout": Param(Optional(Enum(*_LAYOUTS)), None, "Layout of data, weight and output."),
}

#: the geometry attributes shared by the hidden convolution-family ops
_GEOM_PARAMS = {
    "kernel": Param(Shape),
    "stride": Param(Shape, ()),
    "dilate": Param(Shape, ()),
    "pad": Param(Shape, ()),
    "num_group": Param(Int, 1),
    "layout": Param(Optional(Enum(*_LAYOUTS)), None),
}


def _geometry(op: str, attrs) -> dict:
    """Canonical geometry (stride/dilate/pad filled with MXNet's defaults) from conv attrs."""
    kernel = tuple(attrs["kernel"])
    nd = len(kernel)
    if nd not in (1, 2, 3):
        raise MXNetError(f"{op}: kernel must have 1, 2 or 3 dimensions, got kernel={kernel}")
    if any(k <= 0 for k in kernel):
        raise MXNetError(f"{op}: incorrect kernel size: {kernel}")
    geo = {"kernel": kernel,
           "stride": _fill(op, "stride", attrs["stride"], nd, 1),
           "dilate": _fill(op, "dilate", attrs["dilate"], nd, 1),
           "pad": _fill(op, "pad", attrs["pad"], nd, 0),
           "num_group": attrs["num_group"],
           "layout": attrs["layout"]}
    if any(s <= 0 for s in geo["stride"]):
        raise MXNetError(f"{op}: incorrect stride size: {geo['stride']}")
    if any(d <= 0 for d in geo["dilate"]):
        raise MXNetError(f"{op}: incorrect dilate size: {geo['dilate']}")
    if any(p < 0 for p in geo["pad"]):
        raise MXNetError(f"{op}: pad must be non-negative, got {geo['pad']}")
    if geo["num_group"] <= 0:
        raise MXNetError(f"{op}: num_group must be positive, got {geo['num_group']}")
    _check_layout(op, geo["layout"], nd)
    return geo


def _check_spatial_nonempty(op: str, x: np.ndarray, what: str = "data"):
    """Inference reads 0 as an unknown dim, so compute must reject real zero-size spatial dims."""
    if any(d == 0 for d in x.shape[2:]):
        raise MXNetError(f"{op}: {what} has an empty spatial dimension: shape {x.shape}")


def _check_data_ndim(op: str, shape, nd: int, what: str = "data"):
    if shape is not None and len(shape) != nd + 2:
        names = {1: "(batch, channel, width)", 2: "(batch, channel, height, width)",
                 3: "(batch, channel, depth, height, width)"}
        raise MXNetError(f"{op}: {what} must be {nd + 2}-D {names[nd]} for a {nd}-D kernel, "
                         f"got shape {tuple(shape)}")


def _conv_out_spatial(op: str, in_sp, geo) -> tuple:
    """Output spatial dims (0 where unknown); raises when the kernel exceeds the padded input."""
    ext = _dilated(geo["kernel"], geo["dilate"])
    out = []
    for i, (d, e, s, p) in enumerate(zip(in_sp, ext, geo["stride"], geo["pad"])):
        if not _known(d):
            out.append(0)
            continue
        if e > d + 2 * p:
            raise MXNetError(f"{op}: kernel size exceeds input: dilated kernel {e} on spatial axis "
                             f"{i} is larger than the padded input {d} + 2*{p} = {d + 2 * p}")
        out.append((d + 2 * p - e) // s + 1)
    return tuple(out)


@register("Convolution")
class Convolution(Op):
    """N-D convolution (1-D, 2-D, 3-D) with groups, stride, dilation and zero padding.

    data (N, C, *spatial), weight (num_filter, C/num_group, *kernel), bias (num_filter,);
    out[n, f] = sum_c,k data[n, c, o*stride + k*dilate - pad] * weight[f, c, k] + bias[f].
    """
    epilogue_host = True
    params = _CONV_PARAMS
    inputs = ("data", "weight", "bias")
    kernel = "conv"

    def input_names(self, attrs):
        return ["data", "weight"] if attrs["no_bias"] else ["data", "weight", "bias"]

    def infer_shape(self, attrs, in_shapes):
        geo = _geometry(self.name, attrs)
        nd = len(geo["kernel"])
        g, nf = geo["num_group"], attrs["num_filter"]
        if nf <= 0:
            raise MXNetError(f"Convolution: num_filter must be positive, got {nf}")
        if nf % g:
            raise MXNetError(f"Convolution: num_filter {nf} must be divisible by num_group {g}")
        d, w = in_shapes[0], in_shapes[1]
        _check_data_ndim(self.name, d, nd)
        c = int(d[1]) if d is not None else 0
        if c and c % g:
            raise MXNetError(f"Convolution: input channels {c} must be divisible by num_group {g}")
        w = merge_shape(self.name, "weight", (nf, c // g if c else 0) + geo["kernel"], w)
        if d is not None and not c and w[1]:
            d = (d[0], w[1] * g) + tuple(d[2:])
        shapes = [d, w]
        if not attrs["no_bias"]:
            shapes.append(merge_shape(self.name, "bias", (nf,), in_shapes[2]))
        if d is None:
            return shapes, [None]
        return shapes, [(d[0], nf) + _conv_out_spatial(self.name, d[2:], geo)]

    def infer_shape_backward(self, attrs, in_shapes, out_shapes):
        """The data's batch from the output, and a spatial size wherever the stride is 1
        (input = output + dilated kernel - 1 - 2 * pad), as MXNet's shape function does."""
        d, out = in_shapes[0], out_shapes[0]
        if d is None or out is None or len(d) != len(out):
            return list(in_shapes)
        geo = _geometry(self.name, attrs)
        ext = _dilated(geo["kernel"], geo["dilate"])
        spatial = [x if _known(x) or not _known(o) or s != 1 else o + e - 1 - 2 * p
                   for x, o, e, s, p in zip(d[2:], out[2:], ext, geo["stride"], geo["pad"])]
        d = (d[0] if _known(d[0]) else out[0], d[1]) + tuple(spatial)
        return [d] + list(in_shapes[1:])

    def compute(self, attrs, inputs, ctx):
        x, w = inputs[0], inputs[1]
        _check_spatial_nonempty(self.name, x)
        self._check(attrs, inputs)
        geo = _geometry(self.name, attrs)
        acc = _acc_dtype(x.dtype)
        y = conv_forward(x.astype(acc, copy=False), w.astype(acc, copy=False), geo["stride"],
                         geo["dilate"], geo["pad"], geo["num_group"])
        if not attrs["no_bias"]:
            y += inputs[2].astype(acc, copy=False).reshape((1, -1) + (1,) * (y.ndim - 2))
        return [_out(y, x.dtype)]

    def _check(self, attrs, inputs):
        expected, _ = self.infer_shape(attrs, [a.shape for a in inputs])
        for name, a, e in zip(self.input_names(attrs), inputs, expected):
            if tuple(a.shape) != tuple(e):
                raise MXNetError(f"{self.name}: shape mismatch for {name}: expected {tuple(e)}, "
                                 f"got {a.shape}")

    def grad(self, F, attrs, inputs, outputs, ograds):
        geo = _geometry(self.name, attrs)
        dy = ograds[0]
        x, w = inputs[0], inputs[1]
        grads = [F.apply("_backward_Convolution_data", [dy, w, x], **geo)[0],
                 F.apply("_backward_Convolution_weight", [dy, x], **geo)[0]]
        if not attrs["no_bias"]:
            grads.append(F.apply("_backward_bias", [dy, inputs[2]], axis=1)[0])
        return grads


class _ConvFamily(Op):
    """Shared pieces of the hidden convolution-family ops (geometry attributes, dtype)."""
    params = _GEOM_PARAMS
    kernel = "conv"
    hidden = True

    def geo(self, attrs) -> dict:
        return _geometry(self.name, attrs)

    def _ndim_check(self, attrs, shapes: dict):
        nd = len(attrs["kernel"])
        for what, shape in shapes.items():
            _check_data_ndim(self.name, shape, nd, what)
            if any(d == 0 for d in shape[2:]):
                raise MXNetError(f"{self.name}: {what} has an empty spatial dimension: shape {tuple(shape)}")

    def _weight_check(self, geo, w: tuple):
        if len(w) != len(geo["kernel"]) + 2 or tuple(w[2:]) != tuple(geo["kernel"]):
            raise MXNetError(f"{self.name}: weight shape {tuple(w)} does not match kernel {geo['kernel']}")

    def _channels(self, what: str, got: int, expected: int):
        if got != expected:
            raise MXNetError(f"{self.name}: {what} has {got} channels, expected {expected}")

    def infer_shape(self, attrs, in_shapes):
        """Each subclass's `check_shapes(attrs, shapes)` raises MXNetError unless fully known
        input shapes (in input order) agree with each other and the geometry; it runs here and
        in `compute`, so the native lowering only ever sees shapes the reference accepts."""
        if all(shape_known(sh) for sh in in_shapes):
            self.check_shapes(attrs, [tuple(sh) for sh in in_shapes])
        return list(in_shapes), [self._out_shape(attrs, in_shapes)]


@register("_backward_Convolution_data")
class ConvolutionBackwardData(_ConvFamily):
    """Transposed convolution of `ograd` with `weight`, output shaped like `data`
    (the gradient of Convolution w.r.t. its data; `data` is read for its shape only)."""
    inputs = ("ograd", "weight", "data")

    def _out_shape(self, attrs, in_shapes):
        return in_shapes[2]

    def check_shapes(self, attrs, shapes):
        dy, w, x = shapes
        geo = self.geo(attrs)
        self._ndim_check(attrs, {"ograd": dy, "data": x})
        self._weight_check(geo, w)
        g = geo["num_group"]
        self._channels("ograd", dy[1], w[0])
        if w[0] % g:
            raise MXNetError(f"{self.name}: weight {w} has {w[0]} filters, not divisible by num_group {g}")
        self._channels("data", x[1], w[1] * g)
        expect = conv_out_size(x[2:], geo["kernel"], geo["stride"], geo["dilate"], geo["pad"])
        if any(o > e for o, e in zip(dy[2:], expect)):
            raise MXNetError(f"{self.name}: ograd spatial size {dy[2:]} exceeds the "
                             f"convolution output {expect} of data {x}")

    def compute(self, attrs, inputs, ctx):
        dy, w, x = inputs
        geo = self.geo(attrs)
        self.check_shapes(attrs, [a.shape for a in inputs])
        g = geo["num_group"]
        acc = _acc_dtype(dy.dtype)
        dx = conv_backward_data(dy.astype(acc, copy=False), w.astype(acc, copy=False), x.shape[2:],
                                geo["stride"], geo["dilate"], geo["pad"], g)
        return [_out(dx, dy.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        dy, w, x = inputs
        geo = self.geo(attrs)
        g = ograds[0]
        return [F.apply("_backward_Deconvolution_data", [g, w, dy], **geo)[0],
                F.apply("_backward_Convolution_weight", [dy, g], **geo)[0],
                F.zeros_like(x)]


@register("_backward_Convolution_weight")
class ConvolutionBackwardWeight(_ConvFamily):
    """Gradient of Convolution w.r.t. its weight: correlation of `data` windows with `ograd`;
    shape (ograd channels, data channels / num_group, *kernel)."""
    inputs = ("ograd", "data")

    def _out_shape(self, attrs, in_shapes):
        dy, x = in_shapes
        g = max(attrs["num_group"], 1)
        f = int(dy[1]) if dy is not None and len(dy) > 1 else 0
        c = int(x[1]) if x is not None and len(x) > 1 else 0
        return (f, c // g if c else 0) + tuple(attrs["kernel"])

    def check_shapes(self, attrs, shapes):
        dy, x = shapes
        geo = self.geo(attrs)
        self._ndim_check(attrs, {"ograd": dy, "data": x})
        g = geo["num_group"]
        if x[1] % g or dy[1] % g:
            raise MXNetError(f"{self.name}: channels of data {x} and ograd {dy} must be "
                             f"divisible by num_group {g}")
        if dy[0] != x[0]:
            raise MXNetError(f"{self.name}: batch of ograd {dy} and data {x} differ")
        expect = conv_out_size(x[2:], geo["kernel"], geo["stride"], geo["dilate"], geo["pad"])
        if any(o > e for o, e in zip(dy[2:], expect)):
            raise MXNetError(f"{self.name}: ograd spatial size {dy[2:]} exceeds the "
                             f"convolution output {expect} of data {x}")

    def compute(self, attrs, inputs, ctx):
        dy, x = inputs
        geo = self.geo(attrs)
        self.check_shapes(attrs, [a.shape for a in inputs])
        g = geo["num_group"]
        acc = _acc_dtype(dy.dtype)
        dw = conv_backward_weight(dy.astype(acc, copy=False), x.astype(acc, copy=False),
                                  geo["kernel"], geo["stride"], geo["dilate"], geo["pad"], g)
        return [_out(dw, dy.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        dy, x = inputs
        geo = self.geo(attrs)
        g = ograds[0]
        return [F.apply("_backward_Deconvolution_data", [x, g, dy], **geo)[0],
                F.apply("_backward_Convolution_data", [dy, g, x], **geo)[0]]


@register("_backward_Deconvolution_data")
class DeconvolutionBackwardData(_ConvFamily):
    """Plain convolution of `ograd` with `weight` whose output spatial size is that of `data`
    (the gradient of Deconvolution w.r.t. its data; `data` is read for its shape only)."""
    inputs = ("ograd", "weight", "data")

    def _out_shape(self, attrs, in_shapes):
        return in_shapes[2]

    def check_shapes(self, attrs, shapes):
        a, w, x = shapes
        geo = self.geo(attrs)
        self._ndim_check(attrs, {"ograd": a, "data": x})
        self._weight_check(geo, w)
        g = geo["num_group"]
        self._channels("ograd", a[1], w[1] * g)
        self._channels("data", x[1], w[0])
        if w[0] % g:
            raise MXNetError(f"{self.name}: weight {w} has {w[0]} filters, not divisible by num_group {g}")
        if a[0] != x[0]:
            raise MXNetError(f"{self.name}: batch of ograd {a} and data {x} differ")

    def compute(self, attrs, inputs, ctx):
        a, w, x = inputs
        geo = self.geo(attrs)
        self.check_shapes(attrs, [t.shape for t in inputs])
        g = geo["num_group"]
        acc = _acc_dtype(a.dtype)
        y = conv_forward(a.astype(acc, copy=False), w.astype(acc, copy=False), geo["stride"],
                         geo["dilate"], geo["pad"], g, out_sp=x.shape[2:])
        return [_out(y, a.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        a, w, x = inputs
        geo = self.geo(attrs)
        g = ograds[0]
        return [F.apply("_backward_Convolution_data", [g, w, a], **geo)[0],
                F.apply("_backward_Convolution_weight", [g, a], **geo)[0],
                F.zeros_like(x)]


# ======================================================================================
# Deconvolution
# ======================================================================================

_DECONV_PARAMS = {
    "kernel": Param(Shape, doc="Deconvolution kernel size: (w,), (h, w) or (d, h, w)."),
    "stride": Param(Shape, (), "The stride of the corresponding convolution; defaults to 1."),
    "dilate": Param(Shape, (), "Dilation; defaults to 1 for each dimension."),
    "pad": Param(Shape, (), "Padding of the corresponding convolution; ignored with target_shape."),
    "adj": Param(Shape, (), "Adjustment for output shape; ignored with target_shape."),
    "target_shape": Param(Shape, (), "Shape of the output tensor: (w,), (h, w) or (d, h, w)."),
    "num_filter": Param(Int, doc="Number of output filters."),
    "num_group": Param(Int, 1, "Number of groups partition."),
    "workspace": Param(Int, 512, "Maximum temporary workspace allowed (MB)."),
    "no_bias": Param(Bool, True, "Whether to disable bias parameter."),
    "cudnn_tune": Param(Optional(Enum("off", "limited_workspace", "fastest")), None,
                        "Whether to pick convolution algorithm by running performance test."),
    "cudnn_off": Param(Bool, False, "Turn off cudnn for this layer."),
    "layout": Param(Optional(Enum(*_LAYOUTS)), None, "Layout of data, weight and output."),
}


@register("Deconvolution")
class Deconvolution(Op):
    """Transposed convolution (the gradient of Convolution w.r.t. its input, as a layer).

    data (N, C, *spatial), weight (C, num_filter/num_group, *kernel), bias (num_filter,);
    out spatial = stride*(in-1) + dilated_kernel - 2*pad + adj, or target_shape.
    """
    epilogue_host = True
    params = _DECONV_PARAMS
    inputs = ("data", "weight", "bias")
    kernel = "conv"

    def input_names(self, attrs):
        return ["data", "weight"] if attrs["no_bias"] else ["data", "weight", "bias"]

    def _geo(self, attrs, in_sp) -> tuple[dict, tuple]:
        """The geometry of the equivalent convolution (pad from target_shape if set) and adj."""
        geo = _geometry(self.name, attrs)
        pad, adj = deconv_pad_adj(attrs, in_sp)
        for i, (a, s) in enumerate(zip(adj, geo["stride"])):
            if a >= s:
                raise MXNetError(f"Deconvolution: adj[{i}]={a} must be smaller than stride[{i}]={s}")
        geo["pad"] = pad
        return geo, adj

    def infer_shape(self, attrs, in_shapes):
        nd = len(attrs["kernel"])
        d, w = in_shapes[0], in_shapes[1]
        _check_data_ndim(self.name, d, nd)
        geo, adj = self._geo(attrs, d[2:] if d is not None else (0,) * nd)
        g, nf = geo["num_group"], attrs["num_filter"]
        if nf <= 0:
            raise MXNetError(f"Deconvolution: num_filter must be positive, got {nf}")
        if nf % g:
            raise MXNetError(f"Deconvolution: num_filter {nf} must be divisible by num_group {g}")
        c = int(d[1]) if d is not None else 0
        if c and c % g:
            raise MXNetError(f"Deconvolution: input channels {c} must be divisible by num_group {g}")
        w = merge_shape(self.name, "weight", (c, nf // g) + geo["kernel"], w)
        if d is not None and not c and w[0]:
            d = (d[0], w[0]) + tuple(d[2:])
        shapes = [d, w]
        if not attrs["no_bias"]:
            shapes.append(merge_shape(self.name, "bias", (nf,), in_shapes[2]))
        if d is None:
            return shapes, [None]
        ext = _dilated(geo["kernel"], geo["dilate"])
        out = []
        target = tuple(attrs["target_shape"])
        for i, (x_, e, s, p, a) in enumerate(zip(d[2:], ext, geo["stride"], geo["pad"], adj)):
            if not _known(x_):
                out.append(target[i] if len(target) == nd and target[i] > 0 else 0)
                continue
            o = s * (x_ - 1) + e - 2 * p + a
            if o <= 0:
                raise MXNetError(f"Deconvolution: output size {o} on spatial axis {i} is not positive "
                                 f"(input {x_}, kernel {e}, stride {s}, pad {p}, adj {a})")
            if len(target) == nd and target[i] > 0 and target[i] != o:
                raise MXNetError(f"Deconvolution: target_shape[{i}]={target[i]} is not reachable; "
                                 f"the output would be {o}")
            out.append(o)
        return shapes, [(d[0], nf) + tuple(out)]

    def compute(self, attrs, inputs, ctx):
        x, w = inputs[0], inputs[1]
        _check_spatial_nonempty(self.name, x)
        expected, (oshape,) = self.infer_shape(attrs, [a.shape for a in inputs])
        for name, a, e in zip(self.input_names(attrs), inputs, expected):
            if tuple(a.shape) != tuple(e):
                raise MXNetError(f"Deconvolution: shape mismatch for {name}: expected {tuple(e)}, "
                                 f"got {a.shape}")
        geo, _ = self._geo(attrs, x.shape[2:])
        acc = _acc_dtype(x.dtype)
        y = conv_backward_data(x.astype(acc, copy=False), w.astype(acc, copy=False), oshape[2:],
                               geo["stride"], geo["dilate"], geo["pad"], geo["num_group"])
        if not attrs["no_bias"]:
            y = y + inputs[2].astype(acc, copy=False).reshape((1, -1) + (1,) * (y.ndim - 2))
        return [_out(y, x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        x, w = inputs[0], inputs[1]
        shape = getattr(x, "shape", None)
        nd = len(attrs["kernel"])
        in_sp = tuple(shape[2:]) if shape is not None and len(shape) == nd + 2 else (0,) * nd
        if any(t for t in attrs["target_shape"]) and not all(_known(d) for d in in_sp):
            raise MXNetError("Deconvolution: the gradient with target_shape needs the data shape "
                             f"to be known, got {_shape_str(shape)}")
        geo, _ = self._geo(attrs, in_sp)
        dy = ograds[0]
        grads = [F.apply("_backward_Deconvolution_data", [dy, w, x], **geo)[0],
                 F.apply("_backward_Convolution_weight", [x, dy], **geo)[0]]
        if not attrs["no_bias"]:
            grads.append(F.apply("_backward_bias", [dy, inputs[2]], axis=1)[0])
        return grads


# ======================================================================================
# Pooling
# ======================================================================================

_POOL_PARAMS = {
    "kernel": Param(Shape, (), "Pooling kernel size: (y, x) or (d, y, x)."),
    "pool_type": Param(Enum("max", "avg", "sum", "lp"), "max", "Pooling type to be applied."),
    "global_pool": Param(Bool, False, "Ignore kernel size, do global pooling over the input."),
    "cudnn_off": Param(Bool, False, "Turn off cudnn pooling and use MXNet pooling operator."),
    "pooling_convention": Param(Enum("full", "same", "valid"), "valid",
                                "Pooling convention to be applied."),
    "stride": Param(Shape, (), "Stride for pooling: (y, x) or (d, y, x). Defaults to 1."),
    "pad": Param(Shape, (), "Pad for pooling: (y, x) or (d, y, x). Defaults to no padding."),
    "p_value": Param(Optional(Int), None, "Value of p for Lp pooling, can be 1 or 2."),
    "count_include_pad": Param(Optional(Bool), None,
                               "Only used for AvgPool: whether padded values count in the divisor "
                               "(default True)."),
    "layout": Param(Optional(Enum(*_LAYOUTS)), None, "Set layout for input and output."),
}


def _pool_geometry(attrs, dshape) -> dict:
    """Effective pooling geometry for data of `dshape` (channel-first spatial dims)."""
    ndim = len(dshape)
    if ndim not in (3, 4, 5):
        raise MXNetError(f"Pooling: data should be 3D (batch, channel, x), 4D (batch, channel, y, x) "
                         f"or 5D (batch, channel, d, y, x), got shape {tuple(dshape)}")
    nd = ndim - 2
    kernel = tuple(attrs["kernel"])
    if attrs["global_pool"]:
        return {"kernel": tuple(dshape[2:]), "stride": (1,) * nd, "pad": (0,) * nd, "global": True}
    if len(kernel) == 0:
        raise MXNetError("Pooling: kernel must be given unless global_pool=True")
    if len(kernel) != nd:
        raise MXNetError(f"Pooling: a {len(kernel)}-D kernel {kernel} needs "
                         f"{len(kernel) + 2}-D data, got shape {tuple(dshape)}")
    if any(k <= 0 for k in kernel):
        raise MXNetError(f"Pooling: kernel must be positive, got {kernel}")
    stride = _fill("Pooling", "stride", attrs["stride"], nd, 1)
    if any(s <= 0 for s in stride):
        raise MXNetError(f"Pooling: stride must be positive, got {stride}")
    if attrs["pooling_convention"] == "same":
        if nd != 1:
            raise MXNetError(f"Pooling: pooling_convention 'same' supports 1-D pooling only, got "
                             f"{nd}-D kernel {kernel}")
        if any(attrs["pad"]):
            raise MXNetError("Pooling: 'same' pooling convention disables the use of pad")
        pad = (0,) * nd    # the convention pads itself: zeros of any length are accepted (MXNet)
    else:
        pad = _fill("Pooling", "pad", attrs["pad"], nd, 0)
    return {"kernel": kernel, "stride": stride, "pad": pad, "global": False}


def _pool_out_spatial(attrs, in_sp, geo) -> tuple:
    if geo["global"]:
        return (1,) * len(in_sp)
    out = []
    conv = attrs["pooling_convention"]
    for i, (d, k, s, p) in enumerate(zip(in_sp, geo["kernel"], geo["stride"], geo["pad"])):
        if not _known(d):
            out.append(0)
            continue
        if k > d + 2 * p:
            raise MXNetError(f"Pooling: kernel size ({k}) exceeds input ({d} padded to {d + 2 * p}) "
                             f"on spatial axis {i}")
        if conv == "valid":
            out.append(1 + (d + 2 * p - k) // s)
        elif conv == "full":
            out.append(1 + int(math.ceil((d + 2 * p - k) / s)))
        else:
            out.append(int(math.ceil((d + 2 * p) / s)))
    return tuple(out)


def _pool_divisor(in_sp, out_sp, geo, count_include_pad: bool, dtype) -> np.ndarray:
    """Per-output divisor of avg pooling (MXNet pool.h): window clipped to the padded input
    (count_include_pad) or to the real input, as a broadcastable array over out_sp."""
    nd = len(in_sp)
    div = np.ones((1, 1) + (1,) * nd, dtype=np.float64)
    for i, (d, o, k, s, p) in enumerate(zip(in_sp, out_sp, geo["kernel"], geo["stride"], geo["pad"])):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, d + p)
        if count_include_pad:
            size = end - start
        else:
            size = np.minimum(end, d) - np.maximum(start, 0)
        shape = [1] * (nd + 2)
        shape[2 + i] = o
        div = div * size.reshape(shape).astype(np.float64)
    return div.astype(dtype)


def _offset_slices(kernel, stride, out_sp):
    """(flat offset index, slices) of every kernel offset over a padded input."""
    for idx, kidx in enumerate(product(*(range(k) for k in kernel))):
        yield idx, (slice(None), slice(None)) + tuple(
            slice(k, k + (o - 1) * s + 1, s) for k, o, s in zip(kidx, out_sp, stride))


def _pool_padded(x, in_sp, out_sp, geo, value):
    after = [(o - 1) * s + k - d - p for d, o, k, s, p in
             zip(in_sp, out_sp, geo["kernel"], geo["stride"], geo["pad"])]
    return _pad_spatial(x, geo["pad"], after, value), after


def pool_forward(x: np.ndarray, attrs, geo) -> np.ndarray:
    """Channel-first pooling with MXNet's window clipping and divisors (see pool.h)."""
    in_sp = x.shape[2:]
    out_sp = _pool_out_spatial(attrs, in_sp, geo)
    ptype = attrs["pool_type"]
    acc = _acc_dtype(x.dtype)
    xa = x.astype(acc, copy=False)
    if ptype == "max":
        lowest = np.finfo(acc).min
        xp, _ = _pool_padded(xa, in_sp, out_sp, geo, -np.inf)
        out = np.full(x.shape[:2] + out_sp, lowest, dtype=acc)
        for _, sl in _offset_slices(geo["kernel"], geo["stride"], out_sp):
            np.fmax(out, xp[sl], out=out)
        return out
    p = _lp_p(attrs) if ptype == "lp" else 1
    vals = xa if p == 1 else (xa * xa if p == 2 else (xa * xa * xa if p == 3 else xa ** p))
    xp, _ = _pool_padded(vals, in_sp, out_sp, geo, 0.0)
    out = np.zeros(x.shape[:2] + out_sp, dtype=acc)
    for _, sl in _offset_slices(geo["kernel"], geo["stride"], out_sp):
        out += xp[sl]
    if ptype == "avg":
        cip = True if attrs["count_include_pad"] is None else attrs["count_include_pad"]
        with np.errstate(divide="ignore", invalid="ignore"):   # an all-padding window: 0/0 as in MXNet
            out /= _pool_divisor(in_sp, out_sp, geo, cip, acc)
    elif ptype == "lp":
        out = out if p == 1 else (np.sqrt(out) if p == 2 else (np.cbrt(out) if p == 3
                                                             else out ** (1.0 / p)))
    return out


def _lp_p(attrs) -> int:
    p = attrs["p_value"]
    if p is None:
        raise MXNetError("Pooling: p_value must be set for pool_type='lp'")
    if p <= 0:
        raise MXNetError(f"Pooling: p_value must be positive, got {p}")
    return p


def pool_backward(dy: np.ndarray, x: np.ndarray, y: np.ndarray, attrs, geo) -> np.ndarray:
    """Gradient of `pool_forward`: max routes each output gradient to the first maximal input
    of its window (row-major order, as MXNet's unpool), avg/sum/lp spread it over the window."""
    in_sp = x.shape[2:]
    out_sp = dy.shape[2:]
    acc = _acc_dtype(dy.dtype)
    dya = dy.astype(acc, copy=False)
    ptype = attrs["pool_type"]
    kernel, stride = geo["kernel"], geo["stride"]
    pad = geo["pad"]
    after = [(o - 1) * s + k - d - p for d, o, k, s, p in zip(in_sp, out_sp, kernel, stride, pad)]
    padded_sp = tuple(d + p + max(a, 0) for d, p, a in zip(in_sp, pad, after))
    dxp = np.zeros(x.shape[:2] + padded_sp, dtype=acc)
    if ptype == "max":
        arg = _max_window_argmax(x.astype(acc, copy=False), out_sp, geo)
        for idx, sl in _offset_slices(kernel, stride, out_sp):
            dxp[sl] += np.where(arg == idx, dya, 0)
    else:
        if ptype == "avg":
            cip = True if attrs["count_include_pad"] is None else attrs["count_include_pad"]
            with np.errstate(divide="ignore", invalid="ignore"):   # such windows touch no input
                g = dya / _pool_divisor(in_sp, out_sp, geo, cip, acc)
        else:
            g = dya
        if ptype == "lp":
            p = _lp_p(attrs)
            xa = x.astype(acc, copy=False)
            ya = y.astype(acc, copy=False)
            if p != 1:
                xp, _ = _pool_padded(xa, in_sp, out_sp, geo, 0.0)
                with np.errstate(divide="ignore", invalid="ignore"):
                    for _, sl in _offset_slices(kernel, stride, out_sp):
                        ratio = xp[sl] / ya
                        term = g * ratio ** (p - 1)
                        dxp[sl] += np.where(ya == 0, 0, term)
                crop = tuple(slice(pp, pp + d) for pp, d in zip(pad, in_sp))
                return dxp[(slice(None), slice(None)) + crop]
        for _, sl in _offset_slices(kernel, stride, out_sp):
            dxp[sl] += g
    crop = tuple(slice(pp, pp + d) for pp, d in zip(pad, in_sp))
    return dxp[(slice(None), slice(None)) + crop]


def _max_window_argmax(x: np.ndarray, out_sp, geo) -> np.ndarray:
    """Flat kernel-offset index of the first maximum (row-major) of every pooling window; -1
    for a window without a finite-comparable input (MXNet's unpool then routes nothing)."""
    xp, _ = _pool_padded(x, x.shape[2:], out_sp, geo, -np.inf)
    best = np.full(x.shape[:2] + tuple(out_sp), -np.inf, dtype=x.dtype)
    arg = np.full(best.shape, -1, dtype=np.int64)
    for idx, sl in _offset_slices(geo["kernel"], geo["stride"], out_sp):
        v = xp[sl]
        upd = v > best
        best = np.where(upd, v, best)
        arg[upd] = idx
    return arg


def _to_channel_first(x: np.ndarray, last: bool) -> np.ndarray:
    return np.moveaxis(x, -1, 1) if last else x


def _from_channel_first(x: np.ndarray, last: bool) -> np.ndarray:
    return np.moveaxis(x, 1, -1) if last else x


def _channel_first_shape(shape, last: bool):
    if shape is None or not last:
        return shape
    return (shape[0], shape[-1]) + tuple(shape[1:-1])


def _channel_last_shape(shape, last: bool):
    if shape is None or not last:
        return shape
    return (shape[0],) + tuple(shape[2:]) + (shape[1],)


@register("Pooling")
class Pooling(Op):
    """Max / average / sum / Lp pooling over 1-D, 2-D or 3-D windows (MXNet 1.x).

    Output size per spatial dim: valid 1 + (x + 2p - k) // s, full 1 + ceil((x + 2p - k) / s),
    same ceil((x + 2p) / s) (1-D only); global_pool reduces every spatial dim to 1.
    """
    params = _POOL_PARAMS
    kernel = "pool"

    def _last(self, attrs, ndim) -> bool:
        return _check_layout(self.name, attrs["layout"], ndim - 2, channel_last_ok=True)

    def infer_shape(self, attrs, in_shapes):
        d = in_shapes[0]
        if d is None:
            return [None], [None]
        last = self._last(attrs, len(d)) if len(d) in (3, 4, 5) else False
        dc = _channel_first_shape(d, last)
        geo = _pool_geometry(attrs, dc)
        out = (dc[0], dc[1]) + _pool_out_spatial(attrs, dc[2:], geo)
        if attrs["pool_type"] == "lp":
            _lp_p(attrs)
        return [tuple(d)], [_channel_last_shape(out, last)]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        self.infer_shape(attrs, [x.shape])
        last = self._last(attrs, x.ndim)
        _check_spatial_nonempty(self.name, _to_channel_first(x, last))
        xc = _to_channel_first(x, last)
        geo = _pool_geometry(attrs, xc.shape)
        y = pool_forward(xc, attrs, geo)
        return [_out(_from_channel_first(y, last), x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.apply("_backward_Pooling", [ograds[0], inputs[0], outputs[0]], **attrs)[0]]


@register("_backward_Pooling")
class PoolingBackward(Op):
    """Gradient of Pooling w.r.t. its data, from (ograd, data, output)."""
    params = _POOL_PARAMS
    inputs = ("ograd", "data", "output")
    kernel = "pool"
    hidden = True
    forward_op = "Pooling"
    forward_inputs = {"data": "data"}
    forward_outputs = {"ograd": 0, "output": 0}

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), [in_shapes[1]]

    def compute(self, attrs, inputs, ctx):
        dy, x, y = inputs
        _, (oshape,) = get_op("Pooling").infer_shape(attrs, [x.shape])
        for what, a in (("ograd", dy), ("output", y)):
            if tuple(a.shape) != tuple(oshape):
                raise MXNetError(f"_backward_Pooling: shape mismatch for {what}: expected "
                                 f"{tuple(oshape)}, got {a.shape}")
        last = _check_layout(self.name, attrs["layout"], x.ndim - 2, channel_last_ok=True)
        xc, dyc, yc = (_to_channel_first(a, last) for a in (x, dy, y))
        geo = _pool_geometry(attrs, xc.shape)
        dx = pool_backward(dyc, xc, yc, attrs, geo)
        return [_out(_from_channel_first(dx, last), dy.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        dy, x, y = inputs
        if attrs["pool_type"] == "max":
            g = F.apply("_pool_max_gather", [ograds[0], x], **attrs)[0]
        elif attrs["pool_type"] in ("avg", "sum"):
            g = F.apply("Pooling", [ograds[0]], **attrs)[0]     # these backward maps are self-adjoint
        else:
            raise MXNetError("_backward_Pooling: second-order gradient of lp pooling is not supported")
        return [g, F.zeros_like(x), F.zeros_like(y)]


@register("_pool_max_gather")
class PoolMaxGather(Op):
    """For every max-pooling window of `data`, the value of `src` (shaped like data) at the
    window's first maximum (0 for a window without one): the adjoint of max-pooling's backward."""
    params = _POOL_PARAMS
    inputs = ("src", "data")
    kernel = "pool"
    hidden = True

    def infer_shape(self, attrs, in_shapes):
        if attrs["pool_type"] != "max":
            raise MXNetError(f"_pool_max_gather: pool_type must be 'max', got {attrs['pool_type']!r}")
        like = merge_shape(self.name, "input 'src' (shaped like data)", in_shapes[1], in_shapes[0])
        _, (out,) = get_op("Pooling").infer_shape(attrs, [like])
        return [like, like], [out]

    def compute(self, attrs, inputs, ctx):
        src, x = inputs
        if src.shape != x.shape:
            raise MXNetError(f"_pool_max_gather: src shape {src.shape} must equal data shape {x.shape}")
        if attrs["pool_type"] != "max":
            raise MXNetError(f"_pool_max_gather: pool_type must be 'max', got {attrs['pool_type']!r}")
        get_op("Pooling").infer_shape(attrs, [x.shape])
        last = _check_layout(self.name, attrs["layout"], x.ndim - 2, channel_last_ok=True)
        xc, sc = _to_channel_first(x, last), _to_channel_first(src, last)
        geo = _pool_geometry(attrs, xc.shape)
        out_sp = _pool_out_spatial(attrs, xc.shape[2:], geo)
        acc = _acc_dtype(src.dtype)
        arg = _max_window_argmax(xc.astype(_acc_dtype(x.dtype), copy=False), out_sp, geo)
        sp, _ = _pool_padded(sc.astype(acc, copy=False), xc.shape[2:], out_sp, geo, 0.0)
        out = np.zeros(arg.shape, dtype=acc)
        for idx, sl in _offset_slices(geo["kernel"], geo["stride"], out_sp):
            out += np.where(arg == idx, sp[sl], 0)
        return [_out(_from_channel_first(out, last), src.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        src, x = inputs
        y = F.apply("Pooling", [x], **attrs)[0]
        return [F.apply("_backward_Pooling", [ograds[0], x, y], **attrs)[0], F.zeros_like(x)]


# ======================================================================================
# UpSampling
# ======================================================================================

_UP_PARAMS = {
    "scale": Param(Int, doc="Up sampling scale."),
    "num_filter": Param(Int, 0, "Input filter. Only used by bilinear sample_type (= channels)."),
    "sample_type": Param(Enum("nearest", "bilinear"), doc="Upsampling method."),
    "multi_input_mode": Param(Enum("concat", "sum"), "concat",
                              "How to handle multiple inputs: concat along channels or sum."),
    "num_args": Param(Count, doc="Number of inputs to be upsampled (1 for bilinear)."),
    "workspace": Param(Int, 512, "Tmp workspace for deconvolution (MB)."),
}


def _bilinear_deconv_attrs(attrs) -> dict:
    """UpSampling(bilinear) is Deconvolution with this fixed geometry (MXNet upsampling.cc)."""
    s = attrs["scale"]
    k = 2 * s - s % 2
    p = int(math.ceil((s - 1) / 2.0))
    c = attrs["num_filter"]
    return {"kernel": (k, k), "stride": (s, s), "pad": (p, p), "dilate": (1, 1), "adj": (0, 0),
            "target_shape": (), "num_filter": c, "num_group": c, "no_bias": True,
            "workspace": attrs["workspace"], "cudnn_tune": None, "cudnn_off": False, "layout": None}


@register("UpSampling")
class UpSampling(Op):
    """Upsample 4-D (N, C, H, W) inputs by `scale`: nearest-neighbour (one or more inputs,
    concatenated along channels or summed) or bilinear (a depthwise Deconvolution with a
    learnable `weight` of shape (C, 1, 2*scale - scale%2, 2*scale - scale%2))."""
    params = _UP_PARAMS
    inputs = ("data",)
    kernel = "shape"  # nearest: data movement; bilinear lowers to Deconvolution

    def input_names(self, attrs):
        if attrs["sample_type"] == "bilinear":
            return ["data", "weight"]
        return [f"arg{i}" for i in range(attrs["num_args"])]

    def _validate(self, attrs):
        if attrs["scale"] < 1:
            raise MXNetError(f"UpSampling: scale must be >= 1, got {attrs['scale']}")
        if attrs["num_args"] < 1:
            raise MXNetError(f"UpSampling: num_args must be >= 1, got {attrs['num_args']}")

    def infer_shape(self, attrs, in_shapes):
        self._validate(attrs)
        s = attrs["scale"]
        for i, sh in enumerate(in_shapes):
            if sh is not None and len(sh) != 4 and (attrs["sample_type"] == "nearest" or i == 0):
                raise MXNetError(f"UpSampling: input {self.input_names(attrs)[i]!r} must be 4-D "
                                 f"(batch, channel, y, x), got shape {tuple(sh)}")
        d = in_shapes[0]
        if attrs["sample_type"] == "bilinear":
            k = 2 * s - s % 2
            c = int(d[1]) if d is not None else 0
            if c and attrs["num_filter"] != c:
                raise MXNetError(f"UpSampling: bilinear needs num_filter equal to the input channels "
                                 f"({c}), got num_filter={attrs['num_filter']}")
            w = merge_shape(self.name, "weight", (c or attrs["num_filter"], 1, k, k), in_shapes[1])
            if d is None:
                return [d, w], [None]
            return [tuple(d), w], [(d[0], d[1], d[2] * s, d[3] * s)]
        if any(sh is None for sh in in_shapes):
            return list(in_shapes), [None]
        oh, ow = d[2] * s, d[3] * s
        channels = 0
        for i, sh in enumerate(in_shapes):
            if not (_known(sh[2]) and _known(sh[3]) and _known(oh) and _known(ow)):
                continue
            if oh % sh[2] or ow % sh[3]:
                raise MXNetError(f"UpSampling: input {i} of spatial size ({sh[2]}, {sh[3]}) does not "
                                 f"divide the output size ({oh}, {ow})")
        if attrs["multi_input_mode"] == "sum":
            cs = {int(sh[1]) for sh in in_shapes if _known(sh[1])}
            if len(cs) > 1:
                raise MXNetError(f"UpSampling: number of channels must be the same when "
                                 f"multi_input_mode==sum, got {[tuple(sh) for sh in in_shapes]}")
            channels = cs.pop() if cs else 0
        else:
            channels = sum(int(sh[1]) for sh in in_shapes) if all(_known(sh[1]) for sh in in_shapes) else 0
        return [tuple(sh) for sh in in_shapes], [(d[0], channels, oh, ow)]

    def compute(self, attrs, inputs, ctx):
        _, (oshape,) = self.infer_shape(attrs, [a.shape for a in inputs])
        if attrs["sample_type"] == "bilinear":
            deconv = get_op("Deconvolution")
            return deconv.compute(deconv.parse(_bilinear_deconv_attrs(attrs)), inputs, ctx)
        acc = _acc_dtype(inputs[0].dtype)
        out = np.zeros(oshape, dtype=acc)
        begin = 0
        for a in inputs:
            r = oshape[2] // a.shape[2]
            up = np.repeat(np.repeat(a.astype(acc, copy=False), r, axis=2), oshape[3] // a.shape[3], axis=3)
            if attrs["multi_input_mode"] == "sum":
                out += up
            else:
                out[:, begin:begin + a.shape[1]] = up
                begin += a.shape[1]
        return [_out(out, inputs[0].dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        if attrs["sample_type"] == "bilinear":
            deconv = get_op("Deconvolution")
            return deconv.grad(F, deconv.parse(_bilinear_deconv_attrs(attrs)), inputs, outputs, ograds)
        return [F.apply("_backward_UpSampling", [ograds[0]] + list(inputs), index=i,
                        scale=attrs["scale"], multi_input_mode=attrs["multi_input_mode"],
                        num_args=attrs["num_args"])[0]
                for i in range(len(inputs))]


@register("_backward_UpSampling")
class UpSamplingBackward(Op):
    """Gradient of nearest UpSampling w.r.t. input `index`: the (channel slice of the) output
    gradient summed over each input pixel's block. Inputs: ograd, then every forward input."""
    params = {"index": Param(Int), "scale": Param(Int),
              "multi_input_mode": Param(Enum("concat", "sum"), "concat"), "num_args": Param(Count)}
    kernel = "reduce"
    hidden = True

    def input_names(self, attrs):
        return ["ograd"] + [f"arg{i}" for i in range(attrs["num_args"])]

    def infer_shape(self, attrs, in_shapes):
        i = attrs["index"]
        if not 0 <= i < attrs["num_args"]:
            raise MXNetError(f"_backward_UpSampling: index {i} out of range for {attrs['num_args']} inputs")
        fwd = dict(scale=attrs["scale"], num_args=attrs["num_args"], sample_type="nearest",
                   multi_input_mode=attrs["multi_input_mode"])
        args, ograd = forward_shapes(self.name, "UpSampling", fwd, in_shapes[1:], {0: in_shapes[0]})
        return [ograd[0], *args], [args[i]]

    def compute(self, attrs, inputs, ctx):
        self.infer_shape(attrs, [a.shape for a in inputs])
        dy, args = inputs[0], inputs[1:]
        i = attrs["index"]
        a = args[i]
        begin = 0 if attrs["multi_input_mode"] == "sum" else sum(b.shape[1] for b in args[:i])
        g = dy[:, begin:begin + a.shape[1]]
        rh, rw = dy.shape[2] // a.shape[2], dy.shape[3] // a.shape[3]
        if g.shape[1] != a.shape[1] or rh * a.shape[2] != dy.shape[2] or rw * a.shape[3] != dy.shape[3]:
            raise MXNetError(f"_backward_UpSampling: ograd {dy.shape} does not match input {a.shape}")
        acc = _acc_dtype(dy.dtype)
        s = g.astype(acc, copy=False).reshape(a.shape[0], a.shape[1], a.shape[2], rh, a.shape[3], rw)
        return [_out(s.sum(axis=(3, 5)), dy.dtype)]

    differentiable = False

    def grad(self, F, attrs, inputs, outputs, ograds):
        raise MXNetError("_backward_UpSampling: second-order gradient is not supported")


# ======================================================================================
# Embedding
# ======================================================================================

@register("Embedding")
class Embedding(Op):
    """Map integer indices to rows of `weight` (input_dim, output_dim); out shape
    data.shape + (output_dim,). Indices are truncated to integers and clipped to
    [0, input_dim - 1] (MXNet's CPU behaviour). No gradient flows to the indices."""
    params = {
        "input_dim": Param(Int, doc="Vocabulary size of the input indices."),
        "output_dim": Param(Int, doc="Dimension of the embedding vectors."),
        "dtype": Param(Dtype, "float32", "Data type of weight."),
        "sparse_grad": Param(Bool, False, "Compute row sparse gradient (dense here)."),
    }
    inputs = ("data", "weight")
    kernel = "gather"

    def infer_shape(self, attrs, in_shapes):
        if attrs["input_dim"] <= 0 or attrs["output_dim"] <= 0:
            raise MXNetError(f"Embedding: input_dim and output_dim must be positive, got "
                             f"{attrs['input_dim']} and {attrs['output_dim']}")
        d, w = in_shapes
        w = merge_shape(self.name, "weight", (attrs["input_dim"], attrs["output_dim"]), w)
        if d is None:
            return [d, w], [None]
        return [tuple(d), w], [tuple(d) + (attrs["output_dim"],)]

    def infer_type(self, attrs, in_types):
        d, w = in_types
        dt = attrs["dtype"]
        if w is not None and w != dt:
            raise MXNetError(f"Embedding: dtype mismatch for input 'weight': expected {dt}, got {w}")
        return [d, dt], [dt]

    def compute(self, attrs, inputs, ctx):
        idx, w = inputs
        self.infer_shape(attrs, [idx.shape, w.shape])
        if w.shape != (attrs["input_dim"], attrs["output_dim"]):
            raise MXNetError(f"Embedding: shape mismatch for weight: expected "
                             f"{(attrs['input_dim'], attrs['output_dim'])}, got {w.shape}")
        ii = _embedding_indices(idx, attrs["input_dim"])
        return [_out(w[ii], w.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        idx, w = inputs
        sparse = {"sparse_grad": True} if attrs["sparse_grad"] else {}   # row_sparse weight gradient
        return [F.zeros_like(idx),
                F.apply("_backward_Embedding", [ograds[0], idx], input_dim=attrs["input_dim"],
                        output_dim=attrs["output_dim"], **sparse)[0]]


def _embedding_indices(idx: np.ndarray, input_dim: int) -> np.ndarray:
    """Indices as int64, truncated toward zero (C cast) and clipped to the vocabulary."""
    if np.issubdtype(idx.dtype, np.floating):
        with np.errstate(invalid="ignore"):
            ii = np.nan_to_num(np.trunc(idx), nan=0.0, posinf=input_dim - 1, neginf=0.0)
        ii = np.clip(ii, 0, input_dim - 1).astype(np.int64)
    else:
        ii = np.clip(idx.astype(np.int64), 0, input_dim - 1)
    return ii


@register("_backward_Embedding")
class EmbeddingBackward(Op):
    """Scatter-add of `ograd` rows into a zero (input_dim, output_dim) matrix at `data` indices
    (`sparse_grad`: eagerly, a RowSparseNDArray of the indexed rows, ndarray/sparse_ops.py)."""
    params = {"input_dim": Param(Int), "output_dim": Param(Int),
              "sparse_grad": Param(Bool, False, "row_sparse result (eager NDArrays)")}
    inputs = ("ograd", "data")
    kernel = "gather"
    hidden = True
    forward_op = "Embedding"
    forward_inputs = {"data": "data"}
    forward_outputs = {"ograd": 0}

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), [(attrs["input_dim"], attrs["output_dim"])]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[0]]

    def compute(self, attrs, inputs, ctx):
        dy, idx = inputs
        n, m = attrs["input_dim"], attrs["output_dim"]
        if dy.shape != idx.shape + (m,):
            raise MXNetError(f"_backward_Embedding: ograd shape {dy.shape} must be data shape "
                             f"{idx.shape} + ({m},)")
        ii = _embedding_indices(idx, n).reshape(-1)
        acc = np.float64 if dy.dtype == np.float64 else np.float32
        flat = (ii[:, None] * m + np.arange(m)[None, :]).reshape(-1)
        out = np.bincount(flat, weights=dy.reshape(-1).astype(acc), minlength=n * m)
        return [_out(out.reshape(n, m), dy.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        dy, idx = inputs
        return [F.apply("Embedding", [idx, ograds[0]], input_dim=attrs["input_dim"],
                        output_dim=attrs["output_dim"],
                        dtype=np.dtype(getattr(dy, "dtype", np.float32)).name)[0],
                F.zeros_like(idx)]


# ======================================================================================
# GridGenerator and BilinearSampler (spatial transformer networks)
# ======================================================================================

def _affine_grid_dst(h: int, w: int, dtype) -> np.ndarray:
    """MXNet's (3, H*W) destination grid: x, y in [-1, 1] computed in `dtype` as mshadow does:
    -1 + j * DType(2.0 / (W - 1)), and a row of ones."""
    dt = np.dtype(dtype).type
    with np.errstate(divide="ignore", invalid="ignore"):
        sx = dt(np.float64(2.0) / np.float64(w - 1))
        sy = dt(np.float64(2.0) / np.float64(h - 1))
        j = np.arange(h * w)
        gx = dt(-1.0) + (j % w).astype(dt) * sx
        gy = dt(-1.0) + (j // w).astype(dt) * sy
    return np.stack([gx, gy, np.ones(h * w, dtype=dt)]).astype(dt)


def _warp_scale(h: int, w: int, dtype) -> np.ndarray:
    """(2, 1, 1) scale [(W-1)/2, (H-1)/2] computed as DType((DType(n) - 1.0) / 2.0)."""
    dt = np.dtype(dtype).type
    return np.array([(float(dt(w)) - 1.0) / 2.0, (float(dt(h)) - 1.0) / 2.0],
                    dtype=np.float64).astype(dt).reshape(2, 1, 1)


@register("GridGenerator")
class GridGenerator(Op):
    """Sampling grid for BilinearSampler. affine: data (N, 6) -> (N, 2, H, W) with
    out = theta (2x3) . [x; y; 1] over the normalised target grid; warp: data is an optical
    flow (N, 2, H, W), out = (flow + pixel grid) / ((W-1)/2, (H-1)/2) - 1."""
    params = {"transform_type": Param(Enum("affine", "warp"), doc="The type of transformation."),
              "target_shape": Param(Shape, (0, 0), "Output shape (H, W) for affine.")}
    kernel = "gemm"  # affine: a batched (2x3) x (3xHW) product; warp is elementwise

    def infer_shape(self, attrs, in_shapes):
        d = in_shapes[0]
        if attrs["transform_type"] == "affine":
            t = tuple(attrs["target_shape"])
            if len(t) != 2 or t[0] <= 0 or t[1] <= 0:
                raise MXNetError(f"GridGenerator: incorrect target_shape {t}; affine needs (H, W) > 0")
            if d is None:
                return [d], [None]
            if len(d) != 2 or (_known(d[1]) and d[1] != 6):
                raise MXNetError(f"GridGenerator: affine data must be (batch, 6), got {tuple(d)}")
            return [(d[0], 6)], [(d[0], 2) + t]
        if d is None:
            return [d], [None]
        if len(d) != 4 or (_known(d[1]) and d[1] != 2):
            raise MXNetError(f"GridGenerator: warp data must be an optical flow (batch, 2, h, w), "
                             f"got {tuple(d)}")
        return [(d[0], 2, d[2], d[3])], [(d[0], 2, d[2], d[3])]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        self.infer_shape(attrs, [x.shape])
        dt = _acc_dtype(x.dtype)
        xa = x.astype(dt, copy=False)
        if attrs["transform_type"] == "affine":
            h, w = attrs["target_shape"]
            grid = _affine_grid_dst(h, w, dt)
            out = np.matmul(xa.reshape(-1, 2, 3), grid)
            return [_out(out.reshape(x.shape[0], 2, h, w), x.dtype)]
        n, _, h, w = x.shape
        gx = np.broadcast_to(np.arange(w, dtype=dt)[None, :], (h, w))
        gy = np.broadcast_to(np.arange(h, dtype=dt)[:, None], (h, w))
        grid = np.stack([gx, gy])
        with np.errstate(divide="ignore", invalid="ignore"):
            out = (xa + grid[None]) / _warp_scale(h, w, dt)[None] - dt.type(1)
        return [_out(out, x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.apply("_backward_GridGenerator", [ograds[0]], **attrs)[0]]


@register("_backward_GridGenerator")
class GridGeneratorBackward(Op):
    """Gradient of GridGenerator w.r.t. its data, from the output gradient (N, 2, H, W)."""
    params = GridGenerator.params
    inputs = ("ograd",)
    kernel = "gemm"
    hidden = True

    def infer_shape(self, attrs, in_shapes):
        g = in_shapes[0]
        if g is None:
            return [g], [None]
        if len(g) != 4 or g[1] not in (0, 2):
            raise MXNetError(f"_backward_GridGenerator: ograd must be (batch, 2, H, W), got {tuple(g)}")
        if attrs["transform_type"] == "affine":
            return [tuple(g)], [(g[0], 6)]
        return [tuple(g)], [tuple(g)]

    def compute(self, attrs, inputs, ctx):
        g = inputs[0]
        if g.ndim != 4 or g.shape[1] != 2:
            raise MXNetError(f"_backward_GridGenerator: ograd must be (batch, 2, H, W), got {g.shape}")
        dt = _acc_dtype(g.dtype)
        ga = g.astype(dt, copy=False)
        n, _, h, w = g.shape
        if attrs["transform_type"] == "affine":
            grid = _affine_grid_dst(h, w, dt)                      # (3, HW)
            d = np.matmul(ga.reshape(n, 2, h * w), grid.T)          # (N, 2, 3)
            return [_out(d.reshape(n, 6), g.dtype)]
        with np.errstate(divide="ignore", invalid="ignore"):
            return [_out(ga / _warp_scale(h, w, dt)[None], g.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        if attrs["transform_type"] == "affine":
            g = inputs[0]
            shape = getattr(g, "shape", None)
            if shape is None or not all(_known(d) for d in shape[2:]):
                raise MXNetError("_backward_GridGenerator: second-order gradient needs a known shape")
            return [F.apply("GridGenerator", [ograds[0]], transform_type="affine",
                            target_shape=(int(shape[2]), int(shape[3])))[0]]
        return [F.apply("_backward_GridGenerator", [ograds[0]], **attrs)[0]]


def _sampler_setup(data: np.ndarray, grid: np.ndarray):
    """Source coordinates, corner indices, weights and in-bounds masks, in MXNet's arithmetic.

    y_real = (gy + 1) * (H - 1) / 2 in DType; corner weight wy = 1 - (y_real - floor(y_real)).
    """
    dt = grid.dtype.type
    _, _, ih, iw = data.shape
    gx, gy = grid[:, 0], grid[:, 1]                                   # (N, OH, OW)
    with np.errstate(invalid="ignore", over="ignore"):
        x_real = (gx + dt(1)) * dt(iw - 1) / dt(2)
        y_real = (gy + dt(1)) * dt(ih - 1) / dt(2)
        fx = np.floor(x_real)
        fy = np.floor(y_real)
        big = np.float64(2 ** 30)
        tlx = np.clip(np.nan_to_num(fx.astype(np.float64), nan=-2.0), -big, big).astype(np.int64)
        tly = np.clip(np.nan_to_num(fy.astype(np.float64), nan=-2.0), -big, big).astype(np.int64)
        wx = (1.0 - (x_real - tlx.astype(dt)).astype(np.float64)).astype(dt)
        wy = (1.0 - (y_real - tly.astype(dt)).astype(np.float64)).astype(dt)
    corners = []
    for oy, ox in ((0, 0), (0, 1), (1, 0), (1, 1)):
        yy, xx = tly + oy, tlx + ox
        ok = (xx >= 0) & (xx <= iw - 1) & (yy >= 0) & (yy <= ih - 1)
        corners.append((np.clip(yy, 0, ih - 1), np.clip(xx, 0, iw - 1), ok))
    return wx, wy, corners


def _gather_corner(data: np.ndarray, yy, xx, ok) -> np.ndarray:
    """data[n, c, yy[n], xx[n]] where ok, else 0; shape (N, C, OH, OW)."""
    n = data.shape[0]
    nidx = np.arange(n).reshape(n, 1, 1)
    v = data[nidx, :, yy, xx]                  # (N, OH, OW, C)
    v = np.moveaxis(v, -1, 1)
    return np.where(ok[:, None], v, data.dtype.type(0))


@register("BilinearSampler")
class BilinearSampler(Op):
    """Bilinear sampling of data (N, C, H, W) at grid (N, 2, OH, OW) of normalised source
    coordinates (x, y in [-1, 1]); points outside the input read zeros (MXNet 1.x CPU
    arithmetic, so results match digit for digit)."""
    params = {"cudnn_off": Param(Optional(Bool), None, "Whether to turn cudnn off.")}
    inputs = ("data", "grid")
    kernel = "gather"

    def infer_shape(self, attrs, in_shapes):
        d, g = in_shapes
        if d is not None and len(d) != 4:
            raise MXNetError(f"BilinearSampler: data must be 4-D (batch, channel, y, x), got {tuple(d)}")
        if g is not None and (len(g) != 4 or (_known(g[1]) and g[1] != 2)):
            raise MXNetError(f"BilinearSampler: grid must be (batch, 2, y, x), got {tuple(g)}")
        if d is not None and g is not None and _known(d[0]) and _known(g[0]) and d[0] != g[0]:
            raise MXNetError(f"BilinearSampler: batch size of data {tuple(d)} and grid {tuple(g)} differ")
        if d is not None and g is not None:
            n = d[0] or g[0]
            d = (n,) + tuple(d[1:])
            g = (n, 2) + tuple(g[2:])
        elif g is not None:
            g = (g[0], 2) + tuple(g[2:])
        if d is None or g is None:
            return [d, g], [None]
        return [d, g], [(d[0], d[1], g[2], g[3])]

    def compute(self, attrs, inputs, ctx):
        data, grid = inputs
        self.infer_shape(attrs, [data.shape, grid.shape])
        dt = _acc_dtype(data.dtype)
        da = data.astype(dt, copy=False)
        ga = grid.astype(dt, copy=False)
        wx, wy, corners = _sampler_setup(da, ga)
        tl, tr, bl, br = (_gather_corner(da, *c) for c in corners)
        wx, wy = wx[:, None], wy[:, None]
        f64 = np.float64
        # Same evaluation order and precision as MXNet: the first product is in DType, the
        # others are promoted to double by the `1.0 - w` factors; the sum is in double.
        t1 = (tl * wy) * wx
        t2 = (tr * wy).astype(f64) * (1.0 - wx.astype(f64))
        t3 = (bl.astype(f64) * (1.0 - wy.astype(f64))) * wx.astype(f64)
        t4 = (br.astype(f64) * (1.0 - wy.astype(f64))) * (1.0 - wx.astype(f64))
        out = ((t1.astype(f64) + t2) + t3) + t4
        return [_out(out, data.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        data, grid = inputs
        return [F.apply("_backward_BilinearSampler_data", [ograds[0], data, grid])[0],
                F.apply("_backward_BilinearSampler_grid", [ograds[0], data, grid])[0]]


class _SamplerBackward(Op):
    """Shared input checks and sampling geometry of the BilinearSampler gradients."""
    inputs = ("ograd", "data", "grid")
    kernel = "gather"
    hidden = True
    forward_op = "BilinearSampler"
    forward_inputs = {"data": "data", "grid": "grid"}
    forward_outputs = {"ograd": 0}
    differentiable = False

    def _prepare(self, inputs):
        dy, data, grid = inputs
        if data.ndim != 4 or grid.ndim != 4 or grid.shape[1] != 2 or dy.shape != (
                data.shape[0], data.shape[1], grid.shape[2], grid.shape[3]) or grid.shape[0] != data.shape[0]:
            raise MXNetError(f"{self.name}: inconsistent shapes ograd {dy.shape}, data {data.shape}, "
                             f"grid {grid.shape}")
        dt = _acc_dtype(data.dtype)
        da, ga = data.astype(dt, copy=False), grid.astype(dt, copy=False)
        wx, wy, corners = _sampler_setup(da, ga)
        return dy.astype(np.float64), da, wx.astype(np.float64), wy.astype(np.float64), corners


@register("_backward_BilinearSampler_data")
class BilinearSamplerBackwardData(_SamplerBackward):
    """Gradient of BilinearSampler w.r.t. data: each output gradient scattered to its four
    source corners with the bilinear weights."""

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), [in_shapes[1]]

    def compute(self, attrs, inputs, ctx):
        dy, da, wx, wy, corners = self._prepare(inputs)
        n, c, ih, iw = da.shape
        weights = (wy * wx, wy * (1 - wx), (1 - wy) * wx, (1 - wy) * (1 - wx))
        total = np.zeros(n * c * ih * iw, dtype=np.float64)
        nidx = np.arange(n).reshape(n, 1, 1, 1)
        cidx = np.arange(c).reshape(1, c, 1, 1)
        for (yy, xx, ok), wgt in zip(corners, weights):
            flat = ((nidx * c + cidx) * ih + yy[:, None]) * iw + xx[:, None]
            contrib = np.where(ok[:, None], dy * wgt[:, None], 0.0)
            total += np.bincount(flat.reshape(-1), weights=contrib.reshape(-1), minlength=total.size)
        return [_out(total.reshape(da.shape), inputs[1].dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        raise MXNetError(f"{self.name}: second-order gradient is not supported")


@register("_backward_BilinearSampler_grid")
class BilinearSamplerBackwardGrid(_SamplerBackward):
    """Gradient of BilinearSampler w.r.t. grid (MXNet's formula, one-sided at integer points)."""

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), [in_shapes[2]]

    def compute(self, attrs, inputs, ctx):
        dy, da, wx, wy, corners = self._prepare(inputs)
        _, _, ih, iw = da.shape
        tl, tr, bl, br = (_gather_corner(da, *c).astype(np.float64) for c in corners)
        mix = tl - tr - bl + br
        gy = -(dy * (tr - br + mix * wx[:, None])).sum(axis=1)
        gx = -(dy * (bl - br + mix * wy[:, None])).sum(axis=1)
        out = np.stack([gx * (iw - 1) / 2.0, gy * (ih - 1) / 2.0], axis=1)
        return [_out(out, inputs[2].dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        raise MXNetError(f"{self.name}: second-order gradient is not supported")


# The helpers passes and code generators share with the ops above (public names; the ops'
# own code keeps the short private ones).
conv_geometry = _geometry
pool_geometry = _pool_geometry
lp_pool_power = _lp_p
