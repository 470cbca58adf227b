"""LLVM code generation for fused elementwise kernels.

A kernel computes one or more outputs of one shape from scalar expressions
(`symjit.ops.scalar.Expr`) over broadcast inputs:

    void NAME(i64 begin, i64 end, i8** args)
    args[0 .. n_in-1]            input data pointers (C-contiguous, shapes broadcast to the output)
    args[n_in .. n_in+n_out-1]   output data pointers (C-contiguous, the output shape)

and writes flat output elements [begin, end), so a parallel-for can split any range over
threads. The index space is simplified first (size-1 output dims dropped, adjacent dims
with the same broadcast pattern merged). When it collapses to one dimension, one flat loop
runs with every input either contiguous (stride 1) or a scalar (loaded once); otherwise a
loop nest walks rows of the innermost dimension, computing each input's row offset once per
row, and the inner loop reads each input with stride 1 or 0. Inner loops carry
`llvm.loop.parallel_accesses` metadata: an elementwise loop has no loop-carried
dependence even when an output buffer is an input buffer (in-place), so the vectorizer
needs no runtime alias checks.

Semantics follow `scalar.evaluate` (the numpy reference): inputs convert to the compute
dtype like numpy's `astype` on x86; every node's value has a dtype (the compute dtype, or a
cast's target); comparisons yield 1/0; integer division truncates and x/0 == 0; `cast` has
C semantics with nan/inf -> 0 and float -> small ints through int64 (`scalar._c_cast`).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...base import MXNetError
from ...ops import scalar as S
from . import vecmath as V
from .nontemporal import STREAM_MIN_BYTES, STREAM_MIN_CALL_BYTES, STREAM_SUFFIX
from .target import current_machine, host_target, target_feature_set
from .vecmath import FnBuilder, Val, fabs, select

__all__ = ["ElementwiseSpec", "ModuleBuilder", "emit_elementwise", "emit_elementwise_call", "elementwise_module", "kernel_name", "code_key",
           "SUPPORTED_DTYPES", "simplify_index_space"]

#: dtype name -> (LLVM type, kind): f float, s signed, u unsigned, b bool (i8 holding 0/1)
SUPPORTED_DTYPES: dict[str, tuple[str, str]] = {
    "float32": ("float", "f"), "float64": ("double", "f"), "int32": ("i32", "s"), "int64": ("i64", "s"),
    "int8": ("i8", "s"), "uint8": ("i8", "u"), "bool": ("i8", "b"),
}
_BITS = {"float": 32, "double": 64, "i8": 8, "i32": 32, "i64": 64}


def _dt(name) -> str:
    n = np.dtype(name).name
    if n not in SUPPORTED_DTYPES:
        raise MXNetError(f"codegen: dtype {n} is not supported by the LLVM backend "
                         f"(supported: {', '.join(SUPPORTED_DTYPES)})")
    return n


# --------------------------------------------------------------------------------------
# The kernel description
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ElementwiseSpec:
    """What an elementwise kernel computes.

    exprs[j] is output j's expression over Input(0..n_in-1), evaluated in `compute_dtype`
    and stored as out_dtypes[j]; every input shape broadcasts to `out_shape` (numpy rules).
    """
    exprs: tuple
    in_dtypes: tuple
    in_shapes: tuple
    compute_dtype: str
    out_dtypes: tuple
    out_shape: tuple

    def __post_init__(self):
        object.__setattr__(self, "exprs", tuple(self.exprs))
        object.__setattr__(self, "in_dtypes", tuple(_dt(d) for d in self.in_dtypes))
        object.__setattr__(self, "in_shapes", tuple(tuple(int(x) for x in s) for s in self.in_shapes))
        object.__setattr__(self, "compute_dtype", _dt(self.compute_dtype))
        object.__setattr__(self, "out_dtypes", tuple(_dt(d) for d in self.out_dtypes))
        object.__setattr__(self, "out_shape", tuple(int(x) for x in self.out_shape))
        if len(self.in_dtypes) != len(self.in_shapes):
            raise MXNetError(f"codegen: {len(self.in_dtypes)} input dtypes but {len(self.in_shapes)} shapes")
        if len(self.exprs) != len(self.out_dtypes) or not self.exprs:
            raise MXNetError(f"codegen: {len(self.exprs)} expressions but {len(self.out_dtypes)} output dtypes")
        for e in self.exprs:
            used = S.inputs_of(e)
            if used and max(used) >= len(self.in_dtypes):
                raise MXNetError(f"codegen: expression {S.to_text(e)} reads input {max(used)} "
                                 f"but the kernel has {len(self.in_dtypes)} inputs")
        for i, s in enumerate(self.in_shapes):
            if len(s) > len(self.out_shape) or any(
                    a not in (1, b) for a, b in zip(s[::-1], self.out_shape[::-1])):
                raise MXNetError(f"codegen: input {i} shape {s} does not broadcast to output shape "
                                 f"{self.out_shape}")

    def key(self) -> str:
        """A stable text naming exactly what the kernel computes (cache keys, symbol names)."""
        return "|".join([";".join(S.to_text(e) for e in self.exprs), ",".join(self.in_dtypes),
                         repr(self.in_shapes), self.compute_dtype, ",".join(self.out_dtypes),
                         repr(self.out_shape)])


def code_key(spec: ElementwiseSpec) -> str:
    """What the generated code depends on: the expressions, dtypes and the *simplified* index
    space. A flat kernel (one loop) does not depend on the size at all, so every size of a
    contiguous elementwise op shares one compiled kernel."""
    shape, strides = simplify_index_space(spec.out_shape, spec.in_shapes)
    if len(shape) <= 1:
        space = "flat:" + ",".join(str(st[0] if shape else 0) for st in strides)
    else:
        space = f"nest:{shape}:{strides}"
    return "|".join([";".join(S.to_text(e) for e in spec.exprs), ",".join(spec.in_dtypes),
                     spec.compute_dtype, ",".join(spec.out_dtypes), space])


def kernel_name(spec: ElementwiseSpec, prefix: str = "sj_ew") -> str:
    """A symbol name derived from the code key (same code -> same name, different code ->
    different name), so names are unique in a process and stable across processes."""
    return f"{prefix}_{hashlib.sha1(code_key(spec).encode()).hexdigest()[:20]}"


def simplify_index_space(out_shape: Sequence[int], in_shapes: Sequence[Sequence[int]]):
    """Collapse the index space: drop size-1 output dims, merge adjacent dims where every
    input is broadcast in both or in neither. Returns (shape, strides) with strides[k][d] the
    element stride of input k along collapsed dim d (0 on broadcast dims)."""
    nd = len(out_shape)
    padded = [(1,) * (nd - len(s)) + tuple(s) for s in in_shapes]
    dims = [d for d in range(nd) if out_shape[d] != 1]
    shape: list[int] = []
    flags: list[list[bool]] = []           # flags[d][k]: input k broadcast along dim d
    for d in dims:
        f = [p[d] == 1 for p in padded]
        if flags and flags[-1] == f:
            shape[-1] *= out_shape[d]
        else:
            shape.append(out_shape[d])
            flags.append(f)
    strides = []
    for k in range(len(in_shapes)):
        st, s = [0] * len(shape), 1
        for d in reversed(range(len(shape))):
            if not flags[d][k]:
                st[d] = s
                s *= shape[d]
        strides.append(st)
    return shape, strides


# --------------------------------------------------------------------------------------
# Module assembly
# --------------------------------------------------------------------------------------

class ModuleBuilder:
    """Collects kernels, the math functions they use (once each), intrinsic declarations and
    metadata into one LLVM module (one module per compiled graph)."""

    def __init__(self):
        self.functions: list[str] = []
        #: math functions used, by (op, type); their text is emitted for the target at render
        self.math_ops: list[tuple[str, str]] = []
        self.helpers: dict[tuple[str, str], str] = {}
        self.intrinsics: set[str] = set()
        self.metadata: list[str] = []
        self.symbols: list[str] = []
        #: shape-generic kernels and constant tables already in the module (`emit_elementwise_call`,
        #: `i64_table`)
        self.generic_parts: set[str] = set()

    def i64_table(self, values: Sequence[int]) -> str:
        """The name of a private constant i64 array of the module holding `values` (added once
        per distinct contents), e.g. the extents a shape-generic kernel reads."""
        values = [int(x) for x in values]
        name = f"sj_dims_{hashlib.sha1(repr(values).encode()).hexdigest()[:16]}"
        if name not in self.generic_parts:
            self.generic_parts.add(name)
            self.functions.append(f"@{name} = private unnamed_addr constant [{len(values)} x i64] "
                                  f"[{', '.join(f'i64 {x}' for x in values)}], align 8\n")
        return name

    def math_function(self, op: str, ty: str) -> str:
        if (op, ty) not in self.math_ops:
            self.math_ops.append((op, ty))
        return V.math_function_name(op, ty)

    def int_pow_function(self, ty: str, signed: bool) -> str:
        name, text = _int_pow_function(ty, signed)
        self.helpers.setdefault(("ipow", f"{ty}{signed}"), text)
        return name

    def md(self, body: str, distinct: bool = False, self_ref: bool = False) -> str:
        """Add a metadata node; `self_ref` prepends the node itself (loop ids)."""
        ident = f"!{len(self.metadata)}"
        if self_ref:
            body = f"{ident}, {body}" if body else ident
        self.metadata.append(f"{ident} = {'distinct ' if distinct else ''}!{{{body}}}")
        return ident

    def render(self, target=None) -> str:
        """The module text for `target` (default: the host)."""
        t = target or host_target()
        feats = f' "target-features"="{t.features}"' if t.features else ""
        attrs = f'"target-cpu"="{t.cpu}"{feats} "no-trapping-math"="true"'
        features = target_feature_set(t)
        intrinsics = set(self.intrinsics)
        math = []
        for op, ty in self.math_ops:
            text, used = V.emit_math_function(op, ty, features)
            math.append(text)
            intrinsics |= used
        decls = sorted(V.INTRINSIC_DECLS[n] for n in intrinsics)
        parts = [f'target triple = "{t.triple}"', f'target datalayout = "{t.data_layout}"', ""]
        parts += math + list(self.helpers.values()) + self.functions + decls
        parts += [f"attributes #0 = {{ alwaysinline nounwind {attrs} }}",
                  f"attributes #1 = {{ nounwind {attrs} }}",
                  f"attributes #2 = {{ nounwind {attrs} }}",
                  f"attributes #3 = {{ noinline nounwind {attrs} }}",
                  f"attributes #4 = {{ noinline optnone nounwind {attrs} }}"]
        parts += self.metadata
        return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------------------
# Conversions between dtypes
# --------------------------------------------------------------------------------------

def _lty(dt: str) -> str:
    return SUPPORTED_DTYPES[dt][0]


def _kind(dt: str) -> str:
    return SUPPORTED_DTYPES[dt][1]


def _float_to_int(v: Val, width: int) -> Val:
    """x86 conversion semantics (what numpy's casts do): nan or out of range -> INT_MIN."""
    lim = float(2 ** (width - 1))
    ity = f"i{width}"
    ok = fabs(v) < lim
    i = select(ok, v, 0.0).conv("fptosi", ity)
    return select(ok, i, -(2 ** (width - 1)))


def _int_resize(v: Val, src: str, dst_ty: str) -> Val:
    sb, db = _BITS[v.ty], _BITS[dst_ty]
    if sb == db:
        return v
    if sb > db:
        return v.conv("trunc", dst_ty)
    return v.conv("sext" if _kind(src) == "s" else "zext", dst_ty)


def convert(v: Val, src: str, dst: str, c_cast: bool = False) -> Val:
    """Convert a value of dtype `src` to `dst`: numpy `astype` semantics on x86, or with
    `c_cast` the semantics of `scalar._c_cast` (nan/inf -> 0, floats to ints through int64)."""
    if src == dst:
        return v
    sk, dk, dty = _kind(src), _kind(dst), _lty(dst)
    if dk == "b":
        nz = v.ne(0.0) if sk == "f" else v.ne(0)
        return nz.conv("zext", "i8")
    if sk == "f":
        if dk == "f":
            return v.conv("fpext" if _BITS[dty] > _BITS[v.ty] else "fptrunc", dty)
        if c_cast:
            finite = fabs(v) < float("inf")
            i64 = _float_to_int(V.trunc(select(finite, v, 0.0)), 64)
            return _int_resize(i64, "int64", dty)
        width = 64 if dst == "int64" else 32
        return _int_resize(_float_to_int(v, width), "int64" if width == 64 else "int32", dty)
    if dk == "f":
        return v.conv("sitofp" if sk == "s" else "uitofp", dty)
    return _int_resize(v, src, dty)


def _result_dtype(a: str, b: str) -> str:
    """numpy's promotion of two dtypes, mapped into the supported set (int16 -> int32)."""
    r = np.result_type(np.dtype(a), np.dtype(b)).name
    return {"int16": "int32", "uint16": "int32", "uint32": "int64", "uint64": "float64",
            "float16": "float32"}.get(r, r)


# --------------------------------------------------------------------------------------
# Expression lowering
# --------------------------------------------------------------------------------------

_FCMP = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}
_ICMP_S = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}
_ICMP_U = {"lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge", "eq": "eq", "ne": "ne"}
_ROUNDING = {"floor", "ceil", "rint", "round", "trunc"}


