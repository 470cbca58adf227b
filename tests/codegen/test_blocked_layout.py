"""Channel-blocked layout (passes/blocked_layout.py, ops/blocked.py, lower_blocked.py,
nnkernels.c symjit_nn_conv_blocked / _to_blocked / _from_blocked).

The pass: which chains move into NCHW16c and which must not, where the conversions go. The
kernels: each network is compiled with the pass and without it (the NCHW kernels) and run on
the same data; both must equal the interpreter on the original graph within the convolution
tolerance (rtol 1e-4, atol 1e-5 x the output's scale), on the AVX-512 kernels and on the
portable loops. The interpreter on the rewritten graph (the blocked ops' reference
implementations) must equal it too.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symjit.base import MXNetError
from symjit.codegen.llvm.executable import compile_planned
from symjit.ir import GraphBuilder, TensorType, run
from symjit.ops.blocked import from_blocked, to_blocked
from symjit.ops.fused import ACT_NONE, ACT_RELU, ACT_RELU6
from symjit.passes.blocked_layout import blocked_layout
from symjit.passes.manager import PIPELINES, compile_graph
from symjit.runtime import native_kernels_in_use


def _pw(f):
    return {"num_filter": f, "kernel": (1, 1)}


def _dw(c, s=1):
    return {"num_filter": c, "kernel": (3, 3), "pad": (1, 1), "stride": (s, s), "num_group": c}


def _chain(xs, layers, relu=(), bias=True, outputs=(), seed=0):
    """x -> the Convolutions `layers` (attrs), relu after those whose index is in `relu`;
    the graph returns the last output and those of the indices in `outputs`. Returns the
    graph and its constants (weights, biases)."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder(name="blocked")
    y = b.add_input("x", TensorType(xs, "float32"))
    consts, outs, c = {}, [], xs[1]
    for i, attrs in enumerate(layers):
        f, g = attrs["num_filter"], attrs.get("num_group", 1)
        ws = (f, c // g) + attrs["kernel"]
        w = b.add_input(f"w{i}", TensorType(ws, "float32"))
        consts[f"w{i}"] = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
        ins = [y, w]
        if bias:
            ins.append(b.add_input(f"b{i}", TensorType((f,), "float32")))
            consts[f"b{i}"] = rng.standard_normal(f).astype(np.float32)
        y = b.add_node("Convolution", ins, dict(attrs, no_bias=not bias))[0]
        if i in relu:
            y = b.add_node("relu", [y])[0]
        if i in outputs:
            outs.append(y)
        c = f
    return b.build([y] + outs), consts


def _conv(f, k, s=1, p=0):
    """a dense convolution: f filters, kernel k (int or pair), stride s, padding p (int or pair)"""
    pair = lambda v: v if isinstance(v, tuple) else (v, v)
    return {"num_filter": f, "kernel": pair(k), "stride": (s, s), "pad": pair(p)}


def _ops(g):
    return [n.op.name for n in g.nodes if n.op.name != "_const"]


@pytest.fixture(params=["avx512", "portable"])
def kernel_path(request):
    """The kernel library's AVX-512 kernels (where the CPU has them) or its portable loops. The
    pass runs where the AVX-512 kernels are in use, so the portable case compiles with it
    enabled explicitly and then switches the library to its loops."""
    from symjit.codegen.llvm.lower_gemm import set_native_kernels
    if request.param == "avx512" and not native_kernels_in_use():
        pytest.skip("this CPU has no AVX-512")
    yield request.param
    set_native_kernels(-1)


def _switch_to(kernel_path):
    """After compiling: the portable case switches the kernel library to its loops."""
    if kernel_path == "portable":
        from symjit.codegen.llvm.lower_gemm import set_native_kernels
        set_native_kernels(0)


def _optimize(g, consts, enabled=True, cost_rule=True):
    pipeline = [(name, (lambda gg: blocked_layout(gg, enabled=enabled, cost_rule=cost_rule))
                 if name == "blocked_layout" else fn)
                for name, fn in PIPELINES["inference"]]
    opt, pm = compile_graph(g, pipeline, consts)
    return opt, pm


# ------------------------------------------------------------------------------ the pass

def test_a_pointwise_depthwise_chain_moves_into_the_blocked_layout():
    g, consts = _chain((1, 32, 12, 12), [_pw(32), _dw(32), _pw(64), _dw(64, 2)], relu=(0, 1, 2))
    opt, pm = _optimize(g, consts)
    assert _ops(opt) == ["_to_blocked"] + ["_conv_blocked"] * 4 + ["_from_blocked"]
    stats = [r.stats for r in pm.records if r.name == "blocked_layout"]
    assert stats == [{"blocked_convolutions": 4, "layout_conversions": 2}]
    convs = [n for n in opt.nodes if n.op.name == "_conv_blocked"]
    assert [n.attrs["relu"] for n in convs] == [True, True, True, False]
    assert [n.outputs[0].type.shape for n in convs] == [(1, 2, 12, 12, 16), (1, 2, 12, 12, 16),
                                                        (1, 4, 12, 12, 16), (1, 4, 6, 6, 16)]
    assert opt.outputs[0].type.shape == (1, 64, 6, 6)
    again, stats = blocked_layout(opt, enabled=True)
    assert stats["blocked_convolutions"] == 0 and _ops(again) == _ops(opt)


def test_disabled_or_not_in_use_leaves_the_graph():
    g, consts = _chain((1, 32, 8, 8), [_pw(32), _dw(32)])
    opt, _ = _optimize(g, consts, enabled=False)
    assert "_conv_blocked" not in _ops(opt)


@pytest.mark.parametrize("why,xs,layers", [
    ("no depthwise convolution", (1, 32, 8, 8), [_pw(32), _pw(48)]),
    ("a lone depthwise convolution", (1, 32, 8, 8), [_dw(32)]),
    ("channels not a multiple of 16", (1, 24, 8, 8), [_pw(24), _dw(24)]),
    ("depthwise with padding 0", (1, 32, 8, 8), [_pw(32), dict(_dw(32), pad=(0, 0))]),
    ("depthwise 5x5", (1, 32, 8, 8), [_pw(32), dict(_dw(32), kernel=(5, 5), pad=(2, 2))]),
    ("depthwise stride 3", (1, 32, 9, 9), [_pw(32), _dw(32, 3)]),
    ("dilated depthwise", (1, 32, 8, 8), [_pw(32), dict(_dw(32), dilate=(2, 2), pad=(2, 2))]),
    ("3x3 stride 1 that NCHW runs by Winograd", (1, 64, 16, 16), [_conv(64, 3, 1, 1), _conv(64, 3, 1, 1)]),
    ("dilated 3x3", (1, 32, 8, 8), [_pw(32), dict(_conv(32, 3, 1, 2), dilate=(2, 2))]),
    ("unequal strides", (1, 32, 8, 8), [_pw(32), dict(_conv(32, 3, 1, 1), stride=(1, 2))]),
    ("a grouped 3x3", (1, 32, 8, 8), [_pw(32), dict(_conv(32, 3, 1, 1), num_group=2)]),
])
def test_what_stays_in_nchw(why, xs, layers):
    g, consts = _chain(xs, layers)
    opt, _ = _optimize(g, consts)
    assert "_conv_blocked" not in _ops(opt), why


def test_a_chain_of_general_convolutions_moves_when_it_pays():
    """1x1, 1x7, 7x1 and a strided 3x3 (Inception-style) without a depthwise convolution: the
    cost rule moves the chain at 17x17 with 128 channels, not at 4x4 with 16."""
    layers = [_pw(128), _conv(128, (1, 7), 1, (0, 3)), _conv(128, (7, 1), 1, (3, 0)), _conv(192, 3, 2, 0)]
    g, consts = _chain((1, 256, 17, 17), layers, relu=(0, 1, 2, 3))
    opt, pm = _optimize(g, consts)
    assert _ops(opt) == ["_to_blocked"] + ["_conv_blocked"] * 4 + ["_from_blocked"]
    convs = [n for n in opt.nodes if n.op.name == "_conv_blocked"]
    assert [n.outputs[0].type.shape for n in convs] == [(1, 8, 17, 17, 16)] * 3 + [(1, 12, 8, 8, 16)]
    small, consts = _chain((1, 16, 4, 4), [_pw(16), _conv(16, (1, 7), 1, (0, 3))])
    assert "_conv_blocked" not in _ops(_optimize(small, consts)[0])
    assert "_conv_blocked" in _ops(_optimize(small, consts, cost_rule=False)[0])


def test_weights_that_are_inputs_stay_in_nchw():
    g, consts = _chain((1, 32, 8, 8), [_pw(32), _dw(32)])
    opt, _ = _optimize(g, {k: v for k, v in consts.items() if k != "w1"})
    assert "_conv_blocked" not in _ops(opt)


def test_a_chain_value_read_outside_the_chain_is_converted_back_once():
    g, consts = _chain((1, 16, 10, 10), [_pw(16), _dw(16), _pw(32)], relu=(0,), outputs=(1,))
    opt, pm = _optimize(g, consts)
    assert _ops(opt).count("_from_blocked") == 2 and _ops(opt).count("_to_blocked") == 1
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal((1, 16, 10, 10)).astype(np.float32)}
    want = run(g, dict(feeds, **consts)).outputs
    got = run(opt, dict(feeds, **consts)).outputs
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_an_entry_convolution_stores_the_blocked_layout_directly():
    g, consts = _chain((1, 3, 16, 16), [_conv(32, 3, 2, 1), _dw(32), _pw(64)], relu=(0, 1))
    opt, pm = _optimize(g, consts)
    assert _ops(opt) == ["_conv_blocked"] * 3 + ["_from_blocked"]
    stats = [r.stats for r in pm.records if r.name == "blocked_layout"]
    assert stats == [{"blocked_convolutions": 3, "layout_conversions": 1}]
    entry = opt.nodes[[n.op.name for n in opt.nodes].index("_conv_blocked")]
    assert entry.attrs["data_blocked"] is False and entry.attrs["relu"] == ACT_RELU
    assert entry.inputs[0].type.shape == (1, 3, 16, 16) and entry.outputs[0].type.shape == (1, 2, 8, 8, 16)
    assert [n.attrs["data_blocked"] for n in opt.nodes if n.op.name == "_conv_blocked"][1:] == [True, True]


