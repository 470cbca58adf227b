"""Waking the thread pool's workers off the caller's CPU: SYMJIT_WAKE_AWAY=1 (the default)
against 0, on a chain of convolutions called in bursts after pauses.

After a pause the pool's workers sleep; the first parallel job wakes them. On a virtual machine
the scheduler may wake a worker on the caller's CPU (the idle vCPU looks busy to it), and the
two threads then share one CPU for many milliseconds (runtime/threadpool.c, keep_sleepers_off).
Each round runs both modes in fresh processes (alternating which goes first); each process
compiles the same chain (four 192 -> 192 1x7 convolutions + relu at 17x17, batch 1, Inception
v3's 17x17 stage, random weights) and times `--bursts` bursts of `--calls` calls, each after a
pause of `--pause` s, then the same calls in a tight loop. Printed: per mode and round the
median call in bursts and in the tight loop; per round the paired ratio on/off of the burst
medians, and their median over rounds.

    python benchmarks/bench_pool_wake.py [--threads 2] [--rounds 4] [--bursts 8] [--calls 8] [--pause 0.2]

Findings (2026-12-07, a 2-vCPU Xeon VM (family 6 model 207), 2 threads, 4 rounds of 8 bursts
of 8 calls): bursts on/off 0.96, 0.81, 0.74, 0.88 (median 0.85; on 2.35-2.58 ms a call, off
2.44-3.48); the tight loop 2.26-2.33 ms in both modes. Earlier in the same session the same
chain took 4.0-6.0 ms a call in bursts without the mode, against 2.5-2.6 in a tight loop.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def child(threads: int, bursts: int, calls: int, pause: float) -> None:
    """Print 'burst_ms tight_ms': median call times in bursts after pauses and in a tight loop."""
    import numpy as np
    import symjit as mx
    from symjit import runtime
    runtime.set_num_threads(threads)
    rng = np.random.default_rng(0)
    x = mx.sym.var("x")
    y, params = x, {}
    for i, (k, p) in enumerate([((1, 7), (0, 3)), ((7, 1), (3, 0))] * 2):
        params[f"w{i}"] = mx.nd.array((rng.standard_normal((192, 192) + k) * 0.05).astype(np.float32))
        params[f"b{i}"] = mx.nd.array(np.zeros(192, np.float32))
        y = mx.sym.relu(mx.sym.Convolution(y, mx.sym.var(f"w{i}"), mx.sym.var(f"b{i}"), kernel=k, pad=p,
                                           num_filter=192))
    data = rng.standard_normal((1, 192, 17, 17)).astype(np.float32)
    model = mx.compile(y, shapes={"x": data.shape}, params=params)
    for _ in range(5):
        model(x=data)
    in_bursts, tight = [], []
    for _ in range(bursts):
        time.sleep(pause)
        for _ in range(calls):
            t = time.perf_counter()
            model(x=data)
            in_bursts.append(time.perf_counter() - t)
    for _ in range(bursts * calls):
        t = time.perf_counter()
        model(x=data)
        tight.append(time.perf_counter() - t)
    print(f"{statistics.median(in_bursts) * 1e3:.4f} {statistics.median(tight) * 1e3:.4f}")


def run_mode(on: bool, args) -> tuple[float, float]:
    env = dict(os.environ, SYMJIT_WAKE_AWAY="1" if on else "0")
    out = subprocess.run([sys.executable, __file__, "--child", "--threads", str(args.threads), "--bursts",
                          str(args.bursts), "--calls", str(args.calls), "--pause", str(args.pause)],
                         env=env, capture_output=True, text=True, check=True).stdout.split()
    return float(out[-2]), float(out[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--bursts", type=int, default=8)
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--pause", type=float, default=0.2)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.threads, args.bursts, args.calls, args.pause)
        return
    ratios = []
    print(f"four 192 -> 192 1x7 / 7x1 convolutions at 17x17, {args.threads} threads, bursts of {args.calls} "
          f"calls after {args.pause} s pauses (median ms a call)")
    for r in range(args.rounds):
        res = {}
        for on in ((True, False) if r % 2 == 0 else (False, True)):
            res[on] = run_mode(on, args)
        ratios.append(res[True][0] / res[False][0])
        print(f"  round {r}: wake away on: bursts {res[True][0]:.3f} tight {res[True][1]:.3f}   "
              f"off: bursts {res[False][0]:.3f} tight {res[False][1]:.3f}   bursts on/off {ratios[-1]:.2f}")
    print(f"  median bursts on/off over {len(ratios)} rounds: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
