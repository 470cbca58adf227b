"""symjit.ndarray (`mx.nd`): MXNet 1.x NDArray API over the op registry.

Every registered operator is callable as `nd.OPNAME(*inputs, **attrs)` with MXNet's
argument names: positional arguments fill the op's inputs first, then its attributes
in schema order; `out=` writes into existing arrays.
"""
from __future__ import annotations

import numbers
from typing import Callable

import numpy as _np

from ..base import MXNetError, MXNetValueError
from ..ops.registry import get_op, list_ops
from .ndarray import (NDArray, arange, array, concatenate, eager_emitter, empty, eye,  # noqa: F401
                      from_dlpack, from_numpy, full, invoke, linspace, ones, to_dlpack_for_read,
                      to_dlpack_for_write, waitall, zeros)
from .serialization import load, load_frombuffer, save  # noqa: F401
from . import random  # noqa: F401  (mx.nd.random)

_FRONTEND_KWARGS = ("name", "attr", "ctx")


def _op_function(op_name: str) -> Callable:
    """Build `nd.OPNAME`: map MXNet-style arguments onto inputs and attributes, then invoke."""
    op = get_op(op_name)
    param_order = list(op.params)

    def fn(*args, out=None, **kwargs):
        ctx = kwargs.pop("ctx", None)
        for k in _FRONTEND_KWARGS:
            kwargs.pop(k, None)
        positional_inputs = []
        rest = list(args)
        taken = 0  # a None in an input position means "input not given" (MXNet: bias=None)
        while rest and (isinstance(rest[0], NDArray) or (rest[0] is None and taken < len(op.inputs))):
            x, taken = rest.pop(0), taken + 1
            if x is not None:
                positional_inputs.append(x)
        named_inputs = {k: kwargs.pop(k) for k in list(kwargs)
                        if isinstance(kwargs[k], NDArray) and k not in op.params}
        for key in param_order:
            if not rest:
                break
            if key in ("num_args",) or key in kwargs:
                continue
            kwargs[key] = rest.pop(0)
        if rest:
            raise MXNetError(f"{op.name}: too many positional arguments: {rest!r}")
        if "num_args" in op.params and "num_args" not in kwargs:
            kwargs["num_args"] = len(positional_inputs) + len(named_inputs)
        attrs = {k: v for k, v in kwargs.items() if v is not None or k in op.params}
        parsed = op.parse(attrs)
        names = op.input_names(parsed)
        inputs = list(positional_inputs)
        for nm in names[len(inputs):]:
            if nm in named_inputs:
                inputs.append(named_inputs.pop(nm))
            else:
                raise MXNetError(f"{op.name}: missing input {nm!r} (inputs are {names})")
        if named_inputs:
            raise MXNetError(f"{op.name}: unexpected inputs {sorted(named_inputs)} (inputs are {names})")
        return invoke(op.name, inputs, attrs, out=out, ctx=ctx)

    fn.__name__ = op_name
    fn.__doc__ = op.doc or type(op).__doc__
    return fn


def _ufunc(array_op: str, scalar_op: str, rscalar_op: str, pyfn: Callable) -> Callable:
    """MXNet's scalar/array dispatch for nd.add, nd.power, nd.maximum, ..."""
    def fn(lhs, rhs, out=None):
        if isinstance(lhs, numbers.Number) and isinstance(rhs, numbers.Number):
            return pyfn(lhs, rhs)
        if isinstance(lhs, NDArray) and isinstance(rhs, NDArray):
            return invoke(array_op, [lhs, rhs], {}, out=out)
        if isinstance(lhs, NDArray):
            return invoke(scalar_op, [lhs], {"scalar": float(rhs)}, out=out)
        if isinstance(rhs, NDArray):
            return invoke(rscalar_op, [rhs], {"scalar": float(lhs)}, out=out)
        raise TypeError(f"{array_op}: unsupported operand types {type(lhs).__name__}, {type(rhs).__name__}")
    fn.__name__ = array_op.replace("broadcast_", "")
    return fn


_UFUNCS = {
    "add": ("broadcast_add", "_plus_scalar", "_plus_scalar", lambda a, b: a + b),
    "subtract": ("broadcast_sub", "_minus_scalar", "_rminus_scalar", lambda a, b: a - b),
    "multiply": ("broadcast_mul", "_mul_scalar", "_mul_scalar", lambda a, b: a * b),
    "divide": ("broadcast_div", "_div_scalar", "_rdiv_scalar", lambda a, b: a / b),
    "true_divide": ("broadcast_div", "_div_scalar", "_rdiv_scalar", lambda a, b: a / b),
    "modulo": ("broadcast_mod", "_mod_scalar", "_rmod_scalar", lambda a, b: a % b),
    "power": ("broadcast_power", "_power_scalar", "_rpower_scalar", lambda a, b: a ** b),
    "maximum": ("broadcast_maximum", "_maximum_scalar", "_maximum_scalar", max),
    "minimum": ("broadcast_minimum", "_minimum_scalar", "_minimum_scalar", min),
    "hypot": ("broadcast_hypot", "_hypot_scalar", "_hypot_scalar", lambda a, b: float(_np.hypot(a, b))),
    "equal": ("broadcast_equal", "_equal_scalar", "_equal_scalar", lambda a, b: float(a == b)),
    "not_equal": ("broadcast_not_equal", "_not_equal_scalar", "_not_equal_scalar",
                  lambda a, b: float(a != b)),
    "greater": ("broadcast_greater", "_greater_scalar", "_lesser_scalar", lambda a, b: float(a > b)),
    "greater_equal": ("broadcast_greater_equal", "_greater_equal_scalar", "_lesser_equal_scalar",
                      lambda a, b: float(a >= b)),
    "lesser": ("broadcast_lesser", "_lesser_scalar", "_greater_scalar", lambda a, b: float(a < b)),
    "lesser_equal": ("broadcast_lesser_equal", "_lesser_equal_scalar", "_greater_equal_scalar",
                     lambda a, b: float(a <= b)),
    "logical_and": ("broadcast_logical_and", "_logical_and_scalar", "_logical_and_scalar",
                    lambda a, b: float(bool(a) and bool(b))),
    "logical_or": ("broadcast_logical_or", "_logical_or_scalar", "_logical_or_scalar",
                   lambda a, b: float(bool(a) or bool(b))),
    "logical_xor": ("broadcast_logical_xor", "_logical_xor_scalar", "_logical_xor_scalar",
                    lambda a, b: float(bool(a) != bool(b))),
}


