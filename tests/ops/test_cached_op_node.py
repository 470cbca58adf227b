"""`_CachedOp`: a graph applied as one node: forward, gradient, shape inference and JSON forms
(symjit's attribute string and MXNet's per-node "subgraphs")."""
from __future__ import annotations

import json

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from symjit.symbol.contrib import SymbolSubgraph
from symjit.symbol.symbol import create_op_symbol

RNG = np.random.default_rng(7)


def _dense_tanh_subgraph():
    """tanh(x @ w.T) over inputs (x, w)."""
    x, w = mx.sym.var("x"), mx.sym.var("w")
    body = mx.sym.tanh(mx.sym.FullyConnected(x, w, no_bias=True, num_hidden=3))
    return SymbolSubgraph(body, ["x", "w"])


def _node():
    return create_op_symbol("_CachedOp", [mx.sym.var("a"), mx.sym.var("b")],
                            {"subgraph": _dense_tanh_subgraph()}, name="cached")


def test_forward_and_shapes():
    s = _node()
    assert s.list_arguments() == ["a", "b"]
    _, out_shapes, _ = s.infer_shape(a=(2, 4), b=(3, 4))
    assert out_shapes == [(2, 3)]
    a, b = RNG.normal(size=(2, 4)).astype(np.float32), RNG.normal(size=(3, 4)).astype(np.float32)
    got = s.eval(a=mx.nd.array(a), b=mx.nd.array(b))[0].asnumpy()
    np.testing.assert_allclose(got, np.tanh(a @ b.T), rtol=1e-5, atol=1e-6)


def test_gradient_is_the_subgraphs():
    a, b = RNG.normal(size=(2, 4)), RNG.normal(size=(3, 4))
    og = RNG.normal(size=(2, 3))
    ex = _node().simple_bind(mx.cpu(), a=(2, 4), b=(3, 4), type_dict={"a": "float64", "b": "float64"})
    ex.forward(is_train=True, a=a, b=b)
    ex.backward(mx.nd.array(og, dtype="float64"))
    d = og * (1 - np.tanh(a @ b.T) ** 2)   # through tanh
    np.testing.assert_allclose(ex.grad_dict["a"].asnumpy(), d @ b, rtol=1e-10)
    np.testing.assert_allclose(ex.grad_dict["b"].asnumpy(), d.T @ a, rtol=1e-10)


def test_json_round_trip_and_mxnet_subgraphs_form():
    a, b = RNG.normal(size=(2, 4)).astype(np.float32), RNG.normal(size=(3, 4)).astype(np.float32)
    expected = np.tanh(a @ b.T)
    again = mx.sym.load_json(_node().tojson())
    np.testing.assert_allclose(again.eval(a=mx.nd.array(a), b=mx.nd.array(b))[0].asnumpy(), expected,
                               rtol=1e-5, atol=1e-6)
    body = json.loads(_dense_tanh_subgraph().symbol.tojson())
    graph = {"nodes": [{"op": "null", "name": "a", "inputs": []}, {"op": "null", "name": "b", "inputs": []},
                       {"op": "_CachedOp", "name": "c", "attrs": {"static_alloc": "True"},
                        "inputs": [[0, 0, 0], [1, 0, 0]], "subgraphs": [body]}],
             "arg_nodes": [0, 1], "heads": [[2, 0, 0]]}
    s = mx.sym.load_json(json.dumps(graph))
    np.testing.assert_allclose(s.eval(a=mx.nd.array(a), b=mx.nd.array(b))[0].asnumpy(), expected,
                               rtol=1e-5, atol=1e-6)


def test_bad_flags_and_inputs():
    with pytest.raises(MXNetError, match="_CachedOp.*unknown attribute 'inline'"):
        create_op_symbol("_CachedOp", [mx.sym.var("a"), mx.sym.var("b")],
                         {"subgraph": _dense_tanh_subgraph(), "inline": 3})
    with pytest.raises(MXNetError, match="_CachedOp"):
        mx.nd.invoke("_CachedOp", [mx.nd.ones((2, 4))], {"subgraph": _dense_tanh_subgraph()})
