"""`symjit compile --target cuda`: the files it writes, what the library exports, and its
failures (one line, exit status 1, no partial files)."""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import io
import json
import shutil
import subprocess

import pytest

from cuda_util import have_nvcc, model_plan
from shared_data import SMALL_MODELS, model_path
from symjit.base import MXNetError
from symjit.cli import main
from symjit.codegen.cuda import render

MLP = [str(SMALL_MODELS / "mlp-symbol.json"), str(SMALL_MODELS / "mlp-0000.params")]


def _one_line_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("symjit compile: error: "), err
    return lines[0]


@pytest.fixture(scope="module")
def mlp_cuda(tmp_path_factory):
    """mlp.so/.cu/.h/.json built by `symjit compile --target cuda` (and the --json output)."""
    if not have_nvcc():
        pytest.skip("needs the CUDA compiler nvcc (not found)")
    d = tmp_path_factory.mktemp("mlp_cuda")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["compile", *MLP, "--input", "data:8x784", "--target", "cuda", "-q", "--json",
                   "-o", str(d / "mlp.so")])
    assert rc == 0
    return d, json.loads(buf.getvalue())


def test_compile_writes_library_source_header_and_manifest(mlp_cuda):
    d, printed = mlp_cuda
    assert sorted(p.name for p in d.iterdir()) == ["mlp.cu", "mlp.h", "mlp.json", "mlp.so"]
    manifest = json.loads((d / "mlp.json").read_text())
    assert printed["manifest"] == str(d / "mlp.json")
    assert (printed["library"], printed["header"], printed["source"]) == (str(d / "mlp.so"), str(d / "mlp.h"),
                                                                         str(d / "mlp.cu"))
    assert (manifest["library"], manifest["header"], manifest["source"]) == ("mlp.so", "mlp.h", "mlp.cu")
    assert manifest["target"]["name"] == "cuda" and manifest["target"]["archs"] == ["sm_80", "sm_90"]
    assert manifest["target"]["ptx"] == "compute_90" and manifest["target"]["min_compute_capability"] == "8.0"
    assert manifest["inputs"] == [{"name": "data", "shape": [8, 784], "dtype": "float32"}]
    assert manifest["outputs"][0]["shape"] == [8, 10]
    assert manifest["params"]["embedded"] and manifest["params"]["count"] == 6
    assert manifest["library_sha256"] == hashlib.sha256((d / "mlp.so").read_bytes()).hexdigest()
    header = (d / "mlp.h").read_text()
    for decl in ("symjit_graphs", "symjit_cuda_run", "symjit_cuda_workspace_size", "symjit_aot_check",
                 "#define MLP_INPUT0_ELEMS 6272", "#define MLP_OUTPUT0_ELEMS 80", "HOST pointers", "DEVICE-pointer"):
        assert decl in header


def test_the_compiled_source_is_the_emulation_tested_source(mlp_cuda):
    """OUT.cu is exactly what the lowering renders for the model (deterministic), i.e. the text
    that test_cuda_models.py runs through the host emulation is the text nvcc compiled."""
    d, _ = mlp_cuda
    plan, _ = model_plan("mlp")
    assert (d / "mlp.cu").read_text() == render(plan)


def test_library_exports_only_the_symjit_abi(mlp_cuda):
    d, _ = mlp_cuda
    if shutil.which("nm") is None:
        pytest.skip("needs nm")
    out = subprocess.run(["nm", "-D", "--defined-only", str(d / "mlp.so")], capture_output=True, text=True).stdout
    names = {ln.split()[-1] for ln in out.splitlines() if ln.strip()}
    assert {"symjit_graphs", "symjit_cuda_run", "symjit_cuda_init", "symjit_cuda_release",
            "symjit_cuda_workspace_size", "symjit_aot_check"} <= names
    assert all(n.startswith("symjit_") for n in names), names
    lib = ctypes.CDLL(str(d / "mlp.so"))
    lib.symjit_cuda_workspace_size.restype = ctypes.c_int64
    assert lib.symjit_cuda_workspace_size() == json.loads((d / "mlp.json").read_text())["workspace_bytes"]


def test_loading_without_a_gpu_is_a_clear_error(mlp_cuda):
    d, _ = mlp_cuda
    lib = ctypes.CDLL(str(d / "mlp.so"))
    lib.symjit_aot_check.restype = ctypes.c_char_p
    problem = lib.symjit_aot_check()
    if problem is None:
        pytest.skip("a usable GPU is present")
    assert b"no usable NVIDIA GPU" in problem or b"compute capability" in problem
    from symjit import runtime
    with pytest.raises(MXNetError, match="symjit CUDA library mlp"):
        runtime.load(str(d / "mlp.so"))
    rc = main(["run", str(d / "mlp.so"), "--input", str(model_path("mlp-input.npy"))])
    assert rc == 1


def test_unsupported_op_is_one_line_and_writes_nothing(tmp_path, capsys):
    import symjit as mx
    src = tmp_path / "src"
    src.mkdir()
    mx.sym.topk(mx.sym.var("data"), k=2, ret_typ="value").save(str(src / "topk-symbol.json"))
    out = tmp_path / "out"
    out.mkdir()
    rc = main(["compile", str(src / "topk-symbol.json"), "--input", "data:4x9", "--target", "cuda", "-q",
               "-o", str(out / "topk")])
    line = _one_line_error(capsys.readouterr().err)
    assert rc == 1 and "no CUDA lowering for op topk" in line
    assert list(out.iterdir()) == []


def test_failing_nvcc_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch):
    fake = tmp_path / "fake-nvcc"
    fake.write_text("#!/bin/sh\necho 'nvcc fatal   : simulated failure' >&2\nexit 1\n")
    fake.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("SYMJIT_NVCC", str(fake))
    rc = main(["compile", *MLP, "--input", "data:8x784", "--target", "cuda", "-q", "-o", str(out / "mlp")])
    line = _one_line_error(capsys.readouterr().err)
    assert rc == 1 and "nvcc" in line and "simulated failure" in line
    assert list(out.iterdir()) == []
