"""The inference fast path of hybridized blocks (`HybridBlock._fast_call`): after the first
call for an input signature, `net(x)` goes straight to the compiled graph. These tests check
that it never goes stale: parameter changes (set_data, load_parameters, initialize, cast,
reset_ctx, trainer steps), hooks, autograd recording, training mode, new signatures, several
inputs and nested outputs all behave as on the general path."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit import autograd, gluon, nd
from symjit.base import MXNetError
from symjit.gluon import nn
from symjit.gluon.cached_op import CachedOp
from symjit.symbol.naming import NameManager


@pytest.fixture(autouse=True)
def fresh_names(monkeypatch):
    monkeypatch.setattr(NameManager._current, "value", NameManager(), raising=False)


@pytest.fixture(params=["auto", "interp"])
def backend(request, monkeypatch):
    """Run each test on the default (native when built) backend and on the interpreter."""
    monkeypatch.setenv("SYMJIT_BACKEND", request.param)
    return request.param


@pytest.fixture
def general_calls(monkeypatch):
    """Counts calls of the general path (CachedOp.__call__), which the fast path bypasses."""
    calls = []
    original = CachedOp.__call__

    def counting(self, args, aux=()):
        calls.append(1)
        return original(self, args, aux)
    monkeypatch.setattr(CachedOp, "__call__", counting)
    return calls


def _tiny(units=(16, 16)):
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Dense(units[0], activation="relu"), nn.Dense(units[1]))
    net.initialize(mx.init.Xavier())
    return net


def _reference(net, x):
    """relu(x W1^T + b1) W2^T + b2 in numpy from the net's current parameters."""
    w1, b1, w2, b2 = (p.data().asnumpy().astype(np.float64) for p in net.collect_params().values())
    return np.maximum(x @ w1.T + b1, 0) @ w2.T + b2


def _x(shape=(1, 16), seed=0, dtype="float32"):
    return nd.array(np.random.default_rng(seed).standard_normal(shape), dtype=dtype)


def _warm(net, x):
    net.hybridize()
    net(x)
    return net(x)


def test_fast_path_is_taken_and_correct(backend, general_calls):
    net = _tiny()
    x = _x()
    _warm(net, x)
    n = len(general_calls)
    for _ in range(3):
        y = net(x)
        np.testing.assert_allclose(y.asnumpy(), _reference(net, x.asnumpy()), rtol=1e-5, atol=1e-5)
    assert len(general_calls) == n  # no general-path call once warm
    assert isinstance(y, nd.NDArray) and y.shape == (1, 16) and y.context == x.context


def test_outputs_are_fresh_arrays(backend):
    net = _tiny()
    x = _x()
    _warm(net, x)
    a, b = net(x), net(x)
    assert not np.shares_memory(a._data, b._data)
    assert not np.shares_memory(a._data, x._data)


def test_set_data_after_hybridized_call_is_seen(backend):
    net = _tiny()
    x = _x()
    _warm(net, x)
    w = net[0].weight
    w.set_data(nd.array(np.random.default_rng(1).standard_normal(w.shape)))
    net[1].bias.set_data(nd.ones(net[1].bias.shape))
    np.testing.assert_allclose(net(x).asnumpy(), _reference(net, x.asnumpy()), rtol=1e-5, atol=1e-5)


def test_in_place_writes_to_parameter_data_are_seen(backend):
    net = _tiny()
    x = _x()
    _warm(net, x)
    net[1].bias.data()[:] = 3.0
    np.testing.assert_allclose(net(x).asnumpy(), _reference(net, x.asnumpy()), rtol=1e-5, atol=1e-5)


def test_load_parameters_after_hybridized_call_is_seen(backend, tmp_path):
    net, other = _tiny(), _tiny()
    x = _x()
    _warm(net, x)
    other(x)
    other.initialize(mx.init.Uniform(1.0), force_reinit=True)
    other.save_parameters(str(tmp_path / "p.params"))
    net.load_parameters(str(tmp_path / "p.params"))
    np.testing.assert_allclose(net(x).asnumpy(), other(x).asnumpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(net(x).asnumpy(), _reference(other, x.asnumpy()), rtol=1e-5, atol=1e-5)


def test_reinitialize_after_hybridized_call_is_seen(backend):
    net = _tiny()
    x = _x()
    before = _warm(net, x).asnumpy()
    net.initialize(mx.init.Uniform(2.0), force_reinit=True)
    after = net(x).asnumpy()
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, _reference(net, x.asnumpy()), rtol=1e-5, atol=1e-5)


