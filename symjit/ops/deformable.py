"""Deformable convolution (MXNet 1.9.1's `_contrib_DeformableConvolution`, Dai et al. 2017).

data (N, C, H, W), offset (N, G * 2 * kh * kw, OH, OW) with G = num_deformable_group,
weight (num_filter, C / num_group, kh, kw), bias (num_filter,). Kernel tap (i, j) of output
position (oh, ow) reads channel c of group g = c // (C / G) at

    h = oh * stride_h - pad_h + i * dilate_h + offset[n, g * 2K + 2 * (i * kw + j), oh, ow]
    w = ow * stride_w - pad_w + j * dilate_w + offset[n, g * 2K + 2 * (i * kw + j) + 1, oh, ow]

by bilinear interpolation (K = kh * kw). A point with h or w outside [0, H) x [0, W) reads 0;
inside, floor(h) >= H - 1 reads row H - 1 alone (likewise columns), as MXNet's
deformable_im2col. The sampled columns (N, C * K, OH * OW) then meet the weight as in a
grouped convolution. Gradients (hidden `_backward_DeformableConvolution`): data by scattering
the column gradient back with the same bilinear weights, offset by the derivative of the
interpolation along h and w (zero where a point reads 0 or sits on the clamped border),
weight and bias as a convolution's.
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Enum, Int, Optional, Param, Shape
from .nn_conv import conv_geometry, conv_out_size
from .registry import Op, merge_shape, register

_PARAMS = {
    "kernel": Param(Shape, doc="convolution kernel size (h, w)"),
    "stride": Param(Shape, (), "convolution stride; 1 per dimension by default"),
    "dilate": Param(Shape, (), "convolution dilation; 1 per dimension by default"),
    "pad": Param(Shape, (), "zero pad; none by default"),
    "num_filter": Param(Int, doc="number of output channels"),
    "num_group": Param(Int, 1, "number of group partitions"),
    "num_deformable_group": Param(Int, 1, "number of groups sharing one set of offsets"),
    "workspace": Param(Int, 1024, "maximum temporary workspace (MB); no effect"),
    "no_bias": Param(Bool, False, "whether to disable the bias"),
    "layout": Param(Optional(Enum("NCW", "NCHW", "NCDHW")), None, "layout of data, weight and output"),
}


def _err(msg: str) -> MXNetError:
    return MXNetError(f"DeformableConvolution: {msg}")


def _geometry(attrs) -> dict:
    geo = conv_geometry("DeformableConvolution", dict(attrs, layout=None))
    if len(geo["kernel"]) != 2:
        raise _err(f"only 2-D kernels are supported, got kernel={geo['kernel']}")
    if attrs["layout"] not in (None, "NCHW"):
        raise _err(f"only layout NCHW is supported, got {attrs['layout']}")
    if attrs["num_filter"] <= 0:
        raise _err(f"num_filter must be positive, got {attrs['num_filter']}")
    if attrs["num_filter"] % geo["num_group"]:
        raise _err(f"num_filter {attrs['num_filter']} must be divisible by num_group {geo['num_group']}")
    if attrs["num_deformable_group"] <= 0:
        raise _err(f"num_deformable_group must be positive, got {attrs['num_deformable_group']}")
    return geo


def _input_shapes(attrs, in_shapes):
    """(refined input shapes, output shape or None)."""
    geo = _geometry(attrs)
    kh, kw = geo["kernel"]
    g, dg, nf = geo["num_group"], attrs["num_deformable_group"], attrs["num_filter"]
    d, off, w = in_shapes[0], in_shapes[1], in_shapes[2]
    if d is not None and len(d) != 4:
        raise _err(f"data must be 4-D (N, C, H, W), got shape {tuple(d)}")
    c = int(d[1]) if d is not None else 0
    for groups, what in ((g, "num_group"), (dg, "num_deformable_group")):
        if c and c % groups:
            raise _err(f"input channels {c} must be divisible by {what} {groups}")
    w = merge_shape("DeformableConvolution", "input 'weight'", (nf, c // g if c else 0, kh, kw), w)
    shapes = [d, off, w]
    if not attrs["no_bias"]:
        shapes.append(merge_shape("DeformableConvolution", "input 'bias'", (nf,), in_shapes[3]))
    if d is None:
        return shapes, None
    if any(d[i] and e > d[i] + 2 * p for i, e, p in zip((2, 3), [(k - 1) * s + 1 for k, s in zip(
            geo["kernel"], geo["dilate"])], geo["pad"])):
        raise _err(f"the dilated kernel exceeds the padded input {tuple(d)}")
    out_sp = tuple(o if i else 0 for i, o in zip(d[2:], conv_out_size(
        d[2:], geo["kernel"], geo["stride"], geo["dilate"], geo["pad"])))
    shapes[1] = merge_shape("DeformableConvolution", "input 'offset'", (d[0], dg * 2 * kh * kw) + out_sp, off)
    return shapes, (d[0], nf) + out_sp


def tap_positions(offset: np.ndarray, geo: dict, dtype) -> tuple:
    """(h, w) positions (N, G, K, OH, OW), in `dtype`, that the kernel taps read for offsets
    (N, G, K, 2, OH, OW): the regular grid position of each tap plus its offsets."""
    kw = geo["kernel"][1]
    (sh, sw), (dh, dw), (ph, pw) = geo["stride"], geo["dilate"], geo["pad"]
    k, _, oh, ow = offset.shape[2:]
    i, j = np.divmod(np.arange(k), kw)
    base_h = (np.arange(oh) * sh - ph)[None, :, None] + (i * dh)[:, None, None]     # (K, OH, 1)
    base_w = (np.arange(ow) * sw - pw)[None, None, :] + (j * dw)[:, None, None]     # (K, 1, OW)
    return base_h.astype(dtype) + offset[:, :, :, 0], base_w.astype(dtype) + offset[:, :, :, 1]


class _Sampling:
    """The bilinear sampling of one forward: corner indices into each (n, group) map of
    H * W pixels, their weights, validity, and the fractional parts, all (N, G, K * L)."""

    def __init__(self, x: np.ndarray, offset: np.ndarray, geo: dict, dg: int):
        n, _, h, w = x.shape
        kh, kw = geo["kernel"]
        oh, ow = offset.shape[2:]
        k = kh * kw
        t = x.dtype.type
        hs, ws = tap_positions(offset.reshape(n, dg, k, 2, oh, ow), geo, t)
        self.valid = (hs >= 0) & (ws >= 0) & (hs < h) & (ws < w)
        hs = np.where(self.valid, hs, t(0))
        ws = np.where(self.valid, ws, t(0))
        hl, wl = np.floor(hs).astype(np.int64), np.floor(ws).astype(np.int64)
        h_edge, w_edge = hl >= h - 1, wl >= w - 1
        hl, wl = np.minimum(hl, h - 1), np.minimum(wl, w - 1)
        hh, wh = np.where(h_edge, hl, hl + 1), np.where(w_edge, wl, wl + 1)
        self.lh = np.where(h_edge, 0.0, hs - hl).astype(np.float64).reshape(n, dg, -1)
        self.lw = np.where(w_edge, 0.0, ws - wl).astype(np.float64).reshape(n, dg, -1)
        self.valid = self.valid.reshape(n, dg, -1)
        flat = lambda a, b: (a * w + b).reshape(n, dg, -1)
        self.index = (flat(hl, wl), flat(hl, wh), flat(hh, wl), flat(hh, wh))
        self.shape = (n, dg, k, oh * ow)

    def weights(self):
        lh, lw, ok = self.lh, self.lw, self.valid
        return tuple(np.where(ok, v, 0.0) for v in ((1 - lh) * (1 - lw), (1 - lh) * lw,
                                                     lh * (1 - lw), lh * lw))

    def corners(self, xg: np.ndarray):
        """Pixel values at the four corners: (N, G, Cg, K * L) each, from xg (N, G, Cg, H * W)."""
        return [np.take_along_axis(xg, idx[:, :, None, :], axis=3) for idx in self.index]


def _columns(x: np.ndarray, s: _Sampling, dg: int):
    """Deformable im2col: (N, C * K, L) in float64, and the corner values it came from."""
    n, c = x.shape[:2]
    xg = x.astype(np.float64).reshape(n, dg, c // dg, -1)
    vals = s.corners(xg)
    col = sum(wt[:, :, None, :] * v for wt, v in zip(s.weights(), vals))
    _, _, k, l = s.shape
    return col.reshape(n, c * k, l), vals


def _check_inputs(attrs, inputs):
    shapes, out = _input_shapes(attrs, [a.shape for a in inputs])
    names = ["data", "offset", "weight", "bias"]
    for name, a, e in zip(names, inputs, shapes):
        if tuple(a.shape) != tuple(e):
            raise _err(f"shape mismatch for input {name!r}: expected {tuple(e)}, got {a.shape}")
    if min(inputs[0].shape[2:]) < 1 or min(out[2:]) < 1:
        raise _err(f"data has an empty spatial extent: shape {inputs[0].shape}")
    return out


def float_types(op: Op, attrs, in_types, err) -> tuple:
    """Op's default type inference (one dtype throughout), refusing non-float data via `err`."""
    ins, outs = Op.infer_type(op, attrs, in_types)
    if outs[0] is not None and np.dtype(outs[0]).kind != "f":
        raise err(f"only supports floating-point data, got {outs[0]}")
    return ins, outs


