"""MXNet 1.x's `mxnet.util`: the NumPy-semantics switches and environment helpers.

Two per-thread switches, off by default, as in MXNet:

- np_shape (`set_np_shape`, `np_shape()` scope, `use_np_shape` decorator): shapes follow NumPy's
  rules. With it on, a 0 in a shape is a real zero-size dimension, -1 marks an unknown one, and
  `()` is a scalar's shape. With it off (MXNet's legacy semantics), 0 in a shape given for
  inference means "unknown", and a Symbol saved to JSON does not carry the `is_np_shape` attribute.
- np_array (`set_np_array`, `np_array()` scope, `use_np_array`): the NumPy-compatible array
  interface (`mxnet.numpy`) is requested. symjit records the switch; its `symjit.numpy` module
  provides the subset it documents.

`use_np` turns both on for a function or for every method of a class.
"""
from __future__ import annotations

import functools
import inspect
import os
import threading

from .base import MXNetError

__all__ = ["set_np_shape", "is_np_shape", "np_shape", "use_np_shape", "set_np_array", "is_np_array",
           "np_array", "use_np_array", "use_np", "set_np", "reset_np", "getenv", "setenv", "makedirs",
           "get_gpu_count", "get_gpu_memory", "set_module"]

_state = threading.local()


def _get(flag: str) -> bool:
    return bool(getattr(_state, flag, False))


def _set(flag: str, active) -> bool:
    previous = _get(flag)
    setattr(_state, flag, bool(active))
    return previous


def set_np_shape(active) -> bool:
    """Turn NumPy shape semantics on or off for this thread; returns the previous state. Turning
    them off while the NumPy array switch is on is a ValueError (as MXNet: `reset_np()` turns
    both off)."""
    if not active and is_np_array():
        raise ValueError("Deactivating NumPy shape semantics while NumPy array semantics is still active is "
                         "not allowed. Please consider calling `npx.reset_np()` to deactivate both of them.")
    return _set("np_shape", active)


def is_np_shape() -> bool:
    """Whether NumPy shape semantics are on in this thread."""
    return _get("np_shape")


def set_np_array(active) -> bool:
    """Turn the NumPy array interface switch on or off for this thread; returns the previous state."""
    return _set("np_array", active)


def is_np_array() -> bool:
    """Whether the NumPy array interface switch is on in this thread."""
    return _get("np_array")


class _Scope:
    """`with` scope (and decorator) that sets one switch and restores it on exit."""

    def __init__(self, flag: str, active=True):
        self._flag = flag
        self._active = bool(active)
        self._previous = []

    def __enter__(self):
        self._previous.append(_set(self._flag, self._active))
        return self

    def __exit__(self, *exc):
        _set(self._flag, self._previous.pop())

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with _Scope(self._flag, self._active):
                return func(*args, **kwargs)
        return wrapper


def np_shape(active=True) -> _Scope:
    """Scope with NumPy shape semantics on (or off with active=False): `with mx.np_shape(): ...`."""
    return _Scope("np_shape", active)


def np_array(active=True) -> _Scope:
    """Scope with the NumPy array interface switch on (or off)."""
    return _Scope("np_array", active)


def _decorate(flag: str, target):
    """Wrap a function, or every public method of a class (and its __init__), in a scope with
    `flag` on."""
    if inspect.isclass(target):
        for name, member in list(vars(target).items()):
            if callable(member) and (not name.startswith("_") or name in ("__init__", "__call__")):
                setattr(target, name, _decorate(flag, member))
        return target
    if not callable(target):
        raise MXNetError(f"use_np: expected a function or a class, got {type(target).__name__}")
    return _Scope(flag, True)(target)


def use_np_shape(func):
    """Decorator: run `func` (or every method of a class) with NumPy shape semantics on."""
    return _decorate("np_shape", func)


def use_np_array(func):
    """Decorator: run `func` (or every method of a class) with the NumPy array switch on."""
    return _decorate("np_array", func)


def use_np(func):
    """Decorator: both NumPy shape semantics and the NumPy array switch on."""
    return use_np_shape(use_np_array(func))


def set_np(shape=True, array=True):
    """Set both switches (MXNet refuses the array interface without shape semantics)."""
    if array and not shape:
        raise ValueError("set_np: the NumPy array interface needs NumPy shape semantics (shape=True)")
    set_np_array(array)
    set_np_shape(shape)


def reset_np():
    """Both switches off (MXNet's legacy semantics)."""
    set_np(shape=False, array=False)


def getenv(name):
    """The value of environment variable `name` as the runtime sees it (None when unset)."""
    return os.environ.get(name)


def setenv(name, value):
    """Set environment variable `name` for this process and its runtime (None unsets it)."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = str(value)


def makedirs(d):
    """Create directory `d` and its parents if missing."""
    os.makedirs(os.path.expanduser(d), exist_ok=True)


def get_gpu_count() -> int:
    """Number of visible GPUs."""
    from .context import num_gpus
    return num_gpus()


def get_gpu_memory(gpu_dev_id: int) -> tuple:
    """(free, total) bytes of memory on GPU `gpu_dev_id` (MXNetError when it is absent)."""
    from .context import gpu_memory_info
    return gpu_memory_info(gpu_dev_id)


def set_module(module):
    """Decorator setting a function's __module__ (MXNet uses it for documentation)."""
    def decorator(func):
        if module is not None:
            func.__module__ = module
        return func
    return decorator