def test_block_cast_then_new_dtype(backend):
    net = _tiny()
    x = _x()
    _warm(net, x)
    net.cast("float64")
    x64 = x.astype("float64")
    y = net(x64)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y.asnumpy(), _reference(net, x64.asnumpy()), rtol=1e-10)


def test_parameter_cast_after_hybridized_call_is_seen(backend):
    """Casting Parameters (not the block) replaces their arrays: the next call must read the new
    ones, even when a round trip leaves the dtypes as they were."""
    net = _tiny()
    x = _x()
    _warm(net, x)
    params = list(net.collect_params().values())
    for p in params:
        p.cast("float64")
        p.cast("float32")
        p.data()[:] = 0.5  # written into the new arrays only
    np.testing.assert_allclose(net(x).asnumpy(), _reference(net, x.asnumpy()), rtol=1e-5, atol=1e-5)
    for p in params:
        p.cast("float64")
    y = net(x.astype("float64"))
    assert y.dtype == np.float64
    np.testing.assert_allclose(y.asnumpy(), _reference(net, x.asnumpy().astype(np.float64)), rtol=1e-10)


def test_reset_ctx_after_hybridized_call_is_seen(backend):
    net = _tiny()
    x = _x()
    _warm(net, x)
    net.collect_params().reset_ctx(mx.cpu(1))
    with pytest.raises(MXNetError, match="not initialized on context"):
        net(x)  # the parameters no longer live on cpu(0)
    x1 = x.as_in_context(mx.cpu(1))
    y = net(x1)
    assert y.context == mx.cpu(1)
    np.testing.assert_allclose(y.asnumpy(), _reference(net, x.asnumpy()), rtol=1e-5, atol=1e-5)


def test_trainer_step_is_seen_by_next_inference(backend):
    net = _tiny()
    x = _x(shape=(4, 16))
    _warm(net, x)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    with autograd.record():
        loss = (net(x) ** 2).sum()
    loss.backward()
    trainer.step(1)
    np.testing.assert_allclose(net(x).asnumpy(), _reference(net, x.asnumpy()), rtol=1e-5, atol=1e-5)


def test_hooks_run_on_every_call(backend):
    net = _tiny()
    x = _x()
    _warm(net, x)
    seen = []
    pre = net.register_forward_pre_hook(lambda blk, args: seen.append(("pre", args[0] is x)))
    post = net.register_forward_hook(lambda blk, args, out: seen.append(("post", out.shape)))
    net(x)
    net(x)
    assert seen == [("pre", True), ("post", (1, 16))] * 2
    pre.detach()
    net(x)
    assert seen[-1] == ("post", (1, 16)) and len(seen) == 5
    post.detach()
    net(x)
    assert len(seen) == 5


def test_record_uses_the_tape_and_gradients_match(backend):
    net = _tiny()
    x = _x(shape=(2, 16))
    _warm(net, x)
    x.attach_grad()
    with autograd.record():
        y = net(x)
    assert y._ag is not None  # recorded: one tape node
    y.backward()
    w1, b1, w2, b2 = (p.data().asnumpy().astype(np.float64) for p in net.collect_params().values())
    h = x.asnumpy() @ w1.T + b1
    expected = ((np.ones((2, 16)) @ w2) * (h > 0)) @ w1
    np.testing.assert_allclose(x.grad.asnumpy(), expected, rtol=1e-4, atol=1e-5)
    assert net(x)._ag is None  # back to the untaped fast path
    with autograd.record(train_mode=False):
        assert net(x)._ag is not None  # recording without training mode: still taped


def test_training_mode_is_honoured(backend):
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Dense(64), nn.Dropout(0.5), nn.BatchNorm())
    net.initialize()
    x = _x(shape=(8, 16))
    y0 = _warm(net, x).asnumpy()
    np.testing.assert_allclose(net(x).asnumpy(), y0)  # predict mode: deterministic
    running_mean = net[2].running_mean.data().asnumpy().copy()
    with autograd.train_mode():
        y1 = net(x).asnumpy()
    assert not np.allclose(y1, y0)  # dropout and batch statistics in training mode
    assert not np.allclose(net[2].running_mean.data().asnumpy(), running_mean)  # stats updated
    y2 = net(x).asnumpy()  # predict mode again, with the updated moving statistics
    assert not np.allclose(y2, y0)
    np.testing.assert_allclose(net(x).asnumpy(), y2)


