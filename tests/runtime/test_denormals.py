"""Denormals in the kernel library (runtime/nn/common.c NN_FLUSH_DENORMALS): by default its
multiply-accumulate kernels compute IEEE denormals as numpy does; switched on
(`runtime.set_flush_denormals(True)`) they read denormal inputs as zero and flush denormal
results; elementwise code keeps IEEE denormals either way; and the calling thread's
floating-point mode is restored after every call (numpy in the same thread still sees them)."""
from __future__ import annotations

import platform

import numpy as np
import pytest

import symjit as mx
from symjit import runtime

TINY = np.float32(1e-39)   # a float32 denormal (FLT_MIN is 1.18e-38)


@pytest.fixture
def flush_setting():
    """Restores the environment's choice after the test."""
    yield
    runtime.set_flush_denormals(None)


def _dense_model():
    """x (64 x 128) . W^T (W: 256 x 128) as a compiled FullyConnected: one GEMM of the kernel
    library (large enough for its tiles, not the small loop nest)."""
    x, w = mx.sym.var("x"), mx.sym.var("w")
    y = mx.sym.FullyConnected(x, w, num_hidden=256, no_bias=True)
    return mx.compile(y, shapes={"x": (64, 128), "w": (256, 128)}, cache=False)


def _operands():
    rng = np.random.default_rng(0)
    x = (rng.uniform(0.5, 1.0, (64, 128)) * TINY).astype(np.float32)   # every input denormal
    w = rng.uniform(0.5, 1.0, (256, 128)).astype(np.float32)
    return x, w


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64", "i686", "i386"),
                    reason="flushing uses the x86 MXCSR; elsewhere the kernels keep IEEE denormals")
def test_gemm_flushes_denormal_inputs_when_switched_on(flush_setting):
    runtime.set_flush_denormals(True)
    x, w = _operands()
    assert np.all(x > 0) and np.all(x < np.finfo(np.float32).tiny)
    y = _dense_model()(x=x, w=w)[0]
    np.testing.assert_array_equal(y, 0.0)


def test_gemm_keeps_ieee_denormals_by_default(flush_setting, monkeypatch):
    monkeypatch.delenv("SYMJIT_FLUSH_DENORMALS", raising=False)
    runtime.set_flush_denormals(None)      # the environment's choice: unset means off
    x, w = _operands()
    y = _dense_model()(x=x, w=w)[0]
    ref = x.astype(np.float64) @ w.astype(np.float64).T
    assert np.all(y > 0)
    np.testing.assert_allclose(y, ref, rtol=1e-4)
    assert runtime.set_flush_denormals(True) is False


def test_calling_thread_keeps_ieee_denormals_after_a_flushing_kernel(flush_setting):
    runtime.set_flush_denormals(True)
    x, w = _operands()
    _dense_model()(x=x * 0 + 1, w=w)
    assert np.float32(TINY) * np.float32(1.0) > 0          # no DAZ left behind
    assert np.float32(1e-30) * np.float32(1e-9) > 0         # no FTZ left behind
    e = mx.nd.exp(mx.nd.array(np.array([-100.0], np.float32))).asnumpy()
    assert 0 < e[0] < np.finfo(np.float32).tiny              # elementwise: IEEE denormal


def test_set_flush_denormals_rejects_other_types():
    with pytest.raises(mx.base.MXNetError, match="set_flush_denormals: expected a bool"):
        runtime.set_flush_denormals("yes")
