"""CUDA lowerings of reductions (sum, mean, prod, max, min, nansum, nanprod, norm, argmax,
argmin) and of the normalizations along one axis: the softmax family (softmax, log_softmax,
softmin, SoftmaxActivation and the forward of SoftmaxOutput) and LayerNorm.

Canonical form (as the LLVM backend, `codegen.llvm.lower_loops.merge_dims`): the input's
dims are classified kept/reduced, size-1 dims dropped and adjacent dims of one class merged;
output q (the kept dims in C order, whatever `keepdims` says) reduces the `count` elements
at `base(q) + offset(r)`, r < count. Two kernel shapes:

  * thread per output (few elements per output, or many outputs): a serial loop, r in order;
  * block per output (long reductions): the 256 threads of a block stride over r, then a
    shared-memory tree combines their partial results (`__syncthreads` between levels).

Numerics follow the reference: sums, means and products accumulate in the input's dtype
(integers wrap; integer means divide the wrapped sum), norm in float64; max/min propagate
NaN; argmax/argmin return the first extreme (NaN counts as the extreme), as the output dtype.
Partial results combine in a fixed order, so results are deterministic, but a block
reduction's float sum is grouped differently from numpy's pairwise sum (equal within rounding).

Softmax views data as (outer, n, inner) around the axis; column q = (o, i) holds the n
elements at o*n*inner + i + k*inner. The column maximum is taken in the compute type, the
exponentials in the input's float type and their sum in float64 (as the LLVM backend and
MXNet's kernel); out = e / sum, or z - log(sum) for log_softmax. LayerNorm uses the same
columns: mean and variance in float64 (two passes), out = (x - mean) / sqrt(var + eps) *
gamma[k] + beta[k], and the hidden outputs mean and std per column. Short columns are one
thread each, long ones a block with shared-memory tree sums.
"""
from __future__ import annotations

import numpy as np

from ...base import MXNetError
from ...ops.reduce import reduction_axes
from ..llvm.lower_loops import merge_dims, row_strides
from ..llvm.lower_norm import axis_view
from .elementwise import MAX_GRID, grid_for, grid_stride_loop
from .expr import check_dtype, convert, ctype, kind, literal
from .graph import register_lowering
from .plan import LoweringContext
from .prelude import THREADS

__all__ = ["reduction_launch", "softmax_launch", "BLOCK_REDUCE_MIN"]

#: reductions of at least this many elements per output use a block per output
BLOCK_REDUCE_MIN = 512
#: ... and so do those of at least BLOCK_REDUCE_SMALL elements when there are few outputs
BLOCK_REDUCE_SMALL, FEW_OUTPUTS = 64, 2048

_KINDS = ("sum", "mean", "prod", "max", "min", "nansum", "nanprod", "norm1", "norm2", "argmax", "argmin")


def _offset(var: str, dims: list, prefix: str) -> tuple[list[str], str]:
    """Statements and the expression of the element offset of index `var` unravelled over
    dims [(size, stride)]."""
    if not dims:
        return [], "0"
    lines, terms, rest = [], [], var
    for d in reversed(range(len(dims))):
        n, s = dims[d]
        if d:
            lines.append(f"const int64_t {prefix}{d} = {rest} % {n};")
            lines.append(f"const int64_t {prefix}q{d} = {rest} / {n};")
            rest = f"{prefix}q{d}"
            idx = f"{prefix}{d}"
        else:
            idx = rest
        terms.append(idx if s == 1 else f"{idx} * {s}")
    return lines, " + ".join(reversed(terms))


