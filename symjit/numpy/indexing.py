"""numpy indexing of `mx.np.ndarray`: basic (ints, slices, None, Ellipsis), advanced (integer
arrays, lists and ranges; float arrays, MXNet np's default dtype, index by their integer part)
and boolean masks (a data-dependent result shape).

Reads go through the `_npi_getitem` op (recorded by autograd, gradient scattered back); a basic
index that gives a C-contiguous view returns a view sharing memory when autograd is not
recording this array, as MXNet does. Writes change the array's buffer in place.
"""
from __future__ import annotations

import numpy as _np

from ..base import MXNetError
from ..ndarray.ndarray import NDArray
from ..ndarray.write_guard import writable
from .multiarray import invoke, ndarray

__all__ = ["getitem", "setitem", "numpy_key"]


def _is_basic(k) -> bool:
    return k is None or k is Ellipsis or isinstance(k, (slice, int, _np.integer)) and not isinstance(k, bool)


def _split_key(key):
    """(key with array placeholders, list of index arrays as numpy arrays)."""
    items = key if isinstance(key, tuple) else (key,)
    out, arrays = [], []
    for k in items:
        if _is_basic(k):
            out.append(int(k) if isinstance(k, _np.integer) else k)
            continue
        if isinstance(k, NDArray):
            a = k._data
        elif isinstance(k, (list, range, _np.ndarray, bool, _np.bool_)):
            a = _np.asarray(k)
        else:
            raise MXNetError(f"getitem: index {k!r} of type {type(k).__name__} is not supported")
        if a.dtype.kind == "f":        # MXNet indexes with float arrays (its default dtype) too
            if not _np.all(_np.isfinite(a)):
                raise MXNetError("getitem: index arrays must hold finite values")
            a = a.astype(_np.int64)
        elif a.dtype.kind not in "iub":
            raise MXNetError(f"getitem: index arrays must be integer, bool or float, got {a.dtype.name}")
        out.append(("array", len(arrays)))
        arrays.append(a)
    return tuple(out), arrays


def numpy_key(key):
    """`key` with ndarrays replaced by numpy arrays (for writes)."""
    k, arrays = _split_key(key)
    return tuple(arrays[x[1]] if isinstance(x, tuple) else x for x in k)


def getitem(x: ndarray, key) -> ndarray:
    from .. import autograd
    k, arrays = _split_key(key)
    recording = autograd.is_recording() and x._ag is not None
    if not arrays and not recording:
        try:
            view = x._data[k]
        except IndexError as e:
            raise MXNetError(f"getitem: index {key!r} is invalid for array of shape {x.shape}: {e}") from None
        if isinstance(view, _np.ndarray) and view.size and view.flags.c_contiguous \
                and _np.shares_memory(view, x._data):
            return ndarray(view, x._ctx)
    index_arrays = [ndarray(a, x._ctx) for a in arrays]
    return invoke("_npi_getitem", [x, *index_arrays], {"key": k, "num_index": len(arrays)})


def setitem(x: ndarray, key, value) -> None:
    from .. import autograd
    if autograd.is_recording() and x._ag is not None:
        raise MXNetError("setitem: in-place writes to an array that is part of a recorded graph are not "
                         "supported while recording")
    v = value._data if isinstance(value, NDArray) else _np.asarray(value)
    if v.dtype.kind == "c":
        raise MXNetError("setitem: complex values are not supported")
    try:
        writable(x._data)[numpy_key(key)] = v
    except (IndexError, ValueError) as e:
        raise MXNetError(f"setitem: cannot assign {v.shape} values at index {key!r} of an array of shape "
                         f"{x.shape}: {e}") from None
