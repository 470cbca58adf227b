"""The channel-blocked layout (passes/blocked_layout.py) on vs off, per layer and whole call
(`--off PASS`: another pass of the inference pipeline, e.g. concat_in_place, on vs off the same
way; the variants keep the labels 'blocked' (all passes) and 'nchw' (without it)).

A model (shared, or of another directory: `--models DIR`, e.g. export_zoo.py's) is compiled twice, with the blocked_layout pass and without it (its
convolutions then run the NCHW kernels), and both are timed in one process:
  * per layer: both graphs compiled with profiling, called alternately; each convolution's
    median time in either layout (matched by the original node's name), and the conversions;
  * whole call: the two plain compiled graphs (and ONNX Runtime when installed, same thread
    count) in alternating blocks (model_bench_util.blocked): medians and the median of the
    rounds' paired ratios.

    python benchmarks/bench_blocked_layout.py [--model mobilenet1.0] [--models DIR] [--batch 1 8]
        [--threads 1 2] [--calls 30] [--repeats 100] [--whole-only]
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

from model_bench_util import LAST_PAIRED, MODELS, blocked, describe, load_model_graph, node_flops, ort_session
from symjit import runtime
from symjit.codegen.llvm.executable import compile_planned


def _member(n) -> str:
    """The name of the graph node a convolution node stands for (before fusion and layout)."""
    return tuple(n.attrs.get("members", (n.name,)))[0]


def per_layer(name: str, calls: int, models: Path = MODELS, batch: int = 1, off: str = "blocked_layout") -> None:
    graphs = {}
    for label, disabled in (("nchw", (off,)), ("blocked", ())):
        _, arrays, _, opt = load_model_graph(name, batch, disabled=disabled, models=models)
        graphs[label] = (compile_planned(opt, label, profile=True), arrays, {n.name: n for n in opt.nodes})
    times = {label: {} for label in graphs}   # layer -> ([seconds], node)
    for i in range(calls):
        for label in (list(graphs) if i % 2 == 0 else list(graphs)[::-1]):
            cg, arrays, nodes = graphs[label]
            cg(arrays)
            cg.profile(reset=True)
            cg(arrays)
            for p in cg.profile():
                n = nodes.get(p.node)
                key = _member(n) if n is not None and node_flops(n) > 0 else p.node
                times[label].setdefault(key, ([], n))[0].append(p.seconds)
    med = {label: {k: (float(np.median(v[0])) * 1e3, v[1]) for k, v in t.items()} for label, t in times.items()}
    print(f"{'nchw ms':>8} {'blocked':>8} {'ratio':>6}  layer")
    total = [0.0, 0.0]
    for key, (t_b, n) in med["blocked"].items():
        if n is None:
            continue
        t_n = med["nchw"].get(key, (0.0, None))[0]
        total[0] += t_n
        total[1] += t_b
        if node_flops(n) > 0:
            print(f"{t_n:8.3f} {t_b:8.3f} {t_b / t_n if t_n else float('nan'):6.2f}  {describe(n)}")
        elif n.op.name in ("_to_blocked", "_from_blocked"):
            print(f"{'':8} {t_b:8.3f} {'':6}  {describe(n)}")
    for key, (t_n, n) in med["nchw"].items():
        if key not in med["blocked"] and n is not None:
            total[0] += t_n
    print(f"{total[0]:8.3f} {total[1]:8.3f} {total[1] / total[0]:6.2f}  all nodes")


def whole_call(name: str, repeats: int, models: Path = MODELS, batch: int = 1, off: str = "blocked_layout") -> None:
    cands = {}
    for label, disabled in (("blocked", ()), ("nchw", (off,))):
        cg, arrays, x, _ = load_model_graph(name, batch, disabled=disabled, models=models)
        cands[label] = (lambda cg=cg, arrays=arrays: cg(arrays))
    try:
        sess = ort_session(models / f"{name}.onnx", runtime.num_threads())
        cands["onnxruntime"] = lambda: sess.run(None, {"data": x})
    except ImportError:
        pass
    med = blocked(cands, repeats, rounds=10)
    for label, t in med.items():
        paired = f", paired {LAST_PAIRED[label]:.3f}" if label != "blocked" else ""
        print(f"  {label:12} {t * 1e3:7.3f} ms   blocked / {label} = {med['blocked'] / t:.3f}{paired}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="mobilenet1.0")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--calls", type=int, default=30, help="profiled calls per layout")
    ap.add_argument("--repeats", type=int, default=100, help="whole calls per candidate")
    ap.add_argument("--models", type=Path, default=MODELS, help="directory of NAME-symbol.json, NAME.onnx, ...")
    ap.add_argument("--batch", type=int, nargs="+", default=[1])
    ap.add_argument("--whole-only", action="store_true", help="no per-layer table")
    ap.add_argument("--off", default="blocked_layout",
                    help="the pass turned off in the 'nchw' variant (another pass measured the same way, "
                         "e.g. concat_in_place)")
    args = ap.parse_args()
    load = " ".join(f"{v:.1f}" for v in os.getloadavg())
    for th in args.threads:
        runtime.set_num_threads(th)
        for b in args.batch:
            if not args.whole_only:
                print(f"{args.model} batch {b}, {th} thread(s): per layer (in graph, median of {args.calls} "
                      "profiled calls)")
                per_layer(args.model, args.calls, args.models, b, args.off)
            print(f"{args.model} batch {b}, {th} thread(s), load average {load}: whole call")
            whole_call(args.model, args.repeats, args.models, b, args.off)


if __name__ == "__main__":
    main()
