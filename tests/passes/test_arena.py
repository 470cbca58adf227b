"""Arena packing: never overlaps live buffers; close to the lower bound on random lifetimes."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symjit.passes.arena import Interval, Placement, lower_bound, pack, validate


@st.composite
def interval_sets(draw):
    n = draw(st.integers(1, 40))
    out = []
    for i in range(n):
        start = draw(st.integers(0, 30))
        length = draw(st.integers(1, 10))
        size = draw(st.integers(1, 5000))
        out.append(Interval(i, size, start, start + length))
    return out


@settings(max_examples=200, deadline=None)
@given(interval_sets())
def test_pack_is_valid_and_bounded(intervals):
    placement = pack(intervals)
    validate(intervals, placement)
    lb = lower_bound(intervals)
    naive = sum((iv.size + 63) // 64 * 64 for iv in intervals)
    assert lb <= placement.total <= naive


def test_chain_reuses_two_buffers():
    # a chain x0 -> x1 -> ... where each value dies after its consumer: two slots suffice
    ivs = [Interval(i, 1024, i, i + 2) for i in range(10)]
    p = pack(ivs)
    validate(ivs, p)
    assert p.total == 2 * 1024 == lower_bound(ivs)


def test_validator_catches_overlap_and_misalignment():
    ivs = [Interval("a", 100, 0, 2), Interval("b", 100, 1, 3)]
    with pytest.raises(AssertionError, match="overlap"):
        validate(ivs, Placement({"a": 0, "b": 64}, 256))
    with pytest.raises(AssertionError, match="aligned"):
        validate(ivs, Placement({"a": 0, "b": 130}, 256))
    with pytest.raises(AssertionError, match="no offset"):
        validate(ivs, Placement({"a": 0}, 256))
    validate(ivs, Placement({"a": 0, "b": 128}, 256))
    # disjoint lifetimes may share bytes
    validate([Interval("a", 100, 0, 1), Interval("b", 100, 1, 2)], Placement({"a": 0, "b": 0}, 128))
