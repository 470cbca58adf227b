"""NumPy-semantics reductions (`_np_sum`, `_npi_mean`, `_np_max`, `_npi_std`, `_npi_argmax`, ...):
`axis` None (every axis: a zero-dim result), an int or a tuple; `keepdims`; MXNet 1.9.1's result
dtypes (sum and prod keep an integer dtype, a bool sum is int64, an integer mean is float32, max,
min, std and var keep the input dtype, argmax/argmin give int64)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Dtype, Float, Int, Optional, Param
from .np_base import Axis, NumpyOp, normalize_axis, register_numpy

__all__ = ["reduce_axes", "expand_reduced"]


def reduce_axes(op: str, axis, ndim: int) -> tuple:
    """The axes `axis` names, normalized and checked (all axes for None)."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = tuple(normalize_axis(op, a, ndim) for a in axes)
    if len(set(out)) != len(out):
        raise MXNetError(f"{op}: duplicate value in axis {axis}")
    return out


def expand_reduced(g: np.ndarray, axes: tuple, shape: tuple, keepdims: bool) -> np.ndarray:
    """A reduction's output-shaped `g` broadcast back over the input `shape`."""
    if not keepdims:
        g = np.expand_dims(g, axes) if axes else g
    return np.broadcast_to(g, shape)


_REDUCE_PARAMS = {"axis": Param(Axis, None), "dtype": Param(Optional(Dtype), None),
                  "keepdims": Param(Bool, False), "initial": Param(Optional(Float), None)}


class _Reduce(NumpyOp):
    """y = reduction of x over `axis`."""
    params = _REDUCE_PARAMS
    fn: Callable

    def result_dtype(self, attrs, x_dtype) -> np.dtype:
        if attrs.get("dtype"):
            return np.dtype(attrs["dtype"])
        return np.dtype(np.int64) if x_dtype.kind == "b" else x_dtype

    def out_types(self, attrs, in_types):
        return [self.result_dtype(attrs, in_types[0])]

    def reduced_axes(self, attrs, shape, dtype):
        if self.reduces is None or attrs.get("initial") is not None:
            return None
        return tuple(sorted(reduce_axes(self.name, attrs["axis"], len(shape))))

    def forward(self, attrs, x):
        axes = reduce_axes(self.name, attrs["axis"], x.ndim)
        dt = self.result_dtype(attrs, x.dtype)
        kwargs = {}
        if attrs.get("initial") is not None:
            kwargs["initial"] = attrs["initial"]
        y = type(self).fn(x, axis=axes, keepdims=attrs["keepdims"], **kwargs)
        return np.asarray(y).astype(dt, copy=False)


@register_numpy("_np_sum", aliases=("_npi_sum",))
class NpSum(_Reduce):
    """numpy.sum."""
    reduces = "sum"
    fn = staticmethod(np.sum)

    def vjp(self, attrs, xs, ys, dys):
        axes = reduce_axes(self.name, attrs["axis"], xs[0].ndim)
        return [expand_reduced(dys[0], axes, xs[0].shape, attrs["keepdims"])]


@register_numpy("_np_prod", aliases=("_np_product",))
class NpProd(_Reduce):
    """numpy.prod."""
    reduces = "prod"
    fn = staticmethod(np.prod)

    def vjp(self, attrs, xs, ys, dys):
        x = xs[0]
        axes = reduce_axes(self.name, attrs["axis"], x.ndim)
        g = expand_reduced(dys[0], axes, x.shape, attrs["keepdims"])
        y = expand_reduced(ys[0], axes, x.shape, attrs["keepdims"])
        return [g * y / x]


@register_numpy("_npi_mean")
class NpMean(_Reduce):
    """numpy.mean (an integer or bool array's mean is float32)."""
    reduces = "mean"

    def reduced_axes(self, attrs, shape, dtype):
        """Float input only (numpy takes an integer array's mean in float64)."""
        return super().reduced_axes(attrs, shape, dtype) if np.dtype(dtype).kind == "f" else None
    fn = staticmethod(np.mean)

    def result_dtype(self, attrs, x_dtype):
        if attrs.get("dtype"):
            return np.dtype(attrs["dtype"])
        return x_dtype if x_dtype.kind == "f" else np.dtype(np.float32)

    def vjp(self, attrs, xs, ys, dys):
        x = xs[0]
        axes = reduce_axes(self.name, attrs["axis"], x.ndim)
        n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
        return [expand_reduced(dys[0], axes, x.shape, attrs["keepdims"]) / max(n, 1)]


class _Extreme(_Reduce):
    """max / min: the gradient goes to every element equal to the extreme."""

    def result_dtype(self, attrs, x_dtype):
        return x_dtype

    def forward(self, attrs, x):
        if x.size == 0:
            raise MXNetError(f"{self.name}: zero-size array to reduction operation which has no identity")
        return super().forward(attrs, x)

    def vjp(self, attrs, xs, ys, dys):
        x = xs[0]
        axes = reduce_axes(self.name, attrs["axis"], x.ndim)
        g = expand_reduced(dys[0], axes, x.shape, attrs["keepdims"])
        y = expand_reduced(ys[0], axes, x.shape, attrs["keepdims"])
        return [g * (x == y)]


