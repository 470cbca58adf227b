"""codegen/blas.py: symjit's copy of OpenBLAS uses the host's AVX-512 kernels unless told not to,
and the process environment is left as the user set it."""
import json
import os
import subprocess
import sys

import pytest

from symjit.codegen import blas

PROBE = ("import os, json, symjit; from symjit.codegen import blas; "
         "print(json.dumps([blas.openblas_core_name(), os.environ.get('OPENBLAS_CORETYPE')]))")


def _probe(**env):
    full = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "SYMJIT_BLAS_CORETYPE")}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", PROBE], env=full, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


pytestmark = pytest.mark.skipif(blas.openblas_library() is None, reason="scipy's OpenBLAS not found")


@pytest.mark.skipif(not blas.host_has_avx512(), reason="host has no AVX-512")
def test_avx512_host_gets_skylakex_kernels_and_env_is_restored():
    core, env = _probe(OPENBLAS_CORETYPE="Haswell")
    assert core == "SkylakeX"
    assert env == "Haswell"
    core, env = _probe()
    assert core == "SkylakeX" and env is None


def test_native_defers_to_openblas_and_its_environment():
    core, env = _probe(OPENBLAS_CORETYPE="Haswell", SYMJIT_BLAS_CORETYPE="native")
    assert core == "Haswell" and env == "Haswell"


def test_explicit_core_name_is_used():
    core, _ = _probe(SYMJIT_BLAS_CORETYPE="Haswell")
    assert core == "Haswell"
