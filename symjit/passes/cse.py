"""Common-subexpression elimination."""
from __future__ import annotations

from ..ir.graph import Graph
from .rewrite import attrs_key, replace_uses


def eliminate_common_subexpressions(g: Graph) -> tuple[Graph, dict]:
    """Merge nodes with the same op, attributes and inputs (structural hashing, in one
    topological sweep, so chains of duplicates collapse fully).

    Never merges random ops, ops that update state, or constants (equal constants are rare
    and comparing them costs a pass over their bytes). Guarantee: the output graph computes
    the same values; the node count never grows."""
    g = g.copy()
    seen: dict[tuple, object] = {}
    mapping = {}
    kept = []
    for n in g.nodes:
        n.inputs = [mapping.get(v, v) for v in n.inputs]
        if n.op.is_random or n.op.updates_aux or n.op.mutate_inputs or n.op.name == "_const":
            kept.append(n)
            continue
        key = (n.op.name, attrs_key(n.attrs), tuple(id(v) for v in n.inputs))
        twin = seen.get(key)
        if twin is None:
            seen[key] = n
            kept.append(n)
        else:
            mapping.update(zip(n.outputs, twin.outputs))
    merged = len(g.nodes) - len(kept)
    g.nodes = kept
    replace_uses(g, mapping)
    return g, {"nodes_merged": merged}
