"""Shape/dtype inference pass: fills what ops deduce, partial shapes, errors naming node/op/shapes."""
from __future__ import annotations

import pytest

from symjit.base import MXNetError
from symjit.ir import GraphBuilder, TensorType, verify
from symjit.passes import infer_types

F32 = "float32"


def mlp_graph():
    b = GraphBuilder(name="mlp")
    x = b.add_input("x")
    w1, b1 = b.add_input("w1"), b.add_input("b1")
    w2 = b.add_input("w2")
    (h,) = b.add_node("FullyConnected", [x, w1, b1], {"num_hidden": 16}, name="fc1")
    (a,) = b.add_node("relu", [h], name="act")
    (o,) = b.add_node("FullyConnected", [a, w2], {"num_hidden": 4, "no_bias": True}, name="fc2")
    return b.build([o])


def test_fills_weights_from_data_and_is_a_fixpoint():
    g = mlp_graph()
    out, stats = infer_types(g, shapes={"x": (8, 5)}, dtypes={"x": F32})
    shapes = {v.name: v.type.shape for v in out.values()}
    assert shapes == {"x": (8, 5), "w1": (16, 5), "b1": (16,), "w2": (4, 16), "fc1": (8, 16),
                      "act": (8, 16), "fc2": (8, 4)}
    assert all(v.type.dtype == F32 for v in out.values())
    assert stats.shapes_known == stats.values == 7 and stats.dtypes_known == 7
    verify(out)
    # the input graph is unchanged (the pass returns a copy)
    # what the builder alone could deduce: nothing before data's rank is known (as MXNet)
    assert g.args[1].type.shape is None
    again, stats2 = infer_types(out)
    assert [v.type for v in again.values()] == [v.type for v in out.values()]
    assert stats2.sweeps == 1


def test_partial_shapes_keep_unknown_dims():
    g = mlp_graph()
    out, stats = infer_types(g, shapes={"x": (0, 5)})
    shapes = {v.name: v.type.shape for v in out.values()}
    assert shapes["w1"] == (16, 5) and shapes["fc1"] == (0, 16) and shapes["fc2"] == (0, 4)
    assert stats.shapes_known == 3  # w1, b1, w2
    out, _ = infer_types(mlp_graph())
    assert out.outputs[0].type.shape is None


def test_information_flows_back_into_inputs_over_sweeps():
    # the weight of fc2 is only determined once fc1's output is known from x
    g = mlp_graph()
    out, stats = infer_types(g, shapes={"x": (2, 3)})
    assert out.args[3].type.shape == (4, 16)


def test_conflict_names_node_op_and_shapes():
    b = GraphBuilder(name="g")
    x = b.add_input("x")
    y = b.add_input("y")
    (s,) = b.add_node("elemwise_add", [x, y], name="adder")
    g = b.build([s])
    with pytest.raises(MXNetError) as e:
        infer_types(g, shapes={"x": (2, 3), "y": (2, 4)})
    msg = str(e.value)
    assert "'adder'" in msg and "elemwise_add" in msg and "(2, 3)" in msg and "(2, 4)" in msg


def test_conflict_through_filled_weight():
    g = mlp_graph()
    with pytest.raises(MXNetError) as e:
        infer_types(g, shapes={"x": (8, 5), "w1": (16, 6)})
    msg = str(e.value)
    assert "fc1" in msg and "FullyConnected" in msg and "(16, 6)" in msg and "(16, 5)" in msg


def test_dtype_conflict_and_unknown_input():
    g = mlp_graph()
    with pytest.raises(MXNetError, match="dtype"):
        infer_types(g, dtypes={"x": F32, "w1": "float64"})
    with pytest.raises(MXNetError, match="not an input"):
        infer_types(g, shapes={"nope": (1,)})


def test_given_shape_replaces_declared_shape_and_reinfers():
    """A fully known given shape wins over the input's declared one (MXNet reads a variable's
    `__shape__` only when not given one); shapes derived from the declared one are redone.
    A partial given shape still merges, and conflicts there are errors."""
    b = GraphBuilder()
    x = b.add_input("x", TensorType((2, 3), F32))
    (r,) = b.add_node("relu", [x])
    g = b.build([r])
    g2, _ = infer_types(g)
    out, _ = infer_types(g2, shapes={"x": (3, 3)})
    assert tuple(out.outputs[0].type.shape) == (3, 3)
    with pytest.raises(MXNetError, match="input 'x'"):
        infer_types(g2, shapes={"x": (0, 4)})