def grouped_product(attrs, col: np.ndarray, weight: np.ndarray, bias, out: tuple, dtype) -> np.ndarray:
    """The convolution's output `out` (dtype) from sampled columns col (N, C * K, L): the
    grouped product with the weight, plus the bias (None: none)."""
    g = attrs["num_group"]
    n, ck, l = col.shape
    wm = weight.astype(np.float64).reshape(g, weight.shape[0] // g, -1)
    y = np.einsum("gfk,ngkl->ngfl", wm, col.reshape(n, g, ck // g, l), optimize=True).reshape(out)
    if bias is not None:
        y = y + bias.astype(np.float64).reshape(1, -1, 1, 1)
    return y.astype(dtype)


class DeformableConvFamily(Op):
    """What the deformable convolutions and their gradient ops share: the bias is the last
    input and optional (no_bias); `shape_rule(attrs, shapes) -> (input shapes, output shape)`
    refines the forward's input shapes."""
    params = _PARAMS
    kernel = "conv"
    shape_rule = staticmethod(_input_shapes)

    def input_names(self, attrs):
        return list(self.inputs[:-1]) if attrs["no_bias"] else list(self.inputs)


class DeformableConvForward(DeformableConvFamily):
    """A deformable convolution: one output, float data."""

    def infer_shape(self, attrs, in_shapes):
        shapes, out = self.shape_rule(attrs, in_shapes)
        return shapes, [out]

    def infer_type(self, attrs, in_types):
        return float_types(self, attrs, in_types, _err)


class DeformableConvBackward(DeformableConvFamily):
    """The gradient op of a deformable convolution: inputs (d output, forward inputs...),
    outputs the forward inputs' gradients, one dtype throughout."""
    hidden = True
    differentiable = False

    def num_outputs(self, attrs):
        return len(self.input_names(attrs)) - 1

    def infer_shape(self, attrs, in_shapes):
        shapes, out = self.shape_rule(attrs, in_shapes[1:])
        dy = merge_shape(self.name, "input 'ograd'", out, in_shapes[0])
        return [dy] + shapes, shapes

    def infer_type(self, attrs, in_types):
        t = next((x for x in in_types if x is not None), None)
        return [t] * len(in_types), [t] * (len(in_types) - 1)


@register("_contrib_DeformableConvolution")
class DeformableConvolution(DeformableConvForward):
    """Convolution whose kernel taps are displaced by learned per-position offsets."""
    inputs = ("data", "offset", "weight", "bias")

    def compute(self, attrs, inputs, ctx):
        x, offset, weight = inputs[:3]
        out = _check_inputs(attrs, inputs)
        geo = _geometry(attrs)
        dg = attrs["num_deformable_group"]
        s = _Sampling(x, offset, geo, dg)
        col, _ = _columns(x, s, dg)
        return [grouped_product(attrs, col, weight, inputs[3] if not attrs["no_bias"] else None, out, x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return list(F.apply("_backward_DeformableConvolution", [ograds[0], *inputs], **attrs))


@register("_backward_DeformableConvolution")
class BackwardDeformableConvolution(DeformableConvBackward):
    """Gradients of DeformableConvolution w.r.t. data, offset, weight (and bias) from
    (d output, data, offset, weight[, bias])."""
    inputs = ("ograd", "data", "offset", "weight", "bias")
    outputs = ("data_grad", "offset_grad", "weight_grad", "bias_grad")

    def compute(self, attrs, inputs, ctx):
        dy, x, offset, weight = inputs[:4]
        out = _check_inputs(attrs, inputs[1:])
        if dy.shape != out:
            raise _err(f"ograd must have shape {out}, got {dy.shape}")
        geo = _geometry(attrs)
        dg, g = attrs["num_deformable_group"], geo["num_group"]
        n, c, h, w = x.shape
        s = _Sampling(x, offset, geo, dg)
        col, vals = _columns(x, s, dg)
        _, ck, l = col.shape
        nf = weight.shape[0]
        dyr = dy.astype(np.float64).reshape(n, g, nf // g, l)
        wm = weight.astype(np.float64).reshape(g, nf // g, -1)
        dcol = np.einsum("gfk,ngfl->ngkl", wm, dyr, optimize=True).reshape(n, dg, c // dg, -1)
        dweight = np.einsum("ngfl,ngkl->gfk", dyr, col.reshape(n, g, ck // g, l), optimize=True)
        # data: scatter each corner's share of the column gradient
        base = (np.arange(n * dg * (c // dg)) * (h * w)).reshape(n, dg, c // dg, 1)
        ddata = np.zeros(x.size, dtype=np.float64)
        for wt, idx in zip(s.weights(), s.index):
            ddata += np.bincount((base + idx[:, :, None, :]).reshape(-1),
                                 weights=(dcol * wt[:, :, None, :]).reshape(-1), minlength=x.size)
        # offset: derivative of the interpolation along h and w, summed over the group's channels
        v1, v2, v3, v4 = vals
        lh, lw = s.lh[:, :, None, :], s.lw[:, :, None, :]
        d_h = ((1 - lw) * (v3 - v1) + lw * (v4 - v2)) * dcol
        d_w = ((1 - lh) * (v2 - v1) + lh * (v4 - v3)) * dcol
        ok = s.valid
        doff = np.stack([np.where(ok, d_h.sum(axis=2), 0.0), np.where(ok, d_w.sum(axis=2), 0.0)], axis=3)
        _, _, k, _ = s.shape
        doff = doff.reshape(n, dg, k, l, 2).transpose(0, 1, 2, 4, 3).reshape(offset.shape)
        grads = [ddata.reshape(x.shape).astype(x.dtype), doff.astype(offset.dtype),
                 dweight.reshape(weight.shape).astype(weight.dtype)]
        if not attrs["no_bias"]:
            grads.append(dy.astype(np.float64).sum(axis=(0, 2, 3)).astype(inputs[4].dtype))
        return grads
