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

import builtins   # this module defines NumPy's all, any, sum, max, ... over the builtins
import numbers

import numpy as _onp

from .symbol import Symbol, create_op_symbol, var as _var

__all__ = ["_Symbol", "var", "zeros", "ones", "full", "full_like", "arange", "reshape", "transpose",
           "expand_dims", "squeeze", "swapaxes", "concatenate", "stack", "broadcast_to", "clip", "where",
           "dot", "matmul", "sum", "mean", "max", "min", "amax", "amin", "prod", "argmax", "argmin", "tile", "flip",
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
    def max(self, axis=None, keepdims=False): return max(self, axis, keepdims=keepdims)  # noqa: E704
    def min(self, axis=None, keepdims=False): return min(self, axis, keepdims=keepdims)  # noqa: E704
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


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kwargs) -> _Symbol:
    """numpy.var of the symbol `a` (operator `_npi_var`, as MXNet's `sym.np.var`); given a
    name instead, a variable with NumPy semantics (`kwargs` as for `mx.sym.var`)."""
    if isinstance(a, str):
        return as_np(_var(a, **({"dtype": dtype} if dtype is not None else {}), **kwargs))
    _check_symbol("var", a)
    attrs = {"axis": _axis_attr(axis), "ddof": int(ddof), "keepdims": bool(keepdims)}
    if dtype is not None:
        attrs["dtype"] = _onp.dtype(dtype).name
    return _op("_npi_var", [a], attrs, hint="var")


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


def _binary(py_name: str, op_base: str, reverse: str | None, pyfn):
    """NumPy's binary function: broadcasting between symbols (`_npi_<op_base>`), numbers on
    either side (`_npi_<op_base>_scalar`, and for a number on the left `_npi_<reverse>_scalar`,
    the operation itself when it commutes)."""
    def fn(x1, x2, out=None):
        if _is_number(x1) and _is_number(x2):
            return pyfn(x1, x2)
        if isinstance(x1, Symbol) and isinstance(x2, Symbol):
            return _op(f"_npi_{op_base}", [x1, x2], hint=py_name)
        if isinstance(x1, Symbol) and _is_number(x2):
            return _scalar_op(f"_npi_{op_base}_scalar", x1, x2, f"{op_base}_scalar")
        if isinstance(x2, Symbol) and _is_number(x1):
            name = reverse or op_base
            return _scalar_op(f"_npi_{name}_scalar", x2, x1, f"{name}_scalar")
        raise TypeError(f"np.{py_name}: unsupported operand types {type(x1).__name__}, {type(x2).__name__}")
    fn.__name__ = py_name
    fn.__doc__ = f"np.{py_name} with broadcasting (operator _npi_{op_base} and its scalar forms)."
    return fn


def _scalar_op(op_name: str, x, scalar, hint: str) -> "_Symbol":
    is_int = isinstance(scalar, (int, _onp.integer)) and not isinstance(scalar, bool)
    return _op(op_name, [x], {"scalar": float(scalar), "is_int": is_int}, hint=hint)


def _check_symbol(fn: str, x) -> None:
    if not isinstance(x, Symbol):
        raise TypeError(f"np.{fn}: expected a Symbol, got {type(x).__name__}")


_UNARY_NAMES = ("exp", "expm1", "log", "log10", "log2", "log1p", "sqrt", "cbrt", "square", "sin", "cos", "tan",
                "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "floor",
                "ceil", "trunc", "rint", "fix", "sign", "negative", "reciprocal", "degrees", "radians",
                "logical_not", "isnan", "isinf", "isfinite", "isposinf", "isneginf", "bitwise_not")
#: NumPy name -> registered unary operator (MXNet 1.9.1's choices)
_UNARY = {**{n: f"_npi_{n}" for n in _UNARY_NAMES}, "abs": "_npi_absolute", "absolute": "_npi_absolute",
          "copy": "_np_copy", "zeros_like": "zeros_like", "ones_like": "ones_like"}