@pytest.mark.parametrize("why,xs,layers,outputs", [
    ("its output is also a graph output", (1, 3, 8, 8), [_conv(16, 3, 1, 1), _dw(16), _pw(16)], (0,)),
    ("16 input channels", (1, 16, 8, 8), [_conv(16, 3, 1, 1), _dw(16), _pw(16)], ()),
    ("unequal strides", (1, 3, 8, 8), [dict(_conv(16, 3, 1, 1), stride=(1, 2)), _dw(16), _pw(16)], ()),
])
def test_entry_convolutions_that_keep_the_conversion(why, xs, layers, outputs):
    g, consts = _chain(xs, layers, outputs=outputs)
    opt, _ = _optimize(g, consts)
    assert _ops(opt).count("_to_blocked") == 1, why
    assert all(n.attrs["data_blocked"] for n in opt.nodes if n.op.name == "_conv_blocked"), why


def test_cuda_planning_keeps_nchw():
    from symjit.codegen.cuda import plan_graph
    g, consts = _chain((1, 32, 8, 8), [_pw(32), _dw(32)])
    assert "_conv_blocked" not in _ops(plan_graph(g, consts))


# ------------------------------------------------------------------------------ the ops

def test_reorders_are_inverse_and_place_channels_innermost():
    x = np.random.default_rng(2).standard_normal((2, 32, 3, 5)).astype(np.float32)
    b = to_blocked(x)
    assert b.shape == (2, 2, 3, 5, 16)
    assert b[1, 1, 2, 4, 7] == x[1, 23, 2, 4]
    np.testing.assert_array_equal(from_blocked(b), x)


def test_reorder_shape_errors_name_the_op():
    from symjit.ops.registry import get_op
    with pytest.raises(MXNetError, match=r"_to_blocked: .*multiple of 16.*\(1, 24, 4, 4\)"):
        get_op("_to_blocked").infer_shape({}, [(1, 24, 4, 4)])
    with pytest.raises(MXNetError, match=r"_from_blocked: .*\(1, 2, 4, 4, 8\)"):
        get_op("_from_blocked").infer_shape({}, [(1, 2, 4, 4, 8)])


# ------------------------------------------------------------------------------ the kernels

