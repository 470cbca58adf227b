"""A backward without retain_graph releases the recorded graph's arrays by reference counting
alone (no cyclic garbage collection needed) once the caller drops its arrays of the step, and
nothing the caller still holds is changed or reused by later steps."""
import gc
import weakref

import numpy as np
import pytest

import symjit as mx
from symjit import autograd
from symjit.base import MXNetError
from symjit.gluon import nn, rnn


@pytest.fixture
def no_gc():
    """Cyclic garbage collection off for the test (so only reference counting frees)."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    yield
    if was:
        gc.enable()


def _lm(hybridize=True):
    class LM(mx.gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.embed = nn.Embedding(20, 6)
                self.lstm = rnn.LSTM(8, 2, input_size=6)
                self.out = nn.Dense(20, flatten=False, in_units=8)

        def hybrid_forward(self, F, tokens):
            return self.out(self.lstm(self.embed(tokens)))
    mx.random.seed(0)
    net = LM()
    net.initialize(mx.init.Xavier())
    if hybridize:
        net.hybridize()
    return net


def _step_refs(net, trainer, data, label):
    """One training step; weak references to its output and loss (the step's arrays)."""
    loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()
    with autograd.record():
        out = net(data)
        loss = loss_fn(out, label)
    loss.backward()
    trainer.step(data.shape[1])
    return weakref.ref(out), weakref.ref(loss)


@pytest.mark.parametrize("hybridize", [True, False])
def test_step_arrays_freed_without_gc(no_gc, hybridize):
    rng = np.random.default_rng(0)
    data = mx.nd.array(rng.integers(0, 20, (5, 3)))
    label = mx.nd.array(rng.integers(0, 20, (5, 3)))
    net = _lm(hybridize)
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    for _ in range(3):
        out_ref, loss_ref = _step_refs(net, trainer, data, label)
        assert out_ref() is None and loss_ref() is None


def test_eager_graph_freed_without_gc(no_gc):
    """An eager op's output is released by reference counting once its graph is freed."""
    x = mx.nd.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    x.attach_grad()
    with autograd.record():
        y = x * 2
    ref = weakref.ref(y)
    y.backward()
    del y
    assert ref() is None


def test_kept_arrays_unchanged_by_later_steps(no_gc):
    """Arrays a caller keeps from one step (outputs, losses, gradients copied or not) keep their
    values while later steps run and allocate buffers of the same sizes."""
    rng = np.random.default_rng(1)
    data = mx.nd.array(rng.integers(0, 20, (5, 3)))
    label = mx.nd.array(rng.integers(0, 20, (5, 3)))
    net = _lm()
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()
    kept = []
    for _ in range(4):
        with autograd.record():
            out = net(data)
            loss = loss_fn(out, label)
        loss.backward()
        grad = net.out.weight.grad()
        kept.append((out, loss, grad, out.asnumpy().copy(), loss.asnumpy().copy(), grad.asnumpy().copy()))
        trainer.step(3)
        for o, lo, g, o_np, lo_np, g_np in kept[:-1]:
            np.testing.assert_array_equal(o.asnumpy(), o_np)
            np.testing.assert_array_equal(lo.asnumpy(), lo_np)
    losses = [k[4].mean() for k in kept]
    assert losses[-1] < losses[0]            # training still trains


def test_freed_graph_semantics_unchanged():
    """A second backward through a freed graph still raises; retain_graph still allows it and
    gives the same gradient; an output of a freed graph used in a new graph still acts as its
    values (gradient flows to the new graph's own variables)."""
    x = mx.nd.array(np.array([1.0, 2.0, 3.0], np.float32))
    x.attach_grad()
    with autograd.record():
        y = (x * x).sum()
    y.backward(retain_graph=True)
    g1 = x.grad.asnumpy().copy()
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), g1)
    np.testing.assert_allclose(g1, 2 * np.array([1.0, 2.0, 3.0]))
    with pytest.raises(MXNetError, match="freed"):
        y.backward()

    with autograd.record():
        z = mx.nd.exp(x)
    z.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), np.exp([1.0, 2.0, 3.0]), rtol=1e-6)
    w = mx.nd.array(np.array([0.5, -1.0, 2.0], np.float32))
    w.attach_grad()
    with autograd.record():
        v = (z * w).sum()
    v.backward()
    np.testing.assert_allclose(w.grad.asnumpy(), np.exp([1.0, 2.0, 3.0]), rtol=1e-6)


def test_variable_and_gradient_freed_without_gc(no_gc):
    """A variable (attach_grad) and its gradient buffer are freed when the program drops them,
    after a backward or without one (the tape holds a variable weakly)."""
    for run_backward in (True, False):
        x = mx.nd.ones((4, 5))
        x.attach_grad()
        with autograd.record():
            y = (x * 3).sum()
        if run_backward:
            y.backward()
            np.testing.assert_allclose(x.grad.asnumpy(), 3.0)
        x_ref, g_ref = weakref.ref(x), weakref.ref(x.grad)
        del x, y
        assert x_ref() is None and g_ref() is None


def test_recorded_graph_without_backward_freed_without_gc(no_gc):
    """Recording without ever calling backward leaves no cycle: the outputs and the arrays their
    nodes keep go when the program drops the outputs."""
    x = mx.nd.ones((3, 3))
    x.attach_grad()
    with autograd.record():
        h = mx.nd.exp(x)
        y = h * 2
    refs = [weakref.ref(y), weakref.ref(h)]
    del h, y
    assert all(r() is None for r in refs)


def test_gradient_reaches_a_view_holding_the_variable(no_gc):
    """A numpy-interface view shares the variable's gradient and entry: with the original array
    dropped, a backward through the view still writes the shared gradient."""
    x = mx.nd.array(np.array([1.0, 2.0], np.float32))
    x.attach_grad()
    v = x.as_np_ndarray()
    del x
    with autograd.record():
        y = (v * v).sum()
    y.backward()
    np.testing.assert_allclose(v.grad.asnumpy(), [2.0, 4.0])


def test_hybridized_block_and_plans_freed_without_gc(no_gc):
    """A hybridized block that ran forward and backward (its compiled plans and their arenas)
    is released by reference counting when the program drops it."""
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Dense(8, activation="relu"), nn.Dense(2))
    net.initialize()
    net.hybridize()
    x = mx.nd.ones((4, 6))
    x.attach_grad()
    with autograd.record():
        y = net(x)
    y.backward()
    net(x)                                   # the inference plan too
    refs = [weakref.ref(net), weakref.ref(net._cached_op)]
    del net, y
    assert all(r() is None for r in refs)
