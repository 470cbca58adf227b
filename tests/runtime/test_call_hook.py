"""runtime.set_call_hook: the graph-call hook the profiler uses (one event per Entry call)."""
import time

import numpy as np
import pytest

from symjit import MXNetError, runtime
from symjit import _runtime

TEST = _runtime.test_symbols()


def _axpy(n=8):
    nparam, aparam = np.array([n], np.int64), np.array([2.0], np.float32)
    entry = runtime.make_entry(TEST["entry_axpy"], [("x", (n,), "float32"), ("y", (n,), "float32")],
                               [("out", (n,), "float32"), ("align", (1,), "int64")],
                               params=[("n", nparam), ("a", aparam)], workspace_size=4 * n, name="axpy")
    return entry, (nparam, aparam)


@pytest.fixture
def hook_reset():
    yield
    runtime.set_call_hook(None)


def test_hook_sees_every_call_with_its_time_bounds(hook_reset):
    entry, _keep = _axpy()
    x, y = np.ones(8, np.float32), np.arange(8, dtype=np.float32)
    calls = []
    assert runtime.set_call_hook(lambda e, t0, t1: calls.append((e, t0, t1))) is None
    before = time.monotonic_ns()
    out, _ = entry(x, y)
    entry(x, y, out=(np.empty(8, np.float32), np.empty(1, np.int64)))
    after = time.monotonic_ns()
    np.testing.assert_array_equal(out, 2 * x + y)
    assert [c[0] for c in calls] == [entry, entry]
    assert all(before <= t0 <= t1 <= after for _, t0, t1 in calls)     # the clock of time.monotonic_ns
    previous = runtime.set_call_hook(None)
    assert callable(previous) and runtime.call_hook is None
    entry(x, y)
    assert len(calls) == 2


def test_hook_errors_propagate_and_bad_hooks_are_refused(hook_reset):
    entry, _keep = _axpy()
    x = np.ones(8, np.float32)

    def failing(*args):
        raise KeyError("from the hook")
    runtime.set_call_hook(failing)
    with pytest.raises(KeyError, match="from the hook"):
        entry(x, x)
    runtime.set_call_hook(None)
    with pytest.raises(TypeError, match="callable"):
        runtime.set_call_hook(42)
    calls = []
    runtime.set_call_hook(lambda *a: calls.append(a))
    with pytest.raises(MXNetError, match="wrong shape"):        # a refused call is no call
        entry(np.ones(3, np.float32), x)
    assert calls == []
