"""Second- and third-order gradients through np ops (autograd.grad with create_graph=True):
the gradient of sum(df/dx) against central differences of the first-order gradient, in
float64. Covers the unary ops (as MXNet 1.9.1) and, beyond MXNet (whose np binary ops and
reductions refuse it), the linear ops, multiply and divide."""
import numpy as onp
import pytest

import symjit as mx
from symjit import autograd

np = mx.np
X = onp.array([[0.3, 0.7, 1.2], [0.5, 0.9, 1.5]])
Y = onp.array([0.4, 1.1, 0.8])

CASES = {
    "x * x * y": lambda x, y: x * x * y,
    "sum(x * x, axis=0) * x": lambda x, y: np.sum(x * x, axis=0) * x,
    "mean(x * x * x)": lambda x, y: np.mean(x * x * x),
    "(x - y) * (x + 2)": lambda x, y: (x - y) * (x + 2),
    "(x * 3 - 1) / 2 * x": lambda x, y: (x * 3 - 1) / 2 * x,
    "x / y * x": lambda x, y: x / y * x,
    "y / x + x / (x + 1)": lambda x, y: y / x + x / (x + 1),
    "sin(x) * y": lambda x, y: np.sin(x) * y,
    "exp(x) * x": lambda x, y: np.exp(x) * x,
    "tanh(x)": lambda x, y: np.tanh(x),
    "log(x) * x": lambda x, y: np.log(x) * x,
}


@pytest.fixture(autouse=True)
def np_mode():
    mx.npx.set_np()
    yield
    mx.npx.reset_np()


def _first_grad(f, xv):
    x = np.array(xv, dtype="float64")
    x.attach_grad()
    with autograd.record():
        out = f(x, np.array(Y, dtype="float64"))
    out.backward()
    return x.grad.asnumpy()


def _second_grad(f, xv):
    x = np.array(xv, dtype="float64")
    x.attach_grad()
    with autograd.record():
        g = autograd.grad(f(x, np.array(Y, dtype="float64")), [x], create_graph=True, retain_graph=True)[0]
        h = g.sum()
    h.backward()
    return x.grad.asnumpy()


@pytest.mark.parametrize("name", list(CASES))
def test_second_order_gradient_matches_finite_differences(name):
    f, eps = CASES[name], 1e-6
    want = onp.zeros_like(X)
    for idx in onp.ndindex(X.shape):
        step = onp.zeros_like(X)
        step[idx] = eps
        want[idx] = (_first_grad(f, X + step).sum() - _first_grad(f, X - step).sum()) / (2 * eps)
    onp.testing.assert_allclose(_second_grad(f, X), want, rtol=1e-5, atol=1e-6)


def test_third_order_gradient_of_a_cube():
    x = np.array(X, dtype="float64")
    x.attach_grad()
    with autograd.record():
        g1 = autograd.grad(x * x * x, [x], create_graph=True, retain_graph=True)[0]
        g2 = autograd.grad(g1, [x], create_graph=True, retain_graph=True)[0]
        h = g2.sum()
    h.backward()
    onp.testing.assert_allclose(g2.asnumpy(), 6 * X, rtol=1e-12)
    onp.testing.assert_allclose(x.grad.asnumpy(), onp.full_like(X, 6.0), rtol=1e-12)


def test_ops_without_second_order_rule_say_so():
    x = np.array(X)
    x.attach_grad()
    with autograd.record():
        g = autograd.grad(np.prod(x, axis=1), [x], create_graph=True, retain_graph=True)[0]
        h = g.sum()
    with pytest.raises(mx.base.MXNetError):
        h.backward()