class _Ops:
    """C text of one reduction's accumulator: declaration, update, combine, finish."""

    def __init__(self, red_kind: str, in_dtype: str, out_dtype: str, count: int):
        self.k, self.it, self.ot, self.count = red_kind, in_dtype, out_dtype, count
        self.at = "float64" if red_kind in ("norm1", "norm2") else in_dtype
        self.A = ctype(self.at)
        self.f = kind(in_dtype) == "f"
        self.arg = red_kind in ("argmax", "argmin")

    def init(self) -> str:
        k, A = self.k, self.A
        if k in ("sum", "mean", "nansum", "norm1", "norm2"):
            return f"({A})0"
        if k in ("prod", "nanprod"):
            return f"({A})1"
        largest = k in ("min", "argmin")
        if self.f:
            return literal(float("inf") if largest else float("-inf"), self.at)
        info = np.iinfo(np.dtype(self.at))
        return literal(int(info.max) if largest else int(info.min), self.at)

    def _beats(self, x: str, ix: str, a: str, ia: str, ties: bool) -> str:
        """x (at index ix) replaces a (at index ia): strictly better, NaN over non-NaN, and with
        `ties` an equal value (or both NaN) at a smaller index."""
        cmp = ">" if self.k in ("max", "argmax") else "<"
        c = f"({x} {cmp} {a})"
        if self.f:
            c += f" || ({x} != {x} && {a} == {a})"
            if ties:
                c += f" || ((({x} == {a}) || ({x} != {x} && {a} != {a})) && {ix} < {ia})"
        elif ties:
            c += f" || ({x} == {a} && {ix} < {ia})"
        return c

    def update(self, acc: str, iacc: str, x: str, r: str) -> list[str]:
        """Statements folding input value x (dtype in_dtype) at reduced index r into acc."""
        k, A = self.k, self.A
        if k in ("norm1", "norm2"):
            xd = convert(x, self.it, "float64")
            return [f"{acc} += {'fabs(' + xd + ')' if k == 'norm1' else f'({xd}) * ({xd})'};"]
        if self.arg:
            return [f"if ({self._beats(x, r, acc, iacc, False)}) {{ {acc} = {x}; {iacc} = {r}; }}"]
        if k in ("max", "min"):
            if self.f:
                return [f"if ({self._beats(x, r, acc, iacc, False)}) {acc} = {x};"]
            return [f"if ({x} {'>' if k == 'max' else '<'} {acc}) {acc} = {x};"]
        xv = x
        if k in ("nansum", "nanprod") and self.f:
            xv = f"({x} != {x} ? ({A}){0 if k == 'nansum' else 1} : {x})"
        op = "+" if k in ("sum", "mean", "nansum") else "*"
        if self.f:
            return [f"{acc} = {acc} {op} {xv};"]
        U = {"int32_t": "uint32_t", "int64_t": "uint64_t", "int8_t": "uint8_t", "uint8_t": "uint8_t"}[A]
        return [f"{acc} = ({A})(({U}){acc} {op} ({U}){xv});"]

    def combine(self, acc: str, iacc: str, other: str, iother: str) -> list[str]:
        """Statements folding a partial result (other, iother) into (acc, iacc)."""
        k = self.k
        if self.arg:
            return [f"if ({self._beats(other, iother, acc, iacc, True)}) {{ {acc} = {other}; {iacc} = {iother}; }}"]
        if k in ("max", "min"):
            return self.update(acc, iacc, other, iother)
        if k in ("norm1", "norm2"):
            return [f"{acc} += {other};"]
        op = "+" if k in ("sum", "mean", "nansum") else "*"
        if self.f:
            return [f"{acc} = {acc} {op} {other};"]
        U = {"int32_t": "uint32_t", "int64_t": "uint64_t", "int8_t": "uint8_t", "uint8_t": "uint8_t"}[self.A]
        return [f"{acc} = ({self.A})(({U}){acc} {op} ({U}){other});"]

    def finish(self, acc: str, iacc: str) -> str:
        k = self.k
        if self.arg:
            return convert(iacc, "int64", self.ot)
        v = acc
        if k == "mean":
            v = f"({acc} / ({self.A}){self.count})" if self.f else \
                f"({self.A})({acc} / ({self.A}){self.count})"
        elif k == "norm2":
            v = f"sqrt({acc})"
        return convert(v, self.at, self.ot)


