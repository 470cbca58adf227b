"""`mx.sym.np` (MXNet's `mxnet.symbol.numpy`): symbols with NumPy semantics, as F.np in a
`hybrid_forward` traced under `npx.set_np()`.

`_Symbol` is the Symbol class of that mode: arithmetic and comparisons broadcast (NumPy rules)
and take numbers on either side, `reshape` follows NumPy (-1 infers, no MXNet codes), reductions
take `axis` tuples and `keepdims`, and every result is again a `_Symbol`. The functions here
build the same registered operators as the legacy API, so traced graphs lower to the same IR,
compile the same way and export to JSON that MXNet 1.9.1 loads. `Symbol.as_np_ndarray()`
converts a legacy Symbol; `_Symbol.as_nd_ndarray()` converts back.
"""
from __future__ import annotations

import numbers

import numpy as _onp

from ..base import MXNetError
from .symbol import Symbol, create_op_symbol, var as _var

__all__ = ["_Symbol", "var", "zeros", "ones", "full", "full_like", "arange", "reshape", "transpose",
           "expand_dims", "squeeze", "swapaxes", "concatenate", "stack", "broadcast_to", "clip", "where",
           "dot", "sum", "mean", "max", "min", "amax", "amin", "prod", "argmax", "argmin", "tile", "flip",
           "split"]


class _Symbol(Symbol):
    """A Symbol with NumPy semantics (see the module docstring)."""
    __slots__ = ()

    def __repr__(self) -> str:
        return super().__repr__().replace("<Symbol", "<_Symbol", 1)

    def as_nd_ndarray(self) -> Symbol:
        """The same graph as a legacy Symbol."""
        return Symbol(self._outputs)

    def as_np_ndarray(self) -> "_Symbol":
        return self

    def __iter__(self):
        return (_Symbol([e]) for e in self._outputs)

    def __getitem__(self, key):
        if len(self._outputs) > 1 or isinstance(key, str):
            return as_np(Symbol.__getitem__(self, key))
        return _basic_index(self, key)

    # ---- arithmetic: NumPy broadcasting, numbers on either side ------------------------------
    def __add__(self, o): return add(self, o)
    def __radd__(self, o): return add(o, self)
    def __sub__(self, o): return subtract(self, o)
    def __rsub__(self, o): return subtract(o, self)
    def __mul__(self, o): return multiply(self, o)
    def __rmul__(self, o): return multiply(o, self)
    def __truediv__(self, o): return divide(self, o)
    def __rtruediv__(self, o): return divide(o, self)
    def __mod__(self, o): return mod(self, o)
    def __rmod__(self, o): return mod(o, self)
    def __pow__(self, o): return power(self, o)
    def __rpow__(self, o): return power(o, self)
    def __neg__(self): return negative(self)
    def __abs__(self): return absolute(self)
    def __eq__(self, o): return equal(self, o)
    def __ne__(self, o): return not_equal(self, o)
    def __gt__(self, o): return greater(self, o)
    def __ge__(self, o): return greater_equal(self, o)
    def __lt__(self, o): return less(self, o)
    def __le__(self, o): return less_equal(self, o)
    __hash__ = Symbol.__hash__
    __div__ = __truediv__
    __rdiv__ = __rtruediv__

    # ---- methods ----------------------------------------------------------------------------
    def astype(self, dtype, copy=True) -> "_Symbol":
        return as_np(create_op_symbol("Cast", [self], {"dtype": _onp.dtype(dtype).name}, hint="astype"))

    def reshape(self, *shape, order="C", **kwargs) -> "_Symbol":
        if "newshape" in kwargs or "shape" in kwargs:
            shape = (kwargs.pop("newshape", kwargs.pop("shape", None)),)
        if kwargs:
            raise TypeError(f"reshape: unexpected arguments {sorted(kwargs)}")
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = tuple(shape[0])
        return reshape(self, shape, order=order)

    @property
    def T(self) -> "_Symbol":
        return transpose(self)

    def transpose(self, *axes) -> "_Symbol":
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (list, tuple))):
            axes = axes[0]
        return transpose(self, axes or None)

    def sum(self, axis=None, dtype=None, keepdims=False): return sum(self, axis, dtype, keepdims=keepdims)
    def mean(self, axis=None, dtype=None, keepdims=False): return mean(self, axis, dtype, keepdims=keepdims)
    def max(self, axis=None, keepdims=False): return max(self, axis, keepdims=keepdims)
    def min(self, axis=None, keepdims=False): return min(self, axis, keepdims=keepdims)
    def prod(self, axis=None, dtype=None, keepdims=False): return prod(self, axis, dtype, keepdims=keepdims)
    def argmax(self, axis=None): return argmax(self, axis)
    def argmin(self, axis=None): return argmin(self, axis)
    def squeeze(self, axis=None): return squeeze(self, axis)
    def flatten(self, order="C"): return reshape(self, (-1,))
    def expand_dims(self, axis): return expand_dims(self, axis)
    def clip(self, a_min=None, a_max=None): return clip(self, a_min, a_max)
    def copy(self): return copy(self)
    def exp(self): return exp(self)
    def log(self): return log(self)
    def sqrt(self): return sqrt(self)
    def square(self): return square(self)
    def abs(self): return absolute(self)


