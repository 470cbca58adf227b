"""The thread pool's dynamic mode on a training step: SYMJIT_DYNAMIC=1 against 0 (the default).

Dynamic mode (runtime/threadpool.c) runs a parallel_for's chunks on the caller alone while the
1-minute load average says other work fills the CPUs (load >= CPUs + threads). It only matters
on a loaded machine: on an idle one both modes run the same parallel code. Each round runs the
same `bench_train` workload in two fresh processes, one per mode, alternating which goes first;
each prints its wall and CPU ms per step (after warm-up steps), and the paired ratio on/off of
every round is printed with their median. The load average at each round is printed: with it
below CPUs + threads both processes run in parallel and the ratio should be ~1.

    python benchmarks/bench_pool_dynamic.py [--workload cnn] [--threads 2] [--rounds 6] [--steps 20]

Findings (2026-12, the 2-core development machine under a load average of ~8 from other work,
cnn, 2 threads, 20 steps a process after 5 warm-up steps, 6 rounds): wall on/off 0.86, 0.96,
0.22, 0.97, 0.83, 0.97 (median 0.91; CPU per step on 53-66 ms against 54-79 ms off); the next
run (this script): 0.94, 0.99, 1.12, 0.82, 0.99, 1.24 (median 0.99; CPU lower on in 3 of 6).
Within the noise of this machine, so the mode is off by default.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(workload: str, threads: int, steps: int) -> None:
    """Run `steps` timed steps of the workload here; print 'wall_ms cpu_ms'."""
    sys.path.insert(0, HERE)
    import bench_train
    bench_train.set_threads(threads)
    x, y = bench_train.make_data(workload)
    step = bench_train.symjit_step(workload, x, y)[0]
    for _ in range(5):
        step()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    print(f"{(time.perf_counter() - t0) * 1e3 / steps:.3f} {(time.process_time() - c0) * 1e3 / steps:.3f}")


def run_mode(mode: str, args) -> tuple[float, float]:
    env = dict(os.environ, SYMJIT_DYNAMIC=mode)
    out = subprocess.run([sys.executable, __file__, "--child", "--workload", args.workload, "--threads",
                          str(args.threads), "--steps", str(args.steps)], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[-2]), float(out[-1])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="cnn", choices=("cnn", "lstm", "mlp"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args.workload, args.threads, args.steps)
    ratios = []
    for r in range(args.rounds):
        order = ("1", "0") if r % 2 == 0 else ("0", "1")
        got = {mode: run_mode(mode, args) for mode in order}
        ratios.append(got["1"][0] / got["0"][0])
        print(f"round {r}: on {got['1'][0]:8.1f} ms (cpu {got['1'][1]:6.1f})  off {got['0'][0]:8.1f} ms "
              f"(cpu {got['0'][1]:6.1f})  on/off {ratios[-1]:.3f}  load {os.getloadavg()[0]:.2f}")
    print(f"median wall ratio on/off: {statistics.median(ratios):.3f} over {args.rounds} rounds")


if __name__ == "__main__":
    main()
