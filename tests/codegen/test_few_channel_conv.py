"""Convolutions with few input channels (1-3: an image network's stem), alone or followed by relu
and max pooling (the fused `_conv_pool` node), against the interpreter's numpy references.

Their implicit GEMM has only C x KH x KW (9..147) steps per tile, so the tiles' weight layout
matters: the kernel library reads the weights by columns (one broadcast pointer, constant
offsets on whole tiles: implicit_weights_by_columns, MM_TILE_KLOOP) unless the tuning override
`weight_rows` keeps them by rows; a fused 2x2 stride-2 max pooling reads the convolution rows
directly (conv_pool_rows_2w) unless `pool_rows_tmp` sends it through the general rows pass.
Every geometry runs each way and must give the same values bit for bit (the same products summed
in the same order, the same maxima), all within the convolution tolerance of the reference (rtol 1e-4, atol 1e-5 x the output's scale). Geometries are drawn at random
(seeded): kernel 3/5/7, stride 1/2, padding 0..k//2, batch 1/8, 1-3 channels, filter counts that
are and are not multiples of the tile rows.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from symjit.codegen.llvm.executable import compile_planned
from symjit.codegen.llvm.lower_gemm import TUNE_CONV_VALUES, TUNE_KEYS, kernel_library
from symjit.ir import GraphBuilder, TensorType, run
from symjit.passes.manager import compile_graph


def _tune(value: int) -> None:
    fn = kernel_library().symjit_nn_tune
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_int64, ctypes.c_int64]
    fn(TUNE_KEYS["conv"], value)


def _geometries(count: int, seed: int = 7):
    """(data shape, filters, kernel, stride, pad, relu, pool or None) drawn at random."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        k = int(rng.choice([3, 5, 7]))
        s = int(rng.choice([1, 2]))
        p = int(rng.integers(0, k // 2 + 1))
        n = int(rng.choice([1, 8]))
        c = int(rng.integers(1, 4))
        h, w = (int(v) for v in rng.integers(k + 4, 40, size=2))
        f = int(rng.choice([4, 8, 13, 16, 24, 32]))
        relu = bool(rng.integers(0, 2))
        pool = None if rng.integers(0, 3) == 0 else {"kernel": (2, 2), "stride": (2, 2)} if rng.integers(0, 2) \
            else {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}
        out.append(((n, c, h, w), f, k, s, p, relu, pool))
    return out


def _net(xs, f, k, s, p, relu, pool):
    b = GraphBuilder(name="few_channel_conv")
    x = b.add_input("x", TensorType(xs, "float32"))
    w = b.add_input("w", TensorType((f, xs[1], k, k), "float32"))
    bias = b.add_input("b", TensorType((f,), "float32"))
    y = b.add_node("Convolution", [x, w, bias], {"num_filter": f, "kernel": (k, k), "stride": (s, s),
                                                 "pad": (p, p)})[0]
    if relu:
        y = b.add_node("relu", [y])[0]
    if pool is not None:
        y = b.add_node("Pooling", [y], dict({"pool_type": "max"}, **pool))[0]
    return b.build([y])


@pytest.mark.parametrize("case", _geometries(14), ids=lambda c: f"x{c[0]}f{c[1]}k{c[2]}s{c[3]}p{c[4]}"
                         f"{'r' if c[5] else ''}{'pool' if c[6] else ''}")
def test_few_channel_conv_matches_reference_on_every_path(case):
    xs, f, k, s, p, relu, pool = case
    g = _net(xs, f, k, s, p, relu, pool)
    rng = np.random.default_rng(sum(xs) + f)
    feeds = {v.name: rng.standard_normal(v.type.shape).astype(np.float32) for v in g.inputs}
    opt, _ = compile_graph(g, "inference")
    cg = compile_planned(opt, g.name)
    assert cg.native
    arrays = [np.ascontiguousarray(feeds[v.name]) for v in opt.inputs]
    got = {}
    try:
        for setting in ("default", "weight_rows", "pool_rows_tmp"):
            _tune(TUNE_CONV_VALUES.get(setting, 0))
            got[setting] = np.array(cg(arrays)[0])
    finally:
        _tune(0)
    np.testing.assert_array_equal(got["default"], got["weight_rows"])
    np.testing.assert_array_equal(got["default"], got["pool_rows_tmp"])
    ref = run(g, feeds).outputs[0]
    assert got["default"].shape == ref.shape
    scale = max(float(np.abs(ref).max()), 1.0)
    np.testing.assert_allclose(got["default"], ref, rtol=1e-4, atol=1e-5 * scale)
