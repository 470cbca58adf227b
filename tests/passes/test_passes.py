"""Semantic preservation of every pass on random graphs, plus targeted rewrite checks.

Tolerance: outputs of the optimized graph equal the interpreter's outputs on the original
graph within rtol 1e-5 / atol 1e-6 (float32; fusion evaluates the same scalar operations,
constant folding the same reference kernels). The memory plan is checked by executing the
graph with every intermediate stored at its planned arena offset (`run_in_arena`): an
overlap of two live values corrupts a result and fails the comparison.
"""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphgen import feeds, random_graph
from symjit.base import MXNetError
from symjit.ir import GraphBuilder, TensorType, run, verify
from symjit.ops import scalar as S
from symjit.ops.registry import ComputeContext
from symjit.passes.cse import eliminate_common_subexpressions
from symjit.passes.dce import eliminate_dead_code
from symjit.passes.fold_constants import bind_constants, fold_constants
from symjit.passes.fusion import fuse
from symjit.passes.infer import infer_types
from symjit.passes.inplace import plan_inplace
from symjit.passes.manager import PassManager, compile_graph
from symjit.passes.memory_plan import plan_memory
from symjit.passes.simplify import simplify
from symjit.passes.training_graph import build_training_graph

RTOL, ATOL = 1e-5, 1e-6


def _outputs(g, f):
    return run(g, f).outputs


def _assert_same(before, after, f):
    verify(after)
    for a, b in zip(_outputs(before, f), _outputs(after, f)):
        np.testing.assert_allclose(b, a, rtol=RTOL, atol=ATOL)


def run_in_arena(g, f) -> list:
    """Execute `g` with every intermediate living at its planned offset in one byte arena."""
    plan = g.annotations["memory_plan"]
    arena = np.zeros(max(plan.arena_bytes, 1), dtype=np.uint8)
    env = {v: np.asarray(f[v.name]) for v in g.inputs}
    ctx = ComputeContext()
    for n in g.nodes:
        results = n.op.compute(n.attrs, [env[v] for v in n.inputs], ctx)
        for v, r in zip(n.outputs, results):
            if v in plan.offsets:
                off = plan.offsets[v]
                view = arena[off:off + r.nbytes].view(r.dtype).reshape(r.shape)
                view[...] = r
                env[v] = view
            else:
                env[v] = r
    return [np.array(env[v]) for v in g.outputs]


PASSES = {
    "simplify": simplify,
    "simplify_training": partial(simplify, training=True),
    "cse": eliminate_common_subexpressions,
    "dce": eliminate_dead_code,
    "fold_constants": fold_constants,
    "fusion": fuse,
}


@settings(max_examples=40, deadline=None)
@given(random_graph(), st.sampled_from(sorted(PASSES)), st.integers(0, 2 ** 31))
def test_each_pass_preserves_semantics(g, name, seed):
    f = feeds(g, np.random.default_rng(seed))
    after, stats = PASSES[name](g)
    assert isinstance(stats, dict)
    _assert_same(g, after, f)
    assert len(after.nodes) <= len(g.nodes) or name in ("fusion", "simplify", "simplify_training")


@settings(max_examples=40, deadline=None)
@given(random_graph(), st.integers(0, 2 ** 31), st.booleans())
def test_whole_pipeline_and_arena_execution(g, seed, bind_w):
    f = feeds(g, np.random.default_rng(seed))
    consts = {"w": f["w"]} if bind_w else None
    opt, pm = compile_graph(g, "inference", constants=consts, debug=True)
    _assert_same(g, opt, f)
    for a, b in zip(_outputs(g, f), run_in_arena(opt, f)):
        np.testing.assert_allclose(b, a, rtol=RTOL, atol=ATOL)
    plan = opt.annotations["memory_plan"]
    assert plan.arena_bytes <= plan.naive_bytes
    assert all(r.name for r in pm.records)


@settings(max_examples=25, deadline=None)
@given(random_graph(max_nodes=8), st.integers(0, 2 ** 31))
def test_training_graph_pipeline(g, seed):
    rng = np.random.default_rng(seed)
    joint, _ = build_training_graph(g, [v.name for v in g.args])
    verify(joint)
    f = feeds(joint, rng)
    opt, _ = compile_graph(joint, "training", debug=True)
    _assert_same(joint, opt, f)
    for a, b in zip(_outputs(joint, f), run_in_arena(opt, f)):
        np.testing.assert_allclose(b, a, rtol=RTOL, atol=ATOL)


