"""Deformable position-sensitive ROI pooling (MXNet 1.9.1's `_contrib_DeformablePSROIPooling`,
Dai et al. 2017), MXNet's CPU kernel.

Inputs data (N, output_dim * group_size^2, H, W), rois (R, 5) = (batch, x1, y1, x2, y2) and,
unless no_trans, trans (R, 2 * num_classes, part_size, part_size). For roi r the region is
[round(x1) * s - 0.5, (round(x2) + 1) * s - 0.5] (likewise y; s = spatial_scale; width and
height at least 0.1), split into pooled_size^2 bins. Bin (ph, pw) of output channel c is moved
by (trans[r, 2 cls, i, j], trans[r, 2 cls + 1, i, j]) * trans_std * (roi width, roi height)
with i = floor(ph / pooled_size * part_size), j likewise and cls = c // (output_dim /
num_classes); it averages sample_per_part^2 points on a regular grid from the bin's corner,
skipping points outside [-0.5, W - 0.5] x [-0.5, H - 0.5] and clamping the others into the map,
each the bilinear interpolation of channel (c * group_size + gh) * group_size + gw (gh, gw: the
bin's group). A bin without points is 0.

Gradients (hidden `_backward_DeformablePSROIPooling`): data by the bilinear weights of each
point times d output / count; trans by the interpolation's slope along x and y (at the clamped
point) times trans_std and the roi's width / height; rois get none.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Float, Int, Param
from .deformable import float_types
from .registry import Op, register

_PARAMS = {
    "spatial_scale": Param(Float, doc="ratio of the feature map to the image"),
    "output_dim": Param(Int, doc="output channels"),
    "group_size": Param(Int, doc="position-sensitive groups per side"),
    "pooled_size": Param(Int, doc="bins per side of the output"),
    "part_size": Param(Int, 0, "parts per side of trans (0: pooled_size)"),
    "sample_per_part": Param(Int, 1, "sampling points per bin side"),
    "trans_std": Param(Float, 0.0, "scale of the offsets in trans"),
    "no_trans": Param(Bool, False, "no trans input (no offsets)"),
}
_OP = "DeformablePSROIPooling"


def _err(msg: str) -> MXNetError:
    return MXNetError(f"{_OP}: {msg}")


def _part_size(attrs) -> int:
    return attrs["part_size"] or attrs["pooled_size"]


def _shapes(attrs, in_shapes):
    """(input shapes, output shape or None), checked."""
    for key in ("output_dim", "group_size", "pooled_size", "sample_per_part"):
        if attrs[key] < 1:
            raise _err(f"{key} must be positive, got {attrs[key]}")
    d, r = in_shapes[0], in_shapes[1]
    if d is not None:
        need = attrs["output_dim"] * attrs["group_size"] ** 2
        if len(d) != 4 or (d[1] and d[1] != need):
            raise _err(f"data must be (N, output_dim * group_size^2 = {need}, H, W), got {tuple(d)}")
    if r is not None and (len(r) != 2 or r[1] != 5):
        raise _err(f"rois must have shape (R, 5), got {tuple(r)}")
    shapes = [d, r]
    if not attrs["no_trans"]:
        t = in_shapes[2]
        p = _part_size(attrs)
        if t is not None:
            if len(t) != 4 or t[1] % 2 or t[2:] != (p, p) or (r is not None and t[0] != r[0]):
                raise _err(f"trans must be (R, 2 * num_classes, {p}, {p}), got {tuple(t)}")
            if attrs["output_dim"] % (t[1] // 2):
                raise _err(f"output_dim {attrs['output_dim']} must be divisible by num_classes {t[1] // 2}")
        shapes.append(t)
    if r is None:
        return shapes, None
    p = attrs["pooled_size"]
    return shapes, (r[0], attrs["output_dim"], p, p)


@dataclass
class _Points:
    """Every sampling point, shaped (R, C, P, P, S * S): batch, channel read, clamped position,
    whether it counts, the trans entries that moved it (flat indices), and the roi sizes."""
    batch: np.ndarray
    channel: np.ndarray
    x: np.ndarray
    y: np.ndarray
    used: np.ndarray
    trans_x: np.ndarray | None
    trans_y: np.ndarray | None
    roi_w: np.ndarray
    roi_h: np.ndarray


def _points(attrs, data_shape, rois: np.ndarray, trans) -> _Points:
    n, _, h, w = data_shape
    k, g, p, s = attrs["output_dim"], attrs["group_size"], attrs["pooled_size"], attrs["sample_per_part"]
    part = _part_size(attrs)
    scale = attrs["spatial_scale"]
    ro = rois.astype(np.float64)
    batch = ro[:, 0].astype(np.int64)
    if batch.size and (batch.min() < 0 or batch.max() >= n):
        raise _err(f"roi batch indices must be in [0, {n}), got {sorted(set(batch.tolist()))}")
    rnd = lambda v: np.where(v >= 0, np.floor(v + 0.5), np.ceil(v - 0.5))
    x1, y1 = rnd(ro[:, 1]) * scale - 0.5, rnd(ro[:, 2]) * scale - 0.5
    x2, y2 = (rnd(ro[:, 3]) + 1.0) * scale - 0.5, (rnd(ro[:, 4]) + 1.0) * scale - 0.5
    roi_w, roi_h = np.maximum(x2 - x1, 0.1), np.maximum(y2 - y1, 0.1)
    r = rois.shape[0]
    c = np.arange(k)[None, :, None, None]
    ph = np.arange(p)[None, None, :, None]
    pw = np.arange(p)[None, None, None, :]
    rr = np.arange(r)[:, None, None, None]
    if attrs["no_trans"]:
        tx = ty = np.zeros((r, k, p, p))
        ix = iy = None
    else:
        classes = trans.shape[1] // 2
        cls = c // (k // classes)
        i = np.floor(ph / p * part).astype(np.int64)
        j = np.floor(pw / p * part).astype(np.int64)
        ix = (((rr * classes + cls) * 2) * part + i) * part + j
        iy = (((rr * classes + cls) * 2 + 1) * part + i) * part + j
        flat = trans.astype(np.float64).reshape(-1)
        tx, ty = flat[ix] * attrs["trans_std"], flat[iy] * attrs["trans_std"]
    bw, bh = (roi_w / p)[:, None, None, None], (roi_h / p)[:, None, None, None]
    wstart = pw * bw + x1[:, None, None, None] + tx * roi_w[:, None, None, None]
    hstart = ph * bh + y1[:, None, None, None] + ty * roi_h[:, None, None, None]
    sy, sx = np.divmod(np.arange(s * s), s)
    xs = wstart[..., None] + sx * (bw / s)[..., None]
    ys = hstart[..., None] + sy * (bh / s)[..., None]
    used = (xs >= -0.5) & (xs <= w - 0.5) & (ys >= -0.5) & (ys <= h - 0.5)
    gw = np.clip(np.floor(pw * g / p).astype(np.int64), 0, g - 1)
    gh = np.clip(np.floor(ph * g / p).astype(np.int64), 0, g - 1)
    channel = np.broadcast_to(((c * g + gh) * g + gw)[..., None], xs.shape)
    expand = lambda a: None if a is None else np.broadcast_to(np.broadcast_to(a, (r, k, p, p))[..., None], xs.shape)
    return _Points(batch=np.broadcast_to(batch[:, None, None, None, None], xs.shape), channel=channel,
                   x=np.clip(xs, 0.0, w - 1.0), y=np.clip(ys, 0.0, h - 1.0), used=used,
                   trans_x=expand(ix), trans_y=expand(iy),
                   roi_w=np.broadcast_to(roi_w[:, None, None, None, None], xs.shape),
                   roi_h=np.broadcast_to(roi_h[:, None, None, None, None], xs.shape))


def _corners(pts: _Points, data_shape):
    """Flat indices into data of the four neighbours (x0 y0, x0 y1, x1 y0, x1 y1) and the fractions."""
    _, c, h, w = data_shape
    x0, y0 = np.floor(pts.x).astype(np.int64), np.floor(pts.y).astype(np.int64)
    x1, y1 = np.ceil(pts.x).astype(np.int64), np.ceil(pts.y).astype(np.int64)
    plane = (pts.batch * c + pts.channel) * (h * w)
    index = [plane + yy * w + xx for xx, yy in ((x0, y0), (x0, y1), (x1, y0), (x1, y1))]
    return index, pts.x - x0, pts.y - y0


def _weights(dx, dy):
    return ((1 - dx) * (1 - dy), (1 - dx) * dy, dx * (1 - dy), dx * dy)


class _Deformable(Op):
    params = _PARAMS

    def _names(self, attrs, names):
        return names[:-1] if attrs["no_trans"] else names


@register("_contrib_DeformablePSROIPooling")
class DeformablePSROIPooling(_Deformable):
    """Position-sensitive ROI pooling whose bins are moved by learned offsets."""
    inputs = ("data", "rois", "trans")

    def input_names(self, attrs):
        return self._names(attrs, list(self.inputs))

    def infer_shape(self, attrs, in_shapes):
        shapes, out = _shapes(attrs, in_shapes)
        return shapes, [out]

    def infer_type(self, attrs, in_types):
        return float_types(self, attrs, in_types, _err)

    def compute(self, attrs, inputs, ctx):
        data, rois = inputs[0], inputs[1]
        _, out = _shapes(attrs, [a.shape for a in inputs])
        pts = _points(attrs, data.shape, rois, None if attrs["no_trans"] else inputs[2])
        index, dx, dy = _corners(pts, data.shape)
        flat = data.astype(np.float64).reshape(-1)
        values = sum(wt * flat[i] for wt, i in zip(_weights(dx, dy), index))
        count = pts.used.sum(axis=-1)
        total = np.where(pts.used, values, 0.0).sum(axis=-1)
        y = np.where(count > 0, total / np.maximum(count, 1), 0.0)
        return [y.reshape(out).astype(data.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        grads = list(F.apply("_backward_DeformablePSROIPooling", [ograds[0], *inputs], **attrs))
        return [grads[0], F.zeros_like(inputs[1])] + grads[1:]


@register("_backward_DeformablePSROIPooling")
class BackwardDeformablePSROIPooling(_Deformable):
    """d data (and d trans) of DeformablePSROIPooling from (d output, data, rois[, trans])."""
    inputs = ("ograd", "data", "rois", "trans")
    outputs = ("data_grad", "trans_grad")
    hidden = True
    differentiable = False

    def input_names(self, attrs):
        return self._names(attrs, list(self.inputs))

    def num_outputs(self, attrs):
        return 1 if attrs["no_trans"] else 2

    def infer_shape(self, attrs, in_shapes):
        shapes, _ = _shapes(attrs, in_shapes[1:])
        ins = [in_shapes[0]] + shapes
        return ins, [shapes[0]] + ([] if attrs["no_trans"] else [shapes[2]])

    def infer_type(self, attrs, in_types):
        t = next((x for x in in_types if x is not None), None)
        return [t] * len(in_types), [t] * self.num_outputs(attrs)

    def compute(self, attrs, inputs, ctx):
        dy_out, data, rois = inputs[:3]
        trans = None if attrs["no_trans"] else inputs[3]
        pts = _points(attrs, data.shape, rois, trans)
        index, dx, dy = _corners(pts, data.shape)
        count = pts.used.sum(axis=-1, keepdims=True)
        share = np.where(pts.used, dy_out.astype(np.float64)[..., None] / np.maximum(count, 1), 0.0)
        ddata = np.zeros(data.size)
        for wt, i in zip(_weights(dx, dy), index):
            ddata += np.bincount(i.reshape(-1), weights=(wt * share).reshape(-1), minlength=data.size)
        grads = [ddata.reshape(data.shape).astype(data.dtype)]
        if trans is not None:
            flat = data.astype(np.float64).reshape(-1)
            u00, u01, u10, u11 = (flat[i] for i in index)
            slope_x = u11 * dy + u10 * (1 - dy) - u01 * dy - u00 * (1 - dy)
            slope_y = u11 * dx + u01 * (1 - dx) - u10 * dx - u00 * (1 - dx)
            std = attrs["trans_std"]
            dtrans = np.bincount(pts.trans_x.reshape(-1), weights=(slope_x * share * std * pts.roi_w).reshape(-1),
                                 minlength=trans.size)
            dtrans += np.bincount(pts.trans_y.reshape(-1), weights=(slope_y * share * std * pts.roi_h).reshape(-1),
                                  minlength=trans.size)
            grads.append(dtrans.reshape(trans.shape).astype(trans.dtype))
        return grads
