"""Optimizers vs independent numpy formulations of MXNet's update rules; schedulers; Updater."""
from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

import symjit as mx
from symjit import nd
from symjit.base import MXNetError

RNG = np.random.default_rng(3)


def _run(opt, steps=3, shape=(4, 3)):
    w0 = RNG.standard_normal(shape).astype(np.float32)
    grads = [RNG.standard_normal(shape).astype(np.float32) for _ in range(steps)]
    w = nd.array(w0)
    upd = mx.optimizer.get_updater(opt)
    for g in grads:
        upd(0, nd.array(g), w)
    return w0.astype(np.float64), [g.astype(np.float64) for g in grads], w.asnumpy()


def _clip(g, c):
    return np.clip(g, -c, c) if c else g


def test_sgd_momentum_wd_clip_rescale():
    opt = mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=0.01, rescale_grad=0.5, clip_gradient=0.3)
    w, grads, got = _run(opt)
    mom = np.zeros_like(w)
    for g in grads:
        mom = 0.9 * mom - 0.1 * (_clip(0.5 * g, 0.3) + 0.01 * w)
        w = w + mom
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)


def test_plain_sgd():
    w, grads, got = _run(mx.optimizer.create("sgd", learning_rate=0.05, wd=0.1))
    for g in grads:
        w = w - 0.05 * (g + 0.1 * w)
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)


def test_nag():
    """MXNet 1.9.1's NAG (its test_optimizer.py PyNAG): w += mu^2 mom - lr (mu + 1) gw, then
    mom = mu mom - lr gw."""
    w, grads, got = _run(mx.optimizer.NAG(learning_rate=0.1, momentum=0.9, wd=0.01))
    mom = np.zeros_like(w)
    for g in grads:
        gw = g + 0.01 * w
        w = w + 0.9 ** 2 * mom - 0.1 * 1.9 * gw
        mom = 0.9 * mom - 0.1 * gw
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)


def test_nag_mom_update_op():
    w, g, mom = (RNG.standard_normal(5).astype(np.float32) for _ in range(3))
    weight, state = nd.array(w), nd.array(mom)
    nd.nag_mom_update(weight, nd.array(g), state, lr=0.1, momentum=0.9, wd=0.01, out=weight)
    new_mom = 0.9 * mom - 0.1 * (g + 0.01 * w)
    np.testing.assert_allclose(state.asnumpy(), new_mom, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(weight.asnumpy(), w + 0.9 * new_mom - 0.1 * (g + 0.01 * w), rtol=1e-5, atol=1e-6)


def test_adam_bias_correction():
    w, grads, got = _run(mx.optimizer.Adam(learning_rate=0.01, wd=0.001))
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        g = g + 0.001 * w
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        lr = 0.01 * math.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        w = w - lr * m / (np.sqrt(v) + 1e-8)
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)


def test_adamw_decoupled_decay():
    w, grads, got = _run(mx.optimizer.AdamW(learning_rate=0.01, wd=0.1))
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        lr = 0.01 * math.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        w = w - (lr * m / (np.sqrt(v) + 1e-8) + 0.1 * w)
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)


