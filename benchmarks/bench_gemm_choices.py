"""Measurements behind the kernel choices of lower_gemm / lower_conv / nnkernels.c (run: python benchmarks/bench_gemm_choices.py).

For each shape every candidate is compiled through the normal pipeline (a one-node graph plus
relu, `compile_planned`; convolution weights and bias are `_const` nodes, as in an imported
model, so the lowering may pack them at compile time) and timed round robin, each candidate
switching the kernel library to its configuration just before its call (a few ctypes calls),
so machine load affects all candidates alike. Each candidate has its own operands, so every call
finds the caches holding the previous candidate's data, as a layer of a network finds them
(its weights are not in L2 either); the order is shuffled every round, so no candidate always
follows the same (e.g. cache-flushing) one. Printed per row: the fastest call (on a shared machine the
minimum is what a kernel costs undisturbed; --stat median for medians), GFLOP/s
(useful multiply-adds: Winograd counts the direct convolution's) and the ratio to the choice
symjit makes by default (marked *).

Candidates (the library's defaults on AVX-512 hosts first):
  tiles    the AVX-512 register tiles of nnkernels.c (own micro-kernels; the default where the
           CPU has AVX-512F/BW/DQ/VL)
  blas     the portable path: scipy's OpenBLAS sgemm (SkylakeX kernels on AVX-512 hosts, see
           symjit/codegen/blas.py) single-threaded inside each block of the runtime's pool, and
           the C loop nests (`symjit_nn_set_native(0)`)
  loop     the portable path's built-in i-k-j loop nest (tiny products)
  numpy    numpy.matmul + bias + relu with numpy's own OpenBLAS and threads -- timed in a separate
           phase after the others, in a block: OpenBLAS's threads spin after a call and would
           take a core from whatever runs next
Convolution methods (descriptor slot 22, and `symjit_nn_tune` overrides of the tiles' choice):
  implicit   implicit GEMM: the input split into zero-padded stride phase planes, the output
             computed a few columns wide, every GEMM row a shifted plane (no im2col)
  fvec       filter-vector tiles over weights packed at compile time (positions broadcast from
             the input, the phase planes or an im2col matrix; for few output positions)
  wino       Winograd F(2x2, 3x3) (tiles: fused per block of tile rows, U packed at compile time)
  depthwise  direct per-plane loops (tiles: masked loads straight from the input)
  *-blas     the same method on the portable path (im2col + sgemm; Winograd with sgemm)

Sections (--section): gemm, conv, convbwd (weight and data gradients), shapes (tile shape per GEMM), kblock (K blocking of the tiles).
Options: --quick (fewer shapes), --threads N (default: the runtime's), --repeats R.
"""
from __future__ import annotations

import argparse
import ctypes
import time

import numpy as np

from model_bench_util import numpy_blas_threads

from symjit import runtime
from symjit.codegen.llvm import lower_conv, lower_gemm
from symjit.ops import conv_method
from symjit.codegen.llvm.executable import compile_planned
from symjit.ir import GraphBuilder, TensorType
from symjit.passes.manager import compile_graph

#: symjit_nn_tune keys (nnkernels.c)
TUNE_KC, TUNE_SHAPE, TUNE_CONV = (lower_gemm.TUNE_KEYS[k] for k in ("kc", "shape", "conv"))
#: TUNE_CONV values (runtime/nnkernels.h enum symjit_tune_conv): 0 the library's choice; im2col
#: tiles (no implicit GEMM); no filter-vector path; force the filter-vector path
CONV_AUTO = 0
CONV_NO_IMPLICIT, CONV_NO_FVEC, CONV_FORCE_FVEC = (lower_gemm.TUNE_CONV_VALUES[k]
                                                   for k in ("no_implicit", "no_fvec", "force_fvec"))
#: tile shapes of nnkernels.c MM_SHAPES (index + 1 forces one)
SHAPES = ["6x64", "8x48", "12x32", "8x32", "14x16", "7x64", "7x48"]

STAT = min


