"""Region-of-interest feature extraction (MXNet 1.9.1's contrib detection ops):
`_contrib_ROIAlign`, `_contrib_RROIAlign` and `_contrib_PSROIPooling`.

Semantics are MXNet's CPU kernels; the geometry (ROI corners, bin sizes, sample points) is
computed in the data's dtype as MXNet does, so bin boundaries and sample counts agree:
  * ROIAlign (Mask R-CNN): rois are (batch, x1, y1, x2, y2) scaled by `spatial_scale`
    (minus 0.5 when `aligned`); the ROI, at least 1x1 unless `aligned`, is cut into
    `pooled_size` bins, each the mean of `sample_ratio`^2 bilinear samples (or
    ceil(roi / pooled) per axis when `sample_ratio` <= 0) at the centres of a regular grid.
    A sample farther than one pixel outside the map reads 0; coordinates below 0 clamp to 0
    and the last row/column is replicated. `position_sensitive` reads, for output channel c
    and bin (ph, pw), input channel c * PH * PW + ph * PW + pw. A negative batch index gives
    zeros. Gradient: data only (rois get zeros), the adjoint of the sampling.
  * RROIAlign: rotated rois (batch, cx, cy, w, h, angle in degrees); bins laid out around the
    centre and rotated by the angle; samples as ROIAlign. MXNet defines no gradient.
  * PSROIPooling (R-FCN): corners rounded half away from zero, end + 1, scaled; at least
    0.1 wide; bin (ph, pw) of output channel c averages the integer window
    [floor(start), ceil(end)) of input channel (c * G + gh) * G + gw, G = group_size
    (default pooled_size), gh = floor(ph * G / PH); empty windows give 0. Gradient: data only.

ROIAlign and PSROIPooling are separable per ROI: with My (PH, H) and Mx (PW, W) the weights
of each bin along one axis, a ROI's output is My . data[b] . Mx^T, so forward and backward
are small matrix products per ROI, never loops over elements.
"""
from __future__ import annotations

import math

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Float, Int, Param, Shape
from .registry import LikeInput, Op, register

__all__ = ["roi_align_weights"]


def _err(op: str, msg: str) -> MXNetError:
    return MXNetError(f"{op}: {msg}")


def _float_type(op: str, in_types):
    d, r = in_types
    t = d or r
    if t is not None and np.dtype(t).kind != "f":
        raise _err(op, f"only supports floating-point data, got {np.dtype(t).name}")
    if d and r and d != r:
        raise _err(op, f"dtype mismatch for input 'rois': expected {d}, got {r}")
    return [t, t], [t]


def _check_rois(op: str, d, r, cols: int):
    if d is not None and len(d) != 4:
        raise _err(op, f"data must be 4-D (N, C, H, W), got shape {tuple(d)}")
    if r is not None and (len(r) != 2 or (r[1] and r[1] != cols)):
        raise _err(op, f"rois must have shape (R, {cols}), got {tuple(r)}")


def _batch_index(op: str, r: int, value, n: int) -> int:
    b = int(value)
    if b >= n:
        raise _err(op, f"roi {r} has batch index {b}, data has {n} images")
    return b


def _pooled(op: str, attrs) -> tuple[int, int]:
    ps = tuple(attrs["pooled_size"])
    if len(ps) != 2 or min(ps) < 1:
        raise _err(op, f"pooled_size must be two positive ints, got {ps}")
    return ps


class _ROIOp(Op):
    """Shared signature of the ROI ops: (data, rois) -> output, floating point, one dtype;
    the gradient (where MXNet has one) flows to data only, through `backward_op`."""
    inputs = ("data", "rois")
    kernel = "gather"
    backward_op: str | None = None

    def infer_type(self, attrs, in_types):
        return _float_type(self.name, in_types)

    def grad(self, F, attrs, inputs, outputs, ograds):
        if self.backward_op is None:
            return super().grad(F, attrs, inputs, outputs, ograds)
        d = F.apply(self.backward_op, [ograds[0], inputs[0], inputs[1]], **attrs)[0]
        return [d, F.zeros_like(inputs[1])]


