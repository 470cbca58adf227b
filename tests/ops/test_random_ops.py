"""Random sampling operators: schemas, inference, distributions (loose statistical checks on
large seeded samples against the textbook moments), errors and gradients."""
from __future__ import annotations

import numpy as np
import pytest

from symjit.base import MXNetError
from symjit.ops.registry import ComputeContext, apply_numpy, get_op, list_ops, numpy_emitter

N = 200_000


def ctx(seed: int = 0) -> ComputeContext:
    return ComputeContext(rng=np.random.default_rng(seed))


def draw(op: str, inputs=(), seed: int = 0, **attrs) -> list:
    return apply_numpy(op, list(inputs), attrs, ctx(seed))


def assert_moments(x: np.ndarray, mean: float, var: float, rel_var: float = 0.05):
    """Mean within 6 standard errors, variance within `rel_var` relative error."""
    x = np.asarray(x, np.float64).reshape(-1)
    se = np.sqrt(var / x.size)
    assert abs(x.mean() - mean) < 6 * se + 1e-12, (x.mean(), mean)
    assert abs(x.var() - var) <= rel_var * var, (x.var(), var)


# ------------------------------------------------------------------------------------------
# Registry and schemas
# ------------------------------------------------------------------------------------------

SCHEMAS = {
    "_random_uniform": ["low", "high", "shape", "ctx", "dtype"],
    "_random_normal": ["loc", "scale", "shape", "ctx", "dtype"],
    "_random_gamma": ["alpha", "beta", "shape", "ctx", "dtype"],
    "_random_exponential": ["lam", "shape", "ctx", "dtype"],
    "_random_poisson": ["lam", "shape", "ctx", "dtype"],
    "_random_negative_binomial": ["k", "p", "shape", "ctx", "dtype"],
    "_random_generalized_negative_binomial": ["mu", "alpha", "shape", "ctx", "dtype"],
    "_random_randint": ["low", "high", "shape", "ctx", "dtype"],
    "_sample_uniform": ["shape", "dtype"],
    "_sample_multinomial": ["shape", "get_prob", "dtype"],
}

SAMPLE_INPUTS = {
    "_sample_uniform": ["low", "high"], "_sample_normal": ["mu", "sigma"],
    "_sample_gamma": ["alpha", "beta"], "_sample_exponential": ["lam"], "_sample_poisson": ["lam"],
    "_sample_negative_binomial": ["k", "p"], "_sample_generalized_negative_binomial": ["mu", "alpha"],
}

ALIASES = {
    "random_uniform": "_random_uniform", "uniform": "_random_uniform",
    "random_normal": "_random_normal", "normal": "_random_normal",
    "random_gamma": "_random_gamma", "random_exponential": "_random_exponential",
    "random_poisson": "_random_poisson", "random_negative_binomial": "_random_negative_binomial",
    "random_generalized_negative_binomial": "_random_generalized_negative_binomial",
    "random_randint": "_random_randint", "sample_uniform": "_sample_uniform",
    "sample_multinomial": "_sample_multinomial", "shuffle": "_shuffle",
}


@pytest.mark.parametrize("name,params", SCHEMAS.items())
def test_param_order_is_mxnets(name, params):
    assert list(get_op(name).params) == params


@pytest.mark.parametrize("name,inputs", SAMPLE_INPUTS.items())
def test_sample_input_names(name, inputs):
    op = get_op(name)
    assert op.input_names(op.parse({})) == inputs


@pytest.mark.parametrize("alias,name", ALIASES.items())
def test_aliases(alias, name):
    assert get_op(alias) is get_op(name)


def test_every_sampler_is_random_and_random_kernel():
    names = [n for n in list_ops() if n.startswith(("_random_", "_sample_", "_shuffle"))
             and not n.startswith("_random_pdf_")]      # densities: deterministic, see test_random_pdf_ops
    assert len(names) >= 8 + 8 + 7 + 1
    for n in names:
        op = get_op(n)
        assert op.is_random, n
        assert op.kernel == "random", n


# ------------------------------------------------------------------------------------------
# Inference
# ------------------------------------------------------------------------------------------

def test_random_infer_shape_and_type():
    op = get_op("_random_normal")
    assert op.infer_shape(op.parse({"shape": "(3, 4)"}), []) == ([], [(3, 4)])
    assert op.infer_shape(op.parse({}), []) == ([], [None])           # unknown until given
    assert op.infer_shape(op.parse({"shape": (0, 4)}), []) == ([], [(0, 4)])  # partial
    assert op.infer_type(op.parse({}), []) == ([], ["float32"])
    assert op.infer_type(op.parse({"dtype": "float64"}), []) == ([], ["float64"])
    ri = get_op("_random_randint")
    assert ri.infer_type(ri.parse({"low": 0, "high": 3}), []) == ([], ["int32"])
    assert ri.infer_type(ri.parse({"low": 0, "high": 3, "dtype": "int64"}), []) == ([], ["int64"])


