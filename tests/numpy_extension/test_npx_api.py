"""mx.npx beyond the operator values: the namespaces against MXNet 1.9.1's name lists, npx.reshape's
codes and errors, nonzero, constraint_check, random samplers, save/load (also of a file MXNet
wrote), image, nd.np / nd.npx, and sym.np symbols with NumPy semantics."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as onp
import pytest

import symjit as mx
from symjit import autograd, np, npx
from symjit.ops.npx import npx_reshape_shape

DATA = Path(__file__).resolve().parents[1] / "golden" / "data"
NAMES = json.loads((DATA / "npx_names.json").read_text())
#: MXNet's module-level imports and helpers that are not part of the npx API
NOT_API = {"ctypes", "threading", "warnings", "utils", "check_call", "classproperty", "with_metaclass"}
NOT_OFFERED: set = set()


@pytest.fixture(autouse=True)
def np_mode():
    npx.set_np()
    yield
    npx.reset_np()


@pytest.mark.parametrize("key, module", [("npx", npx), ("sym.npx", mx.sym.npx), ("npx.random", npx.random)])
def test_every_mxnet_name_is_offered(key, module):
    missing = [n for n in NAMES[key] if n not in NOT_API | NOT_OFFERED and not hasattr(module, n)]
    assert missing == []


def test_switches():
    assert npx.is_np_array() and npx.is_np_shape()
    npx.reset_np()
    assert not npx.is_np_array() and not npx.is_np_shape()
    npx.set_np()


# ---- reshape --------------------------------------------------------------------------------------
@pytest.mark.parametrize("codes, shape, reverse, want", [
    ((-2, -2, 2, -1), (2, 3, 8), False, (2, 3, 2, 4)),
    ((-6, 2, -1, -4), (8, 3, 3, 3, 4, 4), False, (2, 4, 3, 3, 3, 4, 4)),
    ((-5, -4), (8, 3, 3, 3, 4, 4), False, (24, 3, 3, 4, 4)),
    ((-2, -3, -3, -3, -2), (8, 1, 1, 1, 3), False, (8, 3)),
    ((-4, -5), (8, 3, 3, 3, 3, 8), True, (8, 3, 3, 3, 24)),
    ((-4, -1, 2, -6), (8, 3, 2, 4, 8), True, (8, 3, 2, 4, 4, 2)),
    ((-1,), (0, 3), False, (0,)),
    ((4, -2, -1), (2, 3, 4), False, (4, 3, 2)),
])
def test_reshape_codes(codes, shape, reverse, want):
    """MXNet's documented examples and cases checked against MXNet 1.9.1."""
    assert npx_reshape_shape(codes, shape, reverse) == want
    x = np.array(onp.arange(int(onp.prod(shape)), dtype=onp.float32).reshape(shape))
    y = npx.reshape(x, codes, reverse=reverse)
    assert isinstance(y, np.ndarray) and y.shape == want
    onp.testing.assert_array_equal(y.asnumpy().ravel(), x.asnumpy().ravel())


@pytest.mark.parametrize("codes, shape, match", [
    ((-2, -2, -3, -1), (2, 3, 4), "-3"),
    ((-5, -5), (2, 3, 4), "-5"),
    ((-1, -1), (2, 3, 4), "one unknown"),
    ((-7,), (2, 3, 4), "-6"),
    ((3, -4), (2, 3, 4), "Cannot reshape"),
    ((0, -1), (2, 3, 4), "size 0"),
    ((-6, -1, -1), (4,), "both be -1"),
])
def test_reshape_errors(codes, shape, match):
    with pytest.raises(mx.MXNetError, match=match):
        npx.reshape(np.zeros(shape), codes)


def test_reshape_gradient_and_symbol():
    x = np.array(onp.arange(24, dtype=onp.float32).reshape(2, 3, 4))
    x.attach_grad()
    with autograd.record():
        y = npx.reshape(x, (-5, -2)) * np.array(onp.arange(24, dtype=onp.float32).reshape(6, 4))
    y.backward()
    onp.testing.assert_array_equal(x.grad.asnumpy(), onp.arange(24).reshape(2, 3, 4))
    s = mx.sym.npx.reshape(mx.sym.var("x").as_np_ndarray(), (-1, 2), reverse=True)
    assert s.infer_shape(x=(2, 3, 4))[1] == [(12, 2)]
    assert '"_npx_reshape"' in s.tojson()


# ---- nonzero, constraint_check --------------------------------------------------------------------
def test_nonzero_matches_numpy():
    a = onp.array([[0, 1.5, 0], [2, 0, -1]], dtype=onp.float32)
    got = npx.nonzero(np.array(a))
    assert got.dtype == onp.int64
    onp.testing.assert_array_equal(got.asnumpy(), onp.argwhere(a))
    assert npx.nonzero(np.array(3.0)).shape == (1, 1)
    assert npx.nonzero(np.array(0.0)).shape == (0, 1)


