"""Per-node wall-clock profiles of compiled graphs, measured inside the graph's native code.

A graph compiled with `compile_planned(..., profile=True)` calls the runtime's
`symjit_profile_mark(slot)` after each node's kernels (runtime/profile.c): every node owns one
counter slot, handed out here so that graphs compiled in one process never share one. Unlike
timing nodes compiled alone, the times include what the node costs where it runs in the graph:
its inputs as the previous nodes left them in the caches, its weights fetched from wherever
the rest of the graph evicted them to, thread wake-ups.
"""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

import numpy as np

from ...base import MXNetError

__all__ = ["NodeTime", "allocate_slots", "read_slots", "SLOTS"]

#: number of counters in the runtime (SYMJIT_PROFILE_SLOTS in runtime/symjit_internal.h)
SLOTS = 65536
_lock = threading.Lock()
_next_slot = 0


@dataclass(frozen=True)
class NodeTime:
    """One node's share of a profiled graph's calls: total seconds over `calls` calls."""
    node: str
    op: str
    calls: int
    seconds: float

    @property
    def mean_seconds(self) -> float:
        return self.seconds / self.calls if self.calls else 0.0


def allocate_slots(count: int) -> int:
    """The first of `count` consecutive counter slots no other graph of this process uses."""
    global _next_slot
    with _lock:
        if _next_slot + count > SLOTS:
            raise MXNetError(f"profile: all {SLOTS} counter slots of this process are in use "
                             f"(a graph of {count} nodes needs more); profile fewer graphs per process")
        first = _next_slot
        _next_slot += count
        return first


def read_slots(first: int, count: int, reset: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(nanoseconds, calls) of slots [first, first + count); `reset` zeroes them after reading."""
    from ... import runtime
    ns = np.zeros(count, np.int64)
    calls = np.zeros(count, np.int64)
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_int32)(runtime.symbols()["symjit_profile_read"])
    rc = fn(first, count, ns.ctypes.data, calls.ctypes.data, int(reset))
    if rc != 0:
        runtime.raise_last_error("profile read", rc)
    return ns, calls