def test_new_shapes_and_dtypes_recompile_and_alternate(backend, general_calls):
    net = _tiny()
    xa, xb = _x(shape=(1, 16)), _x(shape=(5, 16), seed=1)
    _warm(net, xa)
    for _ in range(2):
        for x in (xa, xb):
            np.testing.assert_allclose(net(x).asnumpy(), _reference(net, x.asnumpy()), rtol=1e-5, atol=1e-5)
    assert net._cached_op.num_compiled == 2
    n = len(general_calls)
    for x in (xa, xb, xa, xb):
        net(x)
    assert len(general_calls) == n  # both signatures stay on the fast path
    with pytest.raises(MXNetError):
        net(_x(shape=(1, 7)))  # incompatible with the weights, on the general path


def test_non_contiguous_input(backend):
    net = _tiny()
    x = _x()
    _warm(net, x)
    base = np.random.default_rng(3).standard_normal((1, 32)).astype(np.float32)
    strided = nd.NDArray(base[:, ::2])  # a view that is not C-contiguous
    assert not strided._data.flags.c_contiguous
    np.testing.assert_allclose(net(strided).asnumpy(), _reference(net, base[:, ::2]), rtol=1e-5, atol=1e-5)


class _TwoInTwoOut(gluon.HybridBlock):
    """(x, y) -> (x W^T + y, [relu(x W^T), y * 2])."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense = nn.Dense(4, in_units=3)

    def hybrid_forward(self, F, x, y):
        h = self.dense(x)
        return h + y, [F.relu(h), y * 2]


def test_several_inputs_and_nested_outputs(backend, general_calls):
    net = _TwoInTwoOut()
    net.initialize(mx.init.Uniform(1.0))
    x, y = _x(shape=(2, 3)), _x(shape=(2, 4), seed=1)
    expected = net(x, y)
    net.hybridize()
    net(x, y)
    n = len(general_calls)
    for _ in range(2):
        a, (b, c) = net(x, y)
        for got, want in ((a, expected[0]), (b, expected[1][0]), (c, expected[1][1])):
            np.testing.assert_allclose(got.asnumpy(), want.asnumpy(), rtol=1e-5, atol=1e-6)
    assert len(general_calls) == n
    net.dense.weight.set_data(nd.zeros((4, 3)))
    a, (b, c) = net(x, y)
    np.testing.assert_allclose(a.asnumpy(), y.asnumpy() + net.dense.bias.data().asnumpy(), rtol=1e-6)
    with pytest.raises(MXNetError):
        net(x)  # wrong number of inputs: the general path's error


def test_hybridize_off_and_on_again(backend, general_calls):
    net = _tiny()
    x = _x()
    _warm(net, x)
    net.hybridize(False)
    n = len(general_calls)
    np.testing.assert_allclose(net(x).asnumpy(), _reference(net, x.asnumpy()), rtol=1e-5, atol=1e-5)
    assert len(general_calls) == n  # imperative now
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), _reference(net, x.asnumpy()), rtol=1e-5, atol=1e-5)
    # compiled again: the first inference call plans the signature and runs its compiled graph
    assert net._cached_op is not None and net._fast_call is not None
    assert len(general_calls) == n


def test_symbol_block_fast_path_sees_set_data(backend, general_calls):
    data = mx.sym.var("data")
    out = mx.sym.FullyConnected(data, num_hidden=4, name="fc")
    block = gluon.SymbolBlock(out, data)
    block.initialize()
    block.hybridize()
    x = _x(shape=(2, 3))
    block(x)
    n = len(general_calls)
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    block.params["fc_weight"].set_data(nd.array(w))
    bias = block.params["fc_bias"].data().asnumpy()
    # atol: products of ~10 summed, float32 rounding in another order than numpy's
    np.testing.assert_allclose(block(x).asnumpy(), x.asnumpy() @ w.T + bias, rtol=1e-5, atol=1e-5)
    assert len(general_calls) == n
