"""`mx.sym.npx` (MXNet's `mxnet.symbol.numpy_extension`): the npx operators on symbols, as F.npx
in a `hybrid_forward` traced under `npx.set_np()`. Each builds the registered operator that
`mx.npx` runs on arrays (`numpy_extension.names.NPX_OPS`) and returns a `_Symbol`."""
from __future__ import annotations

from typing import Callable

from ..numpy_extension.names import NPX_OPS
from . import op_function
from .numpy import _Symbol, _op, as_np

__all__ = sorted(NPX_OPS) + ["reshape", "nonzero", "constraint_check"]


def _npx_function(py_name: str, op_name: str) -> Callable:
    build = op_function(op_name, hint=py_name)

    def fn(*args, **kwargs) -> _Symbol:
        return as_np(build(*args, **kwargs))
    fn.__name__ = py_name
    fn.__qualname__ = py_name
    fn.__doc__ = build.__doc__
    return fn


def reshape(a, newshape, reverse=False, order="C", name=None) -> _Symbol:
    """npx.reshape on a symbol (npx's special codes -1 .. -6, see mx.npx.reshape)."""
    if isinstance(newshape, int):
        newshape = (newshape,)
    return _op("_npx_reshape", [a], {"newshape": tuple(newshape), "reverse": reverse, "order": order},
               hint="reshape", name=name)


def nonzero(a, name=None) -> _Symbol:
    """The indices of the non-zero entries of `a`, one row each (int64)."""
    return _op("_npx_nonzero", [a], hint="nonzero", name=name)


def constraint_check(x, msg="Constraint violated.", name=None) -> _Symbol:
    """True when every entry of the bool symbol `x` is true, else ValueError with `msg` at run time."""
    return _op("_npx_constraint_check", [x], {"msg": msg}, hint="constraint_check", name=name)


for _py, _op_name in NPX_OPS.items():
    globals()[_py] = _npx_function(_py, _op_name)
