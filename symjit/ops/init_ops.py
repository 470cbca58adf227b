"""Array-creating operators with no data inputs: `_zeros`, `_ones`, `_full`, `_arange`, `_eye`,
`_linspace` (what `mx.sym.zeros` .. `mx.sym.linspace` build, and what MXNet-exported graphs hold,
e.g. the `begin_state` of Gluon RNN layers).

Semantics are MXNet 1.9.1's (`src/operator/tensor/init_op.h`): the output shape comes from the
attributes only (`shape`, or the range/`N`, `M` arithmetic), the dtype from `dtype` (float32 by
default). `_arange` has ceil((stop - start) / step) values, each repeated `repeat` times; without
`stop` it counts from 0 to `start`. `_linspace` has `num` values from `start` to `stop`
(`endpoint` includes `stop`). None of them has a gradient input, so autodiff never reaches them.
"""
from __future__ import annotations

import math

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Dtype, Float, Int, Optional, Param, Shape, Str
from .registry import Op, register

_CTX = {"ctx": Param(Str, "", "device context (placement is the frontend's)")}


class _Creation(Op):
    """An op without inputs whose output is fully determined by its attributes. Subclasses
    define `out_shape(attrs) -> tuple` and `values(attrs, shape, dtype) -> np.ndarray`."""
    inputs = ()

    def infer_shape(self, attrs, in_shapes):
        return [], [self.out_shape(attrs)]

    def infer_type(self, attrs, in_types):
        return [], [attrs["dtype"]]

    def compute(self, attrs, inputs, ctx):
        shape = self.out_shape(attrs)
        if not all(shape) and ctx.out_shapes and ctx.out_shapes[0] is not None:
            shape = tuple(a or b for a, b in zip(shape, ctx.out_shapes[0]))   # dims inference filled
        if not all(shape) and len(shape) and any(d == 0 for d in self._given(attrs)):
            raise MXNetError(f"{self.name}: the shape {tuple(self._given(attrs))} has unknown dims that "
                             "inference could not fill")
        return [np.ascontiguousarray(self.values(attrs, shape, np.dtype(attrs["dtype"])))]

    def _given(self, attrs) -> tuple:
        return self.out_shape(attrs)

    def grad(self, F, attrs, inputs, outputs, ograds):
        return []


def _checked_shape(op: str, shape) -> tuple:
    """The shape with unknown dims (MXNet: -1, or 0 outside numpy shape semantics) as 0, which
    shape inference fills from the consumers."""
    if any(d < -1 for d in shape):
        raise MXNetError(f"{op}: shape dims must be >= -1 (-1: unknown), got {tuple(shape)}")
    return tuple(max(int(d), 0) for d in shape)


class _Filled(_Creation):
    params = {"shape": Param(Shape, ()), "dtype": Param(Dtype, "float32"), **_CTX}
    fill: float = 0.0

    def out_shape(self, attrs):
        return _checked_shape(self.name, attrs["shape"])

    def values(self, attrs, shape, dtype):
        return np.full(shape, self.fill_value(attrs), dtype=dtype)

    def fill_value(self, attrs) -> float:
        return self.fill


@register("_zeros", aliases=("_zeros_without_dtype",))
class Zeros(_Filled):
    """An array of zeros of `shape` and `dtype`."""
    fill = 0.0


@register("_ones")
class Ones(_Filled):
    """An array of ones of `shape` and `dtype`."""
    fill = 1.0


@register("_full")
class Full(_Filled):
    """An array of `shape` and `dtype` filled with `value`."""
    params = {**_Filled.params, "value": Param(Float)}

    def fill_value(self, attrs):
        return attrs["value"]


def arange_length(op: str, start: float, stop: float | None, step: float) -> int:
    """Number of values of MXNet's arange (before `repeat`); checks the step."""
    if step == 0:
        raise MXNetError(f"{op}: step must not be 0")
    if stop is None:
        start, stop = 0.0, start
    n = math.ceil((stop - start) / step)
    return max(int(n), 0)