class _ROIBackward(LikeInput):
    """d data of a ROI op from (d output, data, rois)."""
    like = 1
    inputs = ("ograd", "data", "rois")
    hidden = True
    differentiable = False


# --------------------------------------------------------------------------------------
# Caffe2-style bilinear sampling (ROIAlign, RROIAlign)
# --------------------------------------------------------------------------------------

def _axis_corners(coord: np.ndarray, size: int):
    """Low/high integer neighbours and the weight of the high one for sample coordinates
    along one axis of length `size` (MXNet's roi_align rule), plus which samples lie within
    one pixel of the map. Arithmetic stays in coord's dtype."""
    t = coord.dtype.type
    valid = (coord >= -1.0) & (coord <= size)
    c = np.where(coord <= 0, t(0), coord)
    low = np.floor(c).astype(np.int64)
    edge = low >= size - 1
    low = np.where(edge, size - 1, low)
    high = np.where(edge, size - 1, low + 1)
    c = np.where(edge, low.astype(coord.dtype), c)
    frac = (c - low.astype(coord.dtype)).astype(coord.dtype)
    return low, high, frac, valid


def roi_align_weights(coord: np.ndarray, size: int) -> np.ndarray:
    """(P, size) float64 matrix summing the bilinear weights of the samples coord (P, G)
    along one axis: row p is sum over g of the interpolation weights of sample (p, g)."""
    low, high, frac, valid = _axis_corners(coord, size)
    t = coord.dtype.type
    lo_w = np.where(valid, t(1) - frac, t(0)).astype(np.float64)
    hi_w = np.where(valid, frac, t(0)).astype(np.float64)
    p = coord.shape[0]
    rows = np.broadcast_to(np.arange(p)[:, None], coord.shape)
    m = np.zeros((p, size), dtype=np.float64)
    np.add.at(m, (rows, low), lo_w)
    np.add.at(m, (rows, high), hi_w)
    return m


def _sample_grid(t, start, bin_size, pooled: int, grid: int) -> np.ndarray:
    """Sample coordinates (pooled, grid): start + p * bin + (g + .5) * bin / grid, in dtype t."""
    p = np.arange(pooled).astype(t)[:, None]
    g = (np.arange(grid) + 0.5).astype(t)[None, :]
    return (t(start) + p * t(bin_size)) + g * t(bin_size) / t(grid)


def _grid_count(sample_ratio: int, bin_extent) -> int:
    """Samples per bin along one axis: `sample_ratio`, or ceil(bin extent) when it is <= 0."""
    return sample_ratio if sample_ratio > 0 else int(math.ceil(bin_extent))


# --------------------------------------------------------------------------------------
# ROIAlign
# --------------------------------------------------------------------------------------

_ROI_ALIGN_PARAMS = {
    "pooled_size": Param(Shape, doc="ROI Align output roi feature map height and width: (h, w)"),
    "spatial_scale": Param(Float, doc="ratio of the feature map to the image (1 / total stride)"),
    "sample_ratio": Param(Int, -1, "sampling points per bin and axis; <= 0: ceil(roi / pooled)"),
    "position_sensitive": Param(Bool, False, "position-sensitive channels (R-FCN style)"),
    "aligned": Param(Bool, False, "shift the ROI by -0.5 pixel (continuous coordinates)"),
}


def _roi_align_plan(op: str, attrs, data_shape, rois: np.ndarray, t):
    """Per ROI: (batch index or -1, My (PH, H), Mx (PW, W), 1 / sample count)."""
    n, _, h, w = data_shape
    ph, pw = _pooled(op, attrs)
    scale = t(attrs["spatial_scale"])
    off = t(0.5) if attrs["aligned"] else t(0)
    plans = []
    for r, roi in enumerate(rois.astype(t, copy=False)):
        b = int(roi[0])
        if b < 0:
            plans.append((-1, None, None, 0.0))
            continue
        b = _batch_index(op, r, roi[0], n)
        x1, y1, x2, y2 = (v * scale - off for v in roi[1:5])
        rw, rh = t(x2 - x1), t(y2 - y1)
        if attrs["aligned"]:
            if not (rw > 0 and rh > 0):
                raise _err(op, f"roi {r} has a non-positive size ({float(rw)} x {float(rh)}) with aligned=True")
        else:
            rw, rh = max(rw, t(1)), max(rh, t(1))
        bh, bw = t(rh / t(ph)), t(rw / t(pw))
        gh = _grid_count(attrs["sample_ratio"], rh / t(ph))
        gw = _grid_count(attrs["sample_ratio"], rw / t(pw))
        my = roi_align_weights(_sample_grid(t, y1, bh, ph, gh), h)
        mx = roi_align_weights(_sample_grid(t, x1, bw, pw, gw), w)
        plans.append((b, my, mx, 1.0 / float(t(gh * gw))))
    return plans


