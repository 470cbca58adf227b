"""`mx.np.function_base`: meshgrid."""
from __future__ import annotations

import numpy as _onp

from .multiarray import ndarray, to_np

__all__ = ["meshgrid"]


def meshgrid(*xi, indexing="xy", sparse=False, copy=True):
    """Coordinate matrices from coordinate vectors (numpy's meshgrid)."""
    arrays = [to_np(x) for x in xi]
    grids = _onp.meshgrid(*[a.asnumpy() for a in arrays], indexing=indexing, sparse=sparse)
    ctx = arrays[0].context if arrays else None
    return [ndarray(_onp.require(g, requirements="C"), ctx) for g in grids]
