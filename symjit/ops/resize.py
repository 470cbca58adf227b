"""Spatial resampling of (N, C, H, W) maps (MXNet 1.9.1's contrib ops):
`_contrib_AdaptiveAvgPooling2D` and `_contrib_BilinearResize2D`.

Both are separable linear maps: out[n, c] = Mh . x[n, c] . Mw^T with Mh (OH, H) and
Mw (OW, W) weight matrices built from the op's geometry, so the gradient is the adjoint
Mh^T . dy . Mw (hidden `_backward_*` ops taking the head gradient and the data).

  * AdaptiveAvgPooling2D: output bin o of an axis of length I into O averages input
    [floor(o * I / O), ceil((o + 1) * I / O)). `output_size`: () for 1x1, (s,) for s x s,
    (h, w).
  * BilinearResize2D: output index d reads source coordinate s = d * (I - 1) / (O - 1)
    (`align_corners`, 0 when O == 1) or max((d + 0.5) * I / O - 0.5, 0) (not aligned);
    weights 1 - (s - floor(s)) at floor(s) and s - floor(s) at the next index (the last
    index repeats at the border). The output size comes from `mode`: "size" (height,
    width, or int(scale * input) per axis with scale_height / scale_width), "odd_scale"
    (even I: int(I * scale), odd I: int((I - 1) * scale) + 1), "like" (the second input's
    H, W; that input gets a zero gradient), "to_even_down", "to_even_up", "to_odd_down",
    "to_odd_up" (the nearest even/odd size below/above an odd/even input). Scaled sizes
    are computed in float32 as MXNet does.
"""
from __future__ import annotations


import numpy as np

from ..base import MXNetError
from .attrs import Bool, Enum, Float, Int, Optional, Param, Shape
from .registry import LikeInput, Op, register

__all__ = ["adaptive_pool_matrix", "bilinear_resize_matrix"]


def _err(op: str, msg: str) -> MXNetError:
    return MXNetError(f"{op}: {msg}")


def _check_4d(op: str, shape, what: str = "data"):
    if shape is not None and len(shape) != 4:
        raise _err(op, f"{what} must be 4-D (N, C, H, W), got shape {tuple(shape)}")


def _float_data(op: str, dtype):
    if dtype is not None and np.dtype(dtype).kind != "f":
        raise _err(op, f"only supports floating-point data, got {np.dtype(dtype).name}")