def test_sample_infer_shape_and_type():
    op = get_op("_sample_uniform")
    attrs = op.parse({"shape": "(2,)"})
    assert op.infer_shape(attrs, [(3,), None]) == ([(3,), (3,)], [(3, 2)])
    assert op.infer_shape(op.parse({}), [(4, 5), (4, 5)])[1] == [(4, 5)]
    assert op.infer_shape(attrs, [None, None])[1] == [None]
    with pytest.raises(MXNetError, match="_sample_uniform"):
        op.infer_shape(attrs, [(3,), (4,)])
    assert op.infer_type(attrs, ["float64", None]) == (["float64", "float64"], ["float32"])
    assert op.infer_type(op.parse({"dtype": "float16"}), ["float32", "float32"])[1] == ["float16"]


def test_multinomial_infer():
    op = get_op("_sample_multinomial")
    assert op.infer_shape(op.parse({}), [(5,)])[1] == [(1,)]
    assert op.infer_shape(op.parse({"shape": 3}), [(5,)])[1] == [(3,)]
    assert op.infer_shape(op.parse({}), [(2, 5)])[1] == [(2,)]
    assert op.infer_shape(op.parse({"shape": (3, 4), "get_prob": True}), [(2, 5)])[1] == [(2, 3, 4)] * 2
    assert op.infer_type(op.parse({"get_prob": True}), ["float64"])[1] == ["int32", "float64"]


# ------------------------------------------------------------------------------------------
# Distributions
# ------------------------------------------------------------------------------------------

def test_uniform_moments_and_support():
    (x,) = draw("_random_uniform", low=-2.0, high=3.0, shape=(N,))
    assert x.dtype == np.float32 and x.shape == (N,)
    assert x.min() >= -2.0 and x.max() < 3.0
    assert_moments(x, 0.5, 25 / 12)


def test_normal_moments():
    (x,) = draw("_random_normal", loc=1.5, scale=2.0, shape=(400, 500))
    assert x.shape == (400, 500)
    assert_moments(x, 1.5, 4.0)


def test_gamma_moments_shape_scale():
    (x,) = draw("_random_gamma", alpha=2.0, beta=3.0, shape=(N,))
    assert x.min() > 0
    assert_moments(x, 6.0, 18.0)


def test_exponential_lam_is_rate():
    (x,) = draw("_random_exponential", lam=4.0, shape=(N,))
    assert_moments(x, 0.25, 1 / 16)


def test_poisson_moments_and_float_output():
    (x,) = draw("_random_poisson", lam=3.5, shape=(N,))
    assert x.dtype == np.float32
    np.testing.assert_array_equal(x, np.round(x))
    assert_moments(x, 3.5, 3.5)


def test_negative_binomial_moments():
    k, p = 5, 0.4
    (x,) = draw("_random_negative_binomial", k=k, p=p, shape=(N,))
    assert x.dtype == np.float32 and x.min() >= 0
    np.testing.assert_array_equal(x, np.round(x))
    assert_moments(x, k * (1 - p) / p, k * (1 - p) / p**2)


def test_negative_binomial_p_one_is_zero():
    (x,) = draw("_random_negative_binomial", k=3, p=1.0, shape=(100,))
    np.testing.assert_array_equal(x, 0)


@pytest.mark.parametrize("mu,alpha", [(4.0, 0.5), (2.0, 0.0), (10.0, 0.1)])
def test_generalized_negative_binomial_moments(mu, alpha):
    (x,) = draw("_random_generalized_negative_binomial", mu=mu, alpha=alpha, shape=(N,))
    np.testing.assert_array_equal(x, np.round(x))
    assert_moments(x, mu, mu + alpha * mu**2)