def _roi_align_shape(op: str, attrs, d, r):
    _check_rois(op, d, r, 5)
    ph, pw = _pooled(op, attrs)
    if d is None or r is None:
        return None
    c = d[1]
    if attrs["position_sensitive"]:
        if c and c % (ph * pw):
            raise _err(op, f"data channels {c} must be a multiple of pooled_size[0] * "
                           f"pooled_size[1] = {ph * pw} when position_sensitive")
        c = c // (ph * pw)
    return (r[0], c, ph, pw)


@register("_contrib_ROIAlign")
class ROIAlign(_ROIOp):
    """Bilinear-sampled average of each region of interest over `pooled_size` bins."""
    params = _ROI_ALIGN_PARAMS
    backward_op = "_backward_ROIAlign"

    def infer_shape(self, attrs, in_shapes):
        d, r = in_shapes
        return [d, r], [_roi_align_shape(self.name, attrs, d, r)]

    def compute(self, attrs, inputs, ctx):
        data, rois = inputs
        shape = _roi_align_shape(self.name, attrs, data.shape, rois.shape)
        ph, pw = _pooled(self.name, attrs)
        out = np.zeros(shape, dtype=np.float64)
        ps = attrs["position_sensitive"]
        for r, (b, my, mx, inv) in enumerate(_roi_align_plan(self.name, attrs, data.shape, rois, data.dtype.type)):
            if b < 0:
                continue
            img = data[b].astype(np.float64)
            if ps:
                img = img.reshape(shape[1], ph, pw, *img.shape[1:])
                out[r] = np.einsum("ph,cpqhw,qw->cpq", my, img, mx, optimize=True) * inv
            else:
                out[r] = np.einsum("ph,chw,qw->cpq", my, img, mx, optimize=True) * inv
        return [out.astype(data.dtype)]


@register("_backward_ROIAlign")
class BackwardROIAlign(_ROIBackward):
    """d data of ROIAlign from (d output, data, rois): each bin's gradient spread back over
    its samples' bilinear weights."""
    params = _ROI_ALIGN_PARAMS

    def compute(self, attrs, inputs, ctx):
        dy, data, rois = inputs
        ph, pw = _pooled(self.name, attrs)
        grad = np.zeros(data.shape, dtype=np.float64)
        ps = attrs["position_sensitive"]
        for r, (b, my, mx, inv) in enumerate(_roi_align_plan(self.name, attrs, data.shape, rois, data.dtype.type)):
            if b < 0:
                continue
            g = dy[r].astype(np.float64) * inv
            if ps:
                grad[b] += np.einsum("cpq,ph,qw->cpqhw", g, my, mx, optimize=True).reshape(data.shape[1:])
            else:
                grad[b] += np.einsum("cpq,ph,qw->chw", g, my, mx, optimize=True)
        return [grad.astype(data.dtype)]


# --------------------------------------------------------------------------------------
# RROIAlign
# --------------------------------------------------------------------------------------