#: (data shape, layers, relu indices, bias): odd sizes, stride 2 on odd and even planes, 1x1
#: and 1xW planes, batch > 1, every panel width (F / 16 = 1, 2, 3, 4, 5 blocks), pixel counts
#: that are not multiples of the tile heights; entry convolutions (NCHW data, fewer than 16
#: channels) with the tiles for 3-wide kernels at stride 1 and 2 and the general ones (5x5,
#: 7x7, 3x5), planes without an interior (every pixel next to the padding), several panels
CASES = [
    ((2, 3, 37, 45), [_conv(32, 3, 2, 1), _dw(32), _pw(32)], (0, 1), True),
    ((1, 5, 20, 23), [_conv(48, 3, 1, 1), _dw(48), _pw(16)], (0,), False),
    ((2, 1, 11, 30), [_conv(64, 5, 2, 2), _dw(64), _pw(64)], (0, 2), True),
    ((1, 2, 9, 9), [_conv(80, 7, 2, 3), _dw(80, 2), _pw(16)], (), True),
    ((1, 7, 6, 40), [_conv(32, (3, 5), 1, (0, 2)), _dw(32), _pw(128)], (0, 1), True),
    ((1, 3, 2, 2), [_conv(16, 3, 1, 1), _dw(16), _pw(16)], (0,), True),
    ((1, 32, 56, 56), [_pw(32), _dw(32), _pw(64), _dw(64, 2), _pw(128)], (0, 1, 2, 3), True),
    ((2, 16, 13, 17), [_pw(16), _dw(16), _pw(48), _dw(48, 2), _pw(80)], (1, 3), True),
    ((1, 64, 7, 7), [_dw(64), _pw(64), _dw(64, 2), _pw(32)], (0, 1, 2), False),
    ((3, 32, 9, 1), [_pw(32), _dw(32), _dw(32, 2), _pw(16)], (), True),
    ((1, 16, 1, 1), [_pw(16), _dw(16), _pw(64)], (0, 2), True),
    ((1, 48, 2, 30), [_dw(48, 2), _pw(48), _dw(48)], (0,), True),
    ((1, 16, 33, 35), [_pw(16), _dw(16, 2), _dw(16, 2), _pw(16)], (0, 1, 2), False),
]

#: general convolutions from blocked data (any kernel, padding, equal strides; one group):
#: asymmetric 1x7 / 7x1, 5x5, 3x3 stride 1 and 2 with and without padding, strided 1x1,
#: kernels larger than the padded plane's one axis (1x1 planes), batch 1 and 8, pixel counts
#: that cross rows within a tile and are not multiples of the tile heights, every panel width
GENERAL_CASES = [
    ((1, 16, 12, 12), [_conv(32, 3, 1, 1), _conv(48, (1, 7), 1, (0, 3)), _conv(16, (7, 1), 1, (3, 0))], (0, 1), True),
    ((2, 32, 17, 17), [_conv(64, 3, 2, 0), _conv(80, 1, 2, 0), _conv(64, 5, 1, 2)], (0,), True),
    ((8, 48, 9, 11), [_conv(64, 1), _conv(96, 3, 1, 1), _conv(32, 3, 2, 1)], (0, 1, 2), False),
    ((1, 16, 1, 1), [_conv(16, 3, 1, 1), _conv(32, 1, 1, 0), _conv(16, (1, 7), 1, (0, 3))], (), True),
    ((8, 32, 8, 8), [_conv(64, (1, 3), 1, (0, 1)), _conv(48, (3, 1), 2, (1, 0)), _conv(32, 2, 2, 0)], (0, 1), True),
    ((1, 64, 7, 5), [_conv(16, (7, 1), 1, (3, 0)), _dw(16), _conv(64, (5, 3), 3, (2, 1))], (1,), True),
    ((7, 64, 5, 5), [_pw(128), _conv(80, 3, 1, 1), _pw(48)], (0, 1), True),   # images grouped per task
]


def _compiled(g, consts, enabled, cost_rule=True):
    opt, _ = _optimize(g, consts, enabled, cost_rule)
    cg = compile_planned(opt, g.name)
    assert cg.native, [n.op.name for n in cg.module.python_nodes]
    return opt, cg


def _run(opt, cg, feeds):
    return cg([np.ascontiguousarray(feeds[name]) for name, _, _ in cg.input_specs])[0]


def _assert_match_reference(g, feeds, compiled, interpreted=()):
    """The output of each compiled (opt, cg), and the interpreter's on each graph of
    `interpreted`, equal the interpreter on the original `g` within the convolution tolerance."""
    ref = run(g, feeds).outputs[0]
    tol = dict(rtol=1e-4, atol=1e-5 * max(float(np.abs(ref).max()), 1.0))
    for opt, cg in compiled:
        np.testing.assert_allclose(_run(opt, cg, feeds), ref, **tol)
    for opt in interpreted:
        np.testing.assert_allclose(run(opt, feeds).outputs[0], ref, **tol)


@pytest.mark.parametrize("case,every_chain", [(c, False) for c in CASES] + [(c, True) for c in GENERAL_CASES])
def test_blocked_equals_nchw_and_interpreter(case, every_chain, kernel_path):
    xs, layers, relu, bias = case
    g, consts = _chain(xs, layers, relu=relu, bias=bias, seed=len(layers))
    rng = np.random.default_rng(xs[1] + xs[2])
    feeds = {"x": rng.standard_normal(xs).astype(np.float32)}
    blocked_opt, blocked = _compiled(g, consts, True, cost_rule=not every_chain)
    assert _ops(blocked_opt).count("_conv_blocked") == len(layers)
    assert ("_to_blocked" in _ops(blocked_opt)) == (xs[1] % 16 == 0)   # entry convolutions store blocked
    nchw_opt, nchw = _compiled(g, consts, False)
    assert "_conv_blocked" not in _ops(nchw_opt)
    _switch_to(kernel_path)
    feeds.update(consts)   # bound constants stay inputs of the compiled graph (unread)
    got = _run(blocked_opt, blocked, feeds)
    ref = run(g, dict(feeds, **consts)).outputs[0]
    assert got.shape == ref.shape
    tol = dict(rtol=1e-4, atol=1e-5 * max(float(np.abs(ref).max()), 1.0))
    np.testing.assert_allclose(got, ref, **tol)
    np.testing.assert_allclose(_run(nchw_opt, nchw, feeds), ref, **tol)
    np.testing.assert_allclose(run(blocked_opt, dict(feeds, **consts)).outputs[0], ref, **tol)