def arange_values(start: float, step: float, n: int, repeat: int, dtype) -> np.ndarray:
    """MXNet's arange values: `start` and `step` are first converted to `dtype` (an integer
    dtype truncates them: arange(1.3, 4.0, 1.3, dtype=int32) is [1, 2, 3]), then value i is
    start + i * step computed in `dtype` (integers wrap as in C), each repeated `repeat` times."""
    dtype = np.dtype(dtype)
    index = np.arange(n, dtype=np.int64)
    if dtype.kind in "iub":
        data = int(start) + index * int(step)
    else:
        data = dtype.type(start) + index.astype(dtype) * dtype.type(step)
    return np.repeat(data, repeat).astype(dtype)


@register("_arange")
class Arange(_Creation):
    """Evenly spaced values start, start + step, ... below stop, each repeated `repeat` times."""
    params = {"start": Param(Float), "stop": Param(Optional(Float), None),
              "step": Param(Float, 1.0), "repeat": Param(Int, 1),
              "infer_range": Param(Bool, False, "take stop from the consumer (not supported: give stop)"),
              "dtype": Param(Dtype, "float32"), **_CTX}

    def out_shape(self, attrs):
        if attrs["repeat"] < 1:
            raise MXNetError(f"{self.name}: repeat must be at least 1, got {attrs['repeat']}")
        return (arange_length(self.name, attrs["start"], attrs["stop"], attrs["step"]) * attrs["repeat"],)

    def values(self, attrs, shape, dtype):
        start = 0.0 if attrs["stop"] is None else attrs["start"]
        return arange_values(start, attrs["step"], shape[0] // attrs["repeat"], attrs["repeat"], dtype)


@register("_linspace")
class Linspace(_Creation):
    """`num` evenly spaced values from start to stop (stop included when `endpoint`)."""
    params = {"start": Param(Float), "stop": Param(Float), "num": Param(Int),
              "endpoint": Param(Bool, True), "dtype": Param(Dtype, "float32"), **_CTX}

    def out_shape(self, attrs):
        if attrs["num"] < 0:
            raise MXNetError(f"{self.name}: num must be non-negative, got {attrs['num']}")
        return (attrs["num"],)

    def values(self, attrs, shape, dtype):
        return np.linspace(attrs["start"], attrs["stop"], attrs["num"], endpoint=attrs["endpoint"]).astype(dtype)


@register("_eye")
class Eye(_Creation):
    """An N x M matrix (M = N when 0) with ones on diagonal k and zeros elsewhere."""
    params = {"N": Param(Int), "M": Param(Int, 0), "k": Param(Int, 0),
              "dtype": Param(Dtype, "float32"), **_CTX}

    def out_shape(self, attrs):
        n, m = attrs["N"], attrs["M"] or attrs["N"]
        return _checked_shape(self.name, (n, m))

    def values(self, attrs, shape, dtype):
        return np.eye(shape[0], shape[1], attrs["k"], dtype=dtype)


@register("_contrib_arange_like")
class ArangeLike(Op):
    """Values start, start + step, ... (each repeated `repeat` times) shaped like `data`, or,
    with `axis`, as many as data has along that axis (a 1-D array); the dtype is data's.
    Only `data`'s shape is read: its gradient is zero."""
    inputs = ("data",)
    params = {"start": Param(Float, 0.0), "step": Param(Float, 1.0), "repeat": Param(Int, 1),
              "axis": Param(Optional(Int), None), **_CTX}
    shape_only = True

    def _out_shape(self, attrs, d: tuple) -> tuple:
        if attrs["repeat"] < 1:
            raise MXNetError(f"{self.name}: repeat must be at least 1, got {attrs['repeat']}")
        axis = attrs["axis"]
        if axis is None:
            return tuple(d)
        if not -len(d) <= axis < len(d):
            raise MXNetError(f"{self.name}: axis {axis} is out of bounds for array of dimension {len(d)}")
        return (d[axis],)

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        return [d], [None if d is None else self._out_shape(attrs, tuple(d))]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[0]]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        shape = self._out_shape(attrs, x.shape)
        n = math.prod(shape)
        repeat = attrs["repeat"]
        values = arange_values(attrs["start"], attrs["step"], -(-n // repeat), repeat, x.dtype)[:n]
        return [np.ascontiguousarray(values.reshape(shape))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.zeros_like(inputs[0])]
