"""MXNet 1.x's older vision and loss layers: `LRN`, `SVMOutput`, `ROIPooling`, `im2col` / `col2im`,
`SpatialTransformer`, `Crop`, `Correlation`.

Semantics are MXNet 1.9.1's:
  * LRN: out = x * (knorm + alpha / nsize * sum over the `nsize` nearest channels of x^2)^-beta;
    the normaliser is a second, hidden output (`tmp_norm`).
  * SVMOutput: identity forward; backward is the hinge-loss gradient w.r.t. the scores (L1 with
    `use_linear`, else squared hinge), scaled by `regularization_coefficient`; the head gradient
    is not read (a loss layer).
  * ROIPooling: max pooling of each region (batch index, x1, y1, x2, y2 scaled by
    `spatial_scale`, rounded half away from zero) into `pooled_size` bins; the hidden output
    `maxidx` holds each bin's flat argmax (-1 for an empty bin) and the backward scatters there.
  * im2col: (N, C, H, W) -> (N, C * kh * kw, L) patches as Convolution sees them (kernel,
    stride, dilate, pad); col2im is its adjoint (overlapping patches summed).
  * SpatialTransformer: BilinearSampler(data, GridGenerator(loc, 'affine', target_shape)).
  * Crop: the centre or `offset` window of `data` of size `h_w` or of the second input's H, W.
  * Correlation (FlowNet): per displacement (dy, dx) in the neighbourhood of radius
    max_displacement // stride2 (steps of stride2), the mean over channels and the kernel window of
    data1 * shifted data2 (or |data1 - shifted data2|), at output positions stride1 apart.
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Enum, Float, Int, Optional, Param, Shape
from .nn_conv import conv_out_size
from .registry import LikeInput, Op, get_op, register


def _float(op: str, dtype) -> None:
    if dtype is not None and np.dtype(dtype).kind != "f":
        raise MXNetError(f"{op}: only supports floating-point data, got {np.dtype(dtype).name}")


# --------------------------------------------------------------------------------------
# LRN
# --------------------------------------------------------------------------------------

_LRN_PARAMS = {"alpha": Param(Float, 1e-4), "beta": Param(Float, 0.75), "knorm": Param(Float, 2.0),
               "nsize": Param(Int, doc="number of channels summed (odd)")}


def _channel_window_sum(x: np.ndarray, nsize: int) -> np.ndarray:
    """Sum over channels c - nsize//2 .. c + nsize//2 (clipped) of x, for (N, C, ...) arrays."""
    half = nsize // 2
    c = x.shape[1]
    csum = np.concatenate([np.zeros_like(x[:, :1]), np.cumsum(x, axis=1)], axis=1)
    hi = np.minimum(np.arange(c) + half + 1, c)
    lo = np.maximum(np.arange(c) - half, 0)
    return np.take(csum, hi, axis=1) - np.take(csum, lo, axis=1)


