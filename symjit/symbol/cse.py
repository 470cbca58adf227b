"""Common-subexpression elimination on a Symbol (MXNet's `MXNET_ELIMINATE_COMMON_EXPR` graph
pass, what `Executor.get_optimized_symbol()` shows).

Two op nodes are merged when they apply the same op with the same attributes to the same
input entries; random ops never are. Variables are kept as they are. When merging makes two
of the symbol's outputs the same entry, the repeat is isolated by a `_copy` node, as MXNet
does, so every output stays a distinct array.
"""
from __future__ import annotations

from .symbol import Symbol, SymNode, create_op_symbol, topo_nodes

__all__ = ["eliminate_common_expr"]


def eliminate_common_expr(sym: Symbol) -> Symbol:
    """A Symbol computing the same outputs with repeated subexpressions computed once."""
    canonical: dict[int, SymNode] = {}     # id(original node) -> node of the result
    seen: dict[tuple, SymNode] = {}
    for node in topo_nodes(sym._outputs):
        if node.is_variable:
            canonical[id(node)] = node
            continue
        inputs = [(canonical[id(n)], i) for n, i in node.inputs]
        key = (node.op.name, tuple(sorted(node.attrs.items())), tuple((id(n), i) for n, i in inputs))
        if not node.op.is_random and key in seen:
            canonical[id(node)] = seen[key]
            continue
        new = SymNode(node.op, node.name, node.attrs, inputs, node._parsed)
        canonical[id(node)] = new
        if not node.op.is_random:
            seen[key] = new
    heads, used = [], set()
    for node, i in sym._outputs:
        entry = (canonical[id(node)], i)
        if (id(entry[0]), i) in used:
            copy = create_op_symbol("_copy", [Symbol([entry])], {}, name=f"{node.name}_copy{len(heads)}")
            entry = copy._outputs[0]
        used.add((id(entry[0]), entry[1]))
        heads.append(entry)
    return Symbol(heads)