def adaptive_pool_matrix(in_size: int, out_size: int) -> np.ndarray:
    """(out_size, in_size): row o averages [floor(o * I / O), ceil((o + 1) * I / O))."""
    o = np.arange(out_size)
    lo = (o * in_size) // out_size
    hi = -((-(o + 1) * in_size) // out_size)
    i = np.arange(in_size)
    inside = (i[None, :] >= lo[:, None]) & (i[None, :] < hi[:, None])
    return inside / (hi - lo)[:, None].astype(np.float64)


def bilinear_resize_matrix(in_size: int, out_size: int, align_corners: bool) -> np.ndarray:
    """(out_size, in_size) interpolation weights of MXNet's bilinear resize along one axis."""
    d = np.arange(out_size, dtype=np.float64)
    if align_corners:
        scale = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
        src = scale * d
    else:
        src = np.maximum(in_size / out_size * (d + 0.5) - 0.5, 0.0)
    low = np.minimum(src.astype(np.int64), in_size - 1)
    step = (low < in_size - 1).astype(np.int64)
    frac = src - low
    m = np.zeros((out_size, in_size), dtype=np.float64)
    rows = np.arange(out_size)
    np.add.at(m, (rows, low), 1.0 - frac)
    np.add.at(m, (rows, low + step), frac)
    return m


def _apply(x: np.ndarray, mh: np.ndarray, mw: np.ndarray) -> np.ndarray:
    """Mh . x[n, c] . Mw^T for every (n, c), accumulated in float64."""
    return np.einsum("oh,nchw,pw->ncop", mh, x.astype(np.float64), mw, optimize=True)


def _adjoint(dy: np.ndarray, mh: np.ndarray, mw: np.ndarray) -> np.ndarray:
    return np.einsum("oh,ncop,pw->nchw", mh, dy.astype(np.float64), mw, optimize=True)


# --------------------------------------------------------------------------------------
# AdaptiveAvgPooling2D
# --------------------------------------------------------------------------------------

_ADAPTIVE_PARAMS = {"output_size": Param(Shape, (), "int (output size) or a tuple of int for output "
                                                    "(height, width); () is 1x1")}


def _adaptive_out(op: str, attrs) -> tuple[int, int]:
    s = tuple(attrs["output_size"])
    if len(s) == 0:
        s = (1, 1)
    elif len(s) == 1:
        s = (s[0], s[0])
    if len(s) != 2 or min(s) < 1:
        raise _err(op, f"output_size must be a positive int or (height, width), got {attrs['output_size']}")
    return s


@register("_contrib_AdaptiveAvgPooling2D")
class AdaptiveAvgPooling2D(Op):
    """Average pooling to a fixed output size whatever the input size."""
    params = _ADAPTIVE_PARAMS
    kernel = "pool"

    def infer_shape(self, attrs, in_shapes):
        d = in_shapes[0]
        _check_4d(self.name, d)
        oh, ow = _adaptive_out(self.name, attrs)
        return [d], [None if d is None else (d[0], d[1], oh, ow)]

    def infer_type(self, attrs, in_types):
        _float_data(self.name, in_types[0])
        return [in_types[0]], [in_types[0]]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        self.infer_shape(attrs, [x.shape])
        if min(x.shape[2:]) < 1:
            raise _err(self.name, f"data must have a non-empty spatial extent, got shape {x.shape}")
        oh, ow = _adaptive_out(self.name, attrs)
        out = _apply(x, adaptive_pool_matrix(x.shape[2], oh), adaptive_pool_matrix(x.shape[3], ow))
        return [out.astype(x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.apply("_backward_contrib_AdaptiveAvgPooling2D", [ograds[0], inputs[0]], **attrs)[0]]


@register("_backward_contrib_AdaptiveAvgPooling2D")
class BackwardAdaptiveAvgPooling2D(LikeInput):
    """d data of AdaptiveAvgPooling2D from (d output, data)."""
    like = 1
    params = _ADAPTIVE_PARAMS
    inputs = ("ograd", "data")
    hidden = True
    kernel = "pool"
    differentiable = False

    def compute(self, attrs, inputs, ctx):
        dy, x = inputs
        oh, ow = _adaptive_out(self.name, attrs)
        if dy.shape != x.shape[:2] + (oh, ow):
            raise _err(self.name, f"ograd must have shape {x.shape[:2] + (oh, ow)}, got {dy.shape}")
        g = _adjoint(dy, adaptive_pool_matrix(x.shape[2], oh), adaptive_pool_matrix(x.shape[3], ow))
        return [g.astype(x.dtype)]


# --------------------------------------------------------------------------------------
# BilinearResize2D
# --------------------------------------------------------------------------------------

_RESIZE_MODES = ("size", "odd_scale", "like", "to_even_down", "to_even_up", "to_odd_down", "to_odd_up")

_RESIZE_PARAMS = {
    "height": Param(Int, 1, "output height (mode 'size' without scale_height)"),
    "width": Param(Int, 1, "output width (mode 'size' without scale_width)"),
    "scale_height": Param(Optional(Float), None, "height scale (modes 'size' and 'odd_scale')"),
    "scale_width": Param(Optional(Float), None, "width scale (modes 'size' and 'odd_scale')"),
    "mode": Param(Enum(*_RESIZE_MODES), "size", "how the output size is chosen (see the module docstring)"),
    "align_corners": Param(Bool, True, "map the corner pixels of input and output onto each other"),
}


def _scaled(op: str, name: str, scale, size: int) -> int:
    if scale is None:
        raise _err(op, f"mode needs {name}")
    return int(np.float32(scale) * np.float32(size))


def _resize_extent(op: str, attrs, axis: int, size: int, like_size) -> int:
    """Output length along axis 0 (height) or 1 (width) for an input of length `size`."""
    mode = attrs["mode"]
    scale = attrs["scale_height" if axis == 0 else "scale_width"]
    name = "scale_height" if axis == 0 else "scale_width"
    if mode == "size":
        return _scaled(op, name, scale, size) if scale is not None else attrs["height" if axis == 0 else "width"]
    if mode == "odd_scale":
        return _scaled(op, name, scale, size) if size % 2 == 0 else _scaled(op, name, scale, size - 1) + 1
    if mode == "like":
        return like_size
    even = size % 2 == 0
    return {"to_even_down": size if even else size - 1, "to_even_up": size if even else size + 1,
            "to_odd_down": size - 1 if even else size, "to_odd_up": size + 1 if even else size}[mode]


def _resize_out_hw(op: str, attrs, d, like) -> tuple | None:
    if attrs["mode"] == "like":
        if like is None:
            return None
        lh, lw = like[2], like[3]
    else:
        lh = lw = None
    if d is None or not d[2] or not d[3]:
        return None
    out = (_resize_extent(op, attrs, 0, d[2], lh), _resize_extent(op, attrs, 1, d[3], lw))
    if min(out) < 1:
        raise _err(op, f"output size {out} for input {tuple(d)} and mode {attrs['mode']!r} is empty")
    return out


def _resize_matrices(op: str, attrs, x_shape, like_shape):
    oh, ow = _resize_out_hw(op, attrs, x_shape, like_shape)
    ac = attrs["align_corners"]
    return bilinear_resize_matrix(x_shape[2], oh, ac), bilinear_resize_matrix(x_shape[3], ow, ac)


@register("_contrib_BilinearResize2D")
class BilinearResize2D(Op):
    """Bilinear resize of (N, C, H, W) maps to the size `mode` selects."""
    params = _RESIZE_PARAMS
    inputs = ("data", "like")
    kernel = "gather"

    def input_names(self, attrs):
        return ["data", "like"] if attrs["mode"] == "like" else ["data"]

    def infer_shape(self, attrs, in_shapes):
        d = in_shapes[0]
        like = in_shapes[1] if len(in_shapes) > 1 else None
        _check_4d(self.name, d)
        _check_4d(self.name, like, "like")
        hw = _resize_out_hw(self.name, attrs, d, like)
        out = None if d is None else tuple(d[:2]) + (hw if hw is not None else (0, 0))
        return list(in_shapes), [out]

    def infer_type(self, attrs, in_types):
        _float_data(self.name, in_types[0])
        return [in_types[0]] + list(in_types[1:]), [in_types[0]]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        like = inputs[1].shape if len(inputs) > 1 else None
        self.infer_shape(attrs, [x.shape] + ([like] if like is not None else []))
        if min(x.shape[2:]) < 1:
            raise _err(self.name, f"data must have a non-empty spatial extent, got shape {x.shape}")
        mh, mw = _resize_matrices(self.name, attrs, x.shape, like)
        return [_apply(x, mh, mw).astype(x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        d = F.apply("_backward_contrib_BilinearResize2D", [ograds[0], *inputs], **attrs)[0]
        return [d] + [F.zeros_like(v) for v in inputs[1:]]


@register("_backward_contrib_BilinearResize2D")
class BackwardBilinearResize2D(LikeInput):
    """d data of BilinearResize2D from (d output, data[, like])."""
    like = 1
    params = _RESIZE_PARAMS
    inputs = ("ograd", "data", "like")
    hidden = True
    kernel = "gather"
    differentiable = False

    def input_names(self, attrs):
        return ["ograd", "data", "like"] if attrs["mode"] == "like" else ["ograd", "data"]

    def compute(self, attrs, inputs, ctx):
        dy, x = inputs[0], inputs[1]
        like = inputs[2].shape if len(inputs) > 2 else None
        mh, mw = _resize_matrices(self.name, attrs, x.shape, like)
        expect = x.shape[:2] + (mh.shape[0], mw.shape[0])
        if dy.shape != expect:
            raise _err(self.name, f"ograd must have shape {expect}, got {dy.shape}")
        return [_adjoint(dy, mh, mw).astype(x.dtype)]
