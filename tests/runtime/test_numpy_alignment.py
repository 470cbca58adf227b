"""The aligned numpy allocator installed by symjit.runtime (runtime/module.c, NEP 49 handler):
every data buffer starts on a 64-byte boundary, contents survive realloc, calloc still zeroes,
and switching it off restores numpy's default policy for new arrays only."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import symjit as mx
from symjit import runtime

SIZES = [0, 1, 3, 17, 64, 1000, 4097, 1 << 16, (1 << 22) + 5]


def _offset(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0] % runtime.ALIGNMENT


#: numpy's multiarray module: numpy 2 renamed numpy.core (numpy 1.x's name) to numpy._core
_MULTIARRAY_EXPR = "(np._core if hasattr(np, '_core') else np.core).multiarray"


def _handler_name() -> str:
    return eval(_MULTIARRAY_EXPR).get_handler_name()


def test_handler_installed_on_import():
    assert _handler_name() == "symjit_aligned64"


@pytest.mark.parametrize("n", SIZES)
def test_empty_zeros_and_copies_are_aligned(n):
    assert _offset(np.empty(n, np.float32)) == 0
    z = np.zeros(n, np.float64)
    assert _offset(z) == 0 and not z.any()
    x = np.arange(n, dtype=np.int8)
    assert _offset(x.copy()) == 0 and np.array_equal(x.copy(), x)


def test_ndarrays_and_compiled_outputs_are_aligned():
    a = mx.nd.array(np.arange(1000, dtype=np.float32) - 500)
    assert _offset(a._data) == 0
    x = mx.sym.Variable("x")
    exe = mx.sym.relu(x * 2.0).bind(mx.cpu(), {"x": a}, grad_req="null")
    out = exe.forward()[0]
    assert _offset(out._data) == 0
    np.testing.assert_array_equal(out.asnumpy(), np.maximum(a.asnumpy() * 2, 0))


@pytest.mark.parametrize("start, grow", [(10, 1_000_000), (1_000_000, 10), (100, 3000), (5000, 5001)])
def test_realloc_keeps_contents_and_alignment(start, grow):
    a = np.arange(start, dtype=np.float64)
    a.resize(grow, refcheck=False)          # numpy reallocates the buffer in place
    assert _offset(a) == 0
    keep = min(start, grow)
    np.testing.assert_array_equal(a[:keep], np.arange(keep, dtype=np.float64))
    if grow > start:
        assert not a[start:].any()          # numpy zero-fills the grown part


def test_switch_off_restores_default_for_new_arrays():
    kept = np.arange(4096, dtype=np.float32)
    runtime.use_aligned_numpy_allocator(False)
    try:
        assert _handler_name() == "default_allocator"
        plain = np.arange(4096, dtype=np.float32)
    finally:
        runtime.use_aligned_numpy_allocator(True)
    assert _handler_name() == "symjit_aligned64"
    # arrays made under either policy stay valid and are freed by their own allocator
    np.testing.assert_array_equal(kept, plain)
    del kept, plain


def test_threads_start_with_numpy_default_and_can_opt_in():
    names = {}

    def work():
        names["before"] = _handler_name()
        runtime.use_aligned_numpy_allocator(True)
        names["after"] = _handler_name()
        names["offset"] = _offset(np.empty(12345, np.float32))

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert names == {"before": "default_allocator", "after": "symjit_aligned64", "offset": 0}


def test_environment_switch_keeps_numpy_default():
    code = f"import numpy as np, symjit; print({_MULTIARRAY_EXPR}.get_handler_name())"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "SYMJIT_ALIGNED_NUMPY": "0"},
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "default_allocator"
