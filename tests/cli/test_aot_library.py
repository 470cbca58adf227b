"""`symjit compile` libraries: outputs equal the JIT's, from Python (runtime.load) and from the
C example (runtime/examples/run_model.c, no Python in the process); CPU-feature refusal."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import symjit as mx
from symjit import runtime
from symjit.cli import main

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT.parent / "shared" / "models"
EXAMPLE = ROOT / "runtime" / "examples" / "run_model.c"

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs the system C compiler `cc`")

#: model -> input shape (from /work/shared/models/README.md)
SHAPES = {"mlp": (8, 784), "lenet": (4, 1, 28, 28), "resnet18_v1": (1, 3, 224, 224),
          "mobilenet1.0": (1, 3, 224, 224)}


def _dims(shape) -> str:
    return "x".join(str(d) for d in shape)


def _jit_output(model: str) -> np.ndarray:
    sym = mx.sym.load(str(MODELS / f"{model}-symbol.json"))
    params = mx.nd.load(str(MODELS / f"{model}-0000.params"))
    m = mx.compile(sym, shapes={"data": SHAPES[model]}, params=params)
    return m(data=np.load(MODELS / f"{model}-input.npy"))[0]


@pytest.fixture(scope="session")
def run_model_exe(tmp_path_factory) -> str:
    """The C example, built with the system C compiler."""
    if shutil.which("cc") is None:
        pytest.skip("needs the system C compiler `cc`")
    exe = tmp_path_factory.mktemp("example") / "run_model"
    subprocess.run(["cc", "-O2", "-Wall", "-Werror", f"-I{ROOT / 'runtime'}", str(EXAMPLE), "-o", str(exe), "-ldl"],
                   check=True, capture_output=True)
    return str(exe)


def _build(model: str, out_dir: Path) -> Path:
    base = out_dir / model
    rc = main(["compile", str(MODELS / f"{model}-symbol.json"), str(MODELS / f"{model}-0000.params"),
               "--input", f"data:{_dims(SHAPES[model])}:float32", "-q", "-o", str(base)])
    assert rc == 0
    return base


def _check_model(model: str, out_dir: Path, exe: str) -> None:
    base = _build(model, out_dir)
    x = np.load(MODELS / f"{model}-input.npy")
    want = _jit_output(model)
    # manifest
    manifest = json.loads(Path(f"{base}.json").read_text())
    assert manifest["inputs"] == [{"name": "data", "shape": list(SHAPES[model]), "dtype": "float32"}]
    assert manifest["outputs"][0]["shape"] == list(want.shape)
    assert manifest["symjit_version"] == mx.__symjit_version__ and len(manifest["graph_hash"]) == 64
    assert manifest["params"]["embedded"] and manifest["params"]["count"] > 0
    # from Python
    lib = runtime.load(f"{base}.so")
    (got,) = lib[model](x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))
    # reference output computed by MXNet 1.9.1
    ref = np.load(MODELS / f"{model}-output.npy")
    assert np.abs(got - ref).max() <= 1e-4 * max(1.0, float(np.abs(ref).max()))
    # from C, with an environment that has nothing of Python
    out = out_dir / f"{model}-c.npy"
    proc = subprocess.run([exe, f"{base}.so", str(MODELS / f"{model}-input.npy"), "-o", str(out)],
                          env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(np.load(out), want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))


def _shared_deps(path: str) -> str:
    if shutil.which("ldd") is None:
        pytest.skip("needs ldd")
    return subprocess.run(["ldd", path], capture_output=True, text=True).stdout


@needs_cc
@pytest.mark.parametrize("model", ["mlp", "lenet"])
def test_library_matches_jit_from_python_and_c(model, tmp_path, run_model_exe):
    _check_model(model, tmp_path, run_model_exe)
    deps = _shared_deps(str(tmp_path / f"{model}.so"))
    assert "python" not in deps and "LLVM" not in deps and "llvmlite" not in deps
    assert "python" not in _shared_deps(run_model_exe)


@needs_cc
@pytest.mark.slow
@pytest.mark.parametrize("model", ["resnet18_v1", "mobilenet1.0"])
def test_large_library_matches_jit(model, tmp_path, run_model_exe):
    _check_model(model, tmp_path, run_model_exe)


@needs_cc
def test_library_exports_only_the_runtime_abi(mlp_lib):
    base = str(mlp_lib)[:-3]
    if shutil.which("nm") is None:
        pytest.skip("needs nm")
    names = subprocess.run(["nm", "-D", "--defined-only", f"{base}.so"], capture_output=True,
                           text=True).stdout.split()
    exported = {n for n in names if not all(c in "0123456789abcdef" for c in n) and len(n) > 1}
    exported -= {"T", "W", "i", "D", "B", "R"}
    assert {"symjit_graphs", "symjit_aot_check", "symjit_arena_alloc", "symjit_last_error"} <= exported
    assert all(n.startswith("symjit_") for n in exported), sorted(exported)
    header = Path(f"{base}.h").read_text()
    assert "const symjit_graph_desc *symjit_graphs(int32_t *count);" in header
    assert "#define MLP_INPUT0_SIZE 6272" in header


@needs_cc
def test_library_refuses_a_cpu_without_its_features(tmp_path, monkeypatch, run_model_exe):
    from symjit.codegen import aot
    # avx512er exists only on Xeon Phi: pretend the code needs it
    monkeypatch.setattr(aot, "cpu_feature_checks", lambda features: ["avx512er"])
    base = _build("mlp", tmp_path)
    with pytest.raises(mx.MXNetError, match="lacks avx512er"):
        runtime.load(f"{base}.so")
    proc = subprocess.run([run_model_exe, f"{base}.so", str(MODELS / "mlp-input.npy")], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 1 and "lacks avx512er" in proc.stderr


def test_cpu_feature_checks_maps_llvm_features():
    from symjit.codegen.aot import cpu_feature_checks
    assert cpu_feature_checks("+avx2,+fma,-avx512f,+sse4.1,+cx16") == ["avx2", "fma", "sse4.1"]
    assert cpu_feature_checks("") == []


@needs_cc
def test_c_example_rejects_bad_inputs(tmp_path, run_model_exe, mlp_lib):
    base = str(mlp_lib)[:-3]
    np.save(tmp_path / "bad.npy", np.zeros((3, 3), np.float32))
    proc = subprocess.run([run_model_exe, f"{base}.so", str(tmp_path / "bad.npy"), "-o", str(tmp_path / "y.npy")],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "must have shape (8, 784)" in proc.stderr
    assert not (tmp_path / "y.npy").exists()
    proc = subprocess.run([run_model_exe], capture_output=True, text=True)
    assert proc.returncode == 2
    proc = subprocess.run([run_model_exe, str(tmp_path / "missing.so")], capture_output=True, text=True)
    assert proc.returncode == 1


def test_python_module_entry_point_runs_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "symjit.cli", "compile", "missing-symbol.json", "--input",
                           "data:1x2", "-o", "never"], capture_output=True, text=True, cwd=os.getcwd())
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == ["symjit compile: error: symbol file 'missing-symbol.json' does not exist"]
    assert not Path("never.so").exists()


@needs_cc
def test_library_with_a_blas_named_at_run_time(tmp_path, run_model_exe):
    """SYMJIT_BLAS binds a BLAS when the library loads; results agree with the built-in kernels."""
    from symjit.codegen.blas import openblas_library
    blas = openblas_library()
    if blas is None:
        pytest.skip("no OpenBLAS from scipy")
    base = _build("lenet", tmp_path)
    env = {"PATH": "/usr/bin:/bin"}
    plain, with_blas = tmp_path / "plain.npy", tmp_path / "blas.npy"
    for out, extra in ((plain, {}), (with_blas, {"SYMJIT_BLAS": blas, "SYMJIT_BLAS_MIN_GEMM": "0"})):
        proc = subprocess.run([run_model_exe, f"{base}.so", str(MODELS / "lenet-input.npy"), "-o", str(out)],
                              env={**env, **extra}, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    a, b = np.load(plain), np.load(with_blas)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # a BLAS path that does not load leaves the built-in kernels in place
    proc = subprocess.run([run_model_exe, f"{base}.so", str(MODELS / "lenet-input.npy")],
                          env={**env, "SYMJIT_BLAS": str(tmp_path / "missing.so")}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@needs_cc
def test_weights_folded_away_are_not_embedded(tmp_path):
    """lenet's BatchNorm statistics are folded into the convolutions: only what the optimized
    code reads is embedded."""
    base = _build("lenet", tmp_path)
    manifest = json.loads(Path(f"{base}.json").read_text())
    params = mx.nd.load(str(MODELS / "lenet-0000.params"))
    lib = runtime.load(f"{base}.so")
    embedded = {n for n, _, _ in lib["lenet"].param_specs}
    assert not any(k.split(":", 1)[1] in embedded for k in params if "moving" in k)
    assert manifest["params"]["count"] == len(embedded)
