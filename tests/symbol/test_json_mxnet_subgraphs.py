"""MXNet JSON whose control-flow nodes keep their bodies in the per-node "subgraphs" list (as
MXNet 1.x's nnvm writes `_foreach`, `_cond` and `_while_loop`) loads and runs."""
from __future__ import annotations

import json

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError


def _var(name):
    return {"op": "null", "name": name, "inputs": []}


def _graph(nodes, heads):
    args = [i for i, n in enumerate(nodes) if n["op"] == "null"]
    return {"nodes": nodes, "arg_nodes": args, "heads": heads}


def _foreach_json():
    """A running sum: out[t] = state = state + x[t]."""
    body = _graph([_var("foreach0_data0"), _var("foreach0_init0"),
                   {"op": "elemwise_add", "name": "_plus0", "inputs": [[0, 0, 0], [1, 0, 0]]}],
                  [[2, 0, 0], [2, 0, 0]])
    node = {"op": "_foreach", "name": "foreach0", "inputs": [[0, 0, 0], [1, 0, 0]], "subgraphs": [body],
            "attrs": {"in_data_locs": "[0]", "in_state_locs": "[1]", "num_args": "2", "num_out_data": "1",
                      "num_outputs": "2", "remain_locs": "[]"}}
    g = _graph([_var("x"), _var("s0"), node], [[2, 0, 0], [2, 1, 0]])
    g["attrs"] = {"mxnet_version": ["int", 10901]}
    return g


def test_foreach_from_mxnet_json():
    s = mx.sym.load_json(json.dumps(_foreach_json()))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    s0 = np.ones(3, np.float32)
    steps, final = s.eval(x=mx.nd.array(x), s0=mx.nd.array(s0))
    np.testing.assert_array_equal(steps.asnumpy(), np.cumsum(x, axis=0) + 1)
    np.testing.assert_array_equal(final.asnumpy(), x.sum(axis=0) + 1)


def test_cond_from_mxnet_json():
    """out = a * 2 if sum(a) > 0 else -a, with the predicate and branches as subgraphs."""
    pred = _graph([_var("cond_a"), {"op": "sum", "name": "s", "inputs": [[0, 0, 0]]},
                   {"op": "_greater_scalar", "name": "gt", "attrs": {"scalar": "0"}, "inputs": [[1, 0, 0]]}],
                  [[2, 0, 0]])
    then = _graph([_var("then_a"), {"op": "_mul_scalar", "name": "m", "attrs": {"scalar": "2"},
                                    "inputs": [[0, 0, 0]]}], [[1, 0, 0]])
    other = _graph([_var("else_a"), {"op": "negative", "name": "n", "inputs": [[0, 0, 0]]}], [[1, 0, 0]])
    node = {"op": "_cond", "name": "cond0", "inputs": [[0, 0, 0]], "subgraphs": [pred, then, other],
            "attrs": {"cond_input_locs": "[0]", "then_input_locs": "[0]", "else_input_locs": "[0]",
                      "num_args": "1", "num_outputs": "1"}}
    s = mx.sym.load_json(json.dumps(_graph([_var("a"), node], [[1, 0, 0]])))
    for a in (np.array([1.0, 2.0], np.float32), np.array([-3.0, 1.0], np.float32)):
        expected = a * 2 if a.sum() > 0 else -a
        np.testing.assert_array_equal(s.eval(a=mx.nd.array(a))[0].asnumpy(), expected)


def test_wrong_number_of_subgraphs_is_reported():
    g = _foreach_json()
    g["nodes"][2]["subgraphs"] = []
    with pytest.raises(MXNetError, match="_foreach.*expected 1 subgraphs"):
        mx.sym.load_json(json.dumps(g))
