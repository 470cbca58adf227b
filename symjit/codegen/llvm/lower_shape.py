"""Native lowerings of data-movement ops: strided copies, broadcasts, concatenation, splits,
padding, gathers (take, pick, one_hot) and their scatter-add gradients (`_backward_take`,
`_backward_pick`), `where`, `_backward_mean`, and Cast from or to float16.

Every pure data-movement op here is a set of *strided copies*: an output (or a box inside
it) receives `src[offset + sum_d i_d * stride_d]` over its index space. One kernel
template (`copy_call`) runs such a copy: the index space is simplified (size-1 dims
dropped, dims that are contiguous in both source and destination merged), rows of the
innermost dim are split over threads, and elements move as integers of their byte size,
so every dtype (float16 included) copies bit-exactly.

Where the affine map comes from: transpose, concatenation, stack and split are computed
from their attributes; the remaining single-source ops (slice, slice_axis, slice_like,
crop, reverse, SwapAxis, tile, repeat, broadcast_*, depth_to_space, space_to_depth,
`_backward_sum`) take it from their own reference implementation applied to an *index
array* (`np.arange` of the source's size), fitted by `fit_affine` and verified exactly on
every element. So the compiled op has the reference's semantics for every attribute
combination by construction; an op whose map is not affine (none of the listed ones in
practice) or too large to probe (`PROBE_LIMIT`) keeps its Python step.

Gathers read indices like the reference (`_as_index`: floats truncate toward zero) and map
them per mode (clip, wrap, raise). Where the reference raises (a non-finite index, an
index out of range with mode='raise') the kernel reports SYMJIT_ERR_INDEX through the
runtime (`symjit_set_error_str`) and the graph call raises MXNetError.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...ops import scalar as S
from ...ops.registry import ComputeContext
from .elementwise import SUPPORTED_DTYPES, ElementwiseSpec, generic_row
from .graph import TABLE, LoweringContext, ModuleConstant, ParallelCall, register_lowering
from .lower_loops import GRAIN, KernelWriter, int_type_of_size, llvm_type, row_strides

__all__ = ["copy_call", "fill_call", "fit_affine", "merge_copy_dims", "PROBE_LIMIT"]

#: largest source (elements) whose affine map is derived by probing the reference
PROBE_LIMIT = 1 << 24


def _known(*values) -> bool:
    return all(v.type.known for v in values)


def _size(v) -> int:
    return int(np.prod(v.type.shape, dtype=np.int64))


def _itemsize(v) -> int:
    return np.dtype(v.type.dtype).itemsize


# --------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------

def merge_copy_dims(shape: Sequence[int], src: Sequence[int], dst: Sequence[int]) -> list[tuple[int, int, int]]:
    """[(size, src_stride, dst_stride)] with size-1 dims dropped and a dim merged into the next
    inner one where both strides continue it (the pair walks memory the same way)."""
    dims = [(int(n), int(s), int(d)) for n, s, d in zip(shape, src, dst) if n != 1]
    out: list[tuple[int, int, int]] = []
    for n, s, d in reversed(dims):
        if out and s == out[-1][0] * out[-1][1] and d == out[-1][0] * out[-1][2]:
            m = out.pop()
            out.append((m[0] * n, m[1], m[2]))
        else:
            out.append((n, s, d))
    return out[::-1]


def copy_call(ctx: LoweringContext, src, dst, shape, src_strides, dst_strides,
              src_offset: int = 0, dst_offset: int = 0) -> ParallelCall | None:
    """A call copying dst[dst_offset + sum i*dst_strides] = src[src_offset + sum i*src_strides]
    for every index i of `shape` (element strides; negative source strides allowed)."""
    ity = int_type_of_size(_itemsize(src))
    if ity is None or _itemsize(src) != _itemsize(dst):
        return None
    dims = merge_copy_dims(shape, src_strides, dst_strides) or [(1, 0, 0)]
    if any(n == 0 for n, _, _ in dims):
        return None
    if len(dims) == 1 and dims[0][1] == 1 and dims[0][2] == 1:
        size = _itemsize(src)
        return _contiguous_copy(ctx, src, dst, dims[0][0] * size, src_offset * size, dst_offset * size)
    tiled = _tiled_copy(ctx, ity, dims, src, dst, src_offset, dst_offset)
    if tiled is not None:
        return tiled
    inner, rows_shape = dims[-1], [n for n, _, _ in dims[:-1]]
    rows = int(np.prod(rows_shape, dtype=np.int64))
    if rows_shape and generic_row(inner[0]):
        name = _generic_copy_kernel(ctx, ity, len(dims), inner[1] == 1, inner[2] == 1)
        table = ctx.mb.i64_table([n for n, _, _ in dims] + [s for _, s, _ in dims] + [d for _, _, d in dims]
                                 + [src_offset, dst_offset])
        return ParallelCall(name, rows, max(1, GRAIN // inner[0]), [src, dst, ModuleConstant(table)])
    key = f"copy|{ity}|{dims}|{src_offset}|{dst_offset}"
    name = ctx.unique("sj_copy", key)
    if name not in ctx.mb.symbols:
        kw = KernelWriter(ctx.mb, name, 2)
        sp, dp = kw.args
        with kw.loop(kw.begin, kw.end) as r:
            idx = kw.unravel(r, rows_shape) if rows_shape else []
            so = kw.offset(idx, [s for _, s, _ in dims[:-1]], src_offset)
            do = kw.offset(idx, [d for _, _, d in dims[:-1]], dst_offset)
            n, si, di = inner
            with kw.loop(0, n) as j:
                v = kw.load(ity, sp, so + j * si if si != 1 else so + j)
                kw.store(ity, v, dp, do + j * di if di != 1 else do + j)
        kw.finish()
    return ParallelCall(name, rows, max(1, GRAIN // max(inner[0], 1)), [src, dst])


#: bytes of a contiguous copy per parallel task, at least
COPY_GRAIN_BYTES = 1 << 18


def _contiguous_copy(ctx: LoweringContext, src, dst, nbytes: int, src_offset: int, dst_offset: int) -> ParallelCall:
    """A copy of `nbytes` contiguous bytes from byte `src_offset` of src to byte `dst_offset` of
    dst (a channel block of a concatenation at batch 1, a whole buffer...): the module's one
    memcpy kernel, over ranges of bytes split between threads, reading both offsets from a
    table. One shared kernel, not one per copy: LLVM spent 3-5 ms on each specialised copy loop
    (DenseNet-121: 37 ms for 8 of them), where the C library's memcpy is as fast."""
    name = ctx.unique("sj_memcpy", "memcpy")
    if name not in ctx.mb.symbols:
        kw = KernelWriter(ctx.mb, name, 3)
        sp, dp, tp = kw.args
        so, do = kw.load("i64", tp, 0) + kw.begin, kw.load("i64", tp, 1) + kw.begin
        kw.memcpy(kw.gep("i8", dp, do), kw.gep("i8", sp, so), kw.end - kw.begin)
        kw.finish()
    table = ctx.mb.i64_table([src_offset, dst_offset])
    return ParallelCall(name, nbytes, COPY_GRAIN_BYTES, [src, dst, ModuleConstant(table)])