@register("_contrib_RROIAlign")
class RROIAlign(_ROIOp):
    """ROIAlign over rotated regions (batch, cx, cy, w, h, angle in degrees)."""
    params = {
        "pooled_size": Param(Shape, doc="RROI align output shape (h, w)"),
        "spatial_scale": Param(Float, doc="ratio of the feature map to the image (1 / total stride)"),
        "sampling_ratio": Param(Int, -1, "sampling points per bin and axis; <= 0: ceil(roi / pooled)"),
    }

    def infer_shape(self, attrs, in_shapes):
        d, r = in_shapes
        _check_rois(self.name, d, r, 6)
        ph, pw = _pooled(self.name, attrs)
        out = None if d is None or r is None else (r[0], d[1], ph, pw)
        return [d, r], [out]

    def compute(self, attrs, inputs, ctx):
        data, rois = inputs
        self.infer_shape(attrs, [data.shape, rois.shape])
        n, c, h, w = data.shape
        ph, pw = _pooled(self.name, attrs)
        t = data.dtype.type
        scale = t(attrs["spatial_scale"])
        out = np.zeros((rois.shape[0], c, ph, pw), dtype=np.float64)
        for r, roi in enumerate(rois.astype(t, copy=False)):
            b = _batch_index(self.name, r, roi[0], n)
            if b < 0:
                raise _err(self.name, f"roi {r} has a negative batch index {b}")
            cx, cy, rw, rh = (v * scale for v in roi[1:5])
            theta = t(float(roi[5]) * math.pi / 180.0)
            rw, rh = max(rw, t(1)), max(rh, t(1))
            bh, bw = t(rh / t(ph)), t(rw / t(pw))
            gh = _grid_count(attrs["sampling_ratio"], rh / t(ph))
            gw = _grid_count(attrs["sampling_ratio"], rw / t(pw))
            yy = _sample_grid(t, -rh / t(2), bh, ph, gh)[:, :, None, None]     # (PH, gh, 1, 1)
            xx = _sample_grid(t, -rw / t(2), bw, pw, gw)[None, None]           # (1, 1, PW, gw)
            cos, sin = np.cos(theta), np.sin(theta)
            x = (xx * cos + yy * sin + cx).astype(t)
            y = (yy * cos - xx * sin + cy).astype(t)
            ylo, yhi, ly, vy = _axis_corners(y, h)
            xlo, xhi, lx, vx = _axis_corners(x, w)
            ok = (vy & vx).astype(np.float64)
            ly, lx = ly.astype(np.float64), lx.astype(np.float64)
            img = data[b].astype(np.float64)
            val = ((1 - ly) * (1 - lx) * img[:, ylo, xlo] + (1 - ly) * lx * img[:, ylo, xhi]
                   + ly * (1 - lx) * img[:, yhi, xlo] + ly * lx * img[:, yhi, xhi]) * ok
            out[r] = val.sum(axis=(2, 4)) / float(t(gh * gw))
        return [out.astype(data.dtype)]


# --------------------------------------------------------------------------------------
# PSROIPooling
# --------------------------------------------------------------------------------------

_PSROI_PARAMS = {
    "spatial_scale": Param(Float, doc="ratio of the feature map to the image (1 / total stride)"),
    "output_dim": Param(Int, doc="output channels"),
    "pooled_size": Param(Int, doc="bins per side of the pooled output"),
    "group_size": Param(Int, 0, "position-sensitive groups per side (0: pooled_size)"),
}


def _psroi_group(attrs) -> int:
    return attrs["group_size"] or attrs["pooled_size"]


def _psroi_check(op: str, attrs, d):
    if attrs["pooled_size"] < 1 or attrs["output_dim"] < 1 or _psroi_group(attrs) < 1:
        raise _err(op, f"pooled_size, output_dim and group_size must be positive, got "
                       f"{attrs['pooled_size']}, {attrs['output_dim']}, {attrs['group_size']}")
    if not 0.0 < attrs["spatial_scale"] <= 1.0:
        raise _err(op, f"spatial_scale must be in (0, 1], got {attrs['spatial_scale']}")
    g = _psroi_group(attrs)
    need = attrs["output_dim"] * g * g
    if d is not None and d[1] and d[1] != need:
        raise _err(op, f"data must have output_dim * group_size^2 = {need} channels, got {d[1]}")


def _round_half_away(v):
    return math.floor(v + 0.5) if v >= 0 else math.ceil(v - 0.5)


