"""`mx.np.stride_tricks`: broadcast_arrays."""
from __future__ import annotations

import numpy as _onp

from .multiarray import invoke, to_np

__all__ = ["broadcast_arrays"]


def broadcast_arrays(*args):
    """The arrays broadcast to their common shape (copies, recorded by autograd)."""
    arrays = [to_np(a) for a in args]
    shape = _onp.broadcast_shapes(*[a.shape for a in arrays])
    return [invoke("_npi_broadcast_to", [a], {"shape": shape}) for a in arrays]