def as_np(sym: Symbol) -> _Symbol:
    """`sym` with NumPy semantics (the same graph)."""
    return sym if isinstance(sym, _Symbol) else _Symbol(sym._outputs)


def _op(op_name: str, inputs, attrs=None, hint=None, name=None) -> _Symbol:
    return as_np(create_op_symbol(op_name, list(inputs), dict(attrs or {}), name=name, hint=hint))


def var(name, **kwargs) -> _Symbol:
    """A variable with NumPy semantics."""
    return as_np(_var(name, **kwargs))


def _is_number(x) -> bool:
    return isinstance(x, numbers.Number) or (isinstance(x, _onp.generic) and _onp.ndim(x) == 0)


# ---- elementwise ------------------------------------------------------------------------------
def _unary(py_name: str, op_name: str):
    def fn(x, out=None, **kwargs):
        _check_symbol(py_name, x)
        return _op(op_name, [x], hint=py_name)
    fn.__name__ = py_name
    fn.__doc__ = f"np.{py_name}, elementwise (operator {op_name})."
    return fn


def _binary(py_name: str, array_op: str, scalar_op: str, rscalar_op: str, pyfn):
    """NumPy's binary function: broadcasting between symbols, numbers on either side."""
    def fn(x1, x2, out=None):
        if _is_number(x1) and _is_number(x2):
            return pyfn(x1, x2)
        if isinstance(x1, Symbol) and isinstance(x2, Symbol):
            return _op(array_op, [x1, x2], hint=py_name)
        if isinstance(x1, Symbol) and _is_number(x2):
            return _op(scalar_op, [x1], {"scalar": float(x2)}, hint=py_name)
        if isinstance(x2, Symbol) and _is_number(x1):
            return _op(rscalar_op, [x2], {"scalar": float(x1)}, hint=py_name)
        raise TypeError(f"np.{py_name}: unsupported operand types {type(x1).__name__}, {type(x2).__name__}")
    fn.__name__ = py_name
    fn.__doc__ = f"np.{py_name} with broadcasting (operators {array_op} / {scalar_op})."
    return fn


def _check_symbol(fn: str, x) -> None:
    if not isinstance(x, Symbol):
        raise TypeError(f"np.{fn}: expected a Symbol, got {type(x).__name__}")


#: NumPy name -> registered unary operator
_UNARY = {
    "abs": "abs", "absolute": "abs", "exp": "exp", "expm1": "expm1", "log": "log", "log10": "log10",
    "log2": "log2", "log1p": "log1p", "sqrt": "sqrt", "cbrt": "cbrt", "square": "square", "sin": "sin",
    "cos": "cos", "tan": "tan", "arcsin": "arcsin", "arccos": "arccos", "arctan": "arctan", "sinh": "sinh",
    "cosh": "cosh", "tanh": "tanh", "arcsinh": "arcsinh", "arccosh": "arccosh", "arctanh": "arctanh",
    "floor": "floor", "ceil": "ceil", "trunc": "trunc", "rint": "rint", "fix": "fix", "sign": "sign",
    "negative": "negative", "reciprocal": "reciprocal", "degrees": "degrees", "radians": "radians",
    "logical_not": "logical_not", "copy": "_copy", "zeros_like": "zeros_like", "ones_like": "ones_like",
}