@register("LRN")
class LRN(Op):
    """Local response normalization across channels (see module docstring)."""
    params = _LRN_PARAMS
    outputs = ("output", "tmp_norm")

    def num_visible_outputs(self, attrs):
        return 1

    def infer_shape(self, attrs, in_shapes):
        s = in_shapes[0]
        if s is not None and len(s) < 2:
            raise MXNetError(f"{self.name}: data must have at least 2 dims (N, C, ...), got {tuple(s)}")
        if attrs["nsize"] < 1:
            raise MXNetError(f"{self.name}: nsize must be positive, got {attrs['nsize']}")
        return [s], [s, s]

    def infer_type(self, attrs, in_types):
        _float(self.name, in_types[0])
        return list(in_types), [in_types[0], in_types[0]]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        self.infer_shape(attrs, [x.shape])
        xf = x.astype(np.float64)
        norm = attrs["knorm"] + attrs["alpha"] / attrs["nsize"] * _channel_window_sum(xf * xf, attrs["nsize"])
        out = xf * norm ** -attrs["beta"]
        return [out.astype(x.dtype), norm.astype(x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.apply("_backward_LRN", [ograds[0], inputs[0], outputs[1]], **attrs)[0]]


@register("_backward_LRN")
class BackwardLRN(LikeInput):
    """d data of LRN from (d output, data, tmp_norm)."""
    like = 1
    params = _LRN_PARAMS
    inputs = ("ograd", "data", "tmp_norm")
    hidden = True

    def compute(self, attrs, inputs, ctx):
        dy, x, norm = (a.astype(np.float64) for a in inputs)
        beta, n = attrs["beta"], attrs["nsize"]
        inner = _channel_window_sum(dy * x * norm ** (-beta - 1.0), n)
        dx = dy * norm ** -beta - 2.0 * beta * attrs["alpha"] / n * x * inner
        return [dx.astype(inputs[1].dtype)]


# --------------------------------------------------------------------------------------
# SVMOutput
# --------------------------------------------------------------------------------------

_SVM_PARAMS = {"margin": Param(Float, 1.0), "regularization_coefficient": Param(Float, 1.0),
               "use_linear": Param(Bool, False, "L1 hinge loss (else squared hinge)")}


def _svm_labels(op: str, data_shape, label_shape) -> None:
    if data_shape is not None and label_shape is not None and tuple(label_shape) != tuple(data_shape[:1]) \
            and int(np.prod(label_shape)) != int(np.prod(data_shape[:-1])):
        raise MXNetError(f"{op}: label shape {tuple(label_shape)} does not match data shape {tuple(data_shape)} "
                         "(one class index per row)")


@register("SVMOutput")
class SVMOutput(Op):
    """Identity on the scores; its backward is the (squared) hinge-loss gradient."""
    params = _SVM_PARAMS
    inputs = ("data", "label")

    def infer_shape(self, attrs, in_shapes):
        d, lab = in_shapes
        if d is not None and lab is None:
            lab = tuple(d[:1])
        _svm_labels(self.name, d, lab)
        return [d, lab], [d]

    def infer_type(self, attrs, in_types):
        d, lab = in_types
        return [d, lab or d], [d]

    def compute(self, attrs, inputs, ctx):
        _svm_labels(self.name, inputs[0].shape, inputs[1].shape)
        return [np.array(inputs[0], copy=True)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        d = F.apply("_backward_SVMOutput", [inputs[0], inputs[1]], **attrs)[0]
        return [d, F.zeros_like(inputs[1])]


@register("_backward_SVMOutput")
class BackwardSVMOutput(LikeInput):
    """d scores of the hinge loss from (scores, labels)."""
    like = 0
    params = _SVM_PARAMS
    inputs = ("data", "label")
    hidden = True

    def compute(self, attrs, inputs, ctx):
        x, label = inputs
        rows = x.reshape(-1, x.shape[-1]).astype(np.float64)
        lab = label.reshape(-1).astype(np.int64)
        sign = -np.ones_like(rows)
        sign[np.arange(rows.shape[0]), lab] = 1.0
        slack = attrs["margin"] - sign * rows
        reg = attrs["regularization_coefficient"]
        if attrs["use_linear"]:
            g = -reg * sign * (slack > 0)
        else:
            g = -2.0 * reg * sign * np.maximum(slack, 0.0)
        return [g.reshape(x.shape).astype(x.dtype)]


# --------------------------------------------------------------------------------------
# ROIPooling
# --------------------------------------------------------------------------------------

_ROI_PARAMS = {"pooled_size": Param(Shape), "spatial_scale": Param(Float)}


def _round_half_away(v: np.ndarray) -> np.ndarray:
    return np.where(v >= 0, np.floor(v + 0.5), np.ceil(v - 0.5))


@register("ROIPooling")
class ROIPooling(Op):
    """Max pooling of each region of interest into `pooled_size` bins."""
    params = _ROI_PARAMS
    inputs = ("data", "rois")
    outputs = ("output", "maxidx")

    def num_visible_outputs(self, attrs):
        return 1

    def infer_shape(self, attrs, in_shapes):
        d, r = in_shapes
        if len(attrs["pooled_size"]) != 2 or min(attrs["pooled_size"]) < 1:
            raise MXNetError(f"{self.name}: pooled_size must be two positive ints, got {attrs['pooled_size']}")
        if d is not None and len(d) != 4:
            raise MXNetError(f"{self.name}: data must be 4-D (N, C, H, W), got {tuple(d)}")
        if r is not None and (len(r) != 2 or (r[1] and r[1] != 5)):
            raise MXNetError(f"{self.name}: rois must have shape (R, 5), got {tuple(r)}")
        if d is None or r is None:
            return [d, r], [None, None]
        out = (r[0], d[1]) + tuple(attrs["pooled_size"])
        return [d, r], [out, out]

    def infer_type(self, attrs, in_types):
        _float(self.name, in_types[0])
        t = in_types[0] or in_types[1]
        return [t, t], [t, t]

    def compute(self, attrs, inputs, ctx):
        data, rois = inputs
        self.infer_shape(attrs, [data.shape, rois.shape])
        n, c, h, w = data.shape
        ph, pw = attrs["pooled_size"]
        out = np.zeros((rois.shape[0], c, ph, pw), dtype=data.dtype)
        arg = np.full(out.shape, -1, dtype=np.int64)
        scale = attrs["spatial_scale"]
        for r, roi in enumerate(rois.astype(np.float64)):
            b = int(roi[0])
            if not 0 <= b < n:
                raise MXNetError(f"{self.name}: roi {r} has batch index {b}, data has {n} images")
            x1, y1, x2, y2 = (int(v) for v in _round_half_away(roi[1:] * scale))
            rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
            bh, bw = rh / ph, rw / pw
            for i in range(ph):
                hs = min(max(int(np.floor(i * bh)) + y1, 0), h)
                he = min(max(int(np.ceil((i + 1) * bh)) + y1, 0), h)
                for j in range(pw):
                    ws = min(max(int(np.floor(j * bw)) + x1, 0), w)
                    we = min(max(int(np.ceil((j + 1) * bw)) + x1, 0), w)
                    if he <= hs or we <= ws:
                        continue
                    win = data[b, :, hs:he, ws:we].reshape(c, -1)
                    k = win.argmax(axis=1)
                    out[r, :, i, j] = win[np.arange(c), k]
                    rows, cols = hs + k // (we - ws), ws + k % (we - ws)
                    arg[r, :, i, j] = ((b * c + np.arange(c)) * h + rows) * w + cols
        return [out, arg.astype(data.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        d = F.apply("_backward_ROIPooling", [ograds[0], inputs[0], outputs[1]], **attrs)[0]
        return [d, F.zeros_like(inputs[1])]


@register("_backward_ROIPooling")
class BackwardROIPooling(LikeInput):
    """d data of ROIPooling: each bin's gradient added at its argmax."""
    like = 1
    params = _ROI_PARAMS
    inputs = ("ograd", "data", "maxidx")
    hidden = True

    def compute(self, attrs, inputs, ctx):
        dy, data, idx = inputs
        flat = np.zeros(data.size, dtype=np.float64)
        k = idx.reshape(-1).astype(np.int64)
        ok = k >= 0
        np.add.at(flat, k[ok], dy.reshape(-1)[ok].astype(np.float64))
        return [flat.reshape(data.shape).astype(data.dtype)]


# --------------------------------------------------------------------------------------
# im2col / col2im
# --------------------------------------------------------------------------------------

_PATCH_PARAMS = {"kernel": Param(Shape), "stride": Param(Shape, ()), "dilate": Param(Shape, ()),
                 "pad": Param(Shape, ())}


def _patch_geometry(op: str, attrs, spatial: tuple):
    """(kernel, stride, dilate, pad, output spatial size) with MXNet's defaults (1, 1, 0)."""
    k = tuple(attrs["kernel"])
    nd = len(k)
    if nd != len(spatial):
        raise MXNetError(f"{op}: kernel {k} has {nd} dims, the image has {len(spatial)} spatial dims")
    s = tuple(attrs["stride"]) or (1,) * nd
    d = tuple(attrs["dilate"]) or (1,) * nd
    p = tuple(attrs["pad"]) or (0,) * nd
    for name, v in (("stride", s), ("dilate", d), ("pad", p)):
        if len(v) != nd:
            raise MXNetError(f"{op}: {name} {v} must have {nd} values like kernel {k}")
    out = conv_out_size(tuple(spatial), k, s, d, p)
    if any(o <= 0 for o in out):
        raise MXNetError(f"{op}: kernel {k} (dilate {d}) does not fit the padded image {tuple(spatial)} (pad {p})")
    return k, s, d, p, tuple(out)


def _patch_index(c: int, spatial: tuple, k, s, d, p, out):
    """Flat indices into the padded (C, *spatial + 2 pad) image of every (C*prod(k), L) column entry."""
    padded = tuple(n + 2 * q for n, q in zip(spatial, p))
    grids_k = np.meshgrid(*[np.arange(x) for x in k], indexing="ij")
    grids_o = np.meshgrid(*[np.arange(x) for x in out], indexing="ij")
    coords = [gk.reshape(-1, 1) * dd + go.reshape(1, -1) * ss
              for gk, go, dd, ss in zip(grids_k, grids_o, d, s)]                     # (K, L) per dim
    flat = np.zeros_like(coords[0])
    for cd, size in zip(coords, padded):
        flat = flat * size + cd
    plane = int(np.prod(padded))
    idx = (np.arange(c).reshape(c, 1, 1) * plane + flat[None]).reshape(c * flat.shape[0], -1)
    return idx, padded


@register("im2col")
class Im2col(Op):
    """Image patches as columns: (N, C, *spatial) -> (N, C * prod(kernel), L)."""
    params = _PATCH_PARAMS

    def infer_shape(self, attrs, in_shapes):
        s = in_shapes[0]
        if s is None or not all(s):
            return [s], [None]
        k, _, _, _, out = _patch_geometry(self.name, attrs, tuple(s[2:]))
        return [s], [(s[0], s[1] * int(np.prod(k)), int(np.prod(out)))]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        k, s, d, p, out = _patch_geometry(self.name, attrs, x.shape[2:])
        idx, padded = _patch_index(x.shape[1], x.shape[2:], k, s, d, p, out)
        xp = np.pad(x, [(0, 0), (0, 0)] + [(q, q) for q in p]).reshape(x.shape[0], -1)
        return [np.ascontiguousarray(xp[:, idx])]

    def grad(self, F, attrs, inputs, outputs, ograds):
        x = inputs[0]
        return [F.col2im(ograds[0], output_size=tuple(x.shape[2:]), **attrs)]


@register("col2im")
class Col2im(Op):
    """The adjoint of im2col: columns (N, C * prod(kernel), L) summed into (N, C, *output_size)."""
    params = {"output_size": Param(Shape), **_PATCH_PARAMS}

    def _channels(self, attrs, cols: int) -> int:
        kk = int(np.prod(attrs["kernel"]))
        if cols % kk:
            raise MXNetError(f"{self.name}: {cols} rows is not a multiple of prod(kernel) = {kk}")
        return cols // kk

    def infer_shape(self, attrs, in_shapes):
        s = in_shapes[0]
        if s is None or not all(s):
            return [s], [None]
        if len(s) != 3:
            raise MXNetError(f"{self.name}: data must be (N, C * prod(kernel), L), got {tuple(s)}")
        _, _, _, _, out = _patch_geometry(self.name, attrs, tuple(attrs["output_size"]))
        if s[2] != int(np.prod(out)):
            raise MXNetError(f"{self.name}: data has {s[2]} columns, output_size {attrs['output_size']} "
                             f"gives {int(np.prod(out))} patches")
        return [s], [(s[0], self._channels(attrs, s[1])) + tuple(attrs["output_size"])]

    def compute(self, attrs, inputs, ctx):
        cols = inputs[0]
        (out_shape,) = self.infer_shape(attrs, [cols.shape])[1]
        spatial = tuple(attrs["output_size"])
        k, s, d, p, out = _patch_geometry(self.name, attrs, spatial)
        c = out_shape[1]
        idx, padded = _patch_index(c, spatial, k, s, d, p, out)
        img = np.zeros((cols.shape[0], c * int(np.prod(padded))), dtype=np.float64)
        for b in range(cols.shape[0]):
            np.add.at(img[b], idx.reshape(-1), cols[b].reshape(-1).astype(np.float64))
        img = img.reshape((cols.shape[0], c) + padded)
        crop = (slice(None), slice(None)) + tuple(slice(q, q + n) for q, n in zip(p, spatial))
        return [np.ascontiguousarray(img[crop].astype(cols.dtype))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.im2col(ograds[0], **{k: v for k, v in attrs.items() if k != "output_size"})]


# --------------------------------------------------------------------------------------
# SpatialTransformer
# --------------------------------------------------------------------------------------

_STN_PARAMS = {"target_shape": Param(Shape, (0, 0)), "transform_type": Param(Enum("affine")),
               "sampler_type": Param(Enum("bilinear")), "cudnn_off": Param(Optional(Bool), None)}


@register("SpatialTransformer")
class SpatialTransformer(Op):
    """Affine spatial transformer: bilinear sampling of `data` on the grid that `loc` (N, 6) maps
    the `target_shape` output onto (GridGenerator + BilinearSampler)."""
    params = _STN_PARAMS
    inputs = ("data", "loc")

    def _grid_attrs(self, attrs) -> dict:
        return {"transform_type": "affine", "target_shape": attrs["target_shape"]}

    def infer_shape(self, attrs, in_shapes):
        d, loc = in_shapes
        if d is not None and len(d) != 4:
            raise MXNetError(f"{self.name}: data must be 4-D (N, C, H, W), got {tuple(d)}")
        th, tw = attrs["target_shape"]
        if th <= 0 or tw <= 0:
            raise MXNetError(f"{self.name}: target_shape must be two positive ints, got {attrs['target_shape']}")
        if d is None:
            return [d, loc], [None]
        loc = (d[0], 6) if loc is None else loc
        if len(loc) != 2 or (loc[1] and loc[1] != 6):
            raise MXNetError(f"{self.name}: loc must have shape (N, 6), got {tuple(loc)}")
        return [d, (d[0], 6)], [(d[0], d[1], th, tw)]

    def infer_type(self, attrs, in_types):
        t = in_types[0] or in_types[1]
        _float(self.name, t)
        return [t, t], [t]

    def compute(self, attrs, inputs, ctx):
        data, loc = inputs
        self.infer_shape(attrs, [data.shape, loc.shape])
        grid = get_op("GridGenerator").compute(get_op("GridGenerator").parse(self._grid_attrs(attrs)), [loc], ctx)[0]
        return get_op("BilinearSampler").compute(get_op("BilinearSampler").parse({}), [data, grid], ctx)[:1]

    def grad(self, F, attrs, inputs, outputs, ograds):
        data, loc = inputs
        gen, sampler = get_op("GridGenerator"), get_op("BilinearSampler")
        gen_attrs = gen.parse(self._grid_attrs(attrs))
        grid = F.GridGenerator(loc, **self._grid_attrs(attrs))
        ddata, dgrid = sampler.grad(F, sampler.parse({}), [data, grid], list(outputs), list(ograds))
        (dloc,) = gen.grad(F, gen_attrs, [loc], [grid], [dgrid])
        return [ddata, dloc]


# --------------------------------------------------------------------------------------
# Crop (legacy)
# --------------------------------------------------------------------------------------

@register("Crop")
class Crop(Op):
    """Spatial crop of (N, C, H, W) `data` to `h_w` (or to the H, W of a second input), at
    `offset` (y, x) or centred with `center_crop`."""
    params = {"num_args": Param(Int), "offset": Param(Shape, (0, 0)), "h_w": Param(Shape, (0, 0)),
              "center_crop": Param(Bool, False)}

    def input_names(self, attrs):
        if attrs["num_args"] not in (1, 2):
            raise MXNetError(f"{self.name}: num_args must be 1 or 2, got {attrs['num_args']}")
        return ["arg0", "arg1"][:attrs["num_args"]]

    def _window(self, attrs, shape, like):
        if len(shape) != 4:
            raise MXNetError(f"{self.name}: data must be 4-D (N, C, H, W), got {tuple(shape)}")
        h, w = (like[2], like[3]) if like is not None else tuple(attrs["h_w"])
        if h <= 0 or w <= 0:
            raise MXNetError(f"{self.name}: give h_w (two positive ints) or a second input to crop like")
        if attrs["center_crop"]:
            y, x = (shape[2] - h) // 2, (shape[3] - w) // 2
        else:
            y, x = attrs["offset"]
        if y < 0 or x < 0 or y + h > shape[2] or x + w > shape[3]:
            raise MXNetError(f"{self.name}: crop window {(h, w)} at offset {(y, x)} exceeds data {tuple(shape)}")
        return y, x, h, w

    def infer_shape(self, attrs, in_shapes):
        d = in_shapes[0]
        like = in_shapes[1] if len(in_shapes) > 1 else None
        if d is None or (len(in_shapes) > 1 and like is None):
            return list(in_shapes), [None]
        _, _, h, w = self._window(attrs, d, like)
        return list(in_shapes), [(d[0], d[1], h, w)]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        y0, x0, h, w = self._window(attrs, x.shape, inputs[1].shape if len(inputs) > 1 else None)
        return [np.ascontiguousarray(x[:, :, y0:y0 + h, x0:x0 + w])]

    def grad(self, F, attrs, inputs, outputs, ograds):
        x = inputs[0]
        y0, x0, h, w = self._window(attrs, tuple(x.shape), tuple(inputs[1].shape) if len(inputs) > 1 else None)
        d = F._slice_assign(F.zeros_like(x), ograds[0], begin=(None, None, y0, x0),
                            end=(None, None, y0 + h, x0 + w), step=())
        return [d] + [F.zeros_like(like) for like in inputs[1:]]


# --------------------------------------------------------------------------------------
# Correlation (FlowNet)
# --------------------------------------------------------------------------------------

_CORR_PARAMS = {"kernel_size": Param(Int, 1), "max_displacement": Param(Int, 1), "stride1": Param(Int, 1),
                "stride2": Param(Int, 1), "pad_size": Param(Int, 0), "is_multiply": Param(Bool, True)}


def _corr_geometry(op: str, attrs, h: int, w: int):
    """(output height, output width, neighbourhood radius, neighbourhood width) of Correlation."""
    k, md, s1, s2, pad = (attrs[n] for n in ("kernel_size", "max_displacement", "stride1", "stride2", "pad_size"))
    if k < 1 or k % 2 == 0 or md < 0 or s1 < 1 or s2 < 1 or pad < 0:
        raise MXNetError(f"{op}: kernel_size must be odd and positive, strides positive, max_displacement "
                         f"and pad_size non-negative; got {dict((n, attrs[n]) for n in _CORR_PARAMS)}")
    border = md + (k - 1) // 2
    th = -(-(h + 2 * pad - 2 * border) // s1)
    tw = -(-(w + 2 * pad - 2 * border) // s1)
    if th < 1 or tw < 1:
        raise MXNetError(f"{op}: Correlation cannot be done with current settings: the neighborhood "
                         f"(max_displacement {md}) and kernel (kernel_size {k}) do not fit in the "
                         f"{h}x{w} data padded by {pad}")
    radius = md // s2
    return th, tw, radius, 2 * radius + 1


def _corr_windows(attrs, th: int, tw: int, radius: int):
    """For each output channel and kernel offset: the (rows, cols) slices of the two padded inputs."""
    k, md, s1, s2 = (attrs[n] for n in ("kernel_size", "max_displacement", "stride1", "stride2"))
    span_h, span_w = s1 * (th - 1) + 1, s1 * (tw - 1) + 1
    width = 2 * radius + 1
    for tc in range(width * width):
        dx = (tc % width - radius) * s2
        dy = (tc // width - radius) * s2
        for i in range(k):
            for j in range(k):
                y1, x1 = md + i, md + j
                yield (tc, (slice(y1, y1 + span_h, s1), slice(x1, x1 + span_w, s1)),
                       (slice(y1 + dy, y1 + dy + span_h, s1), slice(x1 + dx, x1 + dx + span_w, s1)))


def _corr_padded(attrs, x: np.ndarray, th: int, tw: int) -> np.ndarray:
    """`x` zero-padded by pad_size, plus what ceil-rounded output sizes may read past the end."""
    pad, md, k, s1 = (attrs[n] for n in ("pad_size", "max_displacement", "kernel_size", "stride1"))
    need_h = s1 * (th - 1) + 2 * md + k
    need_w = s1 * (tw - 1) + 2 * md + k
    extra_h = max(need_h - (x.shape[2] + 2 * pad), 0)
    extra_w = max(need_w - (x.shape[3] + 2 * pad), 0)
    return np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pad, pad + extra_h), (pad, pad + extra_w)])


@register("Correlation")
class Correlation(Op):
    """FlowNet correlation of two feature maps: for each displacement in the neighbourhood, the
    mean over channels and the kernel window of data1 * data2 (or |data1 - data2|)."""
    params = _CORR_PARAMS
    inputs = ("data1", "data2")

    def infer_shape(self, attrs, in_shapes):
        a, b = in_shapes
        s = a if a is not None else b
        if s is None:
            return [a, b], [None]
        if len(s) != 4:
            raise MXNetError(f"{self.name}: data must be 4-D (N, C, H, W), got {tuple(s)}")
        if a is not None and b is not None and tuple(a) != tuple(b):
            raise MXNetError(f"{self.name}: data1 {tuple(a)} and data2 {tuple(b)} must have the same shape")
        if not all(s):
            return [s, s], [None]
        th, tw, _, width = _corr_geometry(self.name, attrs, s[2], s[3])
        return [tuple(s), tuple(s)], [(s[0], width * width, th, tw)]

    def infer_type(self, attrs, in_types):
        t = in_types[0] or in_types[1]
        _float(self.name, t)
        return [t, t], [t]

    def compute(self, attrs, inputs, ctx):
        a, b = inputs
        (out_shape,) = self.infer_shape(attrs, [a.shape, b.shape])[1]
        n, channels, th, tw = out_shape
        _, _, radius, _ = _corr_geometry(self.name, attrs, a.shape[2], a.shape[3])
        p1, p2 = _corr_padded(attrs, a, th, tw), _corr_padded(attrs, b, th, tw)
        out = np.zeros(out_shape)
        for tc, (r1, c1), (r2, c2) in _corr_windows(attrs, th, tw, radius):
            x1, x2 = p1[:, :, r1, c1], p2[:, :, r2, c2]
            out[:, tc] += (x1 * x2).sum(axis=1) if attrs["is_multiply"] else np.abs(x1 - x2).sum(axis=1)
        out /= attrs["kernel_size"] ** 2 * a.shape[1]
        return [out.astype(a.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return F.apply("_backward_Correlation", [ograds[0], inputs[0], inputs[1]], **attrs)


@register("_backward_Correlation")
class BackwardCorrelation(Op):
    """(d data1, d data2) of Correlation from (d output, data1, data2)."""
    params = _CORR_PARAMS
    inputs = ("ograd", "data1", "data2")
    outputs = ("data1_grad", "data2_grad")
    hidden = True

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), [in_shapes[1], in_shapes[2]]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[1], in_types[2]]

    def compute(self, attrs, inputs, ctx):
        dy, a, b = inputs
        n, _, th, tw = dy.shape
        _, _, radius, _ = _corr_geometry(self.name, attrs, a.shape[2], a.shape[3])
        p1, p2 = _corr_padded(attrs, a, th, tw), _corr_padded(attrs, b, th, tw)
        g1, g2 = np.zeros_like(p1), np.zeros_like(p2)
        g = dy.astype(np.float64) / (attrs["kernel_size"] ** 2 * a.shape[1])
        for tc, (r1, c1), (r2, c2) in _corr_windows(attrs, th, tw, radius):
            gt = g[:, tc:tc + 1]
            x1, x2 = p1[:, :, r1, c1], p2[:, :, r2, c2]
            if attrs["is_multiply"]:
                g1[:, :, r1, c1] += gt * x2
                g2[:, :, r2, c2] += gt * x1
            else:
                sign = np.where(x1 >= x2, 1.0, -1.0)     # ties count as +1 (MXNet)
                g1[:, :, r1, c1] += gt * sign
                g2[:, :, r2, c2] -= gt * sign
        pad = attrs["pad_size"]
        crop = (slice(None), slice(None), slice(pad, pad + a.shape[2]), slice(pad, pad + a.shape[3]))
        return [g1[crop].astype(a.dtype), g2[crop].astype(b.dtype)]
