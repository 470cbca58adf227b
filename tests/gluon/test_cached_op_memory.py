"""A hybridized block keeps a bounded number of compiled signatures (and of inference fast-path
plans, which hold their entries), and its compiled code is freed with the block."""
import gc

import numpy as np

import symjit as mx
from symjit.codegen.llvm.jit import live_engines
from symjit.gluon import block as block_module, nn
from symjit.gluon.cached_op import CachedOp


def _net():
    net = nn.HybridSequential()
    net.add(nn.Dense(6, activation="relu"), nn.Dense(3))
    net.initialize()
    net.hybridize()
    return net


def _check(net, rows):
    x = np.linspace(-1, 1, rows * 5, dtype=np.float32).reshape(rows, 5)
    y = net(mx.nd.array(x)).asnumpy()
    w0, b0 = net[0].weight.data().asnumpy(), net[0].bias.data().asnumpy()
    w1, b1 = net[1].weight.data().asnumpy(), net[1].bias.data().asnumpy()
    np.testing.assert_allclose(y, np.maximum(x @ w0.T + b0, 0) @ w1.T + b1, rtol=1e-5, atol=1e-6)


def test_signatures_are_bounded_and_code_goes_with_the_block(monkeypatch):
    monkeypatch.setattr(CachedOp, "max_signatures", 3)
    monkeypatch.setattr(block_module, "_MAX_FAST_CALLS", 3)
    gc.collect()
    base = live_engines()
    net = _net()
    for rows in range(1, 13):
        _check(net, rows)
        assert net._cached_op.num_compiled <= 3
    gc.collect()
    assert live_engines() - base <= 3 + 3
    _check(net, 12)                      # recently used: still compiled
    _check(net, 1)                       # evicted: compiled again, correct
    del net
    gc.collect()
    assert live_engines() == base