class _Lowering:
    """Lowers an expression DAG to SSA values inside one loop body (shared nodes once)."""

    def __init__(self, b: FnBuilder, mb: ModuleBuilder, spec: ElementwiseSpec, load_input):
        self.b, self.mb, self.spec = b, mb, spec
        self.load_input = load_input           # i -> Val in the input's dtype
        self.memo: dict = {}

    def gen(self, e) -> tuple[Val, str]:
        r = self.memo.get(e)
        if r is None:
            r = self._gen(e)
            self.memo[e] = r
        return r

    def _bool01(self, c: Val, dt: str) -> Val:
        """An i1 as 1/0 in dtype dt."""
        ty = _lty(dt)
        if _kind(dt) == "f":
            return c.conv("uitofp", ty)
        return c.conv("zext", ty)

    def _nonzero(self, v: Val, dt: str) -> Val:
        return v.ne(0.0) if _kind(dt) == "f" else v.ne(0)

    def _gen(self, e):
        cd = self.spec.compute_dtype
        op = e.op
        if op == "input":
            i = e.value
            return convert(self.load_input(i), self.spec.in_dtypes[i], cd), cd
        if op == "const":
            with np.errstate(all="ignore"):
                c = np.asarray(e.value).astype(cd)
            return self.b.const(float(c) if _kind(cd) == "f" else int(c), _lty(cd)), cd
        if op == "cast":
            v, dt = self.gen(e.args[0])
            to = _dt(e.value)
            return convert(v, dt, to, c_cast=True), to
        if op == "select":
            (c, cdt), (a, adt), (bv, bdt) = (self.gen(x) for x in e.args)
            rdt = _result_dtype(adt, bdt)
            return select(self._nonzero(c, cdt), convert(a, adt, rdt), convert(bv, bdt, rdt)), rdt
        if op in S.UNARY and len(e.args) == 1:
            v, dt = self.gen(e.args[0])
            if op == "not":
                return self._bool01(self._nonzero(v, dt).cmp("eq", self.b.const(0, "i1")), cd), cd
            return self._unary(op, v, dt), dt
        if op in S.BINARY and len(e.args) == 2:
            (a, adt), (bv, bdt) = self.gen(e.args[0]), self.gen(e.args[1])
            if adt != bdt:                     # numpy promotes, then the result takes arg 0's dtype
                rdt = _result_dtype(adt, bdt)
                r = self._binary(op, convert(a, adt, rdt), convert(bv, bdt, rdt), rdt)
                return convert(r, rdt, adt), adt
            return self._binary(op, a, bv, adt), adt
        raise MXNetError(f"codegen: scalar primitive {op!r} with {len(e.args)} arguments is not supported")

    # ---- unary ------------------------------------------------------------------
    def _math(self, op: str, *args: Val) -> Val:
        fn = self.mb.math_function(op, args[0].ty)
        alist = ", ".join(f"{a.ty} {a.ref}" for a in args)
        return self.b.ins(args[0].ty, f"call {args[0].ty} @{fn}({alist})")

    def _unary(self, op: str, v: Val, dt: str) -> Val:
        k = _kind(dt)
        if k == "f":
            if op == "neg":
                return -v
            if op == "abs":
                return fabs(v)
            if op == "sign":
                return select(v > 0.0, 1.0, select(v < 0.0, -1.0, v))
            if op in ("sqrt", "floor", "ceil", "trunc"):
                return getattr(V, op)(v)
            return self._math(op, v)
        # integer and bool dtypes
        if op in _ROUNDING:
            return v
        if k == "b":                          # abs, sign (and neg, which numpy refuses) keep 0/1
            if op in ("abs", "sign", "neg"):
                return v
            return convert(self._unary(op, convert(v, dt, "float64"), "float64"), "float64", dt)
        if op == "neg":
            return -v
        if op == "abs":
            return v if k == "u" else select(v < 0, -v, v)
        if op == "sign":
            if k == "u":
                return v.ne(0).conv("zext", v.ty)
            return (v > 0).conv("zext", v.ty) - (v < 0).conv("zext", v.ty)
        # transcendental functions of integers: numpy computes in float64 and casts back
        return convert(self._unary(op, convert(v, dt, "float64"), "float64"), "float64", dt)

    # ---- binary -----------------------------------------------------------------
    def _binary(self, op: str, a: Val, bv: Val, dt: str) -> Val:
        k = _kind(dt)
        if op in _FCMP:
            c = a.cmp(_FCMP[op], bv) if k == "f" else a.cmp((_ICMP_U if k in "ub" else _ICMP_S)[op], bv)
            return self._bool01(c, dt)
        if op in ("and", "or", "xor"):
            na, nb = self._nonzero(a, dt), self._nonzero(bv, dt)
            c = {"and": na & nb, "or": na | nb, "xor": na ^ nb}[op]
            return self._bool01(c, dt)
        if k == "f":
            if op == "add":
                return a + bv
            if op == "sub":
                return a - bv
            if op == "mul":
                return a * bv
            if op == "div":
                return a / bv
            if op in ("max", "min"):
                pick_a = (a > bv) if op == "max" else (a < bv)
                return select(pick_a | V.isnan(a), a, bv)
            return self._math(op, a, bv)
        if k == "b":
            r = self._binary(op, convert(a, dt, "uint8"), convert(bv, dt, "uint8"), "uint8")
            return r.ne(0).conv("zext", "i8")
        return self._int_binary(op, a, bv, dt, k == "s")

    def _int_binary(self, op: str, a: Val, bv: Val, dt: str, signed: bool) -> Val:
        if op == "add":
            return a + bv
        if op == "sub":
            return a - bv
        if op == "mul":
            return a * bv
        if op in ("max", "min"):
            pred = {("max", True): "sgt", ("max", False): "ugt", ("min", True): "slt", ("min", False): "ult"}
            return select(a.cmp(pred[(op, signed)], bv), a, bv)
        zero = bv.eq(0)
        if op == "div":
            if signed:
                m1 = bv.eq(-1)
                safe = select(zero | m1, 1, bv)
                q = self.b.ins(a.ty, f"sdiv {a.ty} {a.ref}, {safe.ref}")
                return select(zero, 0, select(m1, -a, q))
            safe = select(zero, 1, bv)
            return select(zero, 0, self.b.ins(a.ty, f"udiv {a.ty} {a.ref}, {safe.ref}"))
        if op == "mod":
            if signed:
                safe = select(zero | bv.eq(-1), 1, bv)
                r = self.b.ins(a.ty, f"srem {a.ty} {a.ref}, {safe.ref}")
                fix = r.ne(0) & ((r ^ bv) < 0)
                return select(zero, 0, select(fix, r + bv, r))
            safe = select(zero, 1, bv)
            return select(zero, 0, self.b.ins(a.ty, f"urem {a.ty} {a.ref}, {safe.ref}"))
        if op == "pow":
            return self._int_pow(a, bv, signed)
        # hypot, atan2 on integers: numpy computes in float64, the result takes the int dtype
        fa, fb = convert(a, dt, "float64"), convert(bv, dt, "float64")
        return convert(self._math(op, fa, fb), "float64", dt)

    def _int_pow(self, a: Val, e: Val, signed: bool) -> Val:
        fn = self.mb.int_pow_function(a.ty, signed)
        return self.b.ins(a.ty, f"call {a.ty} @{fn}({a.ty} {a.ref}, {a.ty} {e.ref})")


