"""Autodiff pass: backward graphs match finite differences on random registry graphs.

The generator draws graphs from registered ops: smooth unary and scalar ops, same-shape and
broadcasting binary ops, reductions, FullyConnected, a multi-output op (split) and fan-out
(values reused by several nodes), with several graph outputs. The check compares the backward
graph (run by the interpreter on the saved forward values) against central differences of
sum_j <out_j, head_j> in float64.
"""
from __future__ import annotations

import numpy as np
import pytest

from symjit.base import MXNetError
from symjit.ir import GraphBuilder, TensorType, run, verify
from symjit.passes import autodiff, infer_types

F64 = "float64"
UNARY = ["tanh", "sigmoid", "sin", "softsign", "square", "negative", "cos"]
BINARY = ["elemwise_add", "elemwise_sub", "elemwise_mul"]
BROADCAST = ["broadcast_mul", "broadcast_add", "broadcast_sub"]


def random_graph(seed: int):
    rng = np.random.default_rng(seed)
    b = GraphBuilder(name=f"rand{seed}")
    pool = [b.add_input("x0", TensorType((3, 4), F64)), b.add_input("x1", TensorType((3, 4), F64))]
    n_inputs = [2]

    def new_input(shape):
        v = b.add_input(f"x{n_inputs[0]}", TensorType(shape, F64))
        n_inputs[0] += 1
        return v

    def pick(shape=None):
        cands = [v for v in pool if shape is None or v.type.shape == shape]
        return cands[rng.integers(len(cands))] if cands else None

    for _ in range(int(rng.integers(4, 10))):
        kind = rng.choice(["unary", "scalar", "binary", "broadcast", "reduce", "fc", "split"])
        x = pick((3, 4))
        if kind == "unary":
            (y,) = b.add_node(str(rng.choice(UNARY)), [x])
        elif kind == "scalar":
            op = str(rng.choice(["_mul_scalar", "_plus_scalar", "_rminus_scalar", "_power_scalar"]))
            scalar = 2.0 if op == "_power_scalar" else float(rng.uniform(-2, 2))
            (y,) = b.add_node(op, [x], {"scalar": scalar})
        elif kind == "binary":
            (y,) = b.add_node(str(rng.choice(BINARY)), [x, pick((3, 4))])
        elif kind == "broadcast":
            other = pick((3, 1)) if rng.random() < 0.5 else None
            if other is None:
                other = new_input((3, 1) if rng.random() < 0.5 else (1, 4))
            args = [x, other] if rng.random() < 0.5 else [other, x]
            (y,) = b.add_node(str(rng.choice(BROADCAST)), args)
        elif kind == "reduce":
            (r,) = b.add_node("sum", [x], {"axis": 1, "keepdims": True})
            pool.append(r)
            (y,) = b.add_node("broadcast_mul", [x, r])
        elif kind == "fc":
            w = new_input((4, 4))
            bias = new_input((4,))
            (y,) = b.add_node("FullyConnected", [x, w, bias], {"num_hidden": 4})
        else:
            halves = b.add_node("split", [x], {"num_outputs": 2, "axis": 1})
            (y,) = b.add_node("Concat", [halves[1], halves[0]], {"num_args": 2, "dim": 1})
            pool.append(halves[0])
        pool.append(y)
    outputs = [pool[-1]]
    extra = pool[int(rng.integers(2, len(pool)))]
    if extra is not pool[-1]:
        outputs.append(extra)
    return b.build(outputs)


def forward_loss(g, feeds, heads):
    outs = run(g, feeds).outputs
    return float(sum(np.sum(o * h) for o, h in zip(outs, heads)))


def check_graph(g, rng, wrt=None, eps=1e-6):
    g, _ = infer_types(g)
    verify(g)
    feeds = {v: rng.uniform(-1, 1, v.type.shape) for v in g.args}
    heads = [rng.uniform(-1, 1, v.type.shape) for v in g.outputs]
    bwd, st = autodiff(g, wrt)
    verify(bwd)
    res = run(g, feeds, keep=[f for f, _ in st.saved])
    bfeeds = {b: res.kept[f] for f, b in st.saved}
    bfeeds.update(dict(zip(st.head_grads, heads)))
    grads = run(bwd, bfeeds).outputs
    assert len(grads) == len(st.grad_outputs)
    for (v, req), gr in zip(st.grad_outputs, grads):
        assert req == "write"
        x = feeds[v]
        num = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            old = x[i]
            x[i] = old + eps
            fp = forward_loss(g, feeds, heads)
            x[i] = old - eps
            fm = forward_loss(g, feeds, heads)
            x[i] = old
            num[i] = (fp - fm) / (2 * eps)
        np.testing.assert_allclose(gr, num, rtol=1e-5, atol=1e-6, err_msg=f"d/d{v.name}")
    return bwd, st


@pytest.mark.parametrize("seed", range(30))
def test_random_graphs_match_finite_differences(seed):
    check_graph(random_graph(seed), np.random.default_rng(seed))


