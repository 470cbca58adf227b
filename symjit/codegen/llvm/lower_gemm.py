"""GEMM-family lowerings (FullyConnected, dot, batch_dot, their backward ops) and the shared
machinery of every compute-bound lowering: calls into the runtime's kernel library with a
fused elementwise epilogue.

The kernels live in runtime/nnkernels.c (compiled into `symjit._runtime`): float32,
row-major, split into output blocks over the runtime's thread pool. On AVX-512 hosts they run
their own register tiles (`set_native_kernels`, `native_kernels_available`): GEMMs pack the
smaller operand once per call (dense layers: the activations, transposed in registers), or, where
B is a compile-time constant (bound weights of FullyConnected and `dot`) and there are 4 rows or
more, use B packed once at compile time (`with_packed_b`, symjit_nn_gemm_packed: no per-call
packing, rows stored straight); bias goes into the tiles' stores, and products with 1-3 rows use
a dot-product GEMV. Elsewhere (the
portable path) large products call a BLAS sgemm single-threaded inside each block (scipy's
bundled OpenBLAS, bound once per process by `bind_native_kernels`) and tiny products (at most
`SMALL_GEMM` multiply-adds, e.g. a 16x16 layer at batch 1) run a built-in loop nest, so they
pay no library call overhead. Plans may use compile-time constants (`const_value`) to add
packed parameters (`add_param`), e.g. convolution weights in the layout the tiles read.
`benchmarks/bench_gemm_choices.py` holds the measurements behind these choices.

A lowered node becomes one `DirectCall` to a small generated wrapper function:

    define internal void @sj_nn_<hash>(ptr v0, ptr v1, ...)   ; the node's buffers
        call void @symjit_nn_<kernel>(ptr @<descriptor>, ..., ptr @<epilogue>, ptr %epi_args)

always inlined into the segment that calls it (as a function of its own it would cost LLVM
about a millisecond of code generation), where the descriptor is a module constant of int64
geometry (layout documented in nnkernels.c) and the epilogue, for `_with_epilogue` nodes, is a
generated elementwise kernel (`elementwise.emit_elementwise`) that the C kernel runs on each
output block as soon as the block is complete, in place on the output buffer (Input(0) of the
expressions is the inner op's result, Input(k >= 1) the extra inputs, broadcast as usual).

Only float32 is lowered natively; other dtypes return None (the node runs its reference).
"""
from __future__ import annotations

import ctypes
import functools
import threading
from dataclasses import dataclass

import numpy as np

from ...ops import scalar as S
from ...ops.elemwise import activation_expr
from ...ops.registry import get_op
from ...ir.target import AVX512_KERNELS
from ...runtime import native_library
from .. import blas
from .elementwise import ElementwiseSpec, emit_elementwise, kernel_name
from .graph import TABLE, DirectCall, LoweringContext, register_lowering
from .target import current_target, is_host

__all__ = ["NativeCall", "emit_native", "bind_native_kernels", "set_native_kernels", "native_kernels_available",
           "const_value", "add_param", "library_packing", "epilogue_spec", "is_f32", "shape_of",
           "SMALL_GEMM", "gemm_call"]

#: products with at most this many multiply-adds use the built-in loop nest instead of the BLAS
#: (benchmarks/bench_gemm_choices.py: at 1x16x16 the loop nest is ~1.2x faster than a BLAS
#: call, at 8x128x128 = 131072 madds the BLAS is 5x faster; the threshold sits between)
SMALL_GEMM = 32768

#: the kernel library's ReLU epilogue (nnkernels.c symjit_nn_epi_relu): kernels that know it
#: apply it in their stores instead of a second pass over the output
RELU_EPILOGUE = "symjit_nn_epi_relu"

#: the kernel library's activation epilogues (ReLU in gemm.c, the others runtime/nn/epilogue.c),
#: by the registry activation (`Activation` act_type) they compute on the result in place: no
#: kernel is generated for these
LIBRARY_EPILOGUES = {"relu": RELU_EPILOGUE, "sigmoid": "symjit_nn_epi_sigmoid", "tanh": "symjit_nn_epi_tanh"}

