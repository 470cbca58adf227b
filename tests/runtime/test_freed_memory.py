"""runtime.retain_freed_memory: buffers freed and allocated again every step reuse mapped pages."""
from __future__ import annotations

import os
import resource
import subprocess
import sys

import numpy as np
import pytest

from symjit import runtime

_GLIBC = sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")
pytestmark = pytest.mark.skipif(not _GLIBC, reason="malloc tuning applies to glibc only")

#: a "step": four 8 MiB buffers (32 MiB, over glibc's default trim threshold) allocated, filled, freed
_STEPS = """
import numpy as np, resource
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def step():
    bufs = [np.ones(2 << 20, np.float32) for _ in range(4)]
    del bufs
for _ in range(2):
    step()
before = faults()
for _ in range(10):
    step()
print((faults() - before) / 10)
"""


def _faults_per_step(env_value: str) -> float:
    code = "import symjit.runtime\n" + _STEPS
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "SYMJIT_RETAIN_FREED_MEMORY": env_value})
    return float(out.stdout.split()[-1])


def test_applied_on_glibc():
    assert runtime.retain_freed_memory() is True


def test_repeated_step_buffers_do_not_fault_in_new_pages():
    pages_per_step = 4 * (8 << 20) // resource.getpagesize()
    retained = _faults_per_step("1")
    default = _faults_per_step("0")
    assert retained < pages_per_step * 0.05, retained
    # glibc's own policy unmaps and re-faults them: what the setting is for
    assert default > pages_per_step * 0.2, default
