"""Eager compute-bound ops (fastpath.try_compiled_op) run the compiled one-node graph: the same
native kernel as a hybridized block, so eager and hybridized results agree to the bit."""
from __future__ import annotations

import numpy as np

import symjit as mx
from symjit import gluon
from symjit.gluon import nn
from symjit.ndarray import fastpath


def _eager_and_hybrid(net, x):
    net.initialize()
    results = []
    for hybrid in (False, True):
        if hybrid:
            net.hybridize()
        xi = x.copy()
        xi.attach_grad()
        with mx.autograd.record():
            y = net(xi)
        y.backward()
        results.append((y.asnumpy(), xi.grad.asnumpy()))
    return results


class _Reshaped(gluon.HybridBlock):
    def __init__(self, layer, shape, **kw):
        super().__init__(**kw)
        self.shape = shape
        with self.name_scope():
            self.layer = layer

    def hybrid_forward(self, F, x):
        return self.layer(x.reshape(self.shape))


def test_long_dense_reduction_eager_equals_hybridized():
    rng = np.random.default_rng(3)
    x = mx.nd.array(rng.uniform(size=(4, 2, 128, 128)).astype(np.float32))
    (y0, g0), (y1, g1) = _eager_and_hybrid(_Reshaped(nn.Dense(5), (8, -1)), x)
    np.testing.assert_array_equal(y0, y1)
    np.testing.assert_array_equal(g0, g1)
    # and the compiled result is the product it claims to be
    net = nn.Dense(3, use_bias=False, in_units=16384)
    net.initialize()
    xx = x.reshape((8, -1))
    w = net.weight.data().asnumpy()
    np.testing.assert_allclose(net(xx).asnumpy(), xx.asnumpy().astype(np.float64) @ w.T.astype(np.float64),
                               rtol=1e-4, atol=1e-4)


def test_conv_and_pool_eager_equal_hybridized():
    rng = np.random.default_rng(4)
    x = mx.nd.array(rng.uniform(size=(2, 16, 48, 48)).astype(np.float32))
    for layer in (nn.Conv2D(8, 3, padding=1), nn.MaxPool2D(strides=(2, 3), padding=(1, 1)),
                  nn.AvgPool2D(strides=2, padding=1), nn.Conv2DTranspose(4, 3, strides=2)):
        (y0, g0), (y1, g1) = _eager_and_hybrid(_Reshaped(layer, (2, 16, 48, 48)), x)
        np.testing.assert_allclose(y0, y1, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(g0, g1, rtol=1e-6, atol=1e-7)


def test_compiled_op_cache_and_small_inputs_keep_reference():
    op = mx.ops.get_op("FullyConnected")
    attrs = op.parse({"num_hidden": 4, "no_bias": True})
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 1 << 15)).astype(np.float32)
    w = rng.standard_normal((4, 1 << 15)).astype(np.float32)
    got = fastpath.try_compiled_op(op, attrs, [x, w], False)
    assert got is not None and len(got) == 1
    np.testing.assert_allclose(got[0], x.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-3, atol=1e-2)
    n = len(fastpath._OP_GRAPHS)
    fastpath.try_compiled_op(op, attrs, [x, w], False)
    assert len(fastpath._OP_GRAPHS) == n          # the second call reuses the compiled graph
    assert fastpath.try_compiled_op(op, attrs, [x[:, :16], w[:, :16]], False) is None
    assert fastpath.try_compiled_op(op, attrs, [x.astype(np.float64), w.astype(np.float64)], False) is None