def test_constraint_check():
    ok = npx.constraint_check(np.array([True, True], dtype=bool), "fine")
    assert ok.shape == () and bool(ok)
    with pytest.raises(ValueError, match="the bad thing"):
        npx.constraint_check(np.array([True, False], dtype=bool), "the bad thing")
    with pytest.raises(mx.MXNetError, match="bool"):
        npx.constraint_check(np.array([1.0]), "x")
    with pytest.raises(TypeError, match="mx.np.ndarray"):
        npx.constraint_check([True], "x")


# ---- random ---------------------------------------------------------------------------------------
def test_random_shapes_and_statistics():
    npx.random.seed(5)
    b = npx.random.bernoulli(prob=0.3, size=(20000,))
    assert isinstance(b, np.ndarray) and set(onp.unique(b.asnumpy())) <= {0.0, 1.0}
    assert abs(b.asnumpy().mean() - 0.3) < 0.02
    p = np.array([[0.0], [1.0]])
    bp = npx.random.bernoulli(prob=p, size=(2, 50)).asnumpy()
    assert (bp[0] == 0).all() and (bp[1] == 1).all()
    assert abs(npx.random.bernoulli(logit=0.0, size=(20000,)).asnumpy().mean() - 0.5) < 0.02
    with pytest.raises(ValueError, match="not both"):
        npx.random.bernoulli(prob=0.5, logit=0.0)
    n = npx.random.normal_n(np.array([0.0, 10.0]), np.array([1.0, 2.0]), batch_shape=(20000,))
    assert n.shape == (20000, 2)
    onp.testing.assert_allclose(n.asnumpy().mean(axis=0), [0, 10], atol=0.1)
    onp.testing.assert_allclose(n.asnumpy().std(axis=0), [1, 2], atol=0.1)
    u = npx.random.uniform_n(-1.0, np.array([1.0, 3.0]), batch_shape=(3, 20000), dtype="float64")
    assert u.shape == (3, 20000, 2) and u.dtype == onp.float64
    v = u.asnumpy()
    assert v[..., 0].min() >= -1 and v[..., 0].max() < 1 and v[..., 1].max() < 3 and v[..., 1].min() >= -1
    npx.random.seed(7)
    first = npx.random.uniform_n(batch_shape=(4,)).asnumpy()
    npx.random.seed(7)
    onp.testing.assert_array_equal(first, npx.random.uniform_n(batch_shape=(4,)).asnumpy())


# ---- save / load --------------------------------------------------------------------------------------
def test_load_file_written_by_mxnet():
    loaded = npx.load(str(DATA / "npx_saved.params"))
    assert sorted(loaded) == ["empty", "ints", "matrix", "scalar"]
    assert all(isinstance(v, np.ndarray) for v in loaded.values())
    onp.testing.assert_array_equal(loaded["matrix"].asnumpy(), onp.arange(6).reshape(2, 3))
    assert loaded["scalar"].shape == () and float(loaded["scalar"]) == 2.5
    assert loaded["empty"].shape == (0, 3)
    assert loaded["ints"].dtype == onp.int64


def test_save_load_round_trip(tmp_path):
    arrays = {"a": np.array(onp.arange(4, dtype=onp.float32)), "s": np.array(1.5), "z": np.zeros((2, 0))}
    npx.save(str(tmp_path / "f"), arrays)
    back = npx.load(str(tmp_path / "f"))
    assert {k: v.shape for k, v in back.items()} == {"a": (4,), "s": (), "z": (2, 0)}
    npx.save(str(tmp_path / "g"), [arrays["a"]])
    assert isinstance(npx.load(str(tmp_path / "g")), list)
    with pytest.raises(TypeError, match="npx.save"):
        npx.save(str(tmp_path / "h"), onp.zeros(3))


# ---- namespaces ---------------------------------------------------------------------------------------
def test_nd_namespaces_are_np_and_npx():
    assert mx.nd.npx is npx and mx.nd.np is np
    assert mx.sym.np._Symbol is type(mx.sym.var("x").as_np_ndarray())


