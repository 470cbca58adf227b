"""Reverse-mode automatic differentiation: the backward graph of a forward graph.

`autodiff(g, wrt, grad_req)` walks `g`'s nodes in reverse topological order and applies each
op's gradient rule (`Op.grad`) through an `Emitter` whose `apply()` adds IR nodes, so the
backward computation is itself an IR graph built from registered ops (optimisable and
compilable like any forward graph).

The backward graph's inputs (its `args`), described by the returned `AutodiffStats`:
  * `saved`: the forward values the gradient rules read (inputs, activations, hidden outputs
    such as BatchNorm's batch statistics) — only those, the rest of the forward is not kept;
    each pairs a forward Value with the backward input carrying it (same name);
  * `head_grads`: one gradient input per forward output (`<output>_head_grad`);
  * `grad_inputs`: for each gradient requested with grad_req 'add', the current gradient
    buffer (`<input>_grad_in`); the corresponding output is `buffer + gradient`.
Its outputs are the gradients of the `wrt` inputs whose grad_req is not 'null', in `wrt`
order (`stats.grad_outputs` names them). An input that no output depends on gets a zero
gradient ('write') or its buffer unchanged ('add').

Guarantees: the backward graph verifies; with head gradients h_j it computes
d(sum_j <out_j, h_j>)/d(wrt_i), contributions of shared values (fan-out) summed; nodes that no
gradient depends on and forward values no rule reads are not in it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..base import MXNetError
from ..ir.builder import GraphBuilder, describe_node
from ..ir.graph import Graph, Value
from ..ops.registry import Emitter

__all__ = ["autodiff", "AutodiffStats", "GRAD_REQS"]

GRAD_REQS = ("write", "add", "null")


@dataclass
class AutodiffStats:
    """The backward graph's interface (see the module docstring) and what the pass did."""
    saved: list = field(default_factory=list)        # [(forward Value, backward input Value)]
    head_grads: list = field(default_factory=list)   # [backward input Value], one per forward output
    grad_inputs: list = field(default_factory=list)  # [(forward input Value, backward input Value)] for 'add'
    grad_outputs: list = field(default_factory=list)  # [(forward input Value, grad_req)] in output order
    nodes_differentiated: int = 0
    backward_nodes: int = 0
    nodes_pruned: int = 0


class _Fwd:
    """A forward value as seen by gradient rules: typed, turned into a backward input on use."""
    __slots__ = ("value",)

    def __init__(self, value: Value):
        self.value = value

    @property
    def shape(self):
        return self.value.type.shape

    @property
    def dtype(self):
        return self.value.type.dtype

    @property
    def name(self):
        return self.value.name


def _normalize_reqs(g: Graph, wrt, grad_req) -> list[tuple[Value, str]]:
    if wrt is None:
        wrt = list(g.args)
    by_name = {v.name: v for v in g.inputs}
    values = []
    for w in wrt:
        v = by_name.get(w) if isinstance(w, str) else w
        if v is None or v not in g.inputs:
            raise MXNetError(f"autodiff: {w!r} is not an input of graph {g.name!r}")
        values.append(v)
    if isinstance(grad_req, str):
        reqs = [grad_req] * len(values)
    elif isinstance(grad_req, Mapping):
        reqs = [grad_req.get(v.name, "null") for v in values]
    else:
        reqs = list(grad_req)
        if len(reqs) != len(values):
            raise MXNetError(f"autodiff: got {len(reqs)} grad_req entries for {len(values)} inputs")
    for v, r in zip(values, reqs):
        if r not in GRAD_REQS:
            raise MXNetError(f"autodiff: grad_req for {v.name!r} must be one of {GRAD_REQS}, got {r!r}")
    return list(zip(values, reqs))


