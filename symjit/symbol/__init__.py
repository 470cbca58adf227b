"""symjit.symbol (`mx.sym`): MXNet 1.x symbolic API over the op registry.

Every registered operator (aliases included) is `mx.sym.OPNAME(*inputs, name=, attr=, **attrs)`
with MXNet's argument names: leading positional Symbols fill the op's inputs in order, Symbol
keywords fill inputs by name, other positionals fill attributes in schema order, and inputs
left out become variables named `<name>_<input>` (`fc1_weight`, `softmax_label`, ...).
`power`, `maximum`, `minimum` and `hypot` dispatch on scalars and Symbols as MXNet does
(`mx.sym.power(3, 5) == 243`).
"""
from __future__ import annotations

import numbers
from typing import Callable

from ..base import MXNetError
from ..ops.registry import get_op, list_ops
from .json_io import load_json, to_json  # noqa: F401
from .naming import AttrScope, NameManager, Prefix  # noqa: F401
from .symbol import Group, Symbol, Variable, create_op_symbol, var  # noqa: F401

__all__ = ["Symbol", "Variable", "var", "Group", "load", "load_json", "fromjson", "op_function",
           "power", "pow", "maximum", "minimum", "hypot", "zeros", "ones", "full", "arange",
           "eye", "linspace"]


def op_function(func_name: str, hint: str | None = None) -> Callable:
    """`mx.sym.<func_name>`: map MXNet-style arguments onto inputs and attributes. Automatic
    node names use `hint` (default: the lower-cased op name; sub-namespaces such as
    `mx.sym.image.to_tensor` pass their function name, as MXNet does)."""
    op = get_op(func_name)
    param_order = list(op.params)

    def fn(*args, **kwargs):
        name = kwargs.pop("name", None)
        attr = kwargs.pop("attr", None)
        kwargs.pop("out", None)
        rest = list(args)
        inputs = []
        taken = 0  # a None in an input position means "input not given" (MXNet: bias=None)
        while rest and (isinstance(rest[0], Symbol) or (rest[0] is None and taken < len(op.inputs))):
            x, taken = rest.pop(0), taken + 1
            if x is not None:
                inputs.append(x)
        named = {k: kwargs.pop(k) for k in list(kwargs)
                 if isinstance(kwargs[k], Symbol) and k not in op.params}
        for key in param_order:
            if not rest:
                break
            if key == "num_args" or key in kwargs:
                continue
            kwargs[key] = rest.pop(0)
        if rest:
            raise MXNetError(f"{op.name}: too many positional arguments: {rest!r}")
        if any(isinstance(v, Symbol) for v in kwargs.values()):
            bad = [k for k, v in kwargs.items() if isinstance(v, Symbol)]
            raise MXNetError(f"{op.name}: {bad} are attributes, not inputs (inputs: {op.inputs})")
        if "num_args" in op.params and kwargs.get("num_args") is None:
            kwargs["num_args"] = len(inputs) + len(named)
        attrs = {k: v for k, v in kwargs.items() if v is not None}
        # None is a value for attributes that accept it (sort(axis=None) flattens), as in nd.*
        attrs.update({k: "None" for k, v in kwargs.items() if v is None and _accepts_none(op, k)})
        return create_op_symbol(func_name, inputs, attrs, named, name=name, attr=attr, hint=hint)

    fn.__name__ = func_name
    fn.__doc__ = op.doc or type(op).__doc__
    return fn


def _accepts_none(op, key: str) -> bool:
    """True when attribute `key` of `op` takes None as a value (an Optional attribute)."""
    param = op.params.get(key)
    if param is None:
        return False
    try:
        return param.kind(None) is None
    except (ValueError, TypeError):
        return False


def _ufunc(sym_fn: str, scalar_fn: str, rscalar_fn: str, pyfn: Callable, doc: str) -> Callable:
    def fn(lhs, rhs):
        if isinstance(lhs, numbers.Number) and isinstance(rhs, numbers.Number):
            return pyfn(lhs, rhs)
        if isinstance(lhs, Symbol) and isinstance(rhs, Symbol):
            return create_op_symbol(sym_fn, [lhs, rhs], {})
        if isinstance(lhs, Symbol) and isinstance(rhs, numbers.Number):
            return create_op_symbol(scalar_fn, [lhs], {"scalar": rhs})
        if isinstance(rhs, Symbol) and isinstance(lhs, numbers.Number):
            return create_op_symbol(rscalar_fn, [rhs], {"scalar": lhs})
        raise TypeError(f"types ({type(lhs).__name__}, {type(rhs).__name__}) not supported")
    fn.__doc__ = doc
    return fn


power = _ufunc("_Power", "_PowerScalar", "_RPowerScalar", lambda a, b: a ** b,
               "base ** exp for Symbols and/or scalars (two scalars give a number).")
pow = power  # noqa: A001 - MXNet's name
maximum = _ufunc("_Maximum", "_MaximumScalar", "_MaximumScalar", lambda a, b: a if a > b else b,
                 "Elementwise maximum of Symbols and/or scalars.")
minimum = _ufunc("_Minimum", "_MinimumScalar", "_MinimumScalar", lambda a, b: a if a < b else b,
                 "Elementwise minimum of Symbols and/or scalars.")


