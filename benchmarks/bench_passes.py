"""Pass-pipeline figures on the shared models: BatchNorm folding, fusion coverage and the
memory plan (arena vs the lower bound and vs every intermediate in its own buffer), for
resnet18_v1 and mobilenet1.0 inference at batch 1 and the mlp training graph (forward +
backward) at batch 64. Targets: arena <= 1.15x lower bound and <= 30% of the unoptimized
intermediates (inference); arena <= 1.2x lower bound (training).
Run: python benchmarks/bench_passes.py
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

import symjit as mx
from symjit.ops.registry import Elementwise
from symjit.passes.infer import infer_types
from symjit.passes.manager import compile_graph
from symjit.passes.training_graph import build_training_graph
from symjit.symbol.lower import lower

MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"


def _graph(name: str, batch: int | None = None):
    sym = mx.sym.load(str(MODELS / f"{name}-symbol.json"))
    x = np.load(MODELS / f"{name}-input.npy")
    g, _ = lower(sym)
    g, _ = infer_types(g, shapes={"data": (batch or x.shape[0],) + x.shape[1:]})
    params = {k.split(":", 1)[1]: v.asnumpy() for k, v in mx.nd.load(str(MODELS / f"{name}-0000.params")).items()}
    return g, params


def inference(name: str) -> None:
    g, params = _graph(name)
    n_bn = sum(n.op.name == "BatchNorm" for n in g.nodes)
    n_ew = sum(isinstance(n.op, Elementwise) for n in g.nodes)
    opt, pm = compile_graph(g, "inference", constants=params)
    stats = {r.name: r.stats for r in pm.records}
    loose = sum(isinstance(n.op, Elementwise) for n in opt.nodes)
    groups = [n for n in opt.nodes if n.op.name in ("_fused_elemwise", "_with_epilogue")]
    plan = opt.annotations["memory_plan"]
    print(f"== {name} (inference, batch 1): {len(g.nodes)} nodes -> {len(opt.nodes)}")
    print(f"  BatchNorm folded into convolutions: {stats['inference_rewrites']['bn_folded']} of {n_bn}")
    print(f"  elementwise ops: {n_ew} before, {loose} left outside fusion groups/epilogues "
          f"({len(groups)} groups, {stats['fusion']['epilogues_fused']} GEMM/conv epilogues)")
    print(f"  arena {plan.arena_bytes / 2**20:.2f} MiB = x{plan.arena_bytes / plan.lower_bound:.3f} of the lower "
          f"bound ({plan.lower_bound / 2**20:.2f} MiB), {plan.arena_bytes / pm.unoptimized_bytes:.1%} of the "
          f"unoptimized intermediates ({pm.unoptimized_bytes / 2**20:.2f} MiB)")


def training() -> None:
    g, _ = _graph("mlp", batch=64)
    joint, st = build_training_graph(g, [v.name for v in g.args if v.name != "data"])
    opt, pm = compile_graph(joint, "training")
    plan = opt.annotations["memory_plan"]
    print(f"== mlp training graph (forward {st['forward_nodes']} + backward {st['backward_nodes']} nodes, "
          f"batch 64): {len(joint.nodes)} nodes -> {len(opt.nodes)}")
    print(f"  arena {plan.arena_bytes / 2**10:.1f} KiB = x{plan.arena_bytes / plan.lower_bound:.3f} of the lower "
          f"bound, {plan.arena_bytes / pm.unoptimized_bytes:.1%} of the unoptimized intermediates")


if __name__ == "__main__":
    inference("resnet18_v1")
    inference("mobilenet1.0")
    training()