def reduction_launch(ctx: LoweringContext, red_kind: str, shape: tuple, axes: tuple, src, dst) -> list:
    """The launch reducing `src` (of `shape`) over `axes` with `red_kind` into `dst`."""
    it = check_dtype(src.type.dtype, f"{red_kind} input")
    ot = check_dtype(dst.type.dtype, f"{red_kind} output")
    if red_kind not in _KINDS or it == "bool":
        raise MXNetError(f"cuda codegen: reduction {red_kind} of {it} has no CUDA lowering")
    count = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    n_out = int(np.prod([n for i, n in enumerate(shape) if i not in axes], dtype=np.int64))
    if n_out == 0:
        return []
    if count == 0:
        raise MXNetError(f"cuda codegen: {red_kind} over an empty axis has no CUDA lowering")
    merged = merge_dims(shape, [i in axes for i in range(len(shape))])
    strides = row_strides([n for n, _ in merged])
    kept = [(n, s) for (n, r), s in zip(merged, strides) if not r]
    reduced = [(n, s) for (n, r), s in zip(merged, strides) if r]
    ops = _Ops(red_kind, it, ot, count)
    A, I, O = ops.A, ctype(it), ctype(ot)
    base_lines, base = _offset("q", kept, "kq")
    red_lines, roff = _offset("r", reduced, "kr")
    block = count >= BLOCK_REDUCE_MIN or (count >= BLOCK_REDUCE_SMALL and n_out < FEW_OUTPUTS)
    params = [(f"const {I} *", "X"), (f"{O} *", "Y")]
    if not block:
        lines = [grid_stride_loop("q", n_out) + " {"] + ["    " + s for s in base_lines]
        lines += [f"    const {I} *xq = X + ({base});", f"    {A} acc = {ops.init()};"]
        lines += ["    int64_t iacc = 0;"] if ops.arg else []
        lines += [f"    for (int64_t r = 0; r < {count}; ++r) {{"]
        lines += ["        " + s for s in red_lines] + [f"        const {I} x = xq[{roff}];"]
        lines += ["        " + s for s in ops.update("acc", "iacc", "x", "r")]
        lines += ["    }", f"    Y[q] = {ops.finish('acc', 'iacc')};", "}"]
        kernel = ctx.kernel("sj_reduce", params, "\n".join("    " + s for s in lines), THREADS)
        return [ctx.launch(kernel, grid_for(n_out), [src, dst])]
    arg = ops.arg      # arg reductions carry the index of the extreme through the tree
    lines = [f"__shared__ {A} sv[{THREADS}];"] + ([f"__shared__ int64_t si[{THREADS}];"] if arg else [])
    lines += ["const int t = (int)threadIdx.x;", f"for (int64_t q = blockIdx.x; q < {n_out}; q += gridDim.x) {{"]
    lines += ["    " + s for s in base_lines]
    lines += [f"    const {I} *xq = X + ({base});", f"    {A} acc = {ops.init()};"]
    lines += ["    int64_t iacc = 0;"] if arg else []
    lines += [f"    for (int64_t r = t; r < {count}; r += {THREADS}) {{"]
    lines += ["        " + s for s in red_lines] + [f"        const {I} x = xq[{roff}];"]
    lines += ["        " + s for s in ops.update("acc", "iacc", "x", "r")]
    lines += ["    }", "    sv[t] = acc;"] + (["    si[t] = iacc;"] if arg else []) + ["    __syncthreads();",
              f"    for (int s = {THREADS // 2}; s > 0; s >>= 1) {{", "        if (t < s) {",
              f"            {A} a = sv[t];", f"            const {A} b = sv[t + s];"]
    if arg:
        lines += ["            int64_t ia = si[t];", "            const int64_t ib = si[t + s];"]
    lines += ["            " + s for s in ops.combine("a", "ia", "b", "ib")]
    lines += ["            sv[t] = a;"] + (["            si[t] = ia;"] if arg else [])
    lines += ["        }", "        __syncthreads();", "    }",
              f"    if (t == 0) Y[q] = {ops.finish('sv[0]', 'si[0]' if arg else '0')};", "    __syncthreads();", "}"]
    kernel = ctx.kernel("sj_reduce_block", params, "\n".join("    " + s for s in lines), THREADS, barriers=True)
    return [ctx.launch(kernel, min(n_out, MAX_GRID), [src, dst])]


@register_lowering("sum", "sum_axis", "mean", "prod", "max", "max_axis", "min", "min_axis", "nansum", "nanprod")
def lower_reduce_axes(node, ctx: LoweringContext) -> list:
    src, dst = node.inputs[0], node.outputs[0]
    shape = tuple(int(d) for d in src.type.shape)
    axes = reduction_axes(node.op.name, shape, node.attrs["axis"], node.attrs["exclude"])
    return reduction_launch(ctx, node.op.name, shape, axes, src, dst)


