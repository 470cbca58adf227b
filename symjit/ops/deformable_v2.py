"""Modulated deformable convolution (MXNet 1.9.1's `_contrib_ModulatedDeformableConvolution`,
DCNv2, Zhu et al. 2019).

Inputs data (N, C, H, W), offset (N, G * 2K, OH, OW), mask (N, G * K, OH, OW), weight
(num_filter, C / num_group, kh, kw), bias (num_filter,), with K = kh * kw taps and
G = num_deformable_group; attributes and tap positions as DeformableConvolution's
(`symjit.ops.deformable`). The difference is the sampling and the mask: a point (h, w) with
-1 < h < H and -1 < w < W reads the bilinear interpolation of its four neighbours, a neighbour
outside the image counting as 0 (MXNet's dmcn_im2col_bilinear); other points read 0. Each
sampled value is multiplied by mask[n, g * K + k, oh, ow] before it meets the weight.

Gradients (hidden `_backward_ModulatedDeformableConvolution`): data by scattering the masked
column gradient to the four neighbours with the bilinear weights; offset by the derivative of
the interpolation (times the mask); mask by the unmasked sampled value times the column
gradient, summed over the group's channels; weight and bias as a convolution's.
"""
from __future__ import annotations

import numpy as np

from .attrs import Int, Param
from .deformable import (_PARAMS, DeformableConvBackward, DeformableConvForward, _err, _geometry,
                         _input_shapes, grouped_product, tap_positions)
from .registry import merge_shape, register

_V2_PARAMS = dict(_PARAMS, im2col_step=Param(Int, 64, "images per im2col step; no effect"))


def _v2_shapes(attrs, in_shapes):
    """(refined shapes of data, offset, mask, weight[, bias], output shape or None)."""
    v1 = [in_shapes[0], in_shapes[1]] + list(in_shapes[3:])
    shapes, out = _input_shapes(attrs, v1)
    mask = in_shapes[2]
    if out is not None:
        kh, kw = _geometry(attrs)["kernel"]
        mask = merge_shape("ModulatedDeformableConvolution", "input 'mask'",
                           (out[0], attrs["num_deformable_group"] * kh * kw) + tuple(out[2:]), mask)
    return shapes[:2] + [mask] + shapes[2:], out


class _ZeroPaddedSampling:
    """Bilinear sampling of one forward over the image padded with one row / column of zeros
    on each side: per (n, group, tap * position) the four neighbours' flat indices into the
    padded map, their weights (0 for points outside (-1, H) x (-1, W)), and the fractions."""

    def __init__(self, x: np.ndarray, offset: np.ndarray, geo: dict, dg: int):
        n, _, h, w = x.shape
        kh, kw = geo["kernel"]
        oh, ow = offset.shape[2:]
        k = kh * kw
        hs, ws = tap_positions(offset.astype(np.float64).reshape(n, dg, k, 2, oh, ow), geo, np.float64)
        self.valid = ((hs > -1) & (ws > -1) & (hs < h) & (ws < w)).reshape(n, dg, -1)
        hl, wl = np.floor(hs), np.floor(ws)
        self.lh = np.where(self.valid, (hs - hl).reshape(n, dg, -1), 0.0)
        self.lw = np.where(self.valid, (ws - wl).reshape(n, dg, -1), 0.0)
        # neighbours in the padded map (H + 2, W + 2): indices shifted by one, clipped for the
        # invalid points (whose weights are 0)
        hl = np.clip(hl.astype(np.int64) + 1, 0, h).reshape(n, dg, -1)
        wl = np.clip(wl.astype(np.int64) + 1, 0, w).reshape(n, dg, -1)
        pw_ = w + 2
        self.index = (hl * pw_ + wl, hl * pw_ + wl + 1, (hl + 1) * pw_ + wl, (hl + 1) * pw_ + wl + 1)
        self.shape = (n, dg, k, oh * ow)
        self.padded = (h + 2, w + 2)

    def weights(self):
        lh, lw, ok = self.lh, self.lw, self.valid
        return tuple(np.where(ok, v, 0.0) for v in ((1 - lh) * (1 - lw), (1 - lh) * lw, lh * (1 - lw), lh * lw))

    def corners(self, xp: np.ndarray):
        """Neighbour values (N, G, Cg, K * L) each, from the padded maps xp (N, G, Cg, (H+2)(W+2))."""
        return [np.take_along_axis(xp, idx[:, :, None, :], axis=3) for idx in self.index]


