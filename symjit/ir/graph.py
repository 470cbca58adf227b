"""The graph IR: typed values, nodes applying registered ops, and graphs.

A `Graph` is plain data:
  * `args` and `aux` — the graph inputs (arguments and auxiliary states), each a `Value`;
  * `nodes` — in topological order; a `Node` applies one registered op (`symjit.ops`) with
    parsed attributes to input Values and defines its output Values;
  * `outputs` — the Values the graph returns (any Value: an input, a node output).

Every Value has a static `TensorType` (shape, dtype, device). Shapes follow MXNet 1.x partial
conventions: `None` is an unknown shape, a 0 dim an unknown dim; `dtype` is an MXNet dtype
name ('float32', ...) or None when unknown.

Invariants (checked by `symjit.ir.verify`): every Value is defined exactly once (as a graph
input or as one node's output); nodes only read Values defined earlier; value names are unique
within a graph (the printer and the autodiff interface rely on them). Values compare by
identity, so the same name in two graphs denotes two different Values.

The IR knows nothing about Symbols, Gluon or MXNet's JSON: frontends build graphs through
`symjit.ir.builder.GraphBuilder`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from ..ops.registry import Op

__all__ = ["TensorType", "Value", "Node", "Graph", "UNKNOWN"]


@dataclass(frozen=True)
class TensorType:
    """The static type of a value: partial shape, dtype name and device label."""
    shape: tuple | None = None
    dtype: str | None = None
    device: str = "cpu(0)"

    @property
    def shape_known(self) -> bool:
        return self.shape is not None and all(int(d) > 0 for d in self.shape)

    @property
    def known(self) -> bool:
        """True when shape and dtype are fully known."""
        return self.shape_known and self.dtype is not None

    def with_shape(self, shape) -> "TensorType":
        return TensorType(None if shape is None else tuple(int(d) for d in shape), self.dtype, self.device)

    def with_dtype(self, dtype) -> "TensorType":
        return TensorType(self.shape, dtype, self.device)

    def __str__(self) -> str:
        dt = self.dtype or "?"
        if self.shape is None:
            return f"{dt}[?]"
        return f"{dt}[" + ",".join(str(d) if d else "?" for d in self.shape) + "]"


UNKNOWN = TensorType()


@dataclass(eq=False)
class Value:
    """One tensor of the graph. Identity is the Value object itself.

    `shape` and `dtype` are exposed directly so that gradient rules (which read `.shape`
    and `.dtype` of their operands) work on IR values as on NDArrays.
    """
    name: str
    type: TensorType = UNKNOWN

    @property
    def shape(self):
        return self.type.shape

    @property
    def dtype(self):
        return self.type.dtype

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


@dataclass(eq=False)
class Node:
    """An application of registered op `op` with parsed `attrs` to `inputs`.

    `outputs` lists every output the op defines (hidden ones included, e.g. BatchNorm's
    saved mean and variance). `meta` holds frontend attributes the op does not declare
    (`__lr_mult__`, user attributes, ...) as opaque strings; no pass interprets them.
    """
    name: str
    op: Op
    attrs: dict
    inputs: list
    outputs: list
    meta: dict = field(default_factory=dict)

    @property
    def op_name(self) -> str:
        return self.op.name

    def __repr__(self) -> str:
        return f"<Node {self.name} = {self.op.name}({', '.join('%' + v.name for v in self.inputs)})>"


@dataclass(eq=False)
class Graph:
    """Arguments and auxiliary states in, nodes in topological order, outputs out.

    `input_meta` maps an input Value to its frontend attributes (opaque strings such as
    `__init__` or `__lr_mult__`), kept so frontends can round-trip them.
    """
    args: list = field(default_factory=list)
    aux: list = field(default_factory=list)
    nodes: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    name: str = "graph"
    input_meta: dict = field(default_factory=dict)
    #: analysis results of late passes (in-place pairs, the memory plan), keyed by this graph's
    #: Values; `copy()` does not carry them (they would refer to the old Values)
    annotations: dict = field(default_factory=dict)

    @property
    def inputs(self) -> list:
        """Arguments followed by auxiliary states."""
        return list(self.args) + list(self.aux)

    def values(self) -> Iterator[Value]:
        """Every defined Value: inputs, then node outputs in node order."""
        yield from self.inputs
        for n in self.nodes:
            yield from n.outputs

    def producers(self) -> dict:
        """Value -> (node, output index) for node outputs (graph inputs are absent)."""
        return {v: (n, i) for n in self.nodes for i, v in enumerate(n.outputs)}

    def consumers(self) -> dict:
        """Value -> list of (node, input index) reading it."""
        out: dict[Value, list] = {}
        for n in self.nodes:
            for i, v in enumerate(n.inputs):
                out.setdefault(v, []).append((n, i))
        return out

    def value_by_name(self, name: str) -> Value:
        for v in self.values():
            if v.name == name:
                return v
        raise KeyError(name)

    def copy(self) -> "Graph":
        """A structurally identical graph with fresh Value and Node objects (attrs shared,
        they are treated as immutable)."""
        remap: dict[Value, Value] = {}

        def fresh(v: Value) -> Value:
            nv = Value(v.name, v.type)
            remap[v] = nv
            return nv
        args = [fresh(v) for v in self.args]
        aux = [fresh(v) for v in self.aux]
        nodes = []
        for n in self.nodes:
            ins = [remap[v] for v in n.inputs]
            outs = [fresh(v) for v in n.outputs]
            nodes.append(Node(n.name, n.op, dict(n.attrs), ins, outs, dict(n.meta)))
        meta = {remap[v]: dict(m) for v, m in self.input_meta.items() if v in remap}
        return Graph(args, aux, nodes, [remap[v] for v in self.outputs], self.name, meta)

    def __repr__(self) -> str:
        return (f"<Graph {self.name}: {len(self.args)} args, {len(self.aux)} aux, "
                f"{len(self.nodes)} nodes, {len(self.outputs)} outputs>")

