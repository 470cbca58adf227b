"""Constant folding: bind known inputs as constants and evaluate what depends only on them."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..base import MXNetError
from ..ir.builder import describe_node
from ..ir.graph import Graph, Node, Value
from ..ops.registry import ComputeContext
from .rewrite import NameSource, const_node, replace_uses


def _shape_stand_ins(values) -> list[np.ndarray]:
    """Zero-strided arrays of the values' shapes and dtypes (no memory of their size): what a
    `shape_only` op's compute needs to see."""
    return [np.broadcast_to(np.zeros((), dtype=v.type.dtype), tuple(v.type.shape)) for v in values]


def bind_constants(g: Graph, constants: Mapping[str, np.ndarray]) -> tuple[Graph, dict]:
    """Replace the graph inputs named in `constants` by `_const` nodes holding those arrays.

    The inputs stay in the signature (callers may still pass them; they are ignored), so
    compiled graphs keep MXNet's argument lists. Shapes and dtypes must match the inputs' types."""
    g = g.copy()
    names = NameSource(g)
    by_name = {v.name: v for v in g.inputs}
    mapping: dict[Value, Value] = {}
    new_nodes: list[Node] = []
    for name, arr in constants.items():
        v = by_name.get(name)
        if v is None:
            raise MXNetError(f"bind_constants: {name!r} is not an input of the graph")
        arr = np.asarray(arr)
        if v.type.shape is not None and tuple(v.type.shape) != arr.shape and all(v.type.shape):
            raise MXNetError(f"bind_constants: input {name!r} has shape {v.type.shape}, "
                             f"the constant has {arr.shape}")
        node = const_node(names, arr, base=f"const_{name}")
        new_nodes.append(node)
        mapping[v] = node.outputs[0]
    g.nodes = new_nodes + g.nodes
    replace_uses(g, mapping)
    return g, {"constants_bound": len(new_nodes)}


def fold_constants(g: Graph, max_bytes: int = 1 << 30) -> tuple[Graph, dict]:
    """Evaluate nodes whose inputs are all constants (never random or stateful nodes) and
    replace them by `_const` nodes; shape queries on known shapes become constants too.

    Guarantee: outputs are unchanged (folding uses the same reference `compute` the
    interpreter runs). Results larger than `max_bytes` are left unfolded."""
    g = g.copy()
    names = NameSource(g)
    const_of: dict[Value, np.ndarray] = {}
    new_nodes: list[Node] = []
    folded = 0
    #: folded outputs -> their constants; applied to each later node as it is visited (nodes
    #: are in topological order), one pass over the graph instead of one per folded node
    remap: dict[Value, Value] = {}
    for n in g.nodes:
        if remap:
            n.inputs = [remap.get(v, v) for v in n.inputs]
        if n.op.name == "_const":
            const_of[n.outputs[0]] = n.attrs["value"]
            new_nodes.append(n)
            continue
        foldable = (not n.op.is_random and not n.op.updates_aux and not n.op.mutate_inputs
                    and n.inputs and all(v in const_of for v in n.inputs))
        if n.op.shape_only and all(v.type.shape_known and v.type.dtype for v in n.inputs):
            values = n.op.compute(n.attrs, _shape_stand_ins(n.inputs), ComputeContext())
            values = values[:len(n.outputs)]
        elif foldable:
            try:
                values = n.op.compute(n.attrs, [const_of[v] for v in n.inputs], ComputeContext())
            except MXNetError as e:
                raise MXNetError(f"constant folding: {describe_node(n.name, n.op)}: {e}") from None
            values = values[:len(n.outputs)]
        else:
            new_nodes.append(n)
            continue
        if sum(np.asarray(v).nbytes for v in values) > max_bytes:
            new_nodes.append(n)
            continue
        for out, val in zip(n.outputs, values):
            c = const_node(names, np.asarray(val), base=f"{n.name}_folded")
            const_of[c.outputs[0]] = c.attrs["value"]
            new_nodes.append(c)
            remap[out] = c.outputs[0]
        folded += 1
    g.nodes = new_nodes
    g.outputs = [remap.get(v, v) for v in g.outputs]
    return g, {"nodes_folded": folded}
