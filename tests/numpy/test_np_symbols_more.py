"""mx.sym.np's splitting, statistics, tensor-product, insert/delete, window, linalg and random
functions: each expression builds the operators MXNet 1.9.1 writes into its JSON, and the bound
graph and mx.np on arrays both give MXNet's results (tests/golden/make_np2.py)."""
import json
from pathlib import Path

import numpy as onp
import pytest

import symjit as mx
from symjit import util

DATA = Path(__file__).resolve().parents[1] / "golden" / "data"
META = json.loads((DATA / "np2_cases.json").read_text())
ARRAYS = onp.load(DATA / "np2_cases.npz")
#: MXNet builds these through Python `Custom` fallback operators; symjit has registered
#: `_np_resize` / `_npi_unravel_index` operators for them
REGISTERED_FOR_CUSTOM = {"Custom": {"_np_resize", "_npi_unravel_index"}}


@pytest.fixture(autouse=True)
def np_mode():
    was_np = util.is_np_array()
    mx.npx.set_np()
    try:
        yield
    finally:
        if not was_np:
            mx.npx.reset_np()


#: output shapes that depend on the input values: MXNet's executor runs them with dynamic
#: shapes, symjit's graphs need static ones (their operator names are still checked)
DATA_DEPENDENT = {"np.delete(x, k, axis=1)", "np.unique(i)", "np.bincount(i, weights=w)",
                  "np.unique(i, return_index=True, return_inverse=True, return_counts=True)"}


def _symbols(names):
    return {n: mx.sym.np.var(n, dtype=ARRAYS[f"input_{n}"].dtype.name) for n in names}