#: the C type of every field of the kernel library's descriptor structs (nnkernels.h)
I64 = ctypes.c_int64


class GemmDesc(ctypes.Structure):
    """runtime/nnkernels.h `symjit_gemm_desc` (field names, order and types checked against the
    header by tests/runtime/test_kernel_header.py); bias_mode is a BIAS_* value."""
    _fields_ = [("batch", I64), ("m", I64), ("n", I64), ("k", I64), ("trans_a", I64), ("trans_b", I64),
                ("stride_a", I64), ("stride_b", I64), ("stride_c", I64), ("bias_mode", I64)]


#: where symjit_nn_gemm's bias goes (nnkernels.h enum symjit_gemm_bias)
BIAS_MODES = {"none": 0, "per_column": 1, "per_row": 2}


def desc_words(desc: ctypes.Structure) -> tuple:
    """A descriptor struct as the int64 words NativeCall emits as its module constant (the
    structs have int64 fields only: no padding)."""
    return tuple(np.frombuffer(bytes(desc), dtype=np.int64).tolist())


def desc_c_initializer(desc: ctypes.Structure) -> str:
    """A C designated initializer of a descriptor struct (`{.n = 1, .in_size = {1, 8, 8}, ...}`),
    for generated C sources that include nnkernels.h."""
    parts = []
    for name, _ctype in desc._fields_:
        value = getattr(desc, name)
        if isinstance(value, ctypes.Structure):
            text = desc_c_initializer(value)
        elif isinstance(value, ctypes.Array):
            text = "{" + ", ".join(str(int(v)) for v in value) + "}"
        else:
            text = str(int(value))
        parts.append(f".{name} = {text}")
    return "{" + ", ".join(parts) + "}"


#: symjit_nn_tune keys (runtime/nnkernels.h), for the benchmarks that measure the library's choices
TUNE_KEYS = {"kc": 0, "shape": 1, "conv": 2, "wblock": 3, "blocks": 4, "prefetch": 5, "chanvec_ow": 6,
             "min_task": 7, "blocked_chunk": 8, "blocked_split": 9, "blocked_pad_copy": 10,
             "portable_blas": 11, "pool": 12}
#: values of the "conv" key (nnkernels.h enum symjit_tune_conv): the alternative a convolution
#: takes instead of the built-in choice
TUNE_CONV_VALUES = {"no_implicit": 1, "portable_depthwise": 3, "no_fvec": 4, "force_fvec": 5, "no_wnat": 6,
                    "pool_unfused": 7, "dw_permute_rows": 13, "weight_rows": 14,
                    "pool_rows_tmp": 15, "dw_wide_acc": 16,
                    "pw_blas": 17, "tiles_split_m": 18}
#: values of the "prefetch" key (nnkernels.h enum symjit_tune_prefetch): the prefetch switched off
TUNE_PREFETCH_VALUES = {"weights": 1, "dw_rows": 2, "kblock": 3, "planes": 4, "a_rows": 5, "dw_out": 7,
                        "gemm_out": 8, "wino_out": 9, "blocked_out": 10}

#: C signature of each kernel-library function, as LLVM parameter types
C_SIGNATURES = {
    **{fn: ["i64", "i64", "ptr"] for fn in LIBRARY_EPILOGUES.values()},
    "symjit_nn_gemm": ["ptr"] * 7,
    "symjit_nn_gemm_packed": ["ptr"] * 8,
    "symjit_nn_conv": ["ptr"] * 7,
    "symjit_nn_conv_packed": ["ptr"] * 8,
    "symjit_nn_conv_pool": ["ptr"] * 6,
    "symjit_nn_conv_bwd_data": ["ptr"] * 7,
    "symjit_nn_conv_bwd_weight": ["ptr"] * 4,
    "symjit_nn_bias_bwd": ["i64", "i64", "i64", "ptr", "ptr"],
    "symjit_nn_pool": ["ptr"] * 3,
    "symjit_nn_pool_bwd": ["ptr"] * 5,
    "symjit_nn_embedding": ["i64"] * 4 + ["ptr"] * 3,
    "symjit_nn_embedding_bwd": ["i64"] * 4 + ["ptr"] * 3,
    "symjit_nn_conv_blocked": ["ptr"] * 6,
    "symjit_nn_to_blocked": ["ptr"] * 3,
    "symjit_nn_pool_blocked": ["ptr"] * 3,
    "symjit_nn_from_blocked": ["ptr"] * 3,
    "symjit_nn_rnn": ["ptr"] * 10,
    "symjit_nn_rnn_bwd": ["ptr"] * 14,
}