def test_adagrad_rmsprop_adadelta_ftrl_signum():
    w, grads, got = _run(mx.optimizer.AdaGrad(learning_rate=0.1))
    h = np.zeros_like(w)
    for g in grads:
        h = h + g * g
        w = w - 0.1 * g / np.sqrt(h + 1e-7)
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)

    w, grads, got = _run(mx.optimizer.RMSProp(learning_rate=0.01, gamma1=0.9))
    n = np.zeros_like(w)
    for g in grads:
        n = 0.1 * g * g + 0.9 * n
        w = w - 0.01 * g / np.sqrt(n + 1e-8)
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)

    w, grads, got = _run(mx.optimizer.RMSProp(learning_rate=0.01, centered=True))
    n = np.zeros_like(w)
    gm = np.zeros_like(w)
    d = np.zeros_like(w)
    for g in grads:
        n = 0.1 * g * g + 0.9 * n
        gm = 0.1 * g + 0.9 * gm
        d = 0.9 * d - 0.01 * g / np.sqrt(n - gm * gm + 1e-8)
        w = w + d
    np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-6)

    w, grads, got = _run(mx.optimizer.AdaDelta(rho=0.9, epsilon=1e-5))
    ag = np.zeros_like(w)
    ad = np.zeros_like(w)
    for g in grads:
        ag = 0.9 * ag + 0.1 * g * g
        delta = np.sqrt(ad + 1e-5) / np.sqrt(ag + 1e-5) * g
        ad = 0.9 * ad + 0.1 * delta * delta
        w = w - delta
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)

    w, grads, got = _run(mx.optimizer.Ftrl(learning_rate=0.1, lamda1=0.01, beta=1.0))
    z = np.zeros_like(w)
    n = np.zeros_like(w)
    for g in grads:
        z = z + g - (np.sqrt(n + g * g) - np.sqrt(n)) * w / 0.1
        n = n + g * g
        w = (np.sign(z) * 0.01 - z) / ((1.0 + np.sqrt(n)) / 0.1) * (np.abs(z) > 0.01)
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)

    w, grads, got = _run(mx.optimizer.Signum(learning_rate=0.01, momentum=0.9))
    m = np.zeros_like(w)
    for g in grads:
        m = 0.9 * m - 0.1 * g
        w = w + 0.01 * np.sign(m)
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)


def test_lamb_trust_ratio():
    w, grads, got = _run(mx.optimizer.LAMB(learning_rate=0.01, wd=0.01))
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        d = (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-6) + 0.01 * w
        w = w - 0.01 * (np.linalg.norm(w) / np.linalg.norm(d)) * d
    np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-6)


def test_schedulers():
    f = mx.lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    assert [f(i) for i in (1, 2, 3, 5, 7)] == [1.0, 1.0, 0.5, 0.25, 0.125]
    m = mx.lr_scheduler.MultiFactorScheduler(step=[2, 4], factor=0.1, base_lr=1.0)
    assert [round(m(i), 6) for i in (1, 3, 5)] == [1.0, 0.1, 0.01]
    p = mx.lr_scheduler.PolyScheduler(max_update=10, base_lr=1.0, pwr=2)
    assert p(5) == pytest.approx(0.25)
    c = mx.lr_scheduler.CosineScheduler(max_update=10, base_lr=1.0, final_lr=0.0)
    assert c(5) == pytest.approx(0.5) and c(10) == pytest.approx(0.0)
    w = mx.lr_scheduler.FactorScheduler(step=10, base_lr=1.0, warmup_steps=4, warmup_begin_lr=0.0)
    assert w(2) == pytest.approx(0.5)
    opt = mx.optimizer.SGD(learning_rate=1.0, lr_scheduler=mx.lr_scheduler.FactorScheduler(1, 0.5))
    with pytest.raises(MXNetError, match="LRScheduler"):
        opt.set_learning_rate(0.1)


def test_lr_wd_multipliers_and_update_counts():
    opt = mx.optimizer.SGD(learning_rate=0.1, wd=0.5, param_idx2name={0: "fc_weight", 1: "fc_bias"})
    assert opt._get_wd(0) == 0.5 and opt._get_wd(1) == 0.0  # MXNet: no decay on biases by name
    opt.set_lr_mult({"fc_weight": 2.0})
    assert opt._get_lr(0) == pytest.approx(0.2)
    opt._update_count(0)
    opt._update_count(0)
    opt._update_count(1)
    assert opt.num_update == 2


def test_updater_states_pickle_round_trip():
    opt = mx.optimizer.Adam()
    upd = mx.optimizer.get_updater(opt)
    w = nd.ones((3,))
    upd(0, nd.ones((3,)), w)
    blob = upd.get_states(dump_optimizer=True)
    upd2 = mx.optimizer.get_updater(mx.optimizer.Adam())
    upd2.set_states(blob)
    np.testing.assert_array_equal(upd2.states[0][0].asnumpy(), upd.states[0][0].asnumpy())
    assert isinstance(pickle.loads(upd.get_states()), dict)


