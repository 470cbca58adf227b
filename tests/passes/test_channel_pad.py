"""Channel padding (passes/channel_pad.py): convolution outputs whose channels are not a multiple
of 16 get zero channels so that the blocked layout takes them in.

The pass: what is padded and what is not; the graph after the whole inference pipeline (the
AVX-512 kernel library's target) keeps a MobileNetV2-style 24-channel stage in the blocked layout.
Differential: random networks of 1x1, 3x3 and depthwise convolutions with residuals, channel
counts on and off multiples of 16 and values read outside the padded region (pooling,
concatenation, graph outputs) -- compiled with the pass, compiled without it, and the
interpreter on the original graph agree within the convolution tolerance (rtol 1e-4, atol 1e-5
x the output's scale)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symjit.codegen.llvm.executable import compile_planned
from symjit.codegen.llvm.target import compile_target
from symjit.ir import GraphBuilder, TensorType, run
from symjit.passes.channel_pad import pad_channels
from symjit.passes.infer import infer_types
from symjit.passes.manager import PIPELINES, compile_graph
from symjit.runtime import native_kernels_in_use


class _Net:
    """A GraphBuilder with constant weights drawn from one generator."""

    def __init__(self, xs, seed=0):
        self.rng = np.random.default_rng(seed)
        self.b = GraphBuilder(name="net")
        self.x = self.b.add_input("x", TensorType(xs, "float32"))
        self.consts = {}

    def const(self, shape, scale=1.0):
        name = f"k{len(self.consts)}"
        self.consts[name] = (scale * self.rng.standard_normal(shape)).astype(np.float32)
        return self.b.add_input(name, TensorType(shape, "float32"))

    def conv(self, y, f, k=1, depthwise=False, act="relu", residual=None):
        c = y.type.shape[1]
        g = c if depthwise else 1
        w = self.const((f, c // g, k, k), 1 / np.sqrt(c // g * k * k))
        y = self.b.add_node("Convolution", [y, w, self.const((f,), 0.1)],
                            {"num_filter": f, "kernel": (k, k), "pad": (k // 2, k // 2), "num_group": g})[0]
        if residual is not None:
            y = self.b.add_node("elemwise_add", [y, residual])[0]
        if act == "relu":
            y = self.b.add_node("relu", [y])[0]
        elif act == "relu6":
            y = self.b.add_node("clip", [y], {"a_min": 0.0, "a_max": 6.0})[0]
        return y


def _inverted_residual_net(xs, c=24, expand=6, seed=0):
    """x -> 1x1 to c (linear) -> two inverted residual blocks at c channels (1x1 expand, relu6,
    3x3 depthwise, relu6, 1x1 project, + input) -> 1x1 to 32 -> global average pooling."""
    net = _Net(xs, seed)
    y = net.conv(net.x, c, act=None)
    for _ in range(2):
        h = net.conv(y, c * expand, act="relu6")
        h = net.conv(h, c * expand, k=3, depthwise=True, act="relu6")
        y = net.conv(h, c, act=None, residual=y)
    y = net.conv(y, 32)
    out = net.b.add_node("Pooling", [y], {"kernel": (1, 1), "pool_type": "avg", "global_pool": True})[0]
    return net.b.build([out]), net.consts


def _optimize(g, consts, with_pad=True):
    pipeline = [(name, fn) for name, fn in PIPELINES["inference"] if with_pad or name != "channel_pad"]
    opt, _ = compile_graph(g, pipeline, consts, target=compile_target("native"))
    return opt


def _ops(g):
    return [n.op.name for n in g.nodes if n.op.name != "_const"]


needs_avx512 = pytest.mark.skipif(not native_kernels_in_use(),
                                  reason="the pass runs for the AVX-512 kernel library's targets only")


@needs_avx512
def test_a_24_channel_inverted_residual_stage_stays_in_the_blocked_layout():
    g, consts = _inverted_residual_net((2, 32, 9, 9))
    without = _ops(_optimize(g, consts, with_pad=False))
    ops = _ops(_optimize(g, consts))
    assert "Convolution" in without or "_with_epilogue" in without       # NCHW without the pass
    assert "Convolution" not in ops and "_with_epilogue" not in ops, ops
    assert ops.count("_to_blocked") <= 1 and ops.count("_from_blocked") <= 1, ops


def test_what_is_not_padded():
    """8 channels (would double), multiples of 16, and convolutions with weights that are graph
    inputs stay as they are."""
    for c in (8, 32):
        g, consts = _inverted_residual_net((1, 16, 5, 5), c=c, expand=2)
        g, _ = infer_types(g)
        out, stats = pad_channels(g)
        assert stats["padded_values"] == 0 and out is g
    g, consts = _inverted_residual_net((1, 16, 5, 5))
    out, stats = pad_channels(g)          # weights are inputs here (no constants bound)
    assert stats["padded_values"] == 0


def _run_compiled(opt, feeds):
    cg = compile_planned(opt, "pad")
    return cg([np.ascontiguousarray(feeds[name]) for name, _, _ in cg.input_specs])


@settings(max_examples=20, deadline=None)
@given(st.data())
def test_random_networks_padded_equal_unpadded_and_interpreter(data):
    n = data.draw(st.sampled_from([1, 2]))
    h, w = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 6))
    c0 = data.draw(st.sampled_from([16, 24, 40]))
    net = _Net((n, c0, h, w), data.draw(st.integers(0, 2**16)))
    y, outputs = net.x, []
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["pw", "dw", "k3", "res", "pool", "cat", "out"]))
        f = data.draw(st.sampled_from([16, 20, 24, 48, 56]))
        if kind == "pw":
            y = net.conv(y, f, act=data.draw(st.sampled_from([None, "relu", "relu6"])))
        elif kind == "dw":
            y = net.conv(y, y.type.shape[1], k=3, depthwise=True)
        elif kind == "k3":
            y = net.conv(y, f, k=3)
        elif kind == "res":
            y = net.conv(y, y.type.shape[1], act=None, residual=y)
        elif kind == "pool":
            y = net.b.add_node("Pooling", [y], {"kernel": (3, 3), "pad": (1, 1), "pool_type": "max"})[0]
        elif kind == "cat":
            y = net.b.add_node("Concat", [y, net.conv(y, 16)], {"dim": 1, "num_args": 2})[0]
        else:
            outputs.append(y)
    g = net.b.build([net.conv(y, 24, act=None)] + outputs)
    feeds = {"x": net.rng.standard_normal((n, c0, h, w)).astype(np.float32), **net.consts}
    refs = run(g, feeds).outputs
    for with_pad in (True, False):
        got = _run_compiled(_optimize(g, net.consts, with_pad), feeds)
        for a, r in zip(got, refs):
            assert a.shape == r.shape
            np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-5 * max(float(np.abs(r).max()), 1.0))
