"""CUDA lowerings of data-movement ops: shape reinterpretations, strided copies, joins, fills.

  * every `reshape_only` op (Reshape, Flatten, expand_dims, squeeze, reshape_like, _copy,
    BlockGrad) and inference-mode Dropout hold their input's bytes: one device-to-device `Copy` step
    (skipped when the memory plan gave both values the same buffer).
  * Every other pure data-movement op is a set of *strided copies*
    `dst[dst_off + sum_d i_d * dst_stride_d] = src[src_off + sum_d i_d * src_stride_d]` over an
    index space, run by one kernel template that moves elements as unsigned integers of their
    byte size (bit-exact for every dtype). The affine maps come from the attributes
    (transpose, Concat, stack) or, for the single-source ops (slice, slice_axis, reverse,
    SwapAxis, tile, repeat, broadcast_*, SliceChannel, ...), from the op's own reference
    implementation applied to an index array (`codegen.llvm.lower_shape.probe_maps`, verified
    on every element), exactly as the LLVM backend derives them.
  * Pad (constant mode): a fill kernel, then a strided copy into the interior box.
  * where(cond, x, y): an elementwise select (a (N,) condition broadcasts over rows).
  * Embedding: a row gather, one thread per output element; indices (float or integer)
    truncate toward zero and clip to the vocabulary (NaN -> row 0), as
    `symjit.ops.nn_conv` and the CPU kernel do.
"""
from __future__ import annotations

import numpy as np

from ...base import MXNetError
from ..llvm.lower_loops import row_strides
from ..llvm.lower_shape import PROBE_LIMIT, merge_copy_dims, probe_maps, refined_shape
from .elementwise import grid_for, grid_stride_loop
from .graph import TABLE, register_lowering
from .plan import LoweringContext
from .prelude import THREADS

__all__ = ["copy_launch", "fill_launch"]

_UINT = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}


def _size(v) -> int:
    return int(np.prod(v.type.shape, dtype=np.int64))


def _itemsize(v) -> int:
    return np.dtype(v.type.dtype).itemsize


def copy_launch(ctx: LoweringContext, src, dst, shape, src_strides, dst_strides,
                src_offset: int = 0, dst_offset: int = 0) -> list:
    """The launch copying `src` into `dst` along the affine maps (element strides; negative
    source strides allowed) over every index of `shape`."""
    size = _itemsize(src)
    if size != _itemsize(dst) or size not in _UINT:
        raise MXNetError(f"cuda codegen: cannot copy {src.type.dtype} into {dst.type.dtype}")
    if any(int(n) == 0 for n in shape):
        return []
    dims = merge_copy_dims(shape, src_strides, dst_strides)     # [] for a single element
    total = int(np.prod([n for n, _, _ in dims], dtype=np.int64))
    U = _UINT[size]
    lines = ["        int64_t r = i;"] if len(dims) > 1 else []
    for d in reversed(range(1, len(dims))):
        lines.append(f"        const int64_t i{d} = r % {dims[d][0]}; r /= {dims[d][0]};")
    if dims:
        lines.append(f"        const int64_t i0 = {'r' if len(dims) > 1 else 'i'};")

    def offset(base: int, which: int) -> str:
        terms = [str(base)] if base else []
        terms += [f"i{d} * {dims[d][which]}" for d in range(len(dims)) if dims[d][which]]
        return " + ".join(terms) or "0"
    body = "\n".join([f"    {grid_stride_loop('i', total)} {{"] + lines
                     + [f"        dst[{offset(dst_offset, 2)}] = src[{offset(src_offset, 1)}];", "    }"])
    kernel = ctx.kernel("sj_copy", [(f"const {U} *", "src"), (f"{U} *", "dst")], body, THREADS)
    return [ctx.launch(kernel, grid_for(total), [src, dst])]


def fill_launch(ctx: LoweringContext, dst, value: float) -> list:
    """The launch filling every element of `dst` with `value` (converted like numpy)."""
    size = _itemsize(dst)
    n = _size(dst)
    if n == 0:
        return []
    with np.errstate(all="ignore"):
        bits = int(np.asarray(value).astype(dst.type.dtype).reshape(1).view(f"u{size}")[0])
    U = _UINT[size]
    body = f"    {grid_stride_loop('i', n)} dst[i] = ({U}){bits}ULL;"
    kernel = ctx.kernel("sj_fill", [(f"{U} *", "dst")], body, THREADS)
    return [ctx.launch(kernel, grid_for(n), [dst])]


