"""symjit_nn_gemm with K long enough to be split into blocks (the tiles keep the part of the
broadcast operand they read per block in L1): every transpose form against numpy, float32
tolerance scaled by sqrt(K)."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from symjit.codegen.llvm.lower_gemm import GemmDesc, bind_native_kernels
from symjit.runtime import native_library


def _gemm(A, B, m, n, k, ta, tb, bias=None):
    bind_native_kernels()
    fn = native_library().symjit_nn_gemm
    fn.argtypes = [ctypes.c_void_p] * 7
    fn.restype = None
    C = np.full((m, n), np.nan, np.float32)
    d = GemmDesc(1, m, n, k, ta, tb, 0, 0, m * n, 1 if bias is not None else 0)
    fn(ctypes.addressof(d), A.ctypes.data, B.ctypes.data, None if bias is None else bias.ctypes.data,
       C.ctypes.data, None, None)
    return C


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("m,n,k", [(37, 70, 2600), (300, 40, 1500), (5, 33, 5000)])
def test_long_k_every_form(ta, tb, m, n, k):
    rng = np.random.default_rng(k + m)
    A = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    B = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    want = (A.T if ta else A).astype(np.float64) @ (B.T if tb else B).astype(np.float64) + bias
    got = _gemm(A, B, m, n, k, ta, tb, bias)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.sqrt(k) * 4)
