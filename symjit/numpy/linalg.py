"""`mx.np.linalg`: numpy.linalg's functions over `_npi_*` linear-algebra ops (differentiable:
norm, inv, det, slogdet, solve, cholesky, eigh, eigvalsh, svd, pinv, tensorinv, tensorsolve,
matrix_power, multi_dot); cond, lstsq, matrix_rank and qr run numpy's (no gradient), as MXNet's
fallbacks do."""
from __future__ import annotations

import numpy as _np

from ..base import MXNetError
from .fallback import numpy_fallback
from .multiarray import invoke, ndarray, to_np

__all__ = ["norm", "svd", "cholesky", "inv", "det", "slogdet", "solve", "tensorinv", "tensorsolve", "pinv",
           "eig", "eigh", "eigvals", "eigvalsh", "cond", "lstsq", "matrix_power", "matrix_rank",
           "multi_dot", "qr"]


def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 - numpy's argument name
    """Vector or matrix norm (a zero-dim array for a full reduction)."""
    ord_ = {_np.inf: "inf", -_np.inf: "-inf"}.get(ord, ord) if isinstance(ord, float) else ord
    if isinstance(axis, list):
        axis = tuple(axis)
    return invoke("_npi_norm", [to_np(x)], {"ord": ord_, "axis": axis, "keepdims": keepdims})


def svd(a):
    """(ut, l, v) with a = ut @ diag(l) @ v (MXNet's order and naming)."""
    return tuple(invoke("_npi_svd", [to_np(a)]))


def cholesky(a, upper=False):
    return invoke("_npi_cholesky", [to_np(a)], {"lower": not upper})


def inv(a):
    return invoke("_npi_inv", [to_np(a)])


def det(a):
    return invoke("_npi_det", [to_np(a)])


def slogdet(a):
    return tuple(invoke("_npi_slogdet", [to_np(a)]))


def solve(a, b):
    a = to_np(a)
    return invoke("_npi_solve", [a, to_np(b, a.context)])


def pinv(a, rcond=1e-15, hermitian=False):
    if isinstance(rcond, ndarray):
        rcond = float(rcond.item()) if rcond.size == 1 else None
        if rcond is None:
            raise MXNetError("pinv: an array of rcond values is not supported")
    return invoke("_npi_pinv", [to_np(a)], {"rcond": float(rcond), "hermitian": hermitian})


def eig(a):
    return tuple(invoke("_npi_eig", [to_np(a)]))


def eigvals(a):
    return invoke("_npi_eigvals", [to_np(a)])


def eigh(a, UPLO="L"):
    return tuple(invoke("_npi_eigh", [to_np(a)], {"UPLO": UPLO}))


def eigvalsh(a, UPLO="L"):
    return invoke("_npi_eigvalsh", [to_np(a)], {"UPLO": UPLO})


def tensorinv(a, ind=2):
    """The inverse of `a` as a linear map from its first `ind` axes to the others."""
    a = to_np(a)
    if ind <= 0:
        raise MXNetError(f"tensorinv: ind must be positive, got {ind}")
    rows, cols = a.shape[:ind], a.shape[ind:]
    n, m = int(_np.prod(rows)), int(_np.prod(cols))
    if n != m:
        raise MXNetError(f"tensorinv: the product of the first {ind} dims ({n}) must equal that of the rest ({m})")
    return inv(a.reshape(n, m)).reshape(cols + rows)


def tensorsolve(a, b, axes=None):
    """x with tensordot(a, x, x.ndim) = b."""
    a, b = to_np(a), to_np(b)
    if axes is not None:
        order = [d for d in range(a.ndim) if d not in [x % a.ndim for x in axes]] + [x % a.ndim for x in axes]
        a = a.transpose(order)
    x_shape = a.shape[b.ndim:]
    n = int(_np.prod(x_shape))
    if int(_np.prod(a.shape[:b.ndim])) != n:
        raise MXNetError(f"tensorsolve: a of shape {a.shape} is not square for b of shape {b.shape}")
    return solve(a.reshape(n, n), b.reshape(n)).reshape(x_shape)


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


cond = numpy_fallback(_np.linalg.cond, "cond")
lstsq = numpy_fallback(_np.linalg.lstsq, "lstsq")
matrix_rank = numpy_fallback(_np.linalg.matrix_rank, "matrix_rank")
qr = numpy_fallback(_np.linalg.qr, "qr")