def test_randint_support_and_frequencies():
    (x,) = draw("_random_randint", low=-3, high=5, shape=(N,))
    assert x.dtype == np.int32
    assert x.min() == -3 and x.max() == 4
    freq = np.bincount(x + 3, minlength=8) / N
    np.testing.assert_allclose(freq, 1 / 8, atol=0.01)
    (y,) = draw("_random_randint", low=2**40, high=2**40 + 3, shape=(10,), dtype="int64")
    assert y.dtype == np.int64 and y.min() >= 2**40


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_float_dtypes(dtype):
    for op, attrs in [("_random_uniform", {}), ("_random_normal", {}), ("_random_gamma", {}),
                      ("_random_exponential", {}), ("_random_poisson", {}),
                      ("_random_negative_binomial", {"k": 2, "p": 0.5}),
                      ("_random_generalized_negative_binomial", {})]:
        (x,) = draw(op, shape=(4, 3), dtype=dtype, **attrs)
        assert x.dtype == np.dtype(dtype) and x.shape == (4, 3), op


def test_uniform_stays_below_high_after_rounding():
    """float16 has few values below 1: rounding float64 draws would hit `high` often."""
    (x,) = draw("_random_uniform", low=0.0, high=1.0, shape=(N,), dtype="float16")
    assert x.max() < 1.0
    (y,) = draw("_random_uniform", low=2.0, high=2.0, shape=(5,))
    np.testing.assert_array_equal(y, 2.0)


def test_reproducible_with_same_generator_seed():
    a = draw("_random_normal", shape=(5,), seed=3)[0]
    b = draw("_random_normal", shape=(5,), seed=3)[0]
    c = draw("_random_normal", shape=(5,), seed=4)[0]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_global_seed_reproduces_default_context_draws():
    import symjit
    symjit.random.seed(11)
    a = apply_numpy("_random_uniform", [], {"shape": (6,)})[0]
    symjit.random.seed(11)
    b = apply_numpy("_random_uniform", [], {"shape": (6,)})[0]
    np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------------------------
# Per-element parameters
# ------------------------------------------------------------------------------------------

def test_sample_uniform_rows_follow_their_parameters():
    low = np.array([1.0, 2.0, -5.0], np.float32)
    high = np.array([2.0, 3.0, 5.0], np.float32)
    (x,) = draw("_sample_uniform", [low, high], shape=(50_000,))
    assert x.shape == (3, 50_000) and x.dtype == np.float32
    for i in range(3):
        assert x[i].min() >= low[i] and x[i].max() < high[i]
        assert_moments(x[i], (low[i] + high[i]) / 2, (high[i] - low[i]) ** 2 / 12)


def test_sample_normal_2d_params():
    mu = np.array([[0.0, 10.0], [-3.0, 1.0]])
    sigma = np.array([[1.0, 0.5], [2.0, 3.0]])
    (x,) = draw("_sample_normal", [mu, sigma], shape=(40_000,))
    assert x.shape == (2, 2, 40_000)
    for i in range(2):
        for j in range(2):
            assert_moments(x[i, j], mu[i, j], sigma[i, j] ** 2)


def test_sample_without_shape_draws_one_per_parameter():
    lam = np.array([[1.0, 2.0, 3.0]], np.float64)
    (x,) = draw("_sample_poisson", [lam])
    assert x.shape == (1, 3) and x.dtype == np.float32
    (y,) = draw("_sample_exponential", [lam], shape=(2, 2), dtype="float64")
    assert y.shape == (1, 3, 2, 2) and y.dtype == np.float64