register_numpy("_np_max", aliases=("_npi_max", "_np_amax"))(type("NpMax", (_Extreme,), {
    "fn": staticmethod(np.max), "reduces": "max", "__doc__": "numpy.max."}))
register_numpy("_np_min", aliases=("_npi_min", "_np_amin"))(type("NpMin", (_Extreme,), {
    "fn": staticmethod(np.min), "reduces": "min", "__doc__": "numpy.min."}))


class _Moment(NumpyOp):
    """var / std with `ddof`, in the input's dtype (integer inputs as MXNet's kernels compute them:
    the mean, the variance and the root each truncated)."""
    params = {"axis": Param(Axis, None), "dtype": Param(Optional(Dtype), None),
              "ddof": Param(Int, 0), "keepdims": Param(Bool, False)}
    is_std = False

    def out_types(self, attrs, in_types):
        return [self._dtype(attrs, in_types[0])]

    def _dtype(self, attrs, x_dtype):
        return np.dtype(attrs["dtype"]) if attrs["dtype"] else x_dtype

    def forward(self, attrs, x):
        axes = reduce_axes(self.name, attrs["axis"], x.ndim)
        dt = self._dtype(attrs, x.dtype)
        if dt.kind == "f":
            fn = np.std if self.is_std else np.var
            return np.asarray(fn(x, axis=axes, ddof=attrs["ddof"], keepdims=attrs["keepdims"])).astype(dt, copy=False)
        # MXNet's integer kernels: the mean, the variance and the root each truncated to the dtype
        n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
        xi = x.astype(np.int64)
        mean = np.trunc(xi.sum(axis=axes, keepdims=True) / max(n, 1)).astype(np.int64)
        var = np.trunc(((xi - mean) ** 2).sum(axis=axes, keepdims=attrs["keepdims"]) / max(n - attrs["ddof"], 1))
        return np.asarray(np.trunc(np.sqrt(var)) if self.is_std else var).astype(dt)

    def vjp(self, attrs, xs, ys, dys):
        x = xs[0]
        axes = reduce_axes(self.name, attrs["axis"], x.ndim)
        n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
        g = expand_reduced(dys[0], axes, x.shape, attrs["keepdims"])
        centered = x - x.mean(axis=axes, keepdims=True)
        dvar = g * 2.0 * centered / max(n - attrs["ddof"], 1)
        if self.is_std:
            return [dvar / (2.0 * expand_reduced(ys[0], axes, x.shape, attrs["keepdims"]))]
        return [dvar]


register_numpy("_npi_var")(type("NpVar", (_Moment,), {"__doc__": "numpy.var."}))
register_numpy("_npi_std")(type("NpStd", (_Moment,), {"is_std": True, "__doc__": "numpy.std."}))


class _ArgExtreme(NumpyOp):
    """argmax / argmin along one axis (of the flattened array for None), int64."""
    params = {"axis": Param(Optional(Int), None), "keepdims": Param(Bool, False)}
    no_gradient = True
    fn: Callable

    def out_types(self, attrs, in_types):
        return [np.dtype(np.int64)]

    def reduced_axes(self, attrs, shape, dtype):
        axis = attrs["axis"]
        return tuple(range(len(shape))) if axis is None else (normalize_axis(self.name, axis, len(shape)),)

    def forward(self, attrs, x):
        if x.size == 0:
            raise MXNetError(f"{self.name}: attempt to get argmax/argmin of an empty sequence")
        axis = attrs["axis"]
        if axis is not None:
            axis = normalize_axis(self.name, axis, x.ndim)
        y = type(self).fn(x, axis=axis)
        if attrs["keepdims"]:
            y = np.expand_dims(y, axis) if axis is not None else np.reshape(y, (1,) * x.ndim)
        return np.asarray(y, np.int64)


register_numpy("_npi_argmax")(type("NpArgmax", (_ArgExtreme,), {
    "fn": staticmethod(np.argmax), "reduces": "argmax", "__doc__": "numpy.argmax."}))
register_numpy("_npi_argmin")(type("NpArgmin", (_ArgExtreme,), {
    "fn": staticmethod(np.argmin), "reduces": "argmin", "__doc__": "numpy.argmin."}))


class _Logical(NumpyOp):
    """all / any over `axis` (bool)."""
    params = {"axis": Param(Axis, None), "keepdims": Param(Bool, False)}
    no_gradient = True
    fn: Callable

    def out_types(self, attrs, in_types):
        return [np.dtype(bool)]

    def forward(self, attrs, x):
        axes = reduce_axes(self.name, attrs["axis"], x.ndim)
        return np.asarray(type(self).fn(x, axis=axes, keepdims=attrs["keepdims"]))


register_numpy("_np_all")(type("NpAll", (_Logical,), {"fn": staticmethod(np.all), "__doc__": "numpy.all."}))
register_numpy("_np_any", aliases=("_np_sometrue",))(type("NpAny", (_Logical,), {"fn": staticmethod(np.any),
                                                                                "__doc__": "numpy.any."}))
