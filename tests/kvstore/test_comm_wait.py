"""MPIComm's polling of pending requests (`_wait`): completion, deadline, dead peers, failure
bookkeeping. Runs in one process on fake requests (no MPI needed)."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from symjit.base import MXNetError
from symjit.kvstore import comm


class _FakeMPIError(Exception):
    def Get_error_string(self):
        return "fake MPI error"


class _Req:
    """A request that completes at its n-th Test (never when n is None), or raises there."""

    def __init__(self, n=None, error=None):
        self.n, self.error, self.tests = n, error, 0

    def Test(self):
        self.tests += 1
        if self.error is not None and self.tests >= self.n:
            raise self.error
        return self.n is not None and self.tests >= self.n


def _group(timeout=5.0, launch_dir=None) -> comm.MPIComm:
    """An MPIComm without MPI: just what `_wait` uses."""
    g = object.__new__(comm.MPIComm)
    g.MPI = SimpleNamespace(Exception=_FakeMPIError, Request=SimpleNamespace(
        Testall=lambda reqs: all([r.Test() for r in reqs])))
    g.timeout, g.rank, g.size = timeout, 0, 2
    g._broken, g._launch_dir, g._next_peer_check, g._abandoned = None, launch_dir, 0.0, []
    return g


def test_completes_and_keeps_the_group_usable():
    g = _group()
    g._wait([_Req(3)], "op")
    reqs = [_Req(2), _Req(5)]
    g._wait(reqs, "op")
    assert all(r.tests >= r.n for r in reqs)
    g.check()
    assert g._abandoned == []


def test_late_completion_after_spinning_and_sleeping():
    g = _group()
    req = _Req(None)
    t = time.monotonic()
    deadline = t + 3 * comm.SPIN_S
    req.Test = lambda: time.monotonic() > deadline  # completes in the sleeping phase
    g._wait([req], "op")
    assert time.monotonic() - t < 3 * comm.SPIN_S + 1.0  # generous: a loaded machine delays wake-ups


def test_stalled_peer_raises_at_the_deadline_without_burning_a_core():
    g = _group(timeout=0.5)
    req = _Req(None)
    t, cpu = time.monotonic(), time.thread_time()  # this thread only: pools of other tests may spin
    with pytest.raises(MXNetError, match=r"op did not complete within 0.5 s on rank 0 of 2"):
        g._wait([req], "op")
    wall, cpu = time.monotonic() - t, time.thread_time() - cpu
    assert 0.5 <= wall < 1.5
    assert cpu < 0.5 * wall  # sleeps between polls after the spin
    assert g._abandoned == [[req]]  # kept alive: MPI may still use it and its buffers
    with pytest.raises(MXNetError, match="unusable after an earlier failure"):
        g._wait([_Req(1)], "next op")


def test_dead_peer_note_fails_at_once(tmp_path):
    (tmp_path / "failed.1").write_text("worker rank 1 (pid 1) was killed by signal SIGKILL")
    (tmp_path / "failed.0").write_text("this rank's own note is ignored")
    g = _group(timeout=60, launch_dir=str(tmp_path))
    t = time.monotonic()
    with pytest.raises(MXNetError, match="op failed on rank 0: worker rank 1 .*SIGKILL"):
        g._wait([_Req(None)], "op")
    assert time.monotonic() - t < 1.0


def test_mpi_error_breaks_the_group():
    g = _group()
    with pytest.raises(MXNetError, match="op failed on rank 0: MPI error: fake MPI error"):
        g._wait([_Req(2, _FakeMPIError())], "op")
    assert g._broken is not None and len(g._abandoned) == 1


def test_error_while_starting_breaks_the_group():
    g = _group()
    started = _Req(None)

    def start(i):
        if i == 1:
            raise _FakeMPIError()
        return started
    with pytest.raises(MXNetError, match="op failed on rank 0: MPI error: fake MPI error"):
        g._run("op", start, range(3))
    assert g._abandoned == [[started]]
    with pytest.raises(MXNetError, match="unusable"):
        g.check()


def test_interruption_breaks_the_group():
    g = _group()
    req = _Req(None)
    req.Test = lambda: (_ for _ in ()).throw(KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        g._wait([req], "op")
    with pytest.raises(MXNetError, match="op was interrupted on rank 0"):
        g.check()


def test_watchdog_disarms():
    token = comm.WATCHDOG.arm("op", 1.0)
    assert token in comm.WATCHDOG._active
    comm.WATCHDOG.disarm(token)
    assert token not in comm.WATCHDOG._active
