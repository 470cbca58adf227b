"""Loop-nest kernel writer shared by the reduction, normalization and data-movement lowerings.

`KernelWriter` builds one runtime kernel `void NAME(i64 begin, i64 end, ptr args)` (the
signature `symjit_parallel_for` calls) as textual LLVM IR with structured helpers:
counted loops, conditionals, mutable scalar variables and arrays, typed loads and stores.
Loop counters and variables live in `alloca`s placed in the entry block; LLVM's SROA turns
them into SSA registers before the loop vectorizer runs, so simple inner loops (a
contiguous reduction with `reassoc` adds, an elementwise row) vectorize like hand-written
phi code while the generators stay readable.

Also here: `merge_dims`, the canonical form of an index space (size-1 dims dropped,
adjacent dims of the same class merged), used to turn "reduce axes (1, 2) of (4, 5, 6, 7)"
into (outer, reduce, inner) = (4, 30, 7) and friends.

Invariant of every kernel written with this module: chunk [begin, end) of the parallel
index space writes only the output elements that belong to that chunk, so disjoint chunks
may run concurrently (runtime/README.md, "Kernels and the thread pool").
"""
from __future__ import annotations

import contextlib
from typing import Sequence

import numpy as np

from .elementwise import SUPPORTED_DTYPES, ModuleBuilder
from .vecmath import FnBuilder, Val

__all__ = ["KernelWriter", "merge_dims", "llvm_type", "int_type_of_size", "row_strides", "GRAIN"]

#: elements of work per parallel chunk: below this a kernel runs inline on the caller. A chunk of
#: 64K elements is ~10 us of elementwise work, about what handing it to a worker costs on a busy
#: machine (2 threads, benchmarks/bench_small_models.py --section grain: a 64K-element fused
#: multiply-add-relu 36 us wall in 16K chunks, 15 us in one)
GRAIN = 65536


def llvm_type(dtype) -> str | None:
    """The LLVM scalar type of a numpy dtype name, or None if the codegen cannot compute in it."""
    name = np.dtype(dtype).name
    return SUPPORTED_DTYPES[name][0] if name in SUPPORTED_DTYPES else None


def int_type_of_size(nbytes: int) -> str | None:
    """An integer type of `nbytes` bytes (data movement copies bits, whatever the dtype)."""
    return {1: "i8", 2: "i16", 4: "i32", 8: "i64"}.get(nbytes)


def row_strides(shape: Sequence[int]) -> list[int]:
    """C-contiguous element strides of `shape`."""
    st, s = [0] * len(shape), 1
    for d in reversed(range(len(shape))):
        st[d] = s
        s *= int(shape[d])
    return st


def merge_dims(shape: Sequence[int], classes: Sequence) -> list[tuple[int, object]]:
    """Canonical index space: [(size, class)] with size-1 dims dropped and adjacent dims of
    equal class merged (their elements are contiguous in C order, so the merged dim is one
    dim of the product size)."""
    out: list[list] = []
    for n, c in zip(shape, classes):
        if n == 1:
            continue
        if out and out[-1][1] == c:
            out[-1][0] *= int(n)
        else:
            out.append([int(n), c])
    return [(n, c) for n, c in out]


class Var:
    """A mutable scalar (an alloca) of LLVM type `ty`."""

    def __init__(self, kw: "KernelWriter", ty: str, ptr: str):
        self.kw, self.ty, self.ptr = kw, ty, ptr

    def get(self) -> Val:
        return self.kw.b.ins(self.ty, f"load {self.ty}, ptr {self.ptr}")

    def set(self, v) -> None:
        v = self.kw.as_val(v, self.ty)
        self.kw.b.raw(f"  store {self.ty} {v.ref}, ptr {self.ptr}")


