"""MXNet's naming and attribute scopes: `NameManager`, `Prefix` and `AttrScope`.

Symbols created without `name=` are named `<hint><n>` by the current NameManager, where the
hint is the lower-cased function name (`_plus0`, `fullyconnected1`, `sum_axis0`) and `n` counts
per hint. `AttrScope(**attrs)` attaches string attributes to every symbol created inside it.
Both are thread-local and nest with `with`.
"""
from __future__ import annotations

import threading

from ..ops.registry import HIDDEN_ATTRS

__all__ = ["NameManager", "Prefix", "AttrScope", "HIDDEN_KEYS", "hidden_key"]

#: attribute names MXNet stores as `__key__` (c_api kHiddenKeys)
HIDDEN_KEYS = HIDDEN_ATTRS


def hidden_key(key: str) -> str:
    """`lr_mult` -> `__lr_mult__` for MXNet's hidden keys; other keys unchanged."""
    return f"__{key}__" if key in HIDDEN_KEYS else key


class _Current(threading.local):
    value = None


class _ScopeMeta(type):
    @property
    def current(cls):
        if cls._current.value is None:
            cls._current.value = cls._default()
        return cls._current.value


class NameManager(metaclass=_ScopeMeta):
    """Assigns automatic names `<hint><counter>`; `with NameManager():` starts fresh counters."""
    _current = _Current()

    @classmethod
    def _default(cls):
        return NameManager()

    def __init__(self):
        self._counter: dict[str, int] = {}
        self._old_manager = None

    def get(self, name: str | None, hint: str) -> str:
        """`name` if given, else the next automatic name for `hint`."""
        if name:
            return name
        n = self._counter.get(hint, 0)
        self._counter[hint] = n + 1
        return f"{hint}{n}"

    def __enter__(self):
        self._old_manager = NameManager.current
        NameManager._current.value = self
        return self

    def __exit__(self, *exc):
        NameManager._current.value = self._old_manager


class Prefix(NameManager):
    """A NameManager that prefixes every name: `with Prefix('mynet_'):`."""

    def __init__(self, prefix: str):
        super().__init__()
        self._prefix = prefix

    def get(self, name, hint):
        return self._prefix + super().get(name, hint)


class AttrScope(metaclass=_ScopeMeta):
    """Attributes (strings) attached to symbols created inside the scope."""
    _current = _Current()

    @classmethod
    def _default(cls):
        return AttrScope()

    def __init__(self, **kwargs):
        for key, value in kwargs.items():
            if not isinstance(value, str):
                raise ValueError("Attributes need to be string")
        self._attr = dict(kwargs)
        self._old_scope = None

    def get(self, attr: dict | None) -> dict:
        """The scope's attributes updated with `attr` (a new dict)."""
        ret = dict(self._attr)
        if attr:
            ret.update(attr)
        return ret

    def __enter__(self):
        self._old_scope = AttrScope.current
        merged = dict(self._old_scope._attr)
        merged.update(self._attr)
        self._attr = merged
        AttrScope._current.value = self
        return self

    def __exit__(self, *exc):
        AttrScope._current.value = self._old_scope