@TABLE.register_trait("reshape_only")
def lower_copy(node, ctx: LoweringContext) -> list:
    """A shape reinterpretation: the output holds the input's bytes."""
    src, dst = node.inputs[0], node.outputs[0]
    if _size(src) != _size(dst) or src.type.dtype != dst.type.dtype:
        raise MXNetError(f"cuda codegen: {node.op.name} changes the element count or dtype")
    return [ctx.copy(dst, src)]


@register_lowering("Dropout")
def lower_dropout(node, ctx: LoweringContext) -> list:
    """Dropout in inference is the identity (the CUDA target compiles inference graphs)."""
    if node.attrs["mode"] == "always" and float(node.attrs["p"]) > 0.0:
        raise MXNetError("cuda codegen: Dropout with mode='always' (random masks) has no CUDA lowering")
    steps = [ctx.copy(node.outputs[0], node.inputs[0])]
    for extra in node.outputs[1:]:      # the mask output, if any: all ones in inference
        steps += fill_launch(ctx, extra, 1.0)
    return steps


_PROBED = ("slice", "crop", "slice_axis", "slice_like", "reverse", "flip", "SwapAxis", "swapaxes", "tile",
           "repeat", "broadcast_to", "broadcast_axis", "broadcast_axes", "broadcast_like", "depth_to_space",
           "space_to_depth", "SliceChannel", "split")


@register_lowering(*_PROBED)
def lower_probed(node, ctx: LoweringContext) -> list:
    """Ops whose outputs are affine images of input 0 (see the module docstring)."""
    src = node.inputs[0]
    if any(o.type.dtype != src.type.dtype for o in node.outputs):
        raise MXNetError(f"cuda codegen: {node.op.name} changes the dtype")
    if all(_size(o) == 0 for o in node.outputs):
        return []
    if _size(src) > PROBE_LIMIT:
        raise MXNetError(f"cuda codegen: {node.op.name} input of {_size(src)} elements is too large to derive "
                         f"its index map (limit {PROBE_LIMIT})")
    refined = refined_shape(node)
    maps = probe_maps(node, refined)
    if maps is None:
        raise MXNetError(f"cuda codegen: {node.op.name} with these attributes is not an affine copy")
    steps = []
    for out, (offset, strides) in zip(node.outputs, maps):
        shape = refined or tuple(out.type.shape)
        steps += copy_launch(ctx, src, out, shape, strides, row_strides(shape), offset, 0)
    return steps


@register_lowering("transpose")
def lower_transpose(node, ctx: LoweringContext) -> list:
    from ...ops.shape import transpose_axes
    src, dst = node.inputs[0], node.outputs[0]
    perm = transpose_axes("transpose", node.attrs["axes"], len(src.type.shape))
    st = row_strides(src.type.shape)
    return copy_launch(ctx, src, dst, dst.type.shape, [st[a] for a in perm], row_strides(dst.type.shape))


def _join(ctx, parts, dst, axis: int, new_axis: bool) -> list:
    """Copy each part into its slab of `dst` along `axis` (Concat: existing axis; stack: new)."""
    dshape = tuple(dst.type.shape)
    dst_st = row_strides(dshape)
    steps, pos = [], 0
    for p in parts:
        if p.type.dtype != dst.type.dtype:
            raise MXNetError(f"cuda codegen: joining {p.type.dtype} into {dst.type.dtype}")
        pshape = tuple(p.type.shape)
        shape = pshape[:axis] + (1,) + pshape[axis:] if new_axis else pshape
        steps += copy_launch(ctx, p, dst, shape, row_strides(shape), dst_st, 0, pos * dst_st[axis])
        pos += 1 if new_axis else pshape[axis]
    return steps


@register_lowering("Concat", "concat")
def lower_concat(node, ctx: LoweringContext) -> list:
    dst = node.outputs[0]
    return _join(ctx, node.inputs, dst, node.attrs["dim"] % len(dst.type.shape), False)


