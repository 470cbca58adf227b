"""`autograd.get_symbol`: the recorded computation behind an NDArray, as a Symbol.

Walks the autograd tape from the array back to its marked variables. Each recorded op becomes
a Symbol node with the op's attributes (in MXNet string form) and an automatic name; each
variable reached becomes a Variable `var0`, `var1`, ... in order of first use. A node recorded
by a custom `autograd.Function` has no registered op and cannot be expressed as a Symbol.
"""
from __future__ import annotations

from ..base import MXNetError
from .naming import NameManager
from .symbol import Symbol, SymNode, attr_string, topo_nodes  # noqa: F401

__all__ = ["symbol_from_tape"]


def symbol_from_tape(x) -> Symbol:
    """The Symbol computing `x` from the variables it was recorded from."""
    entry = getattr(x, "_ag", None)
    if entry is None:
        raise MXNetError("get_symbol: the array is not part of a recorded graph; compute it inside "
                         "autograd.record() from arrays with attach_grad()")
    built: dict[int, SymNode] = {}
    n_vars = [0]

    def node_for(tnode) -> SymNode:
        key = id(tnode)
        if key in built:
            return built[key]
        if tnode.op is None:
            if tnode.backward_fn is not None:
                raise MXNetError("get_symbol: the graph contains a custom autograd.Function, which has no "
                                 "symbolic form")
            s = SymNode(None, f"var{n_vars[0]}")
            n_vars[0] += 1
            built[key] = s
            return s
        raise KeyError(key)

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
        for inp in reversed(tnode.inputs):
            if inp._ag is not None and id(inp._ag.node) not in seen:
                stack.append((inp._ag.node, False))
    const = [0]
    for tnode in order:
        if tnode.op is None:
            node_for(tnode)
            continue
        inputs = []
        for inp in tnode.inputs:
            if inp._ag is None:
                v = SymNode(None, f"const{const[0]}")
                const[0] += 1
                inputs.append((v, 0))
            else:
                inputs.append((built[id(inp._ag.node)] if id(inp._ag.node) in built
                               else node_for(inp._ag.node), inp._ag.index))
        attrs = {}
        for k, v in tnode.attrs.items():
            p = tnode.op.params.get(k)
            if p is not None and v != p.default and v is not None:
                attrs[k] = attr_string(v)
        name = NameManager.current.get(None, tnode.op.name.lower())
        built[id(tnode)] = SymNode(tnode.op, name, attrs, inputs, None)
    return Symbol([(built[id(entry.node)], entry.index)])