class KernelWriter:
    """Builds one kernel (see the module docstring). Use `args[i]` (the i-th data pointer),
    `begin`/`end`, the helpers below, then `finish()` to add it to the module."""

    def __init__(self, mb: ModuleBuilder, name: str, n_args: int):
        self.mb, self.name = mb, name
        self.b = FnBuilder("k")
        self.allocas: list[str] = []
        self._labels = 0
        self._unroll_md: str | None = None
        self.begin = Val(self.b, "i64", "%begin")
        self.end = Val(self.b, "i64", "%end")
        self.args = []
        for i in range(n_args):
            gp = self.b.ins("ptr", f"getelementptr inbounds ptr, ptr %args, i64 {i}")
            self.args.append(self.b.ins("ptr", f"load ptr, ptr {gp.ref}, align 8"))

    # ---- values -------------------------------------------------------------------
    def as_val(self, v, ty: str) -> Val:
        return v if isinstance(v, Val) else self.b.const(v, ty)

    def i64(self, v) -> Val:
        return self.as_val(v, "i64")

    def label(self, hint: str) -> str:
        self._labels += 1
        return f"{hint}{self._labels}"

    def var(self, ty: str, init=None) -> Var:
        ptr = self.b.fresh("v")
        self.allocas.append(f"  {ptr} = alloca {ty}, align 8")
        v = Var(self, ty, ptr)
        if init is not None:
            v.set(init)
        return v

    def array(self, ty: str, n: int) -> Val:
        """A stack array of `n` elements of `ty` (scratch for blocked reductions)."""
        ptr = self.b.fresh("a")
        self.allocas.append(f"  {ptr} = alloca [{n} x {ty}], align 64")
        return Val(self.b, "ptr", ptr)

    # ---- memory -------------------------------------------------------------------
    def gep(self, ty: str, ptr: Val, idx) -> Val:
        idx = self.i64(idx)
        return self.b.ins("ptr", f"getelementptr {ty}, ptr {ptr.ref}, i64 {idx.ref}")

    def load(self, ty: str, ptr: Val, idx=None) -> Val:
        p = ptr if idx is None else self.gep(ty, ptr, idx)
        return self.b.ins(ty, f"load {ty}, ptr {p.ref}")

    def store(self, ty: str, v, ptr: Val, idx=None) -> None:
        p = ptr if idx is None else self.gep(ty, ptr, idx)
        v = self.as_val(v, ty)
        self.b.raw(f"  store {ty} {v.ref}, ptr {p.ref}")

    def memcpy(self, dst: Val, src: Val, nbytes) -> None:
        """Copy `nbytes` bytes from `src` to `dst` (pointers; the regions do not overlap) with
        the C library's memcpy (llvm.memcpy, which every module declares)."""
        n = self.i64(nbytes)
        self.b.raw(f"  call void @llvm.memcpy.p0.p0.i64(ptr {dst.ref}, ptr {src.ref}, i64 {n.ref}, i1 false)")

    # ---- control flow ---------------------------------------------------------------
    @contextlib.contextmanager
    def loop(self, lo, hi, interleave: int | None = None):
        """`for i in range(lo, hi)`; yields i (i64). `interleave`: vector accumulators the
        vectorizer should use (breaks the dependence chain of a reduction)."""
        lo, hi = self.i64(lo), self.i64(hi)
        cnt = self.var("i64", lo)
        head, body, done = self.label("lh"), self.label("lb"), self.label("ld")
        L = self.b.raw
        L(f"  br label %{head}")
        L(f"{head}:")
        i = cnt.get()
        c = self.b.ins("i1", f"icmp slt i64 {i.ref}, {hi.ref}")
        L(f"  br i1 {c.ref}, label %{body}, label %{done}")
        L(f"{body}:")
        yield i
        cnt.set(i + 1)
        L(f"  br label %{head}, !llvm.loop {self._loop_md(interleave)}")
        L(f"{done}:")

    def _loop_md(self, interleave: int | None = None) -> str:
        """Loop metadata: no full unrolling. Unrolling a short constant-trip loop (a
        reduction over 15 elements, say) would leave a long dependent select chain that the
        vectorizer then analyses for the *outer* loop in exponential time; the vectorizer
        still widens and interleaves these loops."""
        if self._unroll_md is None:
            self._unroll_md = self.mb.md('!"llvm.loop.unroll.disable"')
        extra = f", !{{!\"llvm.loop.interleave.count\", i32 {interleave}}}" if interleave else ""
        return self.mb.md(f"!{{!\"llvm.loop.mustprogress\"}}, {self._unroll_md}{extra}", distinct=True,
                          self_ref=True)

    @contextlib.contextmanager
    def if_(self, cond: Val):
        then, done = self.label("it"), self.label("id")
        self.b.raw(f"  br i1 {cond.ref}, label %{then}, label %{done}")
        self.b.raw(f"{then}:")
        yield
        self.b.raw(f"  br label %{done}")
        self.b.raw(f"{done}:")

    def loop_nest(self, dims: Sequence[tuple[int, Sequence[int]]], bases: Sequence[Val], body,
                  interleave: int | None = None) -> None:
        """Nested loops over `dims` = [(size, [stride of pointer k])], outermost first;
        `body(offsets, indices)` runs innermost with offsets[k] = bases[k] + sum(i_d *
        stride_d[k]) and indices the loop counters (no dims: the body runs once);
        `interleave` applies to the innermost loop."""
        def rec(d: int, offs: list, idx: list) -> None:
            if d == len(dims):
                body(offs, idx)
                return
            size, strides = dims[d]
            with self.loop(0, size, interleave if d == len(dims) - 1 else None) as i:
                rec(d + 1, [o if s == 0 else o + i * s for o, s in zip(offs, strides)], idx + [i])
        rec(0, [self.i64(b) for b in bases], [])

    def unravel(self, flat: Val, shape: Sequence[int]) -> list[Val]:
        """Per-dimension indices of C-order flat index `flat` in `shape`."""
        idx, rem = [], flat
        for d in reversed(range(len(shape))):
            if d == 0:
                idx.append(rem)
            else:
                idx.append(self.b.ins("i64", f"urem i64 {rem.ref}, {int(shape[d])}"))
                rem = self.b.ins("i64", f"udiv i64 {rem.ref}, {int(shape[d])}")
        return idx[::-1]

    def offset(self, idx: Sequence[Val], strides: Sequence[int], base=0) -> Val:
        off = self.i64(base)
        for i, s in zip(idx, strides):
            if s:
                off = off + i * int(s)
        return off

    # ---- arithmetic helpers ------------------------------------------------------------
    def fadd(self, a: Val, b: Val) -> Val:
        """Float add that may be reassociated (lets the vectorizer split a sum over lanes)."""
        return self.b.ins(a.ty, f"fadd reassoc {a.ty} {a.ref}, {b.ref}")

    def fmul(self, a: Val, b: Val) -> Val:
        return self.b.ins(a.ty, f"fmul reassoc {a.ty} {a.ref}, {b.ref}")

    def finish(self) -> str:
        self.b.raw("  ret void")
        body = self.allocas + self.b.lines
        self.mb.intrinsics |= self.b.used_intrinsics
        self.mb.functions.append(f"define void @{self.name}(i64 %begin, i64 %end, ptr %args) #1 {{\n"
                                 "entry:\n" + "\n".join(body) + "\n}\n")
        self.mb.symbols.append(self.name)
        return self.name
