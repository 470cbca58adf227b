"""`_CachedOp`: a whole graph applied as one node (MXNet's `_CachedOp`).

It is what the autograd tape holds for a call of a hybridized Gluon block that is not inlined
(`autograd.get_symbol` shows it as one node), and what MXNet JSON graphs holding such nodes
load into. The graph is a subgraph attribute (the `Subgraph` protocol of `ops/contrib.py`,
`subgraph` here, MXNet's single entry of the node's "subgraphs"): the node's inputs feed the
subgraph's inputs in order and its outputs are the subgraph's outputs. MXNet's CachedOp flags
(`static_alloc`, `inline_limit`, ...) are accepted with MXNet's defaults; they tune MXNet's
memory planning and recording and do not change values.

The gradient (`_backward_CachedOp`, hidden) is the subgraph's vector-Jacobian product,
recomputing the forward from the inputs.
"""
from __future__ import annotations

import numpy as np

from .attrs import Bool, Int, Param, Shape
from .contrib import _BackwardControlFlow, parse_subgraph
from .registry import Op, register

_FLAGS = {
    "static_alloc": Param(Bool, False, "Statically allocate memory (MXNet memory planning)."),
    "static_shape": Param(Bool, False, "Optimize for invariant input shapes (MXNet memory planning)."),
    "is_dynamic": Param(Bool, False, "Whether the graph has dynamic shapes."),
    "inline_limit": Param(Int, 2, "Graphs with at most this many ops are recorded op by op."),
    "forward_bulk_size": Param(Int, 15, "Engine bulk size of the forward (MXNet scheduling)."),
    "backward_bulk_size": Param(Int, 15, "Engine bulk size of the backward (MXNet scheduling)."),
    "data_indices": Param(Shape, (), "Positions of the data inputs."),
    "param_indices": Param(Shape, (), "Positions of the parameter inputs."),
}


@register("_CachedOp")
class CachedOpNode(Op):
    """The subgraph's outputs on the node's inputs (fed to the subgraph's inputs in order)."""
    params = {"subgraph": Param(parse_subgraph, doc="The graph the node runs."), **_FLAGS}
    kernel = "control_flow"
    is_random = True  # the subgraph may sample: never merged by CSE nor constant-folded
    subgraph_attrs = ("subgraph",)

    def input_names(self, attrs):
        return [f"data{i}" for i in range(attrs["subgraph"].num_inputs)]

    def num_outputs(self, attrs):
        return attrs["subgraph"].num_outputs

    def output_names(self, attrs):
        return [f"output{i}" for i in range(attrs["subgraph"].num_outputs)]

    def infer_shape(self, attrs, in_shapes):
        shapes, _ = attrs["subgraph"].infer(list(in_shapes), [None] * len(in_shapes))
        return list(in_shapes), list(shapes)

    def infer_type(self, attrs, in_types):
        _, dtypes = attrs["subgraph"].infer([None] * len(in_types), list(in_types))
        return list(in_types), list(dtypes)

    def compute(self, attrs, inputs, ctx):
        return attrs["subgraph"].run([np.asarray(x) for x in inputs], ctx)

    def grad(self, F, attrs, inputs, outputs, ograds):
        return F.apply("_backward_CachedOp", list(ograds) + list(inputs), **attrs)


@register("_backward_CachedOp")
class BackwardCachedOp(_BackwardControlFlow):
    """Gradient of `_CachedOp` with respect to every input."""
    params = CachedOpNode.params
    forward = "_CachedOp"

    def forward_counts(self, attrs):
        sub = attrs["subgraph"]
        return sub.num_inputs, sub.num_outputs

    def compute(self, attrs, inputs, ctx):
        ograds, xs, acc = self.split(attrs, inputs)
        self.accumulate(acc, tuple(range(len(xs))), attrs["subgraph"].vjp(xs, ograds, ctx))
        return acc
