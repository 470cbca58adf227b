"""`mx.np.ndarray`: the NumPy-compatible array of MXNet 1.9.1 (in `npx.set_np()` mode).

`ndarray` subclasses the legacy `NDArray` and shares its storage, context, autograd tape,
kvstore and optimizer handling; it overrides the semantics: zero-dim arrays (shape ()),
numpy broadcasting, MXNet np's dtype rules (float32 default, see `symjit.ops.np_math`),
comparisons giving bool arrays, numpy indexing (basic, advanced, boolean), numpy reductions.

Invariants: every computation goes through `ndarray.invoke` with a registered op, so it is
recorded on the autograd tape; results are `ndarray`s (fresh legacy results are re-classed in
place, never copied); `as_nd_ndarray()` / `NDArray.as_np_ndarray()` are zero-copy views that
share the gradient buffer and autograd entry.
"""
from __future__ import annotations

import numbers
from typing import Any, Mapping, Sequence

import numpy as _np

from ..autograd import share_entry
from ..base import MXNetError, canonical_dtype
from ..context import Context
from ..ndarray.ndarray import NDArray, _check_ctx, _shape, invoke as _nd_invoke
from ..ndarray.write_guard import writable

__all__ = ["ndarray", "array", "asarray", "empty", "zeros", "ones", "full", "invoke", "wrap", "to_np",
           "ufunc_call", "is_scalar", "default_float"]

#: MXNet np's default dtype for arrays made from Python values
default_float = _np.float32


def wrap(x):
    """`x` (a legacy NDArray fresh from an op, or a list/tuple of them) as np.ndarray(s), in place."""
    if isinstance(x, (list, tuple)):
        return type(x)(wrap(v) for v in x)
    if type(x) is NDArray:
        x.__class__ = ndarray
    return x


def invoke(op_name: str, inputs: Sequence[NDArray], attrs: Mapping[str, Any] | None = None, out=None,
           ctx: Context | None = None):
    """`ndarray.invoke` with np.ndarray results."""
    return wrap(_nd_invoke(op_name, list(inputs), attrs or {}, out=out, ctx=ctx))


def is_scalar(x) -> bool:
    """Whether `x` is a real Python or numpy number."""
    return isinstance(x, (numbers.Number, _np.generic)) and not isinstance(x, (complex, _np.complexfloating))


def to_np(x, ctx: Context | None = None, dtype=None) -> "ndarray":
    """`x` as an np.ndarray: ndarrays as they are (legacy NDArrays viewed), numpy arrays keep their
    dtype, Python values default to float32."""
    if isinstance(x, ndarray):
        return x
    if isinstance(x, NDArray):
        return x.as_np_ndarray()
    return array(x, dtype=dtype, ctx=ctx)


def ufunc_call(name: str, x1, x2, out=None):
    """Apply binary ufunc `name` (`_npi_<name>`), choosing the scalar forms for Python numbers
    (two numbers give numpy's scalar result, as MXNet)."""
    if is_scalar(x1) and is_scalar(x2) and out is None:
        return getattr(_np, name)(x1, x2)
    if is_scalar(x2):
        return invoke(f"_npi_{name}_scalar", [to_np(x1)], _scalar_attrs(x2), out=out)
    if is_scalar(x1):
        from ..ops.registry import find_op
        op = f"_npi_r{name}_scalar" if find_op(f"_npi_r{name}_scalar") else f"_npi_{name}_scalar"
        return invoke(op, [to_np(x2)], _scalar_attrs(x1), out=out)
    a = to_np(x1)
    return invoke(f"_npi_{name}", [a, to_np(x2, a.context)], out=out)


def _scalar_attrs(s) -> dict:
    return {"scalar": float(s), "is_int": isinstance(s, (numbers.Integral, _np.integer, _np.bool_))}


def _reflected(name: str):
    """x.__rop__(o) for non-commutative ops: o OP x."""
    def method(self, other):
        return ufunc_call(name, other, self)
    return method


def _forward(name: str):
    def method(self, other):
        return ufunc_call(name, self, other)
    return method


def _inplace(name: str):
    def method(self, other):
        return ufunc_call(name, self, other, out=self)
    return method


