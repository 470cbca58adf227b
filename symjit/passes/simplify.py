"""Algebraic simplification: small local pattern rewrites, applied to a fixpoint.

Each rule looks at one node (and sometimes its producer) and either returns a Value that
already computes the node's result (the node is bypassed) or a replacement node. Rules:
  * x*1, x/1, x+0, x-0, x**1 (the op's `neutral_scalar`), Cast to the same dtype, a `reshape_only` op (Reshape, Flatten,
    _copy, ...) or a `broadcast_only` op (broadcast_to, ...) to the same shape -> x
  * a `gradient_barrier` op (BlockGrad/stop_gradient) -> x in inference graphs (it only
    matters to autodiff)
  * x - x -> zeros_like(x);  negative(negative(x)) -> x
  * a chain of one-input `reshape_only` ops -> one Reshape (or x);
    transpose(transpose(x)) -> one transpose (or x)
  * x**2, x**3, x**4 -> products; x**0.5 -> sqrt(x); x**-1 -> reciprocal(x)
"""
from __future__ import annotations

from typing import Callable

from ..ir.graph import Graph, Node, Value
from ..ops import scalar as S
from .rewrite import NameSource, make_node, replace_uses

Rule = Callable[[Node, dict, NameSource, bool], "Value | Node | None"]


def _same_type(a: Value, b: Value) -> bool:
    return a.type.shape_known and a.type.shape == b.type.shape and a.type.dtype == b.type.dtype


def rule_neutral(n: Node, producers, names, training):
    if n.op.neutral_scalar is not None and n.attrs.get("scalar") == n.op.neutral_scalar:
        return n.inputs[0]
    if n.op.gradient_barrier:
        return None if training else n.inputs[0]
    if n.op.name == "Cast" and n.inputs[0].type.dtype == n.attrs["dtype"]:
        return n.inputs[0]
    if (n.op.reshape_only or n.op.broadcast_only) and _same_type(n.inputs[0], n.outputs[0]):
        return n.inputs[0]
    return None


def rule_self_subtract(n: Node, producers, names, training):
    if n.op.name in ("elemwise_sub", "broadcast_sub") and n.inputs[0] is n.inputs[1]:
        return make_node(names, "zeros_like", [n.inputs[0]], base=n.name)
    return None


def rule_double_negation(n: Node, producers, names, training):
    def is_neg(node):
        return node is not None and (node.op.name == "negative" or (
            node.op.name == "_mul_scalar" and node.attrs["scalar"] == -1.0))
    if is_neg(n):
        p = producers.get(n.inputs[0])
        if p is not None and is_neg(p[0]):
            return p[0].inputs[0]
    return None


def _single_reshape(n: Node) -> bool:
    """A one-input reshape-only op that passes gradients (BlockGrad is not merged away)."""
    return n.op.reshape_only and not n.op.gradient_barrier and len(n.inputs) == 1


def rule_reshape_chain(n: Node, producers, names, training):
    if _single_reshape(n) and n.outputs[0].type.shape_known:
        p = producers.get(n.inputs[0])
        if p is not None and _single_reshape(p[0]):
            src = p[0].inputs[0]
            if src.type.shape == n.outputs[0].type.shape:
                return src
            return make_node(names, "Reshape", [src], {"shape": n.outputs[0].type.shape}, base=n.name)
    return None


def _perm(n: Node) -> tuple:
    axes = n.attrs.get("axes") or ()
    nd = len(n.inputs[0].type.shape)
    return tuple(a % nd for a in axes) if axes else tuple(reversed(range(nd)))


def rule_transpose_chain(n: Node, producers, names, training):
    if n.op.name != "transpose" or n.inputs[0].type.shape is None:
        return None
    if _perm(n) == tuple(range(len(n.inputs[0].type.shape))):
        return n.inputs[0]
    p = producers.get(n.inputs[0])
    if p is None or p[0].op.name != "transpose" or p[0].inputs[0].type.shape is None:
        return None
    inner, outer = _perm(p[0]), _perm(n)
    composed = tuple(inner[a] for a in outer)
    src = p[0].inputs[0]
    if composed == tuple(range(len(composed))):
        return src
    return make_node(names, "transpose", [src], {"axes": composed}, base=n.name)


def rule_small_power(n: Node, producers, names, training):
    if n.op.name != "_power_scalar":
        return None
    k = n.attrs["scalar"]
    x = S.Input(0)
    if k == 0.5:
        return make_node(names, "sqrt", n.inputs, base=n.name)
    if k == -1.0:
        return make_node(names, "reciprocal", n.inputs, base=n.name)
    if k in (2.0, 3.0, 4.0):
        expr = x * x if k == 2.0 else x * x * x if k == 3.0 else (x * x) * (x * x)
        return make_node(names, "_elemwise_expr", n.inputs, {"expr": expr, "num_args": 1}, base=n.name)
    return None


RULES: list[Rule] = [rule_neutral, rule_self_subtract, rule_double_negation, rule_reshape_chain,
                     rule_transpose_chain, rule_small_power]


def simplify(g: Graph, training: bool = False, rules: list[Rule] | None = None) -> tuple[Graph, dict]:
    """Apply the rewrite rules until none fires (see the module docstring).

    Guarantee: every graph output keeps its value, shape and dtype; nodes made unused are left
    for DCE. `training=True` keeps BlockGrad (autodiff still needs it)."""
    g = g.copy()
    names = NameSource(g)
    fired: dict[str, int] = {}
    for _ in range(len(g.nodes) + 1):
        changed = False
        producers = {v: (n, i) for n in g.nodes for i, v in enumerate(n.outputs)}
        new_nodes: list[Node] = []
        mapping: dict[Value, Value] = {}
        for n in g.nodes:
            n.inputs = [mapping.get(v, v) for v in n.inputs]
            result = None
            for rule in rules or RULES:
                result = rule(n, producers, names, training)
                if result is not None:
                    fired[rule.__name__] = fired.get(rule.__name__, 0) + 1
                    break
            if result is None:
                new_nodes.append(n)
                continue
            changed = True
            if isinstance(result, Value):
                mapping[n.outputs[0]] = result
                new_nodes.append(n)  # kept for other outputs' readers; DCE removes it if dead
            else:
                mapping[n.outputs[0]] = result.outputs[0]
                new_nodes.append(result)
                new_nodes.append(n)
        g.nodes = new_nodes
        replace_uses(g, mapping)
        if not changed:
            break
        g = _drop_bypassed(g, mapping)
    return g, {"rewrites": sum(fired.values()), **{f"rule:{k[5:]}": v for k, v in fired.items()}}


def _drop_bypassed(g: Graph, mapping: dict) -> Graph:
    """Remove nodes whose only output was redirected and is no longer read."""
    read = {v for n in g.nodes for v in n.inputs} | set(g.outputs)
    g.nodes = [n for n in g.nodes if not (len(n.outputs) == 1 and n.outputs[0] in mapping
                                         and n.outputs[0] not in read)]
    return g
