"""Convolution + max pooling as one op (passes/conv_pool.py, nnkernels.c symjit_nn_conv_pool),
measured on whole networks.

Compiles the model twice in one process, with and without the `conv_pool` pass (both with
in-graph profiling), and alternates calls of the two in rounds (model_bench_util.profiled_rounds:
a machine that speeds up or slows down affects both); prints the whole-call medians, their
ratio and the median per-round ratio, and the in-graph time of the fused node against the
convolution and pooling nodes it replaces.

    python benchmarks/bench_conv_pool.py [--model resnet18_v1] [--batch 1 8] [--threads 2]
"""
from __future__ import annotations

import argparse

from model_bench_util import describe, load_model_graph, profiled_rounds


def compare(name: str, batch: int, threads: int, rounds: int = 8) -> None:
    from symjit import runtime
    from symjit.codegen.llvm.executable import compile_planned
    runtime.set_num_threads(threads)
    variants = {}
    for label, disabled in (("fused", ()), ("separate", ("conv_pool",))):
        _, arrays, _, opt = load_model_graph(name, batch, disabled=disabled)
        variants[label] = (compile_planned(opt, f"conv_pool_{label}", profile=True), arrays, opt)
    fused_nodes = {n.name for n in variants["fused"][2].nodes if n.op.name == "_conv_pool"}
    if not fused_nodes:
        print(f"{name}: no convolution + max pooling to fuse")
        return
    members = {m for n in variants["fused"][2].nodes if n.op.name == "_conv_pool" for m in n.attrs["members"]}
    res = profiled_rounds({label: (lambda: None, cg, arrays) for label, (cg, arrays, _) in variants.items()},
                          rounds, 10 if batch == 1 else 3)
    a, b = res.median("fused"), res.median("separate")
    print(f"{name} batch {batch}, threads {threads}: whole call {a * 1e3:.2f} ms fused, {b * 1e3:.2f} ms separate "
          f"(x{a / b:.3f}; paired per round x{res.paired('fused', 'separate'):.3f})")
    fused_t = sum(res.node("fused", n) for n in fused_nodes)
    sep_nodes = [n for n in variants["separate"][2].nodes
                 if n.name in members or set(n.attrs.get("members") or ()) & members]
    sep_t = sum(res.node("separate", n.name) for n in sep_nodes)
    print(f"  in graph: fused node(s) {fused_t * 1e3:.3f} ms; the nodes they replace "
          f"({', '.join(describe(n) for n in sep_nodes)}) {sep_t * 1e3:.3f} ms (x{fused_t / sep_t:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", nargs="+", default=["resnet18_v1"])
    ap.add_argument("--batch", nargs="+", type=int, default=[1, 8])
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    for name in args.model:
        for batch in args.batch:
            compare(name, batch, args.threads)


if __name__ == "__main__":
    main()
