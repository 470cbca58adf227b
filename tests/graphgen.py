"""Random IR graphs for differential testing of passes and code generators.

`random_graph(draw)` (a hypothesis composite) builds a graph from registry ops over 2-D
float32 values: unary and scalar elementwise ops (with neutral scalars that simplify
removes), same-shape and broadcasting binary ops (including x - x), duplicated
subexpressions (for CSE), dead branches (for DCE), reductions broadcast back, reshape and
transpose chains, dot, and a multi-output SliceChannel. Inputs are positive so that every
op is defined; `feeds(g, rng)` makes matching inputs.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from symjit.ir import GraphBuilder, TensorType
from symjit.ir.graph import Graph

UNARY = ["relu", "sigmoid", "tanh", "square", "abs", "negative", "_copy", "softsign", "exp"]
SCALAR = [("_mul_scalar", 1.0), ("_mul_scalar", 0.5), ("_plus_scalar", 0.0), ("_plus_scalar", 2.0),
          ("_rminus_scalar", 1.0), ("_power_scalar", 2.0), ("_power_scalar", 1.0), ("_div_scalar", 1.0)]
BINARY = ["elemwise_add", "elemwise_mul", "elemwise_sub", "_maximum"]
BROADCAST = ["broadcast_add", "broadcast_mul", "broadcast_sub"]


@st.composite
def random_graph(draw, max_nodes: int = 14) -> Graph:
    rows = draw(st.integers(1, 4))
    cols = draw(st.sampled_from([2, 4, 6]))
    b = GraphBuilder(name="random")
    pool = [b.add_input(f"x{i}", TensorType((rows, cols), "float32")) for i in range(draw(st.integers(1, 3)))]
    row = b.add_input("row", TensorType((1, cols), "float32"))
    col = b.add_input("col", TensorType((rows, 1), "float32"))
    w = b.add_input("w", TensorType((cols, cols), "float32"))

    def pick():
        return draw(st.sampled_from(pool))

    for _ in range(draw(st.integers(1, max_nodes))):
        kind = draw(st.sampled_from(["unary", "scalar", "binary", "bcast", "dup", "reduce", "shape",
                                     "dot", "split"]))
        x = pick()
        if kind == "unary":
            op = draw(st.sampled_from(UNARY))
            if op == "exp":
                x = b.add_node("tanh", [x])[0]
            outs = b.add_node(op, [x])
        elif kind == "scalar":
            op, s = draw(st.sampled_from(SCALAR))
            if op == "_power_scalar":
                x = b.add_node("abs", [x])[0]
            outs = b.add_node(op, [x], {"scalar": s})
        elif kind == "binary":
            op = draw(st.sampled_from(BINARY))
            y = x if draw(st.booleans()) and op == "elemwise_sub" else pick()
            outs = b.add_node(op, [x, y])
        elif kind == "bcast":
            op = draw(st.sampled_from(BROADCAST))
            outs = b.add_node(op, [x, draw(st.sampled_from([row, col]))])
        elif kind == "dup":  # the same expression twice: CSE merges them
            a = b.add_node("sigmoid", [x])[0]
            a2 = b.add_node("sigmoid", [x])[0]
            outs = b.add_node("elemwise_add", [a, a2])
        elif kind == "reduce":
            s = b.add_node("sum", [x], {"axis": 1, "keepdims": True})[0]
            outs = b.add_node("broadcast_mul", [x, s])
        elif kind == "shape":
            t = b.add_node("transpose", [x])[0]
            r = b.add_node("Reshape", [t], {"shape": (-1,)})[0]
            r2 = b.add_node("Reshape", [r], {"shape": (cols, rows)})[0]
            outs = b.add_node("transpose", [r2])
        elif kind == "dot":
            outs = b.add_node("dot", [x, w])
        else:
            parts = b.add_node("SliceChannel", [x], {"num_outputs": 2, "axis": 1})
            both = b.add_node("elemwise_mul", [parts[0], parts[1]])[0]
            outs = b.add_node("Concat", [both, parts[0]], {"dim": 1, "num_args": 2})
        pool.append(outs[0])
    n_out = draw(st.integers(1, min(3, len(pool))))
    outputs = draw(st.lists(st.sampled_from(pool[-6:]), min_size=n_out, max_size=n_out, unique_by=id))
    return b.build(outputs)


def feeds(g: Graph, rng: np.random.Generator) -> dict:
    return {v.name: rng.uniform(0.25, 1.0, size=v.type.shape).astype(v.type.dtype) for v in g.inputs}