@register_lowering("norm")
def lower_norm(node, ctx: LoweringContext) -> list:
    src, dst = node.inputs[0], node.outputs[0]
    if node.attrs["ord"] not in (1, 2):
        raise MXNetError(f"cuda codegen: norm with ord={node.attrs['ord']} has no CUDA lowering (ord 1 or 2)")
    shape = tuple(int(d) for d in src.type.shape)
    axes = reduction_axes("norm", shape, node.attrs["axis"], False)
    return reduction_launch(ctx, f"norm{node.attrs['ord']}", shape, axes, src, dst)


@register_lowering("argmax", "argmin", "argmax_channel")
def lower_arg_reduce(node, ctx: LoweringContext) -> list:
    src, dst = node.inputs[0], node.outputs[0]
    shape = tuple(int(d) for d in src.type.shape)
    axis, _ = node.op.search(node.attrs)
    if axis is None:
        axes = tuple(range(len(shape)))
    elif -len(shape) <= axis < len(shape):
        axes = (axis % len(shape),)
    else:
        raise MXNetError(f"cuda codegen: {node.op.name} axis {axis} out of range for shape {shape}")
    kind_ = "argmin" if node.op.name == "argmin" else "argmax"
    return reduction_launch(ctx, kind_, shape, axes, src, dst)


# --------------------------------------------------------------------------------------
# softmax family
# --------------------------------------------------------------------------------------

#: columns of at most this many elements are handled by one thread each
SOFTMAX_THREAD_MAX = 128


def softmax_launch(ctx: LoweringContext, outer: int, n: int, inner: int, src, dst, negate: bool = False,
                   log: bool = False, temperature=None) -> list:
    """softmax (log_softmax, softmin) of `src` along the middle axis of (outer, n, inner)."""
    it = check_dtype(src.type.dtype, "softmax input")
    ot = check_dtype(dst.type.dtype, "softmax output")
    if it == "bool" or ot not in ("float32", "float64"):
        raise MXNetError(f"cuda codegen: softmax from {it} to {ot} has no CUDA lowering")
    cols = outer * inner
    if cols * n == 0:
        return []
    ct = it if it in ("float32", "float64") else "float32"
    C_, I, O = ctype(ct), ctype(it), ctype(ot)
    f = "f" if ct == "float32" else ""
    temp = None if temperature in (None, 1.0) else float(temperature)

    def z(k: str) -> str:
        v = convert(f"xc[({k}) * {inner}]", it, ct)
        v = f"(-{v})" if negate else v
        d = f"({v} - mx)"
        return f"({d} / {literal(temp, ct)})" if temp is not None else d
    col = [f"const {I} *xc = X + (q / {inner}) * {n * inner} + q % {inner};",
           f"{O} *yc = Y + (q / {inner}) * {n * inner} + q % {inner};"]
    zk = z("k")
    xk = convert(f"xc[k * {inner}]", it, ct)
    value = f"(double){zk} - ls" if log else f"(double)exp{f}({zk}) / s"
    write = f"yc[(k) * {inner}] = {convert(value, 'float64', ot)};"
    neg = "-" if negate else ""
    if n <= SOFTMAX_THREAD_MAX:
        lines = [grid_stride_loop("q", cols) + " {"] + ["    " + s for s in col]
        lines += [f"    {C_} mx = {literal(float('-inf'), ct)};",
                  f"    for (int64_t k = 0; k < {n}; ++k) {{ const {C_} v = {neg}{xk}; mx = v > mx ? v : mx; }}",
                  "    double s = 0.0;",
                  f"    for (int64_t k = 0; k < {n}; ++k) s += (double)exp{f}({z('k')});"]
        if log:
            lines.append("    const double ls = log(s);")
        lines += [f"    for (int64_t k = 0; k < {n}; ++k) {write}", "}"]
        kernel = ctx.kernel("sj_softmax", [(f"const {I} *", "X"), (f"{O} *", "Y")],
                            "\n".join("    " + s for s in lines), THREADS)
        return [ctx.launch(kernel, grid_for(cols), [src, dst])]
    lines = [f"__shared__ {C_} smax[{THREADS}];", f"__shared__ double ssum[{THREADS}];",
             "const int t = (int)threadIdx.x;",
             f"for (int64_t q = blockIdx.x; q < {cols}; q += gridDim.x) {{"] + ["    " + s for s in col]
    lines += [f"    {C_} m = {literal(float('-inf'), ct)};",
              f"    for (int64_t k = t; k < {n}; k += {THREADS}) {{ const {C_} v = {neg}{xk}; m = v > m ? v : m; }}",
              "    smax[t] = m;", "    __syncthreads();",
              f"    for (int s2 = {THREADS // 2}; s2 > 0; s2 >>= 1) {{",
              "        if (t < s2 && smax[t + s2] > smax[t]) smax[t] = smax[t + s2];",
              "        __syncthreads();", "    }",
              f"    const {C_} mx = smax[0];", "    double part = 0.0;",
              f"    for (int64_t k = t; k < {n}; k += {THREADS}) part += (double)exp{f}({z('k')});",
              "    ssum[t] = part;", "    __syncthreads();",
              f"    for (int s2 = {THREADS // 2}; s2 > 0; s2 >>= 1) {{",
              "        if (t < s2) ssum[t] += ssum[t + s2];", "        __syncthreads();", "    }",
              "    const double s = ssum[0];"]
    if log:
        lines.append("    const double ls = log(s);")
    lines += [f"    for (int64_t k = t; k < {n}; k += {THREADS}) {write}", "    __syncthreads();", "}"]
    kernel = ctx.kernel("sj_softmax_block", [(f"const {I} *", "X"), (f"{O} *", "Y")],
                        "\n".join("    " + s for s in lines), THREADS, barriers=True)
    return [ctx.launch(kernel, min(cols, MAX_GRID), [src, dst])]