def _tune(key: int, value: int) -> None:
    fn = lower_gemm.kernel_library().symjit_nn_tune
    fn.argtypes = [ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int64
    fn(key, value)


def _config(native: int = 1, small: int = lower_gemm.SMALL_GEMM, **tune) -> callable:
    """A function that puts the kernel library into one configuration (every setting, so no
    candidate inherits another's)."""
    def apply():
        lower_gemm.set_native_kernels(native)
        lower_gemm.bind_native_kernels(use_blas=True, small_gemm=small)
        for key, value in ((TUNE_KC, tune.get("kc", 0)), (TUNE_SHAPE, tune.get("shape", 0)),
                           (TUNE_CONV, tune.get("conv", 0))):
            _tune(key, value)
    return apply


DEFAULT = _config()


def _run(name, build, config=DEFAULT, method=None):
    """(name, config, compiled callable); `method` forces lower_conv's method while compiling."""
    orig = lower_conv.conv_method
    if method is not None:
        lower_conv.conv_method = lambda *a: method
    try:
        config()        # packing decisions at compile time follow the configuration
        fn = build()
    finally:
        lower_conv.conv_method = orig
        DEFAULT()
    return name, config, fn


def _graph(op, inputs, attrs, consts=(), post=("relu",)):
    rng = np.random.default_rng(0)
    b = GraphBuilder(name=f"bench_{op}")
    vals = []
    for n, s in inputs:
        if n in consts:
            vals.append(b.add_node("_const", [], {"value": rng.standard_normal(s).astype(np.float32)},
                                   already_parsed=True)[0])
        else:
            vals.append(b.add_input(n, TensorType(s, "float32")))
    o = b.add_node(op, vals, attrs)[0]
    for p in post:
        o = b.add_node(p, [o], {})[0]
    opt, _ = compile_graph(b.build([o]), "inference")
    cg = compile_planned(opt, "bench")
    arrays = [rng.standard_normal(v.type.shape).astype(np.float32) for v in opt.inputs]
    return lambda: cg(arrays)


def _race(cands: list, repeats: int) -> dict:
    """STAT seconds per candidate, timed round robin, each call after its configuration."""
    for _, cfg, fn in cands:
        cfg()
        fn()
        fn()
    times = {name: [] for name, _, _ in cands}
    order = list(cands)
    rng = np.random.default_rng(1)
    for _ in range(repeats):
        rng.shuffle(order)   # a fresh order each round: no candidate always follows the same one
        for name, cfg, fn in order:
            cfg()
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    DEFAULT()
    return {k: STAT(v) for k, v in times.items()}


def _numpy_phase(fns: dict, repeats: int) -> dict:
    """numpy candidates after everything else, each in one block (its BLAS threads spin)."""
    out = {}
    for name, fn in fns.items():
        for _ in range(3):
            fn()
        ts = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        out[name] = STAT(ts)
        time.sleep(0.2)
    return out


def _row(label, res, flops, default):
    base = res[default]
    parts = [f"{k}{'*' if k == default else ''}: {t * 1e3:7.3f} ms {flops / t / 1e9:5.0f} GF/s x{t / base:4.2f}"
             for k, t in res.items()]
    print(f"{label:30s} " + " | ".join(parts), flush=True)


# ---------------------------------------------------------------------------------------- GEMM

def gemm_rows(repeats: int, quick: bool):
    shapes = [(1, 16, 16), (1, 64, 64), (8, 128, 128), (64, 784, 512), (64, 512, 512), (64, 512, 10),
              (1, 512, 1000), (1, 1024, 1000)]
    if not quick:
        shapes += [(256, 1024, 1024), (16, 256, 256), (3, 300, 70)]
    print("\nFullyConnected + relu (M=batch, K=in, N=hidden; weights are parameters, as in a Gluon "
          f"net); default: the tiles (1-3 rows: their dot-product GEMV); portable path: blas above "
          f"{lower_gemm.SMALL_GEMM} madds, else the loop nest")
    pending = []
    for m, k, n in shapes:
        ins = [("x", (m, k)), ("w", (n, k)), ("b", (n,))]
        attrs = {"num_hidden": n}
        build = lambda: _graph("FullyConnected", ins, attrs)
        cands = [_run("tiles", build), _run("blas", build, _config(native=0, small=0)),
                 _run("loop", build, _config(native=0, small=1 << 62))]
        res = _race(cands, repeats)
        rng = np.random.default_rng(0)
        x, w, bias = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (n, k), (n,)))
        pending.append(((m, k, n), res, lambda x=x, w=w, bias=bias: np.maximum(x @ w.T + bias, 0)))
    print("  (numpy: a separate phase afterwards, each shape in one block)")
    numpy_blas_threads(runtime.num_threads())
    np_res = _numpy_phase({s: fn for s, _, fn in pending}, repeats)
    for (m, k, n), res, _ in pending:
        res["numpy"] = np_res[(m, k, n)]
        default = "tiles" if lower_gemm.native_kernels_available() or m * n * k > lower_gemm.SMALL_GEMM else "loop"
        _row(f"{m}x{k} -> {n}", res, 2.0 * m * n * k, default)


