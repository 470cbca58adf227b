"""Helpers for the `mpi` tests: they run in every worker of `symjit launch -n 2 -- pytest -m mpi`
(each worker runs the same tests in the same order, so collectives match)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest


def world():
    """(rank, size) of this pytest process's worker group."""
    from symjit.kvstore import comm
    g = comm.get()
    return g.rank, g.size


@pytest.fixture
def group():
    """The worker group; skips unless the tests run on at least 2 workers."""
    from symjit.kvstore import comm
    g = comm.get()
    if g.size < 2:
        pytest.skip("needs 2 MPI workers: run under `python -m symjit.launch -n 2 -- python -m pytest -m mpi`")
    yield g
    g.barrier("end of test")


def clean_env(**extra) -> dict:
    """Environment for a nested launch: without this job's MPI/launcher variables."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "MPI_LOCAL", "OMPI_", "PMIX_", "HYDRA_", "SYMJIT_LAUNCH"))}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def launch(script: str, n: int = 2, timeout: float = 120, args=(), **env) -> subprocess.CompletedProcess:
    """Run `script` (a file path) on n workers with `symjit launch`; capture output."""
    cmd = [sys.executable, "-m", "symjit.launch", "-n", str(n), "--timeout", "5", "--",
           sys.executable, script, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=clean_env(**env),
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
