"""Shared fixtures of the CLI tests: one AOT library of the `mlp` model per session."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

MODELS = Path(os.environ.get("SYMJIT_SHARED_DIR") or Path(__file__).resolve().parents[3] / "shared") / "models"


@pytest.fixture(scope="session")
def mlp_lib(tmp_path_factory) -> Path:
    """mlp.so (with mlp.h and mlp.json beside it) built by `symjit compile`."""
    if shutil.which("cc") is None:
        pytest.skip("needs the system C compiler `cc`")
    from symjit.cli import main
    d = tmp_path_factory.mktemp("mlp")
    assert main(["compile", str(MODELS / "mlp-symbol.json"), str(MODELS / "mlp-0000.params"),
                 "--input", "data:8x784", "-q", "-o", str(d / "mlp")]) == 0
    return d / "mlp.so"
