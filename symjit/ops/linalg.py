"""Matrix products: dot, batch_dot and linalg_gemm2, with MXNet 1.x semantics.

`dot` contracts the last axis of `lhs` with the first axis of `rhs` (N-d arrays are
viewed as matrices: lhs as (prod(lhs.shape[:-1]), lhs.shape[-1]), rhs as
(rhs.shape[0], prod(rhs.shape[1:]))); `transpose_a` makes lhs contract its *first*
axis instead, `transpose_b` makes rhs contract its *last* axis. Two 1-D inputs give
shape (1,). `batch_dot` multiplies matching matrices of two N-d (N >= 3) arrays whose
leading (batch) dims agree. `linalg_gemm2` is alpha * op(A) op(B) over the leading dims,
with the matrix rows on `axis`.

Gradients use the same ops with transpose flags (so the backward graph is GEMMs too);
N-d `dot`, whose gradients need the matrix views, uses the hidden op `_backward_dot`.
CPU MXNet computes products only in float32 and float64; float16 is accepted here
(the GPU path) and accumulated in float32.
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Enum, Float, Int, Optional, Param
from .registry import Op, register

__all__ = ["dot_shapes", "dot_reference"]

_FLOAT_TYPES = ("float16", "float32", "float64")


def _check_float(op: str, dtype) -> None:
    if dtype is not None and np.dtype(dtype).name not in _FLOAT_TYPES:
        raise MXNetError(f"{op}: only supports float16/float32/float64 inputs, got {np.dtype(dtype).name}")


def _prod(dims) -> int:
    """Product of dims; 0 (unknown) if any dim is unknown."""
    out = 1
    for d in dims:
        out *= int(d)
    return out


def dot_shapes(lshape: tuple, rshape: tuple, ta: bool, tb: bool) -> tuple:
    """MXNet `DotShape`: returns (lhs kept dims, contracted lhs dim, contracted rhs dim,
    rhs kept dims, output shape). Works on partial shapes (0 = unknown)."""
    if len(lshape) == 0 or len(rshape) == 0:
        raise MXNetError(f"dot: inputs must have at least one dimension, got lhs {lshape} X rhs {rshape}")
    if len(lshape) == 1 and len(rshape) == 1:
        if ta or tb:
            raise MXNetError(f"dot: cannot transpose vectors (lhs {lshape} X rhs {rshape})")
        return (), lshape[0], rshape[0], (), (1,)
    if ta:
        l_keep, l_k = tuple(lshape[1:]), lshape[0]
    else:
        l_keep, l_k = tuple(lshape[:-1]), lshape[-1]
    if tb:
        r_keep, r_k = tuple(rshape[:-1]), rshape[-1]
    else:
        r_keep, r_k = tuple(rshape[1:]), rshape[0]
    out = (l_keep if len(lshape) > 1 else ()) + (r_keep if len(rshape) > 1 else ())
    return l_keep, l_k, r_k, r_keep, out


def _mismatch(op: str, lshape, rshape, ta, tb) -> MXNetError:
    return MXNetError(f"{op}: shape mismatch: lhs {tuple(lshape)} X rhs {tuple(rshape)} "
                      f"(transpose_a={ta}, transpose_b={tb}): contracted dimensions differ")


def _matmul(a: np.ndarray, b: np.ndarray, out_dtype) -> np.ndarray:
    """a @ b in out_dtype (float16 accumulates in float32)."""
    if np.dtype(out_dtype) == np.float16:
        return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
    return np.matmul(a, b).astype(out_dtype, copy=False)


def dot_reference(lhs: np.ndarray, rhs: np.ndarray, ta: bool = False, tb: bool = False) -> np.ndarray:
    """numpy `dot` with MXNet semantics (see module docstring)."""
    a, b, out_shape = _matrix_views(lhs, rhs, ta, tb)
    return _matmul(a, b, lhs.dtype).reshape(out_shape)


def _matrix_views(lhs: np.ndarray, rhs: np.ndarray, ta: bool, tb: bool):
    """(op_a(lhs) as an (m, k) matrix, op_b(rhs) as (k, n), dot's output shape)."""
    l_keep, lk, rk, r_keep, out_shape = dot_shapes(lhs.shape, rhs.shape, ta, tb)
    if lk != rk:
        raise _mismatch("dot", lhs.shape, rhs.shape, ta, tb)
    m, n = _prod(l_keep), _prod(r_keep)
    a = lhs.reshape(lk, m).T if ta else lhs.reshape(m, lk)
    b = rhs.reshape(n, rk).T if tb else rhs.reshape(rk, n)
    return a, b, out_shape


_DOT_PARAMS = {
    "transpose_a": Param(Bool, False, "contract lhs's first axis instead of its last"),
    "transpose_b": Param(Bool, False, "contract rhs's last axis instead of its first"),
    "forward_stype": Param(Optional(Enum("default", "row_sparse", "csr")), None,
                           "output storage hint (dense storage only: ignored)"),
}


class _Gemm(Op):
    """Shared dtype rule of the products: both inputs one float dtype."""
    inputs = ("lhs", "rhs")
    kernel = "gemm"

    def infer_type(self, attrs, in_types):
        ins, outs = super().infer_type(attrs, in_types)
        _check_float(self.name, outs[0])
        return ins, outs


@register("dot")
class Dot(_Gemm):
    """Matrix product of two arrays (MXNet N-d semantics, see module docstring)."""
    epilogue_host = True
    params = _DOT_PARAMS

    def infer_shape(self, attrs, in_shapes):
        ls, rs = in_shapes
        if ls is None or rs is None:
            return list(in_shapes), [None]
        ta, tb = attrs["transpose_a"], attrs["transpose_b"]
        _, lk, rk, _, out = dot_shapes(tuple(ls), tuple(rs), ta, tb)
        if lk and rk and lk != rk:
            raise _mismatch(self.name, ls, rs, ta, tb)
        k = lk or rk
        ls, rs = list(ls), list(rs)
        if k:
            if len(ls) == 1 and len(rs) == 1:
                ls[0] = rs[0] = k
            else:
                ls[0 if ta else -1] = k
                rs[-1 if tb else 0] = k
        return [tuple(ls), tuple(rs)], [out]

    def compute(self, attrs, inputs, ctx):
        lhs, rhs = inputs
        _check_float(self.name, lhs.dtype)
        if lhs.dtype != rhs.dtype:
            raise MXNetError(f"dot: dtype mismatch: lhs {lhs.dtype.name}, rhs {rhs.dtype.name}")
        return [np.ascontiguousarray(dot_reference(lhs, rhs, attrs["transpose_a"], attrs["transpose_b"]))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        lhs, rhs = inputs
        dz = ograds[0]
        ta, tb = attrs["transpose_a"], attrs["transpose_b"]
        if _ndim(lhs) == 2 and _ndim(rhs) == 2:
            mm = lambda a, b, **kw: F.dot(a, b, **kw)   # noqa: E731
            if getattr(lhs, "stype", "default") == "csr":   # MXNet: a csr lhs gets no gradient
                return [None, _rhs_grad(mm, lhs, rhs, dz, ta, tb)]
            return _matrix_grads(mm, lhs, rhs, dz, ta, tb)
        return F.apply("_backward_dot", [dz, lhs, rhs], transpose_a=ta, transpose_b=tb)


def _ndim(x) -> int | None:
    """Rank of an array or gradient handle, None when its shape is unknown."""
    shape = getattr(x, "shape", None)
    return None if shape is None else len(shape)


def _matrix_grads(mm, x, y, dz, ta: bool, tb: bool, **extra) -> list:
    """Gradients of z = op_a(x) op_b(y) as products (`mm(a, b, transpose_a=, transpose_b=)`)."""
    if not ta and not tb:
        dx = mm(dz, y, transpose_a=False, transpose_b=True, **extra)
    elif not ta and tb:
        dx = mm(dz, y, transpose_a=False, transpose_b=False, **extra)
    elif ta and not tb:
        dx = mm(y, dz, transpose_a=False, transpose_b=True, **extra)
    else:
        dx = mm(y, dz, transpose_a=True, transpose_b=True, **extra)
    return [dx, _rhs_grad(mm, x, y, dz, ta, tb, **extra)]


def _rhs_grad(mm, x, y, dz, ta: bool, tb: bool, **extra):
    """The gradient of z = op_a(x) op_b(y) with respect to y, as a product."""
    if not ta and not tb:
        return mm(x, dz, transpose_a=True, transpose_b=False, **extra)
    if not ta and tb:
        return mm(dz, x, transpose_a=True, transpose_b=False, **extra)
    if ta and not tb:
        return mm(x, dz, transpose_a=False, transpose_b=False, **extra)
    return mm(dz, x, transpose_a=True, transpose_b=True, **extra)


@register("_backward_dot")
class BackwardDot(_Gemm):
    """Gradients (d lhs, d rhs) of `dot` for any input ranks, from the matrix views."""
    inputs = ("ograd", "lhs", "rhs")
    outputs = ("lhs_grad", "rhs_grad")
    params = {k: v for k, v in _DOT_PARAMS.items() if k != "forward_stype"}
    hidden = True
    forward_op = "dot"
    forward_inputs = {"lhs": "lhs", "rhs": "rhs"}
    forward_outputs = {"ograd": 0}

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), [in_shapes[1], in_shapes[2]]

    def infer_type(self, attrs, in_types):
        ins, outs = super().infer_type(attrs, in_types)
        return ins, [outs[0], outs[0]]

    def compute(self, attrs, inputs, ctx):
        dz, lhs, rhs = inputs
        ta, tb = attrs["transpose_a"], attrs["transpose_b"]
        # matrix views: A = op_a(lhs) is (m, k), B = op_b(rhs) is (k, n), Z = dz is (m, n)
        A, B, out_shape = _matrix_views(lhs, rhs, ta, tb)
        if dz.shape != tuple(out_shape):
            raise MXNetError(f"_backward_dot: shape mismatch for input 'ograd': expected "
                             f"{tuple(out_shape)}, got {dz.shape}")
        Z = dz.reshape(A.shape[0], B.shape[1])
        dA = _matmul(Z, B.T, lhs.dtype)
        dB = _matmul(A.T, Z, lhs.dtype)
        dL = dA.T if ta else dA
        dR = dB.T if tb else dB
        return [np.ascontiguousarray(dL.reshape(lhs.shape)), np.ascontiguousarray(dR.reshape(rhs.shape))]


def _batch_dims(op: str, ls: tuple, rs: tuple, ta: bool, tb: bool):
    """(out_m, lhs k, rhs k, out_n) of batched matrices; checks ranks and batch dims."""
    if len(ls) < 3 or len(ls) != len(rs):
        raise MXNetError(f"{op}: only supports N-D * N-D arrays with N >= 3 and equal N, "
                         f"got lhs {tuple(ls)} X rhs {tuple(rs)}")
    for i in range(len(ls) - 2):
        if ls[i] and rs[i] and ls[i] != rs[i]:
            raise MXNetError(f"{op}: shape mismatch (the leading batch dimensions must be equal): "
                             f"lhs {tuple(ls)} X rhs {tuple(rs)}")
    m, lk = (ls[-1], ls[-2]) if ta else (ls[-2], ls[-1])
    n, rk = (rs[-2], rs[-1]) if tb else (rs[-1], rs[-2])
    return m, lk, rk, n


def _swap_last(x: np.ndarray, flag: bool) -> np.ndarray:
    return np.swapaxes(x, -1, -2) if flag else x


@register("batch_dot")
class BatchDot(_Gemm):
    """Batched matrix product: out[b] = op_a(lhs[b]) op_b(rhs[b]) over the leading dims."""
    epilogue_host = True
    params = _DOT_PARAMS

    def infer_shape(self, attrs, in_shapes):
        ls, rs = in_shapes
        if ls is None or rs is None:
            return list(in_shapes), [None]
        ta, tb = attrs["transpose_a"], attrs["transpose_b"]
        m, lk, rk, n = _batch_dims(self.name, tuple(ls), tuple(rs), ta, tb)
        if lk and rk and lk != rk:
            raise _mismatch(self.name, ls, rs, ta, tb)
        if not (lk and rk):   # MXNet infers nothing until both contraction dims are known
            return list(in_shapes), [None]
        batch = tuple(a or b for a, b in zip(ls[:-2], rs[:-2]))
        k = lk or rk
        ls = list(batch) + list(ls[-2:])
        rs = list(batch) + list(rs[-2:])
        ls[-2 if ta else -1] = k
        rs[-1 if tb else -2] = k
        return [tuple(ls), tuple(rs)], [batch + (m, n)]

    def compute(self, attrs, inputs, ctx):
        lhs, rhs = inputs
        _check_float(self.name, lhs.dtype)
        ta, tb = attrs["transpose_a"], attrs["transpose_b"]
        _, lk, rk, _ = _batch_dims(self.name, lhs.shape, rhs.shape, ta, tb)
        if lk != rk:
            raise _mismatch(self.name, lhs.shape, rhs.shape, ta, tb)
        if lhs.shape[:-2] != rhs.shape[:-2]:
            raise MXNetError(f"{self.name}: shape mismatch (the leading batch dimensions must be "
                             f"equal): lhs {lhs.shape} X rhs {rhs.shape}")
        out = _matmul(_swap_last(lhs, ta), _swap_last(rhs, tb), lhs.dtype)
        return [np.ascontiguousarray(out)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return _matrix_grads(lambda a, b, **kw: F.batch_dot(a, b, **kw), inputs[0], inputs[1],
                             ograds[0], attrs["transpose_a"], attrs["transpose_b"])


@register("_linalg_gemm2", aliases=("linalg_gemm2",))
class LinalgGemm2(_Gemm):
    """alpha * op(A) op(B) for matrices whose rows lie on `axis` and columns on the last
    axis; all other dims are batch dims and must agree."""
    inputs = ("A", "B")
    params = {"transpose_a": Param(Bool, False, "use A transposed"),
              "transpose_b": Param(Bool, False, "use B transposed"),
              "alpha": Param(Float, 1.0, "scale of the product"),
              "axis": Param(Int, -2, "axis of the matrix rows")}

    def _row_axis(self, attrs, ndim: int) -> int:
        ax = attrs["axis"]
        ax = ax + ndim if ax < 0 else ax
        if ndim < 2 or not 0 <= ax < ndim - 1:
            raise MXNetError(f"{self.name}: invalid row axis {attrs['axis']} for inputs with {ndim} dims "
                             "(needs at least 2 dims and axis < ndim - 1)")
        return ax

    def _canon(self, shape: tuple, ax: int) -> tuple:
        """shape with the row axis moved to position -2."""
        s = list(shape)
        rows = s.pop(ax)
        return tuple(s[:-1]) + (rows, s[-1])

    def infer_shape(self, attrs, in_shapes):
        a, b = in_shapes
        if a is None or b is None:
            return list(in_shapes), [None]
        if len(a) != len(b):
            raise MXNetError(f"{self.name}: inputs must have the same number of dims, got A {tuple(a)} "
                             f"and B {tuple(b)}")
        ax = self._row_axis(attrs, len(a))
        ta, tb = attrs["transpose_a"], attrs["transpose_b"]
        ca, cb = self._canon(tuple(a), ax), self._canon(tuple(b), ax)
        for x, y in zip(ca[:-2], cb[:-2]):
            if x and y and x != y:
                raise MXNetError(f"{self.name}: shapes of A {tuple(a)} and B {tuple(b)} must be the same "
                                 "except on the row/col axes")
        m, lk = (ca[-1], ca[-2]) if ta else (ca[-2], ca[-1])
        n, rk = (cb[-2], cb[-1]) if tb else (cb[-1], cb[-2])
        if lk and rk and lk != rk:
            raise _mismatch(self.name, a, b, ta, tb)
        out = list(tuple(x or y for x, y in zip(ca[:-2], cb[:-2])))
        out.insert(ax, m)
        out.append(n)
        return [tuple(a), tuple(b)], [tuple(out)]

    def compute(self, attrs, inputs, ctx):
        a, b = inputs
        _check_float(self.name, a.dtype)
        self.infer_shape(attrs, [a.shape, b.shape])  # validates ranks, batch and inner dims
        ax = self._row_axis(attrs, a.ndim)
        A = _swap_last(np.moveaxis(a, ax, -2), attrs["transpose_a"])
        B = _swap_last(np.moveaxis(b, ax, -2), attrs["transpose_b"])
        prod = _matmul(A, B, a.dtype) * a.dtype.type(attrs["alpha"])
        out = np.moveaxis(prod.astype(a.dtype, copy=False), -2, ax)
        return [np.ascontiguousarray(out)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return _matrix_grads(lambda a, b, **kw: F._linalg_gemm2(a, b, **kw), inputs[0], inputs[1],
                             ograds[0], attrs["transpose_a"], attrs["transpose_b"],
                             alpha=attrs["alpha"], axis=attrs["axis"])
