"""The inference and training pipelines on the real reference models (tests/shared_data.py).

Figures asserted (loose bounds, not timings): BatchNorm folded after every convolution,
every elementwise op in a fusion group or an epilogue, arena <= 1.15x the lower bound and
<= 30% of the unoptimized graph's intermediates (each in its own buffer); on the mlp
training graph (forward + backward) the arena is <= 1.2x the lower bound. Outputs equal the
unoptimized graph's (interpreter) within 1e-5 relative to the output scale.
"""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit.ir import run
from symjit.ops.registry import Elementwise
from symjit.passes.infer import infer_types
from symjit.passes.manager import compile_graph
from symjit.passes.training_graph import build_training_graph
from symjit.symbol.lower import lower

from shared_data import model_path


def _load(name, batch=None):
    sym = mx.sym.load(str(model_path(f"{name}-symbol.json")))
    params = mx.nd.load(str(model_path(f"{name}-0000.params")))
    x = np.load(model_path(f"{name}-input.npy"))
    g, _ = lower(sym)
    g, _ = infer_types(g, shapes={"data": (batch or x.shape[0],) + x.shape[1:]})
    consts = {k.split(":", 1)[1]: v.asnumpy() for k, v in params.items()}
    return g, consts, x


@pytest.mark.parametrize("name", ["resnet18_v1", "mobilenet1.0", "lenet"])
def test_inference_pipeline_figures(name):
    g, consts, x = _load(name)
    n_bn = sum(n.op.name == "BatchNorm" for n in g.nodes)
    opt, pm = compile_graph(g, "inference", constants=consts, debug=True)
    stats = {r.name: r.stats for r in pm.records}
    assert stats["inference_rewrites"]["bn_folded"] == n_bn  # every BN here follows a conv
    assert not any(n.op.name == "BatchNorm" for n in opt.nodes)
    assert not any(isinstance(n.op, Elementwise) for n in opt.nodes)  # all inside groups/epilogues
    plan = opt.annotations["memory_plan"]
    assert plan.arena_bytes <= 1.15 * plan.lower_bound
    assert plan.arena_bytes <= 0.30 * pm.unoptimized_bytes
    feeds = {"data": x, **{k: v for k, v in consts.items() if k in {i.name for i in g.inputs}}}
    want = run(g, feeds).outputs[0]
    got = run(opt, feeds).outputs[0]
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    ref = np.load(model_path(f"{name}-output.npy"))
    assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max()


def test_mlp_training_graph_memory():
    g, consts, x = _load("mlp", batch=64)
    joint, _ = build_training_graph(g, [v.name for v in g.args if v.name != "data"])
    opt, pm = compile_graph(joint, "training", debug=True)
    plan = opt.annotations["memory_plan"]
    assert plan.arena_bytes <= 1.2 * plan.lower_bound
    rng = np.random.default_rng(0)
    feeds = {v.name: rng.standard_normal(v.type.shape).astype(v.type.dtype) for v in joint.inputs}
    for a, b in zip(run(joint, feeds).outputs, run(opt, feeds).outputs):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