#: NumPy name -> (operator base name, base name of the op for a number on the left (None: it
#: commutes), python function for two numbers)
_BINARY = {
    "add": ("add", None, lambda a, b: a + b),
    "subtract": ("subtract", "rsubtract", lambda a, b: a - b),
    "multiply": ("multiply", None, lambda a, b: a * b),
    "divide": ("true_divide", "rtrue_divide", lambda a, b: a / b),
    "true_divide": ("true_divide", "rtrue_divide", lambda a, b: a / b),
    "mod": ("mod", "rmod", lambda a, b: a % b),
    "power": ("power", "rpower", lambda a, b: a ** b),
    "maximum": ("maximum", None, lambda a, b: a if a > b else b),
    "minimum": ("minimum", None, lambda a, b: a if a < b else b),
    "hypot": ("hypot", None, lambda a, b: float(_onp.hypot(a, b))),
    "arctan2": ("arctan2", "rarctan2", lambda a, b: float(_onp.arctan2(a, b))),
    "equal": ("equal", None, lambda a, b: a == b),
    "not_equal": ("not_equal", None, lambda a, b: a != b),
    "greater": ("greater", "less", lambda a, b: a > b),
    "greater_equal": ("greater_equal", "less_equal", lambda a, b: a >= b),
    "less": ("less", "greater", lambda a, b: a < b),
    "less_equal": ("less_equal", "greater_equal", lambda a, b: a <= b),
    "logical_and": ("logical_and", None, lambda a, b: bool(a) and bool(b)),
    "logical_or": ("logical_or", None, lambda a, b: bool(a) or bool(b)),
    "logical_xor": ("logical_xor", None, lambda a, b: bool(a) != bool(b)),
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
    return int(axis) if isinstance(axis, (int, _onp.integer)) else tuple(int(a) for a in axis)


def reshape(a, newshape, order="C") -> _Symbol:
    """`a` in shape `newshape` (NumPy rules: one -1 is inferred, 0 is a zero-size dim)."""
    _check_symbol("reshape", a)
    shape = (int(newshape),) if isinstance(newshape, (int, _onp.integer)) else tuple(int(d) for d in newshape)
    return _op("_np_reshape", [a], {"newshape": shape, "order": order}, hint="reshape")


def transpose(a, axes=None) -> _Symbol:
    _check_symbol("transpose", a)
    return _op("_np_transpose", [a], {"axes": None if axes is None else tuple(axes)}, hint="transpose")


def expand_dims(a, axis) -> _Symbol:
    return _op("_npi_expand_dims", [a], {"axis": int(axis)}, hint="expand_dims")


def squeeze(a, axis=None) -> _Symbol:
    return _op("_np_squeeze", [a], {"axis": _axis_attr(axis)}, hint="squeeze")


def swapaxes(a, axis1, axis2) -> _Symbol:
    return _op("_npi_swapaxes", [a], {"dim1": int(axis1), "dim2": int(axis2)}, hint="swapaxes")


def broadcast_to(array, shape) -> _Symbol:
    return _op("_npi_broadcast_to", [array], {"shape": tuple(shape)}, hint="broadcast_to")


def tile(A, reps) -> _Symbol:
    return _op("_npi_tile", [A], {"reps": (reps,) if isinstance(reps, int) else tuple(reps)}, hint="tile")


def flip(m, axis=None) -> _Symbol:
    return _op("_npi_flip", [m], {"axis": _axis_attr(axis)}, hint="flip")


def concatenate(seq, axis=0, out=None) -> _Symbol:
    seq = list(seq)
    return _op("_npi_concatenate", seq, {"axis": axis, "num_args": len(seq)}, hint="concatenate")


def stack(arrays, axis=0, out=None) -> _Symbol:
    arrays = list(arrays)
    return _op("_npi_stack", arrays, {"axis": int(axis), "num_args": len(arrays)}, hint="stack")


def split(ary, indices_or_sections, axis=0) -> list:
    """Equal parts (an int) or pieces cut at the given indices, as numpy.split."""
    if isinstance(indices_or_sections, (int, _onp.integer)):
        attrs = {"indices": (), "sections": int(indices_or_sections)}
    else:
        attrs = {"indices": (0,) + tuple(int(i) for i in indices_or_sections), "sections": 0}
    out = _op("_npi_split", [ary], dict(attrs, axis=int(axis)), hint="split")
    return list(out)


def clip(a, a_min=None, a_max=None, out=None) -> _Symbol:
    return _op("_npi_clip", [a], {"a_min": a_min, "a_max": a_max}, hint="clip")


def where(condition, x, y) -> _Symbol:
    """Elements of `x` where `condition` holds, else of `y` (broadcast symbols, or numbers)."""
    if _is_number(x):
        x = full_like(condition, x)
    if _is_number(y):
        y = full_like(condition, y)
    return _op("_npi_where", [condition, x, y], hint="where")


def full_like(a, fill_value, dtype=None) -> _Symbol:
    filled = _op("ones_like", [a], hint="full_like") * fill_value
    return filled if dtype is None else filled.astype(dtype)


def dot(a, b, out=None) -> _Symbol:
    return _op("_np_dot", [a, b], hint="dot")


def matmul(a, b, out=None) -> _Symbol:
    return _op("_npi_matmul", [a, b], hint="matmul")


# ---- reductions -------------------------------------------------------------------------------
def _reduction(py_name: str, op_name: str):
    def fn(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
        _check_symbol(py_name, a)
        attrs = {"axis": _axis_attr(axis), "keepdims": bool(keepdims)}
        if dtype is not None:
            attrs["dtype"] = _onp.dtype(dtype).name
        return _op(op_name, [a], attrs, hint=py_name)
    fn.__name__ = py_name
    fn.__doc__ = f"np.{py_name} over `axis` (an int, a tuple or None for all), keepdims as NumPy."
    return fn


sum = _reduction("sum", "_np_sum")  # noqa: A001 - NumPy's name
mean = _reduction("mean", "_npi_mean")
prod = _reduction("prod", "_np_prod")
max = amax = _reduction("max", "_np_max")  # noqa: A001
min = amin = _reduction("min", "_np_min")  # noqa: A001


def _arg_reduction(py_name: str, op_name: str):
    def fn(a, axis=None, out=None):
        _check_symbol(py_name, a)
        return _op(op_name, [a], {"axis": None if axis is None else int(axis)}, hint=py_name)
    fn.__name__ = py_name
    return fn


argmax = _arg_reduction("argmax", "_npi_argmax")
argmin = _arg_reduction("argmin", "_npi_argmin")


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
    if drop:   # the indexed axes (now of size 1) skipped, as MXNet does
        codes = tuple(-3 if i in drop else -2 for i in range(len(keys))) + (-4,)
        out = _op("_npx_reshape", [out], {"newshape": codes}, hint="reshape")
    return out


# ---- more of NumPy's names --------------------------------------------------------------------
def einsum(subscripts, *operands, optimize=False) -> _Symbol:
    """Einstein summation over the operands (`_npi_einsum`)."""
    return _op("_npi_einsum", list(operands), {"subscripts": subscripts, "num_args": len(operands),
                                                "optimize": int(bool(optimize))}, hint="einsum")


def ravel(x, order="C") -> _Symbol:
    return reshape(x, (-1,), order=order)


def fliplr(m) -> _Symbol:
    return flip(m, 1)


def flipud(m) -> _Symbol:
    return flip(m, 0)


def eye(N, M=None, k=0, dtype="float32", ctx=None) -> _Symbol:
    return _op("_eye", [], {"N": int(N), "M": 0 if M is None else int(M), "k": int(k),
                            "dtype": _onp.dtype(dtype or "float32").name}, hint="eye")


def identity(n, dtype="float32", ctx=None) -> _Symbol:
    return eye(n, dtype=dtype)


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype="float32", axis=0, ctx=None) -> _Symbol:
    if retstep or axis != 0:
        raise NotImplementedError("sym.np.linspace: retstep and axis are not supported on symbols")
    return _op("_linspace", [], {"start": float(start), "stop": float(stop), "num": int(num),
                                 "endpoint": bool(endpoint), "dtype": _onp.dtype(dtype or "float32").name},
               hint="linspace")


def sort(a, axis=-1, kind=None, order=None) -> _Symbol:
    return _op("sort", [a], {"axis": axis}, hint="sort")


def argsort(a, axis=-1, kind=None, order=None) -> _Symbol:
    return _op("argsort", [a], {"axis": axis, "dtype": "int64"}, hint="argsort")


def empty_like(prototype, dtype=None, order="C", subok=False, shape=None) -> _Symbol:
    out = _FUNCTIONS["zeros_like"](prototype)
    return out if dtype is None else out.astype(dtype)


#: NumPy's other spellings of functions defined above
_ALIASES = {"fabs": "absolute", "remainder": "mod", "deg2rad": "radians", "rad2deg": "degrees",
            "round": "around", "round_": "around", "row_stack": "vstack", "product": "prod", "sometrue": "any"}
#: registered `_np_*` / `_npi_*` operators whose arguments do not follow NumPy's order
_NOT_GENERIC = {"tensordot", "einsum", "getitem", "split", "where"}


def _registered(name: str) -> str | None:
    """The `_npi_<name>` or `_np_<name>` operator, if registered."""
    from ..ops.registry import find_op
    if name in _NOT_GENERIC:
        return None
    return next((p + name for p in ("_npi_", "_np_") if find_op(p + name) is not None), None)


def _generic(name: str, op_name: str):
    """np.<name> over operator `op_name`: array arguments (or one list of them) first, then the
    operator's attributes by position or keyword."""
    from . import op_function
    build = op_function(op_name, hint=name)

    def fn(*args, **kwargs):
        kwargs.pop("out", None)
        if args and isinstance(args[0], (list, tuple)) and builtins.all(isinstance(a, Symbol) for a in args[0]):
            args = tuple(args[0]) + tuple(args[1:])
        return as_np(build(*args, **kwargs))
    fn.__name__ = name
    fn.__doc__ = f"np.{name} on symbols (operator {op_name})."
    return fn


def __getattr__(name: str):
    target = _ALIASES.get(name, name)
    if target != name and target in globals():
        return globals()[target]
    op_name = _registered(target)
    if op_name is None or name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    fn = globals()[name] = _generic(name, op_name)
    return fn


def __dir__() -> list:
    from ..ops.registry import list_ops
    generic = {n[len(p):] for n in list_ops() for p in ("_npi_", "_np_") if n.startswith(p)}
    return sorted(set(globals()) | set(_ALIASES) | {n for n in generic if _registered(n)})


from . import numpy_more as _more  # noqa: E402 - the rest of NumPy's names, linalg and random
globals().update({_name: getattr(_more, _name) for _name in _more.__all__})
__all__ += _more.__all__
