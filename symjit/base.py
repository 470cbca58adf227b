"""Shared foundations: the exception family and dtype helpers used by every layer.

Every error symjit raises on bad user input is an `MXNetError` (importable as
`symjit.MXNetError` and `symjit.base.MXNetError`, as in MXNet 1.x), with the op
name, the argument and expected-versus-actual values in its message.
"""
from __future__ import annotations

import ctypes
import warnings

import numpy as np

__all__ = ["MXNetError", "MXNetValueError", "MXNetTypeError", "MXNetIndexError", "NotImplementedForSymbol", "NotSupportedForSparseNDArray", "mx_real_t", "numeric_types",
           "integer_types", "string_types", "py_str", "canonical_dtype", "dtype_name", "DTYPE_NAMES"]


class MXNetError(RuntimeError):
    """The single exception family of symjit (MXNet's name, for compatibility)."""


class MXNetValueError(MXNetError, ValueError):
    """An MXNetError MXNet reports as a ValueError (bad value of a right type, e.g. a reshape
    target of another size)."""


class MXNetTypeError(MXNetError, TypeError):
    """An MXNetError MXNet reports as a TypeError (an argument of the wrong type)."""


class MXNetIndexError(MXNetError, IndexError):
    """An MXNetError MXNet reports as an IndexError (an index out of range)."""


class _UnsupportedCall(MXNetError):
    """A function called on a kind of array that does not offer it (MXNet's message form)."""
    _what = ""

    def __init__(self, function, alias=None, *args):
        super().__init__()
        self.function = getattr(function, "__name__", str(function))
        self.alias = alias
        self.args = tuple(str(type(a)) for a in args)

    def __str__(self):
        msg = f"Function {self.function}"
        if self.alias:
            msg += f' (namely operator "{self.alias}")'
        if self.args:
            msg += " with arguments ({})".format(", ".join(self.args))
        return msg + self._what


class NotImplementedForSymbol(_UnsupportedCall):
    """An NDArray-only function was called on a Symbol."""
    _what = " is not implemented for Symbol and only available in NDArray."


class NotSupportedForSparseNDArray(_UnsupportedCall):
    """A dense-only function was called on a sparse NDArray."""
    _what = " is not supported for SparseNDArray and only available in NDArray."


mx_real_t = np.float32
numeric_types = (float, int, np.generic)
integer_types = (int, np.integer)
string_types = (str,)


def py_str(x) -> str:
    """Text from the bytes a C API returns (UTF-8); text passes through."""
    return x.decode("utf-8") if isinstance(x, (bytes, bytearray)) else str(x)


def _as_list(obj):
    """`obj` itself when it is a list or tuple, else `[obj]`."""
    return obj if isinstance(obj, (list, tuple)) else [obj]

#: dtypes symjit stores and computes with; names as MXNet spells them.
DTYPE_NAMES = {
    "float32": np.float32, "float64": np.float64, "float16": np.float16,
    "uint8": np.uint8, "int8": np.int8, "int32": np.int32, "int64": np.int64,
    "bool": np.bool_, "uint16": np.uint16, "int16": np.int16, "uint32": np.uint32,
    "uint64": np.uint64,
}


def _numpy_dtype_name(spelling: str) -> str | None:
    """The name numpy gives the dtype spelt `spelling`, None when numpy does not know it."""
    try:
        return np.dtype(spelling).name
    except (TypeError, SyntaxError, ValueError):   # numpy parses some spellings as Python literals
        return None


def canonical_dtype(dtype) -> type:
    """Return the numpy scalar type (e.g. `np.float32`) for any dtype spelling.

    Accepts numpy types and dtypes, MXNet names ('float32', 'uint8', ...) and
    Python `float`/`int`/`bool`. Raises MXNetError for anything else.
    """
    if dtype is None:
        return mx_real_t
    if isinstance(dtype, str):
        key = dtype.strip().strip("'\"")
        if key in DTYPE_NAMES:
            return DTYPE_NAMES[key]
        alias = _numpy_dtype_name(key)   # numpy's other spellings: 'half', 'double', 'f4', ...
        if alias in DTYPE_NAMES:
            return DTYPE_NAMES[alias]
        raise MXNetError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPE_NAMES)}")
    if dtype is float:
        return np.float64
    if dtype is int:
        return np.int64
    if dtype is bool:
        return np.bool_
    try:
        t = np.dtype(dtype).type
    except TypeError as e:
        raise MXNetError(f"unknown dtype {dtype!r}") from e
    if np.dtype(t).name not in DTYPE_NAMES:
        raise MXNetError(f"unsupported dtype {np.dtype(t).name!r}; expected one of {sorted(DTYPE_NAMES)}")
    return t


def dtype_name(dtype) -> str:
    """MXNet's name for a dtype ('float32', 'int64', ...)."""
    return np.dtype(canonical_dtype(dtype)).name


#: numpy 1.x makes an object array, with a VisibleDeprecationWarning, from a ragged nested
#: sequence, where numpy 2 raises ValueError; `real_array` raises numpy 2's error under both
_RAGGED_IS_A_WARNING = np.lib.NumpyVersion(np.__version__) < "2.0.0"


def _asarray_refusing_ragged(value) -> np.ndarray:
    """numpy 1.x's `np.asarray` with a ragged nested sequence refused as numpy 2 does."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.VisibleDeprecationWarning)
        try:
            return np.asarray(value)
        except np.VisibleDeprecationWarning as e:
            raise ValueError(str(e)) from None


def real_array(value, what: str) -> np.ndarray:
    """`np.asarray(value)`, refusing complex data: MXNet has no complex dtype, and a cast
    would silently drop the imaginary part. A ragged nested sequence raises ValueError."""
    data = _asarray_refusing_ragged(value) if _RAGGED_IS_A_WARNING else np.asarray(value)
    if np.iscomplexobj(data):
        raise MXNetError(f"{what}: complex values ({data.dtype.name}) are not supported (MXNet has "
                         "no complex dtype); pass the real and imaginary parts as separate arrays")
    return data


#: MXNet's C handle of an NDArray. A symjit NDArray converts to one (`ctypes.cast(arr,
#: NDArrayHandle)`, through `NDArray._as_parameter_`) and `NDArray(handle)` is that array again,
#: the way MXNet's executor monitor callbacks hand arrays over
NDArrayHandle = ctypes.c_void_p
