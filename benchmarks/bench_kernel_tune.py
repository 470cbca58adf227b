"""A kernel-library tuning override on vs off in one process: a model's whole call and each of
its convolutions, paired.

The override (`symjit_nn_tune`, keys in symjit.codegen.llvm.lower_gemm.TUNE_KEYS, e.g.
`blocked_chunk -1`: the general blocked convolution without weight chunks) is read by the
kernels at run time, so one compiled graph runs both variants: whole calls alternate in blocks
(model_bench_util.blocked: medians, CPU time, the median of the rounds' paired ratios); per
node, the graph compiled with profiling runs both variants alternately per round and each
convolution's median over rounds is printed with its ratio (override / built-in choice).

    python benchmarks/bench_kernel_tune.py --model resnet18_v1 [--models DIR] [--batch 1 8]
        [--threads 1 2] --key blocked_chunk --value -1 [--repeats 60] [--rounds 8]
"""
from __future__ import annotations

import argparse
import ctypes
import os
from pathlib import Path

import numpy as np

from model_bench_util import LAST_CPU, MODELS, blocked, describe, load_model_graph, paired_ratio
from symjit import runtime
from symjit.codegen.llvm.executable import compile_planned
from symjit.codegen.llvm.lower_gemm import TUNE_KEYS, kernel_library


def _tune_fn():
    fn = kernel_library().symjit_nn_tune
    fn.argtypes = [ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int64
    return fn


def run(model: str, models: Path, batch: int, threads: int, key: int, value: int, repeats: int, rounds: int) -> None:
    tune = _tune_fn()
    runtime.set_num_threads(threads)
    cg, arrays, _, opt = load_model_graph(model, batch, models=models)
    outs = {}

    def variant(v):
        def call():
            tune(key, v)
            try:
                return cg(arrays)
            finally:
                tune(key, 0)
        return call

    cands = {"builtin": variant(0), "override": variant(value)}
    for label, fn in cands.items():
        outs[label] = np.asarray(fn()[0])
    diff = float(np.abs(outs["builtin"] - outs["override"]).max() / max(np.abs(outs["builtin"]).max(), 1e-30))
    med = blocked(cands, repeats, rounds=4)
    print(f"== {model} batch {batch}, {threads} thread(s), load {os.getloadavg()[0]:.1f}; "
          f"max |override - builtin| / max|builtin| {diff:.1e}")
    for label in cands:
        print(f"  {label:9s} {med[label] * 1e3:9.3f} ms wall {LAST_CPU[label] * 1e3:9.3f} ms cpu")
    print(f"  paired override/builtin {paired_ratio('override', 'builtin'):.3f}")
    prof = compile_planned(opt, "profiled", profile=True)
    nodes = {n.name: n for n in opt.nodes}
    per: dict = {"builtin": {}, "override": {}}
    for _ in range(rounds):
        for label, v in (("builtin", 0), ("override", value)):
            tune(key, v)
            try:
                for _ in range(2):
                    prof(arrays)
                prof.profile(reset=True)
                for _ in range(3):
                    prof(arrays)
                for p in prof.profile():
                    per[label].setdefault(p.node, []).append(p.seconds / 3)
            finally:
                tune(key, 0)
    print("  per convolution (ms, median of rounds): builtin override ratio")
    for name, times in per["builtin"].items():
        n = nodes.get(name)
        if n is None or "conv" not in n.op.name.lower() and "conv" not in str(n.attrs.get("inner", "")).lower():
            continue
        b, o = float(np.median(times)), float(np.median(per["override"][name]))
        if b > 0:
            print(f"    {b * 1e3:8.3f} {o * 1e3:8.3f} {o / b:6.2f}  {describe(n)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18_v1")
    ap.add_argument("--models", type=Path, default=MODELS)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--key", choices=sorted(TUNE_KEYS), default="blocked_chunk")
    ap.add_argument("--value", type=int, default=-1)
    ap.add_argument("--repeats", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=8)
    a = ap.parse_args()
    for batch in a.batch:
        for threads in a.threads:
            run(a.model, a.models, batch, threads, TUNE_KEYS[a.key], a.value, a.repeats, a.rounds)


if __name__ == "__main__":
    main()
