"""mx.np.ndarray core semantics: creation dtypes, zero-dim arrays, broadcasting arithmetic with
MXNet np's dtype rules, indexing, reductions, autograd (against numpy and finite differences)."""
import numpy as onp
import pytest

import symjit as mx
from symjit import autograd
from symjit import numpy as np
from symjit.base import MXNetError


def fd_grad(f, x: onp.ndarray, eps=1e-3) -> onp.ndarray:
    """Central finite differences of scalar f at x (float64)."""
    x = x.astype(onp.float64)
    g = onp.zeros_like(x)
    for i in onp.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def np_grad(fn, *values):
    """Gradients of sum(fn(*arrays)) w.r.t. each array, through mx.np and autograd."""
    xs = [np.array(v, dtype="float64") for v in values]
    for x in xs:
        x.attach_grad()
    with autograd.record():
        y = fn(*xs)
    y.backward()
    return [x.grad.asnumpy() for x in xs]


def test_ndarray_is_a_legacy_ndarray_subclass_and_views_share_memory():
    a = np.array([1.0, 2.0])
    assert isinstance(a, np.ndarray) and isinstance(a, mx.nd.NDArray)
    legacy = a.as_nd_ndarray()
    assert type(legacy) is mx.nd.NDArray
    legacy[:] = 5
    assert a.tolist() == [5.0, 5.0]
    back = mx.nd.ones((2,)).as_np_ndarray()
    assert type(back) is np.ndarray and back.shape == (2,)


def test_creation_dtypes_follow_mxnet_np():
    assert np.array([1, 2]).dtype == onp.float32          # Python values default to float32
    assert np.array([True, False]).dtype == onp.float32
    assert np.array(onp.array([1, 2], onp.int64)).dtype == onp.int64   # numpy arrays keep theirs
    assert np.array([1, 2], dtype="int32").dtype == onp.int32
    assert np.zeros((2, 3)).dtype == onp.float32 and np.ones(3, dtype=int).dtype == onp.int64
    assert np.arange(5).dtype == onp.float32 and np.full((2,), 3).dtype == onp.float32
    assert np.array(3.0).shape == () and np.zeros(()).shape == ()
    assert np.linspace(0, 1, 5).asnumpy().tolist() == onp.linspace(0, 1, 5, dtype=onp.float32).tolist()
    assert np.eye(3, k=1).asnumpy().tolist() == onp.eye(3, k=1).tolist()


def test_repr_as_mxnet_np():
    assert repr(np.array([1.0, 2.0])) == "array([1., 2.])"
    assert repr(np.array(3.0)) == "array(3.)"
    assert repr(np.array([1, 2], dtype="int32")) == "array([1, 2], dtype=int32)"
    assert repr(np.array([1, 2], dtype="int64")) == "array([1, 2], dtype=int64)"
    assert repr(np.array(onp.array([True, False]))) == "array([ True, False])"
    assert repr(np.ones((0, 3))) == "array([], shape=(0, 3))"
    assert str(np.array([1.0, 2.0])) == "[1. 2.]"


@pytest.mark.parametrize("a_dtype,b_dtype,expected", [
    ("int32", "float32", "float32"), ("int64", "float32", "float32"), ("float32", "float64", "float64"),
    ("bool", "int32", "int32"), ("float16", "float32", "float32"), ("int32", "int64", "int64"),
    ("uint8", "int8", "int32"), ("bool", "bool", "bool")])
def test_binary_promotion(a_dtype, b_dtype, expected):
    a = np.array(onp.ones(2, a_dtype))
    b = np.array(onp.ones(2, b_dtype))
    assert (a + b).dtype == onp.dtype(expected)
    assert (a * b).dtype == onp.dtype(expected)


def test_scalar_and_division_dtypes():
    i = np.array([1, 2], dtype="int32")
    assert (i + 1.5).dtype == onp.int32 and (i / 2).dtype == onp.float32 and (i / i).dtype == onp.float32
    b = np.array(onp.array([True, False]))
    assert (b + 1).dtype == onp.int64 and (b + b).dtype == onp.bool_
    with pytest.raises(MXNetError, match="same dtype"):
        np.maximum(i, np.array([1.0, 2.0]))


