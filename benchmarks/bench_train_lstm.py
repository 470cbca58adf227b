"""Training step of the LSTM language model through the ordinary Gluon loop: the native fused
RNN (runtime/nn/rnn.c) against the previous path, the op's numpy reference as a Python node
(`symjit.codegen.llvm.lower_rnn.ENABLED = False` while that network compiles), in one process.

Workload (benchmarks/bench_train.py `lstm`): Embedding 5000x128, `gluon.rnn.LSTM(256, 2)`,
Dense 5000 on every step, sequence 35, batch 32 (TNC), softmax cross-entropy (loss block not
hybridized), `Trainer` SGD lr 0.1; the network hybridized. After warm-up steps (which compile),
rounds of `--steps` steps alternate between the two networks (order reversed every round);
each figure is the median over rounds and the ratio the median of the rounds' paired ratios.
Also printed: the process CPU time per step (all threads; with `--threads 1` a figure that
other load on the machine inflates far less than wall time, so use it to compare changes on
a busy machine; with more threads it includes the pool's spinning).
MXNet 1.9.1 is not installed here; its figure (130 ms on the 2-core development machine,
issue 24) is quoted, not measured.

Findings (2026-12, the 2-core development machine under a load average of 7-12 from other
sessions: wall times inflated 3-5x, read the CPU column and the paired ratio). Native fused RNN
against the numpy RNN op in one run: 2 threads, wall 1566 ms vs 36.8 s (paired 0.054), CPU
279 ms vs 6861 ms per step; 1 thread, CPU 208 ms vs 5582 ms. Losses agree step for step.
Per node (1 thread CPU, benchmarks' one-node graphs): RNN forward 22 ms, backward 42 ms with
the forward's reserve (60 ms when it recomputes the forward), Dense 5000 forward 30 ms,
backward data 23 ms and weight 27 ms (63 and 57 ms before the GEMM tiles' K blocks), the
eager loss (log_softmax + pick + their backward) ~41 ms (74 ms in numpy). The rest of a step
is Python, autograd and the Trainer. MXNet 1.9.1's 130 ms is an idle-machine figure: compare
it only with a run on an idle machine.

    python benchmarks/bench_train_lstm.py [--threads 2] [--rounds 5] [--steps 5] [--no-baseline]
                                          [--profile]   # cProfile + per-node native times (native)
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_train import (MXNET_191_MS, alternate, make_data, print_rounds, profile_symjit,  # noqa: E402
                         set_threads, symjit_step)


def build(native: bool, x, y, warmup: int):
    """A trained-step closure whose graphs were compiled with the native RNN on or off."""
    from symjit.codegen.llvm import lower_rnn
    saved = lower_rnn.ENABLED
    lower_rnn.ENABLED = native
    try:
        step, _ = symjit_step("lstm", x, y)
        for _ in range(warmup):
            step()
    finally:
        lower_rnn.ENABLED = saved
    return step


def with_cpu_time(step):
    """(step, cpu seconds of each call): the step wrapped to record the process CPU time."""
    cpu: list = []

    def timed():
        c0 = time.process_time()
        loss = step()
        cpu.append(time.process_time() - c0)
        return loss
    return timed, cpu


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--no-baseline", action="store_true", help="time the native path only")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--windows", type=int, default=3)
    args = ap.parse_args(argv)
    set_threads(args.threads)
    x, y = make_data("lstm")
    steps, cpu = {}, {}
    steps["native-rnn"], cpu["native-rnn"] = with_cpu_time(build(True, x, y, args.warmup))
    if not args.no_baseline:
        steps["numpy-rnn"], cpu["numpy-rnn"] = with_cpu_time(build(False, x, y, args.warmup))
    times, losses = alternate(steps, args.rounds, args.steps, 0)
    print(f"== lstm LM training step: median ms/step over {args.rounds} rounds of {args.steps} steps "
          f"({args.threads} threads)")
    print_rounds(times, losses, "native-rnn", lambda k: f"cpu {statistics.median(cpu[k]) * 1e3:8.2f} ms  ")
    base = times["native-rnn"]
    lo, hi = MXNET_191_MS["lstm"]
    print(f"  mxnet-1.9.1 {lo:.0f} ms  quoted (issue 24, measured separately): native/mxnet "
          f"{statistics.median(base) * 1e3 / lo:.2f}")
    if args.profile:
        profile_symjit("lstm", steps["native-rnn"], args)
    print(f"  (load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
