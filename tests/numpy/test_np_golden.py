"""mx.np against golden values made by MXNet 1.9.1 (tests/golden/make_np.py, npx.set_np() mode):
results (values, shapes, dtypes) of expressions, gradients, dtype rules and name coverage."""
import json
from pathlib import Path

import numpy as onp
import pytest

from symjit import autograd
from symjit import numpy as np

DATA = Path(__file__).resolve().parents[1] / "golden" / "data"
CASES = json.loads((DATA / "np_cases.json").read_text())
DTYPES = json.loads((DATA / "np_dtypes.json").read_text())
NAMES = json.loads((DATA / "np_names.json").read_text())
ARRAYS = onp.load(DATA / "np_cases.npz")

#: MXNet 1.9.1 registers zero gradients for std and var; symjit gives the true gradient (checked
#: against finite differences in test_np_ops)
MXNET_ZERO_GRADIENT = {"np.std(x, axis=0)", "np.var(x)"}


def _env():
    return {"np": np, **{k[len("input_"):]: np.array(ARRAYS[k], dtype=ARRAYS[k].dtype)
                         for k in ARRAYS.files if k.startswith("input_")}}


def _as_numpy(v):
    if isinstance(v, (list, tuple)):
        v = v[0]
    return v.asnumpy() if hasattr(v, "asnumpy") else onp.asarray(v)


@pytest.mark.parametrize("k", range(len(CASES["cases"])), ids=CASES["cases"])
def test_case_matches_mxnet(k):
    expr = CASES["cases"][k]
    want = ARRAYS[f"case_{k}"]
    got = _as_numpy(eval(expr, _env()))   # noqa: S307 - the golden expression list
    assert got.shape == want.shape, expr
    assert got.dtype == want.dtype, (expr, got.dtype, want.dtype)
    if want.dtype.kind == "f":
        onp.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5, err_msg=expr)
    else:
        onp.testing.assert_array_equal(got, want, err_msg=expr)


@pytest.mark.parametrize("k", range(len(CASES["grads"])), ids=CASES["grads"])
def test_gradient_matches_mxnet(k):
    expr = CASES["grads"][k]
    if expr in MXNET_ZERO_GRADIENT:
        assert not ARRAYS[f"grad_{k}"].any()
        return
    env = _env()
    x = env["x"]
    x.attach_grad()
    with autograd.record():
        out = eval(expr, env)              # noqa: S307
    out.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), ARRAYS[f"grad_{k}"], rtol=1e-4, atol=1e-5, err_msg=expr)


def _dtype_cases(prefix):
    return sorted(k for k in DTYPES if k.startswith(prefix))


def _arrays():
    return {d: np.array(onp.ones(2, dtype=d)) for d in ["bool", "uint8", "int8", "int32", "int64", "float16",
                                                         "float32", "float64"]}


def _result_dtype(fn):
    try:
        return str(fn().dtype)
    except Exception:      # noqa: BLE001 - refused, as MXNet refuses some pairs
        return "error"


def test_binary_dtype_rules_match_mxnet():
    arrays = _arrays()
    wrong = []
    for key in _dtype_cases(("add|", "subtract|", "multiply|", "true_divide|", "mod|", "power|", "maximum|",
                             "equal|", "less|")):
        op, a, b = key.split("|")
        got = _result_dtype(lambda: getattr(np, op)(arrays[a], arrays[b]))
        if got != DTYPES[key]:
            wrong.append((key, got, DTYPES[key]))
    assert not wrong, wrong


def test_scalar_unary_and_reduction_dtypes_match_mxnet():
    arrays = _arrays()
    scalar = {"add1": lambda v: v + 1, "add1.5": lambda v: v + 1.5, "div2": lambda v: v / 2,
              "mul_true": lambda v: v * True, "rsub1": lambda v: 1 - v, "gt1": lambda v: v > 1}
    wrong = []
    for key in _dtype_cases(("scalar_", "unary_", "reduce_")):
        kind, dt = key.split("|")
        group, _, name = kind.partition("_")
        if group == "scalar":
            fn = scalar[name]
        else:
            fn = getattr(np, name)
        got = _result_dtype(lambda: fn(arrays[dt]))
        if got != DTYPES[key]:
            wrong.append((key, got, DTYPES[key]))
    assert not wrong, wrong


def test_name_coverage():
    """Every public name of MXNet 1.9.1's mx.np, mx.np.linalg and mx.np.random exists here."""
    assert [n for n in NAMES["np"] if not hasattr(np, n)] == []
    assert [n for n in NAMES["linalg"] if not hasattr(np.linalg, n)] == []
    assert [n for n in NAMES["random"] if not hasattr(np.random, n)] == []
