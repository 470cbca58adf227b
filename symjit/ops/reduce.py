"""Reductions (sum, mean, prod, max, min, nansum, nanprod, argmax, argmin, norm) and the
softmax family (softmax, log_softmax, softmin, SoftmaxActivation), with MXNet 1.x semantics.

Shape rules follow MXNet's `ReduceAxesShapeImpl`: `axis=None` or `axis=()` reduces every
axis (and ignores `exclude`); negative axes count from the end; `exclude=True` reduces the
axes *not* listed; the result is never 0-d — a full reduction without `keepdims` has
shape (1,).

Gradients are written with registered ops only. Broadcasting a head gradient (or a
reduced output) back over the reduced axes is the hidden op `_backward_sum` (and
`_backward_mean`, which also divides by the number of reduced elements); both take the
reduced array and the original `data`, so they need no static shapes and work on the
partial shapes of the IR.

Softmax numerics follow what MXNet 1.9.1 on CPU prints (seed example E94): float32
softmax over the last axis of a 1-4-D array without `temperature` runs through oneDNN,
whose exponential is a degree-5 polynomial, whose sum is accumulated in 16 SIMD lanes
and reduced as a tree, and whose normalisation multiplies by the float32 reciprocal of
the sum. `_onednn_softmax_last_axis` reproduces those steps bit for bit. Every other
case uses MXNet's native kernel: exp in the input dtype, the sum accumulated in float64
(float32 for float16), one division per element.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Enum, Float, Int, Optional, Param, Shape
from .registry import Op, merge_shape, register

__all__ = ["reduction_axes", "reduced_shape", "softmax_reference"]


# ======================================================================================
# Shape rules shared by the reduction ops
# ======================================================================================

def reduction_axes(op: str, shape: tuple, axis, exclude: bool) -> tuple:
    """The sorted, non-negative axes that a ReduceAxes op reduces for input `shape`.

    `axis` is None, () or a tuple of ints (negative allowed). Raises MXNetError for
    duplicate or out-of-range axes, naming the op and the input shape.
    """
    ndim = len(shape)
    if axis is None or len(axis) == 0:
        return tuple(range(ndim))
    axes = sorted(a + ndim if a < 0 else a for a in axis)
    for a, b in zip(axes, axes[1:]):
        if a == b:
            raise MXNetError(f"{op}: reduction axes have duplicates: axis={tuple(axis)}")
    if axes[0] < 0 or axes[-1] >= ndim:
        raise MXNetError(f"{op}: reduction axis {tuple(axis)} exceeds input dimensions "
                         f"{tuple(shape)}")
    if exclude:
        return tuple(i for i in range(ndim) if i not in axes)
    return tuple(axes)


def reduced_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    """Output shape of reducing `shape` over `axes`: reduced dims become 1 with `keepdims`,
    else disappear; an empty result becomes (1,) (MXNet 1.x has no 0-d arrays)."""
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape)) or (1,)
    kept = tuple(d for i, d in enumerate(shape) if i not in axes)
    return kept or (1,)


def _axis_index(op: str, axis: int, ndim: int) -> int:
    """Normalise one axis (MXNet `CheckAxis`); raises MXNetError when out of range."""
    if not -ndim <= axis < ndim:
        raise MXNetError(f"{op}: axis {axis} exceeds the input dimension of {ndim}")
    return axis % ndim


def _dtype_name(x) -> str | None:
    """The dtype name of an array or gradient handle (numpy, NDArray or IR value);
    None where an IR value's dtype is not known."""
    dt = getattr(x, "dtype", None)
    return None if dt is None else np.dtype(dt).name


def _cast_to(F, g, target: str | None):
    """`g` cast to dtype `target` when both dtypes are known and differ."""
    cur = _dtype_name(g)
    if target is None or cur is None or cur == target:
        return g
    return F.Cast(g, dtype=target)


def _fresh(a: np.ndarray, shape: tuple, dtype) -> np.ndarray:
    """A contiguous array of `shape` and `dtype` that owns its data."""
    return np.array(np.asarray(a, dtype=dtype).reshape(shape), copy=True, order="C")


_REDUCE_AXES_PARAMS = {
    "axis": Param(Optional(Shape), None, "axes to reduce; None or () reduces all"),
    "keepdims": Param(Bool, False, "keep reduced axes as size-1 dims"),
    "exclude": Param(Bool, False, "reduce the axes not listed in `axis`"),
}