def test_slice_gradient_eager_and_compiled_backward():
    """slice's gradient: zeros_like then _slice_assign (lowered natively, in place, in the
    compiled backward graph)."""
    class Net(gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return F.slice(x, begin=(1, 0, 2), end=(3, None, 7), step=(1, 2, 2)) * 3

    x = mx.nd.array(np.random.default_rng(2).standard_normal((4, 5, 9)).astype(np.float32))
    want = np.zeros((4, 5, 9), np.float32)
    want[1:3, ::2, 2:7:2] = 3
    for _, grad in _eager_and_hybrid(Net(), x):
        np.testing.assert_array_equal(grad, want)


def test_batchnorm_eager_equals_hybridized_and_updates_moving_stats():
    """BatchNorm's data gradient after a slice is pure rounding noise (dy = 1 cancels): eager and
    hybridized agree only when both run the same kernel."""
    rng = np.random.default_rng(6)
    x = mx.nd.array(rng.uniform(size=(4, 32, 32, 32)).astype(np.float32))
    (y0, g0), (y1, g1) = _eager_and_hybrid(_Reshaped(nn.BatchNorm(), (4, 32, 32, 32)), x)
    np.testing.assert_array_equal(y0, y1)
    np.testing.assert_array_equal(g0, g1)
    bn = nn.BatchNorm(in_channels=32)
    bn.initialize()
    with mx.autograd.record():
        bn(x)
    want = 0.1 * x.asnumpy().mean(axis=(0, 2, 3))
    np.testing.assert_allclose(bn.running_mean.data().asnumpy(), want, rtol=1e-5, atol=1e-7)


def test_fused_rnn_eager_runs_the_native_kernel():
    """nd.RNN and its recorded gradient run the compiled one-node graphs (the native kernel),
    matching the numpy reference within float32 rounding."""
    from symjit.ops.registry import get_op
    from symjit.ops.rnn import param_size
    rng = np.random.default_rng(5)
    attrs = dict(state_size=96, num_layers=2, mode="lstm")
    n = param_size(get_op("RNN").parse(attrs), 40)
    arrays = [rng.standard_normal((12, 8, 40)), rng.standard_normal(n) * 0.1,
              rng.standard_normal((2, 8, 96)), rng.standard_normal((2, 8, 96))]
    head = rng.standard_normal((12, 8, 96)).astype(np.float32)

    def run():
        ins = [mx.nd.array(a.astype(np.float32)) for a in arrays]
        for a in ins:
            a.attach_grad()
        with mx.autograd.record():
            y = mx.nd.RNN(*ins, **attrs)
        y.backward(mx.nd.array(head))
        return [y.asnumpy()] + [a.grad.asnumpy() for a in ins]
    fastpath._OP_GRAPHS.clear()
    got = run()
    assert {k[0] for k, v in fastpath._OP_GRAPHS.items() if v is not None} >= {"RNN", "_backward_RNN"}
    fastpath._ENABLED = False
    try:
        want = run()
    finally:
        fastpath._ENABLED = True
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(w).max())))


def test_log_softmax_eager_runs_the_compiled_kernel():
    rng = np.random.default_rng(6)
    a = rng.standard_normal((300, 1000)).astype(np.float32) * 4
    x = mx.nd.array(a)
    got = mx.nd.log_softmax(x).asnumpy()
    z = a.astype(np.float64) - a.max(axis=1, keepdims=True)
    want = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert any(k[0] == "log_softmax" and v is not None for k, v in fastpath._OP_GRAPHS.items())


def test_softmax_cross_entropy_backward_runs_compiled_kernels():
    """The unhybridized loss's backward (pick's scatter, sized by its output, and log_softmax's
    gradient) runs compiled; the gradient is softmax - onehot, averaged per sample (rtol 1e-5)."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((64, 2000)).astype(np.float32)
    label = rng.integers(0, 2000, 64)
    x = mx.nd.array(a)
    x.attach_grad()
    fastpath._OP_GRAPHS.clear()
    with mx.autograd.record():
        loss = gluon.loss.SoftmaxCrossEntropyLoss()(x, mx.nd.array(label))
    loss.backward()
    e = np.exp(a.astype(np.float64) - a.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    want[np.arange(64), label] -= 1
    np.testing.assert_allclose(x.grad.asnumpy(), want, rtol=1e-5, atol=1e-6)
    compiled = {k[0] for k, v in fastpath._OP_GRAPHS.items() if v is not None}
    assert {"_backward_pick", "_backward_log_softmax", "log_softmax"} <= compiled, compiled


def test_eager_kernel_compiles_after_jit_after_reference_uses(monkeypatch):
    """SYMJIT_JIT_AFTER=n: an eager op whose kernel is not compiled yet runs the numpy reference
    for n uses, then compiles; results agree either way."""
    from symjit.codegen.llvm import ElementwiseSpec, is_compiled
    from symjit.ops import get_op
    monkeypatch.setenv("SYMJIT_JIT_AFTER", "2")
    rng = np.random.default_rng(11)
    a = rng.normal(size=(3, 1, 97, 251)).astype(np.float32)     # a broadcast pattern no other test uses
    b = rng.normal(size=(1, 5, 97, 1)).astype(np.float32)
    op = get_op("broadcast_hypot")
    expr = op.full_expr(op.parse({}))
    spec = ElementwiseSpec((expr,), ("float32", "float32"), (a.shape, b.shape), "float32", ("float32",),
                           (3, 5, 97, 251))
    assert not is_compiled(spec)
    assert [fastpath.try_compiled_elementwise(op, {}, [a, b]) for _ in range(2)] == [None, None]
    np.testing.assert_allclose(mx.nd.broadcast_hypot(mx.nd.array(a), mx.nd.array(b)).asnumpy(),
                               np.hypot(a, b), rtol=1e-5)     # the third use: compiled
    assert is_compiled(spec)
    np.testing.assert_allclose(fastpath.try_compiled_elementwise(op, {}, [a, b])[0], np.hypot(a, b), rtol=1e-5)
