"""Options of the blocked-layout pass (passes/blocked_layout.py) on whole models, paired.

Each variant compiles the model with `blocked_layout(g, **options)` in the inference pipeline
(the other passes as shipped), in one process; whole calls alternate in blocks
(model_bench_util.blocked: medians of wall and CPU time, the median of the rounds' paired
ratios to the first variant). Only models whose graphs differ between the variants are timed.
Outputs are compared with the first variant's.

    python benchmarks/bench_layout_rule.py --models DIR [DIR ...] [--only NAME ...] [--batch 1 8]
        [--threads 1 2] [--repeats 40] --variant old=lone:0,entry_pool:0 --variant new=
"""
from __future__ import annotations

import argparse
import functools
import os
from pathlib import Path

import numpy as np

from model_bench_util import LAST_CPU, blocked, load_model_graph, paired_ratio
from symjit import runtime


def _variant(spec: str) -> tuple[str, dict]:
    """'label=key:int,key:int' -> (label, options)"""
    label, _, rest = spec.partition("=")
    opts = {}
    for item in filter(None, rest.split(",")):
        k, _, v = item.partition(":")
        opts[k] = int(v)
    return label, opts


def _compiled(models: Path, name: str, batch: int, options: dict):
    """(compiled graph, its input arrays, optimized graph) with blocked_layout(**options)."""
    from symjit.passes.blocked_layout import blocked_layout
    from symjit.passes.manager import PIPELINES
    pipeline = [(n, functools.partial(blocked_layout, **options) if n == "blocked_layout" else fn)
                for n, fn in PIPELINES["inference"]]
    cg, arrays, _, opt = load_model_graph(name, batch, models=models, pipeline=pipeline)
    return cg, arrays, opt


def _signature(opt) -> tuple:
    return tuple((n.op.name, tuple(v.type.shape for v in n.outputs)) for n in opt.nodes if n.op.name != "_const")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, nargs="+", required=True)
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--variant", action="append", required=True)
    a = ap.parse_args()
    variants = dict(_variant(v) for v in a.variant)
    first = next(iter(variants))
    for d in a.models:
        for sym in sorted(d.glob("*-symbol.json")):
            name = sym.name[:-len("-symbol.json")]
            if a.only and name not in a.only or not (d / f"{name}-0000.params").exists():
                continue
            for batch in a.batch:
                built = {label: _compiled(d, name, batch, opts) for label, opts in variants.items()}
                if len({_signature(opt) for _, _, opt in built.values()}) == 1:
                    print(f"== {name} batch {batch}: the same graph in every variant")
                    continue
                outs = {label: np.asarray(cg(arrays)[0]) for label, (cg, arrays, _) in built.items()}
                scale = max(float(np.abs(outs[first]).max()), 1e-30)
                diffs = {label: float(np.abs(o - outs[first]).max()) / scale for label, o in outs.items()}
                for threads in a.threads:
                    runtime.set_num_threads(threads)
                    cands = {label: functools.partial(cg, arrays) for label, (cg, arrays, _) in built.items()}
                    med = blocked(cands, a.repeats, rounds=4)
                    print(f"== {name} batch {batch}, {threads} thread(s), load {os.getloadavg()[0]:.1f}")
                    for label in cands:
                        ratio = "" if label == first else f"  paired {label}/{first} {paired_ratio(label, first):.3f}"
                        print(f"  {label:8s} {med[label] * 1e3:9.3f} ms wall {LAST_CPU[label] * 1e3:9.3f} ms cpu"
                              f"  max rel diff {diffs[label]:.1e}{ratio}")


if __name__ == "__main__":
    main()
