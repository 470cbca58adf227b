"""gluon.Trainer and gluon.utils: SGD updates against hand-written numpy, multi-context
aggregation, stale gradients, learning rates, optimizer states, the KVStore seam."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit import autograd, gluon, nd
from symjit.base import MXNetError
from symjit.gluon import nn
from symjit.symbol.naming import NameManager


@pytest.fixture(autouse=True)
def fresh_names(monkeypatch):
    monkeypatch.setattr(NameManager._current, "value", NameManager(), raising=False)


def _dense(ctx=None, in_units=3, units=2):
    d = nn.Dense(units, in_units=in_units)
    d.initialize(mx.init.Xavier(), ctx=ctx)
    return d


def _grads_of_sum_sq(d, x):
    with autograd.record():
        loss = (d(x) ** 2).sum()
    loss.backward()
    return loss


def test_sgd_step_matches_numpy():
    d = _dense()
    w0, b0 = d.weight.data().asnumpy().copy(), d.bias.data().asnumpy().copy()
    x = np.random.RandomState(0).randn(4, 3).astype(np.float32)
    _grads_of_sum_sq(d, nd.array(x))
    gw, gb = d.weight.grad().asnumpy().copy(), d.bias.grad().asnumpy().copy()
    tr = gluon.Trainer(d.collect_params(), "sgd", {"learning_rate": 0.5, "wd": 0.01})
    tr.step(4)
    # MXNet sgd_update: w -= lr * (grad * rescale + wd * w); Trainer does not exempt biases from wd
    np.testing.assert_allclose(d.weight.data().asnumpy(), w0 - 0.5 * (gw / 4 + 0.01 * w0), rtol=1e-5)
    np.testing.assert_allclose(d.bias.data().asnumpy(), b0 - 0.5 * (gb / 4 + 0.01 * b0), rtol=1e-5, atol=1e-7)


def test_momentum_and_lr_mult():
    d = _dense()
    d.bias.lr_mult = 0.0
    b0 = d.bias.data().asnumpy().copy()
    w = d.weight.data().asnumpy().copy()
    tr = gluon.Trainer(d.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    x = nd.array(np.random.RandomState(1).randn(2, 3))
    mom = np.zeros_like(w)
    for _ in range(3):
        _grads_of_sum_sq(d, x)
        g = d.weight.grad().asnumpy() / 2
        tr.step(2)
        mom = 0.9 * mom - 0.1 * g
        w = w + mom
        np.testing.assert_allclose(d.weight.data().asnumpy(), w, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(d.bias.data().asnumpy(), b0)


def test_learning_rate_property_and_setter():
    tr = gluon.Trainer(_dense().collect_params(), "sgd", {"learning_rate": 0.3})
    assert tr.learning_rate == 0.3
    tr.set_learning_rate(0.05)
    assert tr.learning_rate == 0.05
    with pytest.raises(ValueError, match="list or dict of Parameters"):
        gluon.Trainer(3, "sgd")
    with pytest.raises(MXNetError, match="optimizer_params must be None"):
        gluon.Trainer(_dense().collect_params(), mx.optimizer.SGD(), {"learning_rate": 1.0})


def test_stale_gradient_raises_and_can_be_ignored():
    net = nn.HybridSequential()
    net.add(nn.Dense(2, in_units=3), nn.Dense(2, in_units=3))
    net.initialize()
    tr = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 1.0})
    x = nd.ones((1, 3))
    with autograd.record():
        loss = net[0](x).sum()   # second layer unused
    loss.backward()
    with pytest.raises(UserWarning, match="has not been updated by backward since last `step`"):
        tr.step(1)
    w1 = net[1].weight.data().asnumpy().copy()
    w0 = net[0].weight.data().asnumpy().copy()
    with autograd.record():
        loss = net[0](x).sum()
    loss.backward()
    tr.step(1, ignore_stale_grad=True)
    np.testing.assert_array_equal(net[1].weight.data().asnumpy(), w1)
    assert not np.array_equal(net[0].weight.data().asnumpy(), w0)
    with pytest.raises(UserWarning):  # the used gradient was consumed by the step
        tr.step(1)


def test_multi_context_training_equals_single_context():
    rs = np.random.RandomState(2)
    x = rs.randn(8, 3).astype(np.float32)
    single = _dense()
    multi = nn.Dense(2, in_units=3)
    multi.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    for p, q in zip(single.collect_params().values(), multi.collect_params().values()):
        q.set_data(p.data())
    ts = gluon.Trainer(single.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.5})
    tm = gluon.Trainer(multi.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.5})
    for _ in range(2):
        _grads_of_sum_sq(single, nd.array(x))
        ts.step(8)
        parts = gluon.utils.split_and_load(nd.array(x), [mx.cpu(0), mx.cpu(1)])
        assert [p.context for p in parts] == [mx.cpu(0), mx.cpu(1)]
        with autograd.record():
            losses = [(multi(p) ** 2).sum() for p in parts]
        autograd.backward(losses)
        tm.step(8)
    for p, q in zip(single.collect_params().values(), multi.collect_params().values()):
        a, b = q.data(mx.cpu(0)).asnumpy(), q.data(mx.cpu(1)).asnumpy()
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, p.data().asnumpy(), rtol=1e-5, atol=1e-6)


def test_allreduce_then_update_equals_step():
    a, b = _dense(), _dense()
    for p, q in zip(a.collect_params().values(), b.collect_params().values()):
        q.set_data(p.data())
    ta = gluon.Trainer(a.collect_params(), "adam", {"learning_rate": 0.01})
    tb = gluon.Trainer(b.collect_params(), "adam", {"learning_rate": 0.01})
    x = nd.array(np.random.RandomState(3).randn(3, 3))
    _grads_of_sum_sq(a, x)
    ta.step(3)
    _grads_of_sum_sq(b, x)
    tb.allreduce_grads()
    tb.update(3)
    np.testing.assert_array_equal(a.weight.data().asnumpy(), b.weight.data().asnumpy())


def test_save_and_load_states_resume_identically(tmp_path):
    x = nd.array(np.random.RandomState(4).randn(4, 3))
    a, b = _dense(), _dense()
    for p, q in zip(a.collect_params().values(), b.collect_params().values()):
        q.set_data(p.data())
    ta = gluon.Trainer(a.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    tb = gluon.Trainer(b.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    for d, t in ((a, ta), (b, tb)):
        _grads_of_sum_sq(d, x)
        t.step(4)
    fname = str(tmp_path / "trainer.states")
    tb.save_states(fname)
    tb2 = gluon.Trainer(b.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    tb2.load_states(fname)
    assert tb2.learning_rate == 0.1
    for d, t in ((a, ta), (b, tb2)):
        _grads_of_sum_sq(d, x)
        t.step(4)
    np.testing.assert_allclose(a.weight.data().asnumpy(), b.weight.data().asnumpy(), rtol=1e-6)
    (tmp_path / "bad").write_bytes(b"not a pickle")
    with pytest.raises(MXNetError, match="not a Trainer states file"):
        tb2.load_states(str(tmp_path / "bad"))


def test_kvstore_object_is_used_for_reduction():
    # a user store (MXNet: a KVStoreBase subclass) without optimizer support: the gradients are
    # all-reduced through it and the Trainer's updaters apply the optimizer
    class FakeKV(mx.kv.KVStoreBase):
        type = "fake"

        def __init__(self):
            self.calls = []

        def _optimizer_capable(self):
            return False

        def broadcast(self, key, value, out, priority=0):
            self.calls.append(("init", key))

        def pushpull(self, key, value, out=None, priority=0):
            self.calls.append(("pushpull", key))
            total = sum(v.asnumpy() for v in value)
            for o in (value if out is None else out):
                o[:] = total

    kv = FakeKV()
    d = _dense()
    tr = gluon.Trainer(d.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kv)
    _grads_of_sum_sq(d, nd.ones((1, 3)))
    tr.step(1)
    assert ("init", 0) in kv.calls and ("pushpull", 0) in kv.calls and ("pushpull", 1) in kv.calls
    assert tr._update_on_kvstore is False
    with pytest.raises(TypeError):   # MXNet: kvstore must be KVStore, str or None
        gluon.Trainer(d.collect_params(), "sgd", kvstore=object())._init_kvstore()


def test_split_data_and_load():
    x = nd.arange(12).reshape((6, 2))
    parts = gluon.utils.split_data(x, 3)
    assert [p.asnumpy().tolist() for p in parts] == [[[0, 1], [2, 3]], [[4, 5], [6, 7]], [[8, 9], [10, 11]]]
    with pytest.raises(ValueError, match="cannot be evenly split"):
        gluon.utils.split_data(x, 4)
    uneven = gluon.utils.split_data(x, 4, even_split=False)
    assert [p.shape[0] for p in uneven] == [2, 2, 1, 1]
    cols = gluon.utils.split_data(x, 2, batch_axis=1)
    assert [p.asnumpy().ravel().tolist() for p in cols] == [[0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9, 11]]
    one = gluon.utils.split_and_load(np.ones((2, 2)), [mx.cpu(0)])
    assert len(one) == 1 and isinstance(one[0], nd.NDArray)


def test_clip_global_norm():
    a, b = nd.array([3.0, 0.0]), nd.array([[4.0]])
    norm = gluon.utils.clip_global_norm([a, b], 1.0)
    assert abs(norm - 5.0) < 1e-6
    np.testing.assert_allclose(a.asnumpy(), [0.6, 0.0], rtol=1e-5)
    np.testing.assert_allclose(b.asnumpy(), [[0.8]], rtol=1e-5)
    c = nd.array([0.1, 0.1])
    gluon.utils.clip_global_norm([c], 10.0)
    np.testing.assert_array_equal(c.asnumpy(), np.array([0.1, 0.1], dtype=np.float32))


def _train_dense(ctxs, **trainer_kwargs):
    d = nn.Dense(2, in_units=3)
    d.initialize(mx.init.One(), ctx=ctxs)
    tr = gluon.Trainer(d.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9}, **trainer_kwargs)
    x = nd.array(np.arange(12).reshape(4, 3) / 10.0)
    for _ in range(3):
        parts = gluon.utils.split_and_load(x, ctxs)
        with autograd.record():
            losses = [(d(p) ** 2).sum() for p in parts]
        autograd.backward(losses)
        tr.step(4)
    return [d.weight.data(c).asnumpy() for c in ctxs]


@pytest.mark.skipif(not hasattr(mx, "kv"), reason="symjit.kvstore not available")
@pytest.mark.parametrize("kind,update_on_kvstore,n_ctx", [("local", True, 1), ("local", False, 2),
                                                         ("device", True, 2)])
def test_real_kvstore_training_matches_in_process(kind, update_on_kvstore, n_ctx):
    ref = _train_dense([mx.cpu(0)])[0]
    ctxs = [mx.cpu(i) for i in range(n_ctx)]
    got = _train_dense(ctxs, kvstore=mx.kv.create(kind), update_on_kvstore=update_on_kvstore)
    for w in got:
        np.testing.assert_allclose(w, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(not hasattr(mx, "kv"), reason="symjit.kvstore not available")
def test_states_roundtrip_through_kvstore_that_applies_updates(tmp_path):
    x = nd.array(np.random.RandomState(5).randn(4, 3))
    a, b = _dense(), _dense()
    for p, q in zip(a.collect_params().values(), b.collect_params().values()):
        q.set_data(p.data())
    ta = gluon.Trainer(a.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    tb = gluon.Trainer(b.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                       kvstore=mx.kv.create("local"), update_on_kvstore=True)
    for d, t in ((a, ta), (b, tb)):
        _grads_of_sum_sq(d, x)
        t.step(4)
    fname = str(tmp_path / "kv.states")
    tb.save_states(fname)
    tb2 = gluon.Trainer(b.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                        kvstore=mx.kv.create("local"), update_on_kvstore=True)
    tb2.load_states(fname)
    for d, t in ((a, ta), (b, tb2)):
        _grads_of_sum_sq(d, x)
        t.step(4)
    np.testing.assert_allclose(b.weight.data().asnumpy(), a.weight.data().asnumpy(), rtol=1e-6)
    # new values loaded into a Parameter whose store applies the updates drop the store (MXNet's
    # Trainer._reset_kvstore): the next step creates it again from the loaded values
    assert tb2._kv_initialized and tb2._kvstore is not None
    b.weight.set_data(nd.zeros((2, 3)))
    assert not tb2._kv_initialized and tb2._kvstore is None and tb2._update_on_kvstore is None


def test_kvstore_creation_follows_mxnet_rules():
    def trainer(ctxs, **kw):
        p = gluon.Parameter("w", shape=(3,))
        p.initialize(ctx=ctxs, init="zeros")
        t = gluon.Trainer([p], "sgd", {"learning_rate": 1.0, "momentum": 0.5}, **kw)
        with mx.autograd.record():
            for w in p.list_data():
                (w + 1).backward()
        t.step(1)
        return t, p

    t, _ = trainer([mx.cpu(0)])                       # one device: no store
    assert t._kvstore is None and t._update_on_kvstore is None
    t, p = trainer([mx.cpu(0), mx.cpu(1)])            # several: a 'device' store applying the updates
    assert t._kvstore.type == "device" and t._update_on_kvstore is True
    np.testing.assert_array_equal(p.data(mx.cpu(1)).asnumpy(), -2 * np.ones(3))
    assert t.learning_rate == 1.0
    t, p = trainer([mx.cpu(0), mx.cpu(1)], kvstore=mx.kv.create("teststore"))   # no optimizer support
    assert t._update_on_kvstore is False
    np.testing.assert_array_equal(p.data(mx.cpu(1)).asnumpy(), -2 * np.ones(3))
    with pytest.raises(ValueError):
        trainer([mx.cpu(0), mx.cpu(1)], kvstore=mx.kv.create("teststore"), update_on_kvstore=True)
    with pytest.raises(AssertionError):   # allreduce_grads/update are for updates off the store
        t, _ = trainer([mx.cpu(0), mx.cpu(1)])
        t.allreduce_grads()


def test_update_counts_are_per_device():
    # an lr schedule advances once per step whatever the number of contexts (MXNet counts the
    # updates of each device separately)
    p = gluon.Parameter("w", shape=(3,))
    p.initialize(ctx=[mx.cpu(0), mx.cpu(1)], init="zeros")
    sched = mx.lr_scheduler.FactorScheduler(2, factor=0.1, base_lr=1.0)
    t = gluon.Trainer([p], "sgd", {"learning_rate": 1.0, "lr_scheduler": sched}, update_on_kvstore=False)
    lrs = []
    for _ in range(5):
        with mx.autograd.record():
            for w in p.list_data():
                (w + 1).backward()
        t.step(1)
        lrs.append(t.learning_rate)
    np.testing.assert_allclose(lrs, [1.0, 1.0, 0.1, 0.1, 0.01])


def test_sparse_parameter_takes_one_trainer():
    p = gluon.Parameter("x", shape=(10,), stype="row_sparse")
    p.initialize()
    t0 = gluon.Trainer([p], "sgd")
    assert p._trainer is t0
    with pytest.raises(RuntimeError):
        gluon.Trainer([p], "sgd")
    with pytest.raises(RuntimeError):
        p.list_data()
