"""Random graphs (tests/graphgen.py: elementwise chains and DAGs, broadcasts, reductions,
reshape/transpose chains, dot, SliceChannel + Concat) through the inference pipeline, the CUDA
lowering and the host emulation of the generated source, against the reference interpreter.

Tolerance: rtol 1e-4, atol 1e-5 (float32; fused expressions and reductions round in a
different order than the op-by-op reference). The default run checks a few graphs; the
`slow` test many more.
"""
from __future__ import annotations

import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from cuda_util import assert_close, emulate_graph, needs_cxx
from graphgen import feeds, random_graph

pytestmark = needs_cxx


def _check(g, seed: int = 0) -> None:
    f = feeds(g, np.random.default_rng(seed))
    with tempfile.TemporaryDirectory(prefix="symjit-cuda-test-") as tmp:
        got, want, plan = emulate_graph(g, f, tmp)
        for k, (a, b) in enumerate(zip(got, want)):
            assert_close(a, b, rtol=1e-4, atol=1e-5, what=f"output {k} of\n{g}")


@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(random_graph())
def test_random_graphs_match_the_interpreter(g):
    _check(g)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graph(max_nodes=24))
def test_many_random_graphs_match_the_interpreter(g):
    _check(g, seed=1)


def test_gemm_epilogue_that_ignores_the_product():
    """A dense layer whose fused epilogue does not read the product (zeros_like of it, plus
    another input): the generated GEMM must still compile warning-free (nvcc -Werror rules)."""
    from symjit.ir import GraphBuilder, TensorType
    b = GraphBuilder(name="ignored_product")
    x = b.add_input("x", TensorType((4, 8), "float32"))
    w = b.add_input("w", TensorType((5, 8), "float32"))
    c = b.add_input("c", TensorType((4, 5), "float32"))
    y = b.add_node("FullyConnected", [x, w], {"num_hidden": 5, "no_bias": True})[0]
    z = b.add_node("zeros_like", [y])[0]
    _check(b.build([b.add_node("elemwise_add", [z, c])[0]]))
