"""Denormal operands in the kernel library's multiply-accumulate kernels, with and without
flushing (`symjit.runtime.set_flush_denormals`, runtime/nn/common.c).

A dense layer's data gradient (dY W, the shape of the 784-512-512-10 MLP's second layer at
batch 64) is compiled once and called with dY at normal magnitude and scaled into the float32
denormal range (below 1.2e-38: a converged network's gradients), flushing off (the default, as
MXNet) and on, in alternating blocks in one process. Prints the medians and each case's ratio to
the normal-magnitude, flushing-off call: without flushing, denormal operands cost x86 cores a
microcode assist per multiply-add.

    python benchmarks/bench_denormals.py [--threads 2] [--repeats 40] [--shape 64 512 512]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import symjit as mx
from symjit import runtime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=40, help="calls per block")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--shape", type=int, nargs=3, default=[64, 512, 512], metavar=("M", "K", "N"))
    args = ap.parse_args()
    runtime.set_num_threads(args.threads)
    m, k, n = args.shape
    dy, w = mx.sym.var("dy"), mx.sym.var("w")
    model = mx.compile(mx.sym.dot(dy, w), shapes={"dy": (m, k), "w": (k, n)}, cache=False)
    rng = np.random.default_rng(0)
    g = rng.standard_normal((m, k)).astype(np.float32)
    wv = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    cases = {f"{scale:g} flush {'on' if flush else 'off'}": ((g * np.float32(scale)).astype(np.float32), flush)
             for scale in (1.0, 1e-39) for flush in (False, True)}
    times: dict = {name: [] for name in cases}
    try:
        for r in range(args.rounds):
            for name in (list(cases) if r % 2 == 0 else list(cases)[::-1]):
                x, flush = cases[name]
                runtime.set_flush_denormals(flush)
                model(dy=x, w=wv)
                t = time.perf_counter()
                for _ in range(args.repeats):
                    model(dy=x, w=wv)
                times[name].append((time.perf_counter() - t) / args.repeats)
    finally:
        runtime.set_flush_denormals(None)
    base = np.array(times["1 flush off"])
    print(f"dY ({m} x {k}) W ({k} x {n}), {args.threads} thread(s); median of {args.rounds} blocks of {args.repeats} calls")
    for name, ts in times.items():
        ratio = float(np.median(np.array(ts) / base))
        print(f"  dY scale {name:16s} {np.median(ts) * 1e3:9.3f} ms   / normal, flush off: {ratio:7.2f}")


if __name__ == "__main__":
    main()
