"""Stride-1 average pooling: the kernel library's separable path (row sums, then column sums:
KH + KW adds per output) against its general window loop (KH * KW adds and a divisor per
output), on Inception v3's pool shapes (3x3, stride 1, pad 1, padding counted as MXNet's model
zoo exports it) and a few others, in one process: the same compiled graph called alternately
with the kernel library's native paths on (the separable path) and off (the portable loop
nests, which run the general loop), in blocks (model_bench_util.blocked); CPU-time medians
and the median of the rounds' paired ratios.

    python benchmarks/bench_avg_pool.py [--batch 8] [--threads 2] [--repeats 50]
"""
from __future__ import annotations

import argparse

import numpy as np

from model_bench_util import LAST_CPU, LAST_PAIRED, blocked
from symjit import runtime
from symjit.codegen.llvm.executable import compile_planned
from symjit.codegen.llvm.lower_gemm import set_native_kernels
from symjit.ir import GraphBuilder, TensorType
from symjit.passes.manager import compile_graph

#: (channels, height, width, kernel, pad, count_include_pad): Inception v3's avg pools first
SHAPES = [
    (192, 35, 35, (3, 3), (1, 1), True), (256, 35, 35, (3, 3), (1, 1), True),
    (288, 35, 35, (3, 3), (1, 1), True), (768, 17, 17, (3, 3), (1, 1), True),
    (1280, 8, 8, (3, 3), (1, 1), True), (2048, 8, 8, (3, 3), (1, 1), True),
    (256, 28, 28, (3, 3), (1, 1), False), (64, 56, 56, (5, 5), (2, 2), True),
]


def pool_graph(xs: tuple, kernel: tuple, pad: tuple, include_pad: bool):
    """Pooling(avg, stride 1) of one input, compiled for inference."""
    b = GraphBuilder(name="avg_pool")
    x = b.add_input("x", TensorType(xs, "float32"))
    y = b.add_node("Pooling", [x], {"kernel": kernel, "stride": (1, 1), "pad": pad, "pool_type": "avg",
                                   "count_include_pad": include_pad})
    opt, _ = compile_graph(b.build(y), "inference")
    return compile_planned(opt, "avg_pool")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args()
    runtime.set_num_threads(args.threads)
    if not set_native_kernels(1):
        print("the kernel library's native paths are not available on this CPU: nothing to compare")
        return
    print(f"batch {args.batch}, {args.threads} thread(s); cpu ms per call, separable / general loop")
    rng = np.random.default_rng(0)
    for c, h, w, k, p, cip in SHAPES:
        xs = (args.batch, c, h, w)
        cg = pool_graph(xs, k, p, cip)
        x = [rng.standard_normal(xs).astype(np.float32)]

        def on(cg=cg, x=x):
            set_native_kernels(1)
            return cg(x)

        def off(cg=cg, x=x):
            set_native_kernels(0)
            return cg(x)
        diff = float(np.abs(on()[0] - off()[0]).max())
        blocked({"separable": on, "general": off}, args.repeats, rounds=max(2, args.repeats // 5))
        set_native_kernels(-1)
        cpu = dict(LAST_CPU)
        print(f"  {c:5d}x{h}x{w} k{k} pad{p} include_pad={cip!s:5}: {cpu['separable'] * 1e3:7.3f} "
              f"vs {cpu['general'] * 1e3:7.3f}  cpu ratio {cpu['separable'] / cpu['general']:.2f}, "
              f"paired wall ratio {LAST_PAIRED['general']:.2f}, max |diff| {diff:.1e}")


if __name__ == "__main__":
    main()
