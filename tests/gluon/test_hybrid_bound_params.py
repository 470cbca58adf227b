"""Hybridized inference with parameters bound as compile-time constants (`HybridBlock` module
docstring, "Bound parameters"): results equal the imperative block and `symjit.compile`; every
way of changing a weight (Trainer.step, set_data, load_parameters, in-place writes, kvstore
pulls, BatchNorm statistics updated in training) is seen by the next inference call; training
under `autograd.record()` keeps parameters as inputs; the per-block memory bound holds."""
from __future__ import annotations


import numpy as np
import pytest

import symjit as mx
from symjit import autograd, gluon, nd
from symjit.gluon import nn
from symjit.gluon.cached_op import CachedOp
from symjit.symbol.naming import NameManager

from shared_data import model_path

@pytest.fixture(autouse=True)
def fresh_names(monkeypatch):
    monkeypatch.setattr(NameManager._current, "value", NameManager(), raising=False)


@pytest.fixture
def binds(monkeypatch):
    """Counts the bound plans compiled (CachedOp.bound_runner calls)."""
    calls = []
    original = CachedOp.bound_runner

    def counting(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)
    monkeypatch.setattr(CachedOp, "bound_runner", counting)
    return calls


def _convnet(seed=0):
    """conv + BatchNorm (random statistics) + relu, pooling, conv + BN, dense head."""
    mx.random.seed(seed)
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(8, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(),
                nn.Conv2D(16, 3, padding=1, strides=2), nn.BatchNorm(), nn.Activation("relu"),
                nn.Dense(10))
    net.initialize(mx.init.Xavier())
    net(_x((1, 3, 12, 12)))                 # finishes the deferred initialization
    rng = np.random.default_rng(seed)
    for name, p in net.collect_params().items():
        if name.endswith(("running_mean", "beta")):
            p.set_data(nd.array(rng.standard_normal(p.shape) * 0.3))
        elif name.endswith(("running_var", "gamma")):
            p.set_data(nd.array(rng.uniform(0.5, 2.0, p.shape)))
    return net


def _x(shape=(2, 3, 12, 12), seed=1):
    return nd.array(np.random.default_rng(seed).standard_normal(shape))


def _imperative(net, x) -> np.ndarray:
    """The block's output with hybridization off (then on again, as it was)."""
    net.hybridize(False)
    try:
        return net(x).asnumpy()
    finally:
        net.hybridize()


def _is_bound(net) -> bool:
    plan = net._fast_call
    return plan is not None and plan.weights is not None and not plan.weights.promote_after


def _close(a, b, tol=1e-4):
    scale = max(1.0, float(np.abs(b).max()))
    assert np.abs(a - b).max() <= tol * scale, np.abs(a - b).max()


def test_bound_inference_equals_imperative_and_compile():
    net = _convnet()
    x = _x()
    ref = net(x).asnumpy()
    net.hybridize()
    y = net(x).asnumpy()
    assert _is_bound(net) and net.bound_bytes() > 0
    _close(y, ref)
    _close(net(x).asnumpy(), ref)          # the fast path, second call
    model = mx.compile(net, shapes={"data": x.shape})
    _close(y, model(data=x.asnumpy())[0])
    # BatchNorm disappeared into the convolutions of the bound plan, as in symjit.compile
    assert "BatchNorm" not in {n.op.name for n in model.graph.nodes}


def test_bound_plan_per_signature_and_unbound_when_disabled(binds):
    net = _convnet()
    x1, x8 = _x((1, 3, 12, 12)), _x((8, 3, 12, 12), seed=2)
    ref1, ref8 = net(x1).asnumpy(), net(x8).asnumpy()
    net.hybridize()
    for _ in range(2):
        _close(net(x1).asnumpy(), ref1)
        _close(net(x8).asnumpy(), ref8)
    assert len(binds) == 2                 # one bound plan per signature, reused
    net.hybridize(bind_params=False)
    _close(net(x1).asnumpy(), ref1)
    assert not _is_bound(net) and net.bound_bytes() == 0 and len(binds) == 2


def test_interpreter_backend_runs_unbound(monkeypatch):
    monkeypatch.setenv("SYMJIT_BACKEND", "interp")
    net = _convnet()
    x = _x()
    ref = net(x).asnumpy()
    net.hybridize()
    _close(net(x).asnumpy(), ref)
    _close(net(x).asnumpy(), ref)
    assert net.bound_bytes() == 0


# ---- weight changes are seen ---------------------------------------------------------------

