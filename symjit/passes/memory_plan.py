"""Memory planning: every intermediate value gets an offset in one arena.

Liveness intervals come from the node order (the schedule): a value lives from the step
that produces it until the last step that reads it. Values that share a buffer in place
(`g.annotations['inplace']`) form one buffer whose interval is the union. Buffers are packed
by `arena.pack` (greedy by size). Graph inputs, constants and graph outputs are not in the
arena, so they are never overwritten.

Concatenations in place (`g.annotations['concat_aliases']`, passes/concat_in_place.py: part ->
(concatenation, byte offset)): each part is placed at its slab inside the concatenation's
buffer, nested ones composing; the buffer then lives from its first part's birth to its last
reader.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..base import MXNetError
from ..ir.graph import Graph, Value
from .arena import Interval, lower_bound, pack, validate
from .inplace import nbytes


@dataclass
class MemoryPlan:
    """Arena offsets of intermediate values, and the figures the planner reports."""
    offsets: dict = field(default_factory=dict)   # Value -> byte offset in the arena
    arena_bytes: int = 0
    naive_bytes: int = 0      # every intermediate in its own buffer
    lower_bound: int = 0      # largest total size of simultaneously live intermediates
    intervals: list = field(default_factory=list)  # the per-value intervals (for pictures, checks)

    def summary(self) -> str:
        ratio = self.arena_bytes / self.lower_bound if self.lower_bound else 1.0
        frac = self.arena_bytes / self.naive_bytes if self.naive_bytes else 1.0
        return (f"arena {self.arena_bytes} B, naive {self.naive_bytes} B ({frac:.1%}), "
                f"lower bound {self.lower_bound} B (x{ratio:.3f})")


def intermediates(g: Graph) -> list[Value]:
    """Values the arena holds: node outputs that are neither graph outputs nor constants."""
    outs = set(g.outputs)
    return [v for n in g.nodes if n.op.name != "_const" for v in n.outputs if v not in outs]


def naive_bytes(g: Graph, alignment: int = 64) -> int:
    """Bytes if every intermediate value of `g` had its own buffer (values of unknown type
    are not counted)."""
    return sum(-(-nbytes(v) // alignment) * alignment for v in intermediates(g) if v.type.known)


def liveness(g: Graph) -> dict[Value, tuple[int, int]]:
    """Value -> (first step, one past the last step) over the node order."""
    start: dict[Value, int] = {}
    end: dict[Value, int] = {}
    for i, n in enumerate(g.nodes):
        for v in n.outputs:
            start[v] = i
            end[v] = i + 1
        for v in n.inputs:
            if v in start:
                end[v] = max(end[v], i + 1)
    return {v: (start[v], end[v]) for v in start}


def plan_memory(g: Graph, alignment: int = 64) -> tuple[Graph, dict]:
    """Compute the MemoryPlan, stored as `g.annotations['memory_plan']`.

    Guarantee: two values live at the same step never overlap in the arena unless they are
    an in-place pair (one dies where the other is born); checked by `arena.validate` on the
    buffer intervals. Raises MXNetError if a value's shape or dtype is unknown."""
    inplace = dict(g.annotations.get("inplace", {}))
    aliases = dict(g.annotations.get("concat_aliases", {}))
    g = g.copy()
    # the copy has fresh Values: carry the in-place pairs over by name
    by_name = {v.name: v for v in g.values()}
    inplace = {by_name[o.name]: by_name[i.name] for o, i in inplace.items()}
    values = intermediates(g)
    for v in values:
        if not v.type.known:
            raise MXNetError(f"memory planning needs known types; value %{v.name} is {v.type}")
    live = liveness(g)
    root: dict[Value, Value] = {}

    def find(v: Value) -> Value:
        while v in root:
            v = root[v]
        return v
    member = set(values)
    for out, src in inplace.items():
        if out in member and src in member:
            root[out] = find(src)
    alias = {by_name[p.name]: (by_name[y.name], off)
             for p, (y, off) in aliases.items()}

    def home(v: Value) -> tuple[Value, int]:
        """(the buffer's root value, byte offset of v inside it)"""
        off = 0
        while v in alias:
            v, o = alias[v]
            off += o
        return find(v), off
    buffers: dict[Value, list] = {}
    for v in values:
        r, off = home(v)
        s, e = live[v]
        if r in buffers:
            b = buffers[r]
            buffers[r] = [min(b[0], s), max(b[1], e), max(b[2], off + nbytes(v))]
        else:
            buffers[r] = [s, e, off + nbytes(v)]
    buf_intervals = [Interval(r.name, size, s, e) for r, (s, e, size) in buffers.items()]
    placement = pack(buf_intervals, alignment)
    validate(buf_intervals, placement, alignment)
    value_intervals = [Interval(v.name, nbytes(v), *live[v]) for v in values]
    homes = {v: home(v) for v in values}
    plan = MemoryPlan({v: placement.offsets[r.name] + off for v, (r, off) in homes.items()}, placement.total,
                      sum(-(-nbytes(v) // alignment) * alignment for v in values),
                      lower_bound(value_intervals, alignment), value_intervals)
    g.annotations["inplace"] = inplace
    g.annotations["concat_aliases"] = alias
    g.annotations["memory_plan"] = plan
    return g, {"arena_bytes": plan.arena_bytes, "naive_bytes": plan.naive_bytes,
               "lower_bound_bytes": plan.lower_bound}
