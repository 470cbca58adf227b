"""Elementwise ops: forward vs independent numpy formulas, gradients vs finite differences."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special as sp

from symjit import nd
from symjit.base import MXNetError
from symjit.ops import apply_numpy, get_op
from symjit.test_utils import check_op_gradient

RNG = np.random.default_rng(42)

# name -> (numpy formula, domain low, high, differentiable)
UNARY = {
    "abs": (np.abs, -2, 2, True), "sign": (np.sign, -2, 2, False), "exp": (np.exp, -3, 3, True),
    "expm1": (np.expm1, -2, 2, True), "log": (np.log, 0.2, 3, True), "log1p": (np.log1p, -0.5, 3, True),
    "log2": (np.log2, 0.2, 3, True), "log10": (np.log10, 0.2, 3, True), "sqrt": (np.sqrt, 0.2, 3, True),
    "rsqrt": (lambda x: 1 / np.sqrt(x), 0.2, 3, True), "square": (np.square, -2, 2, True),
    "cbrt": (np.cbrt, 0.2, 3, True), "rcbrt": (lambda x: 1 / np.cbrt(x), 0.2, 3, True),
    "reciprocal": (lambda x: 1 / x, 0.5, 3, True), "sin": (np.sin, -3, 3, True), "cos": (np.cos, -3, 3, True),
    "tan": (np.tan, -1, 1, True), "arcsin": (np.arcsin, -0.9, 0.9, True),
    "arccos": (np.arccos, -0.9, 0.9, True), "arctan": (np.arctan, -3, 3, True),
    "sinh": (np.sinh, -2, 2, True), "cosh": (np.cosh, -2, 2, True), "tanh": (np.tanh, -3, 3, True),
    "arcsinh": (np.arcsinh, -3, 3, True), "arccosh": (np.arccosh, 1.2, 3, True),
    "arctanh": (np.arctanh, -0.9, 0.9, True), "degrees": (np.degrees, -3, 3, True),
    "radians": (np.radians, -90, 90, True), "floor": (np.floor, -3, 3, False),
    "ceil": (np.ceil, -3, 3, False), "rint": (np.rint, -3, 3, False), "trunc": (np.trunc, -3, 3, False),
    "fix": (np.fix, -3, 3, False), "relu": (lambda x: np.maximum(x, 0), -2, 2, True),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), -4, 4, True),
    "softsign": (lambda x: x / (1 + np.abs(x)), -3, 3, True), "erf": (sp.erf, -2, 2, True),
    "erfinv": (sp.erfinv, -0.9, 0.9, True), "gamma": (sp.gamma, 0.5, 3, True),
    "gammaln": (sp.gammaln, 0.5, 3, True), "negative": (np.negative, -2, 2, True),
    "logical_not": (lambda x: (x == 0).astype(x.dtype), -1, 1, False), "_copy": (lambda x: x, -1, 1, True),
}


def _avoid_kinks(x):
    """Keep samples away from the points where floor/relu/abs are not differentiable."""
    return np.where(np.abs(x - np.round(x)) < 0.05, x + 0.1, x)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_forward_float32(name):
    fn, lo, hi, _ = UNARY[name]
    x = RNG.uniform(lo, hi, size=(3, 7)).astype(np.float32)
    (y,) = apply_numpy(name, [x])
    assert y.dtype == np.float32 and y.shape == x.shape
    np.testing.assert_allclose(y, fn(x.astype(np.float64)).astype(np.float32), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(n for n, v in UNARY.items() if v[3]))
def test_unary_gradient(name):
    _, lo, hi, _ = UNARY[name]
    x = _avoid_kinks(RNG.uniform(lo, hi, size=(2, 5)))
    check_op_gradient(name, [x])


def test_round_is_half_away_from_zero_and_rint_half_down():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], dtype=np.float32)
    assert apply_numpy("round", [x])[0].tolist() == [-3, -2, -1, 1, 2, 3]
    assert apply_numpy("rint", [x])[0].tolist() == [-3, -2, -1, 0, 1, 2]


BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "power": np.power, "maximum": np.maximum, "minimum": np.minimum, "hypot": np.hypot,
    "mod": lambda a, b: np.mod(a, b), "equal": lambda a, b: (a == b), "not_equal": lambda a, b: a != b,
    "greater": np.greater, "greater_equal": np.greater_equal, "lesser": np.less,
    "lesser_equal": np.less_equal, "logical_and": lambda a, b: (a != 0) & (b != 0),
    "logical_or": lambda a, b: (a != 0) | (b != 0), "logical_xor": lambda a, b: (a != 0) ^ (b != 0),
}
ELEMWISE_NAME = {"add": "elemwise_add", "sub": "elemwise_sub", "mul": "elemwise_mul", "div": "elemwise_div"}
SMOOTH = {"add", "sub", "mul", "div", "power", "maximum", "minimum", "hypot"}


@pytest.mark.parametrize("key", sorted(BINARY))
def test_binary_same_shape_and_broadcast(key):
    a = RNG.uniform(0.5, 2, size=(4, 3)).astype(np.float32)
    b = RNG.uniform(0.5, 2, size=(4, 3)).astype(np.float32)
    b[0, 0] = a[0, 0]  # exercise equality
    want = BINARY[key](a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    same = ELEMWISE_NAME.get(key, "_" + key)
    np.testing.assert_allclose(apply_numpy(same, [a, b])[0], want, rtol=1e-6)
    row = b[:1]
    wantb = BINARY[key](a.astype(np.float64), row.astype(np.float64)).astype(np.float32)
    out = apply_numpy("broadcast_" + key, [a, row])[0]
    assert out.shape == (4, 3)
    np.testing.assert_allclose(out, wantb, rtol=1e-6)


@pytest.mark.parametrize("key", sorted(SMOOTH))
def test_binary_gradients_with_broadcasting(key):
    a = RNG.uniform(0.5, 2, size=(3, 4))
    b = RNG.uniform(0.5, 2, size=(1, 4)) + (0.3 if key in ("maximum", "minimum") else 0)
    check_op_gradient("broadcast_" + key, [a, b])
    check_op_gradient("broadcast_" + key, [a[:, :1], b])  # both sides broadcast
    check_op_gradient(ELEMWISE_NAME.get(key, "_" + key), [a, RNG.uniform(0.5, 2, size=(3, 4))])


@pytest.mark.parametrize("name,fn", [
    ("_plus_scalar", lambda x, s: x + s), ("_minus_scalar", lambda x, s: x - s),
    ("_rminus_scalar", lambda x, s: s - x), ("_mul_scalar", lambda x, s: x * s),
    ("_div_scalar", lambda x, s: x / s), ("_rdiv_scalar", lambda x, s: s / x),
    ("_power_scalar", lambda x, s: x ** s), ("_rpower_scalar", lambda x, s: s ** x),
    ("_maximum_scalar", np.maximum), ("_minimum_scalar", np.minimum),
    ("_mod_scalar", np.mod), ("_rmod_scalar", lambda x, s: np.mod(s, x)),
    ("_hypot_scalar", np.hypot), ("_greater_scalar", lambda x, s: x > s)])
def test_scalar_ops(name, fn):
    x = RNG.uniform(0.5, 2, size=(5,))
    s = 1.25
    got = apply_numpy(name, [x.astype(np.float32)], {"scalar": str(s)})[0]
    np.testing.assert_allclose(got, fn(x.astype(np.float32).astype(np.float64), s).astype(np.float32),
                               rtol=1e-6)
    if "greater" not in name and "mod" not in name:
        check_op_gradient(name, [x], {"scalar": s})


def test_integer_division_truncates_and_mod_by_zero_is_zero():
    a = np.array([7, -7, 7, -7, 5], dtype=np.int32)
    b = np.array([2, 2, -2, -2, 0], dtype=np.int32)
    assert apply_numpy("elemwise_div", [a, b])[0].tolist() == [3, -3, -3, 3, 0]
    assert apply_numpy("_mod", [a, b])[0].tolist() == [1, 1, -1, -1, 0]


def test_cast_wraps_like_mxnet_cpu():
    x = np.array([300, 10.1, 15.4, -1, -2], dtype=np.float32)
    out = apply_numpy("Cast", [x], {"dtype": "uint8"})[0]
    assert out.dtype == np.uint8 and out.tolist() == [44, 10, 15, 255, 254]
    # float32 rounding limits finite differences: small values, coarse step
    check_op_gradient("Cast", [RNG.uniform(-1, 1, size=6)], {"dtype": "float32"}, eps=1e-2, rtol=1e-3)


def test_clip_and_activation():
    x = RNG.uniform(-3, 3, size=(4, 4))
    np.testing.assert_allclose(apply_numpy("clip", [x], {"a_min": -1, "a_max": 2})[0], np.clip(x, -1, 2))
    check_op_gradient("clip", [_avoid_kinks(x)], {"a_min": -1.03, "a_max": 2.03})
    for act, fn in {"relu": lambda v: np.maximum(v, 0), "sigmoid": sp.expit, "tanh": np.tanh,
                    "softrelu": lambda v: np.log1p(np.exp(v)), "softsign": lambda v: v / (1 + abs(v))}.items():
        np.testing.assert_allclose(apply_numpy("Activation", [x], {"act_type": act})[0], fn(x), rtol=1e-12)
        check_op_gradient("Activation", [_avoid_kinks(x)], {"act_type": act})


def test_where_and_its_gradient():
    c = np.array([1, 0, 1, 0], dtype=np.float64)
    x = RNG.uniform(size=(4, 3))
    y = RNG.uniform(size=(4, 3))
    np.testing.assert_allclose(apply_numpy("where", [c, x, y])[0], np.where(c[:, None] != 0, x, y))
    check_op_gradient("where", [c, x, y], wrt=[1, 2])


def test_block_grad_stops_gradient():
    x = RNG.uniform(size=(3,))
    op = get_op("BlockGrad")
    from symjit.ops import numpy_emitter
    (g,) = op.grad(numpy_emitter(), {}, [x], [x], [np.ones(3)])
    assert not g.any()


@pytest.mark.parametrize("op,shapes", [("broadcast_add", [(2, 3), (4, 3)]), ("elemwise_mul", [(2, 3), (3, 2)])])
def test_shape_errors_name_the_op_and_shapes(op, shapes):
    a, b = (np.ones(s, np.float32) for s in shapes)
    with pytest.raises(MXNetError, match=op + r".*\(2, 3\).*\(\d, \d\)"):
        o = get_op(op)
        o.infer_shape(o.parse({}), [a.shape, b.shape])
    with pytest.raises(MXNetError, match=op):
        nd.invoke(op, [nd.array(a), nd.array(b)], {})


def test_attribute_errors():
    with pytest.raises(MXNetError, match="_plus_scalar.*unknown attribute 'scalr'"):
        apply_numpy("_plus_scalar", [np.ones(2)], {"scalr": 1})
    with pytest.raises(MXNetError, match="_plus_scalar.*required attribute 'scalar'"):
        apply_numpy("_plus_scalar", [np.ones(2)], {})
    with pytest.raises(MXNetError, match="Activation.*act_type"):
        apply_numpy("Activation", [np.ones(2)], {"act_type": "swish"})
    with pytest.raises(MXNetError, match="clip.*a_min"):
        apply_numpy("clip", [np.ones(2)], {"a_min": "abc", "a_max": 1})


def test_ops_without_parameters_ignore_extra_attributes():
    """MXNet registers no parameter parser for plain elementwise ops, so extra keyword
    attributes (an `axis=` passed out of habit) are annotations, not errors."""
    a = np.array([0.0], np.float32)
    b = np.array([[1.5, -2.0]], np.float32)
    got = nd.broadcast_maximum(nd.array(a), nd.array(b), axis=1).asnumpy()
    np.testing.assert_array_equal(got, np.maximum(a, b))
    np.testing.assert_array_equal(nd.relu(nd.array(b), foo="bar").asnumpy(), np.maximum(b, 0))


def test_nan_propagates_and_no_warnings():
    x = np.array([np.nan, -1.0, 0.0, np.inf], dtype=np.float32)
    with np.errstate(all="raise"):
        out = apply_numpy("log", [x])[0]
    assert math.isnan(out[0]) and math.isnan(out[1]) and out[2] == -np.inf and out[3] == np.inf


def test_rint_rounds_halves_toward_minus_infinity_in_every_path():
    """MXNet's rint: x.5 goes down ([0.5, 1.5, 2.5, -0.5, -1.5, -2.5] -> [0, 1, 2, -1, -2, -3])."""
    import symjit as mx
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1.2, 1.7, -1.7, 3.0], dtype=np.float32)
    expected = np.array([0, 1, 2, -1, -2, -3, 1, 2, -2, 3], dtype=np.float32)
    np.testing.assert_array_equal(mx.nd.rint(mx.nd.array(x)).asnumpy(), expected)          # eager
    np.testing.assert_array_equal(apply_numpy("rint", [x])[0], expected)                   # reference
    s = mx.sym.rint(mx.sym.var("x") * 1.0)                                                   # compiled, fused
    np.testing.assert_array_equal(s.eval(x=mx.nd.array(x))[0].asnumpy(), expected)
    np.testing.assert_array_equal(apply_numpy("rint", [x.astype(np.float64)])[0], expected)