def test_update_ops_mutate_states_like_mxnet():
    w = nd.array([1.0, 2.0])
    g = nd.array([1.0, 1.0])
    mom = nd.zeros((2,))
    out = nd.sgd_mom_update(w, g, mom, lr=0.1, momentum=0.9, out=w)
    assert out is w
    np.testing.assert_allclose(mom.asnumpy(), [-0.1, -0.1])
    np.testing.assert_allclose(w.asnumpy(), [0.9, 1.9], rtol=1e-6)


def test_errors():
    with pytest.raises(MXNetError, match="Cannot find optimizer"):
        mx.optimizer.create("nosuch")
    with pytest.raises(MXNetError, match="unexpected arguments"):
        mx.optimizer.SGD(learnin_rate=0.1)
    with pytest.raises(MXNetError, match="sgd_update.*shape mismatch"):
        nd.sgd_update(nd.ones((2,)), nd.ones((3,)), lr=0.1)


@pytest.mark.parametrize("make", [lambda: mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=0.01),
                                  lambda: mx.optimizer.Adam(learning_rate=0.01, wd=0.001)])
def test_large_updates_run_compiled_in_place_and_match_small_ones(make):
    # >= 65536 elements: the update op runs as one compiled kernel writing weight and states in place
    from symjit.ndarray.fastpath import MIN_ELEMENTS
    shape = (MIN_ELEMENTS // 256 + 1, 256)
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal(shape).astype(np.float32)
    grads = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
    big, small = nd.array(w0), nd.array(w0[:2])
    ub, us = mx.optimizer.get_updater(make()), mx.optimizer.get_updater(make())
    buf = big._data
    for g in grads:
        ub(0, nd.array(g), big)
        us(0, nd.array(g[:2]), small)
    assert big._data is buf
    np.testing.assert_allclose(big.asnumpy()[:2], small.asnumpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,attrs,n_states", [
    ("sgd_update", {"wd": 0.01, "rescale_grad": 0.5}, 0),
    ("sgd_mom_update", {"momentum": 0.9, "wd": 0.01, "clip_gradient": 0.3}, 1),
    ("adam_update", {"wd": 0.001, "beta1": 0.8}, 2),
    ("rmsprop_update", {"gamma1": 0.9}, 1)])
def test_updates_of_any_size_share_one_kernel_across_learning_rates(name, attrs, n_states):
    # optimizer updates run a compiled kernel whose lr / wd / rescale_grad are inputs: a changing
    # learning rate (schedules, Adam's bias correction) reuses it, and results equal the reference
    from symjit.ndarray import fastpath
    from symjit.ops.registry import get_op
    op = get_op(name)
    rng = np.random.default_rng(7)
    w = nd.array(rng.standard_normal(300).astype(np.float32))
    states = [nd.array(np.abs(rng.standard_normal(300)).astype(np.float32)) for _ in range(n_states)]
    before = None
    for step, lr in enumerate((0.1, 0.05, 0.025)):
        g = nd.array(rng.standard_normal(300).astype(np.float32))
        parsed = op.parse(dict(attrs, lr=lr))
        ref = op.compute(parsed, [w._data, g._data] + [s._data for s in states], None)
        buf = w._data
        nd.invoke(name, [w, g] + states, dict(attrs, lr=lr), out=w)
        assert w._data is buf                                   # written in place
        np.testing.assert_allclose(w.asnumpy(), ref[0], rtol=2e-6, atol=1e-7)
        for s, r in zip(states, ref[1:]):
            np.testing.assert_allclose(s.asnumpy(), r, rtol=2e-6, atol=1e-7)
        kernels = {k: v for k, v in fastpath._UPDATE_KERNELS.items() if k[0] == name}
        assert kernels and all(v is not None for v in kernels.values())
        if before is not None:
            assert kernels == before                            # no new kernel for a new lr
        before = kernels


