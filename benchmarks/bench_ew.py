"""`ew`: relu(a*b + c) * sigmoid(a) - tanh(c) on three float32 vectors of 4*2**20 elements,
through Symbol.bind / Executor.forward (compiled), against numpy and against the memory
roofline: a STREAM-style triad (x = b + 3c) on the same threads, measured in the same run.

The triad follows STREAM's sizing rule: its arrays (STREAM_N floats, 128 MiB each) are at least
4x the last-level cache (32 MiB here), so it measures memory, not cache, bandwidth (with the
ew-sized 16 MiB arrays, large outputs streamed past the cache leave the triad's 32 MiB of
inputs partly in L3 between calls, and its "bandwidth" exceeded what memory delivers). Roofline
time = the 4 arrays ew moves per call (3 read, 1 written) at that bandwidth. Targets: ew within
1.3x of the roofline time, at least 12x faster than numpy.
Run: python benchmarks/bench_ew.py
"""
from __future__ import annotations

import numpy as np

import symjit as mx
from symjit import runtime
from common import median_time, report

N = 4 * 2 ** 20
#: triad array length: STREAM's rule, each array >= 4x the last-level cache
STREAM_N = 32 * 2 ** 20
ROUNDS = 9


def main() -> None:
    rng = np.random.default_rng(0)
    a_np, b_np, c_np = (rng.standard_normal(N).astype(np.float32) for _ in range(3))
    a, b, c = (mx.sym.Variable(n) for n in "abc")
    ew = mx.sym.relu(a * b + c) * mx.sym.sigmoid(a) - mx.sym.tanh(c)
    args = {"a": mx.nd.array(a_np), "b": mx.nd.array(b_np), "c": mx.nd.array(c_np)}
    exe = ew.bind(mx.cpu(), args, grad_req="null")
    exe.forward()
    ref = np.maximum(a_np * b_np + c_np, 0) * (1 / (1 + np.exp(-a_np))) - np.tanh(c_np)
    err = np.abs(exe.outputs[0].asnumpy() - ref).max()
    big = {k: mx.nd.array(rng.standard_normal(STREAM_N).astype(np.float32)) for k in "bc"}
    triad = (b + c * 3.0).bind(mx.cpu(), big, grad_req="null")
    triad.forward()

    def numpy_ew():
        return np.maximum(a_np * b_np + c_np, 0) * (1 / (1 + np.exp(-a_np))) - np.tanh(c_np)

    # rounds alternate the candidates, so a machine that speeds up or slows down during the run
    # (shared hosts do) affects every ratio alike; medians over all rounds
    samples = {"ew": [], "triad": [], "numpy": []}
    for _ in range(ROUNDS):
        samples["ew"].append(median_time(lambda: exe.forward(), repeat=6, warmup=1))
        samples["triad"].append(median_time(lambda: triad.forward(), repeat=6, warmup=1))
        samples["numpy"].append(median_time(numpy_ew, repeat=1, warmup=0))
    t_ew, t_triad, t_np = (float(np.median(samples[k])) for k in ("ew", "triad", "numpy"))
    bandwidth = 3 * 4 * STREAM_N / t_triad
    roof = 4 * 4 * N / bandwidth
    print(f"threads: {runtime.num_threads()}   elements: {N}   max |compiled - numpy| = {err:.2e}")
    print(f"triad bandwidth ({STREAM_N * 4 >> 20} MiB arrays): {bandwidth / 1e9:.2f} GB/s   "
          f"ew effective: {4 * 4 * N / t_ew / 1e9:.2f} GB/s")
    report("ew: relu(a*b+c)*sigmoid(a)-tanh(c)", [("roofline (4 arrays at triad bandwidth)", roof),
                                                 ("symjit Executor.forward", t_ew),
                                                 ("numpy", t_np)], "roofline (4 arrays at triad bandwidth)")
    print(f"  speed-up over numpy: {t_np / t_ew:.1f}x (target >= 12x); "
          f"ew / roofline: {t_ew / roof:.2f} (target <= 1.3)")


if __name__ == "__main__":
    main()
