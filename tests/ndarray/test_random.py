"""mx.nd.random / mx.random: MXNet's argument forms, shapes, dtypes, contexts, seeding, errors."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit import autograd
from symjit.base import MXNetError

nd = mx.nd


@pytest.fixture(autouse=True)
def _seeded():
    mx.random.seed(1234)


# ------------------------------------------------------------------------------------------
# Scalar parameters -> _random_*
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn,args", [
    (nd.random.uniform, (0, 1)), (nd.random.normal, (0, 1)), (nd.random.gamma, (1, 1)),
    (nd.random.exponential, (1,)), (nd.random.poisson, (1,)),
    (nd.random.negative_binomial, (10, 0.5)), (nd.random.generalized_negative_binomial, (10, 0.5)),
])
def test_scalar_forms_shapes_and_dtypes(fn, args):
    x = fn(*args)
    assert x.shape == (1,) and x.dtype == np.float32 and x.context == mx.cpu(0)
    assert fn(*args, shape=3).shape == (3,)
    assert fn(*args, shape=(2, 4)).shape == (2, 4)
    assert fn(*args, shape=(2,), dtype="float64").dtype == np.float64
    assert fn(*args, shape=(2,), dtype=np.float16).dtype == np.float16


def test_positional_shape_and_ctx():
    x = nd.random.uniform(0, 255, (4, 2, 3))
    assert x.shape == (4, 2, 3)
    assert x.asnumpy().min() >= 0 and x.asnumpy().max() < 255
    y = nd.random.normal(0, 1, (2,), ctx=mx.cpu(1))
    assert y.context == mx.cpu(1)
    with mx.cpu(2):
        assert nd.random.uniform(shape=2).context == mx.cpu(2)


def test_defaults_are_mxnets():
    u = nd.random.uniform(shape=100_000).asnumpy()
    assert u.min() >= 0 and u.max() < 1
    n = nd.random.normal(shape=100_000).asnumpy()
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03


def test_statistics_through_nd():
    x = nd.random.normal(5.0, 2.0, shape=(200_000,)).asnumpy()
    assert abs(x.mean() - 5.0) < 0.03 and abs(x.std() - 2.0) < 0.03
    e = nd.random.exponential(scale=4.0, shape=(200_000,)).asnumpy()  # scale = 1 / rate
    assert abs(e.mean() - 4.0) < 0.06
    g = nd.random.gamma(alpha=3.0, beta=0.5, shape=(200_000,)).asnumpy()
    assert abs(g.mean() - 1.5) < 0.02 and abs(g.var() - 0.75) < 0.03


def test_out_argument_sets_shape_and_dtype():
    out = nd.zeros((3, 4), dtype="float64")
    res = nd.random.uniform(-1, 1, out=out)
    assert res is out
    a = out.asnumpy()
    assert a.dtype == np.float64 and np.all(a != 0) and a.min() >= -1 and a.max() < 1


def test_randn():
    x = nd.random.randn(2, 3, loc=10, scale=0.001)
    assert x.shape == (2, 3) and x.dtype == np.float32
    np.testing.assert_allclose(x.asnumpy(), 10, atol=0.01)
    assert nd.random.randn(4, dtype="float64").dtype == np.float64
    with pytest.raises(MXNetError):
        nd.random.randn(2, loc=nd.ones(1))


def test_randint():
    x = nd.random.randint(-5, 5, shape=(1000,))
    assert x.dtype == np.int32 and x.shape == (1000,)
    a = x.asnumpy()
    assert a.min() >= -5 and a.max() <= 4 and len(np.unique(a)) == 10
    assert nd.random.randint(0, 3).shape == (1,)
    assert nd.random.randint(0, 3, shape=2, dtype="int64").dtype == np.int64
    with pytest.raises(MXNetError, match="low must be less than high"):
        nd.random.randint(3, 3)
    with pytest.raises(MXNetError, match="integer"):
        nd.random.randint(0.5, 3)


# ------------------------------------------------------------------------------------------
# NDArray parameters -> _sample_*
# ------------------------------------------------------------------------------------------

def test_array_parameters_output_shape():
    low, high = nd.array([1, 2, 3]), nd.array([2, 3, 4])
    x = nd.random.uniform(low, high, shape=2)
    assert x.shape == (3, 2)
    a = x.asnumpy()
    for i in range(3):
        assert np.all((a[i] >= i + 1) & (a[i] < i + 2))
    assert nd.random.uniform(low, high).shape == (3,)
    assert nd.random.normal(nd.zeros((2, 2)), nd.ones((2, 2)), shape=(3, 4)).shape == (2, 2, 3, 4)
    mu, alpha = nd.array([1, 2, 3]), nd.array([0.2, 0.4, 0.6])
    g = nd.random.generalized_negative_binomial(mu, alpha, shape=2)
    assert g.shape == (3, 2) and g.dtype == np.float32
    np.testing.assert_array_equal(g.asnumpy(), np.round(g.asnumpy()))


def test_array_parameters_follow_param_context_and_dtype():
    lam = nd.array([1.0, 2.0], ctx=mx.cpu(1))
    x = nd.random.poisson(lam, shape=3, dtype="float64")
    assert x.context == mx.cpu(1) and x.dtype == np.float64 and x.shape == (2, 3)
    s = nd.random.exponential(nd.array([1.0, 100.0]), shape=50_000).asnumpy()
    assert abs(s[0].mean() - 1.0) < 0.05 and abs(s[1].mean() - 100.0) < 5.0


def test_array_parameters_with_out():
    out = nd.zeros((2, 5))
    nd.random.normal(nd.array([0.0, 100.0]), nd.array([1.0, 1.0]), out=out)
    a = out.asnumpy()
    assert abs(a[0].mean()) < 3 and abs(a[1].mean() - 100) < 3


def test_sampler_gradients_are_zero_under_autograd():
    mu, sigma = nd.array([1.0, 2.0]), nd.array([1.0, 1.0])
    mu.attach_grad()
    sigma.attach_grad()
    with autograd.record():
        y = nd.random.normal(mu, sigma, shape=3)
        loss = y * 2
    loss.backward()
    np.testing.assert_array_equal(mu.grad.asnumpy(), 0)
    np.testing.assert_array_equal(sigma.grad.asnumpy(), 0)


# ------------------------------------------------------------------------------------------
# multinomial, shuffle
# ------------------------------------------------------------------------------------------

def test_multinomial():
    probs = nd.array([[0, 0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1, 0]])
    x = nd.random.multinomial(probs)
    assert x.shape == (2,) and x.dtype == np.int32
    y = nd.random.multinomial(probs, shape=2)
    assert y.shape == (2, 2)
    s, logp = nd.random.multinomial(probs, get_prob=True)
    assert s.shape == (2,) and logp.shape == (2,) and logp.dtype == np.float32
    p = probs.asnumpy()
    np.testing.assert_allclose(logp.asnumpy(), np.log(p[[0, 1], s.asnumpy()]), rtol=1e-6)
    assert nd.random.multinomial(nd.array([0.5, 0.5]), dtype="float32").dtype == np.float32
    big = nd.random.multinomial(nd.array([0.25, 0.75]), shape=100_000).asnumpy()
    assert abs(big.mean() - 0.75) < 0.01


def test_multinomial_log_prob_gradient_through_autograd():
    probs = nd.array([[0.2, 0.8], [0.5, 0.5]])
    probs.attach_grad()
    with autograd.record():
        s, logp = nd.random.multinomial(probs, shape=4, get_prob=True)
    logp.backward()
    idx = s.asnumpy().astype(int)
    p = probs.asnumpy()
    expected = np.zeros_like(p)
    for r in range(2):
        for k in idx[r]:
            expected[r, k] += 1 / p[r, k]
    np.testing.assert_allclose(probs.grad.asnumpy(), expected, rtol=1e-6)


def test_shuffle():
    data = nd.array([[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]])
    y = nd.random.shuffle(data)
    assert y.shape == (4, 3) and y.dtype == np.float32
    rows = sorted(map(tuple, y.asnumpy()))
    assert rows == sorted(map(tuple, data.asnumpy()))
    np.testing.assert_array_equal(data.asnumpy()[0], [0, 1, 2])  # input untouched
    assert nd.shuffle(data).shape == (4, 3)


# ------------------------------------------------------------------------------------------
# mx.random, seeding, raw op functions
# ------------------------------------------------------------------------------------------

def test_mx_random_forwards_to_nd_random():
    assert mx.random.uniform is nd.random.uniform
    assert mx.random.normal(0, 1, shape=(2, 2)).shape == (2, 2)


def test_seed_reproducibility():
    mx.random.seed(1)
    a = [nd.random.normal(shape=5).asnumpy(), nd.random.uniform(nd.zeros(2), nd.ones(2)).asnumpy(),
         nd.random.shuffle(nd.arange(10)).asnumpy(), nd.random.randint(0, 100, shape=4).asnumpy()]
    mx.random.seed(1)
    b = [nd.random.normal(shape=5).asnumpy(), nd.random.uniform(nd.zeros(2), nd.ones(2)).asnumpy(),
         nd.random.shuffle(nd.arange(10)).asnumpy(), nd.random.randint(0, 100, shape=4).asnumpy()]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    mx.random.seed(2)
    assert not np.array_equal(nd.random.normal(shape=5).asnumpy(), a[0])


def test_raw_op_positional_arguments_follow_schema_order():
    """nd.random_normal(0, 1, shape=...) means loc=0, scale=1 (MXNet's parameter order)."""
    x = nd.random_normal(7, 0.001, shape=(3, 4))
    assert x.shape == (3, 4)
    np.testing.assert_allclose(x.asnumpy(), 7, atol=0.01)
    u = nd.random_uniform(10, 11, (5,))
    assert u.shape == (5,) and np.all((u.asnumpy() >= 10) & (u.asnumpy() < 11))
    assert nd.uniform(shape=(2,)).shape == (2,) and nd.normal(shape=(2,)).shape == (2,)
    assert nd.random_normal(0, 1, shape=(2,), ctx=mx.cpu(3)).context == mx.cpu(3)
    s = nd.sample_uniform(nd.array([0.0]), nd.array([1.0]), shape=(4,))
    assert s.shape == (1, 4)


# ------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------

def test_errors():
    with pytest.raises(MXNetError, match="shape"):
        nd.random.uniform(0, 1, shape=(2, -3))
    with pytest.raises(MXNetError, match="'scale' must be positive"):
        nd.random.normal(0, -1)
    with pytest.raises(MXNetError, match="low must be less or equal to high"):
        nd.random.uniform(2, 1)
    with pytest.raises(MXNetError, match="scale must be positive"):
        nd.random.exponential(0)
    with pytest.raises(MXNetError, match="'alpha' must be positive"):
        nd.random.gamma(-1, 1)
    with pytest.raises(MXNetError, match="shape is unknown"):
        nd.random_normal(0, 1)
    with pytest.raises(MXNetError, match="dtype"):
        nd.random.uniform(0, 1, dtype="int8")


def test_parameter_type_errors_are_mxneterror_and_valueerror():
    with pytest.raises(MXNetError, match="same type"):
        nd.random.uniform(nd.zeros(2), 1)
    with pytest.raises(ValueError, match="same type"):
        nd.random.normal(0, nd.ones(2))
    with pytest.raises(MXNetError, match="NDArray or numbers"):
        nd.random.poisson("3")
    with pytest.raises(MXNetError, match="data must be an NDArray"):
        nd.random.shuffle([1, 2, 3])
