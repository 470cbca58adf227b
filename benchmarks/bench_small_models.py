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
         this section on two built trees;
  threads  small networks (dense layers and LeNet-like convolutions, batch 1 and 8) at --threads
         (default here 2) with the fewest flops per parallel block (`symjit_nn_tune` key
         "min_task") at each of --min-task, wall and process CPU time per call (the CPU time
         counts the workers' spinning too);
  grain  a fused elementwise kernel (relu(a * b + 1)) over 32K..1M elements at 2 threads, compiled
         with each of --grains elements per parallel chunk (lower_loops.GRAIN), wall / CPU.
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


def _tune(key: str, value: int) -> None:
    import ctypes
    fn = lower_gemm.kernel_library().symjit_nn_tune
    fn.argtypes = [ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int64
    fn(lower_gemm.TUNE_KEYS[key], int(value))


def _small_nets():
    """(name, symbol, input shape, params) of small networks' layers, batch 1 and 8."""
    rng = np.random.default_rng(0)

    def arr(*shape):
        return mx.nd.array(rng.standard_normal(shape).astype(np.float32) * 0.1)
    data = mx.sym.var("data")
    mlp = mx.sym.FullyConnected(mx.sym.relu(mx.sym.FullyConnected(data, num_hidden=128, name="fc0")),
                                num_hidden=64, name="fc1")
    mlp_p = {"fc0_weight": arr(128, 784), "fc0_bias": arr(128), "fc1_weight": arr(64, 128), "fc1_bias": arr(64)}
    conv = mx.sym.relu(mx.sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=32, name="c"))
    conv_p = {"c_weight": arr(32, 16, 3, 3), "c_bias": arr(32)}
    conv0 = mx.sym.Pooling(mx.sym.relu(mx.sym.Convolution(data, kernel=(5, 5), pad=(2, 2), num_filter=16, name="c")),
                           kernel=(2, 2), stride=(2, 2), pool_type="max")
    conv0_p = {"c_weight": arr(16, 1, 5, 5), "c_bias": arr(16)}
    for b in (1, 8):
        yield f"dense 784-128-64 b{b}", mlp, (b, 784), mlp_p
        yield f"conv 16->32 3x3 14x14 b{b}", conv, (b, 16, 14, 14), conv_p
        yield f"conv 1->16 5x5 28x28+pool b{b}", conv0, (b, 1, 28, 28), conv0_p


def section_threads(args):
    import os
    threads = args.threads if args.threads > 1 else 2
    runtime.set_num_threads(threads)
    print(f"threads {threads}; min_task flops {args.min_task}: wall / process CPU us per call, ratio to the first")
    for name, sym, shape, params in _small_nets():
        f = symjit.compile(sym, {"data": shape}, params)
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        best = {m: [float("inf"), float("inf")] for m in args.min_task}
        for _ in range(args.rounds):
            for m in args.min_task:
                _tune("min_task", m)
                f(data=x)
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(args.calls):
                    f(data=x)
                wall, cpu = (time.perf_counter() - t0) / args.calls, (time.process_time() - c0) / args.calls
                best[m] = [min(best[m][0], wall), min(best[m][1], cpu)]
        _tune("min_task", 0)
        first = best[args.min_task[0]]
        cells = "  ".join(f"{m:.0e}: {w * 1e6:6.1f}/{c * 1e6:6.1f} ({w / first[0]:.2f})" for m, (w, c) in best.items())
        print(f"{name:>32}  {cells}")
    print(f"load average {os.getloadavg()[0]:.1f}")
    runtime.set_num_threads(args.threads)


def section_grain(args):
    import os
    from symjit.codegen.llvm import lower_basic
    threads = args.threads if args.threads > 1 else 2
    runtime.set_num_threads(threads)
    print(f"threads {threads}; elements per parallel chunk {args.grains}: wall / process CPU us per call")
    default = lower_basic.GRAIN
    for n in (32768, 65536, 131072, 262144, 1048576):
        s = mx.sym.relu(mx.sym.var("a") * mx.sym.var("b") + 1.0)
        models = {}
        try:
            for g in args.grains:
                lower_basic.GRAIN = g
                models[g] = symjit.compile(s, {"a": (n,), "b": (n,)}, {}, name=f"grain{g}")
        finally:
            lower_basic.GRAIN = default
        a, b = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
        best = {g: [float("inf"), float("inf")] for g in models}
        for _ in range(args.rounds):
            for g, m in models.items():
                m(a=a, b=b)
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(args.calls):
                    m(a=a, b=b)
                best[g] = [min(best[g][0], (time.perf_counter() - t0) / args.calls),
                           min(best[g][1], (time.process_time() - c0) / args.calls)]
        print(f"{n:>8}  " + "  ".join(f"{g}: {w * 1e6:7.1f}/{c * 1e6:7.1f}" for g, (w, c) in best.items()))
    print(f"load average {os.getloadavg()[0]:.1f}")
    runtime.set_num_threads(args.threads)


SECTIONS = {"gemm": section_gemm, "pool": section_pool, "threads": section_threads, "grain": section_grain}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--section", nargs="+", default=["gemm", "pool"], choices=list(SECTIONS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--min-task", type=float, nargs="+", default=[2e5, 1e6, 4e6, 1e12])
    ap.add_argument("--grains", type=int, nargs="+", default=[16384, 65536, 262144])
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 8, 12, 16, 24, 32, 40, 64, 128, 256])
    args = ap.parse_args()
    runtime.set_num_threads(args.threads)
    import os
    print(f"threads {args.threads}, load average {os.getloadavg()[0]:.1f}")
    for name in args.section:
        SECTIONS[name](args)


if __name__ == "__main__":
    main()
