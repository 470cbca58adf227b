"""Targets as data: the pass manager chooses the pipeline from a `Target`, and code (generated
LLVM code and the kernel library) is built for a CPU other than the host: `symjit compile --cpu
x86-64-v3` gives a library with no AVX-512 instruction that runs here."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import symjit
from symjit import runtime
from symjit.base import MXNetError
from symjit.codegen.llvm.target import NAMED_CPUS, compile_target, host_target, machine_for
from symjit.ir import GraphBuilder, TensorType
from symjit.ir.target import AVX512_KERNELS, Target
from symjit.passes.manager import PassManager

from shared_data import model_path

needs_toolchain = pytest.mark.skipif(shutil.which("cc") is None or shutil.which("objdump") is None,
                                     reason="needs the system C compiler `cc` and `objdump`")

#: AVX-512 in disassembly: a zmm register, an opmask register or one of the 16 extra vector
#: registers only EVEX encodes
AVX512_ASM = re.compile(r"%zmm|%k[0-7]\b|%[xy]mm(1[6-9]|2[0-9]|3[01])\b|\{%k")


def _skipped(pm) -> dict:
    return {r.name: r.note for r in pm.records if r.skipped}


def _graph():
    b = GraphBuilder(name="ew")
    x = b.add_input("x", TensorType((64, 256), "float32"))
    y = b.add_node("tanh", [b.add_node("exp", [b.add_node("negative", [x])[0]])[0]])[0]
    return b.build([b.add_node("_mul_scalar", [y], {"scalar": 3.0})[0]])


def test_the_pass_manager_chooses_the_passes_for_the_target():
    g = _graph()
    generic = PassManager("inference")
    generic.run(g)
    assert _skipped(generic) == {
        "channel_pad": "only for llvm targets whose kernel library has its AVX-512 kernels (the blocked layout's)",
        "blocked_layout": "only for llvm targets whose kernel library has its AVX-512 kernels"}
    tiles = PassManager("inference", target=Target("llvm", kernels={AVX512_KERNELS}))
    tiles.run(g)
    assert _skipped(tiles) == {}
    cuda = PassManager("inference", target=Target("cuda", sm=(80,)))
    cuda.run(g)
    assert set(_skipped(cuda)) == {"conv_pool", "channel_pad", "blocked_layout"}
    assert "(only for llvm targets" in cuda.report()


def test_named_cpus():
    v3, v4 = compile_target("x86-64-v3"), compile_target("x86-64-v4")
    assert v3.has_feature("avx2") and v3.has_feature("fma") and not v3.has_feature("avx512f")
    assert v3.kernels == frozenset() and v4.kernels == {AVX512_KERNELS} and v4.has_feature("avx512f")
    assert set(NAMED_CPUS) == {"x86-64-v3", "x86-64-v4", "znver4"}
    native = compile_target("native")
    assert (native.cpu, native.features) == (host_target().cpu, host_target().features)
    with pytest.raises(MXNetError, match="unknown CPU 'pentium'"):
        symjit.compile(_graph(), target="pentium")


def test_code_for_x86_64_v3_has_no_avx512_and_runs_here():
    from symjit.codegen.llvm.jit import assembly
    x = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
    m = symjit.compile(_graph(), target="x86-64-v3")
    assert m.compiled.target.cpu == "x86-64-v3" and m.native
    assert '"target-cpu"="x86-64-v3"' in m.compiled.module.ir
    np.testing.assert_allclose(m(x)[0], 3 * np.tanh(np.exp(-x)), rtol=1e-5, atol=1e-6)
    asm = assembly(m.compiled.module.ir, machine_for(m.compiled.target))
    assert "ymm" in asm and not AVX512_ASM.search(asm)
    if host_target().features.find("+avx512f") >= 0:      # the host's own code does use AVX-512
        host = symjit.compile(_graph())
        assert AVX512_ASM.search(assembly(host.compiled.module.ir))


def _objdump_avx512(path: Path) -> list[str]:
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return [line for line in out.splitlines() if AVX512_ASM.search(line)]


@needs_toolchain
def test_aot_library_for_x86_64_v3(tmp_path):
    """An AOT library for x86-64-v3 (code that calls no kernel-library function): its object code
    has no AVX-512 instruction, the manifest records the CPU, and it runs here."""
    from symjit.codegen.aot import build_library
    m = symjit.compile(_graph(), target="x86-64-v3")
    res = build_library(m.compiled, str(tmp_path / "ew"), name="ew")
    target = res.manifest["target"]
    assert target["cpu"] == "x86-64-v3" and not target["host"] and target["kernels"] == []
    assert "avx2" in target["required_features"] and not any("avx512" in f for f in target["required_features"])
    assert _objdump_avx512(Path(res.library)) == []
    x = np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32)
    (got,) = runtime.load(res.library)["ew"](x)
    np.testing.assert_allclose(got, 3 * np.tanh(np.exp(-x)), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@needs_toolchain
def test_symjit_compile_cpu_x86_64_v3_builds_the_kernel_library_for_it(tmp_path):
    """`symjit compile --cpu x86-64-v3` on a model whose convolutions and dense layers call the
    kernel library: the whole library (generated code, runtime, nnkernels.c) has no AVX-512
    instruction and computes what MXNet computed."""
    from symjit.cli import main
    base = tmp_path / "lenet"
    assert main(["compile", str(model_path("lenet-symbol.json")), str(model_path("lenet-0000.params")),
                 "--input", "data:4x1x28x28", "--cpu", "x86-64-v3", "-q", "-o", str(base)]) == 0
    manifest = json.loads(Path(f"{base}.json").read_text())
    assert manifest["target"]["cpu"] == "x86-64-v3"
    assert "-DSYMJIT_NO_AVX512" in manifest["target"]["kernel_library_cflags"]
    assert _objdump_avx512(Path(f"{base}.so")) == []
    x = np.load(model_path("lenet-input.npy"))
    (got,) = runtime.load(f"{base}.so")["lenet"](x)
    ref = np.load(model_path("lenet-output.npy"))
    assert np.abs(got - ref).max() <= 1e-4 * max(1.0, float(np.abs(ref).max()))


def test_cache_key_names_the_code_generator_options(monkeypatch):
    """The code generator options are part of the target description, so objects generated
    under other options never load from the cache."""
    from symjit.codegen.llvm import target as T
    with_options = T.host_target().description
    for on, _ in T.CODEGEN_OPTIONS:
        assert on in with_options
    monkeypatch.setattr(T, "CODEGEN_OPTIONS", ())
    assert T.host_target().description != with_options


def test_segments_compile_with_fast_instruction_selection():
    """JIT objects use position-independent code with the small code model: under LLVM's
    default JIT code model (large) x86's fast instruction selector gives up at every call, and
    the segment functions (optnone, one call per node) paid for the full selector. Checked in
    a child process (LLVM's options are process-wide): LLVM reports no fallback for any
    segment of a graph with library calls and generated kernels, and the code model is part
    of the target description (cache key)."""
    from symjit.codegen.llvm import target as T
    assert f"{T.JIT_RELOC}/{T.JIT_CODE_MODEL}" in T.host_target().description
    child = r"""
import llvmlite.binding as llvm, numpy as np, symjit as mx
from symjit.codegen.llvm.target import ensure_initialized
ensure_initialized()
llvm.set_option("symjit", "-fast-isel-report-on-fallback")
x = mx.sym.Variable("x")
h = mx.sym.Activation(mx.sym.Convolution(x, kernel=(3, 3), num_filter=8, pad=(1, 1), name="c"), act_type="relu")
y = mx.sym.FullyConnected(mx.sym.sigmoid(h), num_hidden=5, name="fc")
rng = np.random.default_rng(0)
params = {"c_weight": rng.standard_normal((8, 3, 3, 3)).astype("f"), "c_bias": np.zeros(8, "f"),
          "fc_weight": rng.standard_normal((5, 8 * 36)).astype("f"), "fc_bias": np.zeros(5, "f")}
m = mx.compile(y, {"x": (1, 3, 6, 6)}, params=params, cache=False)
out, = m(x=rng.standard_normal((1, 3, 6, 6)).astype("f"))
assert out.shape == (1, 5)
print("segments", ",".join(m.compiled.module.segment_names))
"""
    res = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "segments sj_model" in res.stdout
    assert not re.findall(r"fallback path for sj_model\w*", res.stderr), res.stderr[-2000:]