def test_image_to_tensor_and_normalize():
    img = np.array(onp.random.RandomState(0).randint(0, 255, size=(4, 5, 3)).astype(onp.uint8))
    t = npx.image.to_tensor(img)
    assert isinstance(t, np.ndarray) and t.shape == (3, 4, 5)
    onp.testing.assert_allclose(t.asnumpy(), img.asnumpy().transpose(2, 0, 1) / 255.0, rtol=1e-6)
    n = npx.image.normalize(t, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    onp.testing.assert_allclose(n.asnumpy(), (t.asnumpy() - 0.5) / 0.25, rtol=1e-5, atol=1e-6)


# ---- sym.np ---------------------------------------------------------------------------------------
def test_symbol_np_semantics_match_numpy():
    """Broadcasting arithmetic with numbers on either side, reductions with axis tuples, basic
    indexing and reshape, evaluated by a compiled executor."""
    rng = onp.random.RandomState(0)
    a = rng.uniform(0.5, 2, size=(2, 3, 4)).astype(onp.float32)
    b = rng.uniform(0.5, 2, size=(3, 1)).astype(onp.float32)
    x, y = mx.sym.np.var("x"), mx.sym.np.var("y")
    S = mx.sym.np
    cases = {
        "broadcast": (x * y - 2 / x + x ** 2, a * b - 2 / a + a ** 2),
        "compare": ((x > y).astype("float32") + (1 <= x), (a > b).astype(onp.float32) + (1 <= a)),
        "reduce": (S.sum(x, axis=(0, 2), keepdims=True) + x.mean(), a.sum(axis=(0, 2), keepdims=True) + a.mean()),
        "index": (x[1, 1:3] + x[0, :2, 2:3].T.reshape(-1, 1), a[1, 1:3] + a[0, :2, 2:3].T.reshape(-1, 1)),
        "shape": (S.concatenate([x, S.expand_dims(y.reshape(3), 0).reshape(1, 3, 1) * S.ones((1, 3, 4))]),
                  onp.concatenate([a, onp.broadcast_to(b.reshape(1, 3, 1), (1, 3, 4))])),
        "math": (S.log(S.exp(x)) + S.sqrt(S.square(y)) + S.maximum(x, 1.0) - S.abs(-x),
                 onp.log(onp.exp(a)) + onp.sqrt(onp.square(b)) + onp.maximum(a, 1.0) - onp.abs(-a)),
    }
    for name, (sym, want) in cases.items():
        assert isinstance(sym, S._Symbol), name
        feeds = {k: mx.nd.array(v) for k, v in (("x", a), ("y", b)) if k in sym.list_arguments()}
        got = sym.eval(**feeds)[0].asnumpy()
        onp.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)


def test_symbol_np_is_mxnet_spelling():
    """The operators written to JSON are MXNet 1.9.1's np-mode choices."""
    x = mx.sym.np.var("x")
    ops = [n["op"] for n in json.loads((x * 2 - x).sum(axis=0).tojson())["nodes"] if n["op"] != "null"]
    assert ops == ["_npi_multiply_scalar", "_npi_subtract", "_np_sum"]
    assert type(x.as_nd_ndarray()) is mx.sym.Symbol


def test_symbol_random_and_image():
    R = mx.sym.npx.random
    u = R.uniform_n(2.0, 5.0, batch_shape=(4000,)).eval()[0].asnumpy()
    assert u.shape == (4000,) and u.min() >= 2.0 and u.max() < 5.0 and abs(u.mean() - 3.5) < 0.1
    loc = mx.sym.np.var("loc")
    n = R.normal_n(loc, 0.5).eval(loc=mx.nd.array(onp.full((4000,), 3.0)))[0].asnumpy()
    assert n.shape == (4000,) and abs(n.mean() - 3.0) < 0.05 and abs(n.std() - 0.5) < 0.05
    b = R.bernoulli(prob=0.25, size=(4000,)).eval()[0].asnumpy()
    assert set(onp.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.25) < 0.03
    batched = R.normal_n(loc, 1.0, batch_shape=(2,)).eval(loc=mx.nd.array(onp.zeros(3)))[0]
    assert batched.shape == (2, 3)
    img = mx.sym.np.var("img")
    t = mx.sym.npx.image.to_tensor(img)
    assert isinstance(t, mx.sym.np._Symbol)
    out = t.eval(img=mx.nd.array(onp.full((2, 3, 3), 51), dtype="uint8"))[0].asnumpy()
    onp.testing.assert_allclose(out, onp.full((3, 2, 3), 0.2), rtol=1e-6)


def test_relu_and_sigmoid_keep_mxnet_names_and_stable_gradients():
    x = np.array([-100.0, -1.0, 0.5, 3.0])
    x.attach_grad()
    with autograd.record():
        y = npx.sigmoid(x) + npx.relu(x)
    y.backward()
    s = 1 / (1 + onp.exp(-x.asnumpy().astype(onp.float64)))
    onp.testing.assert_allclose(x.grad.asnumpy(), s * (1 - s) + (x.asnumpy() > 0), rtol=1e-6, atol=1e-30)
    v = mx.sym.np.var("x")
    ops = [n["op"] for n in json.loads(mx.sym.npx.sigmoid(mx.sym.npx.relu(v)).tojson())["nodes"]]
    assert ops == ["null", "_npx_relu", "_npx_sigmoid"]