def _window_weights(t, start, bin_size, pooled: int, size: int) -> np.ndarray:
    """(pooled, size): 1 / window length inside bin p's window [floor, ceil) clipped to the map."""
    p = np.arange(pooled).astype(t)
    lo = np.clip(np.floor(p * t(bin_size) + t(start)).astype(np.int64), 0, size)
    hi = np.clip(np.ceil((p + t(1)) * t(bin_size) + t(start)).astype(np.int64), 0, size)
    idx = np.arange(size)
    inside = (idx[None, :] >= lo[:, None]) & (idx[None, :] < hi[:, None])
    length = np.maximum(hi - lo, 1)
    return inside / length[:, None].astype(np.float64)


def _psroi_plan(op: str, attrs, data_shape, rois: np.ndarray, t):
    n, _, h, w = data_shape
    p = attrs["pooled_size"]
    scale = t(attrs["spatial_scale"])
    plans = []
    for r, roi in enumerate(rois.astype(t, copy=False)):
        b = _batch_index(op, r, roi[0], n)
        if b < 0:
            raise _err(op, f"roi {r} has a negative batch index {b}")
        x1, y1, x2, y2 = (float(v) for v in roi[1:5])
        sw, sh = t(_round_half_away(x1)) * scale, t(_round_half_away(y1)) * scale
        ew, eh = t(_round_half_away(x2) + 1.0) * scale, t(_round_half_away(y2) + 1.0) * scale
        rw, rh = max(t(ew - sw), t(0.1)), max(t(eh - sh), t(0.1))
        my = _window_weights(t, sh, t(rh / t(p)), p, h)
        mx = _window_weights(t, sw, t(rw / t(p)), p, w)
        plans.append((b, my, mx))
    return plans


def _psroi_groups(attrs) -> np.ndarray:
    """Group index of each bin along one axis: floor(p * G / P) clipped to [0, G)."""
    p, g = attrs["pooled_size"], _psroi_group(attrs)
    return np.clip((np.arange(p) * g) // p, 0, g - 1)


@register("_contrib_PSROIPooling")
class PSROIPooling(_ROIOp):
    """Position-sensitive average pooling of regions of interest (R-FCN)."""
    params = _PSROI_PARAMS
    backward_op = "_backward_PSROIPooling"

    def infer_shape(self, attrs, in_shapes):
        d, r = in_shapes
        _check_rois(self.name, d, r, 5)
        _psroi_check(self.name, attrs, d)
        if r is None:
            return [d, r], [None]
        p = attrs["pooled_size"]
        return [d, r], [(r[0], attrs["output_dim"], p, p)]

    def compute(self, attrs, inputs, ctx):
        data, rois = inputs
        self.infer_shape(attrs, [data.shape, rois.shape])
        k, g, p = attrs["output_dim"], _psroi_group(attrs), attrs["pooled_size"]
        gi = _psroi_groups(attrs)
        out = np.zeros((rois.shape[0], k, p, p), dtype=np.float64)
        for r, (b, my, mx) in enumerate(_psroi_plan(self.name, attrs, data.shape, rois, data.dtype.type)):
            img = data[b].astype(np.float64).reshape(k, g, g, *data.shape[2:])
            sel = img[:, gi[:, None], gi[None, :]]                      # (K, P, P, H, W)
            out[r] = np.einsum("ph,cpqhw,qw->cpq", my, sel, mx, optimize=True)
        return [out.astype(data.dtype)]


@register("_backward_PSROIPooling")
class BackwardPSROIPooling(_ROIBackward):
    """d data of PSROIPooling: each bin's gradient spread evenly over its window."""
    params = _PSROI_PARAMS

    def compute(self, attrs, inputs, ctx):
        dy, data, rois = inputs
        k, g, p = attrs["output_dim"], _psroi_group(attrs), attrs["pooled_size"]
        gi = _psroi_groups(attrs)
        grad = np.zeros((data.shape[0], k, g, g) + data.shape[2:], dtype=np.float64)
        for r, (b, my, mx) in enumerate(_psroi_plan(self.name, attrs, data.shape, rois, data.dtype.type)):
            contrib = np.einsum("cpq,ph,qw->cpqhw", dy[r].astype(np.float64), my, mx, optimize=True)
            np.add.at(grad[b], (slice(None), gi[:, None], gi[None, :]), contrib)
        return [grad.reshape(data.shape).astype(data.dtype)]