# ----------------------------------------------------------------------------------- convolution

#: (batch, C, H=W, F, kernel, stride, groups): resnet18_v1 and mobilenet1.0 layers, batch 1 and 8
CONV_SHAPES = [
    (1, 3, 224, 64, 7, 2, 1), (1, 64, 56, 64, 3, 1, 1), (1, 64, 56, 128, 3, 2, 1), (1, 64, 56, 128, 1, 2, 1),
    (1, 128, 28, 128, 3, 1, 1), (1, 256, 14, 256, 3, 1, 1), (1, 256, 14, 512, 3, 2, 1), (1, 512, 7, 512, 3, 1, 1),
    (8, 3, 224, 64, 7, 2, 1), (8, 64, 56, 64, 3, 1, 1), (8, 128, 28, 128, 3, 1, 1), (8, 256, 14, 256, 3, 1, 1),
    (8, 512, 7, 512, 3, 1, 1),
    (1, 3, 224, 32, 3, 2, 1), (1, 32, 112, 64, 1, 1, 1), (1, 128, 56, 128, 1, 1, 1), (1, 512, 14, 512, 1, 1, 1),
    (1, 1024, 7, 1024, 1, 1, 1), (1, 32, 112, 32, 3, 1, 32), (1, 64, 112, 64, 3, 2, 64),
    (1, 512, 14, 512, 3, 1, 512),
]
QUICK = [1, 5, 7, 9, 12, 16, 20]


