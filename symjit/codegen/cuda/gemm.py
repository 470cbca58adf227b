"""CUDA lowerings of the compute-bound ops: FullyConnected, dot, batch_dot, Convolution and
Deconvolution, each optionally with the fused elementwise epilogue of a `_with_epilogue` node.

Kernels are generated (no cuBLAS/cuDNN: the library then needs only the driver, and every
kernel can be checked by the host emulation):

  * GEMM family and convolutions with more than one input channel per group: one tiled
    shared-memory GEMM template. A block of 256 threads computes a 64x64 tile of C; each
    K-step stages a 64x16 tile of A and a 16x64 tile of B in shared memory (out-of-range
    elements as 0), then every thread accumulates a 4x4 micro-tile (rows ty+16i, columns
    tx+16j) from registers. Operands are described by *loaders* (C code for element (m, k) of A
    and (k, n) of B), so the same template serves plain, transposed and batched products and
    the implicit-GEMM convolution: A = the group's filters (F/G x C/G*k), B(k, n) = the input
    element under filter tap k for output position n (zero in the padding, gathered on the fly,
    no im2col buffer), n running over all images' output positions; blocks of group g form
    their own range of the 1-D grid.
  * Depthwise convolutions (one input channel per group) and Deconvolution: one thread per
    output element, a direct loop over the window (Deconvolution gathers the inputs whose
    window reaches the output, the adjoint of the convolution).

The epilogue (bias, then the group's expressions over the result and extra inputs) runs on
each output element while it is in registers; extra inputs are read at the same output index
(broadcast with `elementwise.index_offsets`), so an output sharing an extra input's buffer
in place is safe. Geometry follows symjit.ops.nn_conv (`conv_geometry`, `deconv_pad_adj`);
channel-first layouts, 1 to 3 spatial dims, float32 or float64.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...base import MXNetError
from ...ops import nn_conv as C
from ...ops import scalar as S
from ...ops.linalg import dot_shapes
from ...ops.registry import get_op
from .elementwise import grid_for, grid_stride_loop, index_offsets
from .expr import ExprEmitter, check_dtype, convert, ctype
from .graph import register_lowering
from .plan import LoweringContext
from .prelude import THREADS

__all__ = ["Epilogue", "gemm_launch", "TILE_M", "TILE_N", "TILE_K"]

#: GEMM tile of one block (C elements) and its K step; 256 threads, 4x4 outputs each
TILE_M, TILE_N, TILE_K = 64, 64, 16
_MICRO = 4
_SIDE = 16          # threads per tile side (16 x 16 = THREADS)
assert _SIDE * _SIDE == THREADS and TILE_M == _SIDE * _MICRO == TILE_N


def _shape(v) -> tuple:
    return tuple(int(d) for d in v.type.shape)


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _float_dtype(node, values) -> str:
    dts = {check_dtype(v.type.dtype, f"node {node.name!r} value {v.name!r}") for v in values}
    if len(dts) != 1 or next(iter(dts)) not in ("float32", "float64"):
        raise MXNetError(f"cuda codegen: {node.op.name} needs float32 or float64 operands of one dtype, got "
                         f"{sorted(dts)}")
    return dts.pop()


# --------------------------------------------------------------------------------------
# Epilogues
# --------------------------------------------------------------------------------------

@dataclass
class Epilogue:
    """What happens to a result element `v` at flat output index `o`: bias already added,
    output j = exprs[j](Input(0) = v, Input(k >= 1) = extras[k-1] at o). A node without a
    fused epilogue has exprs = (Input(0),) and one output."""
    exprs: tuple
    extras: list
    outputs: list
    dtype: str

    @staticmethod
    def of(node, dtype: str) -> "Epilogue":
        if node.op.name == "_with_epilogue":
            a = node.attrs
            return Epilogue(tuple(a["exprs"]), list(node.inputs[a["num_inner"]:]), list(node.outputs), dtype)
        return Epilogue((S.Input(0),), [], [node.outputs[0]], dtype)

    def params(self) -> list:
        T = ctype(self.dtype)
        return ([(f"const {T} *", f"ex{k}") for k in range(len(self.extras))]
                + [(f"{T} *", f"out{j}") for j in range(len(self.outputs))])

    def args(self) -> list:
        return list(self.extras) + list(self.outputs)

    def code(self, o: str, v: str) -> list[str]:
        """C statements storing every output at flat index `o` from the value `v`."""
        out_shape = _shape(self.outputs[0])
        if any(_shape(x) != out_shape for x in self.outputs):
            raise MXNetError("cuda codegen: epilogue outputs of different shapes")
        for x in self.extras + self.outputs:
            if check_dtype(x.type.dtype) != self.dtype:
                raise MXNetError(f"cuda codegen: epilogue value {x.name!r} is {x.type.dtype}, expected {self.dtype}")
        read = set().union(*(S.inputs_of(e) for e in self.exprs))
        lines, offs = index_offsets(o, out_shape, [_shape(x) if k + 1 in read else ()
                                                   for k, x in enumerate(self.extras)], "eo")
        em = ExprEmitter(self.dtype, (self.dtype,) * (1 + len(self.extras)),
                         lambda k: v if k == 0 else f"ex{k - 1}[{offs[k - 1]}]", prefix="y")
        vals = [em.gen(e) for e in self.exprs]
        stores = [f"out{j}[{o}] = {convert(x, dt, self.dtype)};" for j, (x, dt) in enumerate(vals)]
        return lines + em.lines + stores


# --------------------------------------------------------------------------------------
# The tiled GEMM template
# --------------------------------------------------------------------------------------

@dataclass
class Operand:
    """A GEMM operand: C statements and an expression for its element at (row, col) -- (m, k)
    for A, (k, n) for B -- evaluated only in range; `k_fastest`: which index consecutive
    threads vary when staging the tile (the one contiguous in memory)."""
    stmts: list
    expr: str
    k_fastest: bool


def gemm_launch(ctx: LoweringContext, dtype: str, M: int, N: int, K: int, Z: int, load_a, load_b,
                store, params: list, args: list) -> list:
    """The launch of C[z] = A[z] B[z] for z < Z (M x N x K each) with `store(m, n, z, acc)`
    giving the C statements that consume element (m, n) of batch z.

    `load_a(m, k, z)` / `load_b(k, n, z)` return `Operand`s; `params`/`args` are the kernel's
    buffer parameters and the Values passed for them."""
    if M * N * Z == 0:
        return []
    T = ctype(dtype)
    tm, tn = -(-M // TILE_M), -(-N // TILE_N)
    A, B = load_a("m", "k", "z"), load_b("k", "n", "z")
    per = TILE_M * TILE_K // THREADS

    def stage(op: Operand, tile: str, rows: int, rows_var: str, base: str, limit: int, cols_first: bool) -> list:
        # tile[kk][r] for r < rows: element r of the M (or N) side, kk of the K side
        if cols_first:     # k varies fastest over consecutive threads
            idx = [f"const int kk = e % {TILE_K}, rr = e / {TILE_K};"]
        else:
            idx = [f"const int rr = e % {rows}, kk = e / {rows};"]
        return ([f"for (int q = 0; q < {per}; ++q) {{", f"    const int e = (int)threadIdx.x + q * {THREADS};"]
                + ["    " + s for s in idx]
                + [f"    const int64_t {rows_var} = {base} + rr, k = k0 + kk;", f"    {T} val = ({T})0;",
                   f"    if ({rows_var} < {limit} && k < {K}) {{"]
                + ["        " + s for s in op.stmts] + [f"        val = ({T})({op.expr});", "    }",
                                                        f"    {tile}[kk][rr] = val;", "}"])

    # rows padded by one element: staging with k fastest then writes distinct shared-memory banks
    body = [f"__shared__ {T} As[{TILE_K}][{TILE_M + 1}];", f"__shared__ {T} Bs[{TILE_K}][{TILE_N + 1}];",
            f"const int tx = (int)threadIdx.x % {_SIDE}, ty = (int)threadIdx.x / {_SIDE};",
            "const int64_t bid = blockIdx.x;",
            f"const int64_t z = bid / {tm * tn};",
            f"const int64_t m0 = (bid / {tn}) % {tm} * {TILE_M}, n0 = bid % {tn} * {TILE_N};",
            "(void)z;",
            f"{T} acc[{_MICRO}][{_MICRO}];",
            f"for (int i = 0; i < {_MICRO}; ++i) for (int j = 0; j < {_MICRO}; ++j) acc[i][j] = ({T})0;",
            f"for (int64_t k0 = 0; k0 < {K}; k0 += {TILE_K}) {{"]
    body += ["    " + s for s in stage(A, "As", TILE_M, "m", "m0", M, A.k_fastest)]
    body += ["    " + s for s in stage(B, "Bs", TILE_N, "n", "n0", N, B.k_fastest)]
    body += ["    __syncthreads();",
             "    SJ_UNROLL",
             f"    for (int kk = 0; kk < {TILE_K}; ++kk) {{",
             f"        {T} a[{_MICRO}], b[{_MICRO}];",
             f"        for (int i = 0; i < {_MICRO}; ++i) a[i] = As[kk][ty + {_SIDE} * i];",
             f"        for (int j = 0; j < {_MICRO}; ++j) b[j] = Bs[kk][tx + {_SIDE} * j];",
             f"        for (int i = 0; i < {_MICRO}; ++i)",
             f"            for (int j = 0; j < {_MICRO}; ++j) acc[i][j] += a[i] * b[j];",
             "    }",
             "    __syncthreads();",
             "}",
             f"for (int i = 0; i < {_MICRO}; ++i) {{",
             f"    for (int j = 0; j < {_MICRO}; ++j) {{",
             f"        const int64_t m = m0 + ty + {_SIDE} * i, n = n0 + tx + {_SIDE} * j;",
             f"        if (m >= {M} || n >= {N}) continue;",
             "        const " + T + " r = acc[i][j];",
             "        (void)r;   /* an epilogue may not read the product (e.g. zeros_like) */"]
    body += ["        " + s for s in store("m", "n", "z", "r")]
    body += ["    }", "}"]
    kernel = ctx.kernel("sj_gemm", params, "\n".join("    " + s for s in body), THREADS, barriers=True)
    return [ctx.launch(kernel, Z * tm * tn, args)]


def _with_bias(epi: Epilogue, bias_index: str | None, r: str, o: str) -> list[str]:
    if bias_index is None:
        return epi.code(o, r)
    return [f"const {ctype(epi.dtype)} rb = {r} + bias[{bias_index}];"] + epi.code(o, "rb")


# --------------------------------------------------------------------------------------
# FullyConnected, dot, batch_dot
# --------------------------------------------------------------------------------------

def _inner(node) -> tuple[str, dict, list]:
    """(op name, attrs, inputs) of the computation itself (a `_with_epilogue` node's inner op)."""
    if node.op.name == "_with_epilogue":
        a = node.attrs
        return a["inner"], a["inner_attrs"], list(node.inputs[:a["num_inner"]])
    return node.op.name, node.attrs, list(node.inputs)


def _fully_connected(ctx, node, attrs, ins, epi: Epilogue) -> list:
    x, w = ins[0], ins[1]
    h = int(attrs["num_hidden"])
    xs = _shape(x)
    k = _size(xs[1:]) if attrs["flatten"] else xs[-1]
    m = xs[0] if attrs["flatten"] else _size(xs[:-1])
    if _shape(w) != (h, k):
        raise MXNetError(f"cuda codegen: FullyConnected weight {_shape(w)} does not match ({h}, {k})")
    has_bias = not attrs["no_bias"]
    T = ctype(epi.dtype)
    params = [(f"const {T} *", "A"), (f"const {T} *", "B")] + ([(f"const {T} *", "bias")] if has_bias else [])
    args = [x, w] + ([ins[2]] if has_bias else [])

    def store(mv, nv, zv, r):
        return [f"const int64_t o = {mv} * {h} + {nv};"] + _with_bias(epi, nv if has_bias else None, r, "o")
    # y = x W^T: A = x (m x k), B(k, n) = W[n, k]; both contiguous along k
    return gemm_launch(ctx, epi.dtype, m, h, k, 1, lambda mv, kv, zv: Operand([], f"A[{mv} * {k} + {kv}]", True),
                       lambda kv, nv, zv: Operand([], f"B[{nv} * {k} + {kv}]", True),
                       store, params + epi.params(), args + epi.args())


def _dot(ctx, node, attrs, ins, epi: Epilogue) -> list:
    ls, rs = _shape(ins[0]), _shape(ins[1])
    ta, tb = bool(attrs["transpose_a"]), bool(attrs["transpose_b"])
    l_keep, lk, rk, r_keep, _ = dot_shapes(ls, rs, ta, tb)
    if lk != rk:
        raise MXNetError(f"cuda codegen: dot contracted dimensions differ ({ls} x {rs})")
    m, k, n = _size(l_keep), lk, _size(r_keep)
    T = ctype(epi.dtype)

    def load_b(kv, nv, zv):
        return Operand([], f"B[{nv} * {k} + {kv}]", True) if tb else Operand([], f"B[{kv} * {n} + {nv}]", False)

    def store(mv, nv, zv, r):
        return [f"const int64_t o = {mv} * {n} + {nv};"] + epi.code("o", r)
    return gemm_launch(ctx, epi.dtype, m, n, k, 1,
                       lambda mv, kv, zv: Operand([], f"A[{kv} * {m} + {mv}]", False) if ta
                       else Operand([], f"A[{mv} * {k} + {kv}]", True),
                       load_b, store, [(f"const {T} *", "A"), (f"const {T} *", "B")] + epi.params(),
                       list(ins[:2]) + epi.args())


def _batch_dot(ctx, node, attrs, ins, epi: Epilogue) -> list:
    ls, rs = _shape(ins[0]), _shape(ins[1])
    if len(ls) < 3 or ls[:-2] != rs[:-2]:
        raise MXNetError(f"cuda codegen: batch_dot needs matching batch dims, got {ls} x {rs}")
    ta, tb = bool(attrs["transpose_a"]), bool(attrs["transpose_b"])
    m, k = (ls[-1], ls[-2]) if ta else (ls[-2], ls[-1])
    n, k2 = (rs[-2], rs[-1]) if tb else (rs[-1], rs[-2])
    if k != k2:
        raise MXNetError(f"cuda codegen: batch_dot contracted dimensions differ ({ls} x {rs})")
    batch = _size(ls[:-2])
    T = ctype(epi.dtype)

    def load_a(mv, kv, zv):
        if ta:
            return Operand([], f"A[z * {m * k} + {kv} * {m} + {mv}]", False)
        return Operand([], f"A[z * {m * k} + {mv} * {k} + {kv}]", True)

    def load_b(kv, nv, zv):
        if tb:
            return Operand([], f"B[z * {k * n} + {nv} * {k} + {kv}]", True)
        return Operand([], f"B[z * {k * n} + {kv} * {n} + {nv}]", False)

    def store(mv, nv, zv, r):
        return [f"const int64_t o = z * {m * n} + {mv} * {n} + {nv};"] + epi.code("o", r)
    return gemm_launch(ctx, epi.dtype, m, n, k, batch, load_a, load_b, store,
                       [(f"const {T} *", "A"), (f"const {T} *", "B")] + epi.params(), list(ins[:2]) + epi.args())


# --------------------------------------------------------------------------------------
# Convolution and Deconvolution
# --------------------------------------------------------------------------------------

def _pad3(t, fill) -> tuple:
    t = tuple(int(x) for x in t)
    return (fill,) * (3 - len(t)) + t


@dataclass(frozen=True)
class ConvGeometry:
    """A channel-first convolution padded to 3 spatial dims (D, H, W)."""
    n: int
    c: int
    f: int
    groups: int
    in_sp: tuple
    out_sp: tuple
    kernel: tuple
    stride: tuple
    dilate: tuple
    pad: tuple

    @property
    def osp(self) -> int:
        return _size(self.out_sp)

    @property
    def ksp(self) -> int:
        return _size(self.kernel)


def _conv_geometry(op: str, attrs, xs, ys, pad=None) -> ConvGeometry:
    geo = C.conv_geometry(op, attrs)
    if geo["layout"] not in (None, "NCW", "NCHW", "NCDHW"):
        raise MXNetError(f"cuda codegen: {op} with layout {geo['layout']} has no CUDA lowering (channel-first only)")
    return ConvGeometry(xs[0], xs[1], ys[1], int(geo["num_group"]), _pad3(xs[2:], 1), _pad3(ys[2:], 1),
                        _pad3(geo["kernel"], 1), _pad3(geo["stride"], 1), _pad3(geo["dilate"], 1),
                        _pad3(geo["pad"] if pad is None else pad, 0))


def _unravel(var: str, names: list, sizes: list) -> list[str]:
    """Statements splitting `var` into names (row-major over sizes; the first takes the rest)."""
    out, rest = [], var
    for i in reversed(range(1, len(names))):
        out.append(f"const int64_t {names[i]} = {rest} % {sizes[i]};")
        nxt = f"{names[i]}_q"
        out.append(f"const int64_t {nxt} = {rest} / {sizes[i]};")
        rest = nxt
    out.append(f"const int64_t {names[0]} = {rest};")
    return out


def _input_tap(g: ConvGeometry, chan: str) -> tuple[list[str], str]:
    """Statements and the expression of input element (img, chan) under tap (kd, kh, kw) of
    output position (od, oh, ow), zero in the padding."""
    (D, H, W), (sd, sh, sw), (dd, dh, dw), (pd, ph, pw) = g.in_sp, g.stride, g.dilate, g.pad
    stmts = [f"const int64_t id = od * {sd} - {pd} + kd * {dd};",
             f"const int64_t ih = oh * {sh} - {ph} + kh * {dh};",
             f"const int64_t iw = ow * {sw} - {pw} + kw * {dw};"]
    inside = f"(uint64_t)id < {D}ULL && (uint64_t)ih < {H}ULL && (uint64_t)iw < {W}ULL"
    expr = f"({inside}) ? X[(((img * {g.c} + {chan}) * {D} + id) * {H} + ih) * {W} + iw] : 0"
    return stmts, expr


def _convolution(ctx, node, attrs, ins, epi: Epilogue) -> list:
    x, w = ins[0], ins[1]
    g = _conv_geometry("Convolution", attrs, _shape(x), _shape(epi.outputs[0]))
    G = g.groups
    cg, fg = g.c // G, g.f // G
    KD, KH, KW = g.kernel
    OD, OH, OW = g.out_sp
    has_bias = not attrs["no_bias"]
    T = ctype(epi.dtype)
    params = [(f"const {T} *", "X"), (f"const {T} *", "Wt")] + ([(f"const {T} *", "bias")] if has_bias else [])
    args = [x, w] + ([ins[2]] if has_bias else [])
    if cg == 1 and G > 1:
        return _depthwise(ctx, g, params + epi.params(), args + epi.args(), epi, has_bias)
    K = cg * g.ksp

    def load_a(mv, kv, zv):         # filters of group z, row-major (F, C/G * k)
        return Operand([], f"Wt[(z * {fg} + {mv}) * {K} + {kv}]", True)

    def load_b(kv, nv, zv):         # the input under tap k for output position n
        stmts = (_unravel(kv, ["c", "kd", "kh", "kw"], [cg, KD, KH, KW])
                 + _unravel(nv, ["img", "od", "oh", "ow"], [g.n, OD, OH, OW]))
        tap, expr = _input_tap(g, f"z * {cg} + c")
        return Operand(stmts + tap, expr, False)

    def store(mv, nv, zv, r):
        return ([f"const int64_t f = z * {fg} + {mv};", f"const int64_t img = {nv} / {g.osp};",
                 f"const int64_t o = (img * {g.f} + f) * {g.osp} + {nv} % {g.osp};"]
                + _with_bias(epi, "f" if has_bias else None, r, "o"))
    return gemm_launch(ctx, epi.dtype, fg, g.n * g.osp, K, G, load_a, load_b, store,
                       params + epi.params(), args + epi.args())


def _depthwise(ctx, g: ConvGeometry, params, args, epi: Epilogue, has_bias: bool) -> list:
    """One thread per output element; input channel = the output's group."""
    fg = g.f // g.groups
    KD, KH, KW = g.kernel
    OD, OH, OW = g.out_sp
    total = g.n * g.f * g.osp
    T = ctype(epi.dtype)
    tap, expr = _input_tap(g, "ch")
    body = ([grid_stride_loop("o", total) + " {"]
            + ["    " + s for s in _unravel("o", ["img", "f", "od", "oh", "ow"], [g.n, g.f, OD, OH, OW])]
            + [f"    const int64_t ch = f / {fg};", f"    {T} acc = ({T})0;",
               f"    for (int kd = 0; kd < {KD}; ++kd)", f"    for (int kh = 0; kh < {KH}; ++kh)",
               f"    for (int kw = 0; kw < {KW}; ++kw) {{"]
            + ["        " + s for s in tap]
            + [f"        const {T} xv = {expr};",
               f"        acc += xv * Wt[(f * {KD} + kd) * {KH * KW} + kh * {KW} + kw];", "    }"]
            + ["    " + s for s in _with_bias(epi, "f" if has_bias else None, "acc", "o")] + ["}"])
    kernel = ctx.kernel("sj_dwconv", params, "\n".join("    " + s for s in body), THREADS)
    return [ctx.launch(kernel, grid_for(total), args)]


def _deconvolution(ctx, node, attrs, ins, epi: Epilogue) -> list:
    """y[img, f, o] = sum over the group's channels c and taps k with o = i*s - p + k*d of
    x[img, c, i] * w[c, f mod F/G, k] (the adjoint of Convolution, MXNet's weight layout)."""
    x, w = ins[0], ins[1]
    xs, ys = _shape(x), _shape(epi.outputs[0])
    pad, _adj = C.deconv_pad_adj(attrs, xs[2:])
    geo = C.conv_geometry("Deconvolution", attrs)
    if geo["layout"] not in (None, "NCW", "NCHW", "NCDHW"):
        raise MXNetError(f"cuda codegen: Deconvolution with layout {geo['layout']} has no CUDA lowering")
    G = int(geo["num_group"])
    Cin, F = xs[1], ys[1]
    cg, fg = Cin // G, F // G
    D, H, W = _pad3(xs[2:], 1)
    OD, OH, OW = _pad3(ys[2:], 1)
    KD, KH, KW = _pad3(geo["kernel"], 1)
    (sd, sh, sw), (dd, dh, dw), (pd, ph, pw) = _pad3(geo["stride"], 1), _pad3(geo["dilate"], 1), _pad3(pad, 0)
    has_bias = not attrs["no_bias"]
    T = ctype(epi.dtype)
    total = _size(ys)
    params = [(f"const {T} *", "X"), (f"const {T} *", "Wt")] + ([(f"const {T} *", "bias")] if has_bias else [])
    args = [x, w] + ([ins[2]] if has_bias else [])

    def axis(o, k, s, d, p, n, name):
        return [f"const int64_t {name}s = {o} + {p} - {k} * {d};",
                f"if ({name}s < 0 || {name}s % {s} != 0 || {name}s / {s} >= {n}) continue;",
                f"const int64_t {name} = {name}s / {s};"]
    body = ([grid_stride_loop("o", total) + " {"]
            + ["    " + s for s in _unravel("o", ["img", "f", "od", "oh", "ow"], [xs[0], F, OD, OH, OW])]
            + [f"    const int64_t grp = f / {fg}, fl = f % {fg};", f"    {T} acc = ({T})0;",
               f"    for (int64_t cl = 0; cl < {cg}; ++cl) {{", f"        const int64_t c = grp * {cg} + cl;",
               f"        for (int kd = 0; kd < {KD}; ++kd) {{"]
            + ["            " + s for s in axis("od", "kd", sd, dd, pd, D, "id")]
            + [f"            for (int kh = 0; kh < {KH}; ++kh) {{"]
            + ["                " + s for s in axis("oh", "kh", sh, dh, ph, H, "ih")]
            + [f"                for (int kw = 0; kw < {KW}; ++kw) {{"]
            + ["                    " + s for s in axis("ow", "kw", sw, dw, pw, W, "iw")]
            + [f"                    acc += X[(((img * {Cin} + c) * {D} + id) * {H} + ih) * {W} + iw]",
               f"                           * Wt[((c * {fg} + fl) * {KD} + kd) * {KH * KW} + kh * {KW} + kw];",
               "                }", "            }", "        }", "    }"]
            + ["    " + s for s in _with_bias(epi, "f" if has_bias else None, "acc", "o")] + ["}"])
    kernel = ctx.kernel("sj_deconv", params + epi.params(), "\n".join("    " + s for s in body), THREADS)
    return [ctx.launch(kernel, grid_for(total), args + epi.args())]


# --------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------

_PLANS = {"FullyConnected": _fully_connected, "dot": _dot, "batch_dot": _batch_dot,
          "Convolution": _convolution, "Deconvolution": _deconvolution}


@register_lowering(*_PLANS, "_with_epilogue")
def lower_compute(node, ctx: LoweringContext) -> list:
    """A GEMM-family or convolution node, with its fused epilogue if it has one."""
    op, attrs, ins = _inner(node)
    plan = _PLANS.get(op)
    if plan is None or (node.op.name == "_with_epilogue" and not get_op(op).epilogue_host):
        raise MXNetError(f"cuda codegen: no CUDA lowering for {op} with a fused epilogue")
    dtype = _float_dtype(node, list(node.inputs) + list(node.outputs))
    if any(_size(_shape(v)) == 0 for v in ins):
        raise MXNetError(f"cuda codegen: {op} with an empty operand")
    return plan(ctx, node, attrs, ins, Epilogue.of(node, dtype))