@register_lowering("stack")
def lower_stack(node, ctx: LoweringContext) -> list:
    dst = node.outputs[0]
    return _join(ctx, node.inputs, dst, node.attrs["axis"] % len(dst.type.shape), True)


@register_lowering("where")
def lower_where(node, ctx: LoweringContext) -> list:
    from ...ops import scalar as S
    from ..llvm.elementwise import ElementwiseSpec
    from .elementwise import elementwise_launch
    from .expr import check_dtype
    c, x, y = node.inputs
    out = node.outputs[0]
    cd, xd, yd, od = (check_dtype(v.type.dtype, f"where {v.name!r}") for v in (c, x, y, out))
    if xd != yd or tuple(x.type.shape) != tuple(y.type.shape):
        raise MXNetError("cuda codegen: where needs x and y of one shape and dtype")
    # the condition converts to x's dtype before the != 0 test: every nonzero value stays nonzero
    if not (cd == xd or (np.dtype(cd).kind in "iub" and np.dtype(xd).kind == "f")):
        raise MXNetError(f"cuda codegen: where with a {cd} condition and {xd} values has no CUDA lowering")
    shape = tuple(int(d) for d in x.type.shape)
    cshape = tuple(int(d) for d in c.type.shape)
    if cshape != shape:
        cshape = (cshape[0],) + (1,) * (len(shape) - 1)
    expr = S.select(S.ne(S.Input(0), S.Const(0)), S.Input(1), S.Input(2))
    spec = ElementwiseSpec((expr,), (cd, xd, yd), (cshape, shape, shape), xd, (od,), shape)
    return elementwise_launch(ctx, spec, [c, x, y, out])


@register_lowering("Embedding")
def lower_embedding(node, ctx: LoweringContext) -> list:
    """out[i, :] = weight[clip(trunc(idx[i])), :] (see the module docstring)."""
    from .expr import check_dtype, ctype, kind
    idx, w = node.inputs
    out = node.outputs[0]
    it = check_dtype(idx.type.dtype, "Embedding indices")
    rows, dim = (int(d) for d in w.type.shape)
    n = _size(idx)
    size = _itemsize(w)
    if size not in _UINT or _itemsize(out) != size:
        raise MXNetError(f"cuda codegen: Embedding of {w.type.dtype} weights has no CUDA lowering")
    if n * dim == 0:
        return []
    if kind(it) == "f":
        row = (f"const double v = (double)idx[o / {dim}];\n"
               f"        const int64_t r = v != v || v <= 0.0 ? 0 : (v >= {rows - 1}.0 ? {rows - 1} : (int64_t)v);")
    else:
        row = (f"const int64_t v = (int64_t)idx[o / {dim}];\n"
               f"        const int64_t r = v <= 0 ? 0 : (v >= {rows - 1} ? {rows - 1} : v);")
    U = _UINT[size]
    body = "\n".join([f"    {grid_stride_loop('o', n * dim)} {{", f"        {row}",
                      f"        out[o] = weight[r * {dim} + o % {dim}];", "    }"])
    kernel = ctx.kernel("sj_embedding", [(f"const {ctype(it)} *", "idx"), (f"const {U} *", "weight"),
                                         (f"{U} *", "out")], body, THREADS)
    return [ctx.launch(kernel, grid_for(n * dim), [idx, w, out])]


@register_lowering("Pad", "pad")
def lower_pad(node, ctx: LoweringContext) -> list:
    """Constant padding: fill the output, then copy the input into its interior box."""
    src, dst = node.inputs[0], node.outputs[0]
    if node.attrs["mode"] != "constant":
        raise MXNetError(f"cuda codegen: Pad mode {node.attrs['mode']!r} has no CUDA lowering (only 'constant')")
    pw = node.attrs["pad_width"]
    dst_st = row_strides(dst.type.shape)
    offset = sum(pw[2 * d] * dst_st[d] for d in range(len(dst_st)))
    return (fill_launch(ctx, dst, node.attrs["constant_value"])
            + copy_launch(ctx, src, dst, src.type.shape, row_strides(src.type.shape), dst_st, 0, offset))