def test_broadcasting_arithmetic_matches_numpy():
    x = onp.arange(6, dtype=onp.float32).reshape(2, 3)
    y = onp.array([1.0, 2.0, 3.0], onp.float32)
    a, b = np.array(x), np.array(y)
    for got, want in [(a + b, x + y), (a - b, x - y), (b - a, y - x), (a * b, x * y), (a / b, x / y),
                      (2 - a, 2 - x), (2 / b, 2 / y), (a ** 2, x ** 2), (2 ** b, 2 ** y), (a % 4, x % 4),
                      (-a, -x), (abs(-a), x), (np.array(2.0) * a, 2 * x)]:
        assert got.shape == want.shape
        onp.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)
    c = a > 2
    assert c.dtype == onp.bool_ and c.asnumpy().tolist() == (x > 2).tolist()
    assert (a == b).dtype == onp.bool_ and (a == None) is False  # noqa: E711


def test_zero_dim_results():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    s = a.sum()
    assert s.shape == () and s.item() == 10.0 and float(s) == 10.0
    assert a[1, 1].shape == () and a[1, 1].item() == 4.0
    assert (s + 1).shape == () and np.exp(np.array(0.0)).shape == ()
    with pytest.raises(TypeError):
        len(s)


def test_indexing_basic_advanced_boolean():
    x = onp.arange(24, dtype=onp.float32).reshape(2, 3, 4)
    a = np.array(x)
    keys = [1, (1, 2), (slice(None), 1), (Ellipsis, 2), (None, 0), (slice(None, None, -1),),
            ([0, 1], [1, 2]), (slice(None), [0, 2]), (x > 10,), (0, x[0] > 3),
            (onp.array([1, 0]), slice(1, 3), onp.array([[0], [3]]))]
    for k in keys:
        got = a[k]
        assert isinstance(got, np.ndarray)
        onp.testing.assert_array_equal(got.asnumpy(), x[k])
    idx = np.array(onp.array([2, 0], onp.int64))
    onp.testing.assert_array_equal(a[0, idx].asnumpy(), x[0, [2, 0]])
    onp.testing.assert_array_equal(a[a > 20].asnumpy(), x[x > 20])


def test_setitem():
    x = onp.zeros((3, 4), onp.float32)
    a = np.array(x)
    a[1] = 5
    x[1] = 5
    a[:, 2] = np.array([1.0, 2.0, 3.0])
    x[:, 2] = [1.0, 2.0, 3.0]
    a[a > 4] = -1
    x[x > 4] = -1
    a[[0, 2], [0, 1]] = 7
    x[[0, 2], [0, 1]] = 7
    onp.testing.assert_array_equal(a.asnumpy(), x)


def test_reductions_match_numpy():
    x = onp.random.RandomState(0).rand(3, 4, 5).astype(onp.float32)
    a = np.array(x)
    for axis in [None, 0, 1, (0, 2), -1]:
        for keepdims in [False, True]:
            for name in ["sum", "mean", "max", "min", "prod", "std", "var"]:
                got = getattr(a, name)(axis=axis, keepdims=keepdims)
                want = getattr(x, name)(axis=axis, keepdims=keepdims)
                assert got.shape == onp.shape(want), (name, axis, keepdims)
                onp.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5, atol=1e-6)
    assert a.argmax().dtype == onp.int64 and a.argmax(axis=1).asnumpy().tolist() == x.argmax(1).tolist()
    i = np.array([1, 2], dtype="int32")
    assert i.sum().dtype == onp.int32 and i.mean().dtype == onp.float32
    assert np.array(onp.array([True, True])).sum().dtype == onp.int64


def test_out_argument_writes_in_place():
    a = np.array([1.0, 2.0])
    out = np.zeros(2)
    res = np.add(a, a, out=out)
    assert res is out and out.tolist() == [2.0, 4.0]
    a += 1
    assert a.tolist() == [2.0, 3.0]


