"""Shared fixtures of the CLI tests: one AOT library of the `mlp` model per session, and the C
example (runtime/examples/run_model.c) built with the system C compiler."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from shared_data import SMALL_MODELS


@pytest.fixture(scope="session")
def mlp_lib(tmp_path_factory) -> Path:
    """mlp.so (with mlp.h and mlp.json beside it) built by `symjit compile`."""
    if shutil.which("cc") is None:
        pytest.skip("needs the system C compiler `cc`")
    from symjit.cli import main
    d = tmp_path_factory.mktemp("mlp")
    assert main(["compile", str(SMALL_MODELS / "mlp-symbol.json"), str(SMALL_MODELS / "mlp-0000.params"),
                 "--input", "data:8x784", "-q", "-o", str(d / "mlp")]) == 0
    return d / "mlp.so"


@pytest.fixture(scope="session")
def run_model_exe(tmp_path_factory) -> str:
    """The C example, built with the system C compiler."""
    if shutil.which("cc") is None:
        pytest.skip("needs the system C compiler `cc`")
    root = Path(__file__).resolve().parents[2]
    exe = tmp_path_factory.mktemp("example") / "run_model"
    subprocess.run(["cc", "-O2", "-Wall", "-Werror", f"-I{root / 'runtime'}", str(root / "runtime" / "examples" /
                    "run_model.c"), "-o", str(exe), "-ldl"], check=True, capture_output=True)
    return str(exe)