def test_nan_follows_relu_semantics(kernel_path):
    """NaN stays NaN through relu (as the NCHW kernels and the reference keep it)."""
    g, consts = _chain((1, 16, 12, 12), [_pw(16), _dw(16), _pw(16)], relu=(0, 1, 2))
    feeds = {"x": np.random.default_rng(3).standard_normal((1, 16, 12, 12)).astype(np.float32)}
    feeds["x"][0, 3, 4, 5] = np.nan
    opt, cg = _compiled(g, consts, True)
    _switch_to(kernel_path)
    got = _run(opt, cg, dict(feeds, **consts))
    ref = run(g, dict(feeds, **consts)).outputs[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    assert np.isnan(got).any()


# ------------------------------------------------------------------------------ inverted residuals

def _inverted_residuals(xs, blocks, seed=0, residual_input=False):
    """MobileNetV2's blocks on x: each (t, c, s) is pointwise expansion to t * C channels +
    relu6 (clip to [0, 6]), 3x3 depthwise with stride s + relu6, linear pointwise projection to
    c channels, plus the block's input where the shapes allow (stride 1, c == C). With
    `residual_input` a second graph input r of the last block's output shape is added to it.
    Returns the graph and its constants."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder(name="inverted")
    y = b.add_input("x", TensorType(xs, "float32"))
    consts, c, k = {}, xs[1], 0

    def conv(y, c, attrs):
        nonlocal k
        f, g = attrs["num_filter"], attrs.get("num_group", 1)
        ws = (f, c // g) + attrs["kernel"]
        w, bias = b.add_input(f"w{k}", TensorType(ws, "float32")), b.add_input(f"b{k}", TensorType((f,), "float32"))
        consts[f"w{k}"] = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
        consts[f"b{k}"] = rng.standard_normal(f).astype(np.float32)
        k += 1
        return b.add_node("Convolution", [y, w, bias], attrs)[0]

    def relu6(y):
        return b.add_node("clip", [y], {"a_min": 0.0, "a_max": 6.0})[0]

    for t, f, s in blocks:
        h = relu6(conv(y, c, _pw(t * c)))
        h = relu6(conv(h, t * c, _dw(t * c, s)))
        h = conv(h, t * c, _pw(f))
        y = b.add_node("elemwise_add", [h, y])[0] if s == 1 and f == c else h
        c = f
    if residual_input:
        shape = (xs[0], c) + tuple(-(-d // int(np.prod([s for *_, s in blocks]))) for d in xs[2:])
        y = b.add_node("elemwise_add", [y, b.add_input("r", TensorType(shape, "float32"))])[0]
    return b.build([y]), consts


def test_inverted_residuals_move_into_the_blocked_layout_with_relu6_and_residuals():
    g, consts = _inverted_residuals((1, 16, 12, 12), [(6, 16, 1), (6, 32, 2), (4, 32, 1)])
    opt, pm = _optimize(g, consts)
    assert _ops(opt) == ["_to_blocked"] + ["_conv_blocked"] * 9 + ["_from_blocked"]
    convs = [n for n in opt.nodes if n.op.name == "_conv_blocked"]
    assert [n.attrs["relu"] for n in convs] == [ACT_RELU6, ACT_RELU6, ACT_NONE] * 3
    assert [n.attrs["residual"] for n in convs] == [False, False, True, False, False, False, False, False, True]
    first = convs[2]   # the first block's projection adds the block's input, blocked once
    assert first.inputs[-1] is opt.nodes[[n.op.name for n in opt.nodes].index("_to_blocked")].outputs[0]
    assert convs[8].inputs[-1] is convs[5].outputs[0]   # the third adds the second's output
    rng = np.random.default_rng(4)
    feeds = dict(consts, x=rng.standard_normal((1, 16, 12, 12)).astype(np.float32))
    ref = run(g, feeds).outputs[0]
    np.testing.assert_allclose(run(opt, feeds).outputs[0], ref, rtol=1e-4, atol=1e-5 * float(np.abs(ref).max()))


def test_a_residual_from_outside_the_chain_is_converted_into_the_layout():
    g, consts = _inverted_residuals((1, 16, 8, 8), [(2, 32, 1)], residual_input=True)
    opt, _ = _optimize(g, consts)
    assert _ops(opt).count("_conv_blocked") == 3 and _ops(opt).count("_to_blocked") == 2
    assert opt.nodes[-2].op.name == "_conv_blocked" and opt.nodes[-2].attrs["residual"]


@pytest.mark.parametrize("why,epilogue", [
    ("clip to other bounds", lambda b, y: b.add_node("clip", [y], {"a_min": 0.0, "a_max": 4.0})[0]),
    ("a residual times two", lambda b, y: b.add_node("_mul_scalar", [b.add_node("elemwise_add", [y, y])[0]],
                                                     {"scalar": 2.0})[0]),
])
def test_epilogues_the_blocked_kernels_cannot_apply_stay_in_nchw(why, epilogue):
    rng = np.random.default_rng(0)
    b = GraphBuilder(name="other")
    x = b.add_input("x", TensorType((1, 16, 6, 6), "float32"))
    consts, y = {}, x
    for i, attrs in enumerate([_pw(32), _dw(32)]):
        ws = (32, 16 if i == 0 else 1) + attrs["kernel"]
        consts[f"w{i}"] = rng.standard_normal(ws).astype(np.float32)
        y = epilogue(b, b.add_node("Convolution", [y, b.add_input(f"w{i}", TensorType(ws, "float32"))],
                                   dict(attrs, no_bias=True))[0])
    opt, _ = _optimize(b.build([y]), consts)
    assert "_conv_blocked" not in _ops(opt), why


#: (data shape, blocks): batch > 1, odd planes, stride 2 on odd planes, every panel width of
#: the projections (F / 16 = 1, 2, 3, 5 blocks), planes smaller than a pixel tile
INVERTED_CASES = [
    ((1, 16, 14, 14), [(6, 16, 1), (6, 32, 2), (6, 32, 1)]),
    ((2, 32, 9, 11), [(3, 32, 1), (2, 48, 2), (2, 48, 1)]),
    ((1, 80, 7, 7), [(2, 80, 1), (2, 80, 1)]),
    ((3, 16, 3, 1), [(4, 16, 1), (2, 16, 1)]),
]


@pytest.mark.parametrize("case", INVERTED_CASES)
def test_inverted_residuals_blocked_equal_nchw_and_interpreter(case, kernel_path):
    xs, blocks = case
    g, consts = _inverted_residuals(xs, blocks, seed=len(blocks), residual_input=True)
    rng = np.random.default_rng(xs[1] + xs[2])
    feeds = {"x": 3 * rng.standard_normal(xs).astype(np.float32)}   # wide enough to reach both clip bounds
    feeds["r"] = rng.standard_normal(g.inputs[[v.name for v in g.inputs].index("r")].type.shape).astype(np.float32)
    blocked_opt, blocked = _compiled(g, consts, True)
    assert any(n.attrs["residual"] for n in blocked_opt.nodes if n.op.name == "_conv_blocked")
    nchw_opt, nchw = _compiled(g, consts, False)
    _switch_to(kernel_path)
    feeds.update(consts)
    _assert_match_reference(g, feeds, [(blocked_opt, blocked), (nchw_opt, nchw)])


def test_nan_follows_relu6_semantics(kernel_path):
    """NaN stays NaN through relu6 (clip keeps NaN in the reference) and through residual adds."""
    g, consts = _inverted_residuals((1, 16, 10, 10), [(2, 16, 1), (2, 16, 1)])
    feeds = {"x": np.random.default_rng(3).standard_normal((1, 16, 10, 10)).astype(np.float32)}
    feeds["x"][0, 3, 4, 5] = np.nan
    opt, cg = _compiled(g, consts, True)
    _switch_to(kernel_path)
    got = _run(opt, cg, dict(feeds, **consts))
    ref = run(g, dict(feeds, **consts)).outputs[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    assert np.isnan(got).any()


# ------------------------------------------------------------------------------ pools and concatenations

def _inception_block(xs, pools, seed=0, head=True):
    """An Inception-style block on x: a 1x1 branch; 1x1 -> 1x7 -> 7x1; the stride-1 `pools`
    (Pooling attrs, each followed by a 1x1 convolution); their channel concatenation, the
    strided pools in turn, then (with `head`) a strided 3x3 convolution and a global average
    pooling. Channels are multiples of 16 except
    where a test says otherwise. Returns the graph and its constants."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder(name="inception")
    x = b.add_input("x", TensorType(xs, "float32"))
    consts, k = {}, 0

    def conv(y, c, attrs, relu=True):
        nonlocal k
        f = attrs["num_filter"]
        ws = (f, c) + attrs["kernel"]
        w, bias = b.add_input(f"w{k}", TensorType(ws, "float32")), b.add_input(f"b{k}", TensorType((f,), "float32"))
        consts[f"w{k}"] = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
        consts[f"b{k}"] = rng.standard_normal(f).astype(np.float32)
        k += 1
        y = b.add_node("Convolution", [y, w, bias], attrs)[0]
        return b.add_node("relu", [y])[0] if relu else y

    c = xs[1]
    parts = [conv(x, c, _pw(32)),
             conv(conv(conv(x, c, _pw(48)), 48, _conv(48, (1, 7), 1, (0, 3))), 48, _conv(64, (7, 1), 1, (3, 0)))]
    same = [a for a in pools if a.get("stride", (1, 1)) == (1, 1)]
    for attrs in same:
        p = b.add_node("Pooling", [x], attrs)[0]
        parts.append(conv(p, c, _pw(16)))
    y = b.add_node("Concat", parts, {"dim": 1, "num_args": len(parts)})[0]
    for attrs in pools:   # the strided ones on the concatenation
        if attrs not in same:
            y = b.add_node("Pooling", [y], attrs)[0]
    if head:
        y = conv(y, 96 + 16 * len(same), _conv(32, 3, 2, 0))
        y = b.add_node("Pooling", [y], {"kernel": (1, 1), "pool_type": "avg", "global_pool": True})[0]
    return b.build([y]), consts


POOLS = [
    {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1), "pool_type": "avg"},
    {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1), "pool_type": "avg", "count_include_pad": False},
    {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "max", "pooling_convention": "full"},
    {"kernel": (2, 3), "stride": (1, 2), "pad": (0, 1), "pool_type": "sum"},
    {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1), "pool_type": "max"},
]


