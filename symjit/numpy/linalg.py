"""`mx.np.linalg`: numpy.linalg's functions over `_npi_*` linear-algebra ops (differentiable:
norm, inv, det, slogdet, solve, cholesky, eigh, eigvalsh, svd, pinv, tensorinv, tensorsolve,
matrix_power, multi_dot); cond, lstsq, matrix_rank and qr run numpy's (no gradient), as MXNet's
fallbacks do."""
from __future__ import annotations

import numpy as _np

from ..base import MXNetError
from . import fallback_linalg
from .fallback_linalg import cond, lstsq, matrix_rank, qr  # noqa: F401
from .multiarray import invoke, ndarray, to_np

__all__ = ["norm", "svd", "cholesky", "inv", "det", "slogdet", "solve", "tensorinv", "tensorsolve", "pinv",
           "eig", "eigh", "eigvals", "eigvalsh", "cond", "lstsq", "matrix_power", "matrix_rank",
           "multi_dot", "qr", "fallback_linalg"]


def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 - numpy's argument name
    """numpy.linalg.norm: vector norms over one axis, matrix norms over two (a zero-dim array for a
    full reduction); encoded for MXNet's norm operator as MXNet's frontend encodes it."""
    from . import _op
    x = to_np(x)
    if isinstance(axis, list):
        axis = tuple(axis)
    if isinstance(ord, str) and ord not in ("fro", "f", "nuc", "inf", "-inf"):
        raise MXNetError(f"norm: invalid norm order {ord!r}")
    ord = {_np.inf: "inf", -_np.inf: "-inf"}.get(ord, ord) if isinstance(ord, float) else ord  # noqa: A001
    axes = (axis,) if isinstance(axis, int) else axis
    if axes is None and x.ndim == 2 and ord is not None and ord not in ("fro", "f"):
        axes = (0, 1)                                     # numpy: a matrix norm of a 2-D array
    attrs = {"axis": axes, "keepdims": keepdims}
    if axes is None and ord is None:
        return invoke("_npi_norm", [x], dict(attrs, ord=2, flag=-2))
    if axes is not None and len(axes) == 2:
        row, col = axes
        if ord in ("inf", "-inf", 1, -1):
            inner, outer = (col, row) if ord in ("inf", "-inf") else (row, col)
            if not keepdims and inner < outer:
                outer -= 1
            summed = _op.sum(_op.abs(x), axis=inner, keepdims=keepdims)
            return (_op.max if ord in ("inf", 1) else _op.min)(summed, axis=outer, keepdims=keepdims)
        if ord in (2, -2):
            return invoke("_npi_norm", [x], dict(attrs, ord=ord, flag=0))
        if ord == "nuc":
            return invoke("_npi_norm", [x], dict(attrs, ord=2, flag=2))
    if ord in ("inf", "-inf"):
        return (_op.max if ord == "inf" else _op.min)(_op.abs(x), axis=axes, keepdims=keepdims)
    if ord is None or ord in ("fro", "f"):
        return invoke("_npi_norm", [x], dict(attrs, ord=2, flag=1))
    return invoke("_npi_norm", [x], dict(attrs, ord=ord, flag=-1))


def svd(a):
    """(ut, l, v) with a = ut @ diag(l) @ v (MXNet's order and naming)."""
    return tuple(invoke("_npi_svd", [to_np(a)]))


def cholesky(a, upper=False):
    """The lower Cholesky factor of a (batch of) symmetric positive-definite matrices."""
    return invoke("_npi_cholesky", [to_np(a)], {"lower": not upper})


def inv(a):
    """The inverse of a (batch of) square matrices."""
    return invoke("_npi_inv", [to_np(a)])


def det(a):
    """The determinant of a (batch of) square matrices."""
    return invoke("_npi_det", [to_np(a)])


def slogdet(a):
    """(sign, log|det|) of a (batch of) square matrices."""
    return tuple(invoke("_npi_slogdet", [to_np(a)]))


def solve(a, b):
    """x with a @ x = b."""
    a = to_np(a)
    return invoke("_npi_solve", [a, to_np(b, a.context)])


def pinv(a, rcond=1e-15, hermitian=False):
    """The Moore-Penrose pseudo-inverse (singular values below rcond * largest dropped)."""
    if isinstance(rcond, ndarray):
        rcond = float(rcond.item()) if rcond.size == 1 else None
        if rcond is None:
            raise MXNetError("pinv: an array of rcond values is not supported")
    return invoke("_npi_pinv_scalar_rcond", [to_np(a)], {"rcond": float(rcond), "hermitian": hermitian})


def eig(a):
    """(eigenvalues, eigenvectors as columns) of a square matrix with real eigenvalues."""
    return tuple(invoke("_npi_eig", [to_np(a)]))


def eigvals(a):
    """The eigenvalues of a square matrix with real eigenvalues."""
    return invoke("_npi_eigvals", [to_np(a)])


def eigh(a, UPLO="L"):
    """(ascending eigenvalues, eigenvectors as columns) of a symmetric matrix (the UPLO triangle)."""
    return tuple(invoke("_npi_eigh", [to_np(a)], {"UPLO": UPLO}))


def eigvalsh(a, UPLO="L"):
    """The ascending eigenvalues of a symmetric matrix (the UPLO triangle)."""
    return invoke("_npi_eigvalsh", [to_np(a)], {"UPLO": UPLO})


def tensorinv(a, ind=2):
    """The inverse of `a` as a linear map from its first `ind` axes to the others."""
    return invoke("_npi_tensorinv", [to_np(a)], {"ind": ind})


def tensorsolve(a, b, axes=None):
    """x with tensordot(a, x, x.ndim) = b (the axes `axes` of a moved to the end first)."""
    a = to_np(a)
    return invoke("_npi_tensorsolve", [a, to_np(b, a.context)], {"a_axes": None if axes is None else tuple(axes)})


def matrix_power(a, n):
    """a multiplied by itself n times (n < 0: of its inverse; n = 0: the identity)."""
    from ._op import matmul
    a = to_np(a)
    if n < 0:
        a, n = inv(a), -n
    if n == 0:
        return ndarray(_np.broadcast_to(_np.eye(a.shape[-1], dtype=a.dtype), a.shape).copy(), a.context)
    result = a
    for _ in range(n - 1):
        result = matmul(result, a)
    return result


def multi_dot(arrays):
    """The chained dot product of `arrays` (left to right)."""
    from ._op import dot
    arrays = list(arrays)
    if len(arrays) < 2:
        raise MXNetError("multi_dot: at least two arrays are needed")
    result = arrays[0]
    for x in arrays[1:]:
        result = dot(result, x)
    return result