def conv_rows(repeats: int, quick: bool):
    print("\nConvolution + bias + relu, constant weights (batch, C, HxW -> F, kxk / stride, groups)")
    IM2COL, WINO = conv_method.IM2COL, conv_method.WINOGRAD
    for idx, (n, c, hw, f, k, s, g) in enumerate(CONV_SHAPES):
        if quick and idx not in QUICK:
            continue
        pad = k // 2
        out = (hw + 2 * pad - k) // s + 1
        ins = [("x", (n, c, hw, hw)), ("w", (f, c // g, k, k)), ("b", (f,))]
        attrs = {"num_filter": f, "kernel": (k, k), "stride": (s, s), "pad": (pad, pad), "num_group": g}
        build = lambda: _graph("Convolution", ins, attrs, consts=("w", "b"))
        default = lower_conv.conv_method(n, c, g, f, (k, k), (s, s), (1, 1), (out, out))
        cands = []
        if g > 1 and c // g == 1:
            cands = [_run("depthwise", build), _run("depthwise-blas", build, _config(native=0))]
            dflt = "depthwise"
        else:
            cands.append(_run("implicit", build, _config(conv=CONV_NO_FVEC), method=IM2COL))
            cands.append(_run("fvec", build, _config(conv=CONV_FORCE_FVEC), method=IM2COL))
            cands.append(_run("im2col-blas", build, _config(native=0), method=IM2COL))
            if g == 1 and k == 3 and s == 1:
                cands.append(_run("wino", build, method=WINO))
                cands.append(_run("wino-blas", build, _config(native=0), method=WINO))
            if default == WINO:
                dflt = "wino"
            else:   # the library's own choice among implicit / fvec: time it as well
                cands.append(_run("auto", build, method=IM2COL))
                dflt = "auto"
        res = _race(cands, repeats)
        flops = 2.0 * n * f * (c // g) * k * k * out * out
        _row(f"{n} {c}x{hw} -> {f} k{k} s{s} g{g}", res, flops, dflt)


# ------------------------------------------------------------------------- convolution backward

#: (batch, C, H=W, F, kernel, stride): a CIFAR-size training CNN (benchmarks/bench_train.py cnn)
#: and resnet18_v1 layers at batch 8
CONV_BWD_SHAPES = [(64, 3, 32, 32, 3, 1), (64, 32, 16, 64, 3, 1), (8, 64, 56, 64, 3, 1),
                   (8, 128, 28, 256, 3, 2), (8, 256, 14, 256, 1, 1)]


def conv_backward_rows(repeats: int, quick: bool):
    print("\nConvolution weight and data gradients (batch, C, HxW -> F, kxk / stride): tiles (weight: "
          "implicit GEMM over phase planes per image, images in chunks), im2col-tiles (weight: im2col "
          "+ tile GEMM per image), blas (portable path)")
    for n, c, hw, f, k, s in CONV_BWD_SHAPES[:2] if quick else CONV_BWD_SHAPES:
        pad = k // 2
        out = (hw + 2 * pad - k) // s + 1
        geo = {"kernel": (k, k), "stride": (s, s), "pad": (pad, pad), "num_group": 1}
        xs, dys, ws = (n, c, hw, hw), (n, f, out, out), (f, c, k, k)
        flops = 2.0 * n * f * c * k * k * out * out
        wbuild = lambda: _graph("_backward_Convolution_weight", [("dy", dys), ("x", xs)], geo, post=())
        cands = [_run("tiles", wbuild), _run("im2col-tiles", wbuild, _config(conv=CONV_NO_IMPLICIT)),
                 _run("blas", wbuild, _config(native=0))]
        _row(f"dW {n} {c}x{hw} -> {f} k{k} s{s}", _race(cands, repeats), flops, "tiles")
        dbuild = lambda: _graph("_backward_Convolution_data", [("dy", dys), ("w", ws), ("x", xs)], geo, post=())
        cands = [_run("tiles", dbuild), _run("blas", dbuild, _config(native=0))]
        _row(f"dX {n} {c}x{hw} -> {f} k{k} s{s}", _race(cands, repeats), flops, "tiles")


# ------------------------------------------------------------------------------ tile parameters

def shape_rows(repeats: int, quick: bool):
    print("\nTile shape (R rows x 16V columns) per GEMM: dot (M x K) . (K x N), tiles; auto = mm_pick")
    shapes = [(64, 3136, 576), (128, 784, 1152), (256, 196, 2304), (512, 64, 4608), (512, 49, 4608)]
    for m, n, k in shapes[:3] if quick else shapes:
        build = lambda: _graph("dot", [("a", (m, k)), ("b", (k, n))], {}, post=())
        cands = [_run("auto", build)] + [_run(name, build, _config(shape=i + 1)) for i, name in enumerate(SHAPES)]
        _row(f"{m}x{k} . {k}x{n}", _race(cands, repeats), 2.0 * m * n * k, "auto")


def kblock_rows(repeats: int, quick: bool):
    print("\nK blocking of the tiles (MM_KC): K split into blocks of about this many (accumulating)")
    shapes = [(64, 3136, 576), (256, 196, 2304), (512, 64, 4608)]
    for m, n, k in shapes:
        build = lambda: _graph("dot", [("a", (m, k)), ("b", (k, n))], {}, post=())
        cands = [_run("default", build)] + [_run(f"kc{kc}", build, _config(kc=kc)) for kc in (256, 512, 1024)]
        _row(f"{m}x{k} . {k}x{n}", _race(cands, repeats), 2.0 * m * n * k, "default")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=0)
    ap.add_argument("--stat", choices=("min", "median"), default="min")
    ap.add_argument("--section", choices=("all", "gemm", "conv", "convbwd", "shapes", "kblock"), default="all")
    a = ap.parse_args()
    global STAT
    STAT = min if a.stat == "min" else (lambda v: float(np.median(v)))
    repeats = a.repeats or (7 if a.quick else 15)
    if a.threads:
        runtime.set_num_threads(a.threads)
    print(f"threads: {runtime.num_threads()}  ({a.stat} of {repeats} round-robin calls)  AVX-512 tiles: "
          f"{'yes' if lower_gemm.native_kernels_available() else 'no (tiles rows run the portable path)'}")
    for name, fn in (("gemm", gemm_rows), ("conv", conv_rows), ("convbwd", conv_backward_rows), ("shapes", shape_rows), ("kblock", kblock_rows)):
        if a.section in ("all", name):
            fn(repeats, a.quick)


if __name__ == "__main__":
    main()
