"""Concatenation written in place by its producers (passes/concat_in_place.py, placed by
passes/memory_plan.py; codegen/llvm/lower_shape.py skips the parts already in their slab).

Which concatenations alias their parts (contiguous slabs of an arena output, aligned, outside
in-place pairs), nested ones composing (DenseNet); the compiled graphs equal the interpreter
on the original graph (convolution tolerance: rtol 1e-4, atol 1e-5 x the output's scale),
with and without aliasing, including parts read again after the concatenation.
"""
from __future__ import annotations

import numpy as np
import pytest

from symjit.codegen.llvm.executable import compile_planned
from symjit.ir import GraphBuilder, TensorType, run
from symjit.passes.manager import compile_graph


def _dense_blocks(xs, layers=3, growth=16, read_parts_after=False, out_relu=True, seed=0):
    """DenseNet-like: each layer relu -> 3x3 convolution (growth filters) of the running
    concatenation, concatenated to it; then a 1x1 convolution of the last concatenation. With
    `read_parts_after` the first layer's output is also added to the final result (read after
    every concatenation)."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder(name="dense")
    x = b.add_input("x", TensorType(xs, "float32"))
    consts, feat, c = {}, b.add_node("relu", [x])[0], xs[1]
    first = None
    for i in range(layers):
        ws = (growth, c, 3, 3)
        w = b.add_input(f"w{i}", TensorType(ws, "float32"))
        consts[f"w{i}"] = (rng.standard_normal(ws) / np.sqrt(c * 9)).astype(np.float32)
        h = b.add_node("relu", [feat])[0]
        new = b.add_node("Convolution", [h, w], {"num_filter": growth, "kernel": (3, 3), "pad": (1, 1),
                                                 "no_bias": True})[0]
        first = new if first is None else first
        feat = b.add_node("Concat", [feat, new], {"dim": 1, "num_args": 2})[0]
        c += growth
    w = b.add_input("wo", TensorType((8, c, 1, 1), "float32"))
    consts["wo"] = rng.standard_normal((8, c, 1, 1)).astype(np.float32)
    y = b.add_node("Convolution", [feat, w], {"num_filter": 8, "kernel": (1, 1), "no_bias": True})[0]
    if read_parts_after:
        s = b.add_node("sum", [first], {"axis": 1, "keepdims": True})[0]
        y = b.add_node("broadcast_add", [y, s])[0]
    if out_relu:
        y = b.add_node("relu", [y])[0]
    return b.build([y]), consts


def _plan(g, consts):
    opt, pm = compile_graph(g, "inference", consts)
    stats = [r.stats for r in pm.records if r.name == "concat_in_place"][0]
    return opt, stats


def _check_no_live_overlap(opt):
    """Two values live at the same step share bytes only when one is inside the other's slab
    (a part and its concatenation)."""
    plan = opt.annotations["memory_plan"]
    ivs = {iv.key: iv for iv in plan.intervals}
    by_name = {v.name: v for v in plan.offsets}
    alias_pairs = set()
    for n in opt.nodes:
        if n.op.name == "Concat":
            for p in n.inputs:
                alias_pairs.add((p.name, n.outputs[0].name))
    # the transitive closure (nested concatenations)
    changed = True
    while changed:
        changed = False
        for a, b in list(alias_pairs):
            for c, d in list(alias_pairs):
                if b == c and (a, d) not in alias_pairs:
                    alias_pairs.add((a, d))
                    changed = True
    names = list(ivs)
    for i, a in enumerate(names):
        for bname in names[i + 1:]:
            ia, ib = ivs[a], ivs[bname]
            if not ia.overlaps_in_time(ib):
                continue
            oa, ob = plan.offsets[by_name[a]], plan.offsets[by_name[bname]]
            if oa < ob + ib.size and ob < oa + ia.size:
                assert (a, bname) in alias_pairs or (bname, a) in alias_pairs, (a, bname)


def test_nested_concatenations_at_batch_1_are_written_in_place():
    g, consts = _dense_blocks((1, 16, 6, 6))
    opt, stats = _plan(g, consts)
    assert stats["concat_parts_in_place"] == 6     # both parts of each of the 3 concatenations
    plan = opt.annotations["memory_plan"]
    concats = [n for n in opt.nodes if n.op.name == "Concat"]
    last = concats[-1].outputs[0]
    for n in concats:   # every part at its slab, inside the last concatenation's buffer
        base, pos = plan.offsets[n.outputs[0]], 0
        for p in n.inputs:
            assert plan.offsets[p] == base + pos
            pos += int(np.prod(p.type.shape)) * 4
        assert plan.offsets[last] <= base < plan.offsets[last] + int(np.prod(last.type.shape)) * 4
    _check_no_live_overlap(opt)


@pytest.mark.parametrize("why,xs,growth", [
    ("batch 2: the parts are strided in the output", (2, 16, 6, 6), 16),
    ("slabs not 64-byte aligned (5, 8, 11 channels of 3x3)", (1, 5, 3, 3), 3),
])
def test_concatenations_that_copy(why, xs, growth):
    g, consts = _dense_blocks(xs, growth=growth)
    _, stats = _plan(g, consts)
    assert stats["concat_parts_in_place"] == 0, why


@pytest.mark.parametrize("xs,growth,read_parts_after", [
    ((1, 16, 6, 6), 16, False),
    ((1, 16, 7, 7), 16, True),      # 7x7 planes: 196-byte channels, slabs aligned every 16 channels
    ((1, 32, 5, 9), 32, True),
    ((2, 16, 6, 6), 16, True),      # copies
    ((1, 5, 3, 3), 3, False),       # copies (misaligned)
])
def test_compiled_concatenations_equal_the_interpreter(xs, growth, read_parts_after):
    g, consts = _dense_blocks(xs, growth=growth, read_parts_after=read_parts_after, seed=xs[2])
    opt, _ = _plan(g, consts)
    _check_no_live_overlap(opt)
    cg = compile_planned(opt, g.name)
    assert cg.native
    feeds = dict(consts, x=np.random.default_rng(1).standard_normal(xs).astype(np.float32))
    got = cg([np.ascontiguousarray(feeds[name]) for name, _, _ in cg.input_specs])[0]
    ref = run(g, feeds).outputs[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    np.testing.assert_allclose(run(opt, feeds).outputs[0], ref, rtol=1e-4,
                               atol=1e-5 * max(1.0, float(np.abs(ref).max())))


def test_a_part_written_in_place_by_a_later_reader_is_not_aliased():
    """relu(part) after the concatenation may take the part's buffer in place: then the part
    must keep its own buffer (else the relu would overwrite the concatenation)."""
    b = GraphBuilder(name="inplace")
    x = b.add_input("x", TensorType((1, 16, 4, 4), "float32"))
    a = b.add_node("exp", [x])[0]
    c = b.add_node("sin", [x])[0]
    cat = b.add_node("Concat", [a, c], {"dim": 1, "num_args": 2})[0]
    s = b.add_node("sum", [cat], {"axis": 1, "keepdims": True})[0]
    r = b.add_node("_mul_scalar", [a], {"scalar": 3.0})[0]
    y = b.add_node("broadcast_add", [r, s])[0]
    g = b.build([y])
    opt, _ = _plan(g, {})
    paired = {v for pair in opt.annotations["inplace"].items() for v in pair}
    aliased = {p for n in opt.nodes if n.op.name == "Concat" for p in n.inputs
               if opt.annotations["memory_plan"].offsets.get(p) is not None}
    for n in opt.nodes:
        if n.op.name == "Concat":
            base = opt.annotations["memory_plan"].offsets[n.outputs[0]]
            for p in set(n.inputs) & paired & aliased:   # an in-place part keeps its own buffer
                assert not base <= opt.annotations["memory_plan"].offsets[p] < base + 2048
    _check_no_live_overlap(opt)
    cg = compile_planned(opt, g.name)
    xv = np.random.default_rng(2).standard_normal((1, 16, 4, 4)).astype(np.float32)
    got = cg([xv])[0]
    np.testing.assert_allclose(got, run(g, {"x": xv}).outputs[0], rtol=1e-5, atol=1e-5)


def test_the_pass_keeps_the_inplace_pairs_and_can_be_disabled():
    g, consts = _dense_blocks((1, 16, 6, 6), read_parts_after=True)
    on, _ = compile_graph(g, "inference", consts)
    off, pm = compile_graph(g, "inference", consts, disabled={"concat_in_place"})
    pairs = lambda opt: sorted((o.name, i.name) for o, i in opt.annotations["inplace"].items())
    assert pairs(on) == pairs(off)
    assert on.annotations["concat_aliases"] and not off.annotations["concat_aliases"]
    assert on.annotations["memory_plan"].arena_bytes < off.annotations["memory_plan"].arena_bytes
    cat = [n for n in off.nodes if n.op.name == "Concat"][0]
    plan = off.annotations["memory_plan"]
    assert plan.offsets[cat.inputs[0]] != plan.offsets[cat.outputs[0]] or \
        plan.offsets[cat.inputs[1]] != plan.offsets[cat.outputs[0]] + int(np.prod(cat.inputs[0].type.shape)) * 4