def test_pools_and_concatenations_join_the_chain():
    g, consts = _inception_block((1, 64, 17, 17), POOLS[:2], head=False)
    opt, pm = _optimize(g, consts)
    ops = _ops(opt)
    assert ops.count("_to_blocked") == 1 and ops.count("_from_blocked") == 1, ops
    assert ops.count("_pool_blocked") == 2 and ops.count("Concat") == 1 and ops.count("_conv_blocked") == 6
    concat = next(n for n in opt.nodes if n.op.name == "Concat")
    assert concat.outputs[0].type.shape == (1, 8, 17, 17, 16)
    assert "Pooling" not in ops and "Convolution" not in ops


def test_pools_and_concatenations_with_channels_not_multiples_of_16_stay_in_nchw():
    from symjit.passes.blocked_layout import layout_candidate
    b = GraphBuilder(name="odd")
    x = b.add_input("x", TensorType((1, 32, 8, 8), "float32"))
    r = b.add_input("r", TensorType((1, 24, 8, 8), "float32"))
    pooled = b.add_node("Pooling", [r], POOLS[0])[0]
    cat = b.add_node("Concat", [x, pooled], {"dim": 1, "num_args": 2})[0]
    two = b.add_node("Concat", [x, x], {"dim": 1, "num_args": 2})[0]
    cat3 = b.add_node("Concat", [x, x], {"dim": 3, "num_args": 2})[0]
    g = b.build([cat, two, cat3])
    assert [layout_candidate(n, {}) is not None for n in g.nodes] == [False, False, True, False]


@pytest.mark.parametrize("xs,pools", [((1, 32, 17, 17), POOLS), ((8, 48, 9, 8), POOLS[1:3]),
                                      ((2, 16, 5, 7), POOLS[::2]), ((1, 16, 3, 3), POOLS[4:])])
def test_inception_blocks_equal_nchw_and_interpreter(xs, pools, kernel_path):
    g, consts = _inception_block(xs, pools, seed=xs[2])
    feeds = {"x": np.random.default_rng(xs[3]).standard_normal(xs).astype(np.float32)}
    blocked_opt, blocked = _compiled(g, consts, True, cost_rule=False)
    assert "_pool_blocked" in _ops(blocked_opt) and "Pooling" not in _ops(blocked_opt)
    nchw_opt, nchw = _compiled(g, consts, False)
    _switch_to(kernel_path)
    feeds.update(consts)
    _assert_match_reference(g, feeds, [(blocked_opt, blocked), (nchw_opt, nchw)], [blocked_opt])


@pytest.mark.parametrize("pool", POOLS + [{"kernel": (3, 3), "pool_type": "max", "global_pool": True},
                                  {"kernel": (3, 3), "stride": (2, 2), "pool_type": "avg", "pooling_convention": "full"}])
def test_blocked_pooling_equals_pooling(pool, kernel_path):
    """The pooling kernel between two 1x1 convolutions (the first one's output has a NaN:
    max skips it unless alone, sums carry it, as in NCHW): windows, divisors, conventions."""
    rng = np.random.default_rng(5)
    b = GraphBuilder(name="pool")
    xs = (2, 32, 11, 10)
    x = b.add_input("x", TensorType(xs, "float32"))
    ws = [b.add_input(f"w{i}", TensorType((32, 32, 1, 1), "float32")) for i in range(2)]
    consts = {f"w{i}": rng.standard_normal((32, 32, 1, 1)).astype(np.float32) * 0.2 for i in range(2)}
    y = b.add_node("Convolution", [x, ws[0]], dict(_pw(32), no_bias=True))[0]
    y = b.add_node("Pooling", [y], pool)[0]
    y = b.add_node("Convolution", [y, ws[1]], dict(_pw(32), no_bias=True))[0]
    g = b.build([y])
    opt, cg = _compiled(g, consts, True, cost_rule=False)
    assert _ops(opt) == ["_to_blocked", "_conv_blocked", "_pool_blocked", "_conv_blocked", "_from_blocked"]
    _switch_to(kernel_path)
    feeds = dict(consts, x=rng.standard_normal(xs).astype(np.float32))
    feeds["x"][1, :, 4, 5] = np.nan
    ref = run(g, feeds).outputs[0]
    got = _run(opt, cg, feeds)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    ok = ~np.isnan(ref)
    np.testing.assert_allclose(got[ok], ref[ok], rtol=1e-4, atol=1e-5 * float(np.abs(ref[ok]).max()))