def _writes():
    """(name, function(net) that changes some weight in place)."""
    def setitem(net):
        w = net[0].weight.data()
        w[:] = w * 1.5

    def iadd(net):
        b = net[7].bias.data()
        b += 1.0

    def out_op(net):
        w = net[4].weight.data()
        nd.elemwise_mul(w, nd.ones_like(w) * -1, out=w)

    def view(net):
        v = net[7].weight.data().reshape(-1)   # a view of the weight's buffer
        v[:5] = 3.0

    def set_data(net):
        p = net[1].gamma
        p.set_data(p.data() * 3)

    def running_mean(net):
        p = net[5].running_mean
        p.set_data(p.data() + 1.0)

    def copyto(net):
        src = nd.array(np.full(net[0].bias.shape, 0.25))
        src.copyto(net[0].bias.data())

    def kvstore_pull(net):
        kv = mx.kv.create("local")
        p = net[4].bias
        kv.init("b", nd.array(np.full(p.shape, -2.0)))
        kv.pull("b", out=p.data())
    return [setitem, iadd, out_op, view, set_data, running_mean, copyto, kvstore_pull]


@pytest.mark.parametrize("write", _writes(), ids=lambda f: f.__name__)
def test_inplace_weight_change_is_seen_by_next_call(write):
    net = _convnet()
    x = _x()
    net.hybridize()
    before = net(x).asnumpy()
    net(x)
    assert _is_bound(net)
    write(net)
    after = net(x).asnumpy()
    assert np.abs(after - before).max() > 1e-3          # the change is visible ...
    _close(after, _imperative(net, x))                  # ... and exactly the new weights'
    _close(net(x).asnumpy(), after)


def test_raw_numpy_write_into_a_bound_weight_is_refused():
    """A write that bypasses symjit cannot be seen, so numpy refuses it (never stale)."""
    net = _convnet()
    x = _x()
    net.hybridize()
    net(x)
    with pytest.raises(ValueError, match="read-only"):
        net[0].weight.data()._data[...] = 0
    w = net[0].weight.data()
    w[:] = 0                                            # through symjit: thawed and seen
    _close(net(x).asnumpy(), _imperative(net, x))


def test_trainer_step_is_seen_and_training_keeps_parameters_as_inputs(binds):
    net = _convnet()
    x = _x()
    label = nd.array(np.arange(2) % 10)
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    outs = []
    for step in range(3):
        for _ in range(3):
            outs.append(net(x).asnumpy())              # inference: bound plan
        with autograd.record():                         # training: parameters are inputs
            loss = loss_fn(net(x), label)
        loss.backward()
        trainer.step(2)
        _close(net(x).asnumpy(), _imperative(net, x))
    assert all(np.abs(a - b).max() > 0 for a, b in zip(outs[3::3], outs[::3]))
    # the gradient through the hybridized block equals the imperative one
    grads = []
    for hybrid in (True, False):
        net.hybridize(hybrid)
        with autograd.record():
            loss = loss_fn(net(x), label)
        loss.backward()
        grads.append(net[0].weight.grad().asnumpy().copy())
    _close(grads[0], grads[1])


def test_batchnorm_statistics_updated_in_training_are_seen():
    net = _convnet()
    x = _x()
    net.hybridize()
    before = net(x).asnumpy()
    mean = net[1].running_mean.data().asnumpy()
    with autograd.record():                             # train mode: moving statistics updated
        net(x)
    assert np.abs(net[1].running_mean.data().asnumpy() - mean).max() > 0
    after = net(x).asnumpy()
    assert np.abs(after - before).max() > 1e-4
    _close(after, _imperative(net, x))


def test_load_parameters_and_reinitialize_are_seen(tmp_path):
    net = _convnet(seed=0)
    other = _convnet(seed=5)
    x = _x()
    other_out = other(x).asnumpy()
    path = str(tmp_path / "w.params")
    other.save_parameters(path)
    net.hybridize()
    net(x)
    net.load_parameters(path)
    _close(net(x).asnumpy(), other_out)
    net.initialize(mx.init.Constant(0.01), force_reinit=True)
    _close(net(x).asnumpy(), _imperative(net, x))


def test_weights_changing_between_calls_back_off_from_binding(binds):
    """A train step between single inference calls must not recompile on every call: after a
    bound plan goes stale at once the block runs with parameters as inputs until the weights
    stay unchanged, then binds again."""
    net, twin = _convnet(), _convnet()        # twin: the same weights, not hybridized
    x = _x()
    net.hybridize()
    w, w_twin = net[7].bias.data(), twin[7].bias.data()
    for i in range(12):
        w += 0.01
        w_twin += 0.01
        _close(net(x).asnumpy(), twin(x).asnumpy())
    assert len(binds) <= 4
    n = len(binds)
    for _ in range(8):                                  # weights now stay unchanged
        net(x)
    assert len(binds) == n + 1 and _is_bound(net)


# ---- memory bound ----------------------------------------------------------------------------

