"""Array creation functions of `mx.np` beyond array/zeros/ones/full/empty (float32 by default)."""
from __future__ import annotations

import numpy as _np

from ..base import MXNetError
from ..ndarray.ndarray import _check_ctx
from .multiarray import _dtype, default_float, ndarray, to_np

__all__ = ["arange", "linspace", "logspace", "eye", "identity", "zeros_like", "ones_like", "full_like",
           "empty_like", "indices", "tri"]


def _make(data, ctx) -> ndarray:
    return ndarray(_np.require(data, requirements="C"), _check_ctx(ctx))


def arange(start, stop=None, step=1, dtype=None, ctx=None) -> ndarray:
    """Evenly spaced values in [start, stop) (float32 unless `dtype`)."""
    if step == 0:
        raise MXNetError("arange: step must not be 0")
    if stop is None:
        start, stop = 0, start
    return _make(_np.arange(start, stop, step).astype(_dtype(dtype)), ctx)


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, ctx=None):
    """`num` evenly spaced samples over [start, stop] (float32 unless `dtype`)."""
    if num < 0:
        raise MXNetError(f"linspace: number of samples, {num}, must be non-negative")
    data, step = _np.linspace(start, stop, int(num), endpoint=endpoint, retstep=True, axis=axis)
    out = _make(data.astype(_dtype(dtype)), ctx)
    return (out, step) if retstep else out


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0, ctx=None):
    """`num` samples evenly spaced on a log scale of `base` (float32 unless `dtype`)."""
    data = _np.logspace(start, stop, int(num), endpoint=endpoint, base=base, axis=axis)
    return _make(data.astype(_dtype(dtype)), ctx)


def eye(N, M=None, k=0, dtype=default_float, ctx=None, **kwargs) -> ndarray:
    """A 2-D array with ones on the k-th diagonal (float32 unless `dtype`)."""
    return _make(_np.eye(int(N), None if M is None else int(M), int(k), dtype=_dtype(dtype)), ctx)


def identity(n, dtype=None, ctx=None) -> ndarray:
    """The n x n identity matrix (float32 unless `dtype`)."""
    return eye(n, dtype=dtype, ctx=ctx)


def tri(N, M=None, k=0, dtype=None, ctx=None) -> ndarray:
    """Ones at and below the k-th diagonal of an N x M array."""
    return _make(_np.tri(N, M, k, dtype=_dtype(dtype)), ctx)


def _like(a, value, dtype, ctx, out=None):
    a = to_np(a)
    data = _np.full(a.shape, value, a._data.dtype if dtype is None else _dtype(dtype))
    if out is not None:
        out[...] = ndarray(data)
        return out
    return _make(data, ctx or a.context)


def zeros_like(a, dtype=None, order="C", ctx=None, out=None):
    """Zeros of a's shape (and dtype unless `dtype`)."""
    return _like(a, 0, dtype, ctx, out)


def ones_like(a, dtype=None, order="C", ctx=None, out=None):
    """Ones of a's shape (and dtype unless `dtype`)."""
    return _like(a, 1, dtype, ctx, out)


def full_like(a, fill_value, dtype=None, order="C", ctx=None, out=None):
    """`fill_value` in an array of a's shape (and dtype unless `dtype`)."""
    return _like(a, fill_value, dtype, ctx, out)


def empty_like(prototype, dtype=None, order="C", subok=False, shape=None):
    """An array of the prototype's shape and dtype (zero-filled)."""
    return _like(prototype, 0, dtype, None)


def indices(dimensions, dtype=_np.int32, ctx=None) -> ndarray:
    """The grid of indices of an array of shape `dimensions` (int32, as MXNet)."""
    return _make(_np.indices(tuple(dimensions), dtype=_dtype(dtype)), ctx)
