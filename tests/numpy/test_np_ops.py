"""mx.np functions beyond the core: linear algebra, sorting, statistics, products, shape ops,
fallbacks; values against numpy, gradients against finite differences (float64, central
differences, rtol 1e-4), clear errors on bad input."""
import numpy as onp
import pytest

import symjit as mx
from symjit import autograd
from symjit import numpy as np
from symjit.base import MXNetError

from test_np_core import fd_grad, np_grad

R = onp.random.RandomState(3)
X = R.rand(3, 4) + 0.2
SPD = (lambda a: a @ a.T + 3 * onp.eye(3))(R.rand(3, 3))


def _check_grad(fn, ref, *values, rtol=1e-4, atol=1e-6):
    grads = np_grad(lambda *xs: fn(*xs).sum(), *values)
    for k, (g, v) in enumerate(zip(grads, values)):
        def f(w, k=k):
            args = list(values)
            args[k] = w
            return float(onp.sum(ref(*args)))
        onp.testing.assert_allclose(g, fd_grad(f, v, eps=1e-5), rtol=rtol, atol=atol)


GRAD_CASES = [
    ("inv", lambda a: np.linalg.inv(a), lambda a: onp.linalg.inv(a) * onp.arange(1, 10).reshape(3, 3) ** 0, [SPD]),
    ("det", lambda a: np.linalg.det(a), onp.linalg.det, [SPD]),
    ("slogdet", lambda a: np.linalg.slogdet(a)[1], lambda a: onp.linalg.slogdet(a)[1], [SPD]),
    ("solve", lambda a, b: np.linalg.solve(a, b), onp.linalg.solve, [SPD, R.rand(3, 2)]),
    ("solve_vec", lambda a, b: np.linalg.solve(a, b) ** 2, lambda a, b: onp.linalg.solve(a, b) ** 2,
     [SPD, R.rand(3)]),
    ("cholesky", lambda a: np.linalg.cholesky(a) * np.arange(9.0).reshape(3, 3),
     lambda a: onp.linalg.cholesky((a + a.T) / 2) * onp.arange(9.0).reshape(3, 3), [SPD]),
    ("eigvalsh", lambda a: np.linalg.eigvalsh(a) ** 2, lambda a: onp.linalg.eigvalsh(a) ** 2, [SPD]),
    ("svd_s", lambda a: np.linalg.svd(a)[1] ** 2, lambda a: onp.linalg.svd(a, compute_uv=False) ** 2,
     [X.T @ X + onp.eye(4)]),
    ("pinv", lambda a: np.linalg.pinv(a) * 3, lambda a: onp.linalg.pinv(a) * 3, [X]),
    ("norm_fro", lambda a: np.linalg.norm(a), onp.linalg.norm, [X]),
    ("norm_axis", lambda a: np.linalg.norm(a, axis=0), lambda a: onp.linalg.norm(a, axis=0), [X]),
    ("norm_l1", lambda a: np.linalg.norm(a - 0.5, 1, axis=1), lambda a: onp.linalg.norm(a - 0.5, 1, axis=1), [X]),
    ("norm_nuc", lambda a: np.linalg.norm(a, "nuc"), lambda a: onp.linalg.norm(a, "nuc"), [X]),
    ("norm_spectral", lambda a: np.linalg.norm(a, 2), lambda a: onp.linalg.norm(a, 2), [X]),
    ("norm_inf_matrix", lambda a: np.linalg.norm(a, onp.inf), lambda a: onp.linalg.norm(a, onp.inf), [X]),
    ("norm_vec_inf", lambda a: np.linalg.norm(a, onp.inf, axis=1), lambda a: onp.linalg.norm(a, onp.inf, axis=1),
     [X]),
    ("norm_p3", lambda a: np.linalg.norm(a, 3, axis=1), lambda a: onp.linalg.norm(a, 3, axis=1), [X]),
    ("tensorinv", lambda a: np.linalg.tensorinv(a.reshape(3, 1, 3), 1) ** 2,
     lambda a: onp.linalg.tensorinv(a.reshape(3, 1, 3), 1) ** 2, [SPD]),
    ("matrix_power", lambda a: np.linalg.matrix_power(a, 3), lambda a: onp.linalg.matrix_power(a, 3), [SPD / 3]),
    ("sort", lambda a: np.sort(a, axis=1) * np.arange(4.0), lambda a: onp.sort(a, 1) * onp.arange(4.0), [X]),
    ("sort_flat", lambda a: np.sort(a, axis=None) * np.arange(12.0), lambda a: onp.sort(a, None) * onp.arange(12.0),
     [X]),
    ("average_w", lambda a, w: np.average(a, axis=1, weights=w), lambda a, w: onp.average(a, 1, w),
     [X, R.rand(4) + 0.1]),
    ("diff", lambda a: np.diff(a, n=2, axis=1) ** 2, lambda a: onp.diff(a, 2, 1) ** 2, [X]),
    ("polyval", lambda p, x: np.polyval(p, x), onp.polyval, [R.rand(3), R.rand(4)]),
    ("tensordot", lambda a, b: np.tensordot(a, b, ([0, 1], [1, 0])), lambda a, b: onp.tensordot(a, b, ([0, 1], [1, 0])),
     [R.rand(2, 3, 4), R.rand(3, 2, 5)]),
    ("einsum", lambda a, b: np.einsum("ij,jk->ik", a, b) ** 2, lambda a, b: onp.einsum("ij,jk->ik", a, b) ** 2,
     [X, R.rand(4, 2)]),
    ("einsum_sum", lambda a: np.einsum("ij->j", a) ** 2, lambda a: onp.einsum("ij->j", a) ** 2, [X]),
    ("kron", lambda a, b: np.kron(a, b) ** 2, lambda a, b: onp.kron(a, b) ** 2, [R.rand(2, 2), R.rand(2, 3)]),
    ("matmul_batch", lambda a, b: np.matmul(a, b), onp.matmul, [R.rand(2, 3, 4), R.rand(4, 2)]),
    ("matmul_vec", lambda a, b: np.matmul(a, b) ** 2, lambda a, b: onp.matmul(a, b) ** 2, [R.rand(4), R.rand(2, 4, 3)]),
    ("dot_nd", lambda a, b: np.dot(a, b) ** 2, lambda a, b: onp.dot(a, b) ** 2, [R.rand(2, 3), R.rand(2, 3, 4)]),
    ("trace", lambda a: np.trace(a), onp.trace, [SPD]),
    ("pad_edge", lambda a: np.pad(a, ((1, 2), (0, 1)), mode="edge") * 2,
     lambda a: onp.pad(a, ((1, 2), (0, 1)), mode="edge") * 2, [X]),
    ("getitem_adv", lambda a: a[[0, 0, 2], 1:] ** 2, lambda a: a[[0, 0, 2], 1:] ** 2, [X]),
    ("take", lambda a: np.take(a, np.array([3, 0, 3], dtype="int64"), axis=1) ** 2,
     lambda a: onp.take(a, [3, 0, 3], axis=1) ** 2, [X]),
    ("where", lambda a: np.where(a > 0.6, a * a, -a), lambda a: onp.where(a > 0.6, a * a, -a), [X]),
    ("hypot", lambda a, b: np.hypot(a, b), onp.hypot, [X, R.rand(4) + 0.1]),
    ("arctan2", lambda a, b: np.arctan2(a, b), onp.arctan2, [X, R.rand(4) + 0.1]),
    ("power_arr", lambda a, b: np.power(a, b), onp.power, [X, R.rand(4)]),
    ("rpower", lambda a: 2.0 ** a, lambda a: 2.0 ** a, [X]),
    ("rdivide", lambda a: 1.5 / a, lambda a: 1.5 / a, [X]),
    ("rsub", lambda a: 1.5 - a * 2, lambda a: 1.5 - a * 2, [X]),
    ("mod", lambda a: np.mod(a * 5, 1.3), lambda a: onp.mod(a * 5, 1.3), [X]),
    ("unary_chain", lambda a: np.arctan(np.sinh(a)) + np.log2(a) + np.cbrt(a) + np.expm1(a) + np.arcsinh(a),
     lambda a: onp.arctan(onp.sinh(a)) + onp.log2(a) + onp.cbrt(a) + onp.expm1(a) + onp.arcsinh(a), [X]),
    ("cumsum", lambda a: np.cumsum(a, axis=0) ** 2, lambda a: onp.cumsum(a, 0) ** 2, [X]),
    ("rot90_tile", lambda a: np.tile(np.rot90(a), (2, 1)) ** 2, lambda a: onp.tile(onp.rot90(a), (2, 1)) ** 2, [X]),
    ("split", lambda a: np.split(a, [1, 3], axis=1)[1] ** 2, lambda a: onp.split(a, [1, 3], axis=1)[1] ** 2, [X]),
    ("delete_insert", lambda a: np.insert(np.delete(a, 1, axis=1), 0, 5.0, axis=0) ** 2,
     lambda a: onp.insert(onp.delete(a, 1, axis=1), 0, 5.0, axis=0) ** 2, [X]),
    ("atleast_diag", lambda a: np.diagflat(np.diagonal(a)) ** 2, lambda a: onp.diagflat(onp.diagonal(a)) ** 2, [X]),
    ("var_ddof", lambda a: np.var(a, axis=1, ddof=1), lambda a: onp.var(a, axis=1, ddof=1), [X]),
    ("std", lambda a: np.std(a), onp.std, [X]),
    ("astype", lambda a: a.astype("float32").astype("float64") ** 2, lambda a: a ** 2, [X]),
]