OPTIMIZERS = [
    lambda: mx.optimizer.SGD(learning_rate=0.1),
    lambda: mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=0.01, clip_gradient=0.5),
    lambda: mx.optimizer.NAG(learning_rate=0.1, momentum=0.9),
    lambda: mx.optimizer.Adam(learning_rate=0.01, wd=0.001),
    lambda: mx.optimizer.AdaGrad(learning_rate=0.1),
    lambda: mx.optimizer.RMSProp(learning_rate=0.01, centered=True),
    lambda: mx.optimizer.Ftrl(),
    lambda: mx.optimizer.Signum(),
    lambda: mx.optimizer.LAMB(learning_rate=0.01),
    lambda: mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, multi_precision=True),
]


@pytest.mark.parametrize("make", OPTIMIZERS)
def test_updater_on_a_list_equals_one_update_per_parameter(make):
    """An Updater called with several parameters (one multi-tensor kernel call per update
    kernel) gives exactly what one call per parameter gives, for every size (1-element
    parameters take the reference path), dtype, per-parameter lr/wd multiplier and step."""
    rng = np.random.default_rng(11)
    dtype = np.float16 if make().multi_precision else np.float32
    shapes = [(1,), (3,), (70000,), (17, 5), (2,)]
    w0 = [rng.standard_normal(s).astype(dtype) for s in shapes]
    grads = [[rng.standard_normal(s).astype(dtype) for s in shapes] for _ in range(3)]

    def run(batched: bool):
        opt = make()
        opt.set_lr_mult({1: 0.5, 3: 2.0})
        opt.set_wd_mult({2: 0.0})
        upd = mx.optimizer.get_updater(opt)
        ws = [nd.array(w, dtype=dtype) for w in w0]
        for step in grads:
            gs = [nd.array(g, dtype=dtype) for g in step]
            if batched:
                upd(list(range(len(ws))), gs, ws)
            else:
                for i, (g, w) in enumerate(zip(gs, ws)):
                    upd(i, g, w)
        return [w.asnumpy() for w in ws], upd.states

    together, states_t = run(True)
    alone, states_a = run(False)
    for a, b in zip(together, alone):
        np.testing.assert_array_equal(a, b)
    assert sorted(states_t) == sorted(states_a)


def test_updater_list_with_a_repeated_parameter_applies_both_updates_in_order():
    # the second update of the same weight reads the first one's result (a flush in between)
    w_a, w_b = nd.array(np.ones(1000, np.float32)), nd.array(np.ones(1000, np.float32))
    g1, g2 = nd.array(np.full(1000, 2.0, np.float32)), nd.array(np.full(1000, 3.0, np.float32))
    upd_a = mx.optimizer.get_updater(mx.optimizer.SGD(learning_rate=0.1, momentum=0.5))
    upd_a([0, 0], [g1, g2], [w_a, w_a])
    upd_b = mx.optimizer.get_updater(mx.optimizer.SGD(learning_rate=0.1, momentum=0.5))
    upd_b(0, g1, w_b)
    upd_b(0, g2, w_b)
    np.testing.assert_array_equal(w_a.asnumpy(), w_b.asnumpy())
    assert not np.allclose(w_a.asnumpy(), 1.0 - 0.1 * 2.0)


@pytest.mark.parametrize("aggregate_num", [0, 4])
def test_updater_list_applies_earlier_updates_when_a_later_one_fails(aggregate_num):
    """Per parameter (aggregate_num 0) the update before the failing one is applied; aggregated,
    the chunk is one multi_sgd_update call, refused as a whole before anything is written (as
    MXNet's op fails its shape check)."""
    upd = mx.optimizer.get_updater(mx.optimizer.SGD(learning_rate=0.1, aggregate_num=aggregate_num))
    w0, w1 = nd.array(np.ones(100, np.float32)), nd.array(np.ones(100, np.float32))
    with pytest.raises(MXNetError, match="shape"):
        upd([0, 1], [nd.array(np.ones(100, np.float32)), nd.array(np.ones(7, np.float32))], [w0, w1])
    np.testing.assert_allclose(w0.asnumpy(), 0.9 if aggregate_num == 0 else 1.0, rtol=1e-6)