def _python_hypot(a, b):
    import math
    return math.hypot(a, b)


hypot = _ufunc("_Hypot", "_HypotScalar", "_HypotScalar", _python_hypot, "sqrt(a**2 + b**2), elementwise.")


def zeros(shape, dtype=None, **kwargs) -> Symbol:
    return create_op_symbol("_zeros", [], dict(shape=shape, dtype=dtype or "float32", **kwargs))


def ones(shape, dtype=None, **kwargs) -> Symbol:
    return create_op_symbol("_ones", [], dict(shape=shape, dtype=dtype or "float32", **kwargs))


def full(shape, val, dtype=None, **kwargs) -> Symbol:
    return create_op_symbol("_full", [], dict(shape=shape, value=val, dtype=dtype or "float32", **kwargs))


def arange(start, stop=None, step=1.0, repeat=1, name=None, dtype=None, **kwargs) -> Symbol:
    return create_op_symbol("_arange", [], dict(start=start, stop=stop, step=step, repeat=repeat,
                                                dtype=dtype or "float32", **kwargs), name=name)


def eye(N, M=0, k=0, dtype=None, **kwargs) -> Symbol:
    return create_op_symbol("_eye", [], dict(N=N, M=M, k=k, dtype=dtype or "float32", **kwargs))


def linspace(start, stop, num, endpoint=True, name=None, dtype=None, **kwargs) -> Symbol:
    return create_op_symbol("_linspace", [], dict(start=start, stop=stop, num=num, endpoint=endpoint,
                                                  dtype=dtype or "float32", **kwargs), name=name)


def histogram(a, bins=10, range=None, **kwargs) -> Symbol:  # noqa: A002 - MXNet's argument name
    """(counts, bin edges) of `a`: `bins` equal bins over `range`, or the edges `bins` (a Symbol)."""
    if isinstance(bins, Symbol):
        return create_op_symbol("_histogram", [a, bins], {}, **kwargs)
    return create_op_symbol("_histogram", [a], {"bin_cnt": bins, "range": range}, **kwargs)


def split_v2(ary, indices_or_sections, axis=0, squeeze_axis=False, name=None) -> Symbol:
    """Split along `axis` into equal parts (an int) or at the given indices (a tuple)."""
    from ..ndarray import split_v2_attrs
    return create_op_symbol("_split_v2", [ary], split_v2_attrs(None, indices_or_sections, axis, squeeze_axis),
                            name=name, hint="split_v2")


def load_json_file(fname: str) -> Symbol:
    """The Symbol saved in the JSON file `fname`; an unreadable file, one that is not UTF-8
    text or one that is not a valid graph raises MXNetError naming the file."""
    try:
        with open(fname, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise MXNetError(f"load: cannot read {fname!r}: {e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MXNetError(f"load: {fname!r} is not a symbol JSON file: invalid UTF-8 byte "
                         f"0x{raw[e.start]:02x} at offset {e.start}") from None
    try:
        return load_json(text)
    except MXNetError as e:
        raise MXNetError(f"load: {fname!r}: {e}") from None


load = load_json_file
fromjson = load_json


class _Namespace:
    """`mx.sym.contrib`, `mx.sym.linalg`, ...: registered ops named `<prefix>NAME`."""

    def __init__(self, name: str, prefixes: tuple, first_match: bool = False):
        self.__name__ = f"symjit.symbol.{name}"
        self._prefixes = prefixes
        self._first_match = first_match   # else two matches dispatch on Symbol arguments

    def __getattr__(self, item: str):
        if item.startswith("__"):
            raise AttributeError(item)
        found = [f"{p}{item}" for p in self._prefixes if f"{p}{item}" in _REGISTERED]
        if not found:
            raise AttributeError(f"module {self.__name__!r} has no attribute {item!r}")
        if len(found) == 1 or self._first_match:
            return op_function(found[0])
        scalar_form, symbol_form = op_function(found[0]), op_function(found[1])

        def dispatch(*args, **kwargs):
            # MXNet: distribution parameters given as Symbols select the `_sample_*` op
            if any(isinstance(a, Symbol) for a in list(args) + list(kwargs.values())):
                return symbol_form(*args, **kwargs)
            return scalar_form(*args, **kwargs)
        dispatch.__name__ = item
        return dispatch

    def __dir__(self):
        return sorted({n[len(p):] for n in _REGISTERED for p in self._prefixes if n.startswith(p)})


_REGISTERED: set[str] = set()


def _populate() -> None:
    g = globals()
    _REGISTERED.update(list_ops())
    for name in sorted(_REGISTERED):
        if name not in g:
            g[name] = op_function(name)


_populate()
linalg = _Namespace("linalg", ("_linalg_",))
#: MXNet's mx.sym._internal: the ops whose registered names start with "_", by those names
_internal = _Namespace("_internal", ("",), first_match=True)
#: MXNet's mx.sym.sparse: the storage-aware ops (every op accepts sparse-declared inputs here)
sparse = _Namespace("sparse", ("_sparse_", ""), first_match=True)
from . import contrib, image, random  # noqa: E402,F401  (mx.sym.contrib / image / random)
from . import numpy as np  # noqa: E402  (mx.sym.np: symbols with NumPy semantics)
from . import numpy_extension as npx  # noqa: E402  (mx.sym.npx)
numpy = np