class ndarray(NDArray):
    """An n-dimensional array with NumPy semantics (MXNet's `mxnet.numpy.ndarray`)."""

    __slots__ = ()

    # ---- construction helpers ------------------------------------------------------
    def __init__(self, data=None, ctx: Context | None = None, writable: bool = True, *, shape=None,
                 dtype=None):
        if data is None or isinstance(data, (tuple, list, int)):   # numpy's ndarray(shape, dtype) form
            data = _np.zeros(_shape(shape if data is None else data), _dtype(dtype))
        super().__init__(data, ctx, writable)

    # ---- attributes ----------------------------------------------------------------------
    @property
    def dtype(self) -> _np.dtype:
        """The numpy dtype (MXNet np gives a `numpy.dtype`, the legacy NDArray a scalar type)."""
        return self._data.dtype

    @property
    def T(self) -> "ndarray":
        return self.transpose()

    def __repr__(self) -> str:
        """numpy's repr, with MXNet's dtype note: omitted for float32 and bool, shown otherwise."""
        text = repr(self._data)
        if ", dtype=" in text:
            text = text[:text.rindex(", dtype=")] + ")"
        dt = self._data.dtype
        if dt != _np.float32 and dt != _np.bool_:
            text = text[:-1] + f", dtype={dt.name})"
        return text

    def __str__(self) -> str:
        return str(self._data)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        for i in range(self.shape[0]):
            yield self[i]

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.size != 1 or self._data.dtype.kind not in "iub":
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return int(self.item())

    def item(self, *args):
        """The element as a Python scalar (the only one, or the one `args` index)."""
        return self._data.item(*args)

    def tolist(self):
        return self._data.tolist()

    def asscalar(self):
        return self.item()

    def __array__(self, dtype=None, copy=None):
        return self.asnumpy() if dtype is None else self.asnumpy().astype(dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """numpy ufuncs on mx.np arrays run the `mx.np` function of the same name (as MXNet);
        others run numpy's on the values and give an mx.np array."""
        from .. import numpy as mnp
        fn = getattr(mnp, ufunc.__name__, None)
        if method == "__call__" and fn is not None and not set(kwargs) - {"out"}:
            if kwargs.get("out") is not None:
                kwargs = {"out": kwargs["out"][0]}
            return fn(*inputs, **kwargs)
        from .fallback import numpy_fallback
        return numpy_fallback(getattr(ufunc, method), f"{ufunc.__name__}.{method}")(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        """numpy functions on mx.np arrays run the `mx.np` function of the same name (as MXNet),
        or numpy's on the values (an mx.np array result)."""
        from .. import numpy as mnp
        module = mnp.linalg if func.__module__.endswith("linalg") else mnp
        fn = getattr(module, func.__name__, None)
        if fn is None or fn is func:
            from .fallback import numpy_fallback
            fn = numpy_fallback(func, func.__name__)
        return fn(*args, **kwargs)

    def __reduce__(self):
        return (_rebuild_np, (self.asnumpy(), str(self._ctx)))

    # ---- conversion -----------------------------------------------------------------------
    def as_nd_ndarray(self) -> NDArray:
        """A legacy NDArray sharing this array's memory and gradient."""
        return _view(self, NDArray)

    def as_np_ndarray(self) -> "ndarray":
        return self

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True) -> "ndarray":
        dt = _np.dtype(canonical_dtype(dtype))
        if not copy and self._data.dtype == dt:
            return self
        return invoke("_npi_cast", [self], {"dtype": dt.name})

    def copy(self, order="C") -> "ndarray":
        return invoke("_np_copy", [self])

    def copyto(self, other):
        return wrap(super().copyto(other))

    def as_in_context(self, ctx) -> "ndarray":
        return self if ctx == self._ctx else self.copyto(ctx)

    as_in_ctx = as_in_context

    def detach(self) -> "ndarray":
        return ndarray(self._data, self._ctx)

    def attach_grad(self, grad_req: str = "write", stype=None) -> None:
        super().attach_grad(grad_req, stype)
        wrap(self._grad)

    def zeros_like(self):
        return ndarray(_np.zeros(self.shape, self._data.dtype), self._ctx)

    def ones_like(self):
        return ndarray(_np.ones(self.shape, self._data.dtype), self._ctx)

    # ---- shape --------------------------------------------------------------------------
    def _view_op(self, op_name: str, attrs: dict) -> "ndarray":
        """Shape-only op as a view sharing memory (through the op while autograd records this
        array, so gradients flow)."""
        from .. import autograd
        if autograd.is_recording() and self._ag is not None:
            return invoke(op_name, [self], attrs)
        from ..ops.registry import get_op
        op = get_op(op_name)
        _, (shape,) = op.infer_shape(op.parse(attrs), [self.shape])
        return ndarray(self._data.reshape(shape), self._ctx)

    def reshape(self, *shape, order="C", **kwargs) -> "ndarray":
        if "newshape" in kwargs:
            shape = (kwargs.pop("newshape"),)
        if kwargs:
            raise TypeError(f"reshape: unexpected arguments {sorted(kwargs)}")
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return self._view_op("_np_reshape", {"newshape": tuple(int(d) for d in shape), "order": order})

    def reshape_view(self, *shape, **kwargs) -> "ndarray":
        """A view of a new shape sharing this array's memory (not recorded by autograd)."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        try:
            return ndarray(self._data.reshape(shape), self._ctx)
        except ValueError as e:
            raise MXNetError(f"reshape_view: {e}") from None

    @property
    def writable(self) -> bool:
        return bool(self._data.flags.writeable)

    def _slices(self, begin, end, step) -> tuple:
        step = step or (None,) * len(begin)
        return tuple(slice(b, e, s) for b, e, s in zip(begin, end, step))

    def slice_assign(self, rhs, begin, end, step) -> "ndarray":
        """Write `rhs` into the region begin:end:step in place; returns this array."""
        self[self._slices(begin, end, step)] = rhs
        return self

    def slice_assign_scalar(self, value, begin, end, step) -> "ndarray":
        """Fill the region begin:end:step with `value` in place; returns this array."""
        self[self._slices(begin, end, step)] = value
        return self

    def ravel(self, order="C"):
        return self.reshape(-1)

    def flatten(self, order="C"):
        return invoke("_np_reshape", [self], {"newshape": (-1,)})

    def transpose(self, *axes) -> "ndarray":
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        return invoke("_np_transpose", [self], {"axes": tuple(axes) if axes else None})

    def squeeze(self, axis=None):
        return invoke("_np_squeeze", [self], {"axis": axis})

    def expand_dims(self, axis):
        return invoke("_npi_expand_dims", [self], {"axis": axis})

    def swapaxes(self, axis1, axis2):
        return invoke("_npi_swapaxes", [self], {"dim1": axis1, "dim2": axis2})

    def broadcast_to(self, shape):
        return invoke("_npi_broadcast_to", [self], {"shape": tuple(shape)})

    # ---- indexing -----------------------------------------------------------------------------
    def __getitem__(self, key) -> "ndarray":
        from .indexing import getitem
        return getitem(self, key)

    def __setitem__(self, key, value) -> None:
        from .indexing import setitem
        setitem(self, key, value)

    # ---- arithmetic ---------------------------------------------------------------------------
    __add__ = _forward("add")
    __radd__ = _forward("add")
    __sub__ = _forward("subtract")
    __rsub__ = _reflected("subtract")
    __mul__ = _forward("multiply")
    __rmul__ = _forward("multiply")
    __truediv__ = _forward("true_divide")
    __rtruediv__ = _reflected("true_divide")
    __mod__ = _forward("mod")
    __rmod__ = _reflected("mod")
    __pow__ = _forward("power")
    __rpow__ = _reflected("power")
    __and__ = _forward("bitwise_and")
    __rand__ = _forward("bitwise_and")
    __or__ = _forward("bitwise_or")
    __ror__ = _forward("bitwise_or")
    __xor__ = _forward("bitwise_xor")
    __rxor__ = _forward("bitwise_xor")
    __iadd__ = _inplace("add")
    __isub__ = _inplace("subtract")
    __imul__ = _inplace("multiply")
    __itruediv__ = _inplace("true_divide")
    __imod__ = _inplace("mod")
    __div__ = __truediv__
    __rdiv__ = __rtruediv__
    __idiv__ = __itruediv__

    def __matmul__(self, other):
        from . import _op
        return _op.matmul(self, other)

    def __rmatmul__(self, other):
        from . import _op
        return _op.matmul(other, self)

    def __floordiv__(self, other):
        from . import _op
        return _op.floor(ufunc_call("true_divide", self, other)).astype(self.dtype)

    def __neg__(self):
        return invoke("_npi_negative", [self])

    def __pos__(self):
        return self.copy()

    def __abs__(self):
        return invoke("_npi_absolute", [self])

    def __round__(self, ndigits=None):
        """round(x): the nearest integer of a one-element array as a Python number without
        `ndigits`, else the array rounded to `ndigits` decimals."""
        if ndigits is None:
            return round(self.item())
        return invoke("_npi_around", [self], {"decimals": ndigits})

    def __invert__(self):
        return invoke("_npi_bitwise_not", [self])

    def _compare(self, other, name: str):
        """A bool array; against an object that is no array or number, == is False and != True
        (as MXNet), the orderings are NotImplemented (a TypeError)."""
        if other is None or not (is_scalar(other) or isinstance(other, (NDArray, _np.ndarray, list, tuple))):
            return name == "not_equal" if name in ("equal", "not_equal") else NotImplemented
        return ufunc_call(name, self, other)

    def __eq__(self, other): return self._compare(other, "equal")
    def __ne__(self, other): return self._compare(other, "not_equal")
    def __gt__(self, other): return self._compare(other, "greater")
    def __ge__(self, other): return self._compare(other, "greater_equal")
    def __lt__(self, other): return self._compare(other, "less")
    def __le__(self, other): return self._compare(other, "less_equal")

    __hash__ = object.__hash__

    # ---- reductions ----------------------------------------------------------------------------
    def sum(self, axis=None, dtype=None, out=None, keepdims=False, initial=None):
        return invoke("_np_sum", [self], _reduce_attrs(axis, dtype, keepdims, initial), out=out)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, initial=None):
        return invoke("_np_prod", [self], _reduce_attrs(axis, dtype, keepdims, initial), out=out)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        return invoke("_npi_mean", [self], _reduce_attrs(axis, dtype, keepdims, None), out=out)

    def max(self, axis=None, out=None, keepdims=False):
        return invoke("_np_max", [self], _reduce_attrs(axis, None, keepdims, None), out=out)

    def min(self, axis=None, out=None, keepdims=False):
        return invoke("_np_min", [self], _reduce_attrs(axis, None, keepdims, None), out=out)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return invoke("_npi_std", [self], {"axis": _axis(axis), "dtype": dtype, "ddof": ddof,
                                           "keepdims": keepdims}, out=out)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return invoke("_npi_var", [self], {"axis": _axis(axis), "dtype": dtype, "ddof": ddof,
                                           "keepdims": keepdims}, out=out)

    def argmax(self, axis=None, out=None):
        return invoke("_npi_argmax", [self], {"axis": axis}, out=out)

    def argmin(self, axis=None, out=None):
        return invoke("_npi_argmin", [self], {"axis": axis}, out=out)

    def all(self, axis=None, out=None, keepdims=False):
        return invoke("_np_all", [self], {"axis": _axis(axis), "keepdims": keepdims}, out=out)

    def any(self, axis=None, out=None, keepdims=False):
        return invoke("_np_any", [self], {"axis": _axis(axis), "keepdims": keepdims}, out=out)

    def __getattr__(self, name: str):
        """Every other method: the `mx.np` function of that name applied to this array."""
        if name.startswith("_"):
            raise AttributeError(f"'ndarray' object has no attribute {name!r}")
        from . import _op
        fn = getattr(_op, name, None)
        if fn is None or name in _NOT_METHODS:
            legacy = NDArray.__getattr__(self, name)

            def method(*args, **kwargs):
                return wrap(legacy(*args, **kwargs))
            method.__name__ = name
            return method

        def bound(*args, **kwargs):
            return fn(self, *args, **kwargs)
        bound.__name__ = name
        return bound


#: `_op` functions that are not ndarray methods
_NOT_METHODS = frozenset({"array", "zeros", "ones", "full", "empty", "arange", "linspace", "eye"})


def _axis(axis):
    if isinstance(axis, list):
        return tuple(axis)
    if isinstance(axis, NDArray):
        return int(axis.item())
    return axis


def _reduce_attrs(axis, dtype, keepdims, initial) -> dict:
    return {"axis": _axis(axis), "dtype": None if dtype is None else _np.dtype(canonical_dtype(dtype)).name,
            "keepdims": bool(keepdims), "initial": initial}


def _view(x: NDArray, cls: type) -> NDArray:
    """A `cls` object over x's memory, sharing its gradient buffer and autograd entry."""
    v = cls(x._data, x._ctx)
    share_entry(x, v)
    return v


def _rebuild_np(data, ctx):
    from ..ndarray.ndarray import _rebuild
    return wrap(_rebuild(data, ctx))


# ---- creation -----------------------------------------------------------------------------------

def _dtype(dtype, default=default_float) -> _np.dtype:
    return _np.dtype(default if dtype is None else canonical_dtype(dtype))


def array(object, dtype=None, ctx=None) -> ndarray:
    """An array holding a copy of `object`: an ndarray or numpy array keeps its dtype, Python
    values (numbers, bools, nested lists) give float32 unless `dtype` says otherwise."""
    ctx = _check_ctx(ctx)
    if isinstance(object, NDArray):
        src = object.asnumpy()
        dt = src.dtype if dtype is None else _dtype(dtype)
    elif isinstance(object, _np.ndarray):
        src, dt = object, object.dtype if dtype is None else _dtype(dtype)
    else:
        try:
            src = _np.array(object)
        except (ValueError, TypeError) as e:
            raise MXNetError(f"array: cannot convert {type(object).__name__} to an array: {e}") from None
        if src.dtype == object or src.dtype.kind in "OUSc":
            raise MXNetError(f"array: cannot convert {type(object).__name__} of {src.dtype} values to an array")
        dt = _dtype(dtype)
    if dt.kind == "c":
        raise MXNetError("array: complex values are not supported (MXNet has no complex dtype)")
    return ndarray(_np.array(src, dtype=dt, copy=True, order="C"), ctx)


def asarray(a, dtype=None, ctx=None) -> ndarray:
    """`a` as an ndarray (the same object when it is one of that dtype)."""
    if isinstance(a, ndarray) and (dtype is None or a._data.dtype == _dtype(dtype)):
        return a
    return array(a, dtype=dtype, ctx=ctx)


def _filled(shape, value, dtype, ctx, default=default_float) -> ndarray:
    return ndarray(_np.full(_shape(shape), value, _dtype(dtype, default)), _check_ctx(ctx))


def empty(shape, dtype=None, order="C", ctx=None) -> ndarray:
    """An array of `shape` (zero-filled: symjit never hands out uninitialised memory)."""
    return _filled(shape, 0, dtype, ctx)


def zeros(shape, dtype=None, order="C", ctx=None) -> ndarray:
    """An array of zeros (float32 unless `dtype`)."""
    return _filled(shape, 0, dtype, ctx)


def ones(shape, dtype=None, order="C", ctx=None) -> ndarray:
    """An array of ones (float32 unless `dtype`)."""
    return _filled(shape, 1, dtype, ctx)


def full(shape, fill_value, dtype=None, order="C", ctx=None, out=None) -> ndarray:
    """An array of `shape` filled with `fill_value` (float32 unless `dtype`, or the dtype of an
    ndarray `fill_value`)."""
    if isinstance(fill_value, NDArray):
        dt = fill_value.dtype if dtype is None else dtype
        result = ndarray(_np.broadcast_to(fill_value.asnumpy(), _shape(shape)).astype(_dtype(dt)),
                         _check_ctx(ctx))
    else:
        result = _filled(shape, fill_value, dtype, ctx)
    if out is not None:
        writable(out._data)[...] = result._data
        return out
    return result

