"""Operators MXNet 1.x introduced with its sparse storage: `_square_sum` (the sum of squares
over axes, used by factorization machines on row_sparse weights) and `khatri_rao` (the
column-wise Kronecker product). Their dense definitions live here like every other op; the
row_sparse kernel of `_square_sum` is in `symjit/ndarray/sparse_ops.py`.
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Count, Enum, Int, Optional, Param
from .nn_conv import Embedding
from .reduce import _ReduceAxes
from .registry import Op, register


@register("cast_storage")
class CastStorage(Op):
    """`data` in storage `stype`. Graph values are dense, so on dense arrays this is a copy;
    `mx.nd.cast_storage` (ndarray/sparse.py) builds the sparse containers."""
    params = {"stype": Param(Enum("default", "row_sparse", "csr"))}

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), [in_shapes[0]]

    def compute(self, attrs, inputs, ctx):
        return [np.array(inputs[0], copy=True)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F._copy(ograds[0])]


@register("_square_sum")
class SquareSum(_ReduceAxes):
    """sum(data ** 2) over the given axes (MXNet's `_square_sum`)."""

    def reduce(self, x, axes):
        return np.sum(np.square(x), axis=axes, dtype=x.dtype)

    def grad(self, F, attrs, inputs, outputs, ograds):
        x = inputs[0]
        return [F._mul_scalar(F.broadcast_mul(self._bcast(F, attrs, ograds[0], x), x), scalar=2.0)]


@register("khatri_rao")
class KhatriRao(Op):
    """Column-wise Kronecker product of `num_args` matrices with one column count: for inputs
    (r_1, c), ..., (r_n, c) the output is (r_1 * ... * r_n, c) with column j the Kronecker
    product of the inputs' columns j (rows ordered with the first input's index slowest)."""
    params = {"num_args": Param(Count)}

    def input_names(self, attrs):
        return [f"arg{i}" for i in range(self.positive_count(attrs, "num_args"))]

    def infer_shape(self, attrs, in_shapes):
        if any(s is None for s in in_shapes):
            return list(in_shapes), [None]
        for i, s in enumerate(in_shapes):
            if len(s) != 2:
                raise MXNetError(f"{self.name}: input {i} must be a matrix, got shape {tuple(s)}")
        cols = {s[1] for s in in_shapes}
        if len(cols) != 1:
            raise MXNetError(f"{self.name}: every input needs the same number of columns, got "
                             f"{[tuple(s) for s in in_shapes]}")
        rows = int(np.prod([s[0] for s in in_shapes], dtype=np.int64))
        return [tuple(s) for s in in_shapes], [(rows, in_shapes[0][1])]

    def compute(self, attrs, inputs, ctx):
        self.infer_shape(attrs, [x.shape for x in inputs])
        out = inputs[0]
        for x in inputs[1:]:
            out = (out[:, None, :] * x[None, :, :]).reshape(-1, x.shape[1])
        return [np.ascontiguousarray(out, dtype=inputs[0].dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        """d arg_i = sum over the other inputs' row axes of G * prod_{l != i} arg_l, with the
        head gradient G seen as (r_1, ..., r_n, c)."""
        n = len(inputs)
        rows = [x.shape[0] for x in inputs]
        cols = inputs[0].shape[1]
        g = F.reshape(ograds[0], shape=tuple(rows) + (cols,))
        grads = []
        for i in range(n):
            prod = g
            for l_, x in enumerate(inputs):
                if l_ != i:
                    shape = tuple(r if k == l_ else 1 for k, r in enumerate(rows)) + (cols,)
                    prod = F.broadcast_mul(prod, F.reshape(x, shape=shape))
            others = tuple(k for k in range(n) if k != i)
            grads.append(F.sum(prod, axis=others) if others else F.reshape(prod, shape=(rows[i], cols)))
        return grads


@register("_contrib_SparseEmbedding")
class SparseEmbedding(Embedding):
    """Embedding whose weight gradient is row_sparse whatever `sparse_grad` says (MXNet's
    contrib.SparseEmbedding); the values are Embedding's."""

    def grad(self, F, attrs, inputs, outputs, ograds):
        return super().grad(F, dict(attrs, sparse_grad=True), inputs, outputs, ograds)


@register("_contrib_getnnz")
class GetNNZ(Op):
    """The number of stored values of a CSR matrix (MXNet's `contrib.getnnz`): all of them
    (axis None, shape (1,)) or per row (axis 1), as int64; axis 0 is refused as MXNet 1.9.1
    does. On a dense value (the graph form) it counts the non-zero entries, which is the stored
    count of that matrix cast to csr; the csr kernel (ndarray/sparse_ops.py) counts the stored
    entries."""
    params = {"axis": Param(Optional(Int), None)}
    differentiable = False

    def infer_shape(self, attrs, in_shapes):
        shape = in_shapes[0]
        if shape is None:
            return list(in_shapes), [None]
        if len(shape) != 2:
            raise MXNetError(f"{self.name}: a matrix is expected, got shape {tuple(shape)}")
        axis = attrs["axis"]
        if axis is not None and axis not in (1, -1):
            raise MXNetError(f"{self.name}: axis must be None or 1 (MXNet 1.9.1 has no axis 0), got {axis}")
        out = (1,) if axis is None else (shape[0],)
        return [tuple(shape)], [out]

    def infer_type(self, attrs, in_types):
        return list(in_types), ["int64"]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        self.infer_shape(attrs, [x.shape])
        axis = attrs["axis"]
        if axis is None:
            return [np.array([np.count_nonzero(x)], np.int64)]
        return [np.count_nonzero(x, axis=1).astype(np.int64)]
