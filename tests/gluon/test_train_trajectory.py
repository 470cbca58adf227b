"""The ordinary Gluon training loop (hybridized network under autograd.record, eager loss,
backward, Trainer SGD with momentum) on its optimized path -- compiled forward and backward
graphs, the fused eager sparse loss, the Trainer's prepared multi-tensor updates and their
reused native call plans -- follows the same trajectory over several steps as the plain path:
the network not hybridized (every op eager, op by op), the loss as separate ops, and the
SGD-momentum update applied by a float64 numpy reference to the gradients the plain path
computes. Tolerance: weights and losses within rtol 2e-4 / atol 2e-5 after every step (float32
GEMM and convolution sums in different orders; the updates themselves are exact formulas)."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit import autograd, gluon
from symjit.gluon import loss as gloss
from symjit.gluon import nn
from symjit.symbol.naming import NameManager

RTOL, ATOL = 2e-4, 2e-5
LR, MOMENTUM, WD, STEPS = 0.05, 0.9, 1e-4, 6


@pytest.fixture(autouse=True)
def fresh_names(monkeypatch):
    monkeypatch.setattr(NameManager._current, "value", NameManager(), raising=False)


def _mlp():
    net = nn.HybridSequential()
    net.add(nn.Dense(24, activation="relu", in_units=20), nn.Dense(16, activation="relu", in_units=24),
            nn.Dense(5, in_units=16))
    return net, (12, 20)


def _cnn():
    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, 3, padding=1, in_channels=3), nn.BatchNorm(in_channels=8), nn.Activation("relu"),
            nn.MaxPool2D(2), nn.Flatten(), nn.Dense(5, in_units=8 * 4 * 4))
    return net, (6, 3, 8, 8)


def _weights(net) -> list:
    """Parameter values in `collect_params` order (names differ between built networks)."""
    return [p.data().asnumpy() for p in net.collect_params().values()]


def _batch(shape):
    rs = np.random.RandomState(3)
    return rs.randn(*shape).astype(np.float32), rs.randint(0, 5, shape[0]).astype(np.float32)


def _built(build, init):
    """(network with the initial values `init`, its parameters, input shape)."""
    net, shape = build()
    net.initialize()
    params = list(net.collect_params().values())
    for p, value in zip(params, init):
        p.set_data(mx.nd.array(value))
    return net, params, shape


def _train(net, shape, update):
    """(losses, weights) after each of STEPS steps of the Gluon loop, `update(batch)` after
    each backward."""
    loss_fn = gloss.SoftmaxCrossEntropyLoss()
    x, y = _batch(shape)
    data, label = mx.nd.array(x), mx.nd.array(y)
    losses, weights = [], []
    for _ in range(STEPS):
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        update(shape[0])
        losses.append(loss.asnumpy())
        weights.append(_weights(net))
    return losses, weights


def _optimized(build, init):
    net, params, shape = _built(build, init)
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": LR, "momentum": MOMENTUM, "wd": WD})
    return _train(net, shape, trainer.step)


def _plain(build, init, monkeypatch):
    """Op by op; the update in float64 numpy (MXNet's sgd_mom_update, rescale 1/batch)."""
    monkeypatch.setattr(gloss, "_fused_nll_applies", lambda pred: False)
    net, params, shape = _built(build, init)
    w64 = [v.astype(np.float64) for v in init]
    mom = [np.zeros_like(v) for v in w64]

    def update(batch):
        for k, p in enumerate(params):
            if p.grad_req == "null":
                continue
            g = p.grad().asnumpy().astype(np.float64) / batch
            mom[k] = MOMENTUM * mom[k] - LR * (g + WD * w64[k])
            w64[k] = w64[k] + mom[k]
            p.set_data(mx.nd.array(w64[k].astype(np.float32)))
    return _train(net, shape, update)


@pytest.mark.parametrize("build", [_mlp, _cnn], ids=["mlp", "cnn"])
def test_optimized_loop_follows_the_plain_trajectory(build, monkeypatch):
    net, _ = build()
    net.initialize(mx.init.Xavier())
    init = _weights(net)
    fast = _optimized(build, init)
    plain = _plain(build, init, monkeypatch)
    for step, (lf, lp, wf, wp) in enumerate(zip(fast[0], plain[0], fast[1], plain[1])):
        np.testing.assert_allclose(lf, lp, rtol=RTOL, atol=ATOL, err_msg=f"loss, step {step}")
        assert len(wf) == len(wp)
        for k, (a, b) in enumerate(zip(wf, wp)):
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=f"parameter {k}, step {step}")
    assert fast[0][-1].mean() < fast[0][0].mean()   # it trains