_BIND_LOCK = threading.Lock()
_BOUND: dict[str, int] = {}


def bind_native_kernels(use_blas: bool = True, small_gemm: int = SMALL_GEMM) -> dict[str, int]:
    """Make the kernel library's functions visible to generated code and bind the BLAS
    (idempotent; `use_blas=False` or `small_gemm` re-bind, for benchmarks comparing choices).
    Returns {symbol: address}."""
    import llvmlite.binding as llvm

    with _BIND_LOCK:
        lib = native_library()
        if not _BOUND:
            for sym in C_SIGNATURES:
                addr = ctypes.cast(getattr(lib, sym), ctypes.c_void_p).value
                llvm.add_symbol(sym, addr)
                _BOUND[sym] = addr
        sgemm = blas.sgemm_address() if use_blas else 0
        local = blas.set_threads_local_address() if use_blas else 0
        setter = lib.symjit_nn_set_blas
        setter.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        setter.restype = None
        setter(sgemm or None, local or None, int(small_gemm))
        return dict(_BOUND)


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------

def const_value(ctx: LoweringContext | None, v) -> np.ndarray | None:
    """The compile-time value of `v` if a `_const` node of the graph produces it, else None."""
    if ctx is None:
        return None
    table = ctx.__dict__.get("_const_values")
    if table is None:
        table = {n.outputs[0]: n.attrs["value"] for n in ctx.graph.nodes if n.op.name == "_const"}
        ctx.__dict__["_const_values"] = table
    return table.get(v)


def add_param(ctx: LoweringContext, name: str, array: np.ndarray):
    """A new constant parameter of the compiled graph (e.g. weights packed at compile time for
    the kernel library), passed to the code by pointer like the graph's `_const` values."""
    from ...ir.graph import TensorType, Value
    array = np.ascontiguousarray(array)
    array.setflags(write=False)
    v = Value(f"__param{len(ctx.placement.params)}_{name}", TensorType(tuple(array.shape), array.dtype.name))
    ctx.placement.where[v] = ("param", len(ctx.placement.params))
    ctx.placement.params.append((v.name, array))
    return v


def kernel_library():
    """ctypes handle of the kernel library (symjit._runtime), for compile-time helpers."""
    return native_library()


