"""Small-model layers: symjit's choice against the alternative it replaced, paired in one process
(run: python benchmarks/bench_small_models.py [--section gemm pool] [--threads 1]).

Sections:
  gemm   dense layers (FullyConnected + bias + relu, weights bound as constants, as in an imported
         or hybridized model) with weights packed at compile time (`symjit_nn_gemm_packed`,
         lower_gemm.PACK_CONSTANT_WEIGHTS) against the per-call packing of symjit_nn_gemm, over
         rows M (the batch) 1..256 and several K x N;
  pool   average pooling with kernel == stride (2x2/2, 3x3/3, with and without padding counted,
         ceil convention) on the vectorized path against the general loop (`pool_general`).
Both variants of a row are compiled in the same process and timed in alternating rounds; printed:
CPU time per call of this thread (time.thread_time: what the call costs, without the time other
processes take from the core) as the minimum over rounds, and new / old.
"""
from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

import symjit
import symjit as mx
from symjit import runtime
from symjit.codegen.llvm import lower_gemm


def cpu_time_per_call(fn, calls: int) -> float:
    t0 = time.thread_time()
    for _ in range(calls):
        fn()
    return (time.thread_time() - t0) / calls


def paired(fns: dict, rounds: int, calls: int) -> dict:
    """{name: minimum CPU seconds per call} over alternating rounds of every fn."""
    best = {k: float("inf") for k in fns}
    for f in fns.values():
        f()
    for _ in range(rounds):
        for k, f in fns.items():
            best[k] = min(best[k], cpu_time_per_call(f, calls))
    return best


def dense_model(x, w, b, packed: bool):
    """A compiled FullyConnected + relu on inputs shaped as x with constant weights w and bias b,
    packing switched on or off at compile time."""
    n = w.shape[0]
    s = mx.sym.relu(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=n, name="fc"))
    old = lower_gemm.PACK_CONSTANT_WEIGHTS
    lower_gemm.PACK_CONSTANT_WEIGHTS = packed
    try:
        f = symjit.compile(s, {"data": x.shape}, {"fc_weight": mx.nd.array(w), "fc_bias": mx.nd.array(b)})
    finally:
        lower_gemm.PACK_CONSTANT_WEIGHTS = old
    return f


def section_gemm(args):
    rng = np.random.default_rng(0)
    print(f"{'M':>4} {'K':>5} {'N':>5} {'packed us':>10} {'per-call us':>12} {'new/old':>8}")
    ratios = []
    for m, (k, n) in itertools.product(args.rows, [(784, 128), (128, 64), (512, 512), (1024, 1000), (256, 10)]):
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        ref = np.maximum(x @ w.T + b, 0)
        new, old = dense_model(x, w, b, True), dense_model(x, w, b, False)
        for f in (new, old):
            got = f(data=x)
            got = np.asarray(got[0] if isinstance(got, (list, tuple)) else got)
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)
        t = paired({"new": lambda: new(data=x), "old": lambda: old(data=x)}, args.rounds, args.calls)
        ratios.append(t["new"] / t["old"])
        print(f"{m:>4} {k:>5} {n:>5} {t['new'] * 1e6:>10.1f} {t['old'] * 1e6:>12.1f} {ratios[-1]:>8.2f}")
    print(f"geometric mean new/old {np.exp(np.mean(np.log(ratios))):.3f}, worst {max(ratios):.2f}")


SECTIONS = {"gemm": section_gemm}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--section", nargs="+", default=list(SECTIONS), choices=list(SECTIONS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 8, 12, 16, 24, 32, 40, 64, 128, 256])
    args = ap.parse_args()
    runtime.set_num_threads(args.threads)
    import os
    print(f"threads {args.threads}, load average {os.getloadavg()[0]:.1f}")
    for name in args.section:
        SECTIONS[name](args)


if __name__ == "__main__":
    main()