# ------------------------------------------------------------------------------ lone convolutions, entry pools, chunks

def _conv_pool_chain(xs, f0, layers, pool, seed=0):
    """x -> Convolution(f0 filters, 3x3, padding 1) -> relu -> `pool` (a max pooling: the
    conv_pool pass fuses the three) -> the Convolutions `layers` with relu. Returns the graph
    and its constants."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder(name="stem")
    y = b.add_input("x", TensorType(xs, "float32"))
    consts, c = {}, xs[1]
    for i, attrs in enumerate([_conv(f0, 3, 1, 1)] + layers):
        f = attrs["num_filter"]
        ws = (f, c) + attrs["kernel"]
        w, bias = b.add_input(f"w{i}", TensorType(ws, "float32")), b.add_input(f"b{i}", TensorType((f,), "float32"))
        consts[f"w{i}"] = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
        consts[f"b{i}"] = rng.standard_normal(f).astype(np.float32)
        y = b.add_node("relu", [b.add_node("Convolution", [y, w, bias], attrs)[0]])[0]
        if i == 0:
            y = b.add_node("Pooling", [y], pool)[0]
        c = f
    return b.build([y]), consts


MAX_POOL = {"kernel": (2, 2), "stride": (2, 2), "pool_type": "max"}


def test_a_convolution_with_max_pooling_is_an_entry_convolution(kernel_path):
    """A stem convolution + max pooling (`_conv_pool`) with 32+ filters stores the blocked
    layout and its pooling runs blocked: no conversion into the layout; values as NCHW's."""
    xs = (2, 3, 20, 18)
    g, consts = _conv_pool_chain(xs, 32, [_conv(32, 3, 1, 1), _pw(48)], dict(MAX_POOL, kernel=(3, 3), pad=(1, 1)))
    opt, cg = _compiled(g, consts, True)
    assert _ops(opt) == ["_conv_blocked", "_pool_blocked", "_conv_blocked", "_conv_blocked", "_from_blocked"]
    assert opt.nodes[[n.op.name for n in opt.nodes].index("_conv_blocked")].attrs["data_blocked"] is False
    nchw_opt, nchw = _compiled(g, consts, False)
    assert "_conv_pool" in _ops(nchw_opt)
    _switch_to(kernel_path)
    feeds = dict(consts, x=np.random.default_rng(1).standard_normal(xs).astype(np.float32))
    ref = run(g, feeds).outputs[0]
    tol = dict(rtol=1e-4, atol=1e-5 * max(float(np.abs(ref).max()), 1.0))
    np.testing.assert_allclose(_run(opt, cg, feeds), ref, **tol)
    np.testing.assert_allclose(_run(nchw_opt, nchw, feeds), ref, **tol)


def test_a_convolution_with_max_pooling_and_16_filters_keeps_its_fused_kernel():
    """(ENTRY_POOL_MIN_FILTERS) a 16-filter `_conv_pool` stays in NCHW; the lone convolution
    after it moves by the cost rule, its input converted."""
    g, consts = _conv_pool_chain((8, 1, 28, 28), 16, [_conv(64, 3, 1, 1)], MAX_POOL)
    opt, _ = _optimize(g, consts)
    assert _ops(opt) == ["_conv_pool", "_to_blocked", "_conv_blocked", "_from_blocked"]


@pytest.mark.parametrize("xs,layers,moves", [
    ((8, 16, 14, 14), [_conv(64, 3, 1, 1)], True),      # 14.5M multiply-adds for 125K elements converted
    ((1, 16, 8, 8), [_pw(16)], False),                  # 16K multiply-adds: the conversions cost more
])
def test_a_lone_convolution_moves_where_the_cost_rule_says_it_pays(xs, layers, moves):
    g, consts = _chain(xs, layers, relu=(0,))
    opt, _ = _optimize(g, consts)
    assert ("_conv_blocked" in _ops(opt)) == moves
    lone_off = [(name, (lambda gg: blocked_layout(gg, lone=False)) if name == "blocked_layout" else fn)
                for name, fn in PIPELINES["inference"]]
    assert "_conv_blocked" not in _ops(compile_graph(g, lone_off, consts)[0])


