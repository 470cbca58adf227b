"""The IR verifier: structural and type invariants every pass must preserve.

`verify(g)` checks
  * definitions: every Value is defined exactly once (graph input or one node output) and
    value names are unique;
  * order and acyclicity: each node reads only Values defined before it (graph inputs or
    outputs of earlier nodes), so the node list is a topological order and has no cycle;
  * arity: each node has as many inputs as its op's `input_names` and as many outputs as
    `num_outputs` for its attributes;
  * types: with `check_types`, re-running each op's inference on the node's input types
    neither conflicts with nor refines beyond the recorded output types (known dims and
    dtypes must agree).
Raises MXNetError describing the first violation; returns None when the graph is valid.
"""
from __future__ import annotations

from ..base import MXNetError
from .builder import describe_node, infer_node_types
from .graph import Graph, Value

__all__ = ["verify"]


def verify(g: Graph, check_types: bool = True) -> None:
    """Check the invariants above; raise MXNetError on the first violation."""
    defined: set[Value] = set()
    names: set[str] = set()

    def define(v, where: str) -> None:
        if not isinstance(v, Value):
            raise MXNetError(f"verify: {where} defines {v!r}, which is not a Value")
        if v in defined:
            raise MXNetError(f"verify: value %{v.name} is defined twice ({where})")
        if v.name in names:
            raise MXNetError(f"verify: value name %{v.name} is used twice ({where})")
        defined.add(v)
        names.add(v.name)

    for v in g.args:
        define(v, "graph arguments")
    for v in g.aux:
        define(v, "graph auxiliary states")
    for n in g.nodes:
        where = describe_node(n.name, n.op)
        expected_in = n.op.input_names(n.attrs)
        if len(n.inputs) != len(expected_in):
            raise MXNetError(f"verify: {where} has {len(n.inputs)} inputs, its op expects "
                             f"{len(expected_in)} {expected_in}")
        n_out = n.op.num_outputs(n.attrs)
        if len(n.outputs) != n_out:
            raise MXNetError(f"verify: {where} has {len(n.outputs)} outputs, its op defines {n_out}")
        for i, v in enumerate(n.inputs):
            if v not in defined:
                raise MXNetError(f"verify: {where} reads %{getattr(v, 'name', v)} (input "
                                 f"{expected_in[i]!r}) before it is defined (cycle or missing value)")
        for v in n.outputs:
            define(v, where)
        if check_types:
            _check_node_types(n, where)
    for v in g.outputs:
        if v not in defined:
            raise MXNetError(f"verify: graph output %{getattr(v, 'name', v)} is not defined")


def _check_node_types(n, where: str) -> None:
    _, outs = infer_node_types(n.name, n.op, n.attrs, [v.type for v in n.inputs])
    for i, (v, t) in enumerate(zip(n.outputs, outs)):
        have, got = v.type, t
        if have.shape is not None and got.shape is not None:
            if len(have.shape) != len(got.shape) or any(
                    a and b and a != b for a, b in zip(have.shape, got.shape)):
                raise MXNetError(f"verify: {where} output {i} has type {have}, but its inputs give {got}")
        if have.dtype is not None and got.dtype is not None and have.dtype != got.dtype:
            raise MXNetError(f"verify: {where} output {i} has dtype {have.dtype}, its inputs give {got.dtype}")