# ======================================================================================
# ReduceAxes ops: sum, mean, prod, max, min, nansum, nanprod
# ======================================================================================

class _ReduceAxes(Op):
    """Base of the ReduceAxes family. Subclasses give `reduce(x, axes)` (numpy, returning
    an array in x's dtype) and `grad`."""
    params = _REDUCE_AXES_PARAMS
    kernel = "reduce"
    needs_nonempty: bool = False

    def reduce(self, x: np.ndarray, axes: tuple) -> np.ndarray:
        raise NotImplementedError

    def infer_shape(self, attrs, in_shapes):
        shape = in_shapes[0]
        if shape is None:
            return list(in_shapes), [None]
        axes = reduction_axes(self.name, tuple(shape), attrs["axis"], attrs["exclude"])
        return [tuple(shape)], [reduced_shape(tuple(shape), axes, attrs["keepdims"])]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        axes = reduction_axes(self.name, x.shape, attrs["axis"], attrs["exclude"])
        if self.needs_nonempty and x.size == 0:
            raise MXNetError(f"{self.name}: reduction input's size should be > 0, got shape {x.shape}")
        out = self.reduce(x, axes)
        return [_fresh(out, reduced_shape(x.shape, axes, attrs["keepdims"]), x.dtype)]

    @staticmethod
    def _bcast(F, attrs, small, data):
        """`small` (a reduced array) broadcast back to `data`'s shape."""
        return F._backward_sum(small, data, axis=attrs["axis"], keepdims=attrs["keepdims"],
                               exclude=attrs["exclude"])


@register("sum", aliases=("sum_axis",))
class Sum(_ReduceAxes):
    """Sum of array elements over the given axes."""
    def reduce(self, x, axes):
        return np.add.reduce(x, axis=axes, dtype=x.dtype)   # np.sum without its Python wrapper

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [self._bcast(F, attrs, ograds[0], inputs[0])]


@register("mean")
class Mean(_ReduceAxes):
    """Mean of array elements over the given axes (integer inputs divide as C integers)."""
    def reduce(self, x, axes):
        count = math.prod(x.shape[a] for a in axes)
        total = np.add.reduce(x, axis=axes, dtype=x.dtype)   # np.sum without its Python wrapper
        return _divide_count(total, count)

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F._backward_mean(ograds[0], inputs[0], axis=attrs["axis"],
                                 keepdims=attrs["keepdims"], exclude=attrs["exclude"])]


def _divide_count(total: np.ndarray, count: int) -> np.ndarray:
    """total / count in total's dtype; integers truncate toward zero like C."""
    total = np.asarray(total)
    if count == 0:  # mean of nothing: NaN for floats (0 / 0), 0 for integers
        return np.full_like(total, np.nan) if total.dtype.kind == "f" else np.zeros_like(total)
    if total.dtype.kind in "iu":
        q = np.abs(total.astype(np.int64)) // count
        return (np.sign(total) * q).astype(total.dtype)
    return (total / total.dtype.type(count)).astype(total.dtype)


@register("prod")
class Prod(_ReduceAxes):
    """Product of array elements over the given axes."""
    def reduce(self, x, axes):
        return np.prod(x, axis=axes, dtype=x.dtype)

    def grad(self, F, attrs, inputs, outputs, ograds):
        # MXNet: igrad = ograd * out / data (elementwise, broadcast over the reduced axes)
        x = inputs[0]
        ratio = F.elemwise_div(self._bcast(F, attrs, outputs[0], x), x)
        return [F.elemwise_mul(self._bcast(F, attrs, ograds[0], x), ratio)]


class _Extreme(_ReduceAxes):
    """max / min: the gradient goes to every element equal to the extreme (MXNet ties)."""
    needs_nonempty = True

    def grad(self, F, attrs, inputs, outputs, ograds):
        x = inputs[0]
        hit = F._equal(x, self._bcast(F, attrs, outputs[0], x))
        return [F.elemwise_mul(self._bcast(F, attrs, ograds[0], x), hit)]


@register("max", aliases=("max_axis",))
class Max(_Extreme):
    """Maximum of array elements over the given axes."""
    def reduce(self, x, axes):
        return np.max(x, axis=axes)


@register("min", aliases=("min_axis",))
class Min(_Extreme):
    """Minimum of array elements over the given axes."""
    def reduce(self, x, axes):
        return np.min(x, axis=axes)


