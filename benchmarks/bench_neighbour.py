"""A shared model compiled by symjit vs ONNX Runtime, alone and beside a synthetic neighbour.

The neighbour is another process that keeps one core busy for `--busy` ms out of every
`--busy + --idle` ms (a noisy tenant on a shared machine), on whichever core the scheduler
gives it or, with `--cpu K`, pinned to core K (a tenant that slows one of the model's threads).
Both runtimes are timed in alternating blocks (model_bench_util.blocked) without and then with
the neighbour, in one run, and the table prints each runtime's slowdown and the symjit / ONNX
Runtime ratio in both conditions: a runtime whose threads wait on a descheduled thread, or end
up sharing one core, loses more than the other.

    python benchmarks/bench_neighbour.py [--model mobilenet1.0] [--busy 1] [--idle 3] [--cpu K] [--repeats 40]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time

from model_bench_util import MODELS, blocked, load_model_graph, ort_session


def neighbour(busy_s: float, idle_s: float, stop, cpu: int | None = None) -> None:
    """Spin for busy_s, sleep for idle_s, until `stop` is set (on core `cpu` if given)."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    while not stop.is_set():
        t = time.perf_counter()
        while time.perf_counter() - t < busy_s:
            pass
        time.sleep(idle_s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="mobilenet1.0")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--busy", type=float, default=1.0, help="ms the neighbour spins")
    ap.add_argument("--idle", type=float, default=3.0, help="ms the neighbour sleeps")
    ap.add_argument("--cpu", type=int, default=None, help="pin the neighbour to this core")
    ap.add_argument("--repeats", type=int, default=40)
    a = ap.parse_args()
    if a.cpu is not None and a.cpu not in os.sched_getaffinity(0):
        ap.error(f"--cpu {a.cpu}: not one of this process's cores {sorted(os.sched_getaffinity(0))}")
    from symjit import runtime
    runtime.set_num_threads(a.threads)
    cg, arrays, x, _ = load_model_graph(a.model, a.batch)
    cands = {"symjit": lambda: cg(arrays)}
    sess = ort_session(MODELS / f"{a.model}.onnx", a.threads)
    if sess is not None:
        iname = sess.get_inputs()[0].name
        cands["onnxruntime"] = lambda: sess.run(None, {iname: x})
    rounds = max(2, a.repeats // 5)
    quiet = blocked(cands, a.repeats, rounds)
    stop = mp.Event()
    proc = mp.Process(target=neighbour, args=(a.busy / 1e3, a.idle / 1e3, stop, a.cpu), daemon=True)
    proc.start()
    try:
        time.sleep(0.2)
        noisy = blocked(cands, a.repeats, rounds)
    finally:
        stop.set()
        proc.join()
    where = f" on core {a.cpu}" if a.cpu is not None else ""
    print(f"{a.model} batch {a.batch}, threads {a.threads}; neighbour busy {a.busy:g} ms of every "
          f"{a.busy + a.idle:g} ms{where}")
    for k in cands:
        print(f"  {k:12s} alone {quiet[k] * 1e3:8.3f} ms   with neighbour {noisy[k] * 1e3:8.3f} ms   "
              f"slowdown {noisy[k] / quiet[k]:.2f}")
    if sess is not None:
        print(f"  ratio symjit / onnxruntime: alone {quiet['symjit'] / quiet['onnxruntime']:.2f}, "
              f"with neighbour {noisy['symjit'] / noisy['onnxruntime']:.2f}")
    else:
        print("  (onnxruntime not installed: pip install onnxruntime)")


if __name__ == "__main__":
    main()
