"""Gradient probes: a copy of a symbol in which every operator input edge reads
`input + probe`, `probe` being a new zero variable. The gradient of the outputs with respect
to a probe is the gradient flowing back along that one edge: what MXNet's executor reports for
the outputs of an operator's backward node (the gradients w.r.t. each of its inputs), used by
monitors (`Executor.set_monitor_callback`)."""
from __future__ import annotations

from dataclasses import dataclass

from ..ops.registry import get_op
from .symbol import SymNode, Symbol, topo_nodes


@dataclass(frozen=True)
class Probe:
    """`variable`: the probe's variable name; `name`: the reported name
    (`<node>_backward_<input>`), in backward order (the last operator's inputs first)."""
    variable: str
    name: str


def probe_symbol(symbol: Symbol) -> tuple[Symbol, list[Probe]]:
    """(the probed copy of `symbol`, its probes). Auxiliary-state inputs get no probe (they
    have no gradient); variables of the original keep their nodes, so names are unchanged."""
    add = get_op("elemwise_add")
    clones: dict[int, SymNode] = {}
    probes: list[Probe] = []
    taken = set()
    for node in topo_nodes(symbol._outputs):
        if node.is_variable:
            clones[id(node)] = node
            taken.add(node.name)
            continue
        names = node.op.input_names(node.parsed)
        aux = set(node.aux_positions())
        inputs = []
        for j, (src, k) in enumerate(node.inputs):
            edge = (clones[id(src)], k)
            if j in aux:
                inputs.append(edge)
                continue
            in_name = names[j] if j < len(names) else f"in{j}"
            variable = f"{node.name}_{in_name}__probe{j}"
            while variable in taken:
                variable += "_"
            taken.add(variable)
            probe = SymNode(None, variable)
            inputs.append((SymNode(add, f"{variable}__add", {}, [edge, (probe, 0)]), 0))
            probes.append(Probe(variable, f"{node.name}_backward_{in_name}"))
        clones[id(node)] = SymNode(node.op, node.name, node.attrs, inputs)
    return Symbol([(clones[id(n)], i) for n, i in symbol._outputs]), probes[::-1]


@dataclass(frozen=True)
class MonitorEntry:
    """One array a forward monitor reports: `name` as MXNet's executor names it, and where the
    value is: output `index` of `node` (a variable's own value for a variable node)."""
    name: str
    node: SymNode
    index: int


def monitor_entries(symbol: Symbol, monitor_all: bool) -> list[MonitorEntry]:
    """What MXNet's executor reports to a monitor callback after a forward, in its order: per
    operator, in execution order, with `monitor_all` first each input (a variable input by its
    own name too, just before) as `<node>_<input name>` (`Op.monitor_input_names`), then every
    visible output as `get_internals` names it."""
    entries = []
    for node in topo_nodes(symbol._outputs):
        if node.is_variable:
            continue
        if monitor_all:
            names = node.op.monitor_input_names(node.parsed)
            for j, (src, k) in enumerate(node.inputs):
                if src.is_variable:
                    entries.append(MonitorEntry(src.name, src, 0))
                in_name = names[j] if j < len(names) else f"input{j}"
                entries.append(MonitorEntry(f"{node.name}_{in_name}", src, k))
        for k in range(node.op.num_visible_outputs(node.parsed)):
            entries.append(MonitorEntry(Symbol([(node, k)]).list_outputs()[0], node, k))
    return entries
