"""Fuzzing: symbol JSON, `.params` bytes and every registered op alone, each case in a worker
subprocess (fuzz_harness), so a native crash or a hang is recorded instead of killing pytest.
Acceptance: no crash, no hang, no exception other than MXNetError from any input.

Replay a reported case with `python tests/fuzz/fuzz_worker.py --replay KIND SEED INDEX`."""
from __future__ import annotations

import pytest

from fuzz_harness import run_cases

SEED = 20260

#: default-run case counts (a few thousand in all, about a minute on two cores)
COUNTS = {"params": 1500, "json": 500, "op": 600}
#: `-m slow` case counts
SLOW_COUNTS = {"params": 30000, "json": 6000, "op": 12000}
#: the least share of cases that must get past validation and run (a fuzzer whose every case
#: is refused early would test nothing)
MIN_RAN = {"params": 0.05, "json": 0.05, "op": 0.2}


def _check(kind: str, seed: int, count: int) -> None:
    report = run_cases(kind, seed, count)
    assert report.cases == count
    assert not report.findings, (f"{len(report.findings)} of {count} {kind} cases crashed, hung or "
                                 "raised something other than MXNetError:\n"
                                 + "\n".join(map(str, report.findings)))
    ran = report.outcomes.get("ran", 0)
    assert ran >= MIN_RAN[kind] * count, f"only {ran} of {count} {kind} cases ran: {report.outcomes}"


@pytest.mark.parametrize("kind", sorted(COUNTS))
def test_fuzz(kind):
    _check(kind, SEED, COUNTS[kind])


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(SLOW_COUNTS))
def test_fuzz_slow(kind):
    _check(kind, SEED + 1, SLOW_COUNTS[kind])


def test_harness_survives_crash_exception_and_hang():
    report = run_cases("probe", 0, 7, case_timeout=5)
    found = {f.index: f.what for f in report.findings}
    assert report.cases == 7
    assert sorted(found) == [1, 2, 3]
    assert "signal 6" in found[1]
    assert found[2].startswith("KeyError")
    assert found[3].startswith("hang")
    assert report.outcomes == {"ran": 3, "refused": 1}
    assert report.restarts == 2
