"""MXNet's legacy row operators on 2-D arrays, still exported by MXNet 1.9.1's ndarray API.

`fill_element_0index(lhs, mhs, rhs)`: a copy of lhs (n, m) with out[i, rhs[i]] = mhs[i].
`_onehot_encode(indices, out)`: (n, m) zeros with out[i, indices[i]] = 1 (`nd.onehot_encode`
writes it into its `out` argument). Indices are rounded toward zero and must lie in [0, m).
`batch_take(a, indices)`: out[i] = a[i, indices[i]], indices clipped into [0, m); like MXNet's
it has no gradient (binding for one through it fails; `stop_gradient` before it is fine).
(`choose_element_0index`, out[i] = lhs[i, rhs[i]], is an alias of `pick`.)
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .registry import Op, merge_shape, register


def _row_indices(op: str, index: np.ndarray, n: int, m: int) -> np.ndarray:
    if index.shape != (n,):
        raise MXNetError(f"{op}: the index must have shape ({n},), got {index.shape}")
    j = index.astype(np.int64)
    if j.size and (j.min() < 0 or j.max() >= m):
        raise MXNetError(f"{op}: index out of range [0, {m}): {j[(j < 0) | (j >= m)][:5].tolist()}")
    return j


def _matrix(op: str, name: str, s):
    if s is not None and len(s) != 2:
        raise MXNetError(f"{op}: {name} must be 2-D, got shape {tuple(s)}")
    return s


@register("fill_element_0index")
class FillElement0Index(Op):
    """out = lhs with out[i, rhs[i]] = mhs[i]; gradient: the filled positions take mhs's."""
    inputs = ("lhs", "mhs", "rhs")

    def infer_shape(self, attrs, in_shapes):
        lhs, mhs, rhs = in_shapes
        lhs = _matrix(self.name, "lhs", lhs)
        if lhs is None:
            return list(in_shapes), [None]
        rows = (lhs[0],)
        return [tuple(lhs), merge_shape(self.name, "input 'mhs'", rows, mhs),
                merge_shape(self.name, "input 'rhs'", rows, rhs)], [tuple(lhs)]

    def infer_type(self, attrs, in_types):
        lhs, mhs, rhs = in_types
        return [lhs, mhs or lhs, rhs or lhs], [lhs]

    def compute(self, attrs, inputs, ctx):
        lhs, mhs, rhs = inputs
        n, m = _matrix(self.name, "lhs", lhs.shape)
        j = _row_indices(self.name, rhs, n, m)
        out = lhs.copy()
        out[np.arange(n), j] = mhs.astype(lhs.dtype, copy=False)
        return [out]

    def grad(self, F, attrs, inputs, outputs, ograds):
        lhs, mhs, rhs = inputs
        dy = ograds[0]
        return [F.fill_element_0index(dy, F.zeros_like(mhs), rhs), F.pick(dy, rhs, axis=-1),
                F.zeros_like(rhs)]


@register("_onehot_encode")
class OnehotEncode(Op):
    """out (n, m) = 0 except out[i, indices[i]] = 1; `out`'s shape and dtype come from the
    second input (MXNet's legacy op writes into that array)."""
    inputs = ("indices", "out")
    differentiable = False

    def infer_shape(self, attrs, in_shapes):
        idx, out = in_shapes
        out = _matrix(self.name, "out", out)
        if out is None:
            return list(in_shapes), [None]
        return [merge_shape(self.name, "input 'indices'", (out[0],), idx), tuple(out)], [tuple(out)]

    def infer_type(self, attrs, in_types):
        idx, out = in_types
        return [idx or out, out], [out]

    def compute(self, attrs, inputs, ctx):
        index, like = inputs
        n, m = _matrix(self.name, "out", like.shape)
        j = _row_indices(self.name, index, n, m)
        out = np.zeros(like.shape, like.dtype)
        out[np.arange(n), j] = 1
        return [out]


@register("batch_take")
class BatchTake(Op):
    """out[i] = a[i, clip(indices[i], 0, m - 1)] for a of shape (n, m). It defines no gradient
    rule (Op.grad raises), so asking for a gradient through it is an error, as in MXNet."""
    inputs = ("a", "indices")

    def infer_shape(self, attrs, in_shapes):
        a, idx = in_shapes
        a = _matrix(self.name, "a", a)
        if a is None:
            return list(in_shapes), [None]
        rows = (a[0],)
        return [tuple(a), merge_shape(self.name, "input 'indices'", rows, idx)], [rows]

    def infer_type(self, attrs, in_types):
        a, idx = in_types
        return [a, idx or "int32"], [a]

    def compute(self, attrs, inputs, ctx):
        a, index = inputs
        n, m = _matrix(self.name, "a", a.shape)
        if index.shape != (n,):
            raise MXNetError(f"{self.name}: indices must have shape ({n},), got {index.shape}")
        j = np.clip(index.astype(np.int64), 0, m - 1)
        return [np.ascontiguousarray(a[np.arange(n), j])]