def test_hard_sigmoid_and_add_n():
    import symjit as mx
    x = np.linspace(-4, 4, 17).astype(np.float32)
    np.testing.assert_allclose(mx.nd.hard_sigmoid(mx.nd.array(x), alpha=0.25, beta=0.5).asnumpy(),
                               np.clip(0.25 * x + 0.5, 0, 1), rtol=1e-6)
    check_op_gradient("hard_sigmoid", [np.array([-3.1, -0.4, 0.3, 2.9])], {"alpha": 0.3, "beta": 0.4})
    a, b, c = (np.random.default_rng(i).normal(size=(2, 3)) for i in range(3))
    s = mx.sym.add_n(mx.sym.var("a"), mx.sym.var("b"), mx.sym.var("c"))
    got = s.eval(a=mx.nd.array(a), b=mx.nd.array(b), c=mx.nd.array(c))[0].asnumpy()
    np.testing.assert_allclose(got, a + b + c, rtol=1e-5)
    np.testing.assert_allclose(mx.nd.ElementWiseSum(mx.nd.array(a), mx.nd.array(b)).asnumpy(), a + b, rtol=1e-6)
    check_op_gradient("add_n", [a, b, c], {"num_args": 3})
    with pytest.raises(MXNetError, match="add_n"):
        mx.nd.add_n(mx.nd.ones((2,)), mx.nd.ones((3,)))


