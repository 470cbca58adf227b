"""`mx.npx.image`: the image operators (`_image_*`: to_tensor, normalize, crop, resize, flips,
random colour and crop augmentations) on np arrays, returning np arrays."""
from __future__ import annotations

from typing import Callable

from ..ndarray import image as _nd_image
from ..ops.registry import find_op, list_ops
from ._op import as_np, reject_legacy

_PREFIX = "_image_"


def _function(name: str) -> Callable:
    run = getattr(_nd_image, name)

    def fn(*args, **kwargs):
        reject_legacy(name, f"_npx_{_PREFIX}{name}", (*args, *kwargs.values()))
        return as_np(run(*args, **kwargs))
    fn.__name__ = name
    fn.__doc__ = run.__doc__
    return fn


def __getattr__(name: str) -> Callable:
    if not name.startswith("__") and find_op(_PREFIX + name) is not None:
        fn = globals()[name] = _function(name)
        return fn
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted({*globals(), *(n[len(_PREFIX):] for n in list_ops() if n.startswith(_PREFIX))})