@register_lowering("softmax", "log_softmax", "softmin")
def lower_softmax(node, ctx: LoweringContext) -> list:
    src, dst = node.inputs[0], node.outputs[0]
    if node.attrs["use_length"]:
        raise MXNetError(f"cuda codegen: {node.op.name} with use_length has no CUDA lowering")
    shape = tuple(int(d) for d in src.type.shape)
    axis = node.attrs["axis"]
    if not -len(shape) <= axis < len(shape):
        raise MXNetError(f"cuda codegen: {node.op.name} axis {axis} out of range for shape {shape}")
    outer, n, inner = axis_view(shape, axis % len(shape))
    return softmax_launch(ctx, outer, n, inner, src, dst, negate=node.op.name == "softmin",
                          log=node.op.name == "log_softmax", temperature=node.attrs["temperature"])


@register_lowering("SoftmaxActivation")
def lower_softmax_activation(node, ctx: LoweringContext) -> list:
    src, dst = node.inputs[0], node.outputs[0]
    shape = tuple(int(d) for d in src.type.shape)
    if node.attrs["mode"] == "channel":
        if len(shape) < 3:
            raise MXNetError(f"cuda codegen: SoftmaxActivation mode='channel' needs >= 3-D data, got {shape}")
        view = axis_view(shape, 1)
    else:
        view = axis_view(shape, len(shape) - 1)
    return softmax_launch(ctx, *view, src, dst)


@register_lowering("SoftmaxOutput")
def lower_softmax_output(node, ctx: LoweringContext) -> list:
    """The forward of SoftmaxOutput (the label only matters for the backward)."""
    src, dst = node.inputs[0], node.outputs[0]
    shape = tuple(int(d) for d in src.type.shape)
    if len(shape) < 2:
        raise MXNetError(f"cuda codegen: SoftmaxOutput needs >= 2-D data, got {shape}")
    a = node.attrs
    if a["multi_output"]:
        view = axis_view(shape, 1)
    elif a["preserve_shape"]:
        view = axis_view(shape, len(shape) - 1)
    else:
        view = (shape[0], int(np.prod(shape[1:], dtype=np.int64)), 1)
    return softmax_launch(ctx, *view, src, dst)


# --------------------------------------------------------------------------------------
# LayerNorm
# --------------------------------------------------------------------------------------

def _tree_sum(part: str, result: str) -> list[str]:
    """Block statements: `result` = the sum of every thread's `part` (double), via `ssum`; ends
    with a barrier, so `ssum` may be reused right after."""
    return ["ssum[t] = " + part + ";", "__syncthreads();",
            f"for (int s2 = {THREADS // 2}; s2 > 0; s2 >>= 1) {{",
            "    if (t < s2) ssum[t] += ssum[t + s2];", "    __syncthreads();", "}",
            f"const double {result} = ssum[0];", "__syncthreads();"]


