"""Initializers: MXNet's dispatch by name suffix, distributions, dumps(), Mixed and Load."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit import nd
from symjit.base import MXNetError


def test_dumps_match_mxnet():
    assert mx.init.Normal(0.8).dumps() == '["normal", {"sigma": 0.8}]'
    assert mx.init.Xavier(factor_type="in", magnitude=2.45).dumps() == \
        '["xavier", {"rnd_type": "uniform", "factor_type": "in", "magnitude": 2.45}]'
    assert mx.init.Uniform().dumps() == '["uniform", {"scale": 0.07}]'
    assert mx.init.create(mx.init.Xavier().dumps()) == mx.init.Xavier()


def test_suffix_dispatch():
    init = mx.init.Uniform(0.5)
    arrs = {n: nd.ones((3, 4)) * 7 for n in ("w_weight", "w_bias", "bn_gamma", "bn_beta",
                                             "bn_moving_mean", "bn_moving_var")}
    for n, a in arrs.items():
        init(mx.init.InitDesc(n), a)
    w = arrs["w_weight"].asnumpy()
    assert np.abs(w).max() <= 0.5 and w.std() > 0.05
    assert not arrs["w_bias"].asnumpy().any() and not arrs["bn_beta"].asnumpy().any()
    assert (arrs["bn_gamma"].asnumpy() == 1).all() and (arrs["bn_moving_var"].asnumpy() == 1).all()
    assert not arrs["bn_moving_mean"].asnumpy().any()
    with pytest.raises(MXNetError, match="Unknown initialization pattern"):
        init(mx.init.InitDesc("mystery"), nd.ones((2,)))
    a = nd.zeros((2, 2))
    init(mx.init.InitDesc("odd", attrs={"__init__": mx.init.One().dumps()}), a)
    assert (a.asnumpy() == 1).all()


def test_xavier_and_normal_statistics():
    mx.random.seed(0)
    a = nd.zeros((200, 300))
    mx.init.Xavier(magnitude=3)(mx.init.InitDesc("x_weight"), a)
    bound = np.sqrt(3 / ((200 + 300) / 2))
    assert np.abs(a.asnumpy()).max() <= bound and np.abs(a.asnumpy()).max() > 0.95 * bound
    b = nd.zeros((300, 300))
    mx.init.Normal(0.5)(mx.init.InitDesc("n_weight"), b)
    assert abs(b.asnumpy().std() - 0.5) < 0.01
    c = nd.zeros((64, 32, 3, 3))
    mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2)(mx.init.InitDesc("c_weight"), c)
    assert abs(c.asnumpy().std() - np.sqrt(2 / (32 * 9))) < 0.01
    with pytest.raises(MXNetError, match="at least 2D"):
        mx.init.Xavier()(mx.init.InitDesc("v_weight"), nd.zeros((5,)))


def test_orthogonal_constant_bilinear_lstmbias():
    a = nd.zeros((4, 6))
    mx.init.Orthogonal(scale=1.0)(mx.init.InitDesc("o_weight"), a)
    q = a.asnumpy()
    np.testing.assert_allclose(q @ q.T, np.eye(4), atol=1e-5)
    c = nd.zeros((2, 2))
    mx.init.Constant(3.5)(mx.init.InitDesc("c_weight"), c)
    assert (c.asnumpy() == 3.5).all()
    b = nd.zeros((1, 1, 4, 4))
    mx.init.Bilinear()(mx.init.InitDesc("up_weight"), b)
    np.testing.assert_allclose(b.asnumpy()[0, 0, 0], [0.0625, 0.1875, 0.1875, 0.0625])
    lb = nd.zeros((8,))
    # a bias-named parameter reaches LSTMBias through its __init__ attribute, as Gluon's LSTM does
    mx.init.Uniform()(mx.init.InitDesc("lstm_bias", attrs={"__init__": mx.init.LSTMBias(1.0).dumps()}), lb)
    assert lb.asnumpy().tolist() == [0, 0, 1, 1, 0, 0, 0, 0]


def test_mixed_and_load():
    init = mx.init.Mixed(["bias", ".*"], [mx.init.Zero(), mx.init.Constant(2.0)])
    w, b = nd.ones((2, 2)), nd.ones((2,))
    init("fc_weight", w)
    init("fc_bias", b)
    assert (w.asnumpy() == 2).all() and not b.asnumpy().any()
    ld = mx.init.Load({"arg:fc_weight": nd.array([[1, 2], [3, 4]])}, default_init=mx.init.Zero())
    w2, other = nd.zeros((2, 2)), nd.ones((3,))
    ld("fc_weight", w2)
    ld("other_weight", other)
    assert w2.asnumpy().tolist() == [[1, 2], [3, 4]] and not other.asnumpy().any()
    with pytest.raises(MXNetError, match="shape"):
        ld("fc_weight", nd.zeros((3, 3)))
    with pytest.raises(MXNetError, match="did not match"):
        mx.init.Mixed(["bias"], [mx.init.Zero()])("w", nd.ones((1,)))
