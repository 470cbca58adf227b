"""Cost of mx.profiler: eager ops and hybridized calls per second with the profiler off, then
running (imperative + symbolic, aggregate statistics on), measured in one run.

    python benchmarks/bench_profiler.py [--calls N]

Off, the profiler installs nothing: an eager op pays one `is None` test and a compiled graph
call one pointer test, so "off" is the speed of the code without a profiler.
"""
import argparse
import os
import tempfile
import time

import numpy as np

import symjit as mx
from symjit import profiler
from symjit.gluon import nn


def rate(fn, calls: int) -> float:
    fn()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - t0)
    return calls / best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args()
    x = mx.nd.array(np.random.rand(4, 8).astype(np.float32))
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="relu", in_units=8), nn.Dense(4, in_units=8))
    net.initialize()
    net.hybridize()
    net(x)
    cases = {"eager relu": lambda: mx.nd.relu(x), "hybridized MLP": lambda: net(x)}
    off = {name: rate(fn, args.calls) for name, fn in cases.items()}
    with tempfile.TemporaryDirectory() as tmp:
        profiler.set_config(profile_all=True, aggregate_stats=True, filename=os.path.join(tmp, "p.json"))
        profiler.set_state("run")
        on = {name: rate(fn, args.calls // 10) for name, fn in cases.items()}
        profiler.set_state("stop")
        profiler.dump()
    for name in cases:
        print(f"{name:16s} off {off[name]:10.0f}/s   running {on[name]:10.0f}/s   "
              f"({off[name] / on[name]:.2f}x slower while recording)")


if __name__ == "__main__":
    main()