def _generic_copy_kernel(ctx: LoweringContext, ity: str, rank: int, src_unit: bool, dst_unit: bool) -> str:
    """The module's row-copy kernel for copies of `rank` merged dims (at least 2) of `ity`
    elements, whose innermost source / destination strides are 1 when `src_unit` / `dst_unit`:
    it reads the extents, strides and offsets from the table after its two data pointers
    (n[rank], src strides[rank], dst strides[rank], src offset, dst offset), so every copy of
    one pattern (each part of every channel concatenation, say) shares one compiled loop."""
    name = ctx.unique("sj_copyg", f"copyg|{ity}|{rank}|{src_unit}|{dst_unit}")
    if name in ctx.mb.symbols:
        return name
    kw = KernelWriter(ctx.mb, name, 3)
    sp, dp, tp = kw.args
    t = [kw.load("i64", tp, k) for k in range(3 * rank + 2)]
    n, st_s, st_d = t[:rank], t[rank:2 * rank], t[2 * rank:3 * rank]
    with kw.loop(kw.begin, kw.end) as r:
        idx, rem = [], r
        for d in reversed(range(1, rank - 1)):
            idx.append(kw.b.ins("i64", f"urem i64 {rem.ref}, {n[d].ref}"))
            rem = kw.b.ins("i64", f"udiv i64 {rem.ref}, {n[d].ref}")
        idx = [rem] + idx[::-1]
        so, do = t[3 * rank], t[3 * rank + 1]
        for i, a, b in zip(idx, st_s, st_d):
            so, do = so + i * a, do + i * b
        if src_unit and dst_unit:      # contiguous rows: the C library's memcpy
            kw.memcpy(kw.gep(ity, dp, do), kw.gep(ity, sp, so), n[-1] * (int(ity[1:]) // 8))
        else:
            with kw.loop(0, n[-1]) as j:
                v = kw.load(ity, sp, so + j if src_unit else so + j * st_s[-1])
                kw.store(ity, v, dp, do + j if dst_unit else do + j * st_d[-1])
    return kw.finish()


#: edge of the square tiles of a transposing copy (elements)
TILE = 32


def _tiled_copy(ctx, ity: str, dims, src, dst, src_offset: int, dst_offset: int) -> ParallelCall | None:
    """A transposing copy (the destination's innermost dim is strided in the source while
    another dim is contiguous there) walks TILE x TILE tiles of those two dims, so reads and
    writes both stay within cache lines; None when the copy is not of that kind or small."""
    if len(dims) < 2 or dims[-1][1] == 1:
        return None
    a = next((k for k in range(len(dims) - 1) if dims[k][1] == 1), None)
    if a is None or dims[a][0] < TILE or dims[-1][0] < TILE:
        return None
    other = [d for k, d in enumerate(dims[:-1]) if k != a]
    (na, sa, da), (nb, sb, db) = dims[a], dims[-1]
    ta, tb = -(-na // TILE), -(-nb // TILE)
    rows_shape = [n for n, _, _ in other]
    rows = int(np.prod(rows_shape, dtype=np.int64))
    key = f"tcopy|{ity}|{dims}|{a}|{src_offset}|{dst_offset}"
    name = ctx.unique("sj_tcopy", key)
    if name not in ctx.mb.symbols:
        from .vecmath import select
        kw = KernelWriter(ctx.mb, name, 2)
        sp, dp = kw.args
        with kw.loop(kw.begin, kw.end) as w:          # w = (row * ta + tile_a) * tb + tile_b
            idx = kw.unravel(w, rows_shape + [ta, tb])
            so = kw.offset(idx[:-2], [s for _, s, _ in other], src_offset)
            do = kw.offset(idx[:-2], [d for _, _, d in other], dst_offset)
            a0, b0 = idx[-2] * TILE, idx[-1] * TILE
            a1 = select(a0 + TILE < na, a0 + TILE, kw.i64(na))
            b1 = select(b0 + TILE < nb, b0 + TILE, kw.i64(nb))
            with kw.loop(b0, b1) as j:
                with kw.loop(a0, a1) as i:
                    v = kw.load(ity, sp, so + i * sa + j * sb)
                    kw.store(ity, v, dp, do + i * da + j * db)
        kw.finish()
    return ParallelCall(name, rows * ta * tb, max(1, GRAIN // (TILE * TILE)), [src, dst])


def fill_call(ctx: LoweringContext, dst, value: float) -> ParallelCall | None:
    """A call filling every element of `dst` with `value` (converted like numpy to its dtype)."""
    ity = int_type_of_size(_itemsize(dst))
    if ity is None:
        return None
    with np.errstate(all="ignore"):
        bits = int(np.asarray(value).astype(dst.type.dtype).reshape(1).view(f"i{_itemsize(dst)}")[0])
    name = ctx.unique("sj_fill", f"fill|{ity}|{bits}")
    if name not in ctx.mb.symbols:
        kw = KernelWriter(ctx.mb, name, 1)
        with kw.loop(kw.begin, kw.end) as i:
            kw.store(ity, bits, kw.args[0], i)
        kw.finish()
    return ParallelCall(name, _size(dst), GRAIN, [dst])


# --------------------------------------------------------------------------------------
# Affine maps from the reference implementation
# --------------------------------------------------------------------------------------

def fit_affine(index: np.ndarray) -> tuple[int, list[int]] | None:
    """(offset, strides) with index[i] == offset + sum(i_d * strides[d]) for every i, or None."""
    index = np.asarray(index)
    if index.size == 0:
        return None
    flat = index.reshape(-1)
    offset = int(flat[0])
    strides = []
    for d, n in enumerate(index.shape):
        if n == 1:
            strides.append(0)
            continue
        unit = tuple(1 if k == d else 0 for k in range(index.ndim))
        strides.append(int(index[unit]) - offset)
    pred = np.full(index.shape, offset, dtype=np.int64)
    for d, s in enumerate(strides):
        if s:
            shape = [1] * index.ndim
            shape[d] = index.shape[d]
            pred = pred + np.arange(index.shape[d], dtype=np.int64).reshape(shape) * s
    if not np.array_equal(pred, index.astype(np.int64)):
        return None
    return offset, strides


def refined_shape(node) -> tuple | None:
    """The output index space in which tile, repeat, depth_to_space and space_to_depth are
    affine: each tiled dim split into (copies, input size), the repeated dim into (input
    size, repeats), block dims into (blocks, block). None: the output shape itself."""
    ishape, oshape = tuple(node.inputs[0].type.shape), tuple(node.outputs[0].type.shape)
    if node.op.name == "tile":
        padded = (1,) * (len(oshape) - len(ishape)) + ishape
        if len(padded) != len(oshape) or 0 in padded:
            return None
        return tuple(x for n, k in zip(oshape, padded) for x in (n // k, k))
    if node.op.name in ("depth_to_space", "space_to_depth") and len(oshape) == 4:
        bs = int(node.attrs["block_size"])
        n, c, h, w = oshape
        if node.op.name == "depth_to_space":   # (N, C, H*b, W*b) as (N, C, H, b, W, b)
            return (n, c, h // bs, bs, w // bs, bs)
        return (n, bs, bs, c // (bs * bs), h, w)  # channels of space_to_depth are (b, b, C)
    if node.op.name == "repeat":
        r, axis = node.attrs["repeats"], node.attrs["axis"]
        if axis is None:
            return (int(np.prod(ishape, dtype=np.int64)), r)
        a = axis % len(ishape)
        return oshape[:a] + (ishape[a], r) + oshape[a + 1:]
    return None


def probe_maps(node, refined: tuple | None = None) -> list | None:
    """For each output of a node that moves elements of its input 0: the affine map from
    output index (in `refined`, a finer view of the output shape, when given) to input-0 flat
    index, found by running the node's reference compute on an index array (other inputs
    zero). None if an output is not an affine image."""
    src = node.inputs[0]
    n = _size(src)
    if n == 0 or n > PROBE_LIMIT or n >= 2 ** 53:
        return None
    args = [np.arange(n, dtype=np.float64).reshape(src.type.shape)]
    args += [np.zeros(v.type.shape, np.float64) for v in node.inputs[1:]]
    try:
        results = node.op.compute(node.attrs, args, ComputeContext(False, None))
    except Exception:  # noqa: BLE001 - an op that refuses the probe keeps its Python step
        return None
    maps = []
    for v, r in zip(node.outputs, results):
        r = np.asarray(r)
        if r.shape != tuple(v.type.shape) or not np.array_equal(r, np.floor(r)):
            return None
        if refined is not None:
            if int(np.prod(refined, dtype=np.int64)) != r.size:
                return None
            r = r.reshape(refined)
        m = fit_affine(r)
        if m is None:
            return None
        maps.append(m)
    return maps


# --------------------------------------------------------------------------------------
# Lowerings
# --------------------------------------------------------------------------------------

_PROBED = ("slice", "crop", "slice_axis", "slice_like", "reverse", "flip", "SwapAxis", "swapaxes", "tile",
           "repeat", "broadcast_to", "broadcast_axis", "broadcast_axes", "broadcast_like", "depth_to_space",
           "space_to_depth", "_backward_sum", "SliceChannel", "split")


@register_lowering(*_PROBED)
def lower_probed(node, ctx: LoweringContext):
    """Ops whose outputs are affine images of input 0 (see the module docstring)."""
    src = node.inputs[0]
    if not _known(*node.inputs, *node.outputs) or any(o.type.dtype != src.type.dtype for o in node.outputs):
        return None
    if any(_size(o) == 0 for o in node.outputs):
        return [] if all(_size(o) == 0 for o in node.outputs) else None
    refined = refined_shape(node)
    maps = probe_maps(node, refined)
    if maps is None:
        return None
    calls = []
    for out, (offset, strides) in zip(node.outputs, maps):
        if _size(out) == 0:
            continue
        shape = refined or tuple(out.type.shape)
        c = copy_call(ctx, src, out, shape, strides, row_strides(shape), offset, 0)
        if c is None:
            return None
        calls.append(c)
    return calls


@TABLE.register_trait("moves_elements")
def lower_moves_elements(node, ctx: LoweringContext):
    """A one-input op with the `moves_elements` trait: strided copies probed from its reference
    (the map is verified on every element, so only an affine selection compiles)."""
    if len(node.inputs) != 1:
        return None
    return lower_probed(node, ctx)


@TABLE.register_trait("joins")
def lower_joins(node, ctx: LoweringContext):
    """An op with the `joins` trait (`op.join_axis`): each input copied into its slab."""
    dst = node.outputs[0]
    if not _known(*node.inputs, dst) or any(v.type.dtype != dst.type.dtype for v in node.inputs):
        return None
    found = node.op.join_axis(node.attrs, len(node.inputs[0].type.shape))
    if found is None:
        return None
    axis, new_axis = found
    return _join(ctx, node.inputs, dst, axis, new_axis)


@register_lowering("transpose")
def lower_transpose(node, ctx: LoweringContext):
    from ...ops.shape import transpose_axes
    src, dst = node.inputs[0], node.outputs[0]
    if not _known(src, dst) or _size(dst) == 0:
        return None if not _known(src, dst) else []
    perm = transpose_axes("transpose", node.attrs["axes"], len(src.type.shape))
    st = row_strides(src.type.shape)
    c = copy_call(ctx, src, dst, dst.type.shape, [st[a] for a in perm], row_strides(dst.type.shape))
    return None if c is None else [c]


def _in_its_slab(ctx, part, dst, offset: int, contiguous: bool) -> bool:
    """Whether the memory plan placed `part` at its slab of `dst` (element `offset`, the slab
    contiguous), so that its producer wrote the concatenation (passes/memory_plan.py)."""
    where = ctx.placement.where if ctx.placement is not None else {}
    p, d = where.get(part), where.get(dst)
    return (contiguous and p is not None and d is not None and p[0] == d[0] == "arena"
            and p[1] == d[1] + offset * _itemsize(dst))


def _join(ctx, parts, dst, axis: int, new_axis: bool):
    """Copy each part into its slab of `dst` along `axis` (Concat: existing axis; stack: new),
    except parts already there (`_in_its_slab`)."""
    dshape = tuple(dst.type.shape)
    dst_st = row_strides(dshape)
    contiguous = int(np.prod(dshape[:axis], dtype=np.int64)) == 1
    calls, pos = [], 0
    for p in parts:
        pshape = tuple(p.type.shape)
        width = 1 if new_axis else pshape[axis]
        if _size(p) and not _in_its_slab(ctx, p, dst, pos * dst_st[axis], contiguous):
            shape = pshape[:axis] + (1,) + pshape[axis:] if new_axis else pshape
            src_st = row_strides(shape)
            c = copy_call(ctx, p, dst, shape, src_st, dst_st, 0, pos * dst_st[axis])
            if c is None:
                return None
            calls.append(c)
        pos += width
    return calls


@register_lowering("Concat", "concat", "_rnn_param_concat")
def lower_concat(node, ctx: LoweringContext):
    dst = node.outputs[0]
    if not _known(*node.inputs, dst) or any(v.type.dtype != dst.type.dtype for v in node.inputs):
        return None
    axis = node.attrs["dim"] % len(dst.type.shape)
    return _join(ctx, node.inputs, dst, axis, False)


@register_lowering("stack")
def lower_stack(node, ctx: LoweringContext):
    dst = node.outputs[0]
    if not _known(*node.inputs, dst) or any(v.type.dtype != dst.type.dtype for v in node.inputs):
        return None
    axis = node.attrs["axis"] % len(dst.type.shape)
    return _join(ctx, node.inputs, dst, axis, True)


@register_lowering("Pad", "pad")
def lower_pad(node, ctx: LoweringContext):
    """Constant padding: fill the output, then copy the input into its interior box."""
    src, dst = node.inputs[0], node.outputs[0]
    if node.attrs["mode"] != "constant" or not _known(src, dst) or _size(src) == 0:
        return None
    fill = fill_call(ctx, dst, node.attrs["constant_value"])
    pw = node.attrs["pad_width"]
    dst_st = row_strides(dst.type.shape)
    offset = sum(pw[2 * d] * dst_st[d] for d in range(len(dst_st)))
    c = copy_call(ctx, src, dst, src.type.shape, row_strides(src.type.shape), dst_st, 0, offset)
    return None if fill is None or c is None else [fill, c]


@register_lowering("_slice_assign", "_crop_assign")
def lower_slice_assign(node, ctx: LoweringContext):
    """A copy of lhs (skipped where the plan puts the output in lhs's buffer), then rhs copied
    into the strided box lhs[begin:end:step] of the output (positive steps only)."""
    from ...ops.shape import slice_region
    lhs, rhs = node.inputs
    dst = node.outputs[0]
    if not _known(lhs, rhs, dst) or lhs.type.dtype != dst.type.dtype or rhs.type.dtype != dst.type.dtype:
        return None
    shape = tuple(dst.type.shape)
    region = slice_region(node.op.name, node.attrs, shape)
    if any(step <= 0 for _, step, _ in region):
        return None
    box = tuple(count for _, _, count in region)
    if box != tuple(rhs.type.shape):
        return None
    calls = []
    where = ctx.placement.where if ctx.placement is not None else {}
    in_place = lhs in where and where.get(lhs) == where.get(dst)
    if _size(dst) and not in_place:
        c = copy_call(ctx, lhs, dst, shape, row_strides(shape), row_strides(shape))
        if c is None:
            return None
        calls.append(c)
    if _size(rhs):
        dst_st = row_strides(shape)
        offset = sum(start * st for (start, _, _), st in zip(region, dst_st))
        strides = [step * st for (_, step, _), st in zip(region, dst_st)]
        c = copy_call(ctx, rhs, dst, box, row_strides(box), strides, 0, offset)
        if c is None:
            return None
        calls.append(c)
    return calls


# ---- elementwise-shaped ops: `where`, `_backward_mean` -----------------------------------

def _ew_call(ctx, spec: ElementwiseSpec, args) -> list:
    from .lower_basic import elementwise_call
    return [elementwise_call(ctx, spec, args)]


def _ew_dtypes_ok(*values) -> bool:
    return _known(*values) and all(np.dtype(v.type.dtype).name in SUPPORTED_DTYPES for v in values)


@register_lowering("where")
def lower_where(node, ctx: LoweringContext):
    """where(c, x, y): a select kernel; a (N,) condition broadcasts over rows."""
    c, x, y = node.inputs
    out = node.outputs[0]
    if not _ew_dtypes_ok(c, x, y, out) or x.type.shape != y.type.shape or x.type.dtype != y.type.dtype:
        return None
    cd, xd = np.dtype(c.type.dtype), np.dtype(x.type.dtype)
    # the condition is converted to the compute dtype before the != 0 test: safe when that
    # conversion keeps every nonzero value nonzero
    if not (cd == xd or (cd.kind in "iub" and xd.kind == "f")):
        return None
    shape = tuple(x.type.shape)
    cshape = tuple(c.type.shape)
    if cshape != shape:
        cshape = (cshape[0],) + (1,) * (len(shape) - 1)
    expr = S.select(S.ne(S.Input(0), S.Const(0)), S.Input(1), S.Input(2))
    spec = ElementwiseSpec((expr,), (c.type.dtype, x.type.dtype, y.type.dtype), (cshape, shape, shape),
                           x.type.dtype, (out.type.dtype,), shape)
    return _ew_call(ctx, spec, [c, x, y, out])


@register_lowering("_backward_mean")
def lower_backward_mean(node, ctx: LoweringContext):
    """ograd broadcast back over the reduced axes and divided by their element count."""
    from ...ops.reduce import reduction_axes
    g, d = node.inputs
    out = node.outputs[0]
    if not _ew_dtypes_ok(g, d, out) or _size(out) == 0:
        return None if not _ew_dtypes_ok(g, d, out) else []
    dshape = tuple(d.type.shape)
    axes = reduction_axes("_backward_mean", dshape, node.attrs["axis"], node.attrs["exclude"])
    count = int(np.prod([dshape[a] for a in axes], dtype=np.int64))
    keep = tuple(1 if i in axes else n for i, n in enumerate(dshape))
    spec = ElementwiseSpec((S.Input(0) / S.Const(count),), (g.type.dtype,), (keep,), g.type.dtype,
                           (out.type.dtype,), dshape)
    return _ew_call(ctx, spec, [g, out])


# ---- gathers: take, pick, one_hot ---------------------------------------------------------

_SET_ERROR = "symjit_set_error_str"
SYMJIT_ERR_INDEX = 3


def _error_message(ctx: LoweringContext, text: str) -> str:
    """A module-level constant C string (once per module); returns its symbol."""
    name = ctx.unique("sj_msg", text)
    if name not in ctx.mb.symbols:
        data = text.encode() + b"\0"
        esc = "".join(chr(c) if 32 <= c < 127 and c not in (34, 92) else f"\\{c:02X}" for c in data)
        ctx.mb.functions.append(f"@{name} = private unnamed_addr constant [{len(data)} x i8] c\"{esc}\"\n")
        ctx.mb.symbols.append(name)
    from . import vecmath
    vecmath.INTRINSIC_DECLS.setdefault(_SET_ERROR, f"declare i32 @{_SET_ERROR}(i32, ptr)")
    ctx.mb.intrinsics.add(_SET_ERROR)
    return name


def _fail_if(kw: KernelWriter, cond, msg: str) -> None:
    """Report SYMJIT_ERR_INDEX with `msg` and leave the kernel when `cond` (i1) holds; the
    runtime's parallel-for returns the error and the graph call raises MXNetError."""
    bad, ok = kw.label("err"), kw.label("ok")
    kw.b.raw(f"  br i1 {cond.ref}, label %{bad}, label %{ok}")
    kw.b.raw(f"{bad}:")
    kw.b.raw(f"  %{bad}.rc = call i32 @{_SET_ERROR}(i32 {SYMJIT_ERR_INDEX}, ptr @{msg})")
    kw.b.raw("  ret void")
    kw.b.raw(f"{ok}:")


def _index(ctx, kw: KernelWriter, v, dtype: str, op: str):
    """An index value as i64 like the reference's `_as_index`: floats truncate toward zero;
    a non-finite float is an error."""
    from .elementwise import convert
    from .vecmath import fabs
    if np.dtype(dtype).kind == "f":
        _fail_if(kw, fabs(v).cmp("uge", float("inf")), _error_message(ctx, f"{op}: indices must be finite"))
    return convert(v, dtype, "int64")


def _mapped(ctx, kw: KernelWriter, j, n: int, mode: str, op: str):
    """Position in [0, n) of index j per mode: clip, wrap (numpy modulo) or raise."""
    from .vecmath import select
    if mode == "clip":
        j = select(j < 0, 0, j)
        return select(j > n - 1, n - 1, j)
    if mode == "wrap":
        r = kw.b.ins("i64", f"srem i64 {j.ref}, {n}")
        return select(r < 0, r + n, r)
    _fail_if(kw, (j < 0) | (j > n - 1),
             _error_message(ctx, f"{op}: an index is out of bounds for axis of size {n} (mode='raise')"))
    return j


def _index_dtype_ok(v) -> bool:
    return np.dtype(v.type.dtype).name in SUPPORTED_DTYPES and np.dtype(v.type.dtype).name != "bool"


@register_lowering("take")
def lower_take(node, ctx: LoweringContext):
    """out[p, m, q] = a[p, mode(indices[m]), q] over the (P, N, Q) view of `a` around `axis`."""
    a, idx = node.inputs
    out = node.outputs[0]
    if not _known(a, idx, out) or not _index_dtype_ok(idx) or a.type.dtype != out.type.dtype:
        return None
    ity = int_type_of_size(_itemsize(a))
    shape = tuple(a.type.shape)
    ax = node.attrs["axis"] % len(shape)
    P = int(np.prod(shape[:ax], dtype=np.int64))
    N, Q = shape[ax], int(np.prod(shape[ax + 1:], dtype=np.int64))
    M = _size(idx)
    if ity is None or N == 0:
        return None
    if P * M * Q == 0:
        return []
    mode, dt = node.attrs["mode"], np.dtype(idx.type.dtype).name
    name = ctx.unique("sj_take", f"take|{ity}|{P}|{N}|{Q}|{M}|{mode}|{dt}")
    if name not in ctx.mb.symbols:
        kw = KernelWriter(ctx.mb, name, 3)
        src, ip, dst = kw.args
        with kw.loop(kw.begin, kw.end) as r:          # r = p * M + m
            m = kw.b.ins("i64", f"urem i64 {r.ref}, {M}")
            p = kw.b.ins("i64", f"udiv i64 {r.ref}, {M}")
            j = _mapped(ctx, kw, _index(ctx, kw, kw.load(llvm_type(dt), ip, m), dt, "take"), N, mode, "take")
            so, do = (p * N + j) * Q, r * Q
            with kw.loop(0, Q) as t:
                kw.store(ity, kw.load(ity, src, so + t), dst, do + t)
        kw.finish()
    return [ParallelCall(name, P * M, max(1, GRAIN // max(Q, 1)), [a, idx, out])]


@register_lowering("pick")
def lower_pick(node, ctx: LoweringContext):
    """out[p, q] = data[p, mode(index[p, q]), q] over the (P, N, Q) view around `axis`."""
    d, idx = node.inputs
    out = node.outputs[0]
    if node.attrs["axis"] is None or not _known(d, idx, out) or not _index_dtype_ok(idx):
        return None
    ity = int_type_of_size(_itemsize(d))
    shape = tuple(d.type.shape)
    ax = node.attrs["axis"] % len(shape)
    P = int(np.prod(shape[:ax], dtype=np.int64))
    N, Q = shape[ax], int(np.prod(shape[ax + 1:], dtype=np.int64))
    if ity is None or N == 0 or d.type.dtype != out.type.dtype or _size(idx) != P * Q:
        return None
    if P * Q == 0:
        return []
    mode, dt = node.attrs["mode"], np.dtype(idx.type.dtype).name
    name = ctx.unique("sj_pick", f"pick|{ity}|{P}|{N}|{Q}|{mode}|{dt}")
    if name not in ctx.mb.symbols:
        kw = KernelWriter(ctx.mb, name, 3)
        src, ip, dst = kw.args
        with kw.loop(kw.begin, kw.end) as r:          # r = p * Q + q
            q = kw.b.ins("i64", f"urem i64 {r.ref}, {Q}")
            p = kw.b.ins("i64", f"udiv i64 {r.ref}, {Q}")
            j = _mapped(ctx, kw, _index(ctx, kw, kw.load(llvm_type(dt), ip, r), dt, "pick"), N, mode, "pick")
            kw.store(ity, kw.load(ity, src, (p * N + j) * Q + q), dst, r)
        kw.finish()
    return [ParallelCall(name, P * Q, GRAIN, [d, idx, out])]


@register_lowering("one_hot")
def lower_one_hot(node, ctx: LoweringContext):
    """out[m, k] = on_value if index(indices[m]) == k else off_value."""
    idx, out = node.inputs[0], node.outputs[0]
    if not _known(idx, out) or not _index_dtype_ok(idx):
        return None
    depth, ity = node.attrs["depth"], int_type_of_size(_itemsize(out))
    if ity is None:
        return None
    M = _size(idx)
    if M * depth == 0:
        return []
    with np.errstate(all="ignore"):
        bits = [int(np.asarray(node.attrs[k]).astype(out.type.dtype).reshape(1).view(f"i{_itemsize(out)}")[0])
                for k in ("on_value", "off_value")]
    dt = np.dtype(idx.type.dtype).name
    name = ctx.unique("sj_onehot", f"onehot|{ity}|{depth}|{bits}|{dt}")
    if name not in ctx.mb.symbols:
        from .vecmath import select
        kw = KernelWriter(ctx.mb, name, 2)
        ip, dst = kw.args
        with kw.loop(kw.begin, kw.end) as m:
            j = _index(ctx, kw, kw.load(llvm_type(dt), ip, m), dt, "one_hot")
            with kw.loop(0, depth) as k:
                kw.store(ity, select(k.eq(j), kw.b.const(bits[0], ity), kw.b.const(bits[1], ity)), dst, m * depth + k)
        kw.finish()
    return [ParallelCall(name, M, max(1, GRAIN // max(depth, 1)), [idx, out])]


# ---- Cast from or to float16 ------------------------------------------------------------------

@register_lowering("Cast", "cast")
def lower_cast(node, ctx: LoweringContext):
    """Cast: the elementwise kernel for the dtypes it supports; a conversion kernel through
    LLVM's `half` when either side is float16 (half <-> float32 conversions are exact or
    correctly rounded, like numpy's). float64/int64 -> float16 keep their Python step:
    going through float32 could round twice."""
    from .lower_basic import lower_elementwise
    src, dst = node.inputs[0], node.outputs[0]
    if not _known(src, dst):
        return None
    sd, dd = np.dtype(src.type.dtype).name, np.dtype(dst.type.dtype).name
    if "float16" not in (sd, dd):
        return lower_elementwise(node, ctx)
    from .target import current_machine
    if "+f16c" not in current_machine().features.split(","):
        return None  # without F16C LLVM calls libgcc's half helpers, which the JIT does not link
    ok = set(SUPPORTED_DTYPES) | {"float16"}
    if sd not in ok or dd not in ok or (dd == "float16" and sd in ("float64", "int64")):
        return None  # float64 -> half would round twice through float32 (LLVM's direct path needs libgcc)
    n = _size(src)
    if n == 0:
        return []
    name = ctx.unique("sj_cast16", f"cast16|{sd}|{dd}")
    if name not in ctx.mb.symbols:
        from .elementwise import convert
        kw = KernelWriter(ctx.mb, name, 2)
        sp, dp = kw.args
        with kw.loop(kw.begin, kw.end) as i:
            if sd == "float16":
                v, vd = kw.load("half", sp, i).conv("fpext", "float"), "float32"
            else:
                v, vd = kw.load(llvm_type(sd), sp, i), sd
            if dd == "float16":
                # through float32: exact for the 8/32-bit integers that fit in half's range
                # (larger ones become inf either way), a no-op for float32
                h = convert(v, vd, "float32").conv("fptrunc", "half")
                kw.store("half", h, dp, i)
            else:
                kw.store(llvm_type(dd), convert(v, vd, dd, c_cast=True), dp, i)
        kw.finish()
    return [ParallelCall(name, n, GRAIN, [src, dst])]


# ---- scatter-adds: the gradients of take and pick --------------------------------------------

def _add(kw: KernelWriter, a, b, dtype: str):
    return kw.b.ins(a.ty, f"{'fadd' if np.dtype(dtype).kind == 'f' else 'add'} {a.ty} {a.ref}, {b.ref}")


def _zero(kw: KernelWriter, dtype: str):
    return kw.b.const(0.0 if np.dtype(dtype).kind == "f" else 0, llvm_type(dtype))


@register_lowering("_backward_take")
def lower_backward_take(node, ctx: LoweringContext):
    """out = zeros (P, N, Q); out[p, mode(indices[m]), :] += ograd[p, m, :] in index order (as
    numpy's add.at). Parallel over p: each slab is written by one chunk only."""
    g, idx = node.inputs
    out = node.outputs[0]
    if not _known(g, idx, out) or not _index_dtype_ok(idx) or not _ew_dtypes_ok(g, out):
        return None
    dt = np.dtype(out.type.dtype).name
    if dt == "bool" or g.type.dtype != out.type.dtype:
        return None
    shape = tuple(out.type.shape)
    ax = node.attrs["axis"] % len(shape)
    P = int(np.prod(shape[:ax], dtype=np.int64))
    N, Q = shape[ax], int(np.prod(shape[ax + 1:], dtype=np.int64))
    M = _size(idx)
    if N == 0 or _size(g) != P * M * Q:
        return None
    if P * N * Q == 0:
        return []
    mode, it = node.attrs["mode"], np.dtype(idx.type.dtype).name
    name = ctx.unique("sj_take_back", f"takeback|{dt}|{P}|{N}|{Q}|{M}|{mode}|{it}")
    if name not in ctx.mb.symbols:
        ty = llvm_type(dt)
        kw = KernelWriter(ctx.mb, name, 3)
        gp, ip, dst = kw.args
        with kw.loop(kw.begin, kw.end) as p:
            with kw.loop(0, N * Q) as t:
                kw.store(ty, _zero(kw, dt), dst, p * (N * Q) + t)
            with kw.loop(0, M) as m:
                j = _mapped(ctx, kw, _index(ctx, kw, kw.load(llvm_type(it), ip, m), it, "_backward_take"), N, mode,
                            "_backward_take")
                so, do = (p * M + m) * Q, (p * N + j) * Q
                with kw.loop(0, Q) as q:
                    kw.store(ty, _add(kw, kw.load(ty, dst, do + q), kw.load(ty, gp, so + q), dt), dst, do + q)
        kw.finish()
    return [ParallelCall(name, P, max(1, GRAIN // max(M * Q, 1)), [g, idx, out])]


@register_lowering("_backward_pick")
def lower_backward_pick(node, ctx: LoweringContext):
    """out[p, k, q] = ograd[p, q] where k == mode(index[p, q]) else 0 (one hit per column)."""
    g, idx = node.inputs
    out = node.outputs[0]
    if node.attrs["axis"] is None or not _known(g, idx, out) or not _index_dtype_ok(idx) or not _ew_dtypes_ok(g, out):
        return None
    dt = np.dtype(out.type.dtype).name
    if dt == "bool" or g.type.dtype != out.type.dtype:
        return None
    shape = tuple(out.type.shape)
    ax = node.attrs["axis"] % len(shape)
    P = int(np.prod(shape[:ax], dtype=np.int64))
    N, Q = shape[ax], int(np.prod(shape[ax + 1:], dtype=np.int64))
    if N == 0 or _size(idx) != P * Q or _size(g) != P * Q:
        return None
    if P * Q == 0:
        return []
    mode, it = node.attrs["mode"], np.dtype(idx.type.dtype).name
    name = ctx.unique("sj_pick_back", f"pickback|{dt}|{P}|{N}|{Q}|{mode}|{it}")
    if name not in ctx.mb.symbols:
        from .vecmath import select
        ty = llvm_type(dt)
        kw = KernelWriter(ctx.mb, name, 3)
        gp, ip, dst = kw.args
        with kw.loop(kw.begin, kw.end) as r:          # r = p * Q + q
            q = kw.b.ins("i64", f"urem i64 {r.ref}, {Q}")
            p = kw.b.ins("i64", f"udiv i64 {r.ref}, {Q}")
            j = _mapped(ctx, kw, _index(ctx, kw, kw.load(llvm_type(it), ip, r), it, "_backward_pick"), N, mode,
                        "_backward_pick")
            v = _add(kw, _zero(kw, dt), kw.load(ty, gp, r), dt)      # 0 + g, as add.at into zeros
            with kw.loop(0, N) as k:
                kw.store(ty, select(k.eq(j), v, _zero(kw, dt)), dst, (p * N + k) * Q + q)
        kw.finish()
    return [ParallelCall(name, P * Q, max(1, GRAIN // max(N, 1)), [g, idx, out])]