def _tune(key, value):
    import ctypes
    from symjit.codegen.llvm.lower_gemm import TUNE_KEYS, kernel_library
    fn = kernel_library().symjit_nn_tune
    fn.argtypes = [ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int64
    return fn(TUNE_KEYS[key], value)


def _run_tuned(opt, cg, feeds, kernel_path, key, value):
    """`_run` on `kernel_path` with the kernel library's tuning override `key` set to `value`
    (restored afterwards)."""
    _switch_to(kernel_path)
    old = _tune(key, value)
    try:
        return _run(opt, cg, feeds)
    finally:
        _tune(key, old)


@pytest.mark.parametrize("xs,layers,residual", [
    ((1, 96, 7, 7), [_conv(64, 3, 1, 1), _conv(64, 3, 1, 1)], True),
    ((3, 48, 9, 6), [_conv(32, (1, 5), 1, (0, 2)), _conv(48, (5, 1), 2, (2, 0))], False),
])
@pytest.mark.parametrize("chunk", [1, 40000, -1])
def test_general_convolution_in_weight_chunks_equals_the_reference(xs, layers, residual, chunk, kernel_path):
    """The general blocked kernel summing input channel blocks in chunks of the panel's weights
    (the `blocked_chunk` override: 1 byte -> one channel block per chunk, -1 -> none): the
    residual added once, the activation (relu6 here) applied on the last chunk only."""
    rng = np.random.default_rng(xs[1])
    b = GraphBuilder(name="chunks")
    x = b.add_input("x", TensorType(xs, "float32"))
    consts, y, c = {}, x, xs[1]
    for i, attrs in enumerate(layers):
        ws = (attrs["num_filter"], c) + attrs["kernel"]
        w = b.add_input(f"w{i}", TensorType(ws, "float32"))
        consts[f"w{i}"] = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
        y = b.add_node("Convolution", [y, w], dict(attrs, no_bias=True))[0]
        if residual and i == len(layers) - 1:
            r = b.add_input("r", TensorType(tuple(y.type.shape) if y.type.shape else None, "float32"))
            y = b.add_node("elemwise_add", [y, r])[0]
        y = b.add_node("clip", [y], {"a_min": 0.0, "a_max": 6.0})[0]
        c = attrs["num_filter"]
    g = b.build([y])
    opt, cg = _compiled(g, consts, True, cost_rule=False)
    convs = [n for n in opt.nodes if n.op.name == "_conv_blocked"]
    assert len(convs) == len(layers) and convs[-1].attrs["residual"] == residual
    feeds = dict(consts, x=rng.standard_normal(xs).astype(np.float32) * 4)
    if residual:
        feeds["r"] = rng.standard_normal(g.outputs[0].type.shape).astype(np.float32) * 3
    got = _run_tuned(opt, cg, feeds, kernel_path, "blocked_chunk", chunk)
    ref = run(g, feeds).outputs[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * max(float(np.abs(ref).max()), 1.0))
    assert (ref == 6.0).any() and (ref == 0.0).any()


def _check_relu_chain_tuned(xs, layers, kernel_path, key, value, seed, shift=0.0):
    """A chain of convolution + relu `layers` on input shape `xs` (He-scaled random weights
    bound as constants; input standard normal plus `shift`), every convolution blocked: its
    output on `kernel_path` under the tuning override `key` = `value` equals the interpreter's."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder(name="tuned_chain")
    x = b.add_input("x", TensorType(xs, "float32"))
    consts, y, c = {}, x, xs[1]
    for i, attrs in enumerate(layers):
        ws = (attrs["num_filter"], c) + attrs["kernel"]
        w = b.add_input(f"w{i}", TensorType(ws, "float32"))
        consts[f"w{i}"] = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
        y = b.add_node("relu", [b.add_node("Convolution", [y, w], dict(attrs, no_bias=True))[0]])[0]
        c = attrs["num_filter"]
    g = b.build([y])
    opt, cg = _compiled(g, consts, True, cost_rule=False)
    assert sum(n.op.name == "_conv_blocked" for n in opt.nodes) == len(layers)
    feeds = dict(consts, x=rng.standard_normal(xs).astype(np.float32) + shift)
    got = _run_tuned(opt, cg, feeds, kernel_path, key, value)
    ref = run(g, feeds).outputs[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * max(float(np.abs(ref).max()), 1.0))


@pytest.mark.parametrize("xs,layers", [
    ((2, 32, 17, 17), [_conv(32, (1, 7), 1, (0, 3)), _conv(48, (7, 1), 1, (3, 0))]),   # tiles cross rows
    ((1, 48, 11, 9), [_conv(64, 5, 1, 2), _conv(32, 3, 2, 1)]),                       # 5x5; stride 2
    ((1, 16, 4, 3), [_conv(64, 3, 1, 2), _conv(16, (3, 1), 1, (1, 0))]),             # every pixel an edge
    ((2, 64, 8, 8), [_conv(384, 3, 1, 1)]),                                            # many filters on a small plane
])
@pytest.mark.parametrize("pad_copy", [0, 1])
def test_padded_general_convolution_edge_tiles_equal_the_reference(xs, layers, pad_copy, kernel_path):
    """Padded general blocked convolutions without a padded copy of the input (AVX-512: interior
    tiles read the input directly, edge tiles read zeros for taps outside it) and with one
    (the `blocked_pad_copy` override, and the portable path): padding wider than the kernel
    reach, tiles that cross rows, strides, planes where no pixel is interior."""
    _check_relu_chain_tuned(xs, layers, kernel_path, "blocked_pad_copy", pad_copy, seed=xs[1] + pad_copy, shift=0.5)


@pytest.mark.parametrize("xs,layers", [
    ((1, 192, 17, 17), [_conv(192, (1, 7), 1, (0, 3)), _conv(192, (7, 1), 1, (3, 0))]),   # 3 panels of 64
    ((2, 192, 7, 7), [_pw(192), _pw(176)]),   # F > P, weights in L2: per-image tasks (2: image groups)
    ((2, 1024, 7, 7), [_pw(384)]),            # F > P, 1.5 MB of weights: panel groups x image groups
])
@pytest.mark.parametrize("split", [0, 1, 2])
def test_task_splits_equal_the_reference(xs, layers, split, kernel_path):
    """The blocked kernels' task splits (split_panels: equal panel groups in whole rounds; under
    the `blocked_split` override 1 the earlier split, 2 panel groups x image groups wherever the
    filters outnumber a plane's pixels, whatever the weights' size) cover every output once."""
    _check_relu_chain_tuned(xs, layers, kernel_path, "blocked_split", split, seed=xs[1] + split)


# ------------------------------------------------------------------------------ elementwise nodes

def _dense_block(xs, layers=2, growth=16, pixel_const=False, seed=0):
    """A DenseNet-style block on x: `layers` times BatchNorm -> relu -> 1x1 convolution (32
    filters) -> BatchNorm -> relu -> 3x3 convolution (`growth` filters), each layer's output
    concatenated to its input; then BatchNorm -> relu (pre-activation: the BatchNorms stay
    per-channel scale-and-shift nodes between the convolutions). `pixel_const`: the block's
    input is first multiplied by a constant per-pixel map (1, 1, H, W) and a scalar is added."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder(name="dense")
    x = b.add_input("x", TensorType(xs, "float32"))
    consts, k = {}, 0

    def const(shape, scale=1.0, offset=0.0):
        nonlocal k
        name = f"c{k}"
        k += 1
        consts[name] = (offset + scale * rng.standard_normal(shape)).astype(np.float32)
        return b.add_input(name, TensorType(shape, "float32"))

    def bn_relu(y, c):
        gamma, beta, mean = const((c,), 0.2, 1.0), const((c,), 0.3), const((c,), 0.2)
        var = const((c,), 0.1, 1.0)
        consts[f"c{k - 1}"] = np.abs(consts[f"c{k - 1}"]) + 0.5
        y = b.add_node("BatchNorm", [y, gamma, beta, mean, var], {"fix_gamma": False, "eps": 1e-5})[0]
        return b.add_node("relu", [y])[0]

    def conv(y, c, attrs):
        ws = (attrs["num_filter"], c) + attrs["kernel"]
        w = const(ws, 1.0 / np.sqrt(np.prod(ws[1:])))
        return b.add_node("Convolution", [y, w], dict(attrs, no_bias=True))[0]

    c = xs[1]
    if pixel_const:
        x = b.add_node("broadcast_mul", [x, const((1, 1) + xs[2:], 0.5, 1.0)])[0]
        x = b.add_node("broadcast_add", [x, const((1,), 1.0)])[0]
    y = x
    for _ in range(layers):
        h = conv(bn_relu(y, c), c, _pw(32))
        h = conv(bn_relu(h, 32), 32, _conv(growth, 3, 1, 1))
        y = b.add_node("Concat", [y, h], {"dim": 1, "num_args": 2})[0]
        c += growth
    return b.build([bn_relu(y, c)]), consts