@pytest.mark.parametrize("op,params,mean,var", [
    ("_sample_gamma", ([2.0, 0.5], [3.0, 2.0]), lambda a, b: a * b, lambda a, b: a * b * b),
    ("_sample_exponential", ([4.0, 0.5],), lambda lam: 1 / lam, lambda lam: 1 / lam**2),
    ("_sample_poisson", ([3.5, 0.2],), lambda lam: lam, lambda lam: lam),
    ("_sample_negative_binomial", ([5.0, 2.0], [0.4, 0.9]),
     lambda k, p: k * (1 - p) / p, lambda k, p: k * (1 - p) / p**2),
    ("_sample_generalized_negative_binomial", ([4.0, 2.0], [0.5, 0.0]),
     lambda mu, a: mu, lambda mu, a: mu + a * mu**2),
])
def test_sample_family_moments(op, params, mean, var):
    arrays = [np.array(p, np.float32) for p in params]
    (x,) = draw(op, arrays, shape=(N // 2,))
    for i in range(2):
        ps = [float(a[i]) for a in arrays]
        assert_moments(x[i], mean(*ps), var(*ps), rel_var=0.06)


def test_sample_accepts_integer_parameter_arrays():
    (x,) = draw("_sample_negative_binomial", [np.array([3, 4], np.int32), np.array([1, 1], np.int32)],
                shape=(3,))
    np.testing.assert_array_equal(x, 0)


def test_like_ops_take_shape_and_dtype_of_data():
    data = np.zeros((3, 4), np.float64)
    (x,) = draw("_random_uniform_like", [data], low=5.0, high=6.0)
    assert x.shape == (3, 4) and x.dtype == np.float64
    assert x.min() >= 5.0 and x.max() < 6.0
    (y,) = draw("_random_normal_like", [np.zeros((N,), np.float32)], loc=-1.0, scale=0.5)
    assert_moments(y, -1.0, 0.25)
    with pytest.raises(MXNetError, match="_random_poisson_like"):
        draw("_random_poisson_like", [np.zeros(3, np.int32)])


def test_inputs_are_not_mutated():
    low, high = np.array([0.0, 1.0]), np.array([1.0, 2.0])
    draw("_sample_uniform", [low, high], shape=(3,))
    np.testing.assert_array_equal(low, [0.0, 1.0])
    data = np.arange(12).reshape(4, 3)
    draw("_shuffle", [data])
    np.testing.assert_array_equal(data, np.arange(12).reshape(4, 3))


# ------------------------------------------------------------------------------------------
# Multinomial and shuffle
# ------------------------------------------------------------------------------------------

def test_multinomial_frequencies_and_zero_probability():
    p = np.array([0.1, 0.0, 0.2, 0.3, 0.4], np.float32)
    (x,) = draw("_sample_multinomial", [p], shape=(N,))
    assert x.dtype == np.int32 and x.shape == (N,)
    freq = np.bincount(x, minlength=5) / N
    assert freq[1] == 0
    np.testing.assert_allclose(freq, p, atol=0.006)


def test_multinomial_rows_and_log_prob():
    p = np.array([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]], np.float64)
    x, logp = draw("_sample_multinomial", [p], shape=(4, 5), get_prob=True, dtype="float32")
    assert x.shape == (2, 4, 5) and logp.shape == (2, 4, 5)
    assert x.dtype == np.float32 and logp.dtype == np.float64
    assert set(np.unique(x[0])) <= {1.0, 2.0}
    np.testing.assert_array_equal(x[1], 0)
    expected = np.log(np.stack([p[r][x[r].astype(int)] for r in range(2)]))
    np.testing.assert_allclose(logp, expected)


def test_multinomial_gradient_of_log_prob_matches_finite_differences():
    p = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]], np.float64)
    attrs = {"shape": (7,), "get_prob": True}
    head = np.random.default_rng(1).uniform(-1, 1, size=(2, 7))

    def loss(q):
        return float(np.sum(apply_numpy("_sample_multinomial", [q], attrs, ctx(5))[1] * head))

    op = get_op("_sample_multinomial")
    outs = apply_numpy("_sample_multinomial", [p], attrs, ctx(5))
    (g,) = op.grad(numpy_emitter(), op.parse(attrs), [p], outs, [np.zeros_like(outs[0]), head])
    num = np.zeros_like(p)
    eps = 1e-6
    for idx in np.ndindex(p.shape):
        q1, q2 = p.copy(), p.copy()
        q1[idx] += eps
        q2[idx] -= eps
        num[idx] = (loss(q1) - loss(q2)) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-6)


def test_multinomial_errors():
    with pytest.raises(MXNetError, match="_sample_multinomial"):
        draw("_sample_multinomial", [np.array([0.5, -0.1, 0.6])])
    with pytest.raises(MXNetError, match="_sample_multinomial"):
        draw("_sample_multinomial", [np.array([1, 0], np.int32)])
    with pytest.raises(MXNetError, match="_sample_multinomial"):
        draw("_sample_multinomial", [np.zeros((2, 0))])
    with pytest.raises(MXNetError, match="_sample_multinomial"):
        draw("_sample_multinomial", [np.array([np.nan, 1.0])])


def test_shuffle_permutes_rows():
    data = np.arange(20, dtype=np.int64).reshape(10, 2)
    seen = set()
    for seed in range(20):
        (y,) = draw("_shuffle", [data], seed=seed)
        assert y.dtype == np.int64 and y.shape == (10, 2)
        np.testing.assert_array_equal(y[:, 1] - y[:, 0], 1)      # rows intact
        np.testing.assert_array_equal(np.sort(y[:, 0]), data[:, 0])  # a permutation
        seen.add(tuple(y[:, 0]))
    assert len(seen) > 15
    (z,) = draw("_shuffle", [np.arange(5.0)])
    np.testing.assert_array_equal(np.sort(z), np.arange(5.0))


