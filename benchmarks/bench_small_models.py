"""Small-model layers: symjit's choice against the alternative it replaced, paired in one process
(run: python benchmarks/bench_small_models.py [--section gemm pool] [--threads 1]).

Sections:
  gemm   dense layers (FullyConnected + bias + relu, weights bound as constants, as in an imported
         or hybridized model) with weights packed at compile time (`symjit_nn_gemm_packed`,
         lower_gemm.PACK_CONSTANT_WEIGHTS) against the per-call packing of symjit_nn_gemm, over
         rows M (the batch) 1..256 and several K x N;
  pool   average pooling with stride > 1 (2x2/2 on the AVX-512 path, 3x3/3 and padded windows on
         the general loop) against the portable path's general loop (`symjit_nn_set_native(0)`,
         switched just before each call); for before/after figures of the general loop itself run
         this section on two built trees.
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


POOL_CASES = [
    ((8, 32, 14, 14), (2, 2), (0, 0), True),
    ((1, 32, 14, 14), (2, 2), (0, 0), True),
    ((8, 64, 56, 56), (2, 2), (0, 0), True),
    ((8, 16, 27, 27), (3, 3), (0, 0), True),
    ((8, 16, 28, 28), (2, 2), (1, 1), False),
]


def section_pool(args):
    from symjit.codegen.llvm.executable import compile_planned
    from symjit.codegen.llvm.lower_gemm import set_native_kernels
    from symjit.ir import GraphBuilder, TensorType
    from symjit.passes.manager import compile_graph
    rng = np.random.default_rng(0)
    print(f"{'input':>18} {'kernel':>7} {'pad':>6} {'tiles us':>9} {'general us':>11} {'tiles/general':>14}")
    for xs, k, pad, include in POOL_CASES:
        b = GraphBuilder(name="pool")
        v = b.add_input("x", TensorType(xs, "float32"))
        (y,) = b.add_node("Pooling", [v], {"kernel": k, "stride": k, "pad": pad, "pool_type": "avg",
                                            "count_include_pad": include})[:1]
        opt, _ = compile_graph(b.build([y]), "inference")
        cg = compile_planned(opt, "pool")
        x = rng.standard_normal(xs).astype(np.float32)

        def on(native):
            def call():
                set_native_kernels(native)
                cg([x])
            return call
        t = paired({"tiles": on(1), "general": on(0)}, args.rounds, args.calls)
        set_native_kernels(-1)
        print(f"{str(xs):>18} {str(k):>7} {str(pad):>6} {t['tiles'] * 1e6:>9.1f} {t['general'] * 1e6:>11.1f} "
              f"{t['tiles'] / t['general']:>14.2f}")


SECTIONS = {"gemm": section_gemm, "pool": section_pool}


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
