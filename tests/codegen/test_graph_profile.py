"""In-graph per-node profiling (codegen/llvm/profile.py, runtime/profile.c): every native
node of a graph compiled with profile=True is charged the wall time of its kernels inside the
compiled code; counters are per graph, reset on read, and the results stay correct."""
from __future__ import annotations

import time

import numpy as np
import pytest

from symjit import MXNetError
from symjit.codegen.llvm.executable import compile_planned
from symjit.ir import GraphBuilder, TensorType, run
from symjit.passes.manager import compile_graph

BIG = 1 << 21


def _graph():
    """A large elementwise node (exp over 2M floats) then a tiny reduction-free tail."""
    b = GraphBuilder(name="prof")
    x = b.add_input("x", TensorType((BIG,), "float32"))
    w = b.add_input("w", TensorType((4, 8), "float32"))
    big = b.add_node("exp", [x], {})[0]
    head = b.add_node("slice", [big], {"begin": (0,), "end": (8,)})[0]
    small = b.add_node("FullyConnected", [b.add_node("Reshape", [head], {"shape": (1, 8)})[0], w],
                       {"num_hidden": 4, "no_bias": True})[0]
    return b.build([small, big])


def _compile(profile: bool):
    opt, _ = compile_graph(_graph(), "inference")
    return opt, compile_planned(opt, "prof", profile=profile)


def _feeds(opt):
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal(BIG).astype(np.float32), "w": rng.standard_normal((4, 8)).astype(np.float32)}
    return feeds, [feeds[v.name] for v in opt.inputs]


def test_profile_counts_every_native_node_and_results_stay_correct():
    opt, cg = _compile(True)
    feeds, arrays = _feeds(opt)
    calls = 7
    t0 = time.perf_counter()
    for _ in range(calls):
        outs = cg(arrays)
    wall = time.perf_counter() - t0
    ref = run(_graph(), feeds).outputs
    np.testing.assert_allclose(outs[0], ref[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outs[1], ref[1], rtol=1e-6)
    prof = cg.profile()
    native = [n.name for n in opt.nodes if n.op.name != "_const"]
    assert [p.node for p in prof if p.op != "memcpy"] == native
    assert all(p.calls == calls for p in prof)
    assert 0 < sum(p.seconds for p in prof) <= wall
    # the 2M-element exp costs far more than the 8-element tail
    big = [p for p in prof if p.op == "_fused_elemwise"]
    assert len(big) == 1
    assert big[0].seconds > 10 * sum(p.seconds for p in prof if p.op not in ("_fused_elemwise", "memcpy"))


def test_profile_resets_and_graphs_have_their_own_counters():
    opt, a = _compile(True)
    _, b = _compile(True)
    _, arrays = _feeds(opt)
    a(arrays)
    a(arrays)
    b(arrays)
    assert {p.calls for p in a.profile()} == {2}
    assert {p.calls for p in a.profile()} == {0}          # reset by the previous read
    assert {p.calls for p in b.profile(reset=False)} == {1}
    assert {p.calls for p in b.profile()} == {1}


def test_profile_of_an_unprofiled_graph_is_an_error():
    _, cg = _compile(False)
    with pytest.raises(MXNetError, match="compiled without profiling"):
        cg.profile()
    assert "symjit_profile" not in cg.module.ir


def test_slot_count_matches_the_runtime_and_bad_ranges_are_errors():
    from pathlib import Path

    from symjit.codegen.llvm import profile
    header = (Path(__file__).resolve().parents[2] / "runtime" / "symjit_runtime.h").read_text()
    assert f"#define SYMJIT_PROFILE_SLOTS {profile.SLOTS}\n" in header
    with pytest.raises(MXNetError, match="outside"):
        profile.read_slots(profile.SLOTS - 1, 2)


def test_compiled_model_profile_names_fused_ops():
    import symjit as mx
    x = mx.sym.Variable("x")
    w = mx.sym.Variable("w")
    y = mx.sym.relu(mx.sym.FullyConnected(x, w, num_hidden=8, no_bias=True))
    rng = np.random.default_rng(3)
    model = mx.compile(y, shapes={"x": (4, 16)}, params={"w": rng.standard_normal((8, 16)).astype(np.float32)},
                       profile=True)
    xs = rng.standard_normal((4, 16)).astype(np.float32)
    for _ in range(3):
        out = model(x=xs)[0]
    np.testing.assert_allclose(out, np.maximum(xs @ model._bound["w"].T, 0), rtol=1e-5, atol=1e-6)
    prof = model.profile()
    assert {p.calls for p in prof} == {3}
    assert any(p.op == "FullyConnected+epilogue" for p in prof), [p.op for p in prof]