# ------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,attrs,match", [
    ("_random_uniform", {"low": 2.0, "high": 1.0}, "low must be less or equal to high"),
    ("_random_normal", {"scale": -1.0}, "'scale' must be positive"),
    ("_random_normal", {"scale": 0.0}, "'scale' must be positive"),
    ("_random_normal", {"scale": float("nan")}, "'scale' must be positive"),
    ("_random_gamma", {"alpha": 0.0}, "'alpha' must be positive"),
    ("_random_gamma", {"beta": -2.0}, "'beta' must be positive"),
    ("_random_exponential", {"lam": 0.0}, "'lam' must be positive"),
    ("_random_poisson", {"lam": -1.0}, "'lam' must be non-negative"),
    ("_random_negative_binomial", {"k": -1}, "'k' must be non-negative"),
    ("_random_negative_binomial", {"p": 0.0}, r"'p' must be in \(0, 1\]"),
    ("_random_negative_binomial", {"p": 1.5}, r"'p' must be in \(0, 1\]"),
    ("_random_generalized_negative_binomial", {"mu": -1.0}, "'mu' must be non-negative"),
    ("_random_generalized_negative_binomial", {"alpha": -0.1}, "'alpha' must be non-negative"),
    ("_random_randint", {"low": 5, "high": 5}, "low must be less than high"),
    ("_random_randint", {"low": 0, "high": 2**40}, "does not fit dtype int32"),
    ("_random_poisson", {"lam": 1e30}, "invalid sampling parameters"),
])
def test_bad_scalar_parameters(op, attrs, match):
    attrs = dict(attrs, shape=(3,))
    if op == "_random_randint":
        attrs.setdefault("low", 0)
        attrs.setdefault("high", 1)
    with pytest.raises(MXNetError, match=match) as err:
        draw(op, **attrs)
    assert op in str(err.value)


@pytest.mark.parametrize("shape", [(), (0, 3), (2, -1)])
def test_bad_shapes(shape):
    with pytest.raises(MXNetError, match="_random_uniform"):
        draw("_random_uniform", shape=shape)


def test_bad_attributes():
    with pytest.raises(MXNetError, match="dtype"):
        draw("_random_uniform", shape=(2,), dtype="int32")
    with pytest.raises(MXNetError, match="dtype"):
        draw("_random_randint", low=0, high=3, shape=(2,), dtype="float32")
    with pytest.raises(MXNetError, match="unknown attribute"):
        draw("_random_uniform", shape=(2,), mean=3)
    with pytest.raises(MXNetError, match="required attribute 'high'"):
        draw("_random_randint", low=0, shape=(2,))


def test_sample_errors():
    with pytest.raises(MXNetError, match="_sample_uniform: shape mismatch"):
        draw("_sample_uniform", [np.zeros(3), np.ones(4)])
    with pytest.raises(MXNetError, match="low must be less or equal to high"):
        draw("_sample_uniform", [np.array([0.0, 2.0]), np.array([1.0, 1.0])])
    with pytest.raises(MXNetError, match="'sigma' must be non-negative, got an array containing -1"):
        draw("_sample_normal", [np.zeros(2), np.array([1.0, -1.0])])
    with pytest.raises(MXNetError, match="must not be empty"):
        draw("_sample_poisson", [np.zeros((0,))])
    with pytest.raises(MXNetError, match="positive dimensions"):
        draw("_sample_poisson", [np.ones(2)], shape=(0,))
    with pytest.raises(MXNetError, match="_sample_exponential"):
        draw("_sample_exponential", [np.array([1.0, 0.0])])


# ------------------------------------------------------------------------------------------
# Gradients
# ------------------------------------------------------------------------------------------

def test_sample_gradients_are_zero():
    op = get_op("_sample_normal")
    mu, sigma = np.array([1.0, 2.0]), np.array([0.5, 0.5])
    outs = apply_numpy("_sample_normal", [mu, sigma], {"shape": (3,)}, ctx())
    grads = op.grad(numpy_emitter(), op.parse({"shape": (3,)}), [mu, sigma], outs, [np.ones((2, 3))])
    assert len(grads) == 2
    for g, x in zip(grads, (mu, sigma)):
        np.testing.assert_array_equal(g, np.zeros_like(x))


def test_random_op_gradient_has_no_inputs_and_shuffle_is_not_differentiable():
    op = get_op("_random_uniform")
    assert op.grad(numpy_emitter(), op.parse({"shape": (2,)}), [], [np.zeros(2)], [np.ones(2)]) == []
    sh = get_op("_shuffle")
    assert sh.differentiable is False
    with pytest.raises(MXNetError, match="not differentiable"):
        sh.grad(numpy_emitter(), {}, [np.zeros(2)], [np.zeros(2)], [np.ones(2)])