def test_memory_bound_evicts_least_recently_used_and_refuses_too_big(binds):
    # batches of equal plan size (from 4 rows the dense layer's weights are packed too)
    shapes = [(4, 3, 12, 12), (5, 3, 12, 12), (6, 3, 12, 12)]
    xs = [_x(s, seed=i) for i, s in enumerate(shapes)]
    net = _convnet()
    refs = [net(x).asnumpy() for x in xs]
    net.hybridize()
    net(xs[0])
    one = net.bound_bytes()
    assert one > 0
    net.hybridize(bound_bytes_limit=2 * one + one // 2)  # room for two signatures' plans
    for x, ref in zip(xs, refs):
        _close(net(x).asnumpy(), ref)
        assert net.bound_bytes() <= net.bound_bytes_limit()
    assert net._fast_call.const_bytes > 0
    assert sum(p.const_bytes > 0 for p in net._fast_calls.values()) == 2
    assert list(net._fast_calls)[0][0][0] == shapes[1]  # the oldest (the first batch) was evicted
    net.hybridize(bound_bytes_limit=one // 2)           # no plan fits: parameters stay inputs
    n = len(binds)
    for _ in range(3):
        _close(net(xs[0]).asnumpy(), refs[0])
    assert net.bound_bytes() == 0 and not _is_bound(net) and len(binds) == n + 1


def test_bound_bytes_limit_is_checked():
    net = _convnet()
    with pytest.raises(mx.base.MXNetError, match="bound_bytes_limit"):
        net.hybridize(bound_bytes_limit=-1)
    with pytest.raises(mx.base.MXNetError, match="bound_bytes_limit"):
        net.hybridize(bound_bytes_limit="1GB")


def test_bound_plans_run_the_hosts_target_specific_passes(monkeypatch):
    """A bound plan is optimized for this host as `symjit.compile` optimizes (e.g. pointwise and
    depthwise chains in the blocked layout where the kernel library has its AVX-512 kernels)."""
    from symjit.codegen.llvm import backend
    from symjit.codegen.llvm.target import compile_target
    from symjit.runtime import native_kernels_in_use
    seen = []
    original = backend.compile_graph

    def recording(g, pipeline="inference", constants=None, **kwargs):
        opt, pm = original(g, pipeline, constants, **kwargs)
        if constants:
            seen.append((kwargs.get("target"), [n.op.name for n in opt.nodes]))
        return opt, pm
    monkeypatch.setattr(backend, "compile_graph", recording)
    mx.random.seed(0)
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(32, 1, activation="relu"), nn.Conv2D(32, 3, padding=1, groups=32, activation="relu"),
                nn.Conv2D(32, 1))
    net.initialize(mx.init.Xavier())
    x = _x((1, 32, 8, 8))
    want = net(x).asnumpy()
    net.hybridize()
    _close(net(x).asnumpy(), want)
    assert _is_bound(net) and len(seen) == 1
    target, ops = seen[0]
    assert target == compile_target("native")
    assert ("_conv_blocked" in ops) == native_kernels_in_use()


# ---- the shared MXNet models -------------------------------------------------------------------

@pytest.mark.parametrize("name", ["mlp", "lenet",
                                  pytest.param("resnet18_v1", marks=pytest.mark.slow),
                                  pytest.param("mobilenet1.0", marks=pytest.mark.slow)])
def test_shared_models_bound_hybridize_equals_compile_and_mxnet(name):
    symbol, params = str(model_path(f"{name}-symbol.json")), str(model_path(f"{name}-0000.params"))
    net = gluon.SymbolBlock.imports(symbol, ["data"], params)
    x = np.load(model_path(f"{name}-input.npy"))
    ref = np.load(model_path(f"{name}-output.npy"))
    net.hybridize()
    y = net(nd.array(x)).asnumpy()
    assert _is_bound(net)
    assert np.abs(y - ref).max() <= 1e-4 * np.abs(ref).max()
    model = mx.compile(mx.sym.load(symbol), shapes={"data": x.shape}, params=nd.load(params))
    assert np.abs(y - model(data=x)[0]).max() <= 1e-5 * np.abs(ref).max()
    # a weight written in place is seen
    p = net.collect_params()[sorted(k for k in net.collect_params() if k.endswith("weight"))[0]]
    p.data()[:] = p.data() * 0.5
    _close(net(nd.array(x)).asnumpy(), _imperative(net, nd.array(x)))


def test_own_bytes_counts_as_may_share_memory_does():
    """A bound plan's own bytes (its params not sharing memory with the block's buffers),
    computed over sorted spans, equal the pairwise `np.may_share_memory` count on random
    overlapping, strided, disjoint and zero-size views."""
    from symjit.gluon.cached_op import _own_bytes
    rng = np.random.default_rng(0)
    base = np.zeros(1000, np.float32)

    def views(k):
        out = []
        for _ in range(k):
            lo, hi = sorted(rng.integers(0, 1000, 2))
            out.append(base[lo:hi:rng.integers(1, 3)])
        return out
    for _ in range(500):
        others = views(rng.integers(0, 5)) + [np.zeros(3)]
        arrays = views(rng.integers(0, 5)) + [np.ones(4), base[5:5]]
        want = sum(p.nbytes for p in arrays if not any(np.may_share_memory(p, f) for f in others))
        assert _own_bytes(arrays, others) == want
