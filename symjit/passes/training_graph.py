"""The joint training graph: forward and backward as one graph, for whole-step compilation.

`autodiff` builds the backward as a separate graph reading saved forward values; here the
two are stitched: the backward's saved inputs become the forward Values themselves, so the
memory planner sees the true lifetimes (an activation lives from its forward step to its
last backward use) and fusion can cross the boundary.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from ..ir.graph import Graph
from .autodiff import autodiff
from .rewrite import replace_uses


def build_training_graph(g: Graph, wrt: Sequence | None = None,
                         grad_req: str | Sequence[str] | Mapping[str, str] = "write") -> tuple[Graph, dict]:
    """One graph computing g's outputs and the gradients of `wrt`.

    Inputs: g's arguments, then one head gradient per output (and `<x>_grad_in` for grad_req
    'add'); g's aux states. Outputs: g's outputs, then the gradients in `wrt` order.
    Guarantee: the outputs equal running g and then its autodiff backward graph."""
    fwd = g.copy()
    if wrt is not None:  # the copy has fresh Values: refer to the inputs by name
        wrt = [w if isinstance(w, str) else w.name for w in wrt]
    bwd, stats = autodiff(fwd, wrt, grad_req)
    saved = dict((b, f) for f, b in stats.saved)
    bwd_inputs = [v for v in bwd.args if v not in saved]
    joint = Graph(list(fwd.args) + bwd_inputs, list(fwd.aux), list(fwd.nodes) + list(bwd.nodes),
                  list(fwd.outputs) + list(bwd.outputs), f"{g.name}_training", dict(fwd.input_meta))
    replace_uses(joint, saved)
    taken = {v.name for v in joint.values()}
    if len(taken) != sum(1 for _ in joint.values()):
        _rename_duplicates(joint)
    return joint, {"forward_nodes": len(fwd.nodes), "backward_nodes": len(bwd.nodes),
                   "saved_values": len(stats.saved)}


def _rename_duplicates(g: Graph) -> None:
    """Backward node names may repeat forward ones; give every value a unique name."""
    seen: set[str] = set()
    for v in g.values():
        base, k = v.name, 1
        while v.name in seen:
            v.name = f"{base}_{k}"
            k += 1
        seen.add(v.name)
    seen_nodes: set[str] = set()
    for n in g.nodes:
        base, k = n.name, 1
        while n.name in seen_nodes:
            n.name = f"{base}_{k}"
            k += 1
        seen_nodes.add(n.name)
