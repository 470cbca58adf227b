"""Write guard: buffers whose values compiled code has taken as constants.

A hybridized block running inference binds its parameters as compile-time constants (folded,
packed, transformed copies live inside the compiled plan). To never run on stale copies, the
buffers it read are *frozen*: marked read-only in numpy (`freeze`). Every write path of symjit
calls `writable(array)` before writing into an NDArray's buffer; on a frozen buffer that makes it
(and the view written through) writeable again and advances `generation()`, so plans built on
the old values see the change on their next call. A write that bypasses `writable` (numpy code
holding the raw buffer) raises numpy's "assignment destination is read-only" instead of going
unnoticed.

Invariant: while a buffer frozen by `freeze` has not been thawed, its contents are those it had
when it was frozen (numpy refuses writes through it and through every view made of it since),
so `is_frozen(root)` staying true for every buffer a plan read means the plan is current.
Only buffers frozen here are ever thawed: other read-only arrays (broadcast views, embedded
library constants) stay read-only.
"""
from __future__ import annotations

import itertools
import weakref

import numpy as np

__all__ = ["freeze", "writable", "is_frozen", "generation", "root_of"]

#: id(root buffer) -> weak reference to it, for every buffer frozen and not yet thawed
_FROZEN: dict[int, weakref.ref] = {}
#: the same for buffers frozen once and thawed since (views made while they were frozen are
#: still read-only and are made writeable when written through)
_THAWED: dict[int, weakref.ref] = {}
_COUNTER = itertools.count(1)
_generation = 0


def generation() -> int:
    """A number that changes whenever any frozen buffer is thawed (cheap to compare)."""
    return _generation


def root_of(a: np.ndarray) -> np.ndarray:
    """The array owning the memory of `a` (following `.base` through numpy views)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _forget(key: int, ref) -> None:
    for table in (_FROZEN, _THAWED):
        if table.get(key) is ref:
            del table[key]


def _registered(table: dict, root: np.ndarray) -> bool:
    ref = table.get(id(root))
    return ref is not None and ref() is root


def freeze(a: np.ndarray) -> np.ndarray:
    """Make `a` and the buffer owning its memory read-only until the next `writable` on it or on
    a view of it; returns that owning buffer (pass it to `is_frozen`)."""
    root = root_of(a)
    if root.flags.writeable:
        key = id(root)
        _THAWED.pop(key, None)
        _FROZEN[key] = weakref.ref(root, lambda r, key=key: _forget(key, r))
        root.flags.writeable = False
    elif not _registered(_FROZEN, root):
        return root   # read-only for another reason (never thawed here); stays constant
    if a is not root:
        a.flags.writeable = False
    return root


def is_frozen(root: np.ndarray) -> bool:
    """True while `root` (returned by `freeze`) has not been written since it was frozen."""
    return _registered(_FROZEN, root)


def writable(a: np.ndarray) -> np.ndarray:
    """`a`, writeable again if it is (a view of) a frozen buffer, which thaws that buffer and
    advances `generation()`. Call before every in-place write into an NDArray's buffer."""
    global _generation
    if a.flags.writeable:
        return a
    chain = [a]
    while isinstance(chain[-1].base, np.ndarray):
        chain.append(chain[-1].base)
    root = chain[-1]
    if _registered(_FROZEN, root):
        _THAWED[id(root)] = _FROZEN.pop(id(root))
        _generation = next(_COUNTER)
    elif not _registered(_THAWED, root):
        return a   # read-only for another reason: numpy reports the write
    for x in reversed(chain):   # owner first: a view may become writeable only after its base
        if not x.flags.writeable:
            try:
                x.flags.writeable = True
            except ValueError:
                return a   # e.g. a broadcast view: numpy reports the write
    return a
