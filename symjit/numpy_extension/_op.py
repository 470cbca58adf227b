"""The operator functions of `mx.npx` on arrays: each runs a registered operator eagerly
(recorded by autograd like any NDArray op) and returns `mx.np.ndarray` results."""
from __future__ import annotations

from typing import Callable

from ..ndarray import NDArray, invoke
from ..ndarray import _op_function
from ..numpy.multiarray import ndarray as np_ndarray
from .names import NPX_OPS

__all__ = sorted(NPX_OPS) + ["reshape", "nonzero", "constraint_check", "as_np"]


def as_np(value):
    """`value` as MXNet numpy arrays: an NDArray becomes an `mx.np.ndarray` sharing its
    buffer (and its autograd history); lists and tuples are converted item by item; anything
    else is returned unchanged. The one place where npx results change class."""
    if isinstance(value, (list, tuple)):
        return type(value)(as_np(v) for v in value)
    if isinstance(value, NDArray) and not isinstance(value, np_ndarray):
        return value.as_np_ndarray()
    return value


def reject_legacy(py_name: str, op_name: str, values) -> None:
    """TypeError (MXNet's message) when any of `values` (lists searched too) is a legacy
    NDArray: npx's operators take MXNet numpy arrays only, as in MXNet 1.9.1."""
    for v in values:
        if isinstance(v, (list, tuple)):
            reject_legacy(py_name, op_name, v)
        elif isinstance(v, NDArray) and not isinstance(v, np_ndarray):
            raise TypeError(
                f"Operator `{op_name}` registered in backend is known as `{py_name}` in Python. This is a numpy "
                "operator which can only accept MXNet numpy ndarrays, while received a legacy ndarray. Please "
                "ensure that you have activated numpy semantics by calling `npx.set_np()` in your code. If you "
                "still see this error with numpy semantics activated, please call `as_np_ndarray()` upon the "
                "legacy ndarray to convert it to an MXNet numpy ndarray, and then feed the converted array to "
                "this operator.")


def _npx_function(py_name: str, op_name: str) -> Callable:
    """`npx.<py_name>`: the operator `op_name` with its MXNet argument names, np results."""
    run = _op_function(op_name)
    npx_name = f"_npx_{py_name}"

    def fn(*args, **kwargs):
        reject_legacy(py_name, npx_name, (*args, *kwargs.values()))
        return as_np(run(*args, **kwargs))
    fn.__name__ = py_name
    fn.__qualname__ = py_name
    fn.__doc__ = run.__doc__
    return fn


def _check_array(fn: str, what: str, x) -> None:
    if not isinstance(x, NDArray):
        raise TypeError(f"npx.{fn}: {what} must be an mx.np.ndarray, got {type(x).__name__}")


def reshape(a, newshape, reverse=False, order="C", out=None):
    """A copy of `a` in the shape `newshape`, which may use npx's special codes: -1 infer,
    -2 copy this dim, -3 skip a dim of size 1, -4 copy the remaining dims, -5 merge two dims,
    -6 split a dim into the next two codes; `reverse` matches codes right to left."""
    _check_array("reshape", "a", a)
    reject_legacy("reshape", "_npx_reshape", (a,))
    if isinstance(newshape, int):
        newshape = (newshape,)
    return as_np(invoke("_npx_reshape", [a], {"newshape": tuple(newshape), "reverse": reverse,
                                              "order": order}, out=out))


def nonzero(a):
    """The indices of the non-zero entries of `a`: an int64 array (N, a.ndim), one row each."""
    _check_array("nonzero", "a", a)
    reject_legacy("nonzero", "_npx_nonzero", (a,))
    return as_np(invoke("_npx_nonzero", [a], {}))


def constraint_check(x, msg="Constraint violated."):
    """True (a 0-d bool array) when every entry of the bool array `x` is true; otherwise
    ValueError carrying `msg`."""
    _check_array("constraint_check", "x", x)
    reject_legacy("constraint_check", "_npx_constraint_check", (x,))
    return as_np(invoke("_npx_constraint_check", [x], {"msg": msg}))


def _populate() -> None:
    g = globals()
    for py_name, op_name in NPX_OPS.items():
        g[py_name] = _npx_function(py_name, op_name)


_populate()
