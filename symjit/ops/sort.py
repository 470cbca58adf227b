"""Sorting operators: topk, sort, argsort, with MXNet 1.x semantics.

All three work along one `axis` (negative allowed) or, with `axis=None`, on the
flattened array. Indices are returned as float32 by default (MXNet's `dtype`
parameter). Order among equal elements is stable (the lower index first), in both
directions. `topk` with `ret_typ='value'` and `sort` carry a hidden second output, the
int32 indices, which their gradients use.

Gradients: values flow back to the positions they were taken from through the hidden
scatter op `_backward_topk`; its adjoint is the hidden gather `_take_along_axis`, and
vice versa, so higher-order gradients stay within registered ops. Indices and masks are
piecewise constant: their gradient is zero.
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Enum, Int, Optional, Param
from .registry import Op, merge_shape, register, shape_known

__all__ = ["sorted_indices"]

_INDEX_DTYPES = ("uint8", "int32", "int64", "float16", "float32", "float64")

#: largest element count whose indices each index dtype represents exactly (MXNet check)
_INDEX_LIMIT = {"uint8": 255, "int32": 2**31 - 1, "int64": 2**63 - 1, "float16": 2**11,
                "float32": 2**24, "float64": 2**53}


def _axis_index(op: str, axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise MXNetError(f"{op}: invalid axis {axis}: axis should be between {-ndim} and {ndim - 1} "
                         f"for an input with {ndim} dimensions")
    return axis % ndim


def sorted_indices(x: np.ndarray, is_ascend: bool) -> np.ndarray:
    """Stable argsort of `x` along its last axis, ascending or descending (ties keep the
    lower index first in both directions)."""
    if is_ascend:
        return np.argsort(x, axis=-1, kind="stable")
    n = x.shape[-1]
    return (n - 1) - np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1]


def _layout(op: str, shape: tuple, axis) -> tuple:
    """(normalised axis or None, element count along it); unknown dims give count 0."""
    if axis is None:
        n = 1
        for d in shape:
            n *= int(d)
        return None, n
    ax = _axis_index(op, axis, len(shape))
    return ax, int(shape[ax])


def _effective_k(op: str, k: int, n: int) -> int:
    """k <= 0 selects every element; otherwise 1 <= k <= n is required (when n is known)."""
    if k <= 0:
        return n
    if n and k > n:
        raise MXNetError(f"{op}: k must be smaller than or equal to the number of elements {n} "
                         f"along the axis, got k = {k}")
    return k


def _check_input(op: str, x: np.ndarray) -> None:
    if x.dtype == np.float16:
        raise MXNetError(f"{op}: float16 inputs are not supported")


def _check_index_dtype(op: str, n: int, dtype: str) -> None:
    if n > _INDEX_LIMIT[dtype]:
        raise MXNetError(f"{op}: index dtype {dtype} cannot represent the indices of {n} elements "
                         f"(at most {_INDEX_LIMIT[dtype]})")


def _top(op: str, x: np.ndarray, axis, k: int, is_ascend: bool):
    """Top-k values and int64 indices along `axis` (flattened when None)."""
    _check_input(op, x)
    ax, n = _layout(op, x.shape, axis)
    k = _effective_k(op, k, n)
    if ax is None:
        flat = x.reshape(-1)
        idx = sorted_indices(flat, is_ascend)[:k]
        return flat[idx], idx, ax, k
    moved = np.moveaxis(x, ax, -1)
    idx = sorted_indices(moved, is_ascend)[..., :k]
    vals = np.take_along_axis(moved, idx, axis=-1)
    return np.moveaxis(vals, -1, ax), np.moveaxis(idx, -1, ax), ax, k


def _c(a: np.ndarray, dtype=None) -> np.ndarray:
    return np.array(a, dtype=dtype, copy=True, order="C")


class _IndexedOutputs(Op):
    """Ops with one or two outputs: names `output` or `output0`, `output1` (nnvm's rule)."""
    kernel = "sort"

    def output_names(self, attrs):
        n = self.num_outputs(attrs)
        return ["output"] if n == 1 else [f"output{i}" for i in range(n)]


@register("topk")
class TopK(_IndexedOutputs):
    """The k largest (or smallest, `is_ascend`) elements along `axis`: their values,
    indices, both, or a 0/1 mask of the input's shape (`ret_typ`)."""
    params = {
        "axis": Param(Optional(Int), -1, "axis to select along; None flattens"),
        "k": Param(Int, 1, "number of elements; k < 1 selects all"),
        "ret_typ": Param(Enum("value", "indices", "mask", "both"), "indices", "what to return"),
        "is_ascend": Param(Bool, False, "select the smallest instead of the largest"),
        "dtype": Param(Enum(*_INDEX_DTYPES), "float32", "dtype of returned indices"),
    }

    def num_outputs(self, attrs):
        return 2 if attrs["ret_typ"] in ("value", "both") else 1

    def num_visible_outputs(self, attrs):
        return 2 if attrs["ret_typ"] == "both" else 1

    def infer_shape(self, attrs, in_shapes):
        shape = in_shapes[0]
        if shape is None:
            return list(in_shapes), [None] * self.num_outputs(attrs)
        shape = tuple(shape)
        ax, n = _layout(self.name, shape, attrs["axis"])
        k = _effective_k(self.name, attrs["k"], n)
        if attrs["ret_typ"] == "mask":
            return [shape], [shape]
        out = (k,) if ax is None else shape[:ax] + (k,) + shape[ax + 1:]
        return [shape], [out] * self.num_outputs(attrs)

    def infer_type(self, attrs, in_types):
        t = in_types[0]
        rt = attrs["ret_typ"]
        if rt == "indices":
            return [t], [attrs["dtype"]]
        if rt == "mask":
            return [t], [t]
        return [t], [t, "int32" if rt == "value" else attrs["dtype"]]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        rt = attrs["ret_typ"]
        vals, idx, ax, k = _top(self.name, x, attrs["axis"], attrs["k"], attrs["is_ascend"])
        n = x.size if ax is None else x.shape[ax]
        if rt == "mask":
            mask = np.zeros(x.size if ax is None else x.shape, dtype=x.dtype)
            if ax is None:
                mask[idx] = 1
            else:
                np.put_along_axis(mask, idx, 1, axis=ax)
            return [_c(mask.reshape(x.shape))]
        if rt == "indices":
            _check_index_dtype(self.name, n, attrs["dtype"])
            return [_c(idx, attrs["dtype"])]
        index_dtype = "int32" if rt == "value" else attrs["dtype"]
        _check_index_dtype(self.name, n, index_dtype)
        return [_c(vals, x.dtype), _c(idx, index_dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        x = inputs[0]
        if attrs["ret_typ"] in ("value", "both"):
            return [F._backward_topk(ograds[0], outputs[1], x, axis=attrs["axis"])]
        return [F.zeros_like(x)]


@register("sort")
class Sort(_IndexedOutputs):
    """The elements sorted along `axis` (the flattened array when None)."""
    params = {
        "axis": Param(Optional(Int), -1, "axis to sort along; None flattens"),
        "is_ascend": Param(Bool, True, "ascending (True) or descending order"),
    }
    outputs = ("output0", "output1")

    def num_visible_outputs(self, attrs):
        return 1

    def infer_shape(self, attrs, in_shapes):
        shape = in_shapes[0]
        if shape is None:
            return list(in_shapes), [None, None]
        shape = tuple(shape)
        ax, n = _layout(self.name, shape, attrs["axis"])
        out = (n,) if ax is None else shape
        return [shape], [out, out]

    def infer_type(self, attrs, in_types):
        return [in_types[0]], [in_types[0], "int32"]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        vals, idx, _, _ = _top(self.name, x, attrs["axis"], 0, attrs["is_ascend"])
        return [_c(vals, x.dtype), _c(idx, np.int32)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F._backward_topk(ograds[0], outputs[1], inputs[0], axis=attrs["axis"])]


@register("argsort")
class ArgSort(_IndexedOutputs):
    """Indices that sort the array along `axis` (the flattened array when None)."""
    params = {
        "axis": Param(Optional(Int), -1, "axis to sort along; None flattens"),
        "is_ascend": Param(Bool, True, "ascending (True) or descending order"),
        "dtype": Param(Enum(*_INDEX_DTYPES), "float32", "dtype of returned indices"),
    }

    def infer_shape(self, attrs, in_shapes):
        shape = in_shapes[0]
        if shape is None:
            return list(in_shapes), [None]
        shape = tuple(shape)
        ax, n = _layout(self.name, shape, attrs["axis"])
        return [shape], [(n,) if ax is None else shape]

    def infer_type(self, attrs, in_types):
        return [in_types[0]], [attrs["dtype"]]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        _, idx, ax, _ = _top(self.name, x, attrs["axis"], 0, attrs["is_ascend"])
        _check_index_dtype(self.name, x.size if ax is None else x.shape[ax], attrs["dtype"])
        return [_c(idx, attrs["dtype"])]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.zeros_like(inputs[0])]


# --------------------------------------------------------------------------------------
# Hidden scatter / gather along an axis (gradients of the ops above)
# --------------------------------------------------------------------------------------

_AXIS_PARAM = {"axis": Param(Optional(Int), -1, "axis of the indices; None: flattened data")}


def _index_array(op: str, idx: np.ndarray, n: int) -> np.ndarray:
    """Indices as int64, checked to lie in [0, n)."""
    out = idx.astype(np.int64)
    if out.size and (out.min() < 0 or out.max() >= n):
        raise MXNetError(f"{op}: index out of range [0, {n}): found {int(out.min())}..{int(out.max())}")
    return out


def _check_index_shape(op: str, idx_shape: tuple, data_shape: tuple, ax) -> None:
    """indices must have data's shape except along `ax` (1-D when ax is None)."""
    if ax is None:
        ok = len(idx_shape) == 1
    else:
        ok = len(idx_shape) == len(data_shape) and all(
            a == b for i, (a, b) in enumerate(zip(idx_shape, data_shape)) if i != ax)
    if not ok:
        raise MXNetError(f"{op}: shape mismatch for input 'indices': {idx_shape} does not match data "
                         f"shape {data_shape} outside axis {ax}")


@register("_backward_topk")
class ScatterAlongAxis(Op):
    """out = zeros(data.shape); out[..., indices[..., j], ...] = ograd[..., j, ...] along
    `axis` (indices are distinct within a row, as topk/sort produce them)."""
    inputs = ("ograd", "indices", "data")
    params = _AXIS_PARAM
    kernel = "gather"
    hidden = True
    forward_op = "_take_along_axis"   # the adjoint: ograd is shaped as the gather's output
    forward_inputs = {"data": "data", "indices": "indices"}
    forward_outputs = {"ograd": 0}

    def infer_shape(self, attrs, in_shapes):
        g, i, d = in_shapes
        gi = merge_shape(self.name, "input 'indices'", g, i)
        return [gi, gi, d], [d]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[0]]

    def compute(self, attrs, inputs, ctx):
        g, idx, d = inputs
        if g.shape != idx.shape:
            raise MXNetError(f"{self.name}: shape mismatch between 'ograd' {g.shape} and 'indices' {idx.shape}")
        ax, n = _layout(self.name, d.shape, attrs["axis"])
        _check_index_shape(self.name, idx.shape, d.shape, ax)
        idx = _index_array(self.name, idx, n)
        if ax is None:
            out = np.zeros(d.size, dtype=g.dtype)
            out[idx] = g
            return [out.reshape(d.shape)]
        out = np.zeros(d.shape, dtype=g.dtype)
        np.put_along_axis(out, idx, g, axis=ax)
        return [out]

    def grad(self, F, attrs, inputs, outputs, ograds):
        g, idx, d = inputs
        return [F._take_along_axis(ograds[0], idx, axis=attrs["axis"]), F.zeros_like(idx),
                F.zeros_like(d)]


@register("_take_along_axis")
class TakeAlongAxis(Op):
    """out[..., j, ...] = data[..., indices[..., j], ...] along `axis` (flattened data when
    None)."""
    inputs = ("data", "indices")
    params = _AXIS_PARAM
    kernel = "gather"
    hidden = True

    def infer_shape(self, attrs, in_shapes):
        d, idx = in_shapes
        if d is not None:
            ax, _ = _layout(self.name, tuple(d), attrs["axis"])
            if idx is not None and shape_known(d) and shape_known(idx):
                _check_index_shape(self.name, tuple(idx), tuple(d), ax)
        return list(in_shapes), [in_shapes[1]]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[0]]

    def compute(self, attrs, inputs, ctx):
        d, idx = inputs
        ax, n = _layout(self.name, d.shape, attrs["axis"])
        _check_index_shape(self.name, idx.shape, d.shape, ax)
        idx = _index_array(self.name, idx, n)
        if ax is None:
            return [_c(d.reshape(-1)[idx])]
        return [_c(np.take_along_axis(d, idx, axis=ax))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        d, idx = inputs
        return [F._backward_topk(ograds[0], idx, d, axis=attrs["axis"]), F.zeros_like(idx)]
