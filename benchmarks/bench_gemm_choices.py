"""Measurements behind the kernel choices of lower_gemm / lower_conv (run: python benchmarks/bench_gemm_choices.py).

For each shape every candidate method is compiled through the normal pipeline (a one-node
graph, `compile_planned`) and timed interleaved with the others (round robin, median of the
repeats), so machine load affects all candidates alike. Printed per row: median time, GFLOP/s
and the ratio to the method symjit picks by default.

Candidates:
  GEMM  (FullyConnected):  blas   = scipy's OpenBLAS sgemm, single-threaded inside each block of
                                    the runtime's pool (the default above SMALL_GEMM madds)
                           loop   = the built-in i-k-j loop nest (the default for tiny products)
                           numpy  = numpy.matmul + bias + relu (numpy's own OpenBLAS, its threads)
  Conv:                    im2col = im2col per column block + sgemm (+ epilogue per block)
                           wino   = Winograd F(2x2, 3x3) (3x3, stride 1)
                           depthwise = direct loop nest (one channel per group)
Options: --quick (fewer shapes and repeats), --threads N, --clock cpu (rank by process CPU
time: with --threads 1 this is the work each method does, unaffected by other processes).
"""
from __future__ import annotations

import argparse
import numpy as np

from model_bench_util import LAST_CPU, race

from symjit import runtime
from symjit.codegen.llvm import lower_conv, lower_gemm
from symjit.codegen.llvm.executable import compile_planned
from symjit.ir import GraphBuilder, TensorType
from symjit.passes.manager import compile_graph


def _compile(op, inputs, attrs, post=("relu",)):
    b = GraphBuilder(name=f"bench_{op}")
    vals = [b.add_input(n, TensorType(s, "float32")) for n, s in inputs]
    o = b.add_node(op, vals, attrs)[0]
    for p in post:
        o = b.add_node(p, [o], {})[0]
    opt, _ = compile_graph(b.build([o]), "inference")
    cg = compile_planned(opt, "bench")
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(v.type.shape).astype(np.float32) for v in opt.inputs]
    return lambda: cg(arrays)


#: which clock ranks candidates: "cpu" (process CPU time: the work done, robust when other
#: processes share the cores; meaningful with one thread) or "wall"
CLOCK = "wall"


def _race(cands: dict, repeats: int) -> dict:
    """Median seconds per candidate (CLOCK), timed round robin."""
    wall = race(cands, repeats, warmup=1)
    return dict(LAST_CPU) if CLOCK == "cpu" else wall


def _row(label, res, flops, default):
    base = res[default]
    parts = [f"{k}: {t * 1e3:8.3f} ms {flops / t / 1e9:6.1f} GF/s x{t / base:4.2f}" for k, t in res.items()]
    print(f"{label:34s} " + " | ".join(parts))


def gemm_rows(repeats: int, quick: bool):
    shapes = [(1, 16, 16), (1, 64, 64), (8, 128, 128), (64, 784, 512), (64, 512, 512), (1, 512, 1000)]
    if not quick:
        shapes += [(256, 1024, 1024), (16, 256, 256)]
    print("\nFullyConnected + relu (M=batch, K=in, N=hidden); default: blas above "
          f"{lower_gemm.SMALL_GEMM} madds, else loop")
    for m, k, n in shapes:
        ins = [("x", (m, k)), ("w", (n, k)), ("b", (n,))]
        attrs = {"num_hidden": n}
        native = _compile("FullyConnected", ins, attrs)
        rng = np.random.default_rng(0)
        x, w, bias = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (n, k), (n,)))
        # the kernel library reads the BLAS binding and the small-product threshold at call
        # time, so blas and loop run the same compiled code, one binding after the other
        res = {}
        for name, small in (("blas", 0), ("loop", 1 << 62)):
            lower_gemm.bind_native_kernels(use_blas=True, small_gemm=small)
            res[name] = _race({name: native}, repeats)[name]
        lower_gemm.bind_native_kernels(use_blas=True)
        res["numpy"] = _race({"numpy": lambda: np.maximum(x @ w.T + bias, 0)}, repeats)["numpy"]
        default = "blas" if m * n * k > lower_gemm.SMALL_GEMM else "loop"
        _row(f"{m}x{k} -> {n}", res, 2.0 * m * n * k, default)


def conv_rows(repeats: int, quick: bool):
    # (batch, C, H=W, F, kernel, stride, groups): resnet18 and mobilenet layers
    shapes = [(1, 64, 56, 64, 3, 1, 1), (1, 128, 28, 128, 3, 1, 1), (1, 256, 14, 256, 3, 1, 1),
              (1, 512, 7, 512, 3, 1, 1), (8, 64, 56, 64, 3, 1, 1), (8, 128, 28, 128, 3, 1, 1),
              (8, 256, 14, 256, 3, 1, 1), (8, 512, 7, 512, 3, 1, 1),
              (1, 3, 224, 64, 7, 2, 1), (1, 64, 56, 128, 3, 2, 1), (1, 128, 56, 128, 1, 1, 1),
              (1, 32, 112, 32, 3, 1, 32), (1, 512, 14, 512, 3, 1, 512)]
    if quick:
        shapes = shapes[:4] + shapes[-2:]
    print("\nConvolution + bias + relu (batch, C, HxW -> F, kxk / stride, groups)")
    orig = lower_conv.conv_method
    try:
        for n, c, hw, f, k, s, g in shapes:
            pad = k // 2
            ins = [("x", (n, c, hw, hw)), ("w", (f, c // g, k, k)), ("b", (f,))]
            attrs = {"num_filter": f, "kernel": (k, k), "stride": (s, s), "pad": (pad, pad), "num_group": g}
            out = (hw + 2 * pad - k) // s + 1
            default = orig(n, c, g, f, (k, k), (s, s), (1, 1), (out, out))
            names = {lower_conv.IM2COL: "im2col", lower_conv.WINOGRAD: "wino", lower_conv.DEPTHWISE: "depthwise"}
            methods = [lower_conv.IM2COL]
            if g == 1 and k == 3 and s == 1:
                methods.append(lower_conv.WINOGRAD)
            if g > 1 and c // g == 1:
                methods.append(lower_conv.DEPTHWISE)
            cands = {}
            for m in methods:
                lower_conv.conv_method = lambda *a, _m=m: _m
                cands[names[m]] = _compile("Convolution", ins, attrs)
            lower_conv.conv_method = orig
            res = _race(cands, repeats)
            flops = 2.0 * n * f * (c // g) * k * k * out * out
            _row(f"{n} {c}x{hw}x{hw} -> {f} k{k} s{s} g{g}", res, flops, names[default])
    finally:
        lower_conv.conv_method = orig


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=0)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    a = ap.parse_args()
    global CLOCK
    CLOCK = a.clock
    repeats = a.repeats or (5 if a.quick else 15)
    if a.threads:
        runtime.set_num_threads(a.threads)
    print(f"threads: {runtime.num_threads()}  (medians of {repeats} round-robin repeats, {CLOCK} clock)")
    gemm_rows(repeats, a.quick)
    conv_rows(repeats, a.quick)


if __name__ == "__main__":
    main()