@pytest.mark.parametrize("name,raw,n_states", [
    ("sgd_update", {"lr": 0.1}, 0),                                   # wd, rescale_grad defaulted
    ("sgd_mom_update", {"lr": 0.1, "momentum": 0.9, "wd": 0.01}, 1),
    ("_adadelta_update", {"rho": 0.9, "epsilon": 1e-5, "wd": 0.1, "rescale_grad": 0.5}, 2),
    ("adam_update", {"lr": 0.01, "beta1": 0.8, "rescale_grad": 2.0}, 2)])
def test_raw_attribute_fast_path_equals_the_reference(name, raw, n_states):
    """prepare_update_raw (the optimizers' per-step path: no attribute parsing after the first
    call) gives the reference results, for hyperparameters given or left at their defaults,
    on its first (parsing) and later (cached) calls."""
    from symjit.ndarray import fastpath
    from symjit.ops.registry import get_op
    op = get_op(name)
    rng = np.random.default_rng(13)
    w = rng.standard_normal(257).astype(np.float32)
    states = [np.abs(rng.standard_normal(257)).astype(np.float32) for _ in range(n_states)]
    for step in range(3):
        g = rng.standard_normal(257).astype(np.float32)
        attrs = dict(raw, **({"lr": raw["lr"] * (step + 1)} if "lr" in raw else {}))
        ref = op.compute(op.parse(attrs), [w, g] + states, None)
        prepared = fastpath.prepare_update_raw(name, attrs, [w, g] + states)
        assert prepared is not None
        fastpath.run_updates([prepared])
        np.testing.assert_allclose(w, ref[0], rtol=2e-6, atol=1e-7)
        for s, r in zip(states, ref[1:]):
            np.testing.assert_allclose(s, r, rtol=2e-6, atol=1e-7)


def test_raw_fast_path_tells_given_from_defaulted_hyperparameters():
    # the same op and structure, first with wd given, then defaulted: two cache entries
    from symjit.ndarray import fastpath
    from symjit.ops.registry import get_op
    op = get_op("sgd_update")
    for raw in ({"lr": 0.5, "wd": 0.25, "rescale_grad": 2.0}, {"lr": 0.5}):
        w, g = np.ones(64, np.float32), np.full(64, 2.0, np.float32)
        ref = op.compute(op.parse(raw), [w, g], None)[0]
        fastpath.run_updates([fastpath.prepare_update_raw("sgd_update", raw, [w, g])])
        np.testing.assert_allclose(w, ref, rtol=1e-6)


def test_sgd_aggregated_update_uses_one_kernel_call_and_the_schedule():
    """SGD over a list of parameters (Trainer.step) counts every parameter, then takes each
    one's learning rate (with the scheduler's step) and applies all in one multi-tensor call;
    the result equals updating them one by one."""
    from symjit.ndarray import fastpath
    calls = []
    real = fastpath.run_updates

    def counting(updates, *args, **kwargs):
        calls.append(len(updates))
        return real(updates, *args, **kwargs)
    sched = mx.lr_scheduler.FactorScheduler(step=2, factor=0.5)
    opt = mx.optimizer.SGD(learning_rate=0.4, momentum=0.9, lr_scheduler=sched)
    upd = mx.optimizer.get_updater(opt)
    rng = np.random.default_rng(2)
    ws = [nd.array(rng.standard_normal(s).astype(np.float32)) for s in ((5, 4), (7,), (3, 3))]
    ref_opt = mx.optimizer.SGD(learning_rate=0.4, momentum=0.9,
                               lr_scheduler=mx.lr_scheduler.FactorScheduler(step=2, factor=0.5))
    ref_upd = mx.optimizer.get_updater(ref_opt)
    refs = [w.copy() for w in ws]
    for _ in range(5):
        gs = [nd.array(rng.standard_normal(w.shape).astype(np.float32)) for w in ws]
        fastpath.run_updates = counting
        try:
            upd([0, 1, 2], gs, ws)
        finally:
            fastpath.run_updates = real
        for i, (g, w) in enumerate(zip(gs, refs)):
            ref_upd(i, g, w)
    assert calls == [3] * 5
    for w, r in zip(ws, refs):
        np.testing.assert_array_equal(w.asnumpy(), r.asnumpy())
    assert opt.num_update == ref_opt.num_update == 5