def _chain_graph():
    b = GraphBuilder()
    a, bb, c = (b.add_input(n, TensorType((64,), "float32")) for n in "abc")
    ab = b.add_node("elemwise_mul", [a, bb])[0]
    s = b.add_node("elemwise_add", [ab, c])[0]
    r = b.add_node("relu", [s])[0]
    sg = b.add_node("sigmoid", [a])[0]
    m = b.add_node("elemwise_mul", [r, sg])[0]
    t = b.add_node("tanh", [c])[0]
    return b.build([b.add_node("elemwise_sub", [m, t])[0]])


def test_issue_chain_becomes_one_fused_node():
    g = _chain_graph()
    opt, stats = fuse(g)
    assert [n.op.name for n in opt.nodes] == ["_fused_elemwise"]
    assert stats["elementwise_nodes_fused"] == 7
    (e,) = opt.nodes[0].attrs["exprs"]
    assert S.inputs_of(e) == {0, 1, 2}
    _assert_same(g, opt, feeds(g, np.random.default_rng(0)))


def test_cse_merges_repeated_expressions():
    b = GraphBuilder()
    x = b.add_input("x", TensorType((3, 4), "float32"))
    e1 = b.add_node("exp", [x])[0]
    e2 = b.add_node("exp", [x])[0]
    s1 = b.add_node("_plus_scalar", [e1], {"scalar": 1.0})[0]
    s2 = b.add_node("_plus_scalar", [e2], {"scalar": "1.0"})[0]  # same attribute, string form
    r = b.add_node("_random_uniform", [], {"shape": (3, 4)})[0]
    r2 = b.add_node("_random_uniform", [], {"shape": (3, 4)})[0]
    out = b.add_node("elemwise_add", [s1, s2])[0]
    g = b.build([out, r, r2])
    opt, stats = eliminate_common_subexpressions(g)
    assert stats["nodes_merged"] == 2
    assert sum(n.op.name == "_random_uniform" for n in opt.nodes) == 2  # random ops never merge
    opt, _ = eliminate_dead_code(opt)
    assert sum(n.op.name == "exp" for n in opt.nodes) == 1


def test_simplify_rules():
    b = GraphBuilder()
    x = b.add_input("x", TensorType((2, 3), "float32"))
    y = b.add_node("_mul_scalar", [x], {"scalar": 1.0})[0]
    y = b.add_node("_plus_scalar", [y], {"scalar": 0.0})[0]
    y = b.add_node("negative", [b.add_node("negative", [y])[0]])[0]
    y = b.add_node("transpose", [b.add_node("transpose", [y])[0]])[0]
    y = b.add_node("Reshape", [b.add_node("Reshape", [y], {"shape": (3, 2)})[0]], {"shape": (6,)})[0]
    y = b.add_node("Cast", [y], {"dtype": "float32"})[0]
    z = b.add_node("elemwise_sub", [y, y])[0]
    p = b.add_node("_power_scalar", [x], {"scalar": 3.0})[0]
    g = b.build([y, z, p])
    opt, stats = simplify(g)
    opt, _ = eliminate_dead_code(opt)
    names = [n.op.name for n in opt.nodes]
    assert names.count("negative") == 0 and names.count("transpose") == 0 and "Cast" not in names
    assert names.count("Reshape") == 1 and "zeros_like" in names and "_power_scalar" not in names
    _assert_same(g, opt, {"x": np.random.default_rng(1).uniform(0.5, 1, (2, 3)).astype(np.float32)})


def test_blockgrad_kept_for_training_removed_for_inference():
    b = GraphBuilder()
    x = b.add_input("x", TensorType((2,), "float32"))
    g = b.build([b.add_node("BlockGrad", [x])[0]])
    assert [n.op.name for n in eliminate_dead_code(simplify(g)[0])[0].nodes] == []
    assert [n.op.name for n in simplify(g, training=True)[0].nodes] == ["BlockGrad"]


