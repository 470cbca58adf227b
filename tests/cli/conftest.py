"""Shared fixtures of the CLI tests: one AOT library of the `mlp` model per session."""
from __future__ import annotations

import shutil
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