@pytest.mark.parametrize("name,fn,ref,values", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradient_matches_finite_differences(name, fn, ref, values):
    _check_grad(fn, ref, *values, rtol=1e-3 if name in ("pinv", "svd_s") else 1e-4)


def test_eigh_reconstructs_and_its_vectors_gradient_is_consistent():
    w, v = np.linalg.eigh(np.array(SPD))
    onp.testing.assert_allclose((v.asnumpy() * w.asnumpy()) @ v.asnumpy().T, SPD, rtol=1e-5)
    ut, s, vt = np.linalg.svd(np.array(X))
    onp.testing.assert_allclose((ut.asnumpy() * s.asnumpy()) @ vt.asnumpy(), X, rtol=1e-5)
    # a sign-invariant function of the eigenvectors: sum of squares of the first one's entries * c
    c = onp.array([1.0, 2.0, 3.0])
    (g,) = np_grad(lambda a: (np.linalg.eigh(a)[1][:, 0] ** 2 * np.array(c)).sum(), SPD)
    fd = fd_grad(lambda a: float((onp.linalg.eigh((a + a.T) / 2)[1][:, 0] ** 2 * c).sum()), SPD, eps=1e-6)
    onp.testing.assert_allclose(g + g.T - onp.diag(onp.diag(g)), fd + fd.T - onp.diag(onp.diag(fd)), atol=1e-5)


def test_values_against_numpy():
    a = np.array(X)
    onp.testing.assert_allclose(np.unique(np.array([3, 1, 3, 2]), return_index=True, return_inverse=True,
                                          return_counts=True)[2].asnumpy(), [2, 0, 2, 1])
    onp.testing.assert_allclose(np.percentile(a, [10, 90], axis=0).asnumpy(), onp.percentile(X, [10, 90], axis=0),
                                rtol=1e-6)
    onp.testing.assert_allclose(np.median(a, axis=1).asnumpy(), onp.median(X, axis=1), rtol=1e-6)
    counts, edges = np.histogram(a, bins=4, range=(0.0, 1.5))
    want_c, want_e = onp.histogram(X, 4, (0.0, 1.5))
    assert counts.asnumpy().tolist() == want_c.tolist() and onp.allclose(edges.asnumpy(), want_e)
    assert np.bincount(np.array([0, 2, 2], dtype="int64"), minlength=4).asnumpy().tolist() == [1, 0, 2, 0]
    r, c = np.unravel_index(np.array([5, 2], dtype="int64"), (2, 3))
    assert r.asnumpy().tolist() == [1, 0] and c.asnumpy().tolist() == [2, 2]
    assert np.hanning(5).asnumpy().tolist() == onp.hanning(5).astype(onp.float32).tolist()
    assert np.argsort(np.array([3.0, 1.0, 2.0])).asnumpy().tolist() == [1, 2, 0]
    onp.testing.assert_allclose(np.ediff1d(np.array([1.0, 4.0, 9.0]), to_begin=0).asnumpy(), [0, 3, 5])
    onp.testing.assert_allclose(np.resize(np.array([1.0, 2.0]), (2, 3)).asnumpy(), onp.resize([1.0, 2.0], (2, 3)))
    q, rr = np.linalg.qr(a)
    assert isinstance(q, np.ndarray) and onp.allclose(q.asnumpy() @ rr.asnumpy(), X)
    assert np.linalg.matrix_rank(a) == 3
    assert isinstance(np.cov(a), np.ndarray) and onp.allclose(np.cov(a).asnumpy(), onp.cov(X))


def test_financial_fallbacks_numpy_2_removed():
    assert np.npv(0.1, [-100, 50, 60]) == pytest.approx(-100 + 50 / 1.1 + 60 / 1.21)
    pv = np.pv(0.05, 10, -100)
    assert pv == pytest.approx(100 * (1 - 1.05 ** -10) / 0.05)
    assert np.rate(10, -100, pv, 0) == pytest.approx(0.05, rel=1e-6)
    total = sum(np.ppmt(0.05, per, 10, pv) for per in range(1, 11))
    assert total == pytest.approx(-pv)
    assert np.mirr([-100, 50, 60], 0.1, 0.1) == pytest.approx(((50 * 1.1 + 60) / 100) ** 0.5 - 1)
    assert np.alltrue(np.array([1.0, 1.0])) and np.sometrue(np.array([0.0, 1.0]))


@pytest.mark.parametrize("call,match", [
    (lambda: np.ones((2, 3)) + np.ones((4,)), "broadcast"),
    (lambda: np.ones((2, 3)).reshape(4, 2), "cannot reshape"),
    (lambda: np.ones((2, 3))[5], "invalid"),
    (lambda: np.linalg.inv(np.ones((2, 3))), "square"),
    (lambda: np.matmul(np.ones((2, 3)), np.ones((2, 3))), "npi_matmul"),
    (lambda: np.concatenate([np.ones((2, 3)), np.ones((2, 2))]), "concatenate"),
    (lambda: np.sum(np.ones((2, 3)), axis=2), "out of bounds"),
    (lambda: np.split(np.ones((3,)), 2), "equal division"),
    (lambda: np.array(["a"]), "cannot convert"),
    (lambda: np.percentile(np.ones(3), 120), "within"),
    (lambda: np.random.randint(5, 2), "less than"),
])
def test_bad_input_raises_mxnet_error(call, match):
    with pytest.raises(MXNetError, match=match):
        call()


def test_legacy_interop_kvstore_and_optimizer_accept_np_arrays():
    w = np.array([1.0, 2.0])
    g = np.array([0.5, 0.5])
    mx.nd.sgd_update(w, g, lr=0.1, wd=0.0, out=w)
    onp.testing.assert_allclose(w.asnumpy(), [0.95, 1.95])
    kv = mx.kv.create("local")
    kv.init(3, np.zeros(2))
    kv.push(3, np.ones(2))
    out = np.zeros(2)
    kv.pull(3, out=out)
    assert out.asnumpy().tolist() == [1.0, 1.0]


def test_linear_regression_trains_in_np_style():
    """The d2l linear-regression-from-scratch loop: np arrays, autograd, in-place SGD."""
    mx.random.seed(0)
    true_w, true_b = np.array([2.0, -3.4]), 4.2
    features = np.random.normal(0, 1, (1000, 2))
    labels = np.dot(features, true_w) + true_b + np.random.normal(0, 0.01, (1000,))
    w = np.random.normal(0, 0.01, (2, 1))
    b = np.zeros(1)
    w.attach_grad()
    b.attach_grad()
    for _ in range(3):
        for i in range(0, 1000, 10):
            X_, y_ = features[i:i + 10], labels[i:i + 10]
            with autograd.record():
                loss = (np.dot(X_, w) + b - y_.reshape(-1, 1)) ** 2 / 2
            loss.backward()
            for p in (w, b):
                p[:] = p - 0.03 * p.grad / 10
    assert onp.allclose(w.asnumpy().ravel(), [2.0, -3.4], atol=0.05)
    assert abs(float(b) - 4.2) < 0.05


def test_view_methods_and_slice_assign():
    a = np.zeros((2, 3))
    v = a.reshape_view(3, 2)
    v[0, 0] = 1
    assert a[0, 0] == 1 and a.writable
    a.slice_assign(np.ones((1, 2)), (1, 0), (2, 2), (1, 1))
    a.slice_assign_scalar(7, (0, 2), (1, 3), None)
    assert a.asnumpy().tolist() == [[1, 0, 7], [1, 1, 0]]


def test_random_samplers_with_array_parameters_are_differentiable():
    mx.random.seed(5)
    loc, scale = np.array([1.0, 2.0]), np.array([0.5, 2.0])
    low, high = np.array([0.0, -1.0]), np.array([1.0, 3.0])
    for p in (loc, scale, low, high):
        p.attach_grad()
    with autograd.record():
        y = np.random.normal(loc, scale, size=(500, 2))
        u = np.random.uniform(low, high, size=(500, 2))
        total = y.sum() + u.sum()
    total.backward()
    yv, uv = y.asnumpy(), u.asnumpy()
    assert loc.grad.tolist() == [500.0, 500.0]
    onp.testing.assert_allclose(scale.grad.asnumpy(), ((yv - [1.0, 2.0]) / [0.5, 2.0]).sum(0), rtol=1e-4)
    frac = (uv - [0.0, -1.0]) / [1.0, 4.0]
    onp.testing.assert_allclose(low.grad.asnumpy(), (1 - frac).sum(0), rtol=1e-4)
    onp.testing.assert_allclose(high.grad.asnumpy(), frac.sum(0), rtol=1e-4)
    assert abs(yv.mean(0) - [1.0, 2.0]).max() < 0.3 and (uv >= [0.0, -1.0]).all() and (uv < [1.0, 3.0]).all()
    assert np.random.normal(np.zeros(3), 1.0).shape == (3,) and np.random.uniform().shape == ()


@pytest.mark.parametrize("draw,mean", [
    (lambda: np.random.beta(2.0, 5.0, size=(20000,)), 2.0 / 7.0),
    (lambda: np.random.chisquare(np.array([2.0, 6.0]), size=(20000, 2)), [2.0, 6.0]),
    (lambda: np.random.lognormal(0.0, 0.5, size=(20000,)), onp.exp(0.125)),
    (lambda: np.random.gamma(3.0, 2.0, size=(20000,)), 6.0),
    (lambda: np.random.exponential(2.0, size=(20000,)), 2.0),
    (lambda: np.random.choice(4, size=(20000,), p=[0.1, 0.2, 0.3, 0.4]), 2.0),
    (lambda: np.random.multinomial(10, [0.25, 0.75], size=5000), [2.5, 7.5]),
    (lambda: np.random.randint(0, 10, size=(20000,)), 4.5),
])
def test_sampler_means(draw, mean):
    mx.random.seed(11)
    samples = draw().asnumpy()
    onp.testing.assert_allclose(samples.mean(axis=0), mean, rtol=0.03)


def test_choice_without_replacement_and_from_an_array():
    mx.random.seed(2)
    picks = np.random.choice(10, 10, replace=False).asnumpy()
    assert sorted(picks.tolist()) == list(range(10)) and picks.dtype == onp.int64
    src = np.array([5.0, 6.0, 7.0])
    assert set(np.random.choice(src, 20).asnumpy().tolist()) <= {5.0, 6.0, 7.0}


@pytest.mark.parametrize("fn,second", [
    (np.sin, lambda v: -onp.sin(v)), (np.cos, lambda v: -onp.cos(v)), (np.exp, onp.exp),
    (np.tanh, lambda v: -2 * onp.tanh(v) * (1 - onp.tanh(v) ** 2)), (np.log, lambda v: -1 / v ** 2),
    (np.sqrt, lambda v: -0.25 * v ** -1.5), (np.square, lambda v: 2 + 0 * v), (np.reciprocal, lambda v: 2 / v ** 3),
    (np.arctan, lambda v: -2 * v / (1 + v * v) ** 2), (np.cbrt, lambda v: -2 / 9 * v ** (-5 / 3)),
])
def test_second_order_gradients_of_unary_functions(fn, second):
    v = onp.array([0.3, 0.7, 1.4])
    x = np.array(v, dtype="float64")
    x.attach_grad()
    with autograd.record():
        (g,) = autograd.grad(fn(x), [x], create_graph=True)
    g.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), second(v), rtol=1e-10)