def test_constant_folding():
    b = GraphBuilder()
    x = b.add_input("x", TensorType((2, 2), "float32"))
    w = b.add_input("w", TensorType((2, 2), "float32"))
    w2 = b.add_node("_mul_scalar", [b.add_node("exp", [w])[0]], {"scalar": 2.0})[0]
    g = b.build([b.add_node("dot", [x, w2])[0]])
    wv = np.array([[0.1, 0.2], [0.3, 0.4]], dtype=np.float32)
    bound, _ = bind_constants(g, {"w": wv})
    folded, stats = fold_constants(bound)
    folded, _ = eliminate_dead_code(folded)
    assert stats["nodes_folded"] == 2
    assert [n.op.name for n in folded.nodes] == ["_const", "dot"]
    xv = np.eye(2, dtype=np.float32)
    np.testing.assert_allclose(run(folded, {"x": xv, "w": wv}).outputs[0], 2 * np.exp(wv), rtol=1e-6)
    with pytest.raises(MXNetError, match="not an input"):
        bind_constants(g, {"nope": wv})


def test_constant_folding_rewires_every_reader_and_folded_outputs():
    """Folded values read by several later nodes, by other folded nodes and as graph outputs
    (directly and twice) all read the new constants; results equal the unfolded graph's."""
    b = GraphBuilder()
    x = b.add_input("x", TensorType((3, 3), "float32"))
    w = b.add_input("w", TensorType((3, 3), "float32"))
    e = b.add_node("exp", [w])[0]
    e2 = b.add_node("_mul_scalar", [e], {"scalar": 2.0})[0]           # folded, reads a folded value
    s = b.add_node("elemwise_add", [e, e2])[0]                        # folded, two folded readers
    y1 = b.add_node("dot", [x, s])[0]
    y2 = b.add_node("elemwise_mul", [x, e])[0]
    g = b.build([y1, e2, y2, e2])
    wv = np.random.default_rng(3).uniform(-1, 1, (3, 3)).astype(np.float32)
    xv = np.random.default_rng(4).uniform(-1, 1, (3, 3)).astype(np.float32)
    folded, stats = fold_constants(bind_constants(g, {"w": wv})[0])
    assert stats["nodes_folded"] == 3
    verify(folded)
    folded, _ = eliminate_dead_code(folded)
    assert sorted(n.op.name for n in folded.nodes) == ["_const", "_const", "_const", "dot", "elemwise_mul"]
    assert folded.outputs[1] is folded.outputs[3]
    want = run(g, {"x": xv, "w": wv}).outputs
    got = run(folded, {"x": xv, "w": wv}).outputs
    for a, bv in zip(want, got):
        np.testing.assert_array_equal(bv, a)


def test_shape_only_ops_fold_to_constants_without_touching_values():
    """shape_array/size_array (the `shape_only` trait) fold once shapes are known, whatever
    the input's size: folding never materializes the input."""
    b = GraphBuilder()
    x = b.add_input("x", TensorType((3, 20000, 30000), "float32"))   # 7.2 GB if allocated
    g = b.build([b.add_node("shape_array", [x])[0], b.add_node("size_array", [x])[0]])
    folded, stats = fold_constants(g)
    assert stats["nodes_folded"] == 2
    assert [n.op.name for n in folded.nodes] == ["_const", "_const"]
    shape, size = (n.attrs["value"] for n in folded.nodes)
    assert shape.dtype == np.int64 and shape.tolist() == [3, 20000, 30000]
    assert size.tolist() == [3 * 20000 * 30000]


def test_inplace_pairs_are_safe_and_used():
    b = GraphBuilder()
    x = b.add_input("x", TensorType((16,), "float32"))
    y = b.add_node("exp", [x])[0]
    s = b.add_node("sum", [y], {"axis": 0, "keepdims": True})[0]     # y is still live here
    z = b.add_node("broadcast_div", [y, s])[0]                       # y dies here: z may reuse it
    g = b.build([b.add_node("sqrt", [z])[0]])
    g2, stats = plan_inplace(g)
    assert stats["inplace_pairs"] >= 1
    g3, _ = plan_memory(g2)
    plan = g3.annotations["memory_plan"]
    f = {"x": np.linspace(0, 1, 16, dtype=np.float32)}
    np.testing.assert_allclose(run_in_arena(g3, f)[0], run(g, f).outputs[0], rtol=1e-6)
    assert plan.arena_bytes < plan.naive_bytes