def _int_pow_function(ty: str, signed: bool) -> tuple[str, str]:
    """(name, text) of `ty pow(ty a, ty e)` for integers: square-and-multiply while bits of e
    remain (wrapping like numpy). Negative exponents (numpy raises) give the truncated
    value of 1/a**|e|: 1 for a == 1, +-1 for a == -1, else 0."""
    name = f"sjm_ipow_{'s' if signed else 'u'}{ty}"
    neg = ""
    if signed:
        neg = (f"  %isneg = icmp slt {ty} %e, 0\n  br i1 %isneg, label %negexp, label %loop\n"
               f"negexp:\n  %one = icmp eq {ty} %a, 1\n  %m1 = icmp eq {ty} %a, -1\n"
               f"  %odd0 = and {ty} %e, 1\n  %odd = icmp ne {ty} %odd0, 0\n"
               f"  %sgn = select i1 %odd, {ty} -1, {ty} 1\n  %r1 = select i1 %m1, {ty} %sgn, {ty} 0\n"
               f"  %rn = select i1 %one, {ty} 1, {ty} %r1\n  ret {ty} %rn\n")
    else:
        neg = "  br label %loop\n"
    text = (f"define internal {ty} @{name}({ty} %a, {ty} %e) #2 {{\nentry:\n{neg}"
            f"loop:\n  %r = phi {ty} [ 1, %entry ], [ %r2, %loop ]\n"
            f"  %b = phi {ty} [ %a, %entry ], [ %b2, %loop ]\n  %x = phi {ty} [ %e, %entry ], [ %x2, %loop ]\n"
            f"  %bit0 = and {ty} %x, 1\n  %bit = icmp ne {ty} %bit0, 0\n  %rb = mul {ty} %r, %b\n"
            f"  %r2 = select i1 %bit, {ty} %rb, {ty} %r\n  %b2 = mul {ty} %b, %b\n"
            f"  %x2 = lshr {ty} %x, 1\n  %more = icmp ne {ty} %x2, 0\n"
            f"  br i1 %more, label %loop, label %done\n"
            f"done:\n  %z = icmp eq {ty} %e, 0\n  %res = select i1 %z, {ty} 1, {ty} %r2\n  ret {ty} %res\n}}\n")
    return name, text


