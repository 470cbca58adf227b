"""gluon.nn activation layers against numpy formulas and derivatives; hybridized equality."""
from __future__ import annotations

import math

import numpy as np
import pytest

import symjit as mx
from symjit import autograd, nd
from symjit.gluon import nn

_SELU_L, _SELU_A = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717
_erf = np.vectorize(math.erf)


def _sig(x):
    return 1 / (1 + np.exp(-x))


CASES = [
    (lambda: nn.LeakyReLU(0.1), lambda x: np.where(x > 0, x, 0.1 * x), lambda x: np.where(x > 0, 1, 0.1)),
    (lambda: nn.ELU(0.7), lambda x: np.where(x > 0, x, 0.7 * (np.exp(x) - 1)),
     lambda x: np.where(x > 0, 1, 0.7 * np.exp(x))),
    (lambda: nn.SELU(), lambda x: _SELU_L * np.where(x > 0, x, _SELU_A * (np.exp(x) - 1)),
     lambda x: _SELU_L * np.where(x > 0, 1, _SELU_A * np.exp(x))),
    (lambda: nn.GELU(), lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
     lambda x: 0.5 * (1 + _erf(x / np.sqrt(2))) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi)),
    (lambda: nn.Swish(1.5), lambda x: x * _sig(1.5 * x),
     lambda x: _sig(1.5 * x) + 1.5 * x * _sig(1.5 * x) * (1 - _sig(1.5 * x))),
    (lambda: nn.PReLU(), lambda x: np.where(x > 0, x, 0.25 * x), lambda x: np.where(x > 0, 1, 0.25)),
]


@pytest.mark.parametrize("make,f,df", CASES)
def test_activation_forward_and_gradient(make, f, df):
    rs = np.random.RandomState(0)
    x = rs.uniform(-3, 3, size=(3, 4)).astype(np.float32)
    x[np.abs(x) < 1e-2] = 0.5  # keep away from the kink
    layer = make()
    layer.initialize()
    for hybrid in (False, True):
        if hybrid:
            layer.hybridize()
        xx = nd.array(x)
        xx.attach_grad()
        with autograd.record():
            y = layer(xx)
        y.backward()
        np.testing.assert_allclose(y.asnumpy(), f(x.astype(np.float64)), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(xx.grad.asnumpy(), df(x.astype(np.float64)), rtol=1e-4, atol=1e-6)


def test_prelu_learns_per_channel_slopes():
    x = np.array([[[-1.0, 2.0]], [[-3.0, -4.0]]], dtype=np.float32).transpose(0, 2, 1)  # (2, 2, 1)
    layer = nn.PReLU(alpha_initializer=mx.init.Constant(0.5), in_channels=2)
    layer.initialize()
    layer.alpha.set_data(nd.array([0.5, 0.1]))
    with autograd.record():
        y = layer(nd.array(x))
    y.backward()
    ref = np.where(x > 0, x, x * np.array([0.5, 0.1]).reshape(1, 2, 1))
    np.testing.assert_allclose(y.asnumpy(), ref, rtol=1e-6)
    # d/d alpha[c] = sum of negative inputs of channel c
    np.testing.assert_allclose(layer.alpha.grad().asnumpy(), [-4.0, -4.0], rtol=1e-6)
    assert list(layer.collect_params().keys())[0].endswith("_alpha")


def test_names_and_repr():
    assert repr(nn.LeakyReLU(0.2)) == "LeakyReLU(0.2)"
    assert nn.ELU().name.startswith("elu") and nn.Swish().name.startswith("swish")
    with pytest.raises(ValueError):
        nn.LeakyReLU(-1)
