"""Elementwise fusion, and elementwise epilogues of GEMM and convolution.

Step 1 — groups: every elementwise node (a registry `Elementwise` op, or an already fused
node) whose inputs and output share one known dtype and whose output shape is known joins a
group; a producer's group merges into its consumer's group when both iterate over the same
output shape and the merge creates no cycle between groups (a value leaving the group and
coming back through an outside node). Each group becomes one `_fused_elemwise` node whose
expressions are the members' scalar expressions composed (`scalar.substitute`); a group's
outputs are the member values read outside it or returned by the graph. Inputs of smaller
(broadcast) shape stay inputs: they are read with stride 0, never materialised.

Step 2 — epilogues: a node of an `epilogue_host` op (ops/registry.py: FullyConnected,
Convolution, Deconvolution, dot, batch_dot, and `_backward_FullyConnected_data`, whose
input gradient takes the activation gradient of the layer before, dX * relu'(y)) whose only
reader is one fused group iterating over its output shape becomes `_with_epilogue` (the
group's expressions applied to the library op's result while it is in registers).

Guarantees: the graph computes the same outputs; the node list stays topologically sorted;
the pass is idempotent on its own output.
"""
from __future__ import annotations

import heapq
from collections import deque

from ..ir.graph import Graph, Node, Value
from ..ops import scalar as S
from ..ops.registry import Elementwise
from .rewrite import NameSource, make_node, replace_uses

#: largest fusion group: bounds expression depth (codegen and compile time stay linear)
MAX_GROUP_NODES = 64



def node_exprs(n: Node) -> list[S.Expr] | None:
    """The scalar expressions (over Input(i) = n.inputs[i]) of an elementwise node, else None."""
    if n.op.name == "_fused_elemwise":
        return list(n.attrs["exprs"])
    if isinstance(n.op, Elementwise):
        return [n.op.full_expr(n.attrs)]
    return None


def _is_candidate(n: Node) -> bool:
    if node_exprs(n) is None or len(n.outputs) == 0:
        return False
    out = n.outputs[0].type
    if not out.shape_known or out.dtype is None or out.dtype == "bool":
        return False
    if isinstance(n.op, Elementwise) and n.op.compute_dtype(n.attrs, [v.type.dtype for v in n.inputs]) != out.dtype:
        return False    # the group computes in its members' dtype
    return all(v.type.dtype == out.dtype for v in n.inputs + n.outputs) and \
        all(v.type.shape_known and v.type.shape == out.shape for v in n.outputs)