#: NumPy name -> (array op, op with a scalar right operand, op with a scalar left operand, python)
_BINARY = {
    "add": ("broadcast_add", "_plus_scalar", "_plus_scalar", lambda a, b: a + b),
    "subtract": ("broadcast_sub", "_minus_scalar", "_rminus_scalar", lambda a, b: a - b),
    "multiply": ("broadcast_mul", "_mul_scalar", "_mul_scalar", lambda a, b: a * b),
    "divide": ("broadcast_div", "_div_scalar", "_rdiv_scalar", lambda a, b: a / b),
    "true_divide": ("broadcast_div", "_div_scalar", "_rdiv_scalar", lambda a, b: a / b),
    "mod": ("broadcast_mod", "_mod_scalar", "_rmod_scalar", lambda a, b: a % b),
    "power": ("broadcast_power", "_power_scalar", "_rpower_scalar", lambda a, b: a ** b),
    "maximum": ("broadcast_maximum", "_maximum_scalar", "_maximum_scalar", lambda a, b: a if a > b else b),
    "minimum": ("broadcast_minimum", "_minimum_scalar", "_minimum_scalar", lambda a, b: a if a < b else b),
    "hypot": ("broadcast_hypot", "_hypot_scalar", "_hypot_scalar", lambda a, b: float(_onp.hypot(a, b))),
    "equal": ("broadcast_equal", "_equal_scalar", "_equal_scalar", lambda a, b: a == b),
    "not_equal": ("broadcast_not_equal", "_not_equal_scalar", "_not_equal_scalar", lambda a, b: a != b),
    "greater": ("broadcast_greater", "_greater_scalar", "_lesser_scalar", lambda a, b: a > b),
    "greater_equal": ("broadcast_greater_equal", "_greater_equal_scalar", "_lesser_equal_scalar",
                      lambda a, b: a >= b),
    "less": ("broadcast_lesser", "_lesser_scalar", "_greater_scalar", lambda a, b: a < b),
    "less_equal": ("broadcast_lesser_equal", "_lesser_equal_scalar", "_greater_equal_scalar",
                   lambda a, b: a <= b),
    "logical_and": ("broadcast_logical_and", "_logical_and_scalar", "_logical_and_scalar",
                    lambda a, b: bool(a) and bool(b)),
    "logical_or": ("broadcast_logical_or", "_logical_or_scalar", "_logical_or_scalar",
                   lambda a, b: bool(a) or bool(b)),
    "logical_xor": ("broadcast_logical_xor", "_logical_xor_scalar", "_logical_xor_scalar",
                    lambda a, b: bool(a) != bool(b)),
}

_FUNCTIONS = {**{n: _unary(n, op) for n, op in _UNARY.items()},
              **{n: _binary(n, *spec) for n, spec in _BINARY.items()}}
globals().update(_FUNCTIONS)
__all__ += sorted(_FUNCTIONS)
# the ones this module's own code calls, by name
(add, subtract, multiply, divide, mod, power, negative, absolute, equal, not_equal, greater, greater_equal,
 less, less_equal, copy, exp, log, sqrt, square) = (_FUNCTIONS[n] for n in (
    "add", "subtract", "multiply", "divide", "mod", "power", "negative", "absolute", "equal", "not_equal",
    "greater", "greater_equal", "less", "less_equal", "copy", "exp", "log", "sqrt", "square"))


# ---- shapes -----------------------------------------------------------------------------------
def _axis_attr(axis):
    if axis is None:
        return None
    return (int(axis),) if isinstance(axis, (int, _onp.integer)) else tuple(int(a) for a in axis)


def reshape(a, newshape, order="C") -> _Symbol:
    """`a` in shape `newshape` (NumPy rules: one -1 is inferred, 0 is a zero-size dim)."""
    _check_symbol("reshape", a)
    if order != "C":
        raise NotImplementedError(f"np.reshape: only order='C' is supported, got {order!r}")
    shape = (int(newshape),) if isinstance(newshape, (int, _onp.integer)) else tuple(int(d) for d in newshape)
    if any(d < -1 for d in shape):
        raise MXNetError(f"np.reshape: shape dimensions must be >= -1, got {shape}")
    return _op("_npx_reshape", [a], {"newshape": shape}, hint="reshape")


def transpose(a, axes=None) -> _Symbol:
    _check_symbol("transpose", a)
    return _op("transpose", [a], {"axes": tuple(axes) if axes is not None else ()}, hint="transpose")


def expand_dims(a, axis) -> _Symbol:
    return _op("expand_dims", [a], {"axis": int(axis)}, hint="expand_dims")


def squeeze(a, axis=None) -> _Symbol:
    return _op("squeeze", [a], {"axis": _axis_attr(axis)}, hint="squeeze")


def swapaxes(a, axis1, axis2) -> _Symbol:
    return _op("SwapAxis", [a], {"dim1": int(axis1), "dim2": int(axis2)}, hint="swapaxes")


def broadcast_to(array, shape) -> _Symbol:
    return _op("broadcast_to", [array], {"shape": tuple(shape)}, hint="broadcast_to")


def tile(A, reps) -> _Symbol:
    return _op("tile", [A], {"reps": (reps,) if isinstance(reps, int) else tuple(reps)}, hint="tile")


def flip(m, axis=None) -> _Symbol:
    if axis is None:
        raise NotImplementedError("np.flip: axis=None is not supported on symbols (give the axes)")
    return _op("reverse", [m], {"axis": _axis_attr(axis)}, hint="flip")


def concatenate(seq, axis=0, out=None) -> _Symbol:
    seq = list(seq)
    return _op("Concat", seq, {"dim": int(axis), "num_args": len(seq)}, hint="concatenate")