def test_symbol_np_names_and_generic_functions():
    """Most of MXNet 1.9.1's mx.sym.np names exist; those over `_np*`/`_npi*` operators compute
    what NumPy computes."""
    S = mx.sym.np
    offered = [n for n in NAMES["sym.np"] if hasattr(S, n)]
    assert len(offered) >= 130, sorted(set(NAMES["sym.np"]) - set(offered))
    a = onp.arange(1, 7, dtype=onp.float32).reshape(2, 3)
    x, i = S.var("x"), S.var("i")
    cases = [(S.hstack([x, x]), onp.hstack([a, a])), (S.vstack([x, x]), onp.vstack([a, a])),
             (S.cumsum(x, axis=1), a.cumsum(1)), (S.einsum("ij,kj->ik", x, x), a @ a.T),
             (S.tril(x), onp.tril(a)), (S.round(x / 4), onp.round(a / 4)), (S.ravel(x), a.ravel()),
             (S.pad(x, ((1, 1), (0, 2))), onp.pad(a, ((1, 1), (0, 2)))), (S.argsort(-x), onp.argsort(-a)),
             (S.moveaxis(x, 0, 1), onp.moveaxis(a, 0, 1)), (S.std(x, axis=0), a.std(0)),
             (S.all(x > 1), onp.all(a > 1)), (S.take(x, i, axis=1), a[:, [2, 0]]),
             (S.fliplr(x), onp.fliplr(a)), (S.eye(3, 2), onp.eye(3, 2)), (S.fabs(-x), a),
             (S.linspace(0, 1, 5) + S.sum(x), onp.linspace(0, 1, 5) + a.sum())]
    for k, (sym, want) in enumerate(cases):
        assert isinstance(sym, S._Symbol), k
        feeds = {"x": mx.nd.array(a), "i": mx.nd.array([2, 0])}
        got = sym.eval(**{n: v for n, v in feeds.items() if n in sym.list_arguments()})[0].asnumpy()
        onp.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"case {k}")
    with pytest.raises(AttributeError):
        S.no_such_function


def test_cuda_compute_capability_needs_a_gpu_context():
    with pytest.raises(ValueError, match="gpu context"):
        npx.get_cuda_compute_capability(mx.cpu())
    if mx.context.num_gpus() == 0:
        with pytest.raises(mx.MXNetError, match="not a visible GPU"):
            npx.get_cuda_compute_capability(mx.gpu(0))
    else:
        assert npx.get_cuda_compute_capability(mx.gpu(0)) >= 30


def test_symbol_np_more_functions():
    S = mx.sym.np
    x = S.var("x")
    a = onp.arange(6, dtype=onp.float32).reshape(2, 3) - 2
    cases = [(S.clip(x, None, 1), onp.clip(a, None, 1)), (S.clip(x, 0, None), onp.clip(a, 0, None)),
             (S.where(x > 0, x, 0.0), onp.where(a > 0, a, 0)), (S.argmax(x), onp.argmax(a)),
             (S.argmax(x, axis=1), onp.argmax(a, 1)), (x.max(), a.max()),
             (S.split(x, 3, axis=1)[1], onp.split(a, 3, axis=1)[1]), (S.stack([x, x], axis=1), onp.stack([a, a], 1)),
             (S.swapaxes(x, 0, 1), a.T), (S.squeeze(S.expand_dims(x, 0)), a),
             (S.broadcast_to(S.sum(x, axis=0, keepdims=True), (2, 3)),
              onp.broadcast_to(a.sum(0, keepdims=True), (2, 3))),
             (S.tile(x, (1, 2)), onp.tile(a, (1, 2))), (x[:, ::2], a[:, ::2]), (x[-1], a[-1]),
             (S.power(2, x), 2.0 ** a), (S.mod(x, 4), onp.mod(a, 4)), (S.prod(x + 3, axis=0), (a + 3).prod(0)),
             (S.full((2, 2), 7), onp.full((2, 2), 7)), (S.arange(0, 5, 2), onp.arange(0, 5, 2))]
    for k, (sym, want) in enumerate(cases):
        got = sym.eval(x=mx.nd.array(a))[0].asnumpy()
        assert got.shape == onp.shape(want), k
        onp.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"case {k}")
    assert S.argmax(x).eval(x=mx.nd.array(a))[0].dtype == onp.int64