def autodiff(g: Graph, wrt: Sequence | None = None,
             grad_req: str | Sequence[str] | Mapping[str, str] = "write") -> tuple[Graph, AutodiffStats]:
    """Build the backward graph of `g` for inputs `wrt` (default: every argument)."""
    pairs = _normalize_reqs(g, wrt, grad_req)
    active = [v for v, r in pairs if r != "null"]
    b = GraphBuilder(name=f"{g.name}_backward")
    stats = AutodiffStats()
    saved: dict[Value, Value] = {}

    def resolve(x) -> Value:
        if isinstance(x, _Fwd):
            if x.value not in saved:
                saved[x.value] = b.add_input(x.value.name, x.value.type)
            return saved[x.value]
        if isinstance(x, Value):
            return x
        raise MXNetError(f"autodiff: a gradient rule produced {type(x).__name__} {x!r}, expected a graph value")

    current = {"name": "grad"}

    # gradients known to be zero (a rule's `zeros_like`, e.g. BlockGrad's): not propagated, so
    # nothing upstream of them is differentiated (MXNet's zero-gradient propagation)
    zero_grads: set = set()

    def apply(op_name, inputs, attrs):
        out = b.add_node(op_name, [resolve(x) for x in inputs], attrs, name=f"{current['name']}_backward")
        if op_name == "zeros_like":
            zero_grads.update(out)
        return out

    F = Emitter(apply)
    heads = [b.add_input(f"{v.name}_head_grad", v.type) for v in g.outputs]
    stats.head_grads = list(heads)
    grad_in = {v: b.add_input(f"{v.name}_grad_in", v.type) for v, r in pairs if r == "add"}
    stats.grad_inputs = list(grad_in.items())

    # values that depend on an active input: only their producers need gradient rules
    needs = set(active)
    for n in g.nodes:
        if any(v in needs for v in n.inputs):
            needs.update(n.outputs)

    contribs: dict[Value, list[Value]] = {}
    for v, h in zip(g.outputs, heads):
        if v in needs:
            contribs.setdefault(v, []).append(h)

    def total(v: Value):
        parts = contribs.get(v)
        if not parts:
            return None
        acc = parts[0]
        for p in parts[1:]:
            acc = F.apply("elemwise_add", [acc, p])[0]
        contribs[v] = [acc]
        return acc

    for n in reversed(g.nodes):
        if not any(v in needs for v in n.inputs) or not any(contribs.get(v) for v in n.outputs):
            continue
        if not n.op.differentiable:
            continue
        current["name"] = n.name
        ograds = []
        for v in n.outputs:
            t = total(v)
            ograds.append(t if t is not None else resolve(F.apply("zeros_like", [_Fwd(v)])[0]))
        try:
            in_grads = n.op.grad(F, n.attrs, [_Fwd(v) for v in n.inputs], [_Fwd(v) for v in n.outputs], ograds)
        except MXNetError as e:
            raise MXNetError(f"autodiff: {describe_node(n.name, n.op)}: {e}") from None
        if len(in_grads) != len(n.inputs):
            raise MXNetError(f"autodiff: {describe_node(n.name, n.op)}: gradient rule returned "
                             f"{len(in_grads)} gradients for {len(n.inputs)} inputs")
        stats.nodes_differentiated += 1
        for x, gx in zip(n.inputs, in_grads):
            if gx is not None and x in needs:
                gx = resolve(gx)
                if gx not in zero_grads:
                    contribs.setdefault(x, []).append(gx)

    outputs = []
    for v, req in pairs:
        if req == "null":
            continue
        current["name"] = v.name
        gv = total(v)
        if req == "add":
            out = grad_in[v] if gv is None else F.apply("elemwise_add", [grad_in[v], gv])[0]
        else:
            out = gv if gv is not None else F.apply("zeros_like", [_Fwd(v)])[0]
        outputs.append(out)
        stats.grad_outputs.append((v, req))
    bwd = _prune(b.build(outputs), stats, saved)
    stats.backward_nodes = len(bwd.nodes)
    return bwd, stats


def _prune(g: Graph, stats: AutodiffStats, saved: dict) -> Graph:
    """Drop nodes no output depends on and saved inputs nothing reads (interface inputs stay)."""
    live = set(g.outputs)
    kept = []
    for n in reversed(g.nodes):
        if any(v in live for v in n.outputs):
            kept.append(n)
            live.update(n.inputs)
    kept.reverse()
    stats.nodes_pruned = len(g.nodes) - len(kept)
    interface = set(stats.head_grads) | {v for _, v in stats.grad_inputs}
    args = [v for v in g.args if v in live or v in interface]
    stats.saved = [(f, v) for f, v in saved.items() if v in live]
    return Graph(args, list(g.aux), kept, list(g.outputs), g.name, dict(g.input_meta))
