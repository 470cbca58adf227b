"""On a real GPU (`-m gpu`): libraries built by `symjit compile --target cuda` / `aot.build_library`
run on the device and agree with the CPU JIT (symjit.compile, the LLVM backend), with MXNet's
reference outputs and with the interpreter.

Needs nvcc and an NVIDIA GPU of compute capability >= 8.0 whose driver supports the CUDA
runtime nvcc links statically (check: the library's `symjit_aot_check()`); skipped otherwise.
Tolerance: max abs error <= 1e-4 x the output's scale for the models (the models' README),
rtol 1e-4 / atol 1e-5 for the op graphs (the GPU contracts multiply-adds into FMAs and CUDA's
float32 math functions are within a few ulp, so results are not bit-identical to the CPU's).
The device-pointer entry is also checked when CuPy is installed.
"""
from __future__ import annotations

import ctypes
import tempfile
from pathlib import Path

import numpy as np
import pytest

from cuda_util import MODEL_SHAPES, assert_close, every_template_net, have_nvcc
from shared_data import model_path
from symjit.cli import main
from symjit.codegen.cuda import plan_graph
from symjit.codegen.cuda.aot import build_library
from symjit.ir import run

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not have_nvcc(), reason="needs the CUDA compiler nvcc")]


def _gpu_or_skip(library: Path) -> None:
    lib = ctypes.CDLL(str(library))
    lib.symjit_aot_check.restype = ctypes.c_char_p
    problem = lib.symjit_aot_check()
    if problem is not None:
        pytest.skip(problem.decode(errors="replace"))


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cuda_gpu")


def _jit_output(name: str, x: np.ndarray) -> np.ndarray:
    import symjit as mx
    sym = mx.sym.load(str(model_path(f"{name}-symbol.json")))
    params = mx.nd.load(str(model_path(f"{name}-0000.params")))
    return mx.compile(sym, shapes={"data": MODEL_SHAPES[name]}, params=params)(data=x)[0]


@pytest.mark.parametrize("name", ["mlp", "lenet", "resnet18_v1", "mobilenet1.0"])
def test_model_library_on_gpu_matches_jit_and_mxnet(name, out_dir):
    from symjit import runtime
    base = out_dir / name.replace(".", "_")
    dims = "x".join(str(d) for d in MODEL_SHAPES[name])
    assert main(["compile", str(model_path(f"{name}-symbol.json")), str(model_path(f"{name}-0000.params")),
                 "--input", f"data:{dims}", "--target", "cuda", "-q", "-o", str(base)]) == 0
    _gpu_or_skip(base.with_suffix(".so"))
    lib = runtime.load(str(base.with_suffix(".so")))
    entry = lib[next(iter(lib))]
    x = np.load(model_path(f"{name}-input.npy"))
    y, = entry(x)
    y2, = entry(x)                                   # a second call reuses the device state
    np.testing.assert_array_equal(y, y2)
    for want in (_jit_output(name, x), np.load(model_path(f"{name}-output.npy"))):
        assert y.shape == want.shape
        assert np.abs(y - want).max() <= 1e-4 * np.abs(want).max()


def test_every_kernel_template_on_gpu_matches_the_interpreter(out_dir):
    from symjit import runtime
    net = every_template_net()
    g = net.graph()
    res = build_library(plan_graph(g, net.consts), str(out_dir / "templates"), name="templates", bound=net.consts)
    _gpu_or_skip(Path(res.library))
    entry = runtime.load(res.library)["templates"]
    names = [i["name"] for i in res.manifest["inputs"]]
    got = entry(*[net.feeds[n] for n in names])
    want = run(g, {**net.feeds, **net.consts}).outputs
    for k, (a, b) in enumerate(zip(got, want)):
        assert_close(a, b, rtol=1e-4, atol=1e-5, what=f"output {k}")


def test_random_graphs_on_gpu_match_the_interpreter():
    from hypothesis import HealthCheck, given, settings

    from graphgen import feeds, random_graph
    from symjit import runtime

    @settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(random_graph())
    def check(g):
        f = feeds(g, np.random.default_rng(0))
        with tempfile.TemporaryDirectory() as tmp:
            res = build_library(plan_graph(g), f"{tmp}/rg", name="rg")
            _gpu_or_skip(Path(res.library))
            entry = runtime.load(res.library)["rg"]
            got = entry(*[f[i["name"]] for i in res.manifest["inputs"]])
        for a, b in zip(got, run(g, f).outputs):
            assert_close(a, b, rtol=1e-4, atol=1e-5)
    check()


def test_device_pointer_entry_with_cupy(out_dir):
    cupy = pytest.importorskip("cupy")
    name = "mlp"
    base = out_dir / "mlp_dev"
    assert main(["compile", str(model_path(f"{name}-symbol.json")), str(model_path(f"{name}-0000.params")),
                 "--input", "data:8x784", "--target", "cuda", "-q", "-o", str(base)]) == 0
    _gpu_or_skip(base.with_suffix(".so"))
    lib = ctypes.CDLL(str(base.with_suffix(".so")))
    lib.symjit_cuda_run.restype = ctypes.c_int32
    lib.symjit_cuda_run.argtypes = [ctypes.c_void_p] * 4
    lib.symjit_cuda_workspace_size.restype = ctypes.c_int64
    lib.symjit_last_error.restype = ctypes.c_char_p
    x = cupy.asarray(np.load(model_path("mlp-input.npy")))
    y = cupy.zeros((8, 10), cupy.float32)
    ws = cupy.empty(max(lib.symjit_cuda_workspace_size(), 1), cupy.uint8)
    ins = (ctypes.c_void_p * 1)(x.data.ptr)
    outs = (ctypes.c_void_p * 1)(y.data.ptr)
    stream = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.Device().synchronize()                 # x and y were written on the default stream
    rc = lib.symjit_cuda_run(ctypes.addressof(ins), ctypes.addressof(outs), ws.data.ptr, stream.ptr)
    assert rc == 0, lib.symjit_last_error()
    stream.synchronize()
    ref = np.load(model_path("mlp-output.npy"))
    assert np.abs(cupy.asnumpy(y) - ref).max() <= 1e-4 * np.abs(ref).max()
