"""MXNet 1.9.1's aggregated and mixed-precision optimizer paths: SGD / NAG / LAMB / LARS / AdamW
give the same weights per parameter (aggregate_num 0 or 1) and aggregated (> 1, the
`multi_*` / `preloaded_multi_*` kernels), match numpy references, and `Updater` states
(multi-precision ones included) survive get_states / set_states.

Tolerances: float32 weights rtol 1e-5 / atol 1e-6 against float64 references (1e-4 after many
steps); float16 weights 2e-3 (fp16 rounding of the cast master copy)."""
from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

import symjit as mx
from symjit import nd
from symjit.optimizer import optimizer as opt_mod

RNG = np.random.default_rng(11)
SHAPES = [(4, 3), (5,), (2, 3, 2), (6,), (3, 3)]
NAMES = ["fc1_weight", "fc1_bias", "conv_weight", "bn_gamma", "out_weight"]


def _data(steps=3, dtype=np.float32):
    w0 = [RNG.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [[RNG.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(steps)]
    return [w.astype(dtype) for w in w0], [[g.astype(dtype) for g in step] for step in grads]


def _updater(make_opt):
    """An Updater of a new optimizer with the multipliers every test here uses."""
    opt = make_opt()
    opt.set_lr_mult({1: 0.5, 3: 2.0})
    opt.set_wd_mult({2: 0.0})
    return mx.optimizer.get_updater(opt)


def _steps(upd, ws, grads, batched=True):
    """Apply each step of `grads` to the NDArrays `ws` (all parameters in one call when batched)."""
    for step in grads:
        gs = [nd.array(g, dtype=g.dtype) for g in step]
        if batched:
            upd(list(range(len(ws))), gs, ws)
        else:
            for i, (g, w) in enumerate(zip(gs, ws)):
                upd(i, g, w)


def _train(make_opt, w0, grads, batched=True):
    """Weights (numpy) after `grads` steps through a new Updater, and the Updater."""
    upd = _updater(make_opt)
    ws = [nd.array(w, dtype=w.dtype) for w in w0]
    _steps(upd, ws, grads, batched)
    return [w.asnumpy() for w in ws], upd


def _same(a, b, **tol):
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.astype(np.float64), y.astype(np.float64), **tol)


@pytest.fixture
def multi_calls(monkeypatch):
    """Names of the multi-tensor ops the optimizers call."""
    calls = []
    real = opt_mod._apply_multi

    def spy(op_name, groups, trailing, **attrs):
        calls.append((op_name, len(groups)))
        return real(op_name, groups, trailing, **attrs)
    monkeypatch.setattr(opt_mod, "_apply_multi", spy)
    return calls


# ------------------------------------------------------------------------------------------
# SGD
# ------------------------------------------------------------------------------------------

def ref_sgd(w0, grads, lr, momentum, wd, lr_mult, wd_mult, rescale=1.0, clip=None):
    ws = [w.astype(np.float64) for w in w0]
    moms = [np.zeros_like(w) for w in ws]
    for step in grads:
        for i, g in enumerate(step):
            g = rescale * g.astype(np.float64)
            if clip:
                g = np.clip(g, -clip, clip)
            lri, wdi = lr * lr_mult.get(i, 1.0), wd * wd_mult.get(i, 1.0)
            moms[i] = momentum * moms[i] - lri * (g + wdi * ws[i])
            ws[i] = ws[i] + moms[i]
    return ws


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_aggregated_equals_per_parameter_and_reference(momentum, multi_calls):
    w0, grads = _data()
    kw = dict(learning_rate=0.1, momentum=momentum, wd=0.01, rescale_grad=0.8, clip_gradient=1.5)
    results = {agg: _train(lambda: mx.optimizer.SGD(aggregate_num=agg, **kw), w0, grads)[0] for agg in (0, 1, 2, 4)}
    calls = list(multi_calls)
    one_by_one = _train(lambda: mx.optimizer.SGD(**kw), w0, grads, batched=False)[0]
    for agg in (0, 1, 2, 4):
        _same(results[agg], one_by_one, rtol=1e-6, atol=1e-7)
    want = ref_sgd(w0, grads, 0.1, momentum, 0.01, {1: 0.5, 3: 2.0}, {2: 0.0}, 0.8, 1.5)
    _same(results[4], want, rtol=1e-5, atol=1e-6)
    name = "multi_sgd_mom_update" if momentum else "multi_sgd_update"
    # 5 dense parameters, 3 steps: aggregate_num 0 -> one call of 5 per step (the Updater hands
    # SGD the whole list: the same results as one parameter at a time), 1 -> 5 calls of 1 per step
    # (MXNet's SGD takes its multi-tensor kernel for one parameter too), 2 -> 2+2+1, 4 -> 4+1
    assert calls == [(name, 5)] * 3 + [(name, 1)] * 15 + [(name, 2), (name, 2), (name, 1)] * 3 \
        + [(name, 4), (name, 1)] * 3


def test_default_aggregation_follows_the_environment(monkeypatch):
    monkeypatch.delenv("MXNET_OPTIMIZER_AGGREGATION_SIZE", raising=False)
    assert mx.optimizer.SGD().aggregate_num == 0 and mx.optimizer.LAMB().aggregate_num == 0
    monkeypatch.setenv("MXNET_OPTIMIZER_AGGREGATION_SIZE", "70")
    assert mx.optimizer.SGD().aggregate_num == 70 and mx.optimizer.LARS().aggregate_num == 70
    assert mx.optimizer.LAMB().aggregate_num == 45 and mx.optimizer.NAG().aggregate_num == 0
    assert mx.optimizer.SGD(aggregate_num=2).aggregate_num == 2


@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("agg", [0, 3])
def test_sgd_multi_precision_fp16(momentum, agg, multi_calls):
    """float16 weights with multi_precision: the float32 master copies follow the float32
    reference; the weights are their casts; aggregated updates use multi_mp_sgd[_mom]_update."""
    w0, grads = _data(dtype=np.float16)
    w_got, upd = _train(lambda: mx.optimizer.SGD(learning_rate=0.1, momentum=momentum, wd=0.01,
                                                 multi_precision=True, aggregate_num=agg), w0, grads)
    want = ref_sgd(w0, grads, 0.1, momentum, 0.01, {1: 0.5, 3: 2.0}, {2: 0.0})
    for i, w in enumerate(w_got):
        mom, master = upd.states[i]
        assert w.dtype == np.float16 and master.dtype == np.float32
        np.testing.assert_allclose(master.asnumpy(), want[i], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(w, master.asnumpy().astype(np.float16))
        assert (mom is None) == (momentum == 0.0)
    expect = "multi_mp_sgd_mom_update" if momentum else "multi_mp_sgd_update"
    assert multi_calls == ([(expect, 3), (expect, 2)] if agg else [(expect, 5)]) * 3


def test_sgd_aggregated_groups_by_dtype(multi_calls):
    opt = mx.optimizer.SGD(learning_rate=0.1, aggregate_num=4)
    upd = mx.optimizer.get_updater(opt)
    ws = [nd.ones(3, dtype=np.float32), nd.ones(3, dtype=np.float64), nd.ones(3, dtype=np.float32)]
    upd([0, 1, 2], [nd.ones(3, dtype=w.dtype) for w in ws], ws)
    assert sorted(multi_calls) == [("multi_sgd_update", 1), ("multi_sgd_update", 2)]
    for w in ws:
        np.testing.assert_allclose(w.asnumpy(), 0.9, rtol=1e-6)


# ------------------------------------------------------------------------------------------
# NAG
# ------------------------------------------------------------------------------------------

def test_nag_multi_precision_follows_mp_nag_mom_update():
    w0, grads = _data(dtype=np.float16)
    w_got, upd = _train(lambda: mx.optimizer.NAG(learning_rate=0.1, momentum=0.9, wd=0.01, multi_precision=True),
                        w0, grads)
    for i in range(len(SHAPES)):
        w32, mom = w0[i].astype(np.float64), np.zeros(SHAPES[i])
        lr, wd = 0.1 * {1: 0.5, 3: 2.0}.get(i, 1.0), 0.01 * (0.0 if i == 2 else 1.0)
        for step in grads:
            g = step[i].astype(np.float64)
            m = 0.9 * mom
            w32_new = w32 - m + 1.9 * (m - lr * (g + wd * w32))
            mom, w32 = m - lr * (g + wd * w32_new), w32_new
        np.testing.assert_allclose(upd.states[i][1].asnumpy(), w32, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(upd.states[i][0].asnumpy(), mom, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(w_got[i], upd.states[i][1].asnumpy().astype(np.float16))


def test_nag_aggregated_equals_per_parameter():
    w0, grads = _data()
    kw = dict(learning_rate=0.1, momentum=0.9, wd=0.01)
    _same(_train(lambda: mx.optimizer.NAG(aggregate_num=3, **kw), w0, grads)[0],
          _train(lambda: mx.optimizer.NAG(**kw), w0, grads, batched=False)[0], rtol=0, atol=0)


# ------------------------------------------------------------------------------------------
# LAMB, LARS, AdamW
# ------------------------------------------------------------------------------------------

def ref_lamb(w0, grads, lr, wd, b1=0.9, b2=0.999, eps=1e-6):
    out = []
    for i, w in enumerate(w0):
        w = w.astype(np.float64)
        m, v = np.zeros_like(w), np.zeros_like(w)
        lri, wdi = lr * {1: 0.5, 3: 2.0}.get(i, 1.0), wd * (0.0 if i == 2 else 1.0)
        for t, step in enumerate(grads, 1):
            g = step[i].astype(np.float64)
            m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
            d = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps) + wdi * w
            r1, r2 = np.linalg.norm(w), np.linalg.norm(d)
            w = w - lri * (r1 / r2 if r1 > 0 and r2 > 0 else 1.0) * d
        out.append(w)
    return out


@pytest.mark.parametrize("mp", [False, True])
def test_lamb_aggregated_equals_single_and_reference(mp):
    dtype = np.float16 if mp else np.float32
    w0, grads = _data(dtype=dtype)
    kw = dict(learning_rate=0.01, wd=0.01, multi_precision=mp)
    single, _ = _train(lambda: mx.optimizer.LAMB(aggregate_num=1, **kw), w0, grads)
    multi, upd = _train(lambda: mx.optimizer.LAMB(aggregate_num=2, **kw), w0, grads)
    want = ref_lamb(w0, grads, 0.01, 0.01)
    if mp:
        masters = [upd.states[i][0].asnumpy() for i in range(len(SHAPES))]
        _same(masters, want, rtol=1e-5, atol=1e-5)
        _same(multi, [m.astype(np.float16) for m in masters], rtol=0, atol=0)
        _same(single, multi, rtol=2e-3, atol=2e-3)
    else:
        _same(multi, want, rtol=1e-5, atol=1e-6)
        _same(single, multi, rtol=1e-5, atol=1e-6)


def ref_lars(w0, grads, lr, momentum, wd, eta, eps, rescale):
    out = []
    for i, w in enumerate(w0):
        w, mom = w.astype(np.float64), np.zeros(SHAPES[i])
        wdi = wd if NAMES[i].endswith("_weight") else 0.0
        for step in grads:
            g = step[i].astype(np.float64)
            lri = lr
            wn, gn = np.linalg.norm(w), np.linalg.norm(g) * rescale
            if not NAMES[i].endswith(("gamma", "beta", "bias")) and wn > 0 and gn > 0:
                lri = lr * eta * wn / (gn + wdi * wn + eps)
            mom = momentum * mom - lri * (rescale * g + wdi * w)
            w = w + mom
        out.append(w)
    return out


@pytest.mark.parametrize("agg", [0, 2, 4])
def test_lars_multi_kernels_match_reference(agg, multi_calls):
    w0, grads = _data()
    opt = mx.optimizer.LARS(learning_rate=0.5, momentum=0.9, wd=0.01, eta=0.01, eps=1e-6, rescale_grad=0.7,
                            aggregate_num=agg, param_idx2name=dict(enumerate(NAMES)))
    ws = [nd.array(w) for w in w0]
    _steps(mx.optimizer.get_updater(opt), ws, grads)
    want = ref_lars(w0, grads, 0.5, 0.9, 0.01, 0.01, 1e-6, 0.7)
    _same([w.asnumpy() for w in ws], want, rtol=1e-4, atol=1e-5)
    assert {c[0] for c in multi_calls} == {"preloaded_multi_sgd_mom_update"}
    assert max(c[1] for c in multi_calls) == max(agg, 1)


def test_adamw_multi_precision_and_aggregated_equal_single():
    w0, grads = _data()
    kw = dict(learning_rate=0.01, wd=0.1, eta=0.5, rescale_grad=0.9)
    single, _ = _train(lambda: mx.optimizer.AdamW(**kw), w0, grads)
    multi, _ = _train(lambda: mx.optimizer.AdamW(aggregate_num=3, **kw), w0, grads)
    _same(multi, single, rtol=1e-5, atol=1e-6)
    w16, g16 = _data(dtype=np.float16)
    mp_single, upd = _train(lambda: mx.optimizer.AdamW(multi_precision=True, **kw), w16, g16)
    mp_multi, _ = _train(lambda: mx.optimizer.AdamW(multi_precision=True, aggregate_num=3, **kw), w16, g16)
    _same(mp_multi, mp_single, rtol=0, atol=0)
    for i, w in enumerate(w16):   # the master follows the float32 formula on the fp16 inputs
        w = w.astype(np.float64)
        m, v = np.zeros_like(w), np.zeros_like(w)
        lr0, wd = 0.01 * {1: 0.5, 3: 2.0}.get(i, 1.0), 0.1 * (0.0 if i == 2 else 1.0)
        for t, step in enumerate(g16, 1):
            g = 0.9 * step[i].astype(np.float64)
            m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
            lr = lr0 * math.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
            w = w - 0.5 * (lr * m / (np.sqrt(v) + 1e-8) + wd * w)
        np.testing.assert_allclose(upd.states[i][0].asnumpy(), w, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------------
# Updater state save / load
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, multi_precision=True),
    lambda: mx.optimizer.NAG(learning_rate=0.1, momentum=0.9, multi_precision=True),
    lambda: mx.optimizer.LAMB(learning_rate=0.01, multi_precision=True),
    lambda: mx.optimizer.Adam(learning_rate=0.01, multi_precision=True),
])
@pytest.mark.parametrize("dump_optimizer", [False, True])
def test_updater_states_round_trip(make, dump_optimizer):
    """Training 2 steps, saving, loading into a fresh Updater (with a fresh optimizer unless
    the optimizer was dumped) and training 2 more equals 4 uninterrupted steps, bit for bit,
    float32 master copies included."""
    w0, grads = _data(steps=4, dtype=np.float16)
    full, full_upd = _train(make, w0, grads)
    upd = _updater(make)
    opt = upd.optimizer
    ws = [nd.array(w, dtype=w.dtype) for w in w0]
    _steps(upd, ws, grads[:2])
    blob = upd.get_states(dump_optimizer=dump_optimizer)
    loaded = pickle.loads(blob)
    if dump_optimizer:
        states, saved_opt = loaded
        assert type(saved_opt) is type(opt) and saved_opt.num_update == opt.num_update
    else:
        states = loaded
    master = states[0][1] if isinstance(opt, mx.optimizer.SGD) else states[0][0]
    assert master.dtype == np.float32 and ws[0].dtype == np.float16
    upd2 = mx.optimizer.get_updater(opt if not dump_optimizer else make())
    upd2.set_states(blob)
    assert all(v is False for v in upd2.states_synced.values())
    _steps(upd2, ws, grads[2:])
    assert all(upd2.states_synced.values())
    _same([w.asnumpy() for w in ws], full, rtol=0, atol=0)
    for i in range(len(SHAPES)):
        a = [x for x in opt_mod._state_leaves(upd2.states[i])]
        b = [x for x in opt_mod._state_leaves(full_upd.states[i])]
        _same([x.asnumpy() for x in a], [x.asnumpy() for x in b], rtol=0, atol=0)
