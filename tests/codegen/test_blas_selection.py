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


def test_sgemm_comes_from_the_library_without_importing_scipy_linalg():
    """The kernels' sgemm is the library's own symbol, found without importing scipy.linalg
    (a third of a second on a model's first call), and it computes a GEMM."""
    import ctypes
    import numpy as np
    code = ("import sys; from symjit.codegen import blas; a = blas.sgemm_address(); "
            "print(a, 'scipy.linalg' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    addr, imported = out.stdout.split()
    assert int(addr) != 0 and imported == "False"
    # column-major C (3x5) = A (3x4) @ B (4x5) through the address, checked against numpy
    f = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 13)(blas.sgemm_address())
    rng = np.random.default_rng(0)
    a, b = rng.random((3, 4), np.float32), rng.random((4, 5), np.float32)
    af, bf = np.asfortranarray(a), np.asfortranarray(b)
    c = np.zeros((3, 5), np.float32, order="F")
    keep = [ctypes.c_char(b"N"), ctypes.c_int32(3), ctypes.c_int32(5), ctypes.c_int32(4),
            ctypes.c_float(1.0), ctypes.c_float(0.0)]
    trans, m, n, k, one, zero = (ctypes.addressof(x) for x in keep)
    f(trans, trans, m, n, k, one, af.ctypes.data, m, bf.ctypes.data, k, zero, c.ctypes.data, m)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
