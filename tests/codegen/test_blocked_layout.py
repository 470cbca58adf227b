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

from symjit.base import MXNetError
from symjit.codegen.llvm.executable import compile_planned
from symjit.ir import GraphBuilder, TensorType, run
from symjit.ops.blocked import from_blocked, to_blocked
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


def _optimize(g, consts, enabled=True):
    pipeline = [(name, (lambda gg: blocked_layout(gg, enabled=enabled)) if name == "blocked_layout" else fn)
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
    ("pointwise with stride 2", (1, 32, 8, 8), [dict(_pw(32), stride=(2, 2)), _dw(32)]),
    ("3x3 with one group", (1, 32, 8, 8), [_pw(32), {"num_filter": 32, "kernel": (3, 3), "pad": (1, 1)}]),
])
def test_what_stays_in_nchw(why, xs, layers):
    g, consts = _chain(xs, layers)
    opt, _ = _optimize(g, consts)
    assert "_conv_blocked" not in _ops(opt), why


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
    assert entry.attrs["data_blocked"] is False and entry.attrs["relu"] is True
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


def _compiled(g, consts, enabled):
    opt, _ = _optimize(g, consts, enabled)
    cg = compile_planned(opt, g.name)
    assert cg.native, [n.op.name for n in cg.module.python_nodes]
    return opt, cg


def _run(opt, cg, feeds):
    return cg([np.ascontiguousarray(feeds[name]) for name, _, _ in cg.input_specs])[0]


@pytest.mark.parametrize("case", CASES)
def test_blocked_equals_nchw_and_interpreter(case, kernel_path):
    xs, layers, relu, bias = case
    g, consts = _chain(xs, layers, relu=relu, bias=bias, seed=len(layers))
    rng = np.random.default_rng(xs[1] + xs[2])
    feeds = {"x": rng.standard_normal(xs).astype(np.float32)}
    blocked_opt, blocked = _compiled(g, consts, True)
    assert "_conv_blocked" in _ops(blocked_opt)
    assert ("_to_blocked" in _ops(blocked_opt)) == (xs[1] % 16 == 0)   # entry convolutions store blocked
    nchw_opt, nchw = _compiled(g, consts, False)
    assert "_conv_blocked" not in _ops(nchw_opt)
    if kernel_path == "portable":
        from symjit.codegen.llvm.lower_gemm import set_native_kernels
        set_native_kernels(0)
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
    if kernel_path == "portable":
        from symjit.codegen.llvm.lower_gemm import set_native_kernels
        set_native_kernels(0)
    got = _run(opt, cg, dict(feeds, **consts))
    ref = run(g, dict(feeds, **consts)).outputs[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    assert np.isnan(got).any()
