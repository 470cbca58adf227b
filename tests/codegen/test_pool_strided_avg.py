"""Average and sum pooling with stride > 1 (kernel == stride downsampling pools: LeNet's 2x2/2,
3x3/3, padded and ceil-convention windows): the AVX-512 2x2 kernel and the general loop (whose avg
divisors are precomputed per row and column) against the interpreter, and the tiles' path
against the portable path bit for bit except NaN payloads (both add the taps in the same order and divide by the same
float).

Tolerance against the interpreter: rtol 1e-6 (float32 sums of at most 9 taps in the same order;
the divisor is exact); NaN and inf positions must match exactly.
"""
from __future__ import annotations

import numpy as np
import pytest

from symjit.codegen.llvm.executable import compile_planned
from symjit.codegen.llvm.lower_gemm import set_native_kernels
from symjit.ir import GraphBuilder, TensorType, run
from symjit.passes.manager import compile_graph

VALUES = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, -1.5, 0.25, 3.0], np.float32)

CASES = [
    ((2, 3, 14, 14), {"kernel": (2, 2), "stride": (2, 2)}),
    ((1, 2, 9, 37), {"kernel": (2, 2), "stride": (2, 2)}),
    ((3, 1, 6, 70), {"kernel": (2, 2), "stride": (2, 2)}),
    ((1, 2, 7, 9), {"kernel": (2, 2), "stride": (2, 2), "pooling_convention": "full"}),
    ((1, 2, 7, 9), {"kernel": (2, 2), "stride": (2, 2), "pad": (1, 1)}),
    ((1, 2, 7, 9), {"kernel": (2, 2), "stride": (2, 2), "pad": (1, 1), "count_include_pad": False}),
    ((2, 2, 10, 11), {"kernel": (3, 3), "stride": (3, 3), "pooling_convention": "full"}),
    ((1, 3, 12, 300), {"kernel": (3, 3), "stride": (3, 3), "pad": (1, 1), "count_include_pad": False}),
    ((1, 2, 8, 8), {"kernel": (4, 2), "stride": (4, 2)}),
    ((1, 2, 4, 6, 8), {"kernel": (2, 2, 2), "stride": (2, 2, 2), "pad": (1, 0, 1), "count_include_pad": False}),
]


def _pool_graph(xs, attrs, ptype):
    b = GraphBuilder(name="t_pool")
    x = b.add_input("x", TensorType(tuple(xs), "float32"))
    (y,) = b.add_node("Pooling", [x], dict(attrs, pool_type=ptype))[:1]
    return b.build([y])


def _run_native(g, x, native):
    opt, _ = compile_graph(g, "inference")
    cg = compile_planned(opt, g.name)
    assert cg.native
    try:
        set_native_kernels(native)
        return cg([x])[0]
    finally:
        set_native_kernels(-1)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("ptype", ["avg", "sum"])
@pytest.mark.parametrize("values", ["special", "normal"])
def test_strided_avg_sum_pooling(case, ptype, values):
    xs, attrs = case
    rng = np.random.default_rng(len(xs) * 100 + xs[-1])
    x = (rng.choice(VALUES, xs) if values == "special" else rng.standard_normal(xs)).astype(np.float32)
    g = _pool_graph(xs, attrs, ptype)
    want = run(g, {"x": x}).outputs[0]
    tiles, portable = _run_native(g, x, 1), _run_native(g, x, 0)
    np.testing.assert_array_equal(np.isnan(tiles), np.isnan(portable))   # NaN payloads may differ
    num = ~np.isnan(portable)
    np.testing.assert_array_equal(tiles[num].view(np.int32), portable[num].view(np.int32))
    np.testing.assert_array_equal(np.isnan(tiles), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(tiles), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(tiles[finite], want[finite], rtol=1e-6, atol=1e-6)
