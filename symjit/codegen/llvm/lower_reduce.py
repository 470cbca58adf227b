"""Native lowerings of reductions: sum, mean, prod, max, min, nansum, nanprod, norm (ord 1
and 2), argmax, argmin, argmax_channel and `_broadcast_backward` (sum to a broadcast shape).

Canonical form. The input's dims are classified as kept or reduced, size-1 dims dropped
and adjacent dims of the same class merged (`lower_loops.merge_dims`), so any axis set
becomes an alternating sequence such as (outer, reduce, inner) or (reduce, kept, reduce,
kept). The output holds the kept dims in order (C-contiguous), whatever `keepdims` says.
One kernel template covers every case, parallel over output elements:

  * innermost dim kept ("column" reductions such as sum over axis 0 of (R, C)): rows of the
    innermost kept dim are processed in blocks of `BLOCK` outputs with a stack
    accumulator; the reduced dims are a loop nest around a contiguous inner loop over the
    block, which vectorizes;
  * innermost dim reduced ("row" reductions such as sum over the last axis): one
    accumulator per output, a loop nest over the reduced dims whose innermost loop is
    contiguous (float adds are `reassoc`, so the vectorizer splits the sum over lanes).

Numerics: sums, means and products accumulate in the input's dtype like numpy (integers
wrap like numpy's cast of the int64 sum). A column reduction adds rows in order, exactly as
numpy reduces a non-innermost axis (bit-identical results); a row reduction's adds are
reassociated over vector lanes, which is as accurate as numpy's pairwise sum but not
bit-identical. norm computes in float64 like the reference. max/min propagate NaN; argmax/argmin return the first
extreme (a NaN counts as the extreme, as numpy), as an index in the output dtype.
Cases the reference rejects (max of nothing, ...) keep their Python step, which raises.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...base import MXNetError
from ...ops.reduce import reduction_axes
from .elementwise import SUPPORTED_DTYPES, convert
from .graph import TABLE, LoweringContext, ParallelCall, register_lowering
from .lower_loops import GRAIN, KernelWriter, merge_dims, row_strides
from .vecmath import Val, fabs, isnan, select, sqrt

__all__ = ["Reduction", "reduction_call", "BLOCK"]

#: outputs per block of a column reduction (stack accumulator length)
BLOCK = 256

#: independent vector accumulators of a row reduction (hides the add/max latency chain)
INTERLEAVE = 4

_KINDS = ("sum", "mean", "prod", "max", "min", "nansum", "nanprod", "norm1", "norm2", "argmax", "argmin")


@dataclass(frozen=True)
class Reduction:
    """What a reduction computes: `kind` over `axes` of an input of `shape`/`in_dtype`,
    stored as `out_dtype` (the output's element order is the kept dims' C order)."""
    kind: str
    shape: tuple
    axes: tuple
    in_dtype: str
    out_dtype: str

    @property
    def count(self) -> int:
        return int(np.prod([self.shape[a] for a in self.axes], dtype=np.int64))

    @property
    def acc_dtype(self) -> str:
        if self.kind in ("norm1", "norm2"):
            return "float64"
        return self.in_dtype


def _lty(dt: str) -> str:
    return SUPPORTED_DTYPES[dt][0]


def _kind(dt: str) -> str:
    return SUPPORTED_DTYPES[dt][1]


class _Ops:
    """init / update / finish of one reduction in IR (scalars of the accumulator type)."""

    def __init__(self, kw: KernelWriter, red: Reduction):
        self.kw, self.r = kw, red
        self.acc = red.acc_dtype
        self.aty = _lty(self.acc)
        self.k = _kind(red.in_dtype)

    def _extreme(self, largest: bool) -> float | int:
        """The identity of max (largest=False: -inf or the type's minimum) or of min
        (largest=True), as an LLVM literal of the accumulator type."""
        if self.k == "f":
            return float("inf") if largest else float("-inf")
        if self.k == "u":  # signless iN: all ones is the unsigned maximum
            return -1 if largest else 0
        info = np.iinfo(np.dtype(self.r.in_dtype))
        return int(info.max) if largest else int(info.min)

    def init(self) -> list:
        kind, b = self.r.kind, self.kw.b
        if kind in ("sum", "mean", "nansum", "norm1", "norm2"):
            return [b.const(0.0 if self.aty in ("float", "double") else 0, self.aty)]
        if kind in ("prod", "nanprod"):
            return [b.const(1.0 if self.aty in ("float", "double") else 1, self.aty)]
        if kind in ("max", "argmax"):
            v = [b.const(self._extreme(False), self.aty)]
        else:
            v = [b.const(self._extreme(True), self.aty)]
        return v + ([b.const(0, "i64")] if kind.startswith("arg") else [])

    def _greater(self, a: Val, c: Val, largest: bool) -> Val:
        """a beats c (strictly); NaN beats a non-NaN."""
        if self.k == "f":
            strict = a.cmp("ogt" if largest else "olt", c)
            return strict | (isnan(a) & ~isnan(c))
        pred = ("ugt" if largest else "ult") if self.k == "u" else ("sgt" if largest else "slt")
        return a.cmp(pred, c)

    def update(self, acc: list, x: Val, ridx: Val | None) -> list:
        kind, kw = self.r.kind, self.kw
        f = self.k == "f"
        if kind in ("norm1", "norm2"):
            xd = convert(x, self.r.in_dtype, "float64")
            return [kw.fadd(acc[0], fabs(xd) if kind == "norm1" else xd * xd)]
        if kind in ("max", "min"):
            if f:  # NaN-propagating, like numpy
                return [kw.b.call_intr("llvm.maximum" if kind == "max" else "llvm.minimum", x.ty, acc[0], x)]
            return [select(self._greater(x, acc[0], kind == "max"), x, acc[0])]
        if kind in ("argmax", "argmin"):
            better = self._greater(x, acc[0], kind == "argmax")
            return [select(better, x, acc[0]), select(better, ridx, acc[1])]
        xa = convert(x, self.r.in_dtype, self.acc)
        if kind in ("nansum", "nanprod") and f:
            xa = select(isnan(xa), 0.0 if kind == "nansum" else 1.0, xa)
        if kind in ("sum", "mean", "nansum"):
            return [kw.fadd(acc[0], xa) if f else acc[0] + xa]
        return [kw.fmul(acc[0], xa) if f else acc[0] * xa]

    def finish(self, acc: list) -> Val:
        kind, od = self.r.kind, self.r.out_dtype
        if kind in ("argmax", "argmin"):
            return convert(acc[1], "int64", od)
        v = acc[0]
        if kind == "mean":
            n = self.r.count
            if _kind(self.acc) == "f":
                v = v / float(n)
            else:
                op = "udiv" if _kind(self.acc) in "ub" else "sdiv"
                v = self.kw.b.ins(v.ty, f"{op} {v.ty} {v.ref}, {n}")
        elif kind == "norm2":
            v = sqrt(v)
        return convert(v, self.acc, od)


def reduction_call(ctx: LoweringContext, red: Reduction, src, dst) -> list | None:
    """Calls computing `red` from value `src` into value `dst` (see the module docstring)."""
    if red.in_dtype not in SUPPORTED_DTYPES or red.out_dtype not in SUPPORTED_DTYPES:
        return None
    if red.in_dtype == "bool" or red.kind not in _KINDS:
        return None
    n_out = int(np.prod([n for i, n in enumerate(red.shape) if i not in red.axes], dtype=np.int64))
    if n_out == 0:
        return []
    if red.count == 0 and (red.kind in ("max", "min", "argmax", "argmin")
                           or (red.kind == "mean" and np.dtype(red.in_dtype).kind != "f")):
        return None
    if red.count == 0:  # nothing to read: every output is the finished identity
        kept_shape = [n for i, n in enumerate(red.shape) if i not in red.axes]
        merged = merge_dims(kept_shape, [False] * len(kept_shape)) + [(0, True)]
    else:
        merged = merge_dims(red.shape, [i in red.axes for i in range(len(red.shape))])
    strides = row_strides([n for n, _ in merged])
    kept = [(n, s) for (n, r), s in zip(merged, strides) if not r]
    reduced = [(n, s) for (n, r), s in zip(merged, strides) if r]
    if red.kind.startswith("arg") and len(reduced) > 1:
        return None
    column = bool(merged) and not merged[-1][1] and bool(reduced)
    key = f"red|{red.kind}|{red.in_dtype}|{red.out_dtype}|{merged}|{red.count}|{column}"
    name = ctx.unique("sj_reduce", key)
    if name not in ctx.mb.symbols:
        (_emit_column if column else _emit_rows)(ctx, name, red, kept, reduced)
    work = max(red.count, 1)
    return [ParallelCall(name, n_out, max(1, GRAIN // work), [src, dst])]


def _emit_rows(ctx, name: str, red: Reduction, kept, reduced) -> None:
    """One accumulator per output element; the reduced dims form a loop nest."""
    kw = KernelWriter(ctx.mb, name, 2)
    ops = _Ops(kw, red)
    ity, oty = _lty(red.in_dtype), _lty(red.out_dtype)
    src, dst = kw.args
    with kw.loop(kw.begin, kw.end) as q:
        idx = kw.unravel(q, [n for n, _ in kept]) if kept else []
        base = kw.offset(idx, [s for _, s in kept])
        init = ops.init()
        accs = [kw.var(v.ty, v) for v in init]

        def body(offs, ridx):
            x = kw.load(ity, src, offs[0])
            new = ops.update([a.get() for a in accs], x, ridx[0] if ridx else kw.i64(0))
            for a, v in zip(accs, new):
                a.set(v)
        kw.loop_nest([(n, [s]) for n, s in reduced], [base], body, interleave=INTERLEAVE)
        kw.store(oty, ops.finish([a.get() for a in accs]), dst, q)
    kw.finish()


def _emit_column(ctx, name: str, red: Reduction, kept, reduced) -> None:
    """Blocks of the innermost kept dim share a stack accumulator; the reduced loop nest
    wraps a contiguous loop over the block."""
    kw = KernelWriter(ctx.mb, name, 2)
    ops = _Ops(kw, red)
    ity, oty = _lty(red.in_dtype), _lty(red.out_dtype)
    src, dst = kw.args
    inner = kept[-1][0]
    outer = kept[:-1]
    init = ops.init()
    arrays = [kw.array(v.ty, BLOCK) for v in init]
    b = kw.b
    r0 = b.ins("i64", f"udiv i64 %begin, {inner}")
    last = b.ins("i64", "sub i64 %end, 1")
    r1 = b.ins("i64", f"udiv i64 {last.ref}, {inner}") + 1
    with kw.loop(r0, r1) as r:
        row0 = r * inner
        js = _max(kw.begin - row0, kw.i64(0))
        je = _min(kw.end - row0, kw.i64(inner))
        idx = kw.unravel(r, [n for n, _ in outer]) if outer else []
        base = kw.offset(idx, [s for _, s in outer])
        nblocks = b.ins("i64", f"udiv i64 {(je - js + (BLOCK - 1)).ref}, {BLOCK}")
        with kw.loop(0, nblocks) as blk:
            jb = js + blk * BLOCK
            blen = _min(je - jb, kw.i64(BLOCK))
            init = ops.init()
            with kw.loop(0, blen) as t:
                for arr, v in zip(arrays, init):
                    kw.store(v.ty, v, arr, t)
            start = base + jb

            def body(offs, ridx):
                with kw.loop(0, blen) as t:
                    x = kw.load(ity, src, offs[0] + t)
                    accs = [kw.load(v.ty, arr, t) for arr, v in zip(arrays, init)]
                    new = ops.update(accs, x, ridx[0] if ridx else kw.i64(0))
                    for arr, v in zip(arrays, new):
                        kw.store(v.ty, v, arr, t)
            kw.loop_nest([(n, [s]) for n, s in reduced], [start], body)
            with kw.loop(0, blen) as t:
                accs = [kw.load(v.ty, arr, t) for arr, v in zip(arrays, init)]
                kw.store(oty, ops.finish(accs), dst, row0 + jb + t)
    kw.finish()


def _min(a: Val, c: Val) -> Val:
    return select(a < c, a, c)


def _max(a: Val, c: Val) -> Val:
    return select(a > c, a, c)


# --------------------------------------------------------------------------------------
# Lowerings
# --------------------------------------------------------------------------------------

def _known(*values) -> bool:
    return all(v.type.known for v in values)


def _dt(v) -> str:
    return np.dtype(v.type.dtype).name


@register_lowering("sum", "sum_axis", "mean", "prod", "max", "max_axis", "min", "min_axis", "nansum", "nanprod")
def lower_reduce_axes(node, ctx: LoweringContext):
    src, dst = node.inputs[0], node.outputs[0]
    if not _known(src, dst):
        return None
    shape = tuple(src.type.shape)
    axes = reduction_axes(node.op.name, shape, node.attrs["axis"], node.attrs["exclude"])
    kind = {"sum_axis": "sum", "max_axis": "max", "min_axis": "min"}.get(node.op.name, node.op.name)
    return reduction_call(ctx, Reduction(kind, shape, axes, _dt(src), _dt(dst)), src, dst)


@register_lowering("norm")
def lower_norm(node, ctx: LoweringContext):
    src, dst = node.inputs[0], node.outputs[0]
    if not _known(src, dst) or node.attrs["ord"] not in (1, 2):
        return None
    shape = tuple(src.type.shape)
    axes = reduction_axes("norm", shape, node.attrs["axis"], False)
    return reduction_call(ctx, Reduction(f"norm{node.attrs['ord']}", shape, axes, _dt(src), _dt(dst)), src, dst)


@register_lowering("argmax", "argmin", "argmax_channel")
def lower_arg_reduce(node, ctx: LoweringContext):
    src, dst = node.inputs[0], node.outputs[0]
    if not _known(src, dst):
        return None
    shape = tuple(src.type.shape)
    axis, _ = node.op.search(node.attrs)
    if axis is None:
        axes = tuple(range(len(shape)))
    elif -len(shape) <= axis < len(shape):
        axes = (axis % len(shape),)
    else:
        return None
    kind = "argmin" if node.op.name == "argmin" else "argmax"
    return reduction_call(ctx, Reduction(kind, shape, axes, _dt(src), _dt(dst)), src, dst)


@TABLE.register_trait("reduces")
def lower_reduces(node, ctx: LoweringContext):
    """An op with the `reduces` trait (ops/registry.py): its reduction over `reduced_axes`."""
    src, dst = node.inputs[0], node.outputs[0]
    if not _known(src, dst):
        return None
    shape = tuple(src.type.shape)
    try:
        axes = node.op.reduced_axes(node.attrs, shape, _dt(src))
    except MXNetError:   # the reference reports bad attributes
        return None
    if axes is None:
        return None
    return reduction_call(ctx, Reduction(node.op.reduces, shape, tuple(axes), _dt(src), _dt(dst)), src, dst)


@register_lowering("_broadcast_backward")
def lower_broadcast_backward(node, ctx: LoweringContext):
    """Sum `data` down to `like`'s shape (the reverse of numpy broadcasting)."""
    src, like = node.inputs
    dst = node.outputs[0]
    if not _known(src, like, dst):
        return None
    shape, target = tuple(src.type.shape), tuple(like.type.shape)
    lead = len(shape) - len(target)
    if lead < 0 or any(t not in (1, s) for s, t in zip(shape[lead:], target)):
        return None
    axes = tuple(range(lead)) + tuple(lead + i for i, t in enumerate(target) if t == 1 and shape[lead + i] != 1)
    return reduction_call(ctx, Reduction("sum", shape, axes, _dt(src), _dt(dst)), src, dst)
