"""Lowering a planned Graph to a CUDA launch plan.

Input: a graph after the inference pass pipeline (`passes.manager`, the same pipeline the
LLVM backend runs: fusion groups, GEMM/convolution epilogues, in-place pairs and the memory
plan), plus the names and arrays of the graph inputs bound at compile time (the weights).
Each node is lowered by the lowering registered for its op in `LOWERINGS` (filled by the
modules `gemm`, `reduce`, `nn` and `shape` of this package); a lowering returns the steps
(`plan.Launch`, `plan.Copy`) that compute the node. Unlike the LLVM backend there is no
Python fallback: a node nothing can lower raises MXNetError naming its op, so a plan always
runs entirely on the device.

Invariants of the result: steps run in node order on one stream; every kernel reads and
writes only the buffers passed to it; a kernel never reads an element of an input buffer
after writing the element of an output buffer that may share it (in-place pairs have the
same shape and are accessed at the same index by the same thread).
"""
from __future__ import annotations

from typing import Callable

from ...base import MXNetError
from ...ir.builder import describe_node
from ...ir.graph import Graph, Node, Value
from ..lowering import lowering_table
from .elementwise import elementwise_launch, elementwise_spec
from .plan import LaunchPlan, LoweringContext, place_values

__all__ = ["LOWERINGS", "register_lowering", "lower_graph", "find_lowering", "supported_ops"]

Lowering = Callable[[Node, LoweringContext], list]

#: the CUDA target's lowerings (codegen/lowering.py); a lowering returns the node's steps or
#: raises MXNetError
TABLE = lowering_table("cuda")
LOWERINGS = TABLE.by_op
register_lowering = TABLE.register


def _load_lowerings() -> None:
    from . import gemm, nn, reduce, shape  # noqa: F401 - each registers its lowerings


TABLE.add_loader(_load_lowerings)


def find_lowering(node: Node) -> Lowering | None:
    return TABLE.find(node.op)


def supported_ops() -> list[str]:
    """Op names with a CUDA lowering of their own (every op with a trait that has a rule,
    `TABLE.by_trait`, too)."""
    TABLE.load()
    return sorted(LOWERINGS)


@register_lowering("_fused_elemwise", "_elemwise_expr")
@TABLE.register_trait("elementwise")
def lower_elementwise(node: Node, ctx: LoweringContext) -> list:
    return elementwise_launch(ctx, elementwise_spec(node), list(node.inputs) + list(node.outputs))


def lower_graph(g: Graph, bound: dict | None = None, name: str = "graph") -> LaunchPlan:
    """The launch plan of planned graph `g` (see the module docstring)."""
    placement = place_values(g, dict(bound or {}))
    ctx = LoweringContext(g)
    steps: list = []
    for n in g.nodes:
        if n.op.name == "_const":
            continue
        fn = find_lowering(n)
        if fn is None:
            raise MXNetError(f"cuda codegen: no CUDA lowering for op {n.op.name} (node {n.name!r})")
        for v in list(n.inputs) + list(n.outputs):
            if not v.type.known:
                raise MXNetError(f"cuda codegen: {describe_node(n.name, n.op)}: value {v.name!r} has unknown "
                                 f"type {v.type}")
        ctx.node = n
        try:
            steps.extend(fn(n, ctx))
        except MXNetError as e:
            msg = str(e)
            raise MXNetError(msg if n.name in msg else f"{describe_node(n.name, n.op)}: {msg}") from None
    ctx.node = None
    for j, v in placement.output_copies:
        dst = Value(f"__out{j}", v.type)        # the storage of output slot j
        placement.where[dst] = ("output", j)
        steps.append(ctx.copy(dst, v))
    plan = g.annotations["memory_plan"]
    return LaunchPlan(name, list(ctx.kernels.values()), steps, placement, int(plan.arena_bytes))
