"""`autograd.get_symbol`: the recorded computation behind an NDArray, as a Symbol.

Walks the autograd tape from the array back to its marked variables. Names follow MXNet's
imperative runtime: each recorded op becomes a node `node_<k>` carrying the op's non-default
attributes (in MXNet string form); each marked variable becomes a Variable `var<k>` and each
recorded input that needs no gradient (a constant) `null<k>`, the two sharing one counter.
MXNet numbers them with process-wide counters at recording time; here they are numbered per
call, in the order the tape is walked (inputs before users), so the result is deterministic.
A node whose backward function offers a `symbolic_form()` -> (template Symbol, its input
variable names, the input arrays) is written as a copy of the template's op nodes over those
inputs (a hybridized Gluon block's call: its graph's ops when MXNet would have inlined it, else
one `_CachedOp` node); a node recorded by a custom `autograd.Function` has no registered op and
cannot be expressed as a Symbol.
"""
from __future__ import annotations

from ..base import MXNetError
from .symbol import Symbol, SymNode, attr_string, topo_nodes

__all__ = ["symbol_from_tape"]


def _graph_form(tnode):
    """(template Symbol, its input variable names, the input arrays) of a tape node recorded
    with a symbolic form (`backward_fn.symbolic_form()`), else None."""
    form = getattr(tnode.backward_fn, "symbolic_form", None)
    return form() if form is not None else None


def _tape_inputs(tnode) -> list:
    form = _graph_form(tnode)
    return list(form[2]) if form is not None else list(tnode.inputs)


def _op_attrs(op, attrs) -> dict:
    """The attributes that differ from the op's defaults, in MXNet string form."""
    out = {}
    for k, v in attrs.items():
        p = op.params.get(k)
        if p is not None and v is not None and v != p.default:
            out[k] = attr_string(v)
    return out


def _expand(template: Symbol, feeds: dict, next_name) -> list:
    """Copies of the op nodes of `template` (named by `next_name()`), its variables replaced by
    the entries `feeds[name]`; returns the entries of its outputs."""
    clones: dict[int, SymNode] = {}

    def entry(node, i):
        return feeds[node.name] if node.is_variable else (clones[id(node)], i)
    for node in topo_nodes(template._outputs):
        if not node.is_variable:
            clones[id(node)] = SymNode(node.op, next_name(), _op_attrs(node.op, node.parsed),
                                       [entry(c, i) for c, i in node.inputs], None)
    return [entry(n, i) for n, i in template._outputs]


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
        for inp in reversed(_tape_inputs(tnode)):
            if inp._ag is not None and id(inp._ag.node) not in seen:
                stack.append((inp._ag.node, False))
    outputs: dict[int, list] = {}     # tape node -> the graph entries of its outputs
    counters = {"var": 0, "op": 0}

    def variable(prefix: str):
        node = SymNode(None, f"{prefix}{counters['var']}")
        counters["var"] += 1
        return node, 0

    def next_name() -> str:
        counters["op"] += 1
        return f"node_{counters['op'] - 1}"

    def feed(inp):
        return variable("null") if inp._ag is None else outputs[id(inp._ag.node)][inp._ag.index]
    for tnode in order:
        form = _graph_form(tnode)
        if form is not None:
            template, names, arrays = form
            feeds = {name: feed(a) for name, a in zip(names, arrays)}
            outputs[id(tnode)] = _expand(template, feeds, next_name)
            continue
        if tnode.op is None:
            if tnode.backward_fn is not None:
                raise MXNetError("get_symbol: the graph contains a custom autograd.Function, which has "
                                 "no symbolic form")
            outputs[id(tnode)] = [variable("var")]
            continue
        inputs = [feed(inp) for inp in tnode.inputs]
        node = SymNode(tnode.op, next_name(), _op_attrs(tnode.op, tnode.attrs), inputs, None)
        outputs[id(tnode)] = [(node, i) for i in range(max(len(tnode.outputs), node.num_outputs()))]
    return Symbol([outputs[id(entry.node)][entry.index]])