# --------------------------------------------------------------------------------------
# Kernel emission
# --------------------------------------------------------------------------------------

def _streams_outputs(spec: ElementwiseSpec, shape: Sequence[int]) -> bool:
    """Whether the kernel gets a streaming-store copy (nontemporal.py): one flat loop, an x86
    target, and outputs of at least STREAM_MIN_BYTES in all."""
    if len(shape) != 1 or not current_machine().triple.startswith("x86_64"):
        return False
    n = int(np.prod(spec.out_shape, dtype=np.int64))
    return n * sum(_BITS[_lty(dt)] // 8 for dt in spec.out_dtypes) >= STREAM_MIN_BYTES


def emit_elementwise(mb: ModuleBuilder, spec: ElementwiseSpec, name: str | None = None) -> str:
    """Add the kernel for `spec` to module `mb`; returns its symbol name, a function with the
    kernel signature. For a loop nest with long rows (`generic_nest`) it is a small function
    that calls the module's shape-generic nest with the table of the spec's extents
    (`emit_elementwise_call` passes the table itself, with no such function)."""
    name = name or kernel_name(spec)
    shape, strides = simplify_index_space(spec.out_shape, spec.in_shapes)
    if _streams_outputs(spec, shape):
        _emit_kernel(mb, spec, name + STREAM_SUFFIX, shape, strides, "stream")
        _emit_kernel(mb, spec, name, shape, strides, "dispatch")
    elif generic_nest(shape):
        generic, table = _generic_parts(mb, spec, shape, strides)
        n = len(spec.in_dtypes) + len(spec.exprs)
        copy = "".join(f"  %p{i} = getelementptr inbounds ptr, ptr %args, i64 {i}\n  %a{i} = load ptr, ptr %p{i}\n"
                       f"  %q{i} = getelementptr inbounds [{n + 1} x ptr], ptr %t, i64 0, i64 {i}\n"
                       f"  store ptr %a{i}, ptr %q{i}\n" for i in range(n))
        mb.functions.append(
            f"define void @{name}(i64 %begin, i64 %end, ptr %args) #1 {{\nentry:\n"
            f"  %t = alloca [{n + 1} x ptr], align 8\n{copy}"
            f"  %qt = getelementptr inbounds [{n + 1} x ptr], ptr %t, i64 0, i64 {n}\n  store ptr @{table}, ptr %qt\n"
            f"  call void @{generic}(i64 %begin, i64 %end, ptr %t)\n  ret void\n}}\n")
    else:
        _emit_kernel(mb, spec, name, shape, strides, "plain")
    mb.symbols.append(name)
    return name


def emit_elementwise_call(mb: ModuleBuilder, spec: ElementwiseSpec) -> tuple[str, str | None]:
    """Add what a parallel call of the kernel for `spec` needs to module `mb`: returns (kernel
    symbol, None), or for a shape-generic nest (the module's nest for the spec's code, the
    name of the module constant holding its extents and strides), which the caller passes
    after the outputs in the kernel's argument array. Every shape of one pattern (say, every
    per-channel scale-shift-relu of a network) then shares one compiled nest."""
    shape, strides = simplify_index_space(spec.out_shape, spec.in_shapes)
    if not _streams_outputs(spec, shape) and generic_nest(shape):
        return _generic_parts(mb, spec, shape, strides)
    name = kernel_name(spec)
    if name not in mb.symbols:
        emit_elementwise(mb, spec, name)
    return name, None


def _generic_parts(mb: ModuleBuilder, spec: ElementwiseSpec, shape, strides) -> tuple[str, str]:
    """(the module's shape-generic nest for `spec`, the module constant of its table), each
    added once."""
    generic = generic_kernel_name(spec, strides)
    if generic not in mb.generic_parts:
        mb.generic_parts.add(generic)
        _emit_kernel(mb, spec, generic, shape, strides, "generic")
    return generic, mb.i64_table(generic_table(shape, strides))


#: rows (innermost extent of a simplified loop nest) at least this long run the shape-generic
#: kernel: its per-row index steps compare with extents read at run time instead of constants,
#: which costs little against a row of this length (benchmarks/bench_ew_generic.py)
GENERIC_MIN_ROW = 8


def generic_row(n: int) -> bool:
    """Whether rows of `n` elements are long enough for a shape-generic kernel (nests here,
    row copies in lower_shape.copy_call)."""
    return n >= GENERIC_MIN_ROW


def generic_nest(shape: Sequence[int]) -> bool:
    """Whether a simplified index space runs the shape-generic loop nest."""
    return len(shape) >= 2 and generic_row(shape[-1])


def generic_kernel_name(spec: ElementwiseSpec, strides) -> str:
    """The symbol of the shape-generic nest computing `spec`: it depends on the expressions,
    dtypes, the rank and which inputs are contiguous along the innermost dim, not on sizes."""
    key = "|".join([";".join(S.to_text(e) for e in spec.exprs), ",".join(spec.in_dtypes), spec.compute_dtype,
                    ",".join(spec.out_dtypes), f"gnest:{len(strides[0]) if strides else 0}:"
                    + ",".join(str(st[-1]) for st in strides)])
    return f"sj_ewg_{hashlib.sha1(key.encode()).hexdigest()[:20]}"


def generic_table(shape: Sequence[int], strides) -> list[int]:
    """The table a shape-generic nest reads (its pointer follows the outputs in the argument
    array): the extents of the simplified dims, then each input's element strides along the
    outer dims (all but the innermost)."""
    return list(shape) + [s for st in strides for s in st[:-1]]


def _emit_kernel(mb: ModuleBuilder, spec: ElementwiseSpec, name: str, shape, strides, mode: str) -> None:
    """Add function `name` computing `spec` over [begin, end). `mode`: "plain"; "stream", the
    internal copy whose stores nontemporal.py makes non-temporal (ends with an sfence);
    "dispatch", which calls the stream copy when every output is 64-byte aligned at `begin` and
    runs its own plain loop otherwise (only for the flat loop); "generic", a loop nest reading
    its extents and outer strides from the table (`generic_table`) whose pointer follows the
    outputs' in `args`."""
    n_in, n_out = len(spec.in_dtypes), len(spec.exprs)
    b = FnBuilder("k")
    L = b.raw
    L("entry:")
    ptrs = []
    for i in range(n_in + n_out):
        gp = b.ins("ptr", f"getelementptr inbounds ptr, ptr %args, i64 {i}")
        ptrs.append(b.ins("ptr", f"load ptr, ptr {gp.ref}, align 8"))
    in_ptrs, out_ptrs = ptrs[:n_in], ptrs[n_in:]
    if mode == "generic":     # extents and outer strides come from the table, loaded once
        nd = len(shape)
        gp = b.ins("ptr", f"getelementptr inbounds ptr, ptr %args, i64 {n_in + n_out}")
        dims = b.ins("ptr", f"load ptr, ptr {gp.ref}, align 8")
        tab = [b.ins("i64", f"load i64, ptr {b.ins('ptr', f'getelementptr inbounds i64, ptr {dims.ref}, i64 {t}').ref}, "
                            "align 8") for t in range(len(generic_table(shape, strides)))]
        shape = tab[:nd]
        strides = [tab[nd + k * (nd - 1):nd + (k + 1) * (nd - 1)] + [st[-1]] for k, st in enumerate(strides)]
    group = mb.md("", distinct=True)
    # interleave two vector iterations: the transcendental functions' dependency chains of
    # consecutive iterations then overlap (benchmarks/bench_ew.py)
    loop_md = mb.md(f'!{{!"llvm.loop.parallel_accesses", {group}}}, !{{!"llvm.loop.mustprogress"}}, '
                    '!{!"llvm.loop.interleave.count", i32 2}', distinct=True, self_ref=True)
    acc = f", !llvm.access.group {group}"

    def load(ptr: Val, idx: Val | None, dt: str, in_loop: bool) -> Val:
        ty = _lty(dt)
        p = ptr if idx is None else b.ins("ptr", f"getelementptr inbounds {ty}, ptr {ptr.ref}, i64 {idx.ref}")
        return b.ins(ty, f"load {ty}, ptr {p.ref}, align {_BITS[ty] // 8}" + (acc if in_loop else ""))

    def body(idx: Val, in_row_ptrs: list, hoisted: dict) -> None:
        """Loads (or takes hoisted values of) the inputs at idx, computes, stores every output."""
        def load_input(i: int) -> Val:
            if i in hoisted:
                return hoisted[i]
            return load(in_row_ptrs[i], idx, spec.in_dtypes[i], True)
        low = _Lowering(b, mb, spec, load_input)
        # every output is computed before any is stored: an output may share its buffer with an
        # input (in place) that another output still reads
        values = [convert(*low.gen(e), spec.out_dtypes[j]) for j, e in enumerate(spec.exprs)]
        for j, v in enumerate(values):
            ty = _lty(spec.out_dtypes[j])
            p = b.ins("ptr", f"getelementptr inbounds {ty}, ptr {out_row_ptrs[j].ref}, i64 {idx.ref}")
            L(f"  store {ty} {v.ref}, ptr {p.ref}, align {_BITS[ty] // 8}{acc}")

    nonempty = b.ins("i1", "icmp slt i64 %begin, %end")
    if len(shape) <= 1:
        # one flat loop: every input is contiguous (stride 1) or a scalar (stride 0)
        start = "entry"
        if mode == "dispatch":
            count = b.ins("i64", "sub i64 %end, %begin")
            aligned = None
            for j in range(n_out):
                width = _BITS[_lty(spec.out_dtypes[j])] // 8
                addr = b.ins("i64", f"ptrtoint ptr {out_ptrs[j].ref} to i64")
                first = addr + b.ins("i64", f"mul i64 %begin, {width}")
                ok = (first & 63).eq(0) & (count >= -(-STREAM_MIN_CALL_BYTES // width))
                aligned = ok if aligned is None else aligned & ok
            L(f"  br i1 {aligned.ref}, label %stream, label %plain")
            L("stream:")
            L(f"  call void @{name}{STREAM_SUFFIX}(i64 %begin, i64 %end, ptr %args)")
            L("  ret void")
            L("plain:")
            start = "plain"
        hoisted = {i: load(in_ptrs[i], None, spec.in_dtypes[i], False)
                   for i in range(n_in) if not shape or strides[i][0] == 0}
        L(f"  br i1 {nonempty.ref}, label %loop, label %exit")
        L("loop:")
        i = b.ins("i64", f"phi i64 [ %begin, %{start} ], [ %i.next, %loop ]")
        out_row_ptrs = out_ptrs
        body(i, in_ptrs, hoisted)
        L(f"  %i.next = add nsw i64 {i.ref}, 1")
        L("  %more = icmp slt i64 %i.next, %end")
        L(f"  br i1 %more, label %loop, label %exit, !llvm.loop {loop_md}")
    else:
        inner = _lit(shape[-1])
        L(f"  br i1 {nonempty.ref}, label %pre, label %exit")
        L("pre:")
        r0 = b.ins("i64", f"udiv i64 %begin, {inner}")
        j0 = b.ins("i64", f"urem i64 %begin, {inner}")
        # per-dimension indices of the first row (outer dims only), by division once; later
        # rows step them like an odometer (rowend): no division per row, which cost more than
        # a short row's work (NCHW16c rows of 16 against per-channel constants; 7x7 maps)
        idx0, rem = [], r0
        for d in reversed(range(len(shape) - 1)):
            q = b.ins("i64", f"urem i64 {rem.ref}, {_lit(shape[d])}")
            idx0.append(q)
            rem = b.ins("i64", f"udiv i64 {rem.ref}, {_lit(shape[d])}")
        idx0.reverse()
        L("  br label %row")
        L("row:")
        r = b.ins("i64", f"phi i64 [ {r0.ref}, %pre ], [ %r.next, %rowend ]")
        js = b.ins("i64", f"phi i64 [ {j0.ref}, %pre ], [ 0, %rowend ]")
        idxs = [b.ins("i64", f"phi i64 [ {idx0[d].ref}, %pre ], [ %ix{d}.next, %rowend ]")
                for d in range(len(shape) - 1)]
        base = b.ins("i64", f"mul nsw i64 {r.ref}, {inner}")
        left = b.ins("i64", f"sub nsw i64 %end, {base.ref}")
        jc = b.ins("i1", f"icmp slt i64 {left.ref}, {inner}")
        je = b.ins("i64", f"select i1 {jc.ref}, i64 {left.ref}, i64 {inner}")
        row_ptrs, hoisted = [], {}
        for k in range(n_in):
            off = None
            for d in range(len(shape) - 1):
                if strides[k][d]:     # a table entry (a Val) is always multiplied
                    t = b.ins("i64", f"mul nsw i64 {idxs[d].ref}, {_lit(strides[k][d])}")
                    off = t if off is None else b.ins("i64", f"add nsw i64 {off.ref}, {t.ref}")
            ty = _lty(spec.in_dtypes[k])
            p = in_ptrs[k] if off is None else \
                b.ins("ptr", f"getelementptr inbounds {ty}, ptr {in_ptrs[k].ref}, i64 {off.ref}")
            row_ptrs.append(p)
            if strides[k][-1] == 0:
                hoisted[k] = load(p, None, spec.in_dtypes[k], False)
        out_row_ptrs = [b.ins("ptr", f"getelementptr inbounds {_lty(spec.out_dtypes[j])}, "
                                     f"ptr {out_ptrs[j].ref}, i64 {base.ref}") for j in range(n_out)]
        L("  br label %inner")
        L("inner:")
        j = b.ins("i64", f"phi i64 [ {js.ref}, %row ], [ %j.next, %inner ]")
        body(j, row_ptrs, hoisted)
        L(f"  %j.next = add nsw i64 {j.ref}, 1")
        L(f"  %jmore = icmp slt i64 %j.next, {je.ref}")
        L(f"  br i1 %jmore, label %inner, label %rowend, !llvm.loop {loop_md}")
        L("rowend:")
        L(f"  %r.next = add nsw i64 {r.ref}, 1")
        carry = "1"    # the next row's indices: add one to the last outer index, carrying
        for d in reversed(range(len(shape) - 1)):
            t = b.ins("i64", f"add nuw i64 {idxs[d].ref}, {carry}")
            wrap = b.ins("i1", f"icmp eq i64 {t.ref}, {_lit(shape[d])}")
            L(f"  %ix{d}.next = select i1 {wrap.ref}, i64 0, i64 {t.ref}")
            carry = b.ins("i64", f"zext i1 {wrap.ref} to i64").ref
        L(f"  %rmore = icmp sle i64 {left.ref}, {inner}")
        L("  br i1 %rmore, label %exit, label %row")
    L("exit:")
    if mode == "stream":    # non-temporal stores are weakly ordered: drain them before returning
        L(f"  call void @{V.declare_intrinsic('llvm.x86.sse.sfence', 'void', [])}()")
        b.used_intrinsics.add("llvm.x86.sse.sfence")
    L("  ret void")
    mb.intrinsics |= b.used_intrinsics
    head = f"define internal void @{name}" if mode in ("stream", "generic") else f"define void @{name}"
    mb.functions.append(f"{head}(i64 %begin, i64 %end, ptr %args) #{3 if mode == 'stream' else 1} {{\n"
                        + "\n".join(b.lines) + "\n}\n")


def _lit(x) -> str:
    """An i64 operand: a table entry loaded at run time (a Val) or a constant."""
    return x.ref if isinstance(x, Val) else str(int(x))


def elementwise_module(spec: ElementwiseSpec, name: str | None = None, target=None) -> tuple[str, str]:
    """(LLVM IR text of a module holding just this kernel, the kernel's symbol name) for
    `target` (default: the host)."""
    mb = ModuleBuilder()
    name = emit_elementwise(mb, spec, name)
    return mb.render(target), name
