"""Flat and multi-dimensional indices: `ravel_multi_index` and `unravel_index` (MXNet 1.9.1).

For `shape` = (d0, ..., dk-1), `ravel_multi_index` maps `data` of shape (k, ...) (one coordinate per
row) to flat row-major indices of shape (...); `unravel_index` is its inverse, (...) -> (k, ...).
`d0` may be -1 (unknown): the leading dimension never enters the strides, and unravelling then
leaves the leading coordinate unbounded. Indices keep the input's dtype (MXNet computes in it).
Neither op has a gradient.

`_contrib_arange_like(data, start, step, repeat, axis)`: start + (i // repeat) * step for the i-th
element (row-major) of an array shaped like `data`, or like `data.shape[axis]` alone when `axis`
is given; data's dtype; only data's shape is read and no gradient flows to it.
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Optional, Param, Shape
from .registry import Op, register


def _strides(op: str, shape: tuple) -> np.ndarray:
    if not shape:
        raise MXNetError(f"{op}: shape must have at least one dimension")
    if any(d <= 0 for d in shape[1:]) or shape[0] == 0 or shape[0] < -1:
        raise MXNetError(f"{op}: shape dimensions must be positive (the first may be -1), got {shape}")
    strides = np.ones(len(shape), dtype=np.int64)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return strides


class _IndexOp(Op):
    params = {"shape": Param(Shape)}
    differentiable = False

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[0]]


@register("ravel_multi_index", aliases=("_ravel_multi_index",))
class RavelMultiIndex(_IndexOp):
    """Flat row-major indices of the coordinates in the rows of `data`."""

    def infer_shape(self, attrs, in_shapes):
        s = in_shapes[0]
        k = len(attrs["shape"])
        _strides(self.name, attrs["shape"])
        if s is None:
            return [None], [None]
        if not s or (s[0] and s[0] != k):
            raise MXNetError(f"{self.name}: data must have shape ({k}, ...) for a {k}-d shape, got {tuple(s)}")
        out = tuple(s[1:]) if len(s) > 1 else (1,)
        return [(k,) + tuple(s[1:])], [out]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        shape = attrs["shape"]
        strides = _strides(self.name, shape)
        if x.ndim < 1 or x.shape[0] != len(shape):
            raise MXNetError(f"{self.name}: data must have shape ({len(shape)}, ...), got {x.shape}")
        coords = x.astype(np.int64)
        flat = np.tensordot(strides, coords, axes=(0, 0))
        out = np.asarray(flat).reshape(x.shape[1:] if x.ndim > 1 else (1,))
        return [np.ascontiguousarray(out.astype(x.dtype))]


@register("unravel_index", aliases=("_unravel_index",))
class UnravelIndex(_IndexOp):
    """Row-major coordinates (one row per dim of `shape`) of the flat indices in `data`."""

    def infer_shape(self, attrs, in_shapes):
        s = in_shapes[0]
        _strides(self.name, attrs["shape"])
        if s is None:
            return [None], [None]
        return [tuple(s)], [(len(attrs["shape"]),) + tuple(s)]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        shape = attrs["shape"]
        _strides(self.name, shape)
        idx = x.astype(np.int64)
        rows = [None] * len(shape)
        for j in range(len(shape) - 1, -1, -1):
            if j == 0 and shape[0] == -1:
                rows[j] = idx
            else:
                rows[j], idx = idx % shape[j], idx // shape[j]
        return [np.ascontiguousarray(np.stack(rows).astype(x.dtype))]


@register("_contrib_index_array")
class IndexArray(Op):
    """For data of shape (d0, ..., dn-1): an int64 array (d0, ..., dn-1, len(axes)) whose last axis
    holds each element's coordinates on `axes` (every axis when None)."""
    params = {"axes": Param(Optional(Shape), None)}

    def _axes(self, attrs, ndim: int) -> tuple:
        if attrs["axes"] is None:
            return tuple(range(ndim))
        out = []
        for a in attrs["axes"]:
            b = a + ndim if a < 0 else a
            if not 0 <= b < ndim:
                raise MXNetError(f"{self.name}: axis {a} is out of bounds for array of dimension {ndim}")
            out.append(b)
        return tuple(out)

    def infer_shape(self, attrs, in_shapes):
        s = in_shapes[0]
        if s is None:
            return [None], [None]
        return [tuple(s)], [tuple(s) + (len(self._axes(attrs, len(s))),)]

    def infer_type(self, attrs, in_types):
        return list(in_types), ["int64"]

    def compute(self, attrs, inputs, ctx):
        shape = inputs[0].shape
        axes = self._axes(attrs, len(shape))
        grids = np.indices(shape, dtype=np.int64) if shape else np.zeros((0,), dtype=np.int64)
        if not shape:
            return [np.zeros((0,), dtype=np.int64)]
        return [np.ascontiguousarray(np.stack([grids[a] for a in axes], axis=-1))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.zeros_like(inputs[0])]