def test_second_order_through_multiply_differentiates_its_expression():
    """Same-dtype float elementwise ops differentiate their scalar expression, whose gradient
    nodes are differentiable in turn: d/dx of d/dx sum(x * x) is 2."""
    x = np.array([0.3, 0.7], dtype="float64")
    x.attach_grad()
    with autograd.record():
        (g,) = autograd.grad(np.sum(x * x), [x], create_graph=True)
    onp.testing.assert_allclose(g.asnumpy(), [0.6, 1.4], rtol=1e-12)
    g.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), [2.0, 2.0], rtol=1e-12)


def test_second_order_through_an_op_without_one_is_refused():
    """The gradient op of copysign has no gradient: it is not recorded, and differentiating its
    result is refused (not a silently wrong zero)."""
    x = np.array([0.3, 0.7], dtype="float64")
    x.attach_grad()
    with autograd.record():
        (g,) = autograd.grad(np.sum(np.copysign(x, x)), [x], create_graph=True)
    with pytest.raises(MXNetError, match="not in a recorded graph"):
        g.backward()


def test_np_gradient_op_checks_shapes_against_its_forward_op():
    """A `_backward_npi_*` op accepts only the shapes its forward op could have produced: a
    head gradient larger than the input is refused by name, not broadcast into the input."""
    sym = mx.sym
    g, x, y = sym.var("g"), sym.var("x"), sym.var("y")
    bad = sym._internal._backward_npi_radians(g, x, y)
    with pytest.raises(MXNetError, match="_backward_npi_radians"):
        bad.infer_shape(g=(16, 4, 4), x=(1, 4, 1), y=(1, 1, 4))
    good = bad.infer_shape(g=(2, 3), x=(2, 3), y=(2, 3))
    assert good[1] == [(2, 3)]