def stack(arrays, axis=0, out=None) -> _Symbol:
    arrays = list(arrays)
    return _op("stack", arrays, {"axis": int(axis), "num_args": len(arrays)}, hint="stack")


def split(ary, indices_or_sections, axis=0) -> _Symbol:
    from . import split_v2
    return as_np(split_v2(ary, indices_or_sections, axis))


def clip(a, a_min=None, a_max=None, out=None) -> _Symbol:
    lo = -_onp.inf if a_min is None else float(a_min)
    hi = _onp.inf if a_max is None else float(a_max)
    return _op("clip", [a], {"a_min": lo, "a_max": hi}, hint="clip")


def where(condition, x, y) -> _Symbol:
    """Elements of `x` where `condition` holds, else of `y` (symbols of one shape, or numbers)."""
    if _is_number(x) or _is_number(y):
        like = condition
        x = full_like(like, x) if _is_number(x) else x
        y = full_like(like, y) if _is_number(y) else y
    return _op("where", [condition, x, y], hint="where")


def full_like(a, fill_value, dtype=None) -> _Symbol:
    ones = _op("ones_like", [a], hint="full_like")
    return ones * float(fill_value) if dtype is None else (ones * float(fill_value)).astype(dtype)


def dot(a, b, out=None) -> _Symbol:
    return _op("dot", [a, b], hint="dot")


# ---- reductions -------------------------------------------------------------------------------
def _reduction(py_name: str, op_name: str):
    def fn(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
        _check_symbol(py_name, a)
        attrs = {"keepdims": bool(keepdims)}
        if axis is not None:
            attrs["axis"] = _axis_attr(axis)
        result = _op(op_name, [a], attrs, hint=py_name)
        return result.astype(dtype) if dtype is not None else result
    fn.__name__ = py_name
    fn.__doc__ = f"np.{py_name} over `axis` (an int, a tuple or None for all), keepdims as NumPy."
    return fn


sum = _reduction("sum", "sum")  # noqa: A001 - NumPy's name
mean = _reduction("mean", "mean")
prod = _reduction("prod", "prod")
max = amax = _reduction("max", "max")  # noqa: A001
min = amin = _reduction("min", "min")  # noqa: A001


def _arg_reduction(py_name: str, op_name: str):
    def fn(a, axis=None, out=None):
        _check_symbol(py_name, a)
        attrs = {} if axis is None else {"axis": int(axis)}
        return _op(op_name, [a], attrs, hint=py_name).astype("int64")
    fn.__name__ = py_name
    return fn


argmax = _arg_reduction("argmax", "argmax")
argmin = _arg_reduction("argmin", "argmin")


# ---- creation ---------------------------------------------------------------------------------
def _shape(shape) -> tuple:
    return (int(shape),) if isinstance(shape, (int, _onp.integer)) else tuple(int(d) for d in shape)


def zeros(shape, dtype="float32", order="C", ctx=None) -> _Symbol:
    return _op("_zeros", [], {"shape": _shape(shape), "dtype": _onp.dtype(dtype or "float32").name}, hint="zeros")


def ones(shape, dtype="float32", order="C", ctx=None) -> _Symbol:
    return _op("_ones", [], {"shape": _shape(shape), "dtype": _onp.dtype(dtype or "float32").name}, hint="ones")


def full(shape, fill_value, dtype="float32", order="C", ctx=None) -> _Symbol:
    return _op("_full", [], {"shape": _shape(shape), "value": float(fill_value),
                             "dtype": _onp.dtype(dtype or "float32").name}, hint="full")


def arange(start, stop=None, step=1, dtype="float32", ctx=None) -> _Symbol:
    return _op("_arange", [], {"start": start, "stop": stop, "step": step,
                               "dtype": _onp.dtype(dtype or "float32").name}, hint="arange")


# ---- indexing ---------------------------------------------------------------------------------
def _basic_index(sym: _Symbol, key) -> _Symbol:
    """NumPy basic indexing of a single-output symbol: ints and slices (step allowed) per
    leading axis; an int removes its axis."""
    keys = key if isinstance(key, tuple) else (key,)
    begin, end, step, drop = [], [], [], []
    for i, k in enumerate(keys):
        if isinstance(k, (int, _onp.integer)) and not isinstance(k, bool):
            k = int(k)
            begin.append(k)
            end.append(k + 1 if k != -1 else None)
            step.append(None)
            drop.append(i)
        elif isinstance(k, slice):
            begin.append(k.start)
            end.append(k.stop)
            step.append(k.step)
        else:
            raise TypeError(f"_Symbol indexing supports ints and slices, got {type(k).__name__}")
    out = _op("slice", [sym], {"begin": tuple(begin), "end": tuple(end), "step": tuple(step)}, hint="slice")
    if drop:
        out = _op("squeeze", [out], {"axis": tuple(drop)}, hint="squeeze")
    return out
