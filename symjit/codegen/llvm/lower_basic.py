"""Built-in lowerings: elementwise kernels (fused groups and single ops) and copies.

  * `_fused_elemwise`, `_elemwise_expr` and every registry `Elementwise` op become one
    vectorized kernel (`elementwise.emit_elementwise`) run by the runtime's parallel-for;
  * every `reshape_only` op (Reshape, Flatten, expand_dims, squeeze, _copy, BlockGrad, ...)
    becomes a byte copy into the output's buffer.
"""
from __future__ import annotations

import numpy as np

from ...ops.registry import Elementwise
from .elementwise import SUPPORTED_DTYPES, ElementwiseSpec, emit_elementwise_call
from .graph import TABLE, LoweringContext, MemcpyCall, ModuleConstant, ParallelCall, register_lowering
from .lower_loops import GRAIN



def _supported(*values) -> bool:
    return all(v.type.known and np.dtype(v.type.dtype).name in SUPPORTED_DTYPES for v in values)


def _size(v) -> int:
    return int(np.prod(v.type.shape, dtype=np.int64))


def elementwise_spec(node) -> ElementwiseSpec | None:
    """The kernel description of an elementwise node, or None if the codegen cannot run it."""
    if not _supported(*node.inputs, *node.outputs):
        return None
    if node.op.name == "_fused_elemwise":
        exprs, compute = tuple(node.attrs["exprs"]), node.attrs["dtype"]
    elif isinstance(node.op, Elementwise):
        compute = node.op.compute_dtype(node.attrs, [v.type.dtype for v in node.inputs])
        if compute is None or compute not in SUPPORTED_DTYPES:
            return None
        exprs = (node.op.full_expr(node.attrs),)
    else:
        return None
    out_shape = tuple(node.outputs[0].type.shape)
    if any(tuple(o.type.shape) != out_shape for o in node.outputs):
        return None
    return ElementwiseSpec(exprs, tuple(v.type.dtype for v in node.inputs),
                           tuple(tuple(v.type.shape) for v in node.inputs), compute,
                           tuple(o.type.dtype for o in node.outputs), out_shape)


@register_lowering("_fused_elemwise", "_elemwise_expr")
@TABLE.register_trait("elementwise")
def lower_elementwise(node, ctx: LoweringContext):
    spec = elementwise_spec(node)
    if spec is None:
        return None
    return [elementwise_call(ctx, spec, list(node.inputs) + list(node.outputs))]


def elementwise_call(ctx: LoweringContext, spec: ElementwiseSpec, values) -> ParallelCall:
    """The parallel call of the kernel for `spec` on `values` (its inputs, then its outputs),
    the kernel added to the module once (a shape-generic nest gets its table of extents after
    the outputs: `elementwise.emit_elementwise_call`)."""
    kernel, table = emit_elementwise_call(ctx.mb, spec)
    args = list(values) + ([ModuleConstant(table)] if table is not None else [])
    return ParallelCall(kernel, int(np.prod(spec.out_shape, dtype=np.int64)), GRAIN, args)


@TABLE.register_trait("reshape_only")
def lower_copy(node, ctx: LoweringContext):
    """A shape reinterpretation: the output holds the input's bytes."""
    src, dst = node.inputs[0], node.outputs[0]
    if not (src.type.known and dst.type.known) or _size(src) != _size(dst) or src.type.dtype != dst.type.dtype:
        return None
    return [MemcpyCall(dst, src, _size(src) * np.dtype(src.type.dtype).itemsize)]
