"""Small graph-editing helpers shared by the rewriting passes.

Passes are pure: each starts from `g.copy()` and edits only the copy. These helpers edit a
graph in place and are meant for such private copies.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from ..ir.builder import infer_node_types
from ..ir.graph import Graph, Node, TensorType, Value
from ..ops import scalar as S
from ..ops.fused import ACT_NONE, activation_of, is_relu_epilogue, residual_epilogue
from ..ops.registry import check_shape, get_op

__all__ = ["replace_uses", "make_node", "const_node", "is_constant", "NameSource", "use_counts", "attrs_key", "convolution_relu",
           "convolution_activation"]


class NameSource:
    """Fresh value/node names that do not clash with a graph's existing names."""

    def __init__(self, g: Graph):
        self.taken = {v.name for v in g.values()} | {n.name for n in g.nodes}

    def __call__(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            name = f"{base}_{k}"
            k += 1
        self.taken.add(name)
        return name


def replace_uses(g: Graph, mapping: Mapping[Value, Value]) -> None:
    """Make every reader of `old` (node inputs, graph outputs) read `mapping[old]` instead."""
    if not mapping:
        return
    for n in g.nodes:
        n.inputs = [mapping.get(v, v) for v in n.inputs]
    g.outputs = [mapping.get(v, v) for v in g.outputs]


def make_node(names: NameSource, op_name: str, inputs: Sequence[Value], attrs: Mapping | None = None,
              base: str | None = None) -> Node:
    """A typed node (attributes parsed by the op's schema, output types inferred)."""
    op = get_op(op_name)
    parsed = op.parse(dict(attrs or {}))
    node_name = names(base or op.name.lstrip("_").lower())
    _, out_types = infer_node_types(node_name, op, parsed, [v.type for v in inputs])
    n_out = op.num_outputs(parsed)
    outs = [Value(node_name if n_out == 1 else names(f"{node_name}:{i}"), t) for i, t in enumerate(out_types)]
    return Node(node_name, op, parsed, list(inputs), outs)


def const_node(names: NameSource, value, base: str) -> Node:
    """The `_const` node holding `value` that `make_node(names, "_const", [], {"value": value},
    base)` builds, typed straight from the parsed array (its shape and dtype are the op's whole
    inference) instead of through the general per-node inference."""
    op = get_op("_const")
    parsed = op.parse({"value": value})
    node_name = names(base)
    arr = parsed["value"]
    out = TensorType(check_shape(op.name, "output 0", tuple(int(d) for d in arr.shape)), arr.dtype.name)
    return Node(node_name, op, parsed, [], [Value(node_name, out)])


def is_constant(v: Value, producer: Mapping) -> bool:
    """Whether `v` is the output of a `_const` node (`producer`: Value -> the node making it)."""
    n = producer.get(v)
    return n is not None and n.op.name == "_const"


def convolution_relu(n: Node) -> tuple[dict, bool] | None:
    """(Convolution attrs, relu) when `n` is a Convolution, or a `_with_epilogue` of one whose
    epilogue is exactly relu of the result (no other inputs); else None."""
    if n.op.name == "Convolution":
        return n.attrs, False
    if n.op.name == "_with_epilogue" and n.attrs["inner"] == "Convolution" and is_relu_epilogue(n.attrs):
        return n.attrs["inner_attrs"], True
    return None


def convolution_activation(n: Node) -> tuple[dict, int, bool] | None:
    """(Convolution attrs, activation code, residual) when `n` is a Convolution, or a
    `_with_epilogue` of one whose epilogue is an activation the kernel library applies in its
    stores (ops/fused.py ACT_*) of the result, or of the result plus one extra input (then
    `residual` is true and the extra input is n's last); else None."""
    if n.op.name == "Convolution":
        return n.attrs, ACT_NONE, False
    if n.op.name != "_with_epilogue" or n.attrs["inner"] != "Convolution":
        return None
    a = n.attrs
    if a["num_args"] == a["num_inner"] and len(a["exprs"]) == 1:
        act = activation_of(a["exprs"][0], S.Input(0))
        if act is not None:
            return a["inner_attrs"], act, False
    act = residual_epilogue(a)
    return None if act is None else (a["inner_attrs"], act, True)


def use_counts(g: Graph) -> dict:
    """Value -> number of reads (node inputs plus graph outputs)."""
    counts: dict[Value, int] = {}
    for n in g.nodes:
        for v in n.inputs:
            counts[v] = counts.get(v, 0) + 1
    for v in g.outputs:
        counts[v] = counts.get(v, 0) + 1
    return counts


def _hashable(x):
    if isinstance(x, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return tuple(_hashable(v) for v in x)
    if hasattr(x, "tobytes") and hasattr(x, "dtype"):
        return ("array", x.dtype.str, tuple(x.shape), x.tobytes())
    return x


def attrs_key(attrs: Mapping) -> tuple:
    """A hashable, order-independent key for parsed attributes (arrays by content)."""
    return _hashable(dict(attrs))