@register("nansum")
class NanSum(_ReduceAxes):
    """Sum over the given axes, treating NaN as zero."""
    def reduce(self, x, axes):
        return np.nansum(x, axis=axes, dtype=x.dtype)

    def grad(self, F, attrs, inputs, outputs, ograds):
        x = inputs[0]
        not_nan = F._equal(x, x)
        return [F.elemwise_mul(self._bcast(F, attrs, ograds[0], x), not_nan)]


@register("nanprod")
class NanProd(_ReduceAxes):
    """Product over the given axes, treating NaN as one."""
    def reduce(self, x, axes):
        return np.nanprod(x, axis=axes, dtype=x.dtype)

    def grad(self, F, attrs, inputs, outputs, ograds):
        # MXNet nanprod_grad: isnan(x) ? 0 : out / x
        x = inputs[0]
        ratio = F.elemwise_div(self._bcast(F, attrs, outputs[0], x), x)
        ratio = F.where(F._equal(x, x), ratio, F.zeros_like(x))
        return [F.elemwise_mul(self._bcast(F, attrs, ograds[0], x), ratio)]


class _BackwardBroadcast(Op):
    """Broadcast a reduced array `ograd` back to `data`'s shape over the reduced axes.

    Attributes are those of the forward reduction, so the reduced axes and the layout of
    `ograd` (with or without kept dims) are recomputed from `data`'s shape. Output dtype
    is ograd's dtype.
    """
    inputs = ("ograd", "data")
    params = _REDUCE_AXES_PARAMS
    kernel = "shape"  # a broadcast (data movement), like broadcast_to
    hidden = True
    scale_by_count = False

    def infer_shape(self, attrs, in_shapes):
        g, d = in_shapes
        if d is not None:
            axes = reduction_axes(self.name, tuple(d), attrs["axis"], attrs["exclude"])
            g = merge_shape(self.name, "input 'ograd'", reduced_shape(tuple(d), axes, attrs["keepdims"]), g)
        return [g, d], [d]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[0]]

    def compute(self, attrs, inputs, ctx):
        g, d = inputs
        axes = reduction_axes(self.name, d.shape, attrs["axis"], attrs["exclude"])
        want = reduced_shape(d.shape, axes, attrs["keepdims"])
        if g.shape != want:
            raise MXNetError(f"{self.name}: shape mismatch for input 'ograd': expected {want}, got {g.shape}")
        keep = tuple(1 if i in axes else n for i, n in enumerate(d.shape))
        out = np.broadcast_to(g.reshape(keep), d.shape)
        if self.scale_by_count:
            count = int(np.prod([d.shape[a] for a in axes], dtype=np.int64))
            out = _divide_count(out, count)
        return [np.array(out, dtype=g.dtype, copy=True, order="C")]

    def grad(self, F, attrs, inputs, outputs, ograds):
        op = "mean" if self.scale_by_count else "sum"
        g = F.apply(op, [ograds[0]], axis=attrs["axis"], keepdims=attrs["keepdims"],
                    exclude=attrs["exclude"])[0]
        return [g, F.zeros_like(inputs[1])]


@register("_backward_sum")
class BackwardSum(_BackwardBroadcast):
    """Gradient of `sum`: the head gradient repeated over the reduced axes."""


@register("_backward_mean")
class BackwardMean(_BackwardBroadcast):
    """Gradient of `mean`: the head gradient repeated over the reduced axes, divided by
    the number of reduced elements (its own gradient is therefore `mean`)."""
    scale_by_count = True


# ======================================================================================
# Arg-reductions: argmax, argmin, argmax_channel
# ======================================================================================

def _arg_reduce_shape(op: str, shape: tuple, axis, keepdims: bool) -> tuple:
    """MXNet `ReduceAxisShapeImpl` (one axis or the flattened array)."""
    if axis is None:
        return (1,) * len(shape) if keepdims and shape else (1,)
    ax = _axis_index(op, axis, len(shape))
    if keepdims:
        return tuple(1 if i == ax else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i != ax) or (1,)


