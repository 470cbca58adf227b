"""`mxnet.numpy` (`mx.np`): the part of MXNet's NumPy-compatible array interface symjit offers.

Contents, and only these: array creation (`array`, `zeros`, `ones`, `empty`, `full`, `arange`),
`concatenate` and `stack`, and `random.uniform` / `random.normal` with NumPy's argument names
(`size=`). They return symjit NDArrays (`ndarray` is that class), which follow MXNet's legacy
NDArray semantics rather than MXNet 2's `mx.np.ndarray` ones; every other `mx.np` function is
absent, so a program using one fails with AttributeError instead of computing something else.
"""
from __future__ import annotations

from .. import ndarray as _nd
from ..ndarray import NDArray as ndarray  # noqa: F401
from . import random  # noqa: F401

__all__ = ["ndarray", "array", "zeros", "ones", "empty", "full", "arange", "concatenate", "stack", "random"]


def array(object, dtype=None, ctx=None):
    """An array holding a copy of `object` (float32 unless `dtype` or the source says otherwise)."""
    return _nd.array(object, ctx=ctx, dtype=dtype)


def zeros(shape, dtype=None, order="C", ctx=None):
    """An array of zeros."""
    return _nd.zeros(shape, ctx=ctx, dtype=dtype)


def ones(shape, dtype=None, order="C", ctx=None):
    """An array of ones."""
    return _nd.ones(shape, ctx=ctx, dtype=dtype)


def empty(shape, dtype=None, order="C", ctx=None):
    """An uninitialised array (zero-filled in symjit)."""
    return _nd.empty(shape, ctx=ctx, dtype=dtype)


def full(shape, fill_value, dtype=None, order="C", ctx=None):
    """An array filled with `fill_value`."""
    return _nd.full(shape, fill_value, ctx=ctx, dtype=dtype)


def arange(start, stop=None, step=1, dtype=None, ctx=None):
    """Evenly spaced values in [start, stop)."""
    return _nd.arange(start, stop, step, ctx=ctx, dtype=dtype)


def _into(result, out):
    """`result`, written into `out` when one is given (numpy's out= convention)."""
    if out is None:
        return result
    out[:] = result
    return out


def concatenate(seq, axis=0, out=None):
    """Join arrays along an existing axis."""
    return _into(_nd.concat(*seq, dim=axis), out)


def stack(arrays, axis=0, out=None):
    """Join arrays along a new axis."""
    return _into(_nd.stack(*arrays, axis=axis), out)