def test_aggregated_update_over_mixed_dtypes_and_sizes():
    # float32 and float64 parameters (two kernels), a 1-element one (reference path): one
    # Updater call equals one call per parameter
    rng = np.random.default_rng(4)
    specs = [((6, 5), np.float32), ((9,), np.float64), ((1,), np.float32), ((4, 4), np.float64)]
    w0 = [rng.standard_normal(s).astype(d) for s, d in specs]
    gs = [[rng.standard_normal(s).astype(d) for s, d in specs] for _ in range(3)]

    def run(batched):
        upd = mx.optimizer.get_updater(mx.optimizer.SGD(learning_rate=0.2, momentum=0.5, wd=0.01))
        ws = [nd.array(w, dtype=w.dtype) for w in w0]
        for step in gs:
            g = [nd.array(x, dtype=x.dtype) for x in step]
            if batched:
                upd(list(range(len(ws))), g, ws)
            else:
                for i in range(len(ws)):
                    upd(i, g[i], ws[i])
        return [w.asnumpy() for w in ws]
    for a, b in zip(run(True), run(False)):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


# ---- MXNet 1.9.1 conformance: clipping order, multi-precision state, sparse, more optimizers ----

def test_adam_clips_the_decayed_gradient():
    # MXNet's adam_update clips rescale_grad * grad + wd * weight (not the raw gradient alone)
    w, grads, got = _run(mx.optimizer.Adam(learning_rate=0.01, wd=0.5, clip_gradient=0.1, rescale_grad=0.7))
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        g = np.clip(0.7 * g + 0.5 * w, -0.1, 0.1)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w = w - 0.01 * math.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (np.sqrt(v) + 1e-8)
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)


def test_sgd_multi_precision_state_is_momentum_then_master_weight():
    opt = mx.optimizer.SGD(momentum=0.9, multi_precision=True, learning_rate=0.1)
    w = nd.array(np.ones((3,)), dtype=np.float16)
    mom, master = opt.create_state_multi_precision(0, w)
    assert mom.dtype == np.float32 and master.dtype == np.float32
    np.testing.assert_array_equal(master.asnumpy(), np.ones(3))
    opt.update_multi_precision(0, w, nd.array(np.full(3, 2.0), dtype=np.float16), (mom, master))
    np.testing.assert_allclose(mom.asnumpy(), -0.2 * np.ones(3), rtol=1e-6)
    np.testing.assert_allclose(master.asnumpy(), 0.8 * np.ones(3), rtol=1e-6)
    assert w.dtype == np.float16
    # without momentum the state is (None, master)
    assert mx.optimizer.SGD(multi_precision=True).create_state_multi_precision(0, w)[0] is None


def test_set_learning_rate_with_a_scheduler_raises_user_warning():
    o = mx.optimizer.Optimizer(lr_scheduler=mx.lr_scheduler.FactorScheduler(step=1), learning_rate=0.3)
    with pytest.raises(UserWarning):
        o.set_learning_rate(0.5)
    with pytest.raises(MXNetError):
        o.set_learning_rate(0.5)


@pytest.mark.parametrize("lazy", [True, False])
def test_sgd_row_sparse_gradient_lazy_and_standard(lazy):
    w0 = RNG.standard_normal((4, 3)).astype(np.float32)
    g = np.zeros((4, 3), np.float32)
    g[1] = [1, 2, 3]
    g[3] = [-1, 0.5, 2]
    opt = mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=0.01, lazy_update=lazy)
    w = nd.array(w0).tostype("row_sparse")
    state = opt.create_state_multi_precision(0, w)
    opt.update_multi_precision(0, w, nd.array(g).tostype("row_sparse"), state)
    assert w.stype == "row_sparse"
    mom = -0.1 * (g + 0.01 * w0)
    expect = w0 + mom
    if lazy:   # rows the gradient does not store are left alone, momentum included
        expect[[0, 2]] = w0[[0, 2]]
        mom[[0, 2]] = 0
    np.testing.assert_allclose(w.asnumpy(), expect, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.asnumpy(), mom, rtol=1e-5, atol=1e-6)


