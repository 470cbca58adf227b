"""Benchmark of native reductions and softmax from the LLVM backend against numpy.

Graphs (compiled through the full pipeline, one native call each) on a (1024, 4096) float32
array, 16 MiB:
  * sum over axis 0 (a column reduction), sum over axis 1 (a row reduction),
  * max over axis 1, mean over axes (0, 1),
  * softmax over the last axis (max, exp-and-sum, scale: three passes over each row),
  * transpose (a strided copy).
Baselines measured in the same run: the numpy expression (softmax as
`e = exp(x - max); e / e.sum`). Runs with the runtime's default threads and with one thread.
Prints median times, effective bandwidth and numpy/symjit ratios (> 1: symjit is faster).

    python benchmarks/bench_reduce.py [--rows R] [--cols C] [--repeat N]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from symjit import runtime  # noqa: E402
from symjit.codegen.llvm.executable import compile_planned  # noqa: E402
from symjit.ir import GraphBuilder, TensorType  # noqa: E402
from symjit.passes.manager import compile_graph  # noqa: E402


def median_time(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def compiled(op: str, shape, attrs: dict):
    b = GraphBuilder(name=f"bench_{op}")
    x = b.add_input("x", TensorType(shape, "float32"))
    g = b.build(b.add_node(op, [x], attrs)[:1])
    opt, _ = compile_graph(g, "inference")
    cg = compile_planned(opt, g.name)
    assert cg.native, f"{op} did not compile to one native call"
    return cg


def numpy_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=21)
    opts = ap.parse_args()
    shape = (opts.rows, opts.cols)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    cases = [
        ("sum axis=0", "sum", {"axis": (0,)}, lambda: x.sum(axis=0)),
        ("sum axis=1", "sum", {"axis": (1,)}, lambda: x.sum(axis=1)),
        ("max axis=1", "max", {"axis": (1,)}, lambda: x.max(axis=1)),
        ("mean all", "mean", {}, lambda: x.mean()),
        ("softmax axis=-1", "softmax", {"axis": -1}, lambda: numpy_softmax(x)),
        ("transpose", "transpose", {}, lambda: np.ascontiguousarray(x.T)),
    ]
    mib = x.nbytes / 2**20
    print(f"shape {shape} float32 ({mib:.0f} MiB), threads: default {runtime.num_threads()}")
    print(f"{'case':18s} {'numpy ms':>9s} {'symjit ms':>10s} {'1 thread':>9s} {'GB/s':>6s} "
          f"{'ratio':>6s} {'ratio 1t':>8s}")
    for label, op, attrs, ref in cases:
        cg = compiled(op, shape, attrs)
        got = cg([x])[0]
        want = ref().reshape(got.shape)
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
        t_np = median_time(ref, opts.repeat)
        t_sj = median_time(lambda: cg([x]), opts.repeat)
        with runtime.threads(1):
            t_1 = median_time(lambda: cg([x]), opts.repeat)
        gbs = x.nbytes / t_sj / 1e9
        print(f"{label:18s} {t_np * 1e3:9.2f} {t_sj * 1e3:10.2f} {t_1 * 1e3:9.2f} {gbs:6.1f} "
              f"{t_np / t_sj:6.2f} {t_np / t_1:8.2f}")


if __name__ == "__main__":
    main()
