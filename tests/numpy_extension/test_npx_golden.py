"""mx.npx operator functions against MXNet 1.9.1 (tests/golden/data/npx_*.npz, written by
tests/golden/make_npx.py): eager outputs and autograd gradients, and the same functions on
symbols (mx.sym.npx) bound, compiled and differentiated by an executor."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as onp
import pytest

import symjit as mx
from symjit import autograd, npx

DATA = Path(__file__).resolve().parents[1] / "golden" / "data"
#: cases whose values are looser than float32 round-off: special functions, long reductions
LOOSE = {"erfinv": 1e-3, "gamma": 1e-3, "gammaln": 1e-3, "deconvolution": 1e-4, "rnn_lstm": 1e-4,
         "rnn_gru": 1e-4}
#: cases MXNet runs in inference mode (autograd.record(train_mode=False))
INFERENCE = {"batch_norm_infer", "dropout_infer"}
#: MXNet 1.9.1's selu gradient for x <= 0 is lambda * (y + alpha), not the derivative
#: y + lambda * alpha; symjit's LeakyReLU gives the derivative (tests/ops check it against
#: finite differences), so only the outputs of this case are compared
GRADIENT_DIFFERS = {"leaky_relu_selu"}
#: output shapes that depend on the values: no static graph for them
DYNAMIC = {"nonzero", "nonzero_3d"}


def _load():
    cases = {}
    for path in (DATA / "npx_nn.npz", DATA / "npx_ops.npz"):
        with onp.load(path) as data:
            for key in data.files:
                name, field = key.split(":")
                cases.setdefault(name, {})[field] = data[key]
    return cases


CASES = _load()


def _inputs(case):
    return [case[f"in{k}"] for k in range(len([f for f in case if f.startswith("in")]))]


def _outputs(case):
    return [case[f"out{k}"] for k in range(len([f for f in case if f.startswith("out")]))]


def _function(module, name: str):
    for part in name.split("."):
        module = getattr(module, part)
    return module


def _check(name, got, want, what):
    tol = LOOSE.get(name, 1e-5)
    assert got.shape == want.shape, f"{name} {what}: shape {got.shape} vs MXNet {want.shape}"
    onp.testing.assert_allclose(got.astype(onp.float64), want.astype(onp.float64), rtol=tol, atol=tol,
                                err_msg=f"{name} {what}")


@pytest.fixture(autouse=True)
def np_mode():
    npx.set_np()
    yield
    npx.reset_np()


def test_golden_cases_present():
    assert len(CASES) >= 60


@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_against_mxnet(name):
    case = CASES[name]
    kwargs = json.loads(str(case["kwargs"]))
    inputs = _inputs(case)
    arrs = [mx.np.array(x, dtype=x.dtype) for x in inputs]
    grads = [k for k in range(len(inputs)) if f"grad{k}" in case and name not in GRADIENT_DIFFERS]
    for k in grads:
        arrs[k].attach_grad()
    with autograd.record(train_mode=name not in INFERENCE):
        outs = _function(npx, str(case["fn"]))(*arrs, **kwargs)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    want = _outputs(case)
    assert len(outs) == len(want), f"{name}: {len(outs)} outputs vs MXNet {len(want)}"
    for k, (o, w) in enumerate(zip(outs, want)):
        assert o.dtype == w.dtype, f"{name} out{k}: dtype {o.dtype} vs MXNet {w.dtype}"
        _check(name, o.asnumpy(), w, f"out{k}")
    if grads:
        outs[0].backward(mx.np.array(case["head"], dtype=case["head"].dtype))
        for k in grads:
            _check(name, arrs[k].grad.asnumpy(), case[f"grad{k}"], f"grad{k}")


@pytest.mark.parametrize("name", sorted(set(CASES) - DYNAMIC))
def test_symbolic_against_mxnet(name):
    """sym.npx builds the graph; an executor compiles it, runs forward (training mode unless
    MXNet ran the case in inference) and backward with MXNet's head gradient."""
    case = CASES[name]
    kwargs = json.loads(str(case["kwargs"]))
    inputs = _inputs(case)
    variables = [mx.sym.var(f"in{k}").as_np_ndarray() for k in range(len(inputs))]
    sym = _function(mx.sym.npx, str(case["fn"]))(*variables, **kwargs)
    assert isinstance(sym, mx.sym.np._Symbol)
    args = {f"in{k}": mx.nd.array(x, dtype=x.dtype) for k, x in enumerate(inputs)}
    grads = {f"in{k}": mx.nd.zeros(x.shape, dtype=x.dtype) for k, x in enumerate(inputs)
             if f"grad{k}" in case and name not in GRADIENT_DIFFERS}
    reqs = {f"in{k}": "write" if f"in{k}" in grads else "null" for k in range(len(inputs))}
    names = sym.list_arguments()
    aux = {n: args.pop(n) for n in sym.list_auxiliary_states()}
    ex = sym.bind(mx.cpu(), {n: args[n] for n in names}, args_grad={n: g for n, g in grads.items() if n in names},
                  grad_req={n: reqs[n] for n in names}, aux_states=aux)
    outs = ex.forward(is_train=name not in INFERENCE)
    for k, (o, w) in enumerate(zip(outs, _outputs(case))):
        _check(name, o.asnumpy(), w, f"symbolic out{k}")
    if "head" in case and grads:
        ex.backward([mx.nd.array(case["head"], dtype=case["head"].dtype)] +
                    [mx.nd.zeros(o.shape, dtype=o.dtype) for o in outs[1:]])
        for n, g in grads.items():
            if n in names:
                _check(name, g.asnumpy(), case[f"grad{n[2:]}"], f"symbolic grad of {n}")