def histogram(a, bins=10, range=None, **kwargs):  # noqa: A002 - MXNet's argument name
    """(counts, bin edges) of `a`: `bins` equal bins over `range`, or the edges `bins` (an NDArray)."""
    if isinstance(bins, NDArray):
        return invoke("_histogram", [a, bins], {}, **kwargs)
    return invoke("_histogram", [a], {"bin_cnt": bins, "range": range}, **kwargs)


def _populate() -> None:
    g = globals()
    for name in list_ops():
        if name not in g:
            g[name] = _op_function(name)
    for name, spec in _UFUNCS.items():
        g[name] = _ufunc(*spec)


_populate()

from . import contrib, image, linalg, sparse  # noqa: E402,F401  (mx.nd.contrib / image / linalg / sparse)
from .sparse import cast_storage  # noqa: E402,F401  (the storage conversion, for dense inputs too)


def onehot_encode(indices, out):
    """One-hot rows into `out` (n, m): out[i, indices[i]] = 1, every other entry 0."""
    return invoke("_onehot_encode", [indices, out], {}, out=out)


def moveaxis(tensor, source, destination):
    """`tensor` with axes `source` (an int or a sequence) moved to positions `destination`
    (same length); the other axes keep their order (numpy.moveaxis). Bad axes: ValueError."""
    nd_ = tensor.ndim

    def axes(value, what):
        seq = [value] if isinstance(value, (int, _np.integer)) else list(value)
        out = []
        for a in seq:
            a = int(a)
            if not -nd_ <= a < nd_:
                raise MXNetValueError(f"moveaxis: {what} axis {a} is out of range for a {nd_}-d array")
            out.append(a % nd_)
        if len(set(out)) != len(out):
            raise MXNetValueError(f"moveaxis: repeated axis in {what} {list(seq)}")
        return out
    src, dst = axes(source, "source"), axes(destination, "destination")
    if len(src) != len(dst):
        raise MXNetValueError(f"moveaxis: source {source} and destination {destination} must have the "
                              "same number of elements")
    order = [a for a in range(nd_) if a not in src]
    for d, s_ in sorted(zip(dst, src)):
        order.insert(d, s_)
    return invoke("transpose", [tensor], {"axes": tuple(order)})


def split_v2(ary, indices_or_sections, axis=0, squeeze_axis=False):
    """Split `ary` along `axis` into `indices_or_sections` equal parts (an int) or at the given
    indices (a tuple: pieces [0, i0), [i0, i1), ..., [ik, end)), as numpy.split."""
    return invoke("_split_v2", [ary], split_v2_attrs(ary.shape, indices_or_sections, axis, squeeze_axis))


def split_v2_attrs(shape, indices_or_sections, axis, squeeze_axis) -> dict:
    """`_split_v2`'s attributes for numpy.split-style arguments (MXNet's wrapper)."""
    if isinstance(indices_or_sections, (int, _np.integer)) and not isinstance(indices_or_sections, bool):
        sections = int(indices_or_sections)
        if shape is not None and shape[axis] % sections:
            raise MXNetValueError("array split does not result in an equal division")
        return {"indices": (), "axis": axis, "squeeze_axis": squeeze_axis, "sections": sections}
    if isinstance(indices_or_sections, (tuple, list)):
        return {"indices": (0,) + tuple(int(i) for i in indices_or_sections), "axis": axis,
                "squeeze_axis": squeeze_axis}
    raise MXNetValueError("indices_or_sections must either int or tuple of ints")


class _Internal:
    """MXNet's mx.nd._internal: the registered ops whose names start with '_', by those names."""
    __name__ = "symjit.ndarray._internal"

    def __getattr__(self, item: str):
        if not item.startswith("_") or item.startswith("__") or item not in set(list_ops()):
            raise AttributeError(f"module 'symjit.ndarray._internal' has no attribute {item!r}")
        return _op_function(item)


_internal = _Internal()


_NP_NAMESPACES = {"np": "symjit.numpy", "npx": "symjit.numpy_extension",
                  "numpy": "symjit.numpy", "numpy_extension": "symjit.numpy_extension"}


def __getattr__(name: str):
    """`mx.nd.np` / `mx.nd.npx` (the np functions; Gluon's F.np / F.npx on arrays) and
    `mx.nd.CachedOp` (a Symbol run as one imperative op) lives with Gluon's cached ops; it is
    imported on first use so that importing ndarray does not load Gluon."""
    if name in _NP_NAMESPACES:   # mx.nd.np / mx.nd.npx: what F.np / F.npx are in np mode
        import importlib
        value = globals()[name] = importlib.import_module(_NP_NAMESPACES[name])
        return value
    if name == "CachedOp":
        from ..gluon.cached_op import NDArrayCachedOp
        globals()[name] = NDArrayCachedOp
        return NDArrayCachedOp
    raise AttributeError(f"module 'symjit.ndarray' has no attribute {name!r}")