def _toposort(nodes: list[Node]) -> list[Node]:
    """Stable topological order (Kahn's algorithm, ties broken by the current order)."""
    producer = {v: n for n in nodes for v in n.outputs}
    indeg = {id(n): 0 for n in nodes}
    users: dict[int, list[Node]] = {id(n): [] for n in nodes}
    for n in nodes:
        deps = {id(producer[v]) for v in n.inputs if v in producer}
        indeg[id(n)] = len(deps)
        for d in deps:
            users[d].append(n)
    rank = {id(n): i for i, n in enumerate(nodes)}
    ready = [(rank[id(n)], id(n), n) for n in nodes if indeg[id(n)] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, _, n = heapq.heappop(ready)
        out.append(n)
        for u in users[id(n)]:
            indeg[id(u)] -= 1
            if indeg[id(u)] == 0:
                heapq.heappush(ready, (rank[id(u)], id(u), u))
    if len(out) != len(nodes):
        raise AssertionError("fusion produced a cyclic graph")
    return out


class _Groups:
    """Union of nodes into groups, with the reachability test that prevents cycles.

    Invariant: `succ[g]` is the set of other groups that read a value a member of g produces,
    and `pred[g]` the groups whose values g's members read; `merge` keeps both exact, so the
    cycle test walks group edges without rescanning members and readers (it had been a third
    of the fusion pass on DenseNet-121)."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes
        self.group = {id(n): i for i, n in enumerate(nodes)}
        self.members = {i: [n] for i, n in enumerate(nodes)}
        readers: dict[Value, list[Node]] = {}
        for n in nodes:
            for v in n.inputs:
                readers.setdefault(v, []).append(n)
        self.readers = readers
        self.succ: dict[int, set[int]] = {i: set() for i in range(len(nodes))}
        self.pred: dict[int, set[int]] = {i: set() for i in range(len(nodes))}
        for i, n in enumerate(nodes):
            for v in n.outputs:
                for r in readers.get(v, ()):
                    j = self.group[id(r)]
                    if j != i:
                        self.succ[i].add(j)
                        self.pred[j].add(i)

    def would_cycle(self, src: int, dst: int) -> bool:
        """True if some path src -> (other groups) -> dst exists: merging would close a loop."""
        frontier = deque(g for g in self.succ[src] if g != dst)
        seen = set(frontier)
        while frontier:
            g = frontier.popleft()
            for s in self.succ[g]:
                if s == dst:
                    return True
                if s not in seen and s != src:
                    seen.add(s)
                    frontier.append(s)
        return False

    def merge(self, src: int, dst: int) -> None:
        for m in self.members.pop(src):
            self.group[id(m)] = dst
            self.members[dst].append(m)
        succ, pred = self.succ.pop(src), self.pred.pop(src)
        for g in succ:
            self.pred[g].discard(src)
            if g != dst:
                self.pred[g].add(dst)
        for g in pred:
            self.succ[g].discard(src)
            if g != dst:
                self.succ[g].add(dst)
        self.succ[dst] |= succ - {dst}
        self.pred[dst] |= pred - {dst}


def _group_node(members: list[Node], order: dict, external_readers: set, graph_outputs: set,
                names: NameSource) -> tuple[Node, dict]:
    """Build the `_fused_elemwise` node of one group; returns it and old->new value mapping."""
    members = sorted(members, key=lambda m: order[id(m)])
    produced = {v for m in members for v in m.outputs}
    inputs: list[Value] = []
    index: dict[Value, int] = {}
    expr_of: dict[Value, S.Expr] = {}
    for m in members:
        sub = {}
        for i, v in enumerate(m.inputs):
            if v in produced:
                sub[i] = expr_of[v]
            else:
                if v not in index:
                    index[v] = len(inputs)
                    inputs.append(v)
                sub[i] = S.Input(index[v])
        for v, e in zip(m.outputs, node_exprs(m)):
            expr_of[v] = S.substitute(e, sub)
    outs = [v for m in members for v in m.outputs if v in external_readers or v in graph_outputs]
    if not outs:
        return None, {}
    dtype = members[-1].outputs[0].type.dtype
    base = members[-1].name if len(members) == 1 else f"fused_{members[0].name}"
    member_names = tuple(n for m in members for n in (m.attrs.get("members") or (m.name,)))
    node = make_node(names, "_fused_elemwise", inputs,
                     {"exprs": tuple(expr_of[v] for v in outs), "num_args": len(inputs), "dtype": dtype,
                      "members": member_names}, base=base)
    return node, dict(zip(outs, node.outputs))


def fuse_elementwise(g: Graph) -> tuple[Graph, dict]:
    """Step 1 of the module docstring."""
    g = g.copy()
    names = NameSource(g)
    nodes = list(g.nodes)
    order = {id(n): i for i, n in enumerate(nodes)}
    groups = _Groups(nodes)
    candidate = {id(n) for n in nodes if _is_candidate(n)}
    producer = {v: n for n in nodes for v in n.outputs}
    for n in nodes:
        if id(n) not in candidate:
            continue
        for v in n.inputs:
            p = producer.get(v)
            if p is None or id(p) not in candidate:
                continue
            if p.outputs[0].type.shape != n.outputs[0].type.shape:
                continue
            src, dst = groups.group[id(p)], groups.group[id(n)]
            if src == dst or len(groups.members[src]) + len(groups.members[dst]) > MAX_GROUP_NODES:
                continue
            if not groups.would_cycle(src, dst) and not groups.would_cycle(dst, src):
                groups.merge(src, dst)
    graph_outputs = set(g.outputs)
    mapping: dict[Value, Value] = {}
    new_nodes: list[Node] = []
    elementwise_in = 0
    fused_groups = 0
    done: set[int] = set()
    for n in nodes:
        gid = groups.group[id(n)]
        if id(n) not in candidate:
            new_nodes.append(n)
            continue
        if gid in done:
            continue
        done.add(gid)
        members = groups.members[gid]
        member_ids = {id(m) for m in members}
        # the members' outputs that a node outside the group reads (one look-up per reader)
        external = {v for m in members for v in m.outputs
                    if any(id(r) not in member_ids for r in groups.readers.get(v, ()))}
        fused, remap = _group_node(members, order, external, graph_outputs, names)
        if fused is None:  # nothing reads the group: it is dead code
            continue
        new_nodes.append(fused)
        mapping.update(remap)
        elementwise_in += len(members)
        fused_groups += 1
    for n in new_nodes:
        n.inputs = [mapping.get(v, v) for v in n.inputs]
    g.outputs = [mapping.get(v, v) for v in g.outputs]
    g.nodes = _toposort(new_nodes)
    return g, {"groups": fused_groups, "elementwise_nodes_fused": elementwise_in,
               "nodes_before": len(nodes), "nodes_after": len(g.nodes)}


def fuse_epilogues(g: Graph) -> tuple[Graph, dict]:
    """Step 2 of the module docstring."""
    g = g.copy()
    names = NameSource(g)
    readers: dict[Value, list[Node]] = {}
    for n in g.nodes:
        for v in n.inputs:
            readers.setdefault(v, []).append(n)
    graph_outputs = set(g.outputs)
    absorbed: set[int] = set()
    replacement: dict[int, Node] = {}
    mapping: dict[Value, Value] = {}
    count = 0
    for host in g.nodes:
        if not host.op.epilogue_host or len(host.outputs) != 1:
            continue
        y = host.outputs[0]
        rs = readers.get(y, [])
        if y in graph_outputs or len(rs) != 1 or rs[0].op.name != "_fused_elemwise":
            continue
        f = rs[0]
        if id(f) in replacement:  # a group absorbs at most one library op
            continue
        if f.outputs[0].type.shape != y.type.shape or f.attrs["dtype"] != y.type.dtype:
            continue
        if sum(1 for v in f.inputs if v is y) != 1:
            continue
        k = len(host.inputs)
        extra = [v for v in f.inputs if v is not y]
        remap = {}
        j = 0
        for i, v in enumerate(f.inputs):
            if v is y:
                remap[i] = S.Input(0)
            else:
                remap[i] = S.Input(1 + j)
                j += 1
        exprs = tuple(S.substitute(e, remap) for e in f.attrs["exprs"])  # simultaneous renaming
        node = make_node(names, "_with_epilogue", list(host.inputs) + extra,
                         {"inner": host.op.name, "inner_attrs": host.attrs, "exprs": exprs,
                          "num_inner": k, "num_args": k + len(extra),
                          "members": (host.name,) + tuple(f.attrs.get("members", ()))},
                         base=f"{host.name}_epilogue")
        absorbed.add(id(host))
        replacement[id(f)] = node
        mapping.update(zip(f.outputs, node.outputs))
        count += 1
    new_nodes = []
    for n in g.nodes:
        if id(n) in absorbed:
            continue
        new_nodes.append(replacement.get(id(n), n))
    g.nodes = new_nodes
    replace_uses(g, mapping)
    g.nodes = _toposort(g.nodes)
    return g, {"epilogues_fused": count}


def fuse(g: Graph) -> tuple[Graph, dict]:
    """Both steps: elementwise groups, then library-op epilogues."""
    g, s1 = fuse_elementwise(g)
    g, s2 = fuse_epilogues(g)
    return g, {**s1, **s2}