def test_shared_subgraph_and_multiple_heads():
    b = GraphBuilder(name="shared")
    x = b.add_input("x", TensorType((2, 3), F64))
    (t,) = b.add_node("tanh", [x], name="t")
    (m,) = b.add_node("elemwise_mul", [t, t], name="m")       # fan-out of t into one node
    (s,) = b.add_node("elemwise_add", [m, t], name="s")       # and into another
    (e,) = b.add_node("sin", [x], name="e")
    check_graph(b.build([s, e, t]), np.random.default_rng(0))


def test_output_that_is_an_input_and_unused_input():
    b = GraphBuilder(name="io")
    x = b.add_input("x", TensorType((2,), F64))
    u = b.add_input("u", TensorType((2,), F64))
    (y,) = b.add_node("exp", [x], name="y")
    bwd, st = check_graph(b.build([y, x]), np.random.default_rng(1))
    assert [v.name for v, _ in st.grad_outputs] == ["x", "u"]


def test_only_needed_forward_values_are_saved():
    b = GraphBuilder(name="keep")
    x = b.add_input("x", TensorType((4,), F64))
    w = b.add_input("w", TensorType((4,), F64))
    (a,) = b.add_node("_mul_scalar", [x], {"scalar": 3.0}, name="a")
    (c,) = b.add_node("_plus_scalar", [a], {"scalar": 1.0}, name="c")
    (d,) = b.add_node("elemwise_mul", [c, w], name="d")
    g = b.build([d])
    bwd, st = autodiff(g, ["x"])
    verify(bwd)
    # dd/dx = 3 * w: only w is read; a and c are not kept
    assert [f.name for f, _ in st.saved] == ["w"]
    assert [v.name for v, _ in st.grad_outputs] == ["x"]
    heads = np.arange(4.0)
    wv = np.array([1.0, -2.0, 0.5, 4.0])
    out = run(bwd, {st.saved[0][1]: wv, st.head_grads[0]: heads}).outputs[0]
    np.testing.assert_allclose(out, 3 * wv * heads)
    # the gradient towards w (not requested) is not computed
    assert [n.op.name for n in bwd.nodes] == ["_elemwise_expr", "_elemwise_expr"]  # no dw, no zeros


def test_grad_req_add_and_null():
    b = GraphBuilder(name="req")
    x = b.add_input("x", TensorType((3,), F64))
    y = b.add_input("y", TensorType((3,), F64))
    (p,) = b.add_node("elemwise_mul", [x, y], name="p")
    g = b.build([p])
    bwd, st = autodiff(g, ["x", "y"], {"x": "add", "y": "null"})
    verify(bwd)
    assert [(v.name, r) for v, r in st.grad_outputs] == [("x", "add")]
    assert [f.name for f, _ in st.grad_inputs] == ["x"]
    yv = np.array([1.0, 2.0, 3.0])
    feeds = {bv: yv for f, bv in st.saved if f.name == "y"}
    feeds[st.head_grads[0]] = np.ones(3)
    feeds[st.grad_inputs[0][1]] = np.array([10.0, 20.0, 30.0])
    out = run(bwd, feeds).outputs[0]
    np.testing.assert_allclose(out, [11.0, 22.0, 33.0])


def test_no_path_gives_zero_gradient_or_unchanged_buffer():
    b = GraphBuilder(name="nopath")
    x = b.add_input("x", TensorType((2,), F64))
    z = b.add_input("z", TensorType((2,), F64))
    (y,) = b.add_node("exp", [x], name="y")
    g = b.build([y])
    bwd, st = autodiff(g, ["z"])
    out = run(bwd, {**{bv: np.ones(2) for _, bv in st.saved}, st.head_grads[0]: np.ones(2)}).outputs[0]
    np.testing.assert_array_equal(out, [0.0, 0.0])
    bwd, st = autodiff(g, ["z"], "add")
    res = run(bwd, {st.head_grads[0]: np.ones(2), st.grad_inputs[0][1]: np.array([5.0, 6.0])})
    np.testing.assert_array_equal(res.outputs[0], [5.0, 6.0])


def test_bad_requests_raise():
    g = random_graph(0)
    with pytest.raises(MXNetError, match="not an input"):
        autodiff(g, ["nope"])
    with pytest.raises(MXNetError, match="grad_req"):
        autodiff(g, ["x0"], "sometimes")


def test_known_zero_gradients_are_not_propagated():
    # BlockGrad's rule returns zeros: nothing upstream of it is differentiated (MXNet's zero
    # propagation), so the backward graph holds no node of the blocked branch
    import symjit as mx
    from symjit.passes.autodiff import autodiff
    from symjit.passes.infer import infer_types
    from symjit.symbol.lower import lower
    x = mx.sym.Variable("x")
    out = mx.sym.stop_gradient(mx.sym.exp(mx.sym.sin(x))) + x
    g, _ = lower(out)
    g, _ = infer_types(g, shapes={"x": (3,)}, dtypes={"x": "float32"})
    bwd, stats = autodiff(g, [g.args[0]], "write")
    assert stats.nodes_differentiated == 2   # the addition and BlockGrad itself, not sin or exp
    assert not {n.op.name for n in bwd.nodes} & {"sin", "exp", "cos"}
