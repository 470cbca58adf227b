"""Benchmark of a fused elementwise kernel from the LLVM backend.

Kernel: relu(a*b + c) * sigmoid(a) - tanh(c) on three float32 vectors of 4*2**20 elements,
one output (16 bytes of memory traffic per element). Baselines measured in the same run:
  * numpy evaluating the same expression (several passes, temporaries),
  * a STREAM-style triad x = b + 3*c compiled by the same backend (12 bytes per element),
    i.e. what the memory system allows for a streaming kernel.
Each variant runs single-threaded and split over two Python threads (ctypes releases the
GIL, so the halves run in parallel). Prints medians, effective bandwidths and ratios.

    python benchmarks/bench_kernels.py [--n N] [--repeat R]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from symjit.codegen.llvm import ElementwiseSpec, compile_elementwise, target_description  # noqa: E402
from symjit.ops import scalar as S  # noqa: E402


def median_time(fn, repeat: int) -> tuple[float, float]:
    """(median, min) wall time of `repeat` calls after one warm-up call."""
    fn()                                   # warm-up (page faults, caches)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def threaded(kernel, args, n: int, parts: int):
    """A callable running kernel over [0, n) split into `parts` contiguous ranges, one thread each."""
    bounds = [(n * i // parts, n * (i + 1) // parts) for i in range(parts)]

    def run():
        ts = [threading.Thread(target=kernel.call_range, args=(lo, hi, args)) for lo, hi in bounds]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4 * 2**20)
    ap.add_argument("--repeat", type=int, default=21)
    opts = ap.parse_args()
    n, rep = opts.n, opts.repeat

    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    out = np.empty_like(a)
    A, B, C = S.Input(0), S.Input(1), S.Input(2)
    pre = A * B + C
    expr = S.select(pre > 0.0, pre, 0.0) * (1.0 / (1.0 + S.call("exp", -A))) - S.call("tanh", C)

    t0 = time.perf_counter()
    kern = compile_elementwise(ElementwiseSpec((expr,), ("float32",) * 3, ((n,),) * 3, "float32",
                                               ("float32",), (n,)))
    t_compile = time.perf_counter() - t0
    triad = compile_elementwise(ElementwiseSpec((B + 3.0 * C,), ("float32",) * 3, ((n,),) * 3, "float32",
                                                ("float32",), (n,)))
    kargs = kern.pack_args([a, b, c], [out])
    tout = np.empty_like(a)
    targs = triad.pack_args([a, b, c], [tout])

    ref = np.maximum(a * b + c, 0) * (1 / (1 + np.exp(-a))) - np.tanh(c)
    kern.call_range(0, n, kargs)
    err = float(np.max(np.abs(out - ref)))

    def numpy_expr():
        np.maximum(a * b + c, 0) * (1 / (1 + np.exp(-a))) - np.tanh(c)

    timed = {
        "kernel 1T": median_time(lambda: kern.call_range(0, n, kargs), rep),
        "kernel 2T": median_time(threaded(kern, kargs, n, 2), rep),
        "triad 1T": median_time(lambda: triad.call_range(0, n, targs), rep),
        "triad 2T": median_time(threaded(triad, targs, n, 2), rep),
        "numpy": median_time(numpy_expr, max(5, rep // 3)),
    }
    res = {k: v[0] for k, v in timed.items()}
    bytes_kernel, bytes_triad = 16 * n, 12 * n
    print(f"target: {target_description().split(';')[1]}   n = {n}   repeat = {rep}   "
          f"compile = {t_compile * 1e3:.1f} ms   max |kernel - numpy| = {err:.2e}")
    print(f"{'variant':<10} {'median ms':>10} {'min ms':>8} {'GB/s (median)':>14}")
    for name, (t, tmin) in timed.items():
        nbytes = bytes_triad if name.startswith("triad") else bytes_kernel
        print(f"{name:<10} {t * 1e3:10.3f} {tmin * 1e3:8.3f} {nbytes / t / 1e9:14.2f}")
    print("ratios (medians):")
    print(f"  numpy / kernel 1T           = {res['numpy'] / res['kernel 1T']:6.2f}x  (speed-up over numpy)")
    print(f"  kernel 1T / kernel 2T       = {res['kernel 1T'] / res['kernel 2T']:6.2f}x  (2-thread scaling)")
    print(f"  kernel GB/s / triad GB/s 1T = {(bytes_kernel / res['kernel 1T']) / (bytes_triad / res['triad 1T']):6.2f}"
          "   (1.0 = as fast as a pure memory stream)")
    print(f"  kernel GB/s / triad GB/s 2T = {(bytes_kernel / res['kernel 2T']) / (bytes_triad / res['triad 2T']):6.2f}")


if __name__ == "__main__":
    main()
