"""symjit.ndarray.image (`mx.nd.image`): the `_image_*` operators as `mx.nd.image.NAME`.

`to_tensor(img)` turns (H, W, C) / (N, H, W, C) images in [0, 255] into float32
(C, H, W) / (N, C, H, W) tensors in [0, 1]; `normalize(t, mean, std)` standardizes each
channel. Every other registered `_image_<name>` op is reachable as `mx.nd.image.<name>` too.
"""
from __future__ import annotations

from typing import Callable

from ..ops.registry import find_op, list_ops

__all__ = ["to_tensor", "normalize"]

_PREFIX = "_image_"


def _function(name: str) -> Callable:
    from . import _op_function
    fn = _op_function(_PREFIX + name)
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
