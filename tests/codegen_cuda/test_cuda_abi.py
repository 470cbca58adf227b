"""The library ABI of the generated source, exercised through the host emulation (where
"device" memory is host memory): the runtime-ABI entry (host pointers, via runtime.load), the
device-pointer entry `symjit_cuda_run` with a caller-owned workspace, its argument checks,
`symjit_cuda_release` and re-initialization, and emulated launch errors becoming one
MXNetError naming the kernel and node."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from cuda_util import model_plan, needs_cxx
from shared_data import model_path
from symjit.base import MXNetError
from symjit.codegen.cuda.emulate import build_emulated, load_emulated

pytestmark = needs_cxx


def _ptrs(arrays):
    t = (ctypes.c_void_p * len(arrays))()
    for i, a in enumerate(arrays):
        t[i] = a.ctypes.data
    return t


def test_device_pointer_entry(tmp_path):
    plan, _ = model_plan("mlp")
    lib = ctypes.CDLL(str(build_emulated(plan, tmp_path, "-O0")))
    lib.symjit_cuda_run.restype = ctypes.c_int32
    lib.symjit_cuda_run.argtypes = [ctypes.c_void_p] * 4
    lib.symjit_cuda_workspace_size.restype = ctypes.c_int64
    lib.symjit_last_error.restype = ctypes.c_char_p
    x = np.load(model_path("mlp-input.npy"))
    y = np.zeros((8, 10), np.float32)
    size = lib.symjit_cuda_workspace_size()
    assert size == plan.workspace_size > 0
    raw = np.zeros(size + 256, np.uint8)
    ws = raw[(-raw.ctypes.data) % 256:][:size]
    ins, outs = _ptrs([x]), _ptrs([y])          # kept alive across the calls
    assert lib.symjit_cuda_run(ctypes.addressof(ins), ctypes.addressof(outs), None, None) == 1
    assert b"needs a device workspace" in lib.symjit_last_error()
    for _ in range(2):     # the second run after releasing the device state initializes again
        y[:] = 0
        rc = lib.symjit_cuda_run(ctypes.addressof(ins), ctypes.addressof(outs), ws.ctypes.data, None)
        assert rc == 0, lib.symjit_last_error()
        ref = np.load(model_path("mlp-output.npy"))
        assert np.abs(y - ref).max() <= 1e-4 * np.abs(ref).max()
        lib.symjit_cuda_release()


def test_host_entry_repeated_calls_and_errors(tmp_path):
    plan, _ = model_plan("lenet")
    _, entry = load_emulated(plan, tmp_path, "-O0")
    x = np.load(model_path("lenet-input.npy"))
    first, = entry(x)
    second, = entry(x)
    np.testing.assert_array_equal(first, second)
    with pytest.raises(MXNetError):
        entry(x[:2])                                  # wrong shape: refused before any code runs


def test_emulated_launch_error_names_kernel_and_node(tmp_path):
    """A kernel that calls __syncthreads but is declared barrier-free is a launch error in the
    emulation (as a divergent barrier would be a bug on the GPU)."""
    from symjit.codegen.cuda.plan import LaunchPlan
    plan, _ = model_plan("mlp")
    gemm = next(k for k in plan.kernels if k.barriers)
    broken = type(gemm)(gemm.name, gemm.source, gemm.param_types, gemm.threads, False)
    steps = [type(s)(broken, s.grid, s.args, s.node) if getattr(s, "kernel", None) is gemm else s for s in plan.steps]
    bad = LaunchPlan(plan.name, [broken if k is gemm else k for k in plan.kernels], steps, plan.placement,
                     plan.workspace_size)
    _, entry = load_emulated(bad, tmp_path, "-O0")
    with pytest.raises(MXNetError, match=rf"{gemm.name}.*__syncthreads"):
        entry(np.load(model_path("mlp-input.npy")))