def test_dense_block_scale_shift_relu_stays_in_the_blocked_layout():
    """The pre-activation BatchNorm + relu nodes join the chain with per-channel constants
    rearranged: one conversion in, one out, whatever the number of layers."""
    g, consts = _dense_block((1, 32, 9, 9), layers=3)
    opt, _ = _optimize(g, consts)
    ops = _ops(opt)
    assert ops.count("_to_blocked") == 1 and ops.count("_from_blocked") == 1, ops
    assert ops.count("_conv_blocked") == 6
    ew = [n for n in opt.nodes if n.op.name == "_fused_elemwise"]
    # the BatchNorms after the 1x1 convolutions fold into them; those on the concatenations stay
    assert len(ew) == 4 and all(len(n.outputs[0].type.shape) == 5 for n in ew)


@pytest.mark.parametrize("xs,layers,pixel_const", [((1, 32, 9, 9), 2, False), ((2, 16, 7, 11), 3, True),
                                                   ((8, 48, 5, 5), 1, True), ((1, 16, 1, 1), 2, False)])
def test_dense_blocks_blocked_equal_nchw_and_interpreter(xs, layers, pixel_const, kernel_path):
    g, consts = _dense_block(xs, layers, pixel_const=pixel_const, seed=xs[2])
    feeds = {"x": np.random.default_rng(xs[3]).standard_normal(xs).astype(np.float32)}
    blocked_opt, blocked = _compiled(g, consts, True, cost_rule=False)
    assert any(n.op.name == "_fused_elemwise" and len(n.outputs[0].type.shape) == 5 for n in blocked_opt.nodes)
    nchw_opt, nchw = _compiled(g, consts, False)
    _switch_to(kernel_path)
    feeds.update(consts)
    _assert_match_reference(g, feeds, [(blocked_opt, blocked), (nchw_opt, nchw)], [blocked_opt])


def test_elementwise_with_a_broadcast_input_that_is_not_constant_stays_in_nchw():
    from symjit.passes.blocked_layout import layout_candidate
    b = GraphBuilder(name="ew")
    x = b.add_input("x", TensorType((1, 32, 4, 4), "float32"))
    s = b.add_input("s", TensorType((1, 32, 1, 1), "float32"))
    y = b.add_node("broadcast_mul", [x, s])[0]
    z = b.add_node("relu", [x])[0]
    g = b.build([y, z])
    assert [layout_candidate(n, {}) is not None for n in g.nodes] == [False, True]


@pytest.mark.parametrize("shape", [(1, 32, 1, 1), (32, 1, 1), (1, 1, 5, 6), (2, 48, 5, 1), (1,), ()])
def test_blocked_constants_broadcast_like_the_nchw_ones(shape):
    """x * c in NCHW, converted to NCHW16c, equals blocked(x) * blocked_constant(c)."""
    from symjit.passes.blocked_layout import blocked_constant
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 48 if 48 in shape else 32, 5, 6) if shape != (2, 48, 5, 1) else (2, 48, 5, 1))
    c = rng.standard_normal(shape)
    np.testing.assert_array_equal(to_blocked(x * c), to_blocked(x) * blocked_constant(c))


#: elementwise steps a random chain draws from: (op, constant shape kind or None, attrs)
EW_STEPS = [("broadcast_mul", "channel", {}), ("broadcast_add", "channel", {}), ("broadcast_add", "pixel", {}),
            ("broadcast_mul", "scalar", {}), ("relu", None, {}), ("tanh", None, {}), ("sigmoid", None, {}),
            ("clip", None, {"a_min": -0.5, "a_max": 0.75}), ("broadcast_maximum", "channel", {})]


def _elementwise_node(nd) -> bool:
    from symjit.ops.registry import Elementwise
    return nd.op.name == "_fused_elemwise" or isinstance(nd.op, Elementwise)


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_random_elementwise_chains_between_convolutions_equal_the_interpreter(data):
    """Random elementwise chains (per-channel, per-pixel and scalar constants, activations)
    between blocked convolutions, also read by a second branch: the compiled blocked graph, the
    NCHW one and the interpreter on the original graph agree (convolution tolerance)."""
    n = data.draw(st.sampled_from([1, 2]))
    c = 16 * data.draw(st.integers(1, 3))
    h, w = data.draw(st.integers(1, 7)), data.draw(st.integers(1, 7))
    steps = data.draw(st.lists(st.sampled_from(EW_STEPS), min_size=1, max_size=4))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    b = GraphBuilder(name="ew_chain")
    x = b.add_input("x", TensorType((n, c, h, w), "float32"))
    consts = {}

    def const(shape, scale=1.0):
        name = f"k{len(consts)}"
        consts[name] = (scale * rng.standard_normal(shape)).astype(np.float32)
        return b.add_input(name, TensorType(shape, "float32"))

    def conv(y, cin, f, k):
        return b.add_node("Convolution", [y, const((f, cin, k, k), 1 / np.sqrt(cin * k * k)), const((f,))],
                          {"num_filter": f, "kernel": (k, k), "pad": (k // 2, k // 2)})[0]

    # after a concatenation (as DenseNet's BatchNorms), not a convolution, whose epilogue would
    # take the chain in
    y = b.add_node("Concat", [conv(x, c, 16, 1), conv(x, c, c - 16, 3) if c > 16 else x],
                   {"dim": 1, "num_args": 2})[0]
    cy = 16 + (c - 16 if c > 16 else c)
    for op, kind, attrs in steps:
        if kind is None:
            y = b.add_node(op, [y], attrs)[0]
        else:
            shape = {"channel": (1, cy, 1, 1), "pixel": (1, 1, h, w), "scalar": (1,)}[kind]
            y = b.add_node(op, [y, const(shape)], attrs)[0]
    out = conv(y, cy, 16, 3)
    side = conv(y, cy, 16, 1)
    g = b.build([out, side])
    feeds = {"x": rng.standard_normal((n, c, h, w)).astype(np.float32), **consts}
    blocked_opt, blocked = _compiled(g, consts, True, cost_rule=False)
    nchw_opt, nchw = _compiled(g, consts, False)
    # every elementwise node left between the convolutions runs blocked
    assert not any(_elementwise_node(nd) and len(nd.outputs[0].type.shape) == 4 for nd in blocked_opt.nodes)
    refs = run(g, feeds).outputs
    arrays = lambda cg: [np.ascontiguousarray(feeds[name]) for name, _, _ in cg.input_specs]
    for cg in (blocked, nchw):
        for got, ref in zip(cg(arrays(cg)), refs):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * max(float(np.abs(ref).max()), 1.0))
