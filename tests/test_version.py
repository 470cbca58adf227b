"""One place for the version: symjit/_version.py, which pyproject.toml reads (setuptools
dynamic metadata) and the package root re-exports."""
from __future__ import annotations

from pathlib import Path

import pytest

import symjit
from symjit._version import __version__

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_reads_the_version_module():
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs tomllib (Python 3.11+)")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "symjit._version.__version__"}
    assert symjit.__symjit_version__ == __version__ and __version__.count(".") == 2