@register_lowering("LayerNorm")
def lower_layer_norm(node, ctx: LoweringContext) -> list:
    x, gamma, beta = node.inputs
    out, mean_o, std_o = node.outputs[:3]
    dts = {v: check_dtype(v.type.dtype, f"LayerNorm {v.name!r}") for v in (x, gamma, beta, out, mean_o, std_o)}
    if any(d not in ("float32", "float64") for d in dts.values()):
        raise MXNetError("cuda codegen: LayerNorm needs float32 or float64 values")
    shape = tuple(int(d) for d in x.type.shape)
    axis = node.attrs["axis"]
    if not -len(shape) <= axis < len(shape):
        raise MXNetError(f"cuda codegen: LayerNorm axis {axis} out of range for shape {shape}")
    outer, n, inner = axis_view(shape, axis % len(shape))
    cols = outer * inner
    if cols * n == 0:
        return []
    X, G, O, Mt = (ctype(dts[v]) for v in (x, gamma, out, mean_o))
    eps = repr(float(node.attrs["eps"]))
    col = [f"const {X} *xc = X + (q / {inner}) * {n * inner} + q % {inner};",
           f"{O} *yc = Y + (q / {inner}) * {n * inner} + q % {inner};"]
    at = f"[(k) * {inner}]"
    write = (f"yc{at} = ({O})(((double)xc{at} - mean) * inv * (double)gamma[k] + (double)beta[k]);")
    finish = ["const double sd = sqrt(var + " + eps + ");", "const double inv = 1.0 / sd;"]
    params = [(f"const {X} *", "X"), (f"const {G} *", "gamma"), (f"const {G} *", "beta"), (f"{O} *", "Y"),
              (f"{Mt} *", "mean_o"), (f"{Mt} *", "std_o")]
    args = [x, gamma, beta, out, mean_o, std_o]
    if n <= SOFTMAX_THREAD_MAX:
        lines = [grid_stride_loop("q", cols) + " {"] + ["    " + s for s in col]
        lines += ["    double sum = 0.0, sq = 0.0;",
                  f"    for (int64_t k = 0; k < {n}; ++k) sum += (double)xc{at};",
                  f"    const double mean = sum / {n};",
                  f"    for (int64_t k = 0; k < {n}; ++k) {{ const double d = (double)xc{at} - mean; sq += d * d; }}",
                  f"    const double var = sq / {n};"]
        lines += ["    " + s for s in finish]
        lines += [f"    for (int64_t k = 0; k < {n}; ++k) {write}",
                  f"    mean_o[q] = ({Mt})mean;", f"    std_o[q] = ({Mt})sd;", "}"]
        kernel = ctx.kernel("sj_layernorm", params, "\n".join("    " + s for s in lines), THREADS)
        return [ctx.launch(kernel, grid_for(cols), args)]
    lines = [f"__shared__ double ssum[{THREADS}];", "const int t = (int)threadIdx.x;",
             f"for (int64_t q = blockIdx.x; q < {cols}; q += gridDim.x) {{"] + ["    " + s for s in col]
    lines += ["    double part = 0.0;", f"    for (int64_t k = t; k < {n}; k += {THREADS}) part += (double)xc{at};"]
    lines += ["    " + s for s in _tree_sum("part", "sum")]
    lines += [f"    const double mean = sum / {n};", "    part = 0.0;",
              f"    for (int64_t k = t; k < {n}; k += {THREADS}) {{ const double d = (double)xc{at} - mean; "
              "part += d * d; }"]
    lines += ["    " + s for s in _tree_sum("part", "sq")]
    lines += [f"    const double var = sq / {n};"] + ["    " + s for s in finish]
    lines += [f"    for (int64_t k = t; k < {n}; k += {THREADS}) {write}",
              f"    if (t == 0) {{ mean_o[q] = ({Mt})mean; std_o[q] = ({Mt})sd; }}", "}"]
    kernel = ctx.kernel("sj_layernorm_block", params, "\n".join("    " + s for s in lines), THREADS, barriers=True)
    return [ctx.launch(kernel, min(cols, MAX_GRID), args)]