def _padded_groups(x: np.ndarray, dg: int) -> np.ndarray:
    n, c = x.shape[:2]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    return xp.reshape(n, dg, c // dg, -1)


def _sampled(x, offset, mask, attrs):
    """(sampling, unmasked sampled values (N, G, Cg, K * L), neighbour values, mask (N, G, 1, K * L))."""
    geo = _geometry(attrs)
    dg = attrs["num_deformable_group"]
    s = _ZeroPaddedSampling(x, offset, geo, dg)
    vals = s.corners(_padded_groups(x, dg))
    sample = sum(wt[:, :, None, :] * v for wt, v in zip(s.weights(), vals))
    m = mask.astype(np.float64).reshape(x.shape[0], dg, 1, -1)
    return s, sample, vals, m


def _check(attrs, inputs):
    shapes, out = _v2_shapes(attrs, [a.shape for a in inputs])
    for name, a, e in zip(("data", "offset", "mask", "weight", "bias"), inputs, shapes):
        if tuple(a.shape) != tuple(e):
            raise _err(f"shape mismatch for input {name!r}: expected {tuple(e)}, got {a.shape}")
    if min(inputs[0].shape[2:]) < 1 or min(out[2:]) < 1:
        raise _err(f"data has an empty spatial extent: shape {inputs[0].shape}")
    return out


def _group_weight(weight: np.ndarray, g: int) -> np.ndarray:
    return weight.astype(np.float64).reshape(g, weight.shape[0] // g, -1)


@register("_contrib_ModulatedDeformableConvolution")
class ModulatedDeformableConvolution(DeformableConvForward):
    """Deformable convolution whose sampled values are scaled by a learned per-tap mask."""
    params = _V2_PARAMS
    inputs = ("data", "offset", "mask", "weight", "bias")
    shape_rule = staticmethod(_v2_shapes)

    def compute(self, attrs, inputs, ctx):
        x, offset, mask, weight = inputs[:4]
        out = _check(attrs, inputs)
        _, sample, _, m = _sampled(x, offset, mask, attrs)
        col = (sample * m).reshape(x.shape[0], -1, out[2] * out[3])
        bias = None if attrs["no_bias"] else inputs[4]
        return [grouped_product(attrs, col, weight, bias, out, x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return list(F.apply("_backward_ModulatedDeformableConvolution", [ograds[0], *inputs], **attrs))


@register("_backward_ModulatedDeformableConvolution")
class BackwardModulatedDeformableConvolution(DeformableConvBackward):
    """Gradients of ModulatedDeformableConvolution w.r.t. data, offset, mask, weight (and bias)
    from (d output, data, offset, mask, weight[, bias])."""
    params = _V2_PARAMS
    inputs = ("ograd", "data", "offset", "mask", "weight", "bias")
    outputs = ("data_grad", "offset_grad", "mask_grad", "weight_grad", "bias_grad")
    shape_rule = staticmethod(_v2_shapes)

    def compute(self, attrs, inputs, ctx):
        dy, x, offset, mask, weight = inputs[:5]
        out = _check(attrs, inputs[1:])
        if dy.shape != out:
            raise _err(f"ograd must have shape {out}, got {dy.shape}")
        g, dg = _geometry(attrs)["num_group"], attrs["num_deformable_group"]
        n, c = x.shape[:2]
        s, sample, vals, m = _sampled(x, offset, mask, attrs)
        l = out[2] * out[3]
        nf = weight.shape[0]
        dyr = dy.astype(np.float64).reshape(n, g, nf // g, l)
        wm = _group_weight(weight, g)
        col = (sample * m).reshape(n, g, -1, l)
        dweight = np.einsum("ngfl,ngkl->gfk", dyr, col, optimize=True)
        dcol = np.einsum("gfk,ngfl->ngkl", wm, dyr, optimize=True).reshape(n, dg, c // dg, -1)
        dmasked = dcol * m
        # data: the masked column gradient scattered to the neighbours in the padded maps
        hp, wp = s.padded
        base = (np.arange(n * dg * (c // dg)) * (hp * wp)).reshape(n, dg, c // dg, 1)
        ddata = np.zeros(x.size // (x.shape[2] * x.shape[3]) * hp * wp)
        for wt, idx in zip(s.weights(), s.index):
            ddata += np.bincount((base + idx[:, :, None, :]).reshape(-1),
                                 weights=(dmasked * wt[:, :, None, :]).reshape(-1), minlength=ddata.size)
        ddata = ddata.reshape(n, c, hp, wp)[:, :, 1:-1, 1:-1]
        v1, v2, v3, v4 = vals
        lh, lw = s.lh[:, :, None, :], s.lw[:, :, None, :]
        d_h = ((1 - lw) * (v3 - v1) + lw * (v4 - v2)) * dmasked
        d_w = ((1 - lh) * (v2 - v1) + lh * (v4 - v3)) * dmasked
        ok = s.valid
        k = s.shape[2]
        doff = np.stack([np.where(ok, d_h.sum(axis=2), 0.0), np.where(ok, d_w.sum(axis=2), 0.0)], axis=3)
        doff = doff.reshape(n, dg, k, l, 2).transpose(0, 1, 2, 4, 3).reshape(offset.shape)
        dmask = np.where(ok, (dcol * sample).sum(axis=2), 0.0).reshape(mask.shape)
        grads = [ddata.astype(x.dtype), doff.astype(offset.dtype), dmask.astype(mask.dtype),
                 dweight.reshape(weight.shape).astype(weight.dtype)]
        if not attrs["no_bias"]:
            grads.append(dy.astype(np.float64).sum(axis=(0, 2, 3)).astype(inputs[5].dtype))
        return grads
