"""CUDA kernels for fused elementwise groups (and any single elementwise op).

A kernel computes the outputs of an `ElementwiseSpec` (the same description the LLVM
generator uses: expressions over broadcast inputs, a compute dtype, output dtypes, one output
shape) with a grid-stride loop over the flat output index `i`:

    extern "C" __global__ void sj_ew_<hash>(const T0 *in0, ..., U0 *out0, ...)
    for (i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x) {
        offsets of each input at i        // simplify_index_space: flat, or unravel over <= k dims
        t0 = ...; t1 = ...;               // the expression DAG, each distinct node once
        out0[i] = ...; out1[i] = ...;     // after every output is computed
    }

The index space is simplified first (`codegen.llvm.elementwise.simplify_index_space`: size-1
dims dropped, dims with the same broadcast pattern merged); when it collapses to one
dimension every input is read at `i` or at 0. Shapes are compile-time constants of the
kernel. Every output of an element is computed before any is stored, so an output may share
its buffer with an input (in-place planning) that another output still reads; pointers are
therefore not `__restrict__`.

`index_offsets` is also used by the epilogues of GEMM and convolution kernels.
"""
from __future__ import annotations

import numpy as np

from ...base import MXNetError
from ...ops import scalar as S
from ...ops.registry import Elementwise
from ..llvm.elementwise import ElementwiseSpec, simplify_index_space
from .expr import ExprEmitter, check_dtype, convert, ctype
from .plan import Launch, LoweringContext
from .prelude import THREADS

__all__ = ["index_offsets", "elementwise_launch", "elementwise_spec", "grid_for", "MAX_GRID", "grid_stride_loop"]

#: largest grid of a grid-stride kernel (enough blocks to fill any current GPU several times)
MAX_GRID = 8192


def grid_for(n: int, per_block: int = THREADS) -> int:
    """Blocks of a grid-stride loop over n items."""
    return max(1, min(MAX_GRID, -(-int(n) // per_block)))


def grid_stride_loop(var: str, n: int) -> str:
    """The header of a grid-stride loop of `var` over [0, n)."""
    return (f"for (int64_t {var} = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; {var} < {int(n)}LL; "
            f"{var} += (int64_t)gridDim.x * blockDim.x)")


def index_offsets(idx: str, out_shape, in_shapes, prefix: str) -> tuple[list[str], list[str]]:
    """(C statements, offset expression per input) of the element each input (broadcast to
    `out_shape`) holds at flat output index `idx`. Every index variable the statements declare
    is used by some offset (pass shape () for an input that is not read: offset 0)."""
    shape, strides = simplify_index_space(tuple(out_shape), [tuple(s) for s in in_shapes])
    if len(shape) <= 1:
        return [], [idx if shape and st[0] else "0" for st in strides]
    used = [any(st[d] for st in strides) for d in range(len(shape))]   # dims some input moves along
    lines = [f"int64_t {prefix}r = {idx};"] if any(used) else []
    for d in reversed(range(1, len(shape))):
        if used[d]:
            lines.append(f"const int64_t {prefix}i{d} = {prefix}r % {shape[d]};")
        if any(used[:d]):
            lines.append(f"{prefix}r /= {shape[d]};")
    if used[0]:
        lines.append(f"const int64_t {prefix}i0 = {prefix}r;")
    offs = []
    for st in strides:
        terms = [f"{prefix}i{d} * {s}" if s != 1 else f"{prefix}i{d}" for d, s in enumerate(st) if s]
        offs.append(" + ".join(terms) if terms else "0")
    return lines, offs


def elementwise_spec(node) -> ElementwiseSpec:
    """The kernel description of an elementwise node (MXNetError naming the node if the CUDA
    generator cannot compute it)."""
    for v in list(node.inputs) + list(node.outputs):
        if not v.type.known:
            raise MXNetError(f"cuda codegen: node {node.name!r} ({node.op.name}): value {v.name!r} has unknown type")
        check_dtype(v.type.dtype, f"node {node.name!r} ({node.op.name}) value {v.name!r}")
    if node.op.name == "_fused_elemwise":
        exprs, compute = tuple(node.attrs["exprs"]), node.attrs["dtype"]
    elif isinstance(node.op, Elementwise):
        compute = node.op.compute_dtype(node.attrs, [v.type.dtype for v in node.inputs])
        if compute is None:
            raise MXNetError(f"cuda codegen: node {node.name!r} ({node.op.name}): no kernel computes this instance")
        exprs = (node.op.full_expr(node.attrs),)
    else:
        raise MXNetError(f"cuda codegen: {node.op.name} is not an elementwise op")
    out_shape = tuple(node.outputs[0].type.shape)
    if any(tuple(o.type.shape) != out_shape for o in node.outputs):
        raise MXNetError(f"cuda codegen: node {node.name!r} ({node.op.name}): outputs of different shapes")
    return ElementwiseSpec(exprs, tuple(v.type.dtype for v in node.inputs),
                           tuple(tuple(v.type.shape) for v in node.inputs), check_dtype(compute),
                           tuple(o.type.dtype for o in node.outputs), out_shape)


def elementwise_launch(ctx: LoweringContext, spec: ElementwiseSpec, args: list) -> list[Launch]:
    """The launch computing `spec` with `args` = input Values then output Values."""
    n = int(np.prod(spec.out_shape, dtype=np.int64))
    if n == 0:
        return []
    n_in = len(spec.in_dtypes)
    params = [(f"const {ctype(dt)} *", f"in{k}") for k, dt in enumerate(spec.in_dtypes)]
    params += [(f"{ctype(dt)} *", f"out{j}") for j, dt in enumerate(spec.out_dtypes)]
    read = set().union(*(S.inputs_of(e) for e in spec.exprs))      # inputs the expressions use
    lines, offs = index_offsets("i", spec.out_shape, [s if k in read else () for k, s in enumerate(spec.in_shapes)],
                                "x")
    em = ExprEmitter(spec.compute_dtype, spec.in_dtypes, lambda k: f"in{k}[{offs[k]}]")
    values = [em.gen(e) for e in spec.exprs]
    stores = [f"out{j}[i] = {convert(v, dt, spec.out_dtypes[j])};" for j, (v, dt) in enumerate(values)]
    body = "\n".join(["    " + grid_stride_loop("i", n) + " {"] + ["        " + s for s in lines + em.lines + stores]
                     + ["    }"])
    kernel = ctx.kernel("sj_ew", params, body, THREADS)
    if len(args) != n_in + len(spec.exprs):
        raise MXNetError(f"cuda codegen: elementwise kernel takes {n_in + len(spec.exprs)} buffers, got {len(args)}")
    return [ctx.launch(kernel, grid_for(n), args)]