class _ArgReduce(Op):
    """Index of the first maximum / minimum along `axis` (the flattened array when None),
    returned in the input's dtype (MXNet). Not differentiable: gradient zero."""
    params = {"axis": Param(Optional(Int), None, "axis to search; None flattens"),
              "keepdims": Param(Bool, False, "keep the searched axis as size 1")}
    kernel = "reduce"
    pick: Callable[..., np.ndarray] = staticmethod(np.argmax)

    def search(self, attrs) -> tuple:
        """(axis or None, keepdims) of the search."""
        return attrs["axis"], attrs["keepdims"]

    def infer_shape(self, attrs, in_shapes):
        shape = in_shapes[0]
        if shape is None:
            return list(in_shapes), [None]
        return [tuple(shape)], [_arg_reduce_shape(self.name, tuple(shape), *self.search(attrs))]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        axis, keepdims = self.search(attrs)
        out_shape = _arg_reduce_shape(self.name, x.shape, axis, keepdims)
        if axis is None:
            if x.size == 0:
                raise MXNetError(f"{self.name}: attempt to search an empty sequence (shape {x.shape})")
            idx = self.pick(x.reshape(-1))
        else:
            ax = _axis_index(self.name, axis, x.ndim)
            if x.shape[ax] == 0:
                raise MXNetError(f"{self.name}: searching input of shape {x.shape} along axis {ax} "
                                 "of zero size is not allowed")
            idx = self.pick(x, axis=ax)
        return [_fresh(idx, out_shape, x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.zeros_like(inputs[0])]


@register("argmax")
class ArgMax(_ArgReduce):
    """Indices of the maximum values along an axis (first occurrence on ties)."""
    pick = staticmethod(np.argmax)


@register("argmin")
class ArgMin(_ArgReduce):
    """Indices of the minimum values along an axis (first occurrence on ties)."""
    pick = staticmethod(np.argmin)


@register("argmax_channel")
class ArgMaxChannel(_ArgReduce):
    """argmax along axis 1 without keepdims (MXNet's legacy operator; no attributes)."""
    params = {}

    def search(self, attrs) -> tuple:
        return 1, False


# ======================================================================================
# norm
# ======================================================================================

_OUT_DTYPES = ("float16", "float32", "float64", "int64", "int32", "int8")


@register("norm")
class Norm(Op):
    """L1 (`ord=1`) or L2 (`ord=2`) norm of the elements over the given axes."""
    params = {
        "ord": Param(Int, 2, "1 or 2"),
        "axis": Param(Optional(Shape), None, "axes to reduce; None or () reduces all"),
        "out_dtype": Param(Optional(Enum(*_OUT_DTYPES)), None, "output dtype (default: input's)"),
        "keepdims": Param(Bool, False, "keep reduced axes as size-1 dims"),
    }
    kernel = "reduce"

    def _check_ord(self, attrs):
        if attrs["ord"] not in (1, 2):
            raise MXNetError(f"norm: only supports ord=1 and ord=2, got ord={attrs['ord']}")

    def infer_shape(self, attrs, in_shapes):
        self._check_ord(attrs)
        shape = in_shapes[0]
        if shape is None:
            return list(in_shapes), [None]
        axes = reduction_axes(self.name, tuple(shape), attrs["axis"], False)
        return [tuple(shape)], [reduced_shape(tuple(shape), axes, attrs["keepdims"])]

    def infer_type(self, attrs, in_types):
        t = in_types[0]
        return [t], [attrs["out_dtype"] or t]

    def compute(self, attrs, inputs, ctx):
        self._check_ord(attrs)
        x = inputs[0]
        axes = reduction_axes(self.name, x.shape, attrs["axis"], False)
        xa = x.astype(np.float64)  # accurate and overflow-free; rounded once to the output dtype
        if attrs["ord"] == 1:
            out = np.sum(np.abs(xa), axis=axes)
        else:
            out = np.sqrt(np.sum(xa * xa, axis=axes))
        od = attrs["out_dtype"] or x.dtype
        return [_fresh(out, reduced_shape(x.shape, axes, attrs["keepdims"]), od)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        x, out, dy = inputs[0], outputs[0], ograds[0]
        xdt = _dtype_name(x)
        out, dy = _cast_to(F, out, xdt), _cast_to(F, dy, xdt)
        bkw = dict(axis=attrs["axis"], keepdims=attrs["keepdims"], exclude=False)
        bdy = F._backward_sum(dy, x, **bkw)
        if attrs["ord"] == 1:
            return [F.elemwise_mul(bdy, F.sign(x))]
        # MXNet: igrad = ograd * data / norm (NaN where the norm is 0, as MXNet)
        return [F.elemwise_mul(bdy, F.elemwise_div(x, F._backward_sum(out, x, **bkw)))]


# ======================================================================================
# softmax family
# ======================================================================================

def _f32(bits: int) -> np.float32:
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


# oneDNN (v2.x) jit eltwise exp constants
_LN_FLT_MIN = _f32(0xC2AEAC50)
_LN_FLT_MAX = _f32(0x42B17218)
_LOG2E = _f32(0x3FB8AA3B)
_LN2 = _f32(0x3F317218)
_EXP_POLY = (_f32(0x3C07CFCE), _f32(0x3D2B9D0D), _f32(0x3E2AAD40), _f32(0x3EFFFEE3),
             _f32(0x3F7FFFFB), np.float32(1.0))  # p5 .. p1, p0 (Horner order)

#: lanes of the SIMD register oneDNN accumulates the softmax sum in (AVX-512: 16 floats)
SIMD_LANES = 16


def _fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Correctly rounded float32 fused multiply-add a*b + c (as the FMA instruction).

    The float32 product is exact in float64; the float64 sum is made round-to-odd
    (exact error by TwoSum), so the final rounding to float32 is the single correct one.
    """
    p = a.astype(np.float64) * b.astype(np.float64)
    c = np.broadcast_to(np.asarray(c, dtype=np.float64), p.shape)
    s = p + c
    t = s - p
    err = (p - (s - t)) + (c - t)
    even = (s.view(np.uint64) & np.uint64(1)) == 0
    fix = (err != 0) & even & np.isfinite(s)
    if np.any(fix):
        s = s.copy()
        s[fix] = np.nextafter(s[fix], np.where(err[fix] > 0, np.inf, -np.inf))
    return s.astype(np.float32)


def _onednn_exp(x: np.ndarray) -> np.ndarray:
    """exp(x) for float32 x exactly as oneDNN's jit eltwise injector computes it."""
    x = np.asarray(x, dtype=np.float32)
    underflow = x < _LN_FLT_MIN
    x = np.maximum(np.minimum(x, _LN_FLT_MAX), _LN_FLT_MIN)
    fx = np.floor(x * _LOG2E + np.float32(0.5)).astype(np.float32)
    r = _fma32(-fx, np.full_like(x, _LN2), x)
    n = (fx - np.float32(1.0)).astype(np.int32)
    scale = ((n + 127) << 23).astype(np.int32).view(np.float32)
    scale = np.where(underflow, np.float32(0.0), scale)
    y = np.full_like(x, _EXP_POLY[0])
    for coef in _EXP_POLY[1:]:
        y = _fma32(y, r, coef)
    return (y * scale) * np.float32(2.0)


def _simd_lane_sum(e: np.ndarray) -> np.ndarray:
    """Sum of float32 `e` over its last axis as oneDNN's vector loop does: element j goes to
    lane j % SIMD_LANES (added in order), then the lanes are folded pairwise (i ^ 8, 4, 2, 1).
    Returns keepdims shape."""
    n = e.shape[-1]
    w = SIMD_LANES
    pad = (-n) % w
    if pad:
        e = np.concatenate([e, np.zeros(e.shape[:-1] + (pad,), np.float32)], axis=-1)
    lanes = e.reshape(e.shape[:-1] + (-1, w))
    acc = lanes[..., 0, :].copy()
    for v in range(1, lanes.shape[-2]):
        acc = acc + lanes[..., v, :]
    step = w // 2
    idx = np.arange(w)
    while step >= 1:
        acc = acc + acc[..., idx ^ step]
        step //= 2
    return acc[..., :1]


def _onednn_softmax_last_axis(x: np.ndarray) -> np.ndarray:
    """float32 softmax over the last axis, bit-identical to MXNet 1.9.1's oneDNN path."""
    m = np.max(x, axis=-1, keepdims=True)
    e = _onednn_exp(x - m)
    inv = np.float32(1.0) / _simd_lane_sum(e)
    return e * inv


def _acc_dtype(dtype: np.dtype) -> np.dtype:
    """MXNet's accumulation type for softmax sums (MXNET_REAL_ACC_TYPE_SWITCH)."""
    return np.dtype(np.float32) if dtype == np.float16 else np.dtype(np.float64)


def _length_mask(shape: tuple, axis: int, length: np.ndarray | None) -> np.ndarray | None:
    """Boolean mask of valid positions along `axis` (j < length), broadcastable to `shape`."""
    if length is None:
        return None
    pos = np.arange(shape[axis]).reshape((-1,) + (1,) * (len(shape) - axis - 1))
    lens = np.expand_dims(length.astype(np.int64), axis)
    return pos < lens


def softmax_reference(x: np.ndarray, axis: int, temperature: float | None = None,
                      out_dtype=None, length: np.ndarray | None = None, negate: bool = False,
                      log: bool = False, engine: str = "auto") -> np.ndarray:
    """softmax / log_softmax / softmin of `x` along `axis` with MXNet 1.9.1 CPU numerics.

    `engine` "auto" picks oneDNN's path where MXNet does (float32 in and out, no
    temperature, last axis, 1-4 dims, no length, plain softmax), else the native kernel;
    "native" forces the native one. Positions at or beyond `length` are 0. The native
    kernel subtracts the max and scales by 1/temperature in the input dtype, takes exp in
    float32 (float64 for float64 input), sums in `_acc_dtype` and divides once.
    """
    od = np.dtype(out_dtype) if out_dtype is not None else x.dtype
    axis = axis % x.ndim
    if (engine == "auto" and x.dtype == np.float32 and od == np.float32 and temperature is None
            and axis == x.ndim - 1 and 1 <= x.ndim <= 4 and length is None and not negate
            and not log and x.shape[-1] > 0):
        return np.ascontiguousarray(_onednn_softmax_last_axis(x))
    # Every full-size temporary below is needed: casts are `copy=False`, the float64 sum casts
    # in the reduction's buffer (`_sum_as`), and the last step writes the output dtype directly
    # (computed in the accumulation type, then rounded once, as an explicit cast would).
    dt = x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)
    v = (-x if negate else x).astype(dt, copy=False)
    mask = _length_mask(x.shape, axis, length)
    if x.shape[axis] == 0:
        return np.zeros(x.shape, od)
    if mask is not None:
        m = np.max(np.where(mask, v, -np.inf), axis=axis, keepdims=True)
        m = np.where(np.isfinite(m), m, 0).astype(dt)
    else:
        m = np.maximum.reduce(v, axis=axis, keepdims=True)   # np.max without its Python wrapper
    z = v - m
    if temperature is not None and temperature != 1.0:
        z = (z / dt.type(temperature)).astype(dt, copy=False)
    with np.errstate(all="ignore"):
        # std::exp of float and of half (promoted) both yield float; double stays double
        e = np.exp(z.astype(np.float64 if dt == np.float64 else np.float32, copy=False))
        if mask is not None:
            e = np.where(mask, e, 0)
        acc = _acc_dtype(dt)
        s = _sum_as(e, axis, acc)
        out = np.empty(x.shape, od if mask is None else acc)
        if log:
            np.subtract(z, np.log(s), out=out, dtype=acc, casting="unsafe")
        else:
            np.divide(e, s, out=out, casting="unsafe", dtype=acc)
    if mask is not None:
        out = np.where(mask, out, 0).astype(od, copy=False)
    return np.ascontiguousarray(out)


#: numpy's reduction buffer (elements): a sum with `dtype=` casts and adds pairwise within one
#: buffer, the same order as summing a pre-cast array, for reduced lengths up to this
_SUM_BUFFER = 8192


def _sum_as(a: np.ndarray, axis: int, acc: np.dtype) -> np.ndarray:
    """`np.sum(a.astype(acc), axis, keepdims=True)` bit for bit, without the full-size cast
    where the reduced axis fits numpy's reduction buffer (beyond it the buffered sum would
    add in another order)."""
    if a.dtype == acc or a.shape[axis] > _SUM_BUFFER:
        return np.add.reduce(a.astype(acc, copy=False), axis=axis, keepdims=True)
    return np.add.reduce(a, axis=axis, keepdims=True, dtype=acc)   # np.sum's own reduction


def _mshadow_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    """mshadow's Softmax (used by SoftmaxActivation): exp(x - max) and a sequential sum
    in the input dtype, then one division per element."""
    m = np.max(x, axis=axis, keepdims=True)
    with np.errstate(all="ignore"):
        e = np.exp(x - m)
    s = np.zeros_like(np.take(e, [0], axis=axis))
    for j in range(x.shape[axis]):
        s = s + np.take(e, [j], axis=axis)
    return np.ascontiguousarray((e / s).astype(x.dtype))


_SOFTMAX_PARAMS = {
    "axis": Param(Int, -1, "axis to normalise over"),
    "temperature": Param(Optional(Float), None, "divide the input by this before exp"),
    "dtype": Param(Optional(Enum("float16", "float32", "float64")), None, "output dtype"),
    "use_length": Param(Optional(Bool), False, "mask positions >= length (second input)"),
}


class _SoftmaxBase(Op):
    """softmax / log_softmax / softmin: normalised exponentials along `axis`.

    With `use_length`, a second input `length` (data's shape without `axis`) limits each
    row; positions at or beyond it produce 0 and receive no gradient.
    """
    params = _SOFTMAX_PARAMS
    kernel = "softmax"
    negate = False
    log = False

    def input_names(self, attrs):
        return ["data", "length"] if attrs["use_length"] else ["data"]

    def infer_shape(self, attrs, in_shapes):
        if attrs["temperature"] == 0:
            raise MXNetError(f"{self.name}: temperature must be non-zero, got 0")
        data = in_shapes[0]
        if data is not None:
            _axis_index(self.name, attrs["axis"], len(data))
        if not attrs["use_length"]:
            return [data], [data]
        length = in_shapes[1]
        if data is not None:
            ax = attrs["axis"] % len(data)
            want = tuple(d for i, d in enumerate(data) if i != ax) or (1,)
            length = merge_shape(self.name, "input 'length'", want, length)
        return [data, length], [data]

    def infer_type(self, attrs, in_types):
        t = in_types[0]
        ins = [t] + ([in_types[1] or "int32"] if attrs["use_length"] else [])
        return ins, [attrs["dtype"] or t]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        ax = _axis_index(self.name, attrs["axis"], x.ndim)
        length = None
        if attrs["use_length"]:
            length = inputs[1]
            want = tuple(d for i, d in enumerate(x.shape) if i != ax) or (1,)
            if length.shape != want and not (length.size == int(np.prod(want)) and x.ndim == 1):
                raise MXNetError(f"{self.name}: shape mismatch for input 'length': expected {want}, "
                                 f"got {length.shape}")
            length = length.reshape(want if x.ndim > 1 else ())
        return [softmax_reference(x, ax, attrs["temperature"], attrs["dtype"], length,
                                  negate=self.negate, log=self.log)]

    def _scale(self, F, attrs, g):
        """Apply d(z)/d(x) of the pre-exp scaling z = ±x / temperature."""
        t = attrs["temperature"]
        if t == 0:
            raise MXNetError(f"{self.name}: temperature must be non-zero, got 0")
        factor = (-1.0 if self.negate else 1.0) / (1.0 if t is None else t)
        return g if factor == 1.0 else F._mul_scalar(g, scalar=factor)

    def _finish(self, F, attrs, inputs, dx):
        x = inputs[0]
        grads = [_cast_to(F, self._scale(F, attrs, dx), _dtype_name(x))]
        if attrs["use_length"]:
            grads.append(F.zeros_like(inputs[1]))
        return grads

    def grad(self, F, attrs, inputs, outputs, ograds):
        # y = softmax(z): dz = y * (dy - sum(dy * y))
        return self._finish(F, attrs, inputs, F._backward_softmax(ograds[0], outputs[0], axis=attrs["axis"]))


@register("softmax")
class Softmax(_SoftmaxBase):
    """exp(x / t) normalised to sum 1 along `axis`."""


@register("softmin")
class Softmin(_SoftmaxBase):
    """softmax of -x: exp(-x / t) normalised to sum 1 along `axis`."""
    negate = True


@register("log_softmax")
class LogSoftmax(_SoftmaxBase):
    """log(softmax(x)) along `axis`, computed stably as (x - max) - log(sum(exp(x - max)))."""
    log = True

    def grad(self, F, attrs, inputs, outputs, ograds):
        # y = log softmax(z): dz = dy - exp(y) * sum(dy)
        y, dy = outputs[0], ograds[0]
        ax = (attrs["axis"],)
        if attrs["use_length"]:
            # valid positions: softmax of zeros is 1/length there and exactly 0 beyond
            valid = F._not_equal_scalar(F.softmax(F.zeros_like(inputs[0]), inputs[1], axis=attrs["axis"],
                                                  use_length=True, dtype=_dtype_name(y)), scalar=0.0)
            dy = F.elemwise_mul(dy, valid)
            p = F.elemwise_mul(F.exp(y), valid)
            dx = F.broadcast_sub(dy, F.broadcast_mul(p, F.sum(dy, axis=ax, keepdims=True)))
        else:
            dx = F._backward_log_softmax(dy, y, axis=attrs["axis"])
        return self._finish(F, attrs, inputs, dx)


class _SoftmaxGradBase(Op):
    """The gradient of softmax (`log` False) or log_softmax along `axis` with respect to its
    pre-exponential input, from the head gradient `ograd` and the forward `output` y, in one
    op (one native pass for the row sums, one for the result):
      softmax:      dz = y * (dy - sum(dy * y))
      log_softmax:  dz = dy - exp(y) * sum(dy)
    Sums are accumulated in float64 (MXNet's accumulation type for float32); exp is taken in
    the data's float type; each result is rounded once to the output dtype (ograd's)."""
    inputs = ("ograd", "output")
    params = {"axis": Param(Int, -1, "axis the forward normalised over")}
    kernel = "softmax"
    hidden = True
    log = False

    def infer_shape(self, attrs, in_shapes):
        shape = merge_shape(self.name, "input 'output'", in_shapes[0], in_shapes[1])
        if shape is not None:
            _axis_index(self.name, attrs["axis"], len(shape))
        return [shape, shape], [shape]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[0] or in_types[1]]

    def compute(self, attrs, inputs, ctx):
        dy, y = inputs
        if dy.shape != y.shape:
            raise MXNetError(f"{self.name}: shape mismatch for input 'output': expected {dy.shape}, got {y.shape}")
        ax = _axis_index(self.name, attrs["axis"], dy.ndim)
        acc = np.float64 if dy.dtype.kind == "f" and dy.dtype.itemsize >= 4 else np.float32
        with np.errstate(all="ignore"):
            if self.log:
                p = np.exp(y).astype(acc, copy=False)
                out = dy.astype(acc) - p * np.add.reduce(dy, axis=ax, keepdims=True, dtype=acc)   # np.sum
            else:
                y64 = y.astype(acc, copy=False)
                out = y64 * (dy - np.sum(dy * y64, axis=ax, keepdims=True))
        return [np.ascontiguousarray(out.astype(dy.dtype, copy=False))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        dy, y = inputs
        g, ax = ograds[0], (attrs["axis"],)
        if self.log:
            # dz = dy - p * S (p = exp(y), S = sum(dy)): d dy = g - sum(g * p), d y = -g * p * S
            p = F.exp(y)
            d_dy = F.broadcast_sub(g, F.sum(F.elemwise_mul(g, p), axis=ax, keepdims=True))
            d_y = F.negative(F.broadcast_mul(F.elemwise_mul(g, p), F.sum(dy, axis=ax, keepdims=True)))
            return [d_dy, d_y]
        # dz = y * (dy - s), s = sum(dy * y): d dy = y * (g - t), d y = g * (dy - s) - dy * t, t = sum(g * y)
        t = F.sum(F.elemwise_mul(g, y), axis=ax, keepdims=True)
        s = F.sum(F.elemwise_mul(dy, y), axis=ax, keepdims=True)
        d_dy = F.elemwise_mul(y, F.broadcast_sub(g, t))
        d_y = F.elemwise_sub(F.elemwise_mul(g, F.broadcast_sub(dy, s)), F.broadcast_mul(dy, t))
        return [d_dy, d_y]


@register("_backward_softmax")
class SoftmaxGrad(_SoftmaxGradBase):
    """softmax's gradient: y * (dy - sum(dy * y)) along `axis`."""


@register("_backward_log_softmax")
class LogSoftmaxGrad(_SoftmaxGradBase):
    """log_softmax's gradient: dy - exp(y) * sum(dy) along `axis`."""
    log = True


@register("SoftmaxActivation")
class SoftmaxActivation(Op):
    """Legacy softmax: `instance` mode normalises over the last axis (MXNet flattens the
    leading axes), `channel` mode over axis 1 of an input with at least 3 dims."""
    params = {"mode": Param(Enum("instance", "channel"), "instance", "instance or channel")}
    kernel = "softmax"
    lists_input_names = False

    def _axis(self, attrs, ndim: int) -> int:
        if attrs["mode"] == "channel":
            if ndim < 3:
                raise MXNetError(f"SoftmaxActivation: input needs at least 3 dimensions when "
                                 f"mode=channel, got {ndim}")
            return 1
        return ndim - 1

    def infer_shape(self, attrs, in_shapes):
        if in_shapes[0] is not None:
            self._axis(attrs, len(in_shapes[0]))
        return [in_shapes[0]], [in_shapes[0]]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        return [_mshadow_softmax(x, self._axis(attrs, x.ndim))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        y, dy = outputs[0], ograds[0]
        ax = 1 if attrs["mode"] == "channel" else -1
        s = F.sum(F.elemwise_mul(dy, y), axis=(ax,), keepdims=True)
        return [F.elemwise_mul(y, F.broadcast_sub(dy, s))]