def _as_list(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _op_names(out) -> list:
    group = mx.sym.Group([o for o in _as_list(out)]) if isinstance(out, (list, tuple)) else out
    return [n["op"] for n in json.loads(group.tojson())["nodes"] if n["op"] != "null"]


def _same_ops(ours, theirs) -> bool:
    return len(ours) == len(theirs) and all(
        a == b or a in REGISTERED_FOR_CUSTOM.get(b, ()) for a, b in zip(ours, theirs))


def _run(out, names):
    group = mx.sym.Group(_as_list(out)) if isinstance(out, (list, tuple)) else out
    args = {n: mx.nd.array(ARRAYS[f"input_{n}"], dtype=ARRAYS[f"input_{n}"].dtype) for n in names
            if n in group.list_arguments()}
    return [o.asnumpy() for o in group.bind(mx.cpu(), args).forward()]


def _check(got, case):
    wants = [ARRAYS[f"{case['key']}_{j}"] for j in range(case["n_out"])]
    if len(got) == 1 < len(wants):    # index tuples: one stacked symbol, as MXNet's symbols give them
        wants = [onp.stack(wants)]
    assert len(got) == len(wants), case["expr"]
    for j, (g, want) in enumerate(zip(got, wants)):
        assert g.shape == want.shape, (case["expr"], j, g.shape, want.shape)
        assert g.dtype == want.dtype, (case["expr"], j, g.dtype, want.dtype)
        onp.testing.assert_allclose(g, want, rtol=2e-5, atol=2e-5, err_msg=case["expr"])


CASES = META["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["expr"] for c in CASES])
def test_symbol_builds_mxnet_ops_and_gives_mxnet_results(case):
    out = eval(case["expr"], {"np": mx.sym.np, **_symbols(case["inputs"])})
    if case["ops"] is not None:
        assert _same_ops(_op_names(out), case["ops"]), (_op_names(out), case["ops"])
    if case["expr"] in DATA_DEPENDENT:
        return
    _check(_run(out, case["inputs"]), case)


@pytest.mark.parametrize("case", CASES, ids=[c["expr"] for c in CASES])
def test_eager_np_gives_mxnet_results(case):
    env = {n: mx.np.array(ARRAYS[f"input_{n}"], dtype=ARRAYS[f"input_{n}"].dtype) for n in case["inputs"]}
    out = eval(case["expr"], {"np": mx.np, **env})
    _check([o.asnumpy() for o in _as_list(out)], case)


@pytest.mark.parametrize("case", META["random"], ids=[c["expr"] for c in META["random"]])
def test_random_symbols_build_mxnet_ops_with_mxnet_shapes(case):
    out = eval(case["expr"], {"np": mx.sym.np, "npx": mx.sym.npx, **_symbols(case["inputs"])})
    assert _op_names(out) == case["ops"]
    (value,) = _run(out, case["inputs"])
    assert list(value.shape) == case["shape"] and str(value.dtype) == case["dtype"]


NPX_RANDOM = [c for c in META["random"] if c["json"]]


@pytest.mark.parametrize("case", NPX_RANDOM, ids=[c["expr"] for c in NPX_RANDOM])
def test_mxnet_npx_random_json_loads_and_draws(case):
    sym = mx.sym.load_json(case["json"])
    (value,) = _run(sym, case["inputs"])
    assert list(value.shape) == case["shape"] and str(value.dtype) == case["dtype"]
    if "bernoulli" in case["expr"]:
        assert set(onp.unique(value)) <= {0.0, 1.0}


def test_npx_random_draws_follow_their_parameters():
    mx.random.seed(3)
    loc, scale = mx.sym.np.var("loc"), mx.sym.np.var("scale")
    sym = mx.sym.npx.random.normal_n(loc, scale, batch_shape=(4000,))
    args = {"loc": mx.nd.array([-2.0, 5.0]), "scale": mx.nd.array([0.5, 2.0])}
    draws = sym.bind(mx.cpu(), args).forward()[0].asnumpy()
    assert draws.shape == (4000, 2)
    onp.testing.assert_allclose(draws.mean(0), [-2.0, 5.0], atol=0.1)
    onp.testing.assert_allclose(draws.std(0), [0.5, 2.0], rtol=0.05)
    p = mx.sym.npx.random.bernoulli(prob=mx.sym.np.var("p"), size=(4000, 2))
    flips = p.bind(mx.cpu(), {"p": mx.nd.array([0.2, 0.9])}).forward()[0].asnumpy()
    onp.testing.assert_allclose(flips.mean(0), [0.2, 0.9], atol=0.03)


def test_mxnet_npx_operator_aliases_load():
    x = mx.sym.var("x")
    legacy = mx.sym.softmax(mx.sym.Activation(x, act_type="tanh"), axis=-1)
    text = legacy.tojson().replace('"Activation"', '"_npx_activation"').replace('"softmax"', '"_npx_softmax"')
    assert "_npx_activation" in text and "_npx_softmax" in text
    value = ARRAYS["input_x"]
    got = mx.sym.load_json(text).bind(mx.cpu(), {"x": mx.nd.array(value)}).forward()[0].asnumpy()
    e = onp.exp(onp.tanh(value))
    onp.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=1e-5)


def test_json_round_trip_keeps_the_graph():
    x, y = mx.sym.np.var("x"), mx.sym.np.var("y")
    sym = mx.sym.np.tensordot(mx.sym.np.outer(y, y), x, ([1], [1]))
    loaded = mx.sym.load_json(sym.tojson())
    args = {"x": mx.nd.array(ARRAYS["input_x"]), "y": mx.nd.array(ARRAYS["input_y"])}
    got = loaded.bind(mx.cpu(), args).forward()[0].asnumpy()
    want = onp.tensordot(onp.outer(ARRAYS["input_y"], ARRAYS["input_y"]), ARRAYS["input_x"], ([1], [1]))
    onp.testing.assert_allclose(got, want, rtol=1e-5)


def test_namespaces_list_numpy_names():
    for name in ("norm", "inv", "det", "slogdet", "solve", "svd", "cholesky", "eigh", "pinv", "tensorsolve"):
        assert callable(getattr(mx.sym.np.linalg, name))
    for name in ("normal", "uniform", "gamma", "randint", "exponential"):
        assert callable(getattr(mx.sym.np.random, name))
    assert mx.sym.npx.random.current_context() == mx.current_context()


def test_hybridized_block_uses_the_new_names():
    from symjit.gluon import HybridBlock

    class Net(HybridBlock):
        def hybrid_forward(self, F, x, y):
            parts = F.np.array_split(x, 2, axis=1)
            return F.np.tensordot(parts[0], F.np.atleast_2d(y)[:, :2], ([1], [1])) + F.np.vdot(x, x)

    net = Net()
    x, y = mx.np.array(ARRAYS["input_x"]), mx.np.array(ARRAYS["input_y"])
    eager = net(x, y).asnumpy()
    net.hybridize()
    compiled = net(x, y).asnumpy()
    xv, yv = ARRAYS["input_x"], ARRAYS["input_y"]
    want = xv[:, :2] @ yv[None, :2].T + (xv * xv).sum()
    onp.testing.assert_allclose(eager, want, rtol=1e-5)
    onp.testing.assert_allclose(compiled, want, rtol=1e-5)


def test_var_of_a_symbol_is_the_variance_and_of_a_name_a_variable():
    x = mx.sym.np.var("x")
    assert x.list_arguments() == ["x"]
    sym = mx.sym.np.var(x, axis=0, ddof=1, keepdims=True)
    assert _op_names(sym) == ["_npi_var"]
    (got,) = _run(sym, ["x"])
    onp.testing.assert_allclose(got, ARRAYS["input_x"].var(0, ddof=1, keepdims=True), rtol=1e-5)


def test_unary_tests_and_bitwise_not_take_an_out_argument_as_numpy():
    a = mx.sym.np.var("a", dtype="int32")
    f = a.astype("float32") / 0.0
    sym = mx.sym.Group([mx.sym.np.bitwise_not(a, None), mx.sym.np.isposinf(f, None), mx.sym.np.isneginf(f)])
    assert {"_npi_bitwise_not", "_npi_isposinf", "_npi_isneginf"} <= set(_op_names(sym))
    values = onp.array([-1, 0, 3], onp.int32)
    outs = [o.asnumpy() for o in sym.bind(mx.cpu(), {"a": mx.nd.array(values, dtype="int32")}).forward()]
    with onp.errstate(divide="ignore", invalid="ignore"):
        fv = values.astype(onp.float32) / onp.float32(0.0)
    onp.testing.assert_array_equal(outs[0], onp.invert(values))
    onp.testing.assert_array_equal(outs[1], onp.isposinf(fv))
    onp.testing.assert_array_equal(outs[2], onp.isneginf(fv))


GRADIENT_CASES = {
    "outer": (lambda F, x, y: F.np.outer(x, y), lambda x, y: onp.outer(x, y)),
    "tensordot axes lists": (lambda F, x, y: F.np.tensordot(x, x, ([0], [0])), lambda x, y: x.T @ x),
    "tensordot int": (lambda F, x, y: F.np.tensordot(x, y, 1), lambda x, y: x @ y),
    "inner": (lambda F, x, y: F.np.inner(x, y), lambda x, y: x @ y),
    "vdot": (lambda F, x, y: F.np.vdot(x, x), lambda x, y: (x * x).sum()),
    "average": (lambda F, x, y: F.np.average(x, axis=0), lambda x, y: x.mean(0)),
    "append": (lambda F, x, y: F.np.append(x, x * 2), lambda x, y: onp.append(x, x * 2)),
    "array_split": (lambda F, x, y: F.np.array_split(x, 2, axis=1)[1] * 3, lambda x, y: onp.array_split(x, 2, 1)[1] * 3),
}


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("name", list(GRADIENT_CASES))
def test_gradients_through_the_new_functions_match_finite_differences(name, hybridize):
    from symjit import autograd
    from symjit.gluon import HybridBlock
    build, ref = GRADIENT_CASES[name]

    class Net(HybridBlock):
        def hybrid_forward(self, F, x, y):
            return F.np.sum(build(F, x, y)) + F.np.sum(y) * 0

    net = Net()
    if hybridize:
        net.hybridize()
    xv, yv = ARRAYS["input_x"].astype(onp.float64), ARRAYS["input_y"].astype(onp.float64)
    x, y = mx.np.array(xv, dtype="float64"), mx.np.array(yv, dtype="float64")
    x.attach_grad()
    with autograd.record():
        out = net(x, y)
    out.backward()
    want = onp.zeros_like(xv)
    for idx in onp.ndindex(xv.shape):
        step = onp.zeros_like(xv)
        step[idx] = 1e-6
        want[idx] = (ref(xv + step, yv).sum() - ref(xv - step, yv).sum()) / 2e-6
    onp.testing.assert_allclose(x.grad.asnumpy(), want, rtol=1e-6, atol=1e-7)
