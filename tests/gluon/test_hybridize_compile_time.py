"""Compile time of hybridized blocks must not grow exponentially with chained elementwise
layers (each relu reads its input several times, so fused expressions share subtrees)."""
import time

import numpy as np
import pytest

import symjit as mx
from symjit.gluon import nn


@pytest.mark.parametrize("depth", [14, 40])
def test_relu_chain_compiles_fast_for_a_second_input_shape(depth):
    net = nn.HybridSequential()
    for _ in range(depth):
        net.add(nn.Activation("relu"))
    net.initialize()
    net.hybridize()
    for shape in [(2, 3), (4, 5)]:
        x = np.linspace(-2, 2, int(np.prod(shape)), dtype=np.float32).reshape(shape)
        t0 = time.perf_counter()
        y = net(mx.nd.array(x)).asnumpy()
        elapsed = time.perf_counter() - t0
        np.testing.assert_array_equal(y, np.maximum(x, 0))
        assert elapsed < 10.0, f"{depth} relus at {shape}: compiled in {elapsed:.1f} s"   # takes well under 1 s