@functools.lru_cache(maxsize=None)
def _tune_function():
    fn = kernel_library().symjit_nn_tune
    fn.argtypes = [ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int64
    return fn


def kernel_tune(key: str, value: int) -> int:
    """Set the kernel library's override `key` (TUNE_KEYS; values such as TUNE_CONV_VALUES) for
    this process, read by the kernels at run time; 0 restores the built-in choice. Returns the
    previous value. For benchmarks and tests that compare the library's choices."""
    return int(_tune_function()(TUNE_KEYS[key], int(value)))


def is_f32(*values) -> bool:
    return all(v.type.known and np.dtype(v.type.dtype) == np.float32 for v in values)


def shape_of(v) -> tuple:
    return tuple(int(d) for d in v.type.shape)


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


@dataclass
class NativeCall:
    """One call of a kernel-library function: `args` items are ("desc",) for the int64
    descriptor `desc`, ("v", Value), ("null",), ("i64", int), ("epi",), ("epi_args",)."""
    fn: str
    desc: tuple
    args: list


def epilogue_spec(node):
    """(ElementwiseSpec, argument Values, output order) of a `_with_epilogue` node's
    expressions evaluated in place over its first output, or None if the codegen cannot run
    them. The expression of output 0 is evaluated last, so every read of Input(0) (the inner
    result held in output 0's buffer) happens before output 0 is overwritten."""
    a = node.attrs
    k = a["num_inner"]
    outs = list(node.outputs)
    extras = list(node.inputs[k:])
    out_shape = shape_of(outs[0])
    if not is_f32(*outs, *extras) or any(shape_of(o) != out_shape for o in outs):
        return None
    order = list(range(1, len(outs))) + [0]
    exprs = tuple(a["exprs"][j] for j in order)
    spec = ElementwiseSpec(exprs, ("float32",) * (1 + len(extras)),
                           (out_shape,) + tuple(shape_of(v) for v in extras), "float32",
                           ("float32",) * len(outs), out_shape)
    return spec, [outs[0]] + extras + [outs[j] for j in order]


def library_epilogue(spec) -> str | None:
    """The kernel library's function for an epilogue that is exactly relu, sigmoid or tanh of
    the result in place (float32, one output, no other inputs; the registry's expressions of
    those activations), else None (a kernel is generated)."""
    if len(spec.in_dtypes) != 1 or spec.out_dtypes != ("float32",):
        return None
    for act, fn in LIBRARY_EPILOGUES.items():
        if spec.exprs == (activation_expr(act, S.Input(0)),):
            return fn
    return None


def _declare(ctx: LoweringContext, fn: str) -> None:
    declared = ctx.mb.__dict__.setdefault("_nn_declared", set())
    if fn not in declared:
        declared.add(fn)
        ctx.mb.functions.append(f"declare void @{fn}({', '.join(C_SIGNATURES[fn])})\n")


def emit_native(ctx: LoweringContext, calls: list, epilogue=None) -> list:
    """Emit one wrapper function running `calls` (NativeCalls) in order, and return the
    DirectCall that invokes it. `epilogue` is `epilogue_spec(node)`'s result or None."""
    bind_native_kernels_once()
    values = []

    def slot(v) -> int:
        for i, u in enumerate(values):
            if u is v:
                return i
        values.append(v)
        return len(values) - 1

    epi_name, epi_slots = None, []
    if epilogue is not None:
        spec, epi_values = epilogue
        epi_name = library_epilogue(spec)
        if epi_name is not None:
            _declare(ctx, epi_name)
        else:
            epi_name = kernel_name(spec, "sj_epi")
            if epi_name not in ctx.mb.symbols:
                emit_elementwise(ctx.mb, spec, epi_name)
        epi_slots = [slot(v) for v in epi_values]
    arg_slots = [[slot(x[1]) if x[0] == "v" else None for x in c.args] for c in calls]
    key = repr([(c.fn, c.desc, [x if x[0] != "v" else ("v", s) for x, s in zip(c.args, sl)])
                for c, sl in zip(calls, arg_slots)]) + f"|{epi_name}|{epi_slots}|{len(values)}"
    name = ctx.unique("sj_nn", key)
    if name not in ctx.mb.symbols:
        lines = []
        if epi_name is not None:
            n = len(epi_slots)
            lines.append(f"  %ea = alloca [{n} x ptr], align 8")
            for i, s in enumerate(epi_slots):
                lines.append(f"  %ea{i} = getelementptr inbounds [{n} x ptr], ptr %ea, i64 0, i64 {i}")
                lines.append(f"  store ptr %v{s}, ptr %ea{i}, align 8")
        consts = []
        for ci, (c, sl) in enumerate(zip(calls, arg_slots)):
            _declare(ctx, c.fn)
            if c.desc:
                consts.append(f"@{name}_d{ci} = private unnamed_addr constant [{len(c.desc)} x i64] "
                              f"[{', '.join(f'i64 {int(x)}' for x in c.desc)}], align 8\n")
            parts = []
            for x, s in zip(c.args, sl):
                kind = x[0]
                if kind == "desc":
                    parts.append(f"ptr @{name}_d{ci}")
                elif kind == "v":
                    parts.append(f"ptr %v{s}")
                elif kind == "null":
                    parts.append("ptr null")
                elif kind == "i64":
                    parts.append(f"i64 {int(x[1])}")
                elif kind == "epi":
                    parts.append(f"ptr @{epi_name}" if epi_name else "ptr null")
                elif kind == "epi_args":
                    parts.append("ptr %ea" if epi_name else "ptr null")
                else:
                    raise ValueError(f"codegen: unknown native argument {x!r}")
            lines.append(f"  call void @{c.fn}({', '.join(parts)})")
        params = ", ".join(f"ptr %v{i}" for i in range(len(values)))
        ctx.mb.functions.extend(consts)
        ctx.mb.functions.append(f"define internal void @{name}({params}) #0 {{\nentry:\n" + "\n".join(lines)
                                + "\n  ret void\n}\n")
        ctx.mb.symbols.append(name)
    return [DirectCall(name, list(values))]


def set_native_kernels(mode: int = -1) -> bool:
    """Choose how the kernel library computes GEMM-shaped work: 1 or -1 (default) its AVX-512
    register tiles where the CPU has AVX-512, 0 the BLAS and loop nests (the portable path).
    Takes effect for every compiled graph at its next call. Returns whether the tiles are used."""
    fn = native_library().symjit_nn_set_native
    fn.argtypes = [ctypes.c_int64]
    fn.restype = ctypes.c_int64
    return bool(fn(int(mode)))


def native_kernels_available() -> bool:
    """Whether the kernel library of the target being lowered for has the AVX-512 tiles (the
    path its defaults, and the measured choices of lower_conv, assume): on the host, whether
    this CPU runs them; for another target, whether its `kernels` include them."""
    t = current_target()
    if t is None or is_host(t):
        return _host_runs_native_kernels()
    return AVX512_KERNELS in t.kernels


@functools.lru_cache(maxsize=None)
def _host_runs_native_kernels() -> bool:
    fn = kernel_library().symjit_nn_native_available
    fn.restype = ctypes.c_int64
    return bool(fn())


_ONCE = []


def bind_native_kernels_once() -> None:
    if not _ONCE:
        bind_native_kernels()
        _ONCE.append(True)


def gemm_call(batch, m, n, k, ta, tb, sa, sb, sc, bias_mode, A, B, bias, C) -> NativeCall:
    """C[b] = op(A[b]) op(B[b]) (+ bias) for b < batch, row-major (see nnkernels.c)."""
    desc = desc_words(GemmDesc(batch=int(batch), m=int(m), n=int(n), k=int(k), trans_a=int(ta), trans_b=int(tb),
                               stride_a=int(sa), stride_b=int(sb), stride_c=int(sc), bias_mode=int(bias_mode)))
    return NativeCall("symjit_nn_gemm", desc, [("desc",), ("v", A), ("v", B),
                                                ("v", bias) if bias is not None else ("null",),
                                                ("v", C), ("epi",), ("epi_args",)])


# --------------------------------------------------------------------------------------------
# Plans: (op name, attrs, input Values, output Values) -> NativeCalls, or None
# --------------------------------------------------------------------------------------------

#: whether GEMMs with a compile-time constant B (dense layers with bound weights) use B packed
#: at compile time (`symjit_nn_gemm_packed`); False: the per-call packing of symjit_nn_gemm
#: (benchmarks/bench_small_models.py switches it to measure both in one process)
PACK_CONSTANT_WEIGHTS = True


def packing_job(fn_name: str, desc, w):
    """(pack function, descriptor words, weights, packed size in floats) when the kernel
    library's `int64_t fn_name(desc, w, out)` wants constant float32 weights `w` packed for
    `desc` (it returns the floats it writes, 0 for no packing; out NULL: only the size), else
    None (also when w is not a float32 constant). The library decides from the descriptor
    alone, so the packing made here matches what it expects at run time."""
    if w is None or w.dtype != np.float32:
        return None
    fn = getattr(kernel_library(), fn_name)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int64
    d = np.ascontiguousarray(desc, dtype=np.int64)
    w = np.ascontiguousarray(w, dtype=np.float32)
    size = fn(d.ctypes.data, w.ctypes.data, None)
    return (fn, d, w, size) if size > 0 else None


def run_packing(job, out: np.ndarray) -> None:
    """Pack a `packing_job` into `out` (float32, its size from the job); a C call that does
    not hold the GIL, so packings may run on other threads (LoweringContext.defer)."""
    fn, d, w, _size = job
    fn(d.ctypes.data, w.ctypes.data, out.ctypes.data)


def library_packing(fn_name: str, desc, w) -> np.ndarray | None:
    """Constant weights `w` packed now by the kernel library's `fn_name` (`packing_job`), or
    None when it wants no packing."""
    job = packing_job(fn_name, desc, w)
    if job is None:
        return None
    out = np.empty(job[3], np.float32)
    run_packing(job, out)
    return out


def with_packed_b(call: NativeCall, ctx) -> NativeCall:
    """`call` (a gemm_call) as a symjit_nn_gemm_packed call when its B is a compile-time
    constant that the kernel library packs for its geometry (on the AVX-512 tiles), else
    `call` unchanged."""
    if ctx is None or not PACK_CONSTANT_WEIGHTS or not native_kernels_available():
        return call
    b = call.args[2][1]
    packed = library_packing("symjit_nn_gemm_pack", call.desc, const_value(ctx, b))
    if packed is None:
        return call
    bp = add_param(ctx, "gemm_packed", packed)
    args = list(call.args)
    return NativeCall("symjit_nn_gemm_packed", call.desc, args[:3] + [("v", bp)] + args[3:])


def plan_fully_connected(attrs, ins, outs, ctx=None):
    x, w = ins[0], ins[1]
    y = outs[0]
    h = int(attrs["num_hidden"])
    xs = shape_of(x)
    k = _size(xs[1:]) if attrs["flatten"] else xs[-1]
    m = xs[0] if attrs["flatten"] else _size(xs[:-1])
    if shape_of(w) != (h, k):
        return None
    bias = None if attrs["no_bias"] else ins[2]
    bias_mode = BIAS_MODES["none"] if bias is None else BIAS_MODES["per_column"]
    return [with_packed_b(gemm_call(1, m, h, k, False, True, 0, 0, 0, bias_mode, x, w, bias, y), ctx)]


plan_fully_connected.uses_context = True


def plan_fc_backward_data(attrs, ins, outs):
    dy, w, _x = ins
    h = int(attrs["num_hidden"])
    m = _size(shape_of(dy)) // h
    k = shape_of(w)[1]
    if m * k != _size(shape_of(outs[0])):
        return None
    return [gemm_call(1, m, k, h, False, False, 0, 0, 0, 0, dy, w, None, outs[0])]


def plan_fc_backward_weight(attrs, ins, outs):
    dy, x = ins
    h = int(attrs["num_hidden"])
    rows = _size(shape_of(dy)) // h
    units = shape_of(outs[0])[1]
    if rows * units != _size(shape_of(x)):
        return None
    return [gemm_call(1, h, units, rows, True, False, 0, 0, 0, 0, dy, x, None, outs[0])]


def _dot_dims(attrs, ls, rs):
    from ...ops.linalg import dot_shapes
    ta, tb = bool(attrs["transpose_a"]), bool(attrs["transpose_b"])
    l_keep, lk, rk, r_keep, _ = dot_shapes(ls, rs, ta, tb)
    if lk != rk:
        return None
    return _size(l_keep), lk, _size(r_keep), ta, tb


def plan_dot(attrs, ins, outs, ctx=None):
    dims = _dot_dims(attrs, shape_of(ins[0]), shape_of(ins[1]))
    if dims is None:
        return None
    m, k, n, ta, tb = dims
    return [with_packed_b(gemm_call(1, m, n, k, ta, tb, 0, 0, 0, 0, ins[0], ins[1], None, outs[0]), ctx)]


plan_dot.uses_context = True


def plan_backward_dot(attrs, ins, outs):
    z, lhs, rhs = ins
    dims = _dot_dims(attrs, shape_of(lhs), shape_of(rhs))
    if dims is None:
        return None
    m, k, n, ta, tb = dims
    dl, dr = outs
    calls = []
    # dA = Z op_b(rhs)^T (m x k), stored transposed when ta; dB = op_a(lhs)^T Z likewise
    if not ta:
        calls.append(gemm_call(1, m, k, n, False, not tb, 0, 0, 0, 0, z, rhs, None, dl))
    else:
        calls.append(gemm_call(1, k, m, n, tb, True, 0, 0, 0, 0, rhs, z, None, dl))
    if not tb:
        calls.append(gemm_call(1, k, n, m, not ta, False, 0, 0, 0, 0, lhs, z, None, dr))
    else:
        calls.append(gemm_call(1, n, k, m, True, ta, 0, 0, 0, 0, z, lhs, None, dr))
    return calls


def plan_batch_dot(attrs, ins, outs):
    ls, rs = shape_of(ins[0]), shape_of(ins[1])
    if len(ls) < 3 or ls[:-2] != rs[:-2]:
        return None
    ta, tb = bool(attrs["transpose_a"]), bool(attrs["transpose_b"])
    m, k = (ls[-1], ls[-2]) if ta else (ls[-2], ls[-1])
    n, k2 = (rs[-2], rs[-1]) if tb else (rs[-1], rs[-2])
    if k != k2:
        return None
    batch = _size(ls[:-2])
    return [gemm_call(batch, m, n, k, ta, tb, m * k, k * n, m * n, 0, ins[0], ins[1], None, outs[0])]


#: op name -> plan; `lower_conv` adds the convolution family (every plan here may host an epilogue
#: if fusion allows it, see passes/fusion.py)
PLANS = {
    "FullyConnected": plan_fully_connected,
    "_backward_FullyConnected_data": plan_fc_backward_data,
    "_backward_FullyConnected_weight": plan_fc_backward_weight,
    "dot": plan_dot,
    "_backward_dot": plan_backward_dot,
    "batch_dot": plan_batch_dot,
}


def plan_gemm_dims(op):
    """The plan of an op with the `gemm` trait (`op.gemm_dims`: one, possibly batched, GEMM)."""
    def plan(attrs, ins, outs):
        dims = op.gemm_dims(attrs, shape_of(ins[0]), shape_of(ins[1]))
        if dims is None:
            return None
        batch, m, n, k, sa, sb, sc = dims
        if batch * m * n != _size(shape_of(outs[0])):
            return None
        return [gemm_call(batch, m, n, k, False, False, sa, sb, sc, 0, ins[0], ins[1], None, outs[0])]
    return plan


def plan_of(op):
    """The plan lowering `op`: its entry in PLANS, else its `gemm` trait's; None if neither."""
    plan = PLANS.get(op.name)
    if plan is None and callable(getattr(op, "gemm_dims", None)):
        plan = plan_gemm_dims(op)
    return plan


@TABLE.register_trait("gemm")
def lower_planned(node, ctx: LoweringContext):
    """Lower a node whose op has a plan (`plan_of`; float32 only; empty tensors run in Python)."""
    if not is_f32(*node.inputs, *node.outputs):
        return None
    if any(_size(shape_of(v)) == 0 for v in list(node.inputs) + list(node.outputs)):
        return None
    calls = _call_plan(plan_of(node.op), node.attrs, list(node.inputs), list(node.outputs), ctx)
    if calls is None:
        return None
    return emit_native(ctx, calls)


def _call_plan(plan, attrs, ins, outs, ctx):
    """plan(attrs, ins, outs), with ctx=ctx for plans that use the lowering context (marked
    `uses_context`, e.g. to pack constant weights at compile time)."""
    if getattr(plan, "uses_context", False):
        return plan(attrs, ins, outs, ctx=ctx)
    return plan(attrs, ins, outs)


@register_lowering("_with_epilogue")
def lower_with_epilogue(node, ctx: LoweringContext):
    """A library op (an `epilogue_host`) whose result is transformed in place by its epilogue,
    block by block."""
    a = node.attrs
    plan = plan_of(get_op(a["inner"]))
    if plan is None or not get_op(a["inner"]).epilogue_host:
        return None
    k = a["num_inner"]
    inner_in = list(node.inputs[:k])
    if not is_f32(*inner_in) or any(_size(shape_of(v)) == 0 for v in inner_in + list(node.outputs)):
        return None
    epi = epilogue_spec(node)
    if epi is None:
        return None
    calls = _call_plan(plan, a["inner_attrs"], inner_in, [node.outputs[0]], ctx)
    if calls is None or len(calls) != 1 or ("epi",) not in calls[0].args:
        return None
    return emit_native(ctx, calls, epi)


for _op in PLANS:
    register_lowering(_op)(lower_planned)

