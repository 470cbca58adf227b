"""`autograd.get_symbol`: the recorded computation behind an NDArray, as a Symbol.

Walks the autograd tape from the array back to its marked variables. Names follow MXNet's
imperative runtime: each recorded op becomes a node `node_<k>` carrying the op's non-default
attributes (in MXNet string form); each marked variable becomes a Variable `var<k>` and each
recorded input that needs no gradient (a constant) `null<k>`, the two sharing one counter.
MXNet numbers them with process-wide counters at recording time; here they are numbered per
call, in the order the tape is walked (inputs before users), so the result is deterministic.
A node whose backward function offers a `symbolic_form()` (a hybridized Gluon block's call:
one `_CachedOp` node over all of the block's inputs) is written in that form; a node recorded by
a custom `autograd.Function` has no registered op and cannot be expressed as a Symbol.
"""
from __future__ import annotations

from ..base import MXNetError
from ..ops import get_op
from .symbol import Symbol, SymNode, attr_string

__all__ = ["symbol_from_tape"]


def _as_op_node(tnode) -> tuple:
    """(op, attributes, inputs) of a recorded op node as a graph node; op None for variables
    and for custom Functions without a symbolic form."""
    form = getattr(tnode.backward_fn, "symbolic_form", None)
    if form is not None:
        op_name, attrs, inputs = form()
        return get_op(op_name), attrs, inputs
    return tnode.op, tnode.attrs, tnode.inputs


def symbol_from_tape(x) -> Symbol:
    """The Symbol computing `x` from the variables it was recorded from."""
    entry = getattr(x, "_ag", None)
    if entry is None:
        raise MXNetError("get_symbol: the array is not part of a recorded graph; compute it inside "
                         "autograd.record() from arrays with attach_grad()")
    # iterative post-order over the tape (inputs before users)
    order = []
    seen = set()
    stack = [(entry.node, False)]
    while stack:
        tnode, done = stack.pop()
        if done:
            order.append(tnode)
            continue
        if id(tnode) in seen:
            continue
        seen.add(id(tnode))
        stack.append((tnode, True))
        for inp in reversed(_as_op_node(tnode)[2]):
            if inp._ag is not None and id(inp._ag.node) not in seen:
                stack.append((inp._ag.node, False))
    built: dict[int, SymNode] = {}
    n_vars = n_ops = 0
    for tnode in order:
        op, op_attrs, op_inputs = _as_op_node(tnode)
        if op is None:
            if tnode.backward_fn is not None:
                raise MXNetError("get_symbol: the graph contains a custom autograd.Function, which has "
                                 "no symbolic form")
            built[id(tnode)] = SymNode(None, f"var{n_vars}")
            n_vars += 1
            continue
        inputs = []
        for inp in op_inputs:
            if inp._ag is None:
                inputs.append((SymNode(None, f"null{n_vars}"), 0))
                n_vars += 1
            else:
                inputs.append((built[id(inp._ag.node)], inp._ag.index))
        attrs = {}
        for k, v in op_attrs.items():
            p = op.params.get(k)
            if p is not None and v is not None and v != p.default:
                attrs[k] = attr_string(v)
        built[id(tnode)] = SymNode(op, f"node_{n_ops}", attrs, inputs, None)
        n_ops += 1
    return Symbol([(built[id(entry.node)], entry.index)])