def test_autograd_through_np_functions_matches_finite_differences():
    rng = onp.random.RandomState(1)
    x = rng.rand(3, 4) + 0.5
    w = rng.rand(4, 2)
    cases = [
        (lambda a: (np.exp(a) * np.sin(a)).sum(), lambda v: (onp.exp(v) * onp.sin(v)).sum()),
        (lambda a: np.log(a).mean(), lambda v: onp.log(v).mean()),
        (lambda a: (a[a > 1] ** 2).sum(), lambda v: (v[v > 1] ** 2).sum()),
        (lambda a: a[:, [0, 2]].max(axis=1).sum(), lambda v: v[:, [0, 2]].max(axis=1).sum()),
        (lambda a: a.std(axis=0).sum(), lambda v: v.std(axis=0).sum()),
        (lambda a: (a.reshape(4, 3).T * 2).sum(), lambda v: (v.reshape(4, 3).T * 2).sum()),
        (lambda a: np.concatenate([a, a * a], axis=1).prod(), lambda v: onp.concatenate([v, v * v], 1).prod()),
    ]
    for fn, ref in cases:
        (g,) = np_grad(fn, x)
        onp.testing.assert_allclose(g, fd_grad(ref, x), rtol=1e-4, atol=1e-6)
    gx, gw = np_grad(lambda a, b: (np.dot(a, b) ** 2).sum(), x, w)
    onp.testing.assert_allclose(gx, fd_grad(lambda v: ((v @ w) ** 2).sum(), x), rtol=1e-4)
    onp.testing.assert_allclose(gw, fd_grad(lambda v: ((x @ v) ** 2).sum(), w), rtol=1e-4)


def test_autograd_grad_returns_np_arrays_and_broadcast_gradients_sum():
    a = np.array([[1.0, 2.0, 3.0]])
    b = np.array([[1.0], [2.0]])
    a.attach_grad()
    b.attach_grad()
    with autograd.record():
        y = (a * b).sum()
    ga, gb = autograd.grad(y, [a, b])
    assert isinstance(ga, np.ndarray)
    assert ga.asnumpy().tolist() == [[3.0, 3.0, 3.0]] and gb.asnumpy().tolist() == [[6.0], [6.0]]


def test_random_shapes_dtypes_and_seed():
    mx.random.seed(7)
    u = np.random.uniform(size=(2, 3))
    mx.random.seed(7)
    assert np.random.uniform(size=(2, 3)).asnumpy().tolist() == u.asnumpy().tolist()
    assert u.dtype == onp.float32 and np.random.normal().shape == ()
    assert np.random.randint(0, 5, size=(4,)).dtype == onp.int64
    assert np.random.normal(0, 1, (2, 2)).shape == (2, 2)


def test_numpy_functions_dispatch_to_mx_np():
    a = np.array([1.0, 2.0])
    for result in (onp.sum(a), onp.add(a, a), onp.exp(a), onp.concatenate([a, a]), onp.mean(a),
                   onp.linalg.norm(a), onp.cumprod(a)):
        assert isinstance(result, np.ndarray)
    assert onp.add(a, 1).tolist() == [2.0, 3.0]
    assert onp.allclose(a, a) and onp.asarray(a).tolist() == [1.0, 2.0]
    x = np.array([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        y = onp.sum(onp.square(x))       # recorded like mx.np calls
    y.backward()
    assert x.grad.tolist() == [2.0, 4.0]


def test_index_arrays_of_mxnet_default_float_dtype_and_ranges():
    x = np.arange(12).reshape(3, 4)
    rows = np.array([0, 2])                       # float32, MXNet np's default
    assert rows.dtype == onp.float32
    assert x[rows].asnumpy().tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]
    assert x[range(2), np.array([1, 2])].asnumpy().tolist() == [1.0, 6.0]
    with pytest.raises(MXNetError, match="finite"):
        x[np.array([onp.nan])]


def test_sparse_arrays_have_no_np_view():
    with pytest.raises(MXNetError, match="csr"):
        mx.nd.sparse.zeros("csr", (2, 2)).as_np_ndarray()


def test_comparison_with_non_arrays():
    a = np.array([1.0, 2.0])
    assert (a == "x") is False and (a != None) is True  # noqa: E711
    with pytest.raises(TypeError):
        a < None  # noqa: B015


def test_nonzero_and_round():
    x = onp.array([[0.0, 1.5, 0.0], [2.0, 0.0, 3.0]], onp.float32)
    got = np.nonzero(np.array(x))
    assert len(got) == 2 and all(isinstance(g, np.ndarray) and g.dtype == onp.int64 for g in got)
    assert [g.asnumpy().tolist() for g in got] == [g.tolist() for g in onp.nonzero(x)]
    assert round(np.array(2.6)) == 3
    onp.testing.assert_allclose(round(np.array([1.26, 2.0]), 1).asnumpy(), [1.3, 2.0], rtol=1e-6)
