"""symjit.compile / symjit.inspect on Symbols and exported models."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError

from shared_data import model_path


def test_compile_exported_model_with_constant_params():
    sym = mx.sym.load(str(model_path("lenet-symbol.json")))
    params = mx.nd.load(str(model_path("lenet-0000.params")))
    x = np.load(model_path("lenet-input.npy"))
    ref = np.load(model_path("lenet-output.npy"))
    model = mx.compile(sym, shapes={"data": x.shape}, params=params)
    assert model.input_names == ["data"]
    (y,) = model(data=x)
    assert np.abs(y - ref).max() <= 1e-4 * np.abs(ref).max()
    (y2,) = model(mx.nd.array(x))
    np.testing.assert_array_equal(y, y2)
    assert "bn_folded=2" in model.report()
    with pytest.raises(MXNetError, match="missing"):
        model(dat=x)


def test_compile_symbol_without_params_keeps_inputs():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    model = mx.compile(mx.sym.relu(a * b) + 1, shapes={"a": (5,), "b": (5,)})
    assert model.native and sorted(model.input_names) == ["a", "b"]
    av, bv = np.linspace(-1, 1, 5, dtype=np.float32), np.full(5, 2, np.float32)
    np.testing.assert_allclose(model(a=av, b=bv)[0], np.maximum(av * bv, 0) + 1)


def test_inspect_reports_groups_and_memory():
    x = mx.sym.var("x")
    y = mx.sym.relu(x * 2 + 1) * mx.sym.sigmoid(x) - mx.sym.tanh(x)
    r = mx.inspect(y, shapes={"x": (64,)})
    assert len(r.groups) == 1 and len(r.groups[0][2]) >= 5
    text = str(r)
    assert "fusion groups (1)" in text and "memory plan:" in text and "_fused_elemwise" in text
    with pytest.raises(MXNetError, match="expected a Symbol"):
        mx.inspect(42)


class _Unconvertible:
    """A parameter value that fails loudly if anything tries to read it."""

    def asnumpy(self):
        raise AssertionError("a parameter the graph does not use was converted")


def test_bound_constants_keep_graph_inputs_only_as_copies():
    from symjit.compiler import _bound_constants, _to_graph
    w, x = mx.sym.var("w"), mx.sym.var("x")
    g, _ = _to_graph(x * w + mx.sym.var("b"), {"x": (3,), "w": (3,), "b": (3,)}, None)
    w_nd = mx.nd.array(np.arange(3, dtype=np.float32))
    consts = _bound_constants(g, {"b": np.ones(3, np.float32), "unused": np.zeros(2)},
                              {"arg:w": w_nd, "aux:b": mx.nd.array(np.full(3, 2, np.float32)),
                               "arg:extra": _Unconvertible()})
    assert sorted(consts) == ["b", "w"]
    np.testing.assert_array_equal(consts["b"], np.full(3, 2, np.float32))   # params override defaults
    w_nd[:] = 7   # bound constants are copies: later writes to the NDArray do not reach them
    np.testing.assert_array_equal(consts["w"], np.arange(3, dtype=np.float32))


def test_compile_ignores_params_the_graph_does_not_use():
    x, w = mx.sym.var("x"), mx.sym.var("w")
    wv = np.linspace(-1, 1, 4, dtype=np.float32)
    params = {"arg:w": mx.nd.array(wv), "arg:not_in_graph": _Unconvertible()}
    model = mx.compile(x * w, shapes={"x": (4,)}, params=params, cache=False)
    assert model.input_names == ["x"]
    xv = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(model(x=xv)[0], xv * wv)
    params["arg:w"][:] = 0   # the model keeps the values it was compiled with
    np.testing.assert_array_equal(model(x=xv)[0], xv * wv)


def test_compile_takes_parameter_shapes_from_params():
    """A broadcast operand's shape cannot be inferred from the data's: compile reads it from the
    parameter's array, as MXNet's binding does."""
    x, s, b = mx.sym.var("x"), mx.sym.var("s"), mx.sym.var("b")
    y = mx.sym.relu(mx.sym.broadcast_add(mx.sym.broadcast_mul(x, s), b))
    rng = np.random.default_rng(0)
    sv, bv = rng.standard_normal((1, 3, 1, 1)).astype(np.float32), rng.standard_normal((1, 3, 1, 1)).astype(np.float32)
    xv = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    model = mx.compile(y, shapes={"x": xv.shape}, params={"arg:s": mx.nd.array(sv), "b": bv}, cache=False)
    np.testing.assert_allclose(model(x=xv)[0], np.maximum(xv * sv + bv, 0), rtol=1e-6)


def test_compile_names_inputs_whose_shape_cannot_be_inferred():
    x, s = mx.sym.var("x"), mx.sym.var("s")
    with pytest.raises(MXNetError, match=r"compile: the shapes of input\(s\) \['s'\] cannot be inferred"):
        mx.compile(mx.sym.broadcast_mul(x, s), shapes={"x": (2, 3)}, cache=False)