def test_legacy_capitalised_comparisons():
    import symjit as mx
    a, b = mx.nd.array([1, 2, 3]), mx.nd.array([3, 2, 1])
    assert mx.nd._Greater(a, b).asnumpy().tolist() == [0, 0, 1]
    assert mx.nd._Lesser_Equal(a, b).asnumpy().tolist() == [1, 1, 0]
    assert mx.nd._Not_Equal(a, b).asnumpy().tolist() == [1, 0, 1]
    assert mx.nd._EqualScalar(a, scalar=2).asnumpy().tolist() == [0, 1, 0]


@pytest.mark.parametrize("dtype,expect_zero", [("int32", True), ("float64", False)])
def test_mod_gradient_is_zero_for_integer_dtypes(dtype, expect_zero):
    """MXNet's mod_grad / mod_rgrad: 0 for integer dtypes; 1 and -floor(a / b) for floating ones
    (checked against those formulas, summed over the broadcast axis)."""
    import symjit as mx
    a = np.array([[5, 7, 9], [4, 4, 4]], np.float32)
    b = np.array([[2, 3, 4]], np.float32)
    x, y = mx.sym.var("a"), mx.sym.var("b")
    sym = mx.sym.broadcast_mod(mx.sym.cast(x, dtype=dtype), mx.sym.cast(y, dtype=dtype))
    ga, gb = nd.zeros(a.shape), nd.zeros(b.shape)
    exe = sym.bind(mx.cpu(), {"a": nd.array(a), "b": nd.array(b)}, args_grad=[ga, gb])
    exe.forward(is_train=True)
    exe.backward(nd.ones((2, 3)))
    if expect_zero:
        want_a, want_b = np.zeros_like(a), np.zeros_like(b)
    else:
        want_a, want_b = np.ones_like(a), -np.floor(a / b).sum(axis=0, keepdims=True)
    np.testing.assert_array_equal(ga.asnumpy(), want_a)
    np.testing.assert_array_equal(gb.asnumpy(), want_b)
    xi = nd.array(np.array([5, 7], np.int32), dtype="int32")
    xi.attach_grad()
    with mx.autograd.record():
        out = mx.nd.broadcast_mod(xi, nd.array(np.array([2, 3], np.int32), dtype="int32"))
    out.backward()
    np.testing.assert_array_equal(xi.grad.asnumpy(), [0, 0])


def test_where_row_condition_must_match_the_rows_at_inference():
    """A 1-D condition picks rows: its length must be x's first dim, checked by shape
    inference (so binding refuses it, as MXNet)."""
    import symjit as mx
    w = mx.sym.where(mx.sym.var("c"), mx.sym.var("x"), mx.sym.var("y"))
    with pytest.raises(MXNetError, match="1-D condition picks rows"):
        w.infer_shape(c=(2,), x=(3, 2), y=(3, 2))
    assert w.infer_shape(c=(3,), x=(3, 2), y=(3, 2))[1] == [(3, 2)]
