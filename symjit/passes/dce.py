"""Dead-code elimination."""
from __future__ import annotations

from ..ir.graph import Graph


def _has_effects(node, training: bool) -> bool:
    """Nodes that write state are kept even when unused: optimizer updates always, aux
    updates (BatchNorm's moving statistics) in training graphs."""
    return bool(node.op.mutate_inputs or (training and node.op.updates_aux))


def eliminate_dead_code(g: Graph, training: bool = False) -> tuple[Graph, dict]:
    """Remove nodes none of whose outputs reach a graph output (stateful nodes are kept).

    Guarantee: graph outputs (and, with `training`, aux-state updates) are computed exactly
    as before; the node count never grows; graph inputs are kept even when unused (the
    graph's signature does not change)."""
    g = g.copy()
    live = set(g.outputs)
    kept = []
    for n in reversed(g.nodes):
        if _has_effects(n, training) or any(v in live for v in n.outputs):
            kept.append(n)
            live.update(n.inputs)
    removed = len(g.nodes) - len(kept)
    g.nodes = list(reversed(kept))
    return g, {"nodes_removed": removed}
