"""symjit.symbol.image (`mx.sym.image`): the `_image_*` operators as `mx.sym.image.NAME`.

Nodes are named after the function (`to_tensor0`, `normalize1`), as MXNet's generated
sub-namespace functions do. `to_tensor` and `normalize` are listed; every other registered
`_image_<name>` op is reachable as `mx.sym.image.<name>` too.
"""
from __future__ import annotations

from typing import Callable

from ..ops.registry import find_op, list_ops
from . import op_function

__all__ = ["to_tensor", "normalize"]

_PREFIX = "_image_"


def _function(name: str) -> Callable:
    fn = op_function(_PREFIX + name, hint=name.lower())
    fn.__name__ = name
    return fn


to_tensor = _function("to_tensor")
normalize = _function("normalize")


def __getattr__(name: str) -> Callable:
    if not name.startswith("__") and find_op(_PREFIX + name) is not None:
        return _function(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted({*globals(), *(n[len(_PREFIX):] for n in list_ops() if n.startswith(_PREFIX))})