def test_adamax_nadam_ftml_sgld_dcasgd_follow_mxnet_formulas():
    w, grads, got = _run(mx.optimizer.Adamax(wd=0.01))
    m, u = np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        g = g + 0.01 * w
        m = 0.9 * m + 0.1 * g
        u = np.maximum(0.999 * u, np.abs(g))
        w = w - 0.002 / (1 - 0.9 ** t) * m / u
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)

    w, grads, got = _run(mx.optimizer.Nadam())
    m, v, sched = np.zeros_like(w), np.zeros_like(w), 1.0
    for t, g in enumerate(grads, 1):
        mt = 0.9 * (1 - 0.5 * 0.96 ** (t * 0.004))
        mt1 = 0.9 * (1 - 0.5 * 0.96 ** ((t + 1) * 0.004))
        sched *= mt
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        mbar = (1 - mt) * g / (1 - sched) + mt1 * m / (1 - sched * mt1)
        w = w - 0.001 * mbar / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-6)

    w, grads, got = _run(mx.optimizer.FTML(learning_rate=0.1))
    d, v, z = np.zeros_like(w), np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        v = 0.999 * v + 0.001 * g * g
        d_t = (1 - 0.6 ** t) / 0.1 * (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
        z = 0.6 * z + 0.4 * g - (d_t - 0.6 * d) * w
        d = d_t
        w = -z / d
    np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-6)

    w, grads, got = _run(mx.optimizer.DCASGD(learning_rate=0.1, lamda=0.5))
    prev = w.copy()
    for g in grads:
        step = -0.1 * (g + 0.5 * g * g * (w - prev))
        prev, w = w, w + step
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)

    # SGLD: half an SGD step plus N(0, lr) noise from mx.random (same seed, same noise)
    w0 = np.ones((5,), np.float32)
    mx.random.seed(11)
    noise = nd.random.normal(0, math.sqrt(0.1), shape=(5,)).asnumpy()
    w = nd.array(w0)
    mx.random.seed(11)
    mx.optimizer.SGLD(learning_rate=0.1).update(0, w, nd.array(np.full(5, 2.0)), None)
    np.testing.assert_allclose(w.asnumpy(), w0 - 0.05 * 2.0 + noise, rtol=1e-5)
    assert isinstance(mx.optimizer.create("nadam"), mx.optimizer.Nadam)


def test_ftml_update_follows_mxnet_formula():
    # ftml_update's documented recurrences, computed by hand over two steps
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal(6)
    grads = [rng.standard_normal(6) for _ in range(2)]
    lr, b1, b2, eps, wd, rescale, clip = 0.05, 0.6, 0.999, 1e-8, 0.01, 0.5, 0.4
    w, d, v, z = w0.copy(), np.zeros(6), np.zeros(6), np.zeros(6)
    W, D, V, Z = (nd.array(a, dtype="float64") for a in (w0, d, v, z))
    for t, g in enumerate(grads, start=1):
        gg = np.clip(rescale * g, -clip, clip) + wd * w
        v = b2 * v + (1 - b2) * gg * gg
        d_t = (1 - b1 ** t) / lr * (np.sqrt(v / (1 - b2 ** t)) + eps)
        z = b1 * z + (1 - b1) * gg - (d_t - b1 * d) * w
        d, w = d_t, -z / d_t
        nd.ftml_update(W, nd.array(g, dtype="float64"), D, V, Z, lr=lr, t=t, wd=wd, rescale_grad=rescale,
                       clip_grad=clip, out=W)
        np.testing.assert_allclose(W.asnumpy(), w, rtol=1e-12)
        np.testing.assert_allclose(D.asnumpy(), d, rtol=1e-12)
        np.testing.assert_allclose(Z.asnumpy(), z, rtol=1e-12)
    with pytest.raises(mx.MXNetError, match="t"):
        nd.ftml_update(W, W, D, V, Z, lr=lr, t=0)
