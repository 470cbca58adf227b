"""The graph IR: builder, verifier, printer and the reference interpreter."""
from __future__ import annotations

import numpy as np
import pytest

from symjit.base import MXNetError
from symjit.ir import Graph, GraphBuilder, Node, TensorType, Value, format_graph, run, verify
from symjit.ops import get_op

F32 = "float32"


def small_graph() -> Graph:
    b = GraphBuilder(name="small")
    x = b.add_input("x", TensorType((2, 3), F32))
    w = b.add_input("w", TensorType((4, 3), F32))
    (fc,) = b.add_node("FullyConnected", [x, w], {"num_hidden": "4", "no_bias": "True"}, name="fc")
    (act,) = b.add_node("Activation", [fc], {"act_type": "tanh"}, name="act")
    (y,) = b.add_node("_plus_scalar", [act], {"scalar": 1.5}, name="y")
    return b.build([y, fc])


def test_builder_types_and_printer_is_stable():
    g = small_graph()
    verify(g)
    assert format_graph(g) == (
        "graph small(%x: float32[2,3], %w: float32[4,3]) aux() {\n"
        "  %fc: float32[2,4] = FullyConnected(%x, %w) {no_bias=True, num_hidden=4}\n"
        "  %act: float32[2,4] = Activation(%fc) {act_type=tanh}\n"
        "  %y: float32[2,4] = _plus_scalar(%act) {scalar=1.5}\n"
        "  return %y, %fc\n"
        "}")
    assert format_graph(g.copy()) == format_graph(g)


def test_multi_output_values_and_aux_print():
    b = GraphBuilder(name="bn")
    d = b.add_input("d", TensorType((4, 3), F32))
    gamma, beta = b.add_input("g", TensorType((3,), F32)), b.add_input("b", TensorType((3,), F32))
    mm = b.add_input("mm", TensorType((3,), F32), aux=True)
    mv = b.add_input("mv", TensorType((3,), F32), aux=True)
    outs = b.add_node("BatchNorm", [d, gamma, beta, mm, mv], {}, name="bn")
    assert [v.name for v in outs] == ["bn:output", "bn:mean", "bn:var"]
    g = b.build(outs[:1])
    verify(g)
    text = format_graph(g)
    assert "aux(%mm: float32[3], %mv: float32[3])" in text
    assert "%bn:output: float32[4,3], %bn:mean: float32[3], %bn:var: float32[3] = BatchNorm(" in text


def test_builder_rejects_bad_nodes():
    b = GraphBuilder()
    x = b.add_input("x", TensorType((2,), F32))
    with pytest.raises(MXNetError, match="expected 2 inputs"):
        b.add_node("elemwise_add", [x], name="a")
    with pytest.raises(MXNetError, match="unknown operator"):
        b.add_node("nope", [x])
    with pytest.raises(MXNetError, match="act_type"):
        b.add_node("Activation", [x], {"act_type": "bogus"})
    stranger = Value("s", TensorType((2,), F32))
    with pytest.raises(MXNetError, match="not a value defined"):
        b.add_node("relu", [stranger])
    y = b.add_input("y", TensorType((3,), F32))
    with pytest.raises(MXNetError) as e:
        b.add_node("elemwise_add", [x, y], name="adder")
    assert "adder" in str(e.value) and "elemwise_add" in str(e.value)
    assert "(2,)" in str(e.value) and "(3,)" in str(e.value)
    with pytest.raises(MXNetError):
        b.build([stranger])


def test_unique_names():
    b = GraphBuilder()
    x = b.add_input("x", TensorType((2,), F32))
    (r1,) = b.add_node("relu", [x], name="x")
    (r2,) = b.add_node("relu", [r1], name="x")
    assert [x.name, r1.name, r2.name] == ["x", "x_1", "x_2"]


def _valid():
    g = small_graph()
    verify(g)
    return g


