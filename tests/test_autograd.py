"""autograd: recording state, backward with grad_req, head grads, retain_graph, Function, grad."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit import autograd, nd
from symjit.base import MXNetError


def test_recording_and_training_flags():
    assert not autograd.is_recording() and not autograd.is_training()
    with autograd.record():
        assert autograd.is_recording() and autograd.is_training()
        with autograd.pause():
            assert not autograd.is_recording() and not autograd.is_training()
        with autograd.predict_mode():
            assert not autograd.is_training()
    with autograd.record(train_mode=False):
        assert autograd.is_recording() and not autograd.is_training()
    with autograd.train_mode():
        assert autograd.is_training() and not autograd.is_recording()
    prev = autograd.set_recording(True)
    assert prev is False and autograd.is_recording()
    autograd.set_recording(False)
    assert autograd.set_training(True) is False
    autograd.set_training(False)


def test_backward_matches_analytic_gradient_with_broadcasting():
    a_np = np.random.default_rng(0).uniform(-1, 1, (3, 4)).astype(np.float32)
    b_np = np.random.default_rng(1).uniform(-1, 1, (4,)).astype(np.float32)
    a, b = nd.array(a_np), nd.array(b_np)
    a.attach_grad()
    b.attach_grad()
    with autograd.record():
        y = nd.tanh(a * b) + a
    y.backward()
    t = np.tanh(a_np * b_np)
    np.testing.assert_allclose(a.grad.asnumpy(), (1 - t ** 2) * b_np + 1, rtol=1e-5)
    np.testing.assert_allclose(b.grad.asnumpy(), ((1 - t ** 2) * a_np).sum(0), rtol=1e-5)


def test_grad_req_add_write_null_and_head_grads():
    x = nd.array([1.0, 2.0, 3.0])
    x.attach_grad(grad_req="add")
    for _ in range(2):
        with autograd.record():
            y = x * x
        y.backward(nd.array([1.0, 0.5, 2.0]))
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * np.array([2, 2, 12.0]))
    w = nd.array([1.0, 2.0])
    w.attach_grad(grad_req="null")
    with autograd.record():
        (w * 3).backward()
    assert not w.grad.asnumpy().any()
    v = nd.array([1.0, 2.0])
    v.attach_grad()
    with autograd.record():
        (v * 3).backward()
    with autograd.record():
        (v * 5).backward()
    assert v.grad.asnumpy().tolist() == [5, 5]  # write overwrites


def test_retain_graph_and_freed_graph_error():
    x = nd.array([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        y = nd.exp(x)
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), np.exp([1, 2]), rtol=1e-6)
    with pytest.raises(MXNetError, match="freed"):
        y.backward()


def test_unrecorded_head_is_an_error():
    with pytest.raises(MXNetError, match="not in a recorded graph"):
        nd.ones((2,)).backward()


def test_inplace_write_to_recorded_array_is_refused():
    x = nd.array([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        y = x * 2
        with pytest.raises(MXNetError, match="not supported when recording with autograd"):   # MXNet's text
            y[:] = 0
        with pytest.raises(MXNetError, match="recorded"):
            y += 1



def test_mark_variables_and_grad_second_order():
    x = nd.array([0.5, 1.0])
    g = nd.zeros((2,))
    autograd.mark_variables([x], [g])
    with autograd.record():
        y = nd.sin(x) * x
    (dx,) = autograd.grad(y, [x], create_graph=True)
    np.testing.assert_allclose(dx.asnumpy(), np.cos([0.5, 1]) * [0.5, 1] + np.sin([0.5, 1]), rtol=1e-6)
    dx.backward()
    xs = np.array([0.5, 1.0])
    np.testing.assert_allclose(g.asnumpy(), -np.sin(xs) * xs + 2 * np.cos(xs), rtol=1e-5)


def test_grad_does_not_touch_grad_buffers():
    x = nd.array([2.0])
    x.attach_grad()
    with autograd.record():
        y = x * x * x
    dx = autograd.grad(y, x)
    assert dx.asnumpy().tolist() == [12.0] and x.grad.asnumpy().tolist() == [0.0]


def test_custom_function():
    class Square(autograd.Function):
        def forward(self, x):
            self.save_for_backward(x)
            return x * x

        def backward(self, dy):
            (x,) = self.saved_tensors
            return dy * 2 * x

    x = nd.array([1.0, -3.0])
    x.attach_grad()
    with autograd.record():
        y = Square()(x) + x
    y.backward()
    assert x.grad.asnumpy().tolist() == [3.0, -5.0]


def test_gradient_flows_through_multiple_paths_and_unused_variables():
    x = nd.array([1.0, 2.0])
    z = nd.array([5.0, 5.0])
    x.attach_grad()
    z.attach_grad()
    with autograd.record():
        a = x * 2
        y = a * a + a
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), (8 * x.asnumpy() + 2))
    assert not z.grad.asnumpy().any()
    assert mx.autograd is autograd


def test_recorded_indexing_flows_gradient():
    x = nd.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    x.attach_grad()
    with autograd.record():
        y = x[1] * 2
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [[0, 0, 0], [2, 2, 2]])


@pytest.mark.parametrize("make", [lambda x: nd.sigmoid(x), lambda x: nd.Activation(x, act_type="sigmoid"),
                                  lambda x: nd.tanh(x), lambda x: nd.relu(x)])
def test_activation_gradients_come_from_the_output_without_overflow(make):
    """sigmoid/tanh/relu gradients are computed from the output as MXNet's backward kernels do
    (y(1-y), 1-y**2, y > 0): finite at the tails (the derivative of the forward expression,
    exp(-x)/(1+exp(-x))**2, overflows to nan below x = -88 in float32)."""
    xs = np.array([-100.0, -90.0, -3.0, -0.5, 0.0, 0.5, 3.0, 90.0, 100.0], np.float32)
    x = nd.array(xs)
    x.attach_grad()
    with autograd.record():
        y = make(x)
    y.backward()
    g, yv = x.grad.asnumpy(), y.asnumpy().astype(np.float32)
    assert np.isfinite(g).all()
    if np.allclose(yv, 1 / (1 + np.exp(-xs.astype(np.float64))), atol=1e-6):
        expected = yv * (np.float32(1) - yv)
    elif np.allclose(yv, np.tanh(xs), atol=1e-6):
        expected = np.float32(1) - yv * yv
    else:
        expected = (yv > 0).astype(np.float32)
    np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-30)