def test_pass_manager_switches_and_report(monkeypatch, capsys):
    g = _chain_graph()
    pm = PassManager("inference", disabled={"fusion"}, dump={"cse"}, debug=True)
    out = pm.run(g)
    assert "_fused_elemwise" not in {n.op.name for n in out.nodes}
    assert "after cse" in capsys.readouterr().out and "cse" in pm.dumps
    assert "(disabled)" in pm.report()
    monkeypatch.setenv("SYMJIT_DISABLE_PASSES", "fusion,cse")
    pm2 = PassManager("inference")
    assert {"fusion", "cse"} <= pm2.disabled
    with pytest.raises(MXNetError, match="unknown pass pipeline"):
        PassManager("nope")
    with pytest.raises(MXNetError, match="cannot disable unknown passes"):
        PassManager("inference", disabled={"no_such_pass"})


def test_memory_plan_needs_known_types():
    b = GraphBuilder()
    x = b.add_input("x", TensorType(None, "float32"))
    y = b.add_node("exp", [x])[0]
    g = b.build([b.add_node("exp", [y])[0]])
    with pytest.raises(MXNetError, match="known types"):
        plan_memory(g)


def test_infer_then_pipeline_on_partial_graph():
    b = GraphBuilder()
    x = b.add_input("data", TensorType(None, "float32"))
    w = b.add_input("fc_weight")
    bias = b.add_input("fc_bias")
    y = b.add_node("FullyConnected", [x, w, bias], {"num_hidden": 3})[0]
    g = b.build([b.add_node("relu", [y])[0]])
    g2, _ = infer_types(g, shapes={"data": (2, 5)})
    opt, _ = compile_graph(g2, "inference")
    assert [n.op.name for n in opt.nodes] == ["_with_epilogue"]
    assert opt.annotations["memory_plan"].arena_bytes == 0


def test_gc_paused_restores_the_collector_state():
    """The collector is off inside (nested pauses too), back on after the last one leaves, and
    stays off after when it was off before; an exception inside still restores it."""
    import gc
    from symjit.passes.manager import gc_paused
    was = gc.isenabled()
    try:
        gc.enable()
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert gc.isenabled()
        with pytest.raises(ValueError):
            with gc_paused():
                raise ValueError("x")
        assert gc.isenabled()
        gc.disable()
        with gc_paused():
            pass
        assert not gc.isenabled()
        gc.enable()
        PassManager("inference").run(_chain_graph())
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def _group_edges(groups):
    """(succ, pred) of the fusion groups recomputed from their members, by brute force."""
    succ = {g: set() for g in groups.members}
    pred = {g: set() for g in groups.members}
    for g, members in groups.members.items():
        for m in members:
            for v in m.outputs:
                for r in groups.readers.get(v, ()):
                    h = groups.group[id(r)]
                    if h != g:
                        succ[g].add(h)
                        pred[h].add(g)
    return succ, pred


@settings(max_examples=60, deadline=None)
@given(random_graph(max_nodes=20), st.integers(0, 2 ** 31))
def test_fusion_groups_keep_their_edges_exact_and_acyclic(g, seed):
    """fusion._Groups maintains each group's successor and predecessor sets through merges
    instead of rescanning members: after every merge along a producer -> consumer edge that
    the cycle test allows, both equal a recomputation from the members, and the graph of
    groups has no cycle (a topological order of it exists)."""
    from symjit.passes.fusion import _Groups
    rng = np.random.default_rng(seed)
    groups = _Groups(list(g.nodes))
    producer = {v: n for n in g.nodes for v in n.outputs}
    edges = [(producer[v], n) for n in g.nodes for v in n.inputs if v in producer]
    for k in rng.permutation(len(edges)):
        p, n = edges[k]
        src, dst = groups.group[id(p)], groups.group[id(n)]
        if src == dst or groups.would_cycle(src, dst) or groups.would_cycle(dst, src):
            continue
        groups.merge(src, dst)
        assert (groups.succ, groups.pred) == _group_edges(groups)
        indegree = {h: len(ps) for h, ps in groups.pred.items()}
        ready = [h for h, d in indegree.items() if d == 0]
        seen = 0
        while ready:
            h = ready.pop()
            seen += 1
            for s in groups.succ[h]:
                indegree[s] -= 1
                if indegree[s] == 0:
                    ready.append(s)
        assert seen == len(groups.members)