def test_verifier_catches_violations():
    g = _valid()
    g.nodes[0].outputs = [g.args[0]]  # redefines an input
    with pytest.raises(MXNetError, match="defined twice"):
        verify(g)

    g = _valid()
    g.nodes.reverse()  # uses before definitions (a cycle in the order)
    with pytest.raises(MXNetError, match="before it is defined"):
        verify(g)

    g = _valid()
    g.nodes[1].inputs = [g.nodes[2].outputs[0]]  # a real cycle: act reads y, y reads act
    with pytest.raises(MXNetError, match="before it is defined"):
        verify(g)

    g = _valid()
    g.nodes[2].inputs.append(g.args[0])
    with pytest.raises(MXNetError, match="expects 1"):
        verify(g)

    g = _valid()
    g.nodes[1].outputs.append(Value("extra", TensorType()))
    with pytest.raises(MXNetError, match="defines 1"):
        verify(g)

    g = _valid()
    g.nodes[1].outputs[0].type = TensorType((9, 9), F32)
    with pytest.raises(MXNetError, match="has type"):
        verify(g)

    g = _valid()
    g.nodes[1].outputs[0].type = TensorType((2, 4), "float64")
    with pytest.raises(MXNetError, match="dtype"):
        verify(g)

    g = _valid()
    g.outputs.append(Value("ghost"))
    with pytest.raises(MXNetError, match="not defined"):
        verify(g)

    g = _valid()
    g.nodes[2].outputs[0].name = "fc"
    with pytest.raises(MXNetError, match="used twice"):
        verify(g)


def test_interpreter_matches_numpy_and_frees_nothing_it_returns():
    g = small_graph()
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    res = run(g, {"x": x, "w": w}, keep=[g.nodes[1].outputs[0]])
    fc = x @ w.T
    np.testing.assert_allclose(res.outputs[0], np.tanh(fc) + 1.5, rtol=1e-6)
    np.testing.assert_allclose(res.outputs[1], fc, rtol=1e-6)
    np.testing.assert_allclose(res.kept[g.nodes[1].outputs[0]], np.tanh(fc), rtol=1e-6)
    assert res.aux_updates == {}


def test_interpreter_feed_errors():
    g = small_graph()
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(MXNetError, match="no value fed"):
        run(g, {"x": x})
    with pytest.raises(MXNetError, match="expects shape"):
        run(g, {"x": np.zeros((3, 3), np.float32), "w": np.zeros((4, 3), np.float32)})
    with pytest.raises(MXNetError, match="not an input"):
        run(g, {"x": x, "w": np.zeros((4, 3), np.float32), "zz": x})


def test_interpreter_batchnorm_training_reports_aux_updates():
    b = GraphBuilder(name="bn")
    d = b.add_input("d", TensorType((8, 3), F32))
    gamma, beta = b.add_input("g", TensorType((3,), F32)), b.add_input("b", TensorType((3,), F32))
    mm = b.add_input("mm", TensorType((3,), F32), aux=True)
    mv = b.add_input("mv", TensorType((3,), F32), aux=True)
    outs = b.add_node("BatchNorm", [d, gamma, beta, mm, mv], {"momentum": 0.8, "fix_gamma": False}, name="bn")
    g = b.build(outs[:1])
    rng = np.random.default_rng(1)
    dv = rng.standard_normal((8, 3)).astype(np.float32) * 2 + 1
    feeds = {"d": dv, "g": np.full(3, 2.0, np.float32), "b": np.full(3, 0.5, np.float32),
             "mm": np.zeros(3, np.float32), "mv": np.ones(3, np.float32)}
    res = run(g, feeds, is_train=True)
    mean, var = dv.mean(0), dv.var(0)
    np.testing.assert_allclose(res.outputs[0], 2 * (dv - mean) / np.sqrt(var + 1e-3) + 0.5, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(res.aux_updates[g.aux[0]], 0.2 * mean, rtol=1e-5)
    np.testing.assert_allclose(res.aux_updates[g.aux[1]], 0.8 + 0.2 * var, rtol=1e-3)
    # inference mode uses the moving statistics and updates nothing
    res = run(g, feeds, is_train=False)
    np.testing.assert_allclose(res.outputs[0], 2 * dv / np.sqrt(1 + 1e-3) + 0.5, rtol=1e-5)
    assert res.aux_updates == {}


def test_interpreter_reports_op_errors_with_node_name():
    g = Graph()
    x = Value("x", TensorType((2,), F32))
    y = Value("y", TensorType((3,), F32))
    out = Value("s", TensorType((2,), F32))
    g.args = [x, y]
    g.nodes = [Node("adder", get_op("elemwise_add"), get_op("elemwise_add").parse({}), [x, y], [out])]
    g.outputs = [out]
    with pytest.raises(MXNetError, match="adder"):
        run(g, {"x": np.zeros(2, np.float32), "y": np.zeros(3, np.float32)})


def test_tensor_type_text():
    assert str(TensorType((2, 0), "int32")) == "int32[2,?]"
    assert str(TensorType()) == "?[?]"
    assert TensorType((2, 3), F32).known and not TensorType((2, 0), F32).known
