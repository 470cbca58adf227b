"""NDArray indexing: `x[key]` and `x[key] = value` with MXNet 1.x semantics.

Reading with ints and slices gives a view when the selected block is contiguous (as
MXNet's basic slicing on the leading axes) and a copy otherwise; integer-array keys
gather a copy. An int index that would give a 0-d result gives shape (1,). Under
autograd recording, reads of recorded arrays go through the `slice`/`take` ops so
that gradients flow; writes into recorded arrays are refused while recording.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..base import MXNetError
from .ndarray import NDArray, invoke

__all__ = ["getitem", "setitem"]


def _np_key(key):
    if isinstance(key, NDArray):
        return key._data.astype(np.int64)
    if isinstance(key, tuple):
        return tuple(_np_key(k) for k in key)
    if isinstance(key, list):
        return np.asarray(key, dtype=np.int64)
    return key


def _is_basic(key) -> bool:
    items = key if isinstance(key, tuple) else (key,)
    return all(isinstance(k, (numbers.Integral, slice)) or k is None or k is Ellipsis for k in items)


def getitem(x: NDArray, key) -> NDArray:
    from .. import autograd
    if autograd.is_recording() and x._ag is not None:
        return _recorded_getitem(x, key)
    nkey = _np_key(key)
    try:
        res = x._data[nkey]
    except IndexError as e:
        raise MXNetError(f"index {key!r} is out of bounds for NDArray of shape {x.shape}: {e}") from None
    if res.ndim == 0:
        res = res.reshape(1)
    if not (_is_basic(nkey) and res.flags.c_contiguous and np.shares_memory(res, x._data)):
        res = np.array(res, copy=True)
    return NDArray(res, x._ctx)


def _recorded_getitem(x: NDArray, key) -> NDArray:
    if isinstance(key, (NDArray, list, np.ndarray)):
        idx = key if isinstance(key, NDArray) else NDArray(np.asarray(key, dtype=np.int64), x._ctx)
        return invoke("take", [x, idx], {"axis": 0})
    items = key if isinstance(key, tuple) else (key,)
    if not _is_basic(items):
        return _recorded_gather(x, key)
    try:   # the result's shape, from numpy's rules on a data-less stand-in
        final = np.broadcast_to(np.empty((), np.uint8), x.shape)[items].shape
    except IndexError as e:
        raise MXNetError(f"index {key!r} is out of bounds for NDArray of shape {x.shape}: {e}") from None
    # Ellipsis -> full slices, None (new axes) applied by the final reshape
    real = [k for k in items if k is not None]
    if any(k is Ellipsis for k in real):
        at = real.index(Ellipsis)
        real = real[:at] + [slice(None)] * (x.ndim - len(real) + 1) + real[at + 1:]
    items = tuple(real)
    if len(items) > x.ndim:
        raise MXNetError(f"too many indices ({len(items)}) for NDArray of shape {x.shape}")
    begin, end, step, drop = [], [], [], []
    for axis, k in enumerate(items):
        if isinstance(k, numbers.Integral):
            i = int(k) + (x.shape[axis] if k < 0 else 0)
            if not 0 <= i < x.shape[axis]:
                raise MXNetError(f"index {k} is out of bounds for axis {axis} with size {x.shape[axis]}")
            begin.append(i), end.append(i + 1), step.append(1), drop.append(axis)
        else:
            begin.append(k.start), end.append(k.stop), step.append(k.step)
    out = invoke("slice", [x], {"begin": tuple(begin), "end": tuple(end), "step": tuple(step)}) if items else x
    shape = tuple(final) or (1,)
    if out.shape != shape:
        out = invoke("Reshape", [out], {"shape": shape})
    return out


def _recorded_gather(x: NDArray, key) -> NDArray:
    """Advanced indexing under autograd: the element positions numpy's rules select, gathered
    from the flattened array with `take` (so the gradient scatters back)."""
    try:
        positions = np.arange(x.size, dtype=np.int64).reshape(x.shape)[_np_key(key)]
    except IndexError as e:
        raise MXNetError(f"index {key!r} is out of bounds for NDArray of shape {x.shape}: {e}") from None
    flat = invoke("Reshape", [x], {"shape": (-1,)})
    idx = NDArray(positions.reshape(-1) if positions.ndim else positions.reshape(1), x._ctx)
    out = invoke("take", [flat, idx], {"axis": 0})
    return invoke("Reshape", [out], {"shape": positions.shape or (1,)})


def setitem(x: NDArray, key, value) -> None:
    from .. import autograd
    whole = key is None or key is Ellipsis   # `x[None] = v` / `x[...] = v` copy the whole array
    if autograd.is_recording() and (x._ag is not None or not whole):
        raise MXNetError("Inplace operations (+=, -=, x[:]=, etc) are not supported when recording with "
                         "autograd: in-place assignment into part of an array cannot be differentiated")
    if isinstance(value, NDArray):
        v = value._data
    elif isinstance(value, (numbers.Number, np.generic, np.ndarray, list, tuple)):
        v = np.asarray(value)
    else:
        raise MXNetError(f"cannot assign a value of type {type(value).__name__} to an NDArray")
    nkey = _np_key(key)
    try:
        target_shape = x._data[nkey].shape
        if v.size == int(np.prod(target_shape)) and v.shape != target_shape:
            try:
                np.broadcast_to(v, target_shape)
            except ValueError:
                v = v.reshape(target_shape)
        x._data[nkey] = v
    except (IndexError, ValueError) as e:
        raise MXNetError(f"cannot assign value of shape {np.shape(v)} to NDArray of shape {x.shape} "
                         f"at index {key!r}: {e}") from None
