"""gluon.Trainer reusing its prepared multi-tensor updates from step to step (the Updater's
`_PreparedCache`): every step must equal a numpy SGD-momentum reference computed afresh, whatever
changed between steps (learning rate, weight decay, gradient clipping and scale, the batch size,
re-initialised or replaced parameters, grad_req add, float16 with multi_precision).
Tolerance: float32 updates within rtol 1e-5 / atol 1e-6 of the float64 reference (a few ulps of
the same arithmetic); float16 weights within one float16 ulp (rtol 1e-3) of the reference's
float32 master weights rounded."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit import autograd, gluon, nd
from symjit.optimizer.optimizer import Updater, _PreparedCache
from symjit.symbol.naming import NameManager

RTOL, ATOL = 1e-5, 1e-6
SHAPES = {"a": (3, 4), "b": (5,), "c": (2, 3)}


@pytest.fixture(autouse=True)
def fresh_names(monkeypatch):
    monkeypatch.setattr(NameManager._current, "value", NameManager(), raising=False)


class Ref:
    """MXNet's sgd_mom_update in float64: g = clip(rescale * grad); mom = m * mom - lr * (g + wd * w);
    w += mom (plain SGD without momentum: w -= lr * (g + wd * w))."""

    def __init__(self, weights: dict):
        self.w = {k: v.astype(np.float64) for k, v in weights.items()}
        self.mom = {k: np.zeros_like(v) for k, v in self.w.items()}

    def step(self, grads: dict, lr, wd, momentum, rescale, clip=None):
        for k, g in grads.items():
            g = rescale * g.astype(np.float64)
            if clip is not None:
                g = np.clip(g, -clip, clip)
            rate = lr[k] if isinstance(lr, dict) else lr
            self.mom[k] = momentum * self.mom[k] - rate * (g + wd * self.w[k])
            self.w[k] = self.w[k] + self.mom[k]


def _params(dtype="float32", seed=0):
    rs = np.random.RandomState(seed)
    params = gluon.ParameterDict()
    for name, shape in SHAPES.items():
        p = params.get(name, shape=shape, dtype=dtype)
        p.initialize(mx.init.Constant(0.0))
        p.set_data(nd.array(rs.randn(*shape), dtype=dtype))
    return params


def _backward(params, xs: dict, dtype="float32"):
    """grad of sum(w * x) over the parameters: grad = x (written, or added with grad_req add)."""
    with autograd.record():
        loss = None
        for k, p in params.items():
            term = (p.data() * nd.array(xs[k], dtype=dtype)).sum()
            loss = term if loss is None else loss + term
    loss.backward()


def _inputs(step: int) -> dict:
    rs = np.random.RandomState(100 + step)
    return {k: rs.randn(*s).astype(np.float32) * 3 for k, s in SHAPES.items()}


def _weights(params) -> dict:
    return {k: p.data().asnumpy().astype(np.float64) for k, p in params.items()}


def _check(params, ref, rtol=RTOL, atol=ATOL):
    for k, w in _weights(params).items():
        np.testing.assert_allclose(w, ref.w[k], rtol=rtol, atol=atol, err_msg=k)


def _cache_of(trainer) -> _PreparedCache:
    (updater,) = trainer._updaters
    assert isinstance(updater, Updater)
    return updater._prepared_cache


def test_hyperparameter_changes_between_steps_take_effect():
    params = _params()
    ref = Ref(_weights(params))
    tr = gluon.Trainer(params, "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    schedule = [  # (lr, wd, clip, batch): each step changes one thing, some steps repeat
        (0.1, 0.0, None, 4), (0.1, 0.0, None, 4), (0.05, 0.0, None, 4), (0.05, 0.01, None, 4),
        (0.05, 0.01, 0.5, 4), (0.05, 0.01, 0.5, 8), (0.05, 0.01, 0.5, 8), (0.2, 0.0, None, 1),
    ]
    for i, (lr, wd, clip, batch) in enumerate(schedule):
        tr.set_learning_rate(lr)
        tr.optimizer.wd = wd
        tr.optimizer.clip_gradient = clip
        xs = _inputs(i)
        _backward(params, xs)
        tr.step(batch)
        ref.step(xs, lr, wd, 0.9, 1.0 / batch, clip)
        _check(params, ref)
    assert len(_cache_of(tr).entries) == 1   # reused while nothing changed; stale entries pruned


def test_momentum_and_lr_mult_changes_take_effect():
    params = _params()
    ref = Ref(_weights(params))
    tr = gluon.Trainer(params, "sgd", {"learning_rate": 0.1, "momentum": 0.5})
    for i in range(4):
        if i == 2:
            tr.optimizer.momentum = 0.8
        xs = _inputs(i)
        _backward(params, xs)
        tr.step(2)
        ref.step(xs, 0.1, 0.0, tr.optimizer.momentum, 0.5)
        _check(params, ref)
    params["b"].lr_mult = 0.0   # frozen from now on: only a and c move
    xs = _inputs(9)
    _backward(params, xs)
    tr.step(2)
    ref.step(xs, {"a": 0.1, "b": 0.0, "c": 0.1}, 0.0, 0.8, 0.5)   # b: its momentum alone
    _check(params, ref)


def test_reinitialised_and_replaced_parameters_are_picked_up():
    params = _params()
    tr = gluon.Trainer(params, "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    ref = Ref(_weights(params))
    for i in range(2):
        xs = _inputs(i)
        _backward(params, xs)
        tr.step(1)
        ref.step(xs, 0.1, 0.0, 0.9, 1.0)
    _check(params, ref)
    old = [id(p.data()._data) for p in params.values()]
    params.initialize(mx.init.Constant(0.25), force_reinit=True)
    params["b"].set_data(nd.array(np.arange(5.0)))
    ref.w = _weights(params)   # optimizer states (momentum) are kept, as in MXNet
    for i in range(2, 6):
        if i == 4:   # only one parameter's buffers (value and gradient) replaced
            params["b"].initialize(mx.init.Constant(-0.5), force_reinit=True)
            ref.w["b"] = _weights(params)["b"]
        xs = _inputs(i)
        _backward(params, xs)
        tr.step(1)
        ref.step(xs, 0.1, 0.0, 0.9, 1.0)
        _check(params, ref)
    cache = _cache_of(tr)
    assert len(cache.entries) == 1
    (key,) = cache.entries
    live = set(key[1])
    assert all(i not in live or i in {id(p.data()._data) for p in params.values()} for i in old)


def test_grad_req_add_accumulates_between_steps():
    params = _params()
    for p in params.values():
        p.grad_req = "add"
    tr = gluon.Trainer(params, "sgd", {"learning_rate": 0.05, "momentum": 0.9})
    ref = Ref(_weights(params))
    total = {k: np.zeros(s, np.float32) for k, s in SHAPES.items()}
    for i in range(4):
        xs = _inputs(i)
        _backward(params, xs)
        total = {k: total[k] + xs[k] for k in xs}
        tr.step(1)
        ref.step(total, 0.05, 0.0, 0.9, 1.0)
        _check(params, ref, rtol=1e-5, atol=1e-5)
        if i == 1:   # zeroed gradients: the next step sees only the new ones
            for p in params.values():
                p.zero_grad()
            total = {k: np.zeros(s, np.float32) for k, s in SHAPES.items()}


def test_float16_multi_precision_steps():
    params = _params("float16")
    ref = Ref(_weights(params))
    tr = gluon.Trainer(params, "sgd", {"learning_rate": 0.1, "momentum": 0.9, "multi_precision": True})
    for i in range(4):
        lr = 0.1 if i < 2 else 0.02
        tr.set_learning_rate(lr)
        xs = {k: v.astype(np.float16).astype(np.float32) for k, v in _inputs(i).items()}
        _backward(params, xs, "float16")
        tr.step(2)
        ref.step(xs, lr, 0.0, 0.9, 0.5)
        for k, w in _weights(params).items():
            np.testing.assert_allclose(w, ref.w[k].astype(np.float16), rtol=2e-3, atol=2e-3, err_msg=k)


def test_run_plan_reused_and_released_with_its_buffers():
    """The native call plan of a step's prepared updates (`fastpath.run_updates`' plans) is
    built once and reused while the same updates run; when a parameter's buffers are replaced,
    the plan goes with the pruned updates, so the old buffers are not kept alive by it."""
    import gc
    import weakref
    params = _params()
    tr = gluon.Trainer(params, "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    ref = Ref(_weights(params))
    plans = []
    for i in range(3):
        xs = _inputs(i)
        _backward(params, xs)
        tr.step(2)
        ref.step(xs, 0.1, 0.0, 0.9, 0.5)
        plans.append(dict(_cache_of(tr).run_plans))
    _check(params, ref)
    assert len(plans[0]) == 1 and plans[0] == plans[1] == plans[2]
    old = weakref.ref(params["b"].data()._data)
    params["b"].initialize(mx.init.Constant(-0.5), force_reinit=True)
    ref.w["b"] = _weights(params)["b"]
    del plans
    xs = _inputs(3)
    _backward(params, xs)
    tr.step(2)
    ref.step(xs, 0.1, 0.0, 0.9, 0.5)
    _check(params, ref)
    gc.collect()
    assert old() is None
    assert len(_cache_of(tr).run_plans) == 1
