"""Allreduce bandwidth: symjit.distributed.allreduce_ on NDArrays versus mpi4py's own Allreduce on
numpy buffers, measured in the same run, on 1 MB to 256 MB float32 buffers.

    python -m symjit.launch -n 2 -- python benchmarks/bench_allreduce.py [--sizes 1,4,16,64,256]

Prints, on rank 0, the best-of-N time and the algorithm bandwidth (bytes / time) of each, and
the ratio symjit / mpi4py (1.0 = as fast as mpi4py). The two are interleaved, so machine load
affects both alike. Never gates CI.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def _best(fn, reps: int, comm) -> float:
    best = float("inf")
    for _ in range(reps):
        comm.Barrier()
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return comm.allreduce(best, op=__import__("mpi4py.MPI", fromlist=["MAX"]).MAX)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1,4,16,64,256", help="buffer sizes in MB")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds per size")
    args = p.parse_args()
    import symjit as mx
    import symjit.distributed as hvd
    from mpi4py import MPI
    hvd.init()
    comm = MPI.COMM_WORLD
    if comm.rank == 0:
        print(f"allreduce (sum, float32) on {hvd.size()} workers")
        print(f"{'MB':>5} {'symjit ms':>10} {'GB/s':>7} {'mpi4py ms':>10} {'GB/s':>7} {'ratio':>6}")
    for mb in [int(s) for s in args.sizes.split(",")]:
        n = mb * 1024 * 1024 // 4
        x = mx.nd.ones((n,))
        buf = np.ones(n, np.float32)
        reps = 5 if mb <= 16 else 2
        ts, tm = float("inf"), float("inf")
        for _ in range(args.rounds):
            ts = min(ts, _best(lambda: hvd.allreduce_(x, op=hvd.Sum), reps, comm))
            tm = min(tm, _best(lambda: comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM), reps, comm))
        if comm.rank == 0:
            gb = mb / 1024
            print(f"{mb:>5} {ts * 1e3:>10.2f} {gb / ts:>7.2f} {tm * 1e3:>10.2f} {gb / tm:>7.2f} {tm / ts:>6.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
