"""contrib.round_ste / contrib.sign_ste: round (halves away from zero) and sign forward, the
head gradient passed straight through, imperatively and in a compiled Symbol graph."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx

X = np.array([[-2.5, -1.5, -0.5, 0.0], [0.4, 0.5, 1.5, 2.7]], np.float32)
FORWARD = {"round_ste": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), "sign_ste": np.sign}


@pytest.mark.parametrize("name", sorted(FORWARD))
def test_ste_forward_and_straight_through_gradient(name):
    x = mx.nd.array(X)
    x.attach_grad()
    head = np.arange(8, dtype=np.float32).reshape(2, 4)
    with mx.autograd.record():
        y = getattr(mx.nd.contrib, name)(x)
    y.backward(mx.nd.array(head))
    np.testing.assert_array_equal(y.asnumpy(), FORWARD[name](X))
    np.testing.assert_array_equal(x.grad.asnumpy(), head)


@pytest.mark.parametrize("name", sorted(FORWARD))
def test_ste_in_a_compiled_graph(name):
    data = mx.sym.var("data")
    net = getattr(mx.sym.contrib, name)(data * 2.0) * 3.0
    ex = net.simple_bind(mx.cpu(), data=X.shape)
    ex.arg_dict["data"][:] = X
    out = ex.forward(is_train=True)[0].asnumpy()
    ex.backward(mx.nd.ones(X.shape))
    np.testing.assert_array_equal(out, FORWARD[name](X * 2.0) * 3.0)
    np.testing.assert_array_equal(ex.grad_dict["data"].asnumpy(), np.full(X.shape, 6.0, np.float32))
