"""`npx.save` / `npx.load`: MXNet's NDArray file format with numpy shape semantics (the format
MXNet 1.9.1 writes under `npx.set_np()`: zero-size and 0-d arrays round-trip)."""
from __future__ import annotations

from ..ndarray import NDArray
from ..ndarray import serialization as _ser
from ..util import np_shape
from ._op import as_np

__all__ = ["save", "load"]


def save(file, arr):
    """Save an array, a list of arrays or a dict str -> array to `file`."""
    items = arr.values() if isinstance(arr, dict) else arr if isinstance(arr, (list, tuple)) else [arr]
    for a in items:
        if not isinstance(a, NDArray):
            raise TypeError(f"npx.save: only accepts mx.np.ndarray, a list or a dict of them, got "
                            f"{type(a).__name__}")
    with np_shape(True):
        _ser.save(file, arr)


def load(file):
    """The arrays saved in `file`: a list, or a dict when they were saved with names."""
    with np_shape(True):
        loaded = _ser.load(file)
    if isinstance(loaded, dict):
        return {k: as_np(v) for k, v in loaded.items()}
    return as_np(loaded)
