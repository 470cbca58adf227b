"""LARS and LBSGD (MXNet 1.9.1's large-batch optimizers) on hand-computed steps, and Updater
state save/load (MXNet's pickled get_states/set_states)."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import symjit as mx
from symjit import nd


def _step(opt, index, w, g, state=None, updater=None):
    weight, grad = nd.array(w), nd.array(g)
    (updater or mx.optimizer.get_updater(opt))(index, grad, weight)
    return weight.asnumpy()


def test_lars_scales_the_rate_per_layer():
    w, g = [3.0, 4.0], [0.6, 0.8]                       # |w| = 5, |g| = 1
    lars = mx.optimizer.create("lars", learning_rate=0.1, eta=1.0, param_idx2name={0: "fc_weight", 1: "fc_bias"})
    np.testing.assert_allclose(_step(lars, 0, w, g), [3 - 0.5 * 0.6, 4 - 0.5 * 0.8], rtol=1e-6)
    np.testing.assert_allclose(_step(lars, 1, w, g), [3 - 0.1 * 0.6, 4 - 0.1 * 0.8], rtol=1e-6)  # bias: plain lr
    lars = mx.optimizer.LARS(learning_rate=0.1, eta=1.0, rescale_grad=2.0, param_idx2name={0: "fc_weight"})
    np.testing.assert_allclose(_step(lars, 0, w, g), [2.7, 3.6], rtol=1e-6)   # |2g| = 2: rate 0.25
    lars = mx.optimizer.LARS(learning_rate=0.1, eta=1.0, wd=0.1, param_idx2name={0: "fc_weight"})
    # rate 0.1 * 5 / (1 + 0.1 * 5) = 1/3 on g + wd * w
    np.testing.assert_allclose(_step(lars, 0, w, g), [3 - (0.6 + 0.3) / 3, 4 - (0.8 + 0.4) / 3], rtol=1e-6)
    assert _step(lars, 0, [0.0, 0.0], g).tolist() == pytest.approx([-0.06, -0.08])   # |w| = 0: lr


def test_lars_momentum_correction_follows_the_scheduler():
    sched = mx.lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=1.0)
    lars = mx.optimizer.LARS(learning_rate=1.0, momentum=0.9, eta=1.0, lr_scheduler=sched,
                             param_idx2name={0: "x_bias"})
    updater = mx.optimizer.get_updater(lars)
    weight = nd.array([1.0])
    updater(0, nd.array([1.0]), weight)        # num_update 1: lr 1.0 -> mom = -1
    updater(0, nd.array([1.0]), weight)        # num_update 2: lr 0.5, momentum 0.9 * 0.5 / 1.0
    mom = -1.0
    mom = 0.45 * mom - 0.5 * 1.0
    assert weight.asnumpy()[0] == pytest.approx(1.0 - 1.0 + mom)


def test_lbsgd_accumulates_batch_scale_gradients_with_warmup():
    opt = mx.optimizer.create("lbsgd", learning_rate=0.1, batch_scale=2, warmup_strategy="linear",
                              warmup_epochs=1, updates_per_epoch=4)
    updater = mx.optimizer.get_updater(opt)
    weight = nd.array([1.0, 2.0])
    updater(0, nd.array([1.0, 1.0]), weight)
    np.testing.assert_array_equal(weight.asnumpy(), [1.0, 2.0])     # first half of the large batch
    updater(0, nd.array([3.0, -1.0]), weight)
    mult = 1 + (2 - 1) * 2 / 4                                         # linear warm-up after 2 of 4
    np.testing.assert_allclose(weight.asnumpy(), [1 - 0.1 * mult * 2.0, 2 - 0.1 * mult * 0.0], rtol=1e-6)
    opt = mx.optimizer.LBSGD(learning_rate=1.0, batch_scale=1, warmup_strategy="lars")
    w = _step(opt, 0, [3.0, 4.0], [0.0, 0.5])                          # sqrt(25 / 0.25) = 10
    np.testing.assert_allclose(w, [3.0, 4.0 - 10 * 0.5], rtol=1e-6)
    with pytest.raises(mx.base.MXNetError, match="warmup_strategy"):
        mx.optimizer.LBSGD(warmup_strategy="cosine")


@pytest.mark.parametrize("name,kw", [("adam", {}), ("sgd", {"momentum": 0.9}), ("lars", {"momentum": 0.9})])
def test_updater_states_round_trip(name, kw):
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(4).astype(np.float32) for _ in range(5)]

    def run(split):
        opt = mx.optimizer.create(name, learning_rate=0.05, **kw)
        updater = mx.optimizer.get_updater(opt)
        weight = nd.array(np.ones(4, np.float32))
        for i, g in enumerate(grads):
            if i == split:
                blob = updater.get_states(dump_optimizer=True)
                assert isinstance(pickle.loads(blob), tuple)
                updater = mx.optimizer.get_updater(mx.optimizer.create(name, learning_rate=0.05, **kw))
                updater.set_states(blob)
            updater(0, nd.array(g), weight)
        return weight.asnumpy()
    np.testing.assert_allclose(run(split=3), run(split=None), rtol=1e-6)
