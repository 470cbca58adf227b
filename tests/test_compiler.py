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
