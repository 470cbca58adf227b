"""Arena packing: place buffers with known lifetimes into one arena, reusing memory.

Pure functions over `Interval`s (a buffer's byte size and the half-open range of
schedule steps during which it is live); the memory-planning pass builds the
intervals from a scheduled graph and calls `pack`. Kept separate from the IR so the
algorithm and its validator are tested on their own.

Invariants of `pack`'s result: every offset is a multiple of `alignment`; two
buffers whose lifetimes overlap never overlap in bytes (`validate` checks this
independently); total size >= `lower_bound` of the same intervals.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

__all__ = ["Interval", "Placement", "pack", "lower_bound", "validate", "align_up"]


@dataclass(frozen=True)
class Interval:
    """A buffer of `size` bytes live during steps [start, end) of the schedule."""
    key: object
    size: int
    start: int
    end: int

    def overlaps_in_time(self, other: "Interval") -> bool:
        return self.start < other.end and other.start < self.end


@dataclass(frozen=True)
class Placement:
    """Byte offset of every buffer and the arena size that holds them."""
    offsets: dict
    total: int


def align_up(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def lower_bound(intervals: Sequence[Interval], alignment: int = 64) -> int:
    """The largest total (aligned) size of buffers live at the same step: no plan can do better."""
    events: dict[int, int] = {}
    for iv in intervals:
        size = align_up(iv.size, alignment)
        events[iv.start] = events.get(iv.start, 0) + size
        events[iv.end] = events.get(iv.end, 0) - size
    best = cur = 0
    for step in sorted(events):
        cur += events[step]
        best = max(best, cur)
    return best


def pack(intervals: Sequence[Interval], alignment: int = 64) -> Placement:
    """Greedy-by-size packing: larger buffers first, each at the lowest offset where it
    fits between the buffers already placed that are live at the same time.

    This is the strategy of production arena planners (near the lower bound on
    real networks, O(n^2) for n buffers, which is fine for graph-sized n).
    """
    order = sorted(intervals, key=lambda iv: (-iv.size, iv.start, str(iv.key)))
    placed: list[tuple[Interval, int]] = []
    offsets: dict = {}
    total = 0
    for iv in order:
        size = align_up(max(iv.size, 1), alignment)
        busy = sorted((off, off + align_up(max(p.size, 1), alignment))
                      for p, off in placed if p.overlaps_in_time(iv))
        offset = 0
        for lo, hi in busy:
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        offsets[iv.key] = offset
        placed.append((iv, offset))
        total = max(total, offset + size)
    return Placement(offsets, total)


def validate(intervals: Sequence[Interval], placement: Placement, alignment: int = 64) -> None:
    """Raise AssertionError if two simultaneously live buffers share bytes, a buffer is
    missing, misaligned, or sticks out of the arena. Independent of `pack`'s logic."""
    ivs = list(intervals)
    for iv in ivs:
        if iv.key not in placement.offsets:
            raise AssertionError(f"buffer {iv.key!r} has no offset")
        off = placement.offsets[iv.key]
        if off % alignment:
            raise AssertionError(f"buffer {iv.key!r} at offset {off} is not {alignment}-byte aligned")
        if off + iv.size > placement.total:
            raise AssertionError(f"buffer {iv.key!r} [{off}, {off + iv.size}) exceeds arena {placement.total}")
    for i, a in enumerate(ivs):
        oa = placement.offsets[a.key]
        for b in ivs[i + 1:]:
            if not a.overlaps_in_time(b):
                continue
            ob = placement.offsets[b.key]
            if oa < ob + b.size and ob < oa + a.size:
                raise AssertionError(f"live buffers {a.key!r} [{oa}, {oa + a.size}) and {b.key!r} "
                                     f"[{ob}, {ob + b.size}) overlap during steps "
                                     f"[{max(a.start, b.start)}, {min(a.end, b.end)})")
