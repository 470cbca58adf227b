"""One place for the version: symjit/_version.py, which pyproject.toml reads (setuptools
dynamic metadata) and the package root re-exports."""
from __future__ import annotations

import tomllib
from pathlib import Path

import symjit
from symjit._version import __version__

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_reads_the_version_module():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "symjit._version.__version__"}
    assert symjit.__version__ == __version__ and __version__.count(".") == 2
