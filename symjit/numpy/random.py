"""`mx.np.random`: uniform and normal sampling with NumPy's argument names (see symjit.numpy)."""
from __future__ import annotations

from ..ndarray import random as _random

__all__ = ["uniform", "normal"]


def _shape(size):
    return () if size is None else (size,) if isinstance(size, int) else tuple(size)


def uniform(low=0.0, high=1.0, size=None, dtype=None, ctx=None, out=None):
    """Samples from the uniform distribution on [low, high); `size` is the output shape."""
    return _random.uniform(low, high, shape=_shape(size), dtype=dtype, ctx=ctx, out=out)


def normal(loc=0.0, scale=1.0, size=None, dtype=None, ctx=None, out=None):
    """Samples from the normal distribution; `size` is the output shape."""
    return _random.normal(loc, scale, shape=_shape(size), dtype=dtype, ctx=ctx, out=out)
