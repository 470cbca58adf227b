"""Native lowerings of the compute-bound ops (lower_gemm, lower_conv, lower_pool, lower_gather)
against the interpreter, through the whole pipeline (compile_graph + compile_planned).

Every case asserts that the graph compiled to one native call (`CompiledGraph.native`), so
a lowering that silently fell back to the numpy reference fails here.

Tolerance: float32 products and convolutions sum in a different order than numpy's matmul,
so results agree within rtol 1e-4 and atol 1e-5 times the output's scale (max |value|);
pooling, gathers and copies are exact.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from symjit.codegen.llvm.executable import compile_planned
from symjit.codegen.llvm.lower_gemm import TUNE_CONV_VALUES, TUNE_KEYS
from symjit.ir import GraphBuilder, TensorType, run
from symjit.passes.manager import compile_graph

from lowering_util import host_has_avx512, over_task_splits, under_tune
from shared_data import model_path


def _graph(op, inputs, attrs, post=(), n_out=1, dtypes=None):
    """op(inputs) followed by elementwise ops `post` (each a unary op name) -> graph."""
    b = GraphBuilder(name=f"t_{op}")
    dtypes = dtypes or {}
    vals = [b.add_input(n, TensorType(tuple(s), dtypes.get(n, "float32"))) for n, s in inputs]
    outs = b.add_node(op, vals, attrs)[:n_out]
    for p in post:
        outs = [b.add_node(p, [outs[0]], {})[0]]
    return b.build(outs)


def _feeds(g, rng, ints=None):
    ints = ints or {}
    out = {}
    for v in g.inputs:
        if v.name in ints:
            out[v.name] = ints[v.name](rng, v.type.shape).astype(v.type.dtype)
        else:
            out[v.name] = rng.standard_normal(v.type.shape).astype(v.type.dtype)
    return out


def _check(g, seed=0, exact=False, ints=None, pipeline="inference", expect_ops=None):
    rng = np.random.default_rng(seed)
    feeds = _feeds(g, rng, ints)
    opt, _ = compile_graph(g, pipeline)
    cg = compile_planned(opt, g.name)
    assert cg.native, [n.op.name for n in cg.module.python_nodes]
    if expect_ops is not None:
        assert expect_ops <= {n.op.name for n in opt.nodes}, [n.op.name for n in opt.nodes]
    got = cg([np.ascontiguousarray(feeds[v.name]) for v in opt.inputs])
    want = run(g, feeds).outputs
    for a, w in zip(got, want):
        assert a.shape == w.shape and a.dtype == w.dtype
        if exact:
            np.testing.assert_array_equal(a, w)
        else:
            scale = max(float(np.nanmax(np.abs(w))) if w.size else 0.0, 1.0)
            np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-5 * scale)
    return cg


# ------------------------------------------------------------------------------ GEMM family

@pytest.mark.parametrize("xs,h,flatten,no_bias", [
    ((1, 16), 16, True, False), ((3, 7), 5, True, True), ((2, 3, 7), 5, False, False),
    ((5, 3, 4, 2), 11, True, False), ((64, 784), 512, True, False), ((1, 1), 1, True, False),
])
def test_fully_connected(xs, h, flatten, no_bias):
    units = int(np.prod(xs[1:])) if flatten else xs[-1]
    ins = [("x", xs), ("w", (h, units))] + ([] if no_bias else [("b", (h,))])
    _check(_graph("FullyConnected", ins, {"num_hidden": h, "flatten": flatten, "no_bias": no_bias}))


@pytest.mark.parametrize("post", [("relu",), ("sigmoid", "negative")])
def test_fully_connected_epilogue(post):
    g = _graph("FullyConnected", [("x", (9, 33)), ("w", (17, 33)), ("b", (17,))], {"num_hidden": 17}, post)
    _check(g, expect_ops={"_with_epilogue"})


@pytest.mark.parametrize("act", ["relu", "sigmoid", "tanh"])
def test_dense_backward_hosts_the_activation_gradient_as_epilogue(act):
    """In a training graph's backward, dX of a dense layer times the previous activation's
    derivative (computed from that activation's output) is one GEMM with an epilogue."""
    from symjit.passes.autodiff import autodiff
    from symjit.passes.infer import infer_types
    b = GraphBuilder(name=f"mlp_{act}")
    x, w1, b1, w2, b2 = (b.add_input(n, TensorType(s, "float32")) for n, s in
                         [("x", (8, 12)), ("w1", (16, 12)), ("b1", (16,)), ("w2", (5, 16)), ("b2", (5,))])
    h = b.add_node(act, [b.add_node("FullyConnected", [x, w1, b1], {"num_hidden": 16})[0]])[0]
    y = b.add_node("FullyConnected", [h, w2, b2], {"num_hidden": 5})[0]
    fwd, _ = infer_types(b.build([y]))
    bwd, _ = autodiff(fwd, list(fwd.inputs), "write")
    opt, _ = compile_graph(bwd, "training")
    hosted = [n.attrs["inner"] for n in opt.nodes if n.op.name == "_with_epilogue"]
    assert "_backward_FullyConnected_data" in hosted, [n.op.name for n in opt.nodes]
    _check(bwd, pipeline="training", seed=3)


def test_tiny_mlp_is_one_native_call():
    b = GraphBuilder(name="tiny")
    x, w1, b1, w2, b2 = (b.add_input(n, TensorType(s, "float32")) for n, s in
                         [("x", (1, 16)), ("w1", (16, 16)), ("b1", (16,)), ("w2", (16, 16)), ("b2", (16,))])
    h = b.add_node("relu", [b.add_node("FullyConnected", [x, w1, b1], {"num_hidden": 16})[0]])[0]
    y = b.add_node("FullyConnected", [h, w2, b2], {"num_hidden": 16})[0]
    _check(b.build([y]), expect_ops={"_with_epilogue", "FullyConnected"})


@pytest.mark.parametrize("ls,rs,ta,tb", [
    ((4, 6), (6, 5), False, False), ((6, 4), (6, 5), True, False), ((4, 6), (5, 6), False, True),
    ((6, 4), (5, 6), True, True), ((2, 3, 6), (6, 5), False, False), ((7,), (7,), False, False),
    ((6, 2, 3), (4, 6), True, True), ((130, 70), (70, 90), False, False),
])
def test_dot(ls, rs, ta, tb):
    _check(_graph("dot", [("a", ls), ("b", rs)], {"transpose_a": ta, "transpose_b": tb}))


@pytest.mark.parametrize("ls,rs,ta,tb", [
    ((4, 3, 6), (6, 5), False, False), ((6, 4), (5, 6), True, True), ((6, 2, 3), (6, 5), True, False),
    ((3, 4), (5, 2, 4), False, True),
])
def test_backward_dot(ls, rs, ta, tb):
    from symjit.ops.linalg import dot_shapes
    *_, out = dot_shapes(ls, rs, ta, tb)
    _check(_graph("_backward_dot", [("z", out), ("a", ls), ("b", rs)], {"transpose_a": ta, "transpose_b": tb},
                  n_out=2))


@pytest.mark.parametrize("ls,rs,ta,tb", [
    ((3, 4, 6), (3, 6, 5), False, False), ((3, 6, 4), (3, 6, 5), True, False),
    ((2, 3, 4, 6), (2, 3, 5, 6), False, True), ((1, 6, 4), (1, 5, 6), True, True),
])
def test_batch_dot(ls, rs, ta, tb):
    _check(_graph("batch_dot", [("a", ls), ("b", rs)], {"transpose_a": ta, "transpose_b": tb}))


@pytest.mark.parametrize("flatten", [True, False])
def test_fully_connected_backward(flatten):
    xs = (4, 3, 5)
    units = 15 if flatten else 5
    h = 7
    dys = (4, h) if flatten else (4, 3, h)
    attrs = {"num_hidden": h, "flatten": flatten}
    _check(_graph("_backward_FullyConnected_data", [("dy", dys), ("w", (h, units)), ("x", xs)], attrs))
    _check(_graph("_backward_FullyConnected_weight", [("dy", dys), ("x", xs)], attrs))


@pytest.mark.parametrize("shape,axis", [((4, 7), -1), ((2, 5, 3, 3), 1), ((3, 6), 0)])
def test_backward_bias(shape, axis):
    ch = shape[axis]
    _check(_graph("_backward_bias", [("dy", shape), ("b", (ch,))], {"axis": axis}))


# ------------------------------------------------------------------------------ convolution

CONV_CASES = [
    # (data shape, num_filter, kernel, stride, pad, dilate, groups)
    ((2, 3, 9, 9), 8, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((1, 5, 11, 7), 7, (3, 2), (2, 1), (1, 0), (1, 1), 1),
    ((2, 4, 10, 10), 6, (3, 3), (1, 1), (2, 2), (2, 2), 2),
    ((1, 7, 8, 8), 7, (3, 3), (2, 2), (1, 1), (1, 1), 7),       # depthwise, prime channels
    ((2, 6, 9, 9), 12, (3, 3), (1, 1), (1, 1), (1, 1), 6),      # depthwise, multiplier 2
    ((1, 8, 13, 13), 5, (1, 1), (1, 1), (0, 0), (1, 1), 1),     # pointwise
    ((2, 6, 7, 7), 9, (1, 1), (2, 2), (0, 0), (1, 1), 3),       # strided 1x1, groups
    ((1, 3, 17), 4, (5,), (2,), (2,), (1,), 1),                  # 1-D
    ((2, 4, 20), 4, (3,), (1,), (3,), (2,), 4),                  # 1-D depthwise dilated
    ((1, 2, 5, 6, 6), 3, (3, 3, 3), (1, 2, 1), (1, 1, 0), (1, 1, 1), 1),   # 3-D
    ((1, 64, 20, 20), 64, (3, 3), (1, 1), (1, 1), (1, 1), 1),   # large enough to split into blocks
    ((3, 3, 23, 23), 16, (7, 7), (2, 2), (3, 3), (1, 1), 1),
]


def _conv_attrs(f, k, s, p, d, g, no_bias):
    return {"num_filter": f, "kernel": k, "stride": s, "pad": p, "dilate": d, "num_group": g, "no_bias": no_bias}


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("no_bias", [False, True])
def test_convolution(case, no_bias):
    xs, f, k, s, p, d, g = case
    ins = [("x", xs), ("w", (f, xs[1] // g) + k)] + ([] if no_bias else [("b", (f,))])
    _check(_graph("Convolution", ins, _conv_attrs(f, k, s, p, d, g, no_bias)))


#: depthwise convolutions on small planes (output rows <= 32 -- for 3x3 stride 1 / 2 layers
#: without dilation, rows below 16 / 14 -- vectorized along 16 channels, nnkernels.c
#: dw_block_chanvec; the others take the row kernels): partial channel blocks, several images,
#: strides, dilation, padding 0..2, 5x5 kernels, rows on either side of the switches
DW_SMALL_CASES = [
    ((2, 20, 14, 14), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((1, 37, 7, 7), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((3, 16, 15, 11), (3, 3), (2, 2), (1, 1), (1, 1)),
    ((1, 18, 12, 13), (3, 3), (1, 2), (2, 2), (2, 2)),
    ((2, 5, 9, 9), (5, 5), (1, 1), (2, 2), (1, 1)),
    ((1, 17, 6, 32), (3, 3), (1, 1), (0, 0), (1, 1)),
    ((1, 17, 6, 34), (3, 3), (1, 1), (0, 0), (1, 1)),
    ((1, 33, 10, 32), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((1, 19, 9, 15), (3, 3), (1, 1), (1, 1), (1, 1)),       # 15 wide: channel vectors
    ((1, 19, 9, 16), (3, 3), (1, 1), (1, 1), (1, 1)),       # 16 wide: row kernel
    ((1, 21, 9, 26), (3, 3), (2, 2), (1, 1), (1, 1)),       # 13 wide at stride 2: channel vectors
    ((1, 21, 9, 28), (3, 3), (2, 2), (1, 1), (1, 1)),       # 14 wide at stride 2: row kernel
    ((1, 18, 12, 30), (3, 3), (1, 1), (1, 1), (2, 2)),      # dilated: channel vectors up to 32
    # equal strides run as wide rows (16 positions of a padded row-major plane per block, the
    # columns past the row dropped): blocks spanning rows, 1- and 3-wide rows, stride 3
    ((1, 24, 14, 14), (3, 3), (2, 2), (1, 1), (1, 1)),
    ((2, 19, 7, 7), (3, 3), (2, 2), (0, 0), (1, 1)),
    ((1, 16, 5, 9), (3, 5), (3, 3), (1, 2), (1, 1)),
    ((1, 9, 3, 3), (3, 3), (1, 1), (0, 0), (1, 1)),
]


@pytest.mark.parametrize("case", DW_SMALL_CASES)
@pytest.mark.parametrize("post", [(), ("relu",)])
def test_depthwise_small_planes(case, post):
    xs, k, s, p, d = case
    c = xs[1]
    ins = [("x", xs), ("w", (c, 1) + k), ("b", (c,))]
    _check(_graph("Convolution", ins, _conv_attrs(c, k, s, p, d, c, False), post=post))


#: 3x3 stride-1 depthwise on wide planes (output rows of 16 and more: nnkernels.c dw3x3_s1_plane,
#: six output rows per group, three masked column loads per input row; and the permute-based row
#: kernel it replaced, dw3x3_rows_core, still selectable): row widths around and between vector
#: multiples, fewer than six or not a multiple of six rows, padding 0..2 across the columns, row
#: padding beyond the kernel, several images and a channel multiplier
DW_ROWS_CASES = [
    ((1, 3, 9, 33), (1, 1), 1),
    ((2, 4, 17, 48), (1, 1), 1),
    ((1, 2, 5, 40), (0, 0), 1),
    ((1, 2, 20, 47), (2, 2), 1),
    ((1, 3, 11, 64), (3, 1), 1),
    ((1, 2, 8, 100), (1, 0), 2),
    ((1, 1, 3, 35), (0, 2), 1),
]


#: the same at stride 2 (dw3x3s2_plane_rows_avx512: seventeen input rows per eight output rows,
#: even/odd column split): output rows of 33 and more, odd input widths, padding 0..2
DW_ROWS_S2_CASES = [
    ((1, 3, 9, 66), (1, 1)),
    ((2, 2, 17, 97), (1, 1)),
    ((1, 2, 20, 70), (0, 0)),
    ((1, 3, 12, 67), (2, 2)),
    ((1, 2, 5, 130), (3, 1)),
    ((1, 2, 19, 68), (0, 2)),
]


#: nnkernels.c symjit_nn_tune: the key of the kernel-choice overrides and the values used here
TUNE_CONV, TUNE_WBLOCK = TUNE_KEYS["conv"], TUNE_KEYS["wblock"]
DW_PERMUTE_ROWS = TUNE_CONV_VALUES["dw_permute_rows"]
#: a fused-Winograd V + M budget (floats) small enough to choose other blocks than the default
WNAT_SMALL_BUDGET = 16384


def _kernel_tune():
    """nnkernels.c symjit_nn_tune(key, value) -> previous value (0 restores the built-in choice)."""
    from symjit.codegen.llvm.lower_gemm import kernel_library
    tune = kernel_library().symjit_nn_tune
    tune.restype = ctypes.c_int64
    tune.argtypes = [ctypes.c_int64, ctypes.c_int64]
    return tune


@pytest.fixture(params=["grouped", "permute"])
def dw_s1_kernel(request):
    """The stride-1 3x3 depthwise kernel: dw3x3_s1_plane (default) or dw3x3_rows_core."""
    tune = _kernel_tune()
    tune(TUNE_CONV, DW_PERMUTE_ROWS if request.param == "permute" else 0)
    yield request.param
    tune(TUNE_CONV, 0)


@pytest.mark.parametrize("case", DW_ROWS_CASES + [((1, 5, 6, 16), (1, 1), 1), ((1, 4, 13, 28), (1, 1), 1),
                                                  ((2, 3, 112, 112), (1, 1), 1)])
@pytest.mark.parametrize("post", [(), ("relu",)])
def test_depthwise_3x3_wide_rows(case, post, dw_s1_kernel):
    xs, p, mult = case
    c = xs[1]
    ins = [("x", xs), ("w", (c * mult, 1, 3, 3)), ("b", (c * mult,))]
    _check(_graph("Convolution", ins, _conv_attrs(c * mult, (3, 3), (1, 1), p, (1, 1), c, False), post=post))


@pytest.mark.parametrize("case", DW_ROWS_S2_CASES)
@pytest.mark.parametrize("post", [(), ("relu",)])
def test_depthwise_3x3_stride2_wide_rows(case, post):
    xs, p = case
    c = xs[1]
    ins = [("x", xs), ("w", (c, 1, 3, 3)), ("b", (c,))]
    _check(_graph("Convolution", ins, _conv_attrs(c, (3, 3), (2, 2), p, (1, 1), c, False), post=post))


@pytest.mark.parametrize("case", CONV_CASES[:6])
def test_convolution_epilogue(case):
    xs, f, k, s, p, d, g = case
    ins = [("x", xs), ("w", (f, xs[1] // g) + k), ("b", (f,))]
    _check(_graph("Convolution", ins, _conv_attrs(f, k, s, p, d, g, False), post=("relu",)),
           expect_ops={"_with_epilogue"})


def test_convolution_epilogue_with_two_outputs_and_extra_input():
    """A fused group after the convolution that reads another input and returns two values:
    output 0 (which holds the convolution result) must be written last."""
    b = GraphBuilder(name="two_out")
    x = b.add_input("x", TensorType((2, 3, 8, 8), "float32"))
    w = b.add_input("w", TensorType((4, 3, 3, 3), "float32"))
    r = b.add_input("r", TensorType((2, 4, 8, 8), "float32"))
    y = b.add_node("Convolution", [x, w], _conv_attrs(4, (3, 3), (1, 1), (1, 1), (1, 1), 1, True))[0]
    a = b.add_node("relu", [b.add_node("elemwise_add", [y, r])[0]])[0]
    c = b.add_node("sigmoid", [a])[0]
    _check(b.build([a, c]), expect_ops={"_with_epilogue"})


DECONV_CASES = [
    # (data shape, num_filter, kernel, stride, pad, adj, groups, target_shape)
    ((2, 4, 5, 5), 3, (3, 3), (2, 2), (1, 1), (0, 0), 1, ()),
    ((1, 6, 4, 7), 4, (4, 3), (2, 3), (1, 0), (1, 2), 2, ()),
    ((1, 3, 6, 6), 3, (3, 3), (2, 2), (0, 0), (0, 0), 3, (12, 12)),
    ((2, 5, 9), 2, (3,), (1,), (1,), (0,), 1, ()),
    ((1, 8, 3, 3), 16, (1, 1), (1, 1), (0, 0), (0, 0), 1, ()),
]


@pytest.mark.parametrize("case", DECONV_CASES)
@pytest.mark.parametrize("no_bias", [True, False])
def test_deconvolution(case, no_bias):
    xs, f, k, s, p, a, g, target = case
    attrs = {"num_filter": f, "kernel": k, "stride": s, "pad": p, "adj": a, "num_group": g, "no_bias": no_bias,
             "target_shape": target}
    ins = [("x", xs), ("w", (xs[1], f // g) + k)] + ([] if no_bias else [("b", (f,))])
    _check(_graph("Deconvolution", ins, attrs))
    if not no_bias:
        _check(_graph("Deconvolution", ins, attrs, post=("tanh",)), expect_ops={"_with_epilogue"})


def _conv_out(xs, k, s, p, d):
    return tuple((i + 2 * pp - (kk - 1) * dd - 1) // ss + 1 for i, kk, ss, pp, dd in zip(xs[2:], k, s, p, d))


@pytest.mark.parametrize("case", CONV_CASES)
def test_convolution_backward(case):
    xs, f, k, s, p, d, g = case
    geo = {"kernel": k, "stride": s, "pad": p, "dilate": d, "num_group": g}
    dys = (xs[0], f) + _conv_out(xs, k, s, p, d)
    ws = (f, xs[1] // g) + k
    _check(_graph("_backward_Convolution_data", [("dy", dys), ("w", ws), ("x", xs)], geo))
    _check(_graph("_backward_Convolution_weight", [("dy", dys), ("x", xs)], geo))
    # the adjoint pair of backward-data: a plain convolution of dx-shaped input into dy's shape
    _check(_graph("_backward_Deconvolution_data", [("a", xs), ("w", ws), ("y", dys)], geo))


# ------------------------------------------------------------------------------ pooling

POOL_CASES = [
    ((2, 3, 9, 9), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}),
    ((1, 4, 10, 7), {"kernel": (2, 3), "stride": (2, 2), "pooling_convention": "full"}),
    ((2, 2, 11, 11), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "count_include_pad": False}),
    ((1, 5, 6, 6), {"kernel": (1, 1), "global_pool": True}),
    ((2, 3, 13), {"kernel": (3,), "stride": (2,), "pooling_convention": "same"}),
    ((1, 2, 4, 6, 5), {"kernel": (2, 3, 2), "stride": (1, 2, 2), "pad": (1, 1, 0)}),
    ((1, 64, 112, 112), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}),
]


@pytest.mark.parametrize("case", POOL_CASES + [
    ((2, 7, 7, 7), {"kernel": (7, 7)}),                                    # global by its kernel
    ((1, 3, 30, 31), {"kernel": (3, 2), "stride": (3, 1), "pad": (1, 1), "pooling_convention": "full"}),
    ((1, 2, 5, 40), {"kernel": (5, 5), "stride": (1, 4), "pad": (2, 2)}),
])
@pytest.mark.parametrize("ptype", ["max", "avg", "sum"])
def test_pooling(case, ptype, kernel_path):
    xs, attrs = case
    _check(_graph("Pooling", [("x", xs)], dict(attrs, pool_type=ptype)))


#: stride-1 2-D windows (the separable avg / sum path): Inception's 3x3 pad-1 pools with and without
#: the padding counted, asymmetric kernels and padding, ceil-mode windows past the input, windows
#: wider than the input, a 1x1 window
SEPARABLE_POOL_CASES = [
    ((2, 6, 35, 35), {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1)}),
    ((2, 6, 17, 17), {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1), "count_include_pad": False}),
    ((1, 3, 9, 20), {"kernel": (1, 7), "stride": (1, 1), "pad": (0, 3)}),
    ((1, 3, 11, 6), {"kernel": (5, 2), "stride": (1, 1), "pad": (2, 1), "count_include_pad": False}),
    ((1, 2, 7, 8), {"kernel": (3, 4), "stride": (1, 1), "pad": (1, 1), "pooling_convention": "full"}),
    ((1, 2, 3, 4), {"kernel": (6, 7), "stride": (1, 1), "pad": (2, 3), "count_include_pad": False}),
    ((1, 2, 5, 5), {"kernel": (1, 1), "stride": (1, 1)}),
]


@pytest.mark.parametrize("case", SEPARABLE_POOL_CASES)
@pytest.mark.parametrize("ptype", ["avg", "sum"])
def test_stride1_sum_pooling(case, ptype, kernel_path):
    """Row sums then column sums (another order than the interpreter's window loop): within
    _check's float tolerance on both kernel paths."""
    xs, attrs = case
    _check(_graph("Pooling", [("x", xs)], dict(attrs, pool_type=ptype)))


@pytest.mark.parametrize("include_pad", [True, False])
def test_stride1_avg_pooling_nan_stays_in_its_windows(include_pad, kernel_path):
    """A NaN reaches exactly the outputs whose windows hold it (the zero padding adds nothing)."""
    g = _graph("Pooling", [("x", (1, 2, 9, 10))], {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1),
                                                   "pool_type": "avg", "count_include_pad": include_pad})
    _check(g, ints={"x": lambda rng, s: np.where(rng.random(s) < 0.05, np.nan, rng.standard_normal(s))})


#: 2-D windows the portable path pools plane by plane (nn/pool.c pool_max2d_pt_task: separable
#: maxima over a -FLT_MAX padded plane; pool_avg2d_pt_task: each tap one strided pass over a
#: zero-padded plane): strides 1-3, padding, ceil-mode windows past the input, windows over
#: padding only, unequal strides (max), planes of one output row or column
PORTABLE_POOL_CASES = [
    ((2, 3, 9, 9), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}),
    ((1, 4, 10, 7), {"kernel": (2, 3), "stride": (2, 2), "pooling_convention": "full"}),
    ((2, 2, 11, 11), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "count_include_pad": False}),
    ((1, 2, 4, 4), {"kernel": (3, 3), "stride": (3, 3), "pad": (2, 2)}),
    ((1, 3, 13, 16), {"kernel": (2, 2), "stride": (2, 2)}),
    ((1, 2, 12, 30), {"kernel": (3, 5), "stride": (3, 3), "pad": (1, 2), "pooling_convention": "full"}),
    ((1, 2, 3, 17), {"kernel": (3, 3), "stride": (2, 2)}),
]


@pytest.mark.skipif(host_has_avx512(), reason="the portable plane pools run on hosts without AVX-512")
@pytest.mark.parametrize("case", PORTABLE_POOL_CASES + [((1, 3, 14, 15), {"kernel": (3, 2), "stride": (2, 1)})])
@pytest.mark.parametrize("ptype", ["max", "avg", "sum"])
def test_portable_plane_pooling_equals_the_general_loops(case, ptype):
    """Max and equal-stride avg / sum pooling on their plane passes give exactly the floats of
    the general window loops (tune pool=1: each window's taps summed in the same order, a
    maximum in any order), NaN inputs skipped by max; and the interpreter's within _check's
    tolerance."""
    xs, attrs = case
    g = _graph("Pooling", [("x", xs)], dict(attrs, pool_type=ptype))
    cg = _check(g)
    x = np.random.default_rng(31).standard_normal(xs).astype(np.float32)
    if ptype == "max":
        x[np.random.default_rng(32).random(xs) < 0.1] = np.nan
    planes = np.array(cg([x])[0])
    np.testing.assert_array_equal(planes, under_tune("pool", 1, lambda: cg([x])[0]))


@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pooling(p):
    _check(_graph("Pooling", [("x", (2, 3, 7, 7))], {"kernel": (3, 3), "stride": (2, 2), "pool_type": "lp",
                                                      "p_value": p}),
           ints={"x": lambda rng, s: rng.uniform(0.1, 2.0, s)})


def test_max_pooling_nan_and_padding_windows():
    """NaN is ignored like numpy's fmax; a window entirely in the padding gives -FLT_MAX."""
    g = _graph("Pooling", [("x", (1, 1, 4, 4))], {"kernel": (3, 3), "stride": (3, 3), "pad": (2, 2),
                                                  "pool_type": "max"})
    _check(g, ints={"x": lambda rng, s: np.where(rng.random(s) < 0.3, np.nan, rng.standard_normal(s))},
           exact=True)


@pytest.mark.parametrize("case", POOL_CASES[:6])
@pytest.mark.parametrize("ptype", ["max", "avg", "sum"])
def test_pooling_backward(case, ptype):
    from symjit.ops.registry import get_op
    xs, attrs = case
    attrs = dict(attrs, pool_type=ptype)
    op = get_op("Pooling")
    _, (ys,) = op.infer_shape(op.parse({k: str(v) for k, v in attrs.items()}), [xs])
    _check(_graph("_backward_Pooling", [("dy", ys), ("x", xs), ("y", ys)], attrs))


POOL_2X2_CASES = [((2, 3, 9, 37), "valid"), ((1, 2, 8, 32), "valid"), ((3, 1, 6, 70), "valid"),
                  ((1, 2, 7, 9), "full")]
POOL_2X2_VALUES = np.array([np.nan, -np.inf, -1.0, 0.0, 0.5, 2.0], np.float32)


@pytest.mark.parametrize("xs,convention", POOL_2X2_CASES)
def test_max_pooling_2x2(xs, convention, kernel_path):
    """2x2 stride-2 max pooling (the tiles' path splits rows into even and odd columns): NaN
    ignored like fmax, -inf, ties; odd sizes leave rows and columns no window covers."""
    attrs = {"kernel": (2, 2), "stride": (2, 2), "pool_type": "max", "pooling_convention": convention}
    _check(_graph("Pooling", [("x", xs)], attrs), exact=True,
           ints={"x": lambda rng, s: rng.choice(POOL_2X2_VALUES, s)})


@pytest.mark.parametrize("xs,convention", POOL_2X2_CASES)
def test_max_pooling_2x2_backward(xs, convention, kernel_path):
    """2x2 stride-2 max pooling backward: ties, NaN and -inf from a small value set, so the first
    strict maximum of each window is checked exactly; rows and columns no window covers get 0."""
    from symjit.ops.registry import get_op
    attrs = {"kernel": (2, 2), "stride": (2, 2), "pool_type": "max", "pooling_convention": convention}
    op = get_op("Pooling")
    _, (ys,) = op.infer_shape(op.parse({k: str(v) for k, v in attrs.items()}), [xs])
    _check(_graph("_backward_Pooling", [("dy", ys), ("x", xs), ("y", ys)], attrs), exact=True,
           ints={"x": lambda rng, s: rng.choice(POOL_2X2_VALUES, s), "dy": lambda rng, s: rng.integers(1, 9, s)})


def test_lp_pooling_backward():
    attrs = {"kernel": (2, 2), "stride": (2, 2), "pool_type": "lp", "p_value": 2}
    b = GraphBuilder(name="lpb")
    x = b.add_input("x", TensorType((1, 2, 6, 6), "float32"))
    dy = b.add_input("dy", TensorType((1, 2, 3, 3), "float32"))
    y = b.add_node("Pooling", [x], attrs)[0]
    dx = b.add_node("_backward_Pooling", [dy, x, y], attrs)[0]
    _check(b.build([dx]), ints={"x": lambda rng, s: rng.uniform(0.1, 2.0, s)})


# ------------------------------------------------------------------------------ embedding

@pytest.mark.parametrize("idx_dtype", ["float32", "int32", "int64", "float64"])
def test_embedding_and_backward(idx_dtype):
    rows, dim = 11, 70
    idx = lambda rng, s: rng.integers(-3, rows + 3, s).astype(np.float64) + rng.random(s) * 0.9  # noqa: E731
    g = _graph("Embedding", [("i", (3, 5)), ("w", (rows, dim))], {"input_dim": rows, "output_dim": dim},
               dtypes={"i": idx_dtype})
    _check(g, ints={"i": idx}, exact=True)
    gb = _graph("_backward_Embedding", [("dy", (3, 5, dim)), ("i", (3, 5))], {"input_dim": rows, "output_dim": dim},
                dtypes={"i": idx_dtype})
    _check(gb, ints={"i": idx})


# ------------------------------------------------------------------------------ training graph

def test_training_graph_of_a_small_cnn_is_native():
    """Forward + backward of conv -> relu -> pool -> dense: every op (backward ones included)
    lowers natively and the gradients equal the interpreter's."""
    from symjit.passes.training_graph import build_training_graph
    b = GraphBuilder(name="cnn")
    x = b.add_input("x", TensorType((2, 3, 8, 8), "float32"))
    w = b.add_input("w", TensorType((4, 3, 3, 3), "float32"))
    cb = b.add_input("cb", TensorType((4,), "float32"))
    fw = b.add_input("fw", TensorType((5, 64), "float32"))
    fb = b.add_input("fb", TensorType((5,), "float32"))
    y = b.add_node("Convolution", [x, w, cb], _conv_attrs(4, (3, 3), (1, 1), (1, 1), (1, 1), 1, False))[0]
    y = b.add_node("relu", [y])[0]
    y = b.add_node("Pooling", [y], {"kernel": (2, 2), "stride": (2, 2), "pool_type": "max"})[0]
    y = b.add_node("FullyConnected", [y, fw, fb], {"num_hidden": 5})[0]
    g = b.build([y])
    joint, _ = build_training_graph(g, ["w", "cb", "fw", "fb"])
    _check(joint, pipeline="training")


def _two_conv_net(dtype):
    """conv(8 -> 16) -> relu -> 2x2 max pool -> conv(16 -> 16) -> dense 3: sized so the tiles'
    weight gradients (16 filters) and the data gradient as a forward convolution (16 channels)
    both run."""
    b = GraphBuilder(name="cnn2")
    t = lambda n, s: b.add_input(n, TensorType(s, dtype))
    x, w1, b1, w2, fw = t("x", (3, 8, 10, 10)), t("w1", (16, 8, 3, 3)), t("b1", (16,)), t("w2", (16, 16, 3, 3)), \
        t("fw", (3, 400))
    y = b.add_node("Convolution", [x, w1, b1], _conv_attrs(16, (3, 3), (1, 1), (1, 1), (1, 1), 1, False))[0]
    y = b.add_node("relu", [y])[0]
    y = b.add_node("Pooling", [y], {"kernel": (2, 2), "stride": (2, 2), "pool_type": "max"})[0]
    y = b.add_node("Convolution", [y, w2], _conv_attrs(16, (3, 3), (1, 1), (1, 1), (1, 1), 1, True))[0]
    y = b.add_node("FullyConnected", [y, fw], {"num_hidden": 3, "no_bias": True})[0]
    return b.build([y])


def test_two_conv_training_gradients_match_reference_and_finite_differences():
    """The compiled training graph's gradients equal the interpreter's (numpy references), and
    its weight gradients match central finite differences of the float64 interpreter's loss
    sum(out * r) (step 1e-4; the relu/pool kinks are not crossed at that step)."""
    from symjit.passes.training_graph import build_training_graph
    params = ["w1", "b1", "w2", "fw", "x"]
    joint, _ = build_training_graph(_two_conv_net("float32"), params)
    cg = _check(joint, pipeline="training")
    rng = np.random.default_rng(3)
    g64 = _two_conv_net("float64")
    feeds = {v.name: rng.standard_normal(v.type.shape) for v in g64.inputs}
    r = rng.standard_normal((3, 3))
    opt, _ = compile_graph(joint, "training")
    names = [v.name for v in opt.inputs]
    head = {n: r for n in names if n not in feeds}   # the head gradient input
    assert len(head) == 1, names
    outs = cg([np.ascontiguousarray(feeds.get(n, head.get(n))).astype(np.float32) for n in names])
    grads = dict(zip(params, outs[1:]))   # outputs: the forward's, then the gradients in wrt order

    def loss(f):
        return float((run(g64, f).outputs[0] * r).sum())
    for name in ("w1", "w2"):
        for idx in [tuple(rng.integers(0, d) for d in feeds[name].shape) for _ in range(4)]:
            plus, minus = dict(feeds), dict(feeds)
            plus[name], minus[name] = feeds[name].copy(), feeds[name].copy()
            plus[name][idx] += 1e-4
            minus[name][idx] -= 1e-4
            fd = (loss(plus) - loss(minus)) / 2e-4
            got = grads[name][idx]
            assert abs(got - fd) <= 1e-3 * max(1.0, abs(fd)), (name, idx, got, fd)


# ------------------------------------------------------------------------------ real models

@pytest.mark.parametrize("name", ["lenet", "resnet18_v1", "mobilenet1.0"])
def test_models_compiled_natively_reproduce_mxnet(name):
    import symjit as mx
    from symjit.passes.infer import infer_types
    from symjit.symbol.lower import lower
    sym = mx.sym.load(str(model_path(f"{name}-symbol.json")))
    params = mx.nd.load(str(model_path(f"{name}-0000.params")))
    x = np.load(model_path(f"{name}-input.npy"))
    g, _ = lower(sym)
    g, _ = infer_types(g, shapes={"data": x.shape})
    consts = {k.split(":", 1)[1]: v.asnumpy() for k, v in params.items()}
    opt, _ = compile_graph(g, "inference", constants=consts)
    cg = compile_planned(opt, name)
    assert cg.native
    feeds = {"data": x, **consts}
    got = cg([np.ascontiguousarray(feeds[v.name]) for v in opt.inputs])[0]
    ref = np.load(model_path(f"{name}-output.npy"))
    assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max()


@pytest.mark.parametrize("xs,f,pad,tiles_only", [((1, 128, 29, 27), 129, (1, 1), False),
                                                 ((16, 131, 14, 13), 128, (0, 0), False),
                                                 ((1, 128, 28, 28), 128, (2, 1), False),
                                                 ((2, 64, 11, 12), 80, (1, 1), True)])
def test_winograd_convolution(xs, f, pad, tiles_only, kernel_path):
    """Geometries that take the Winograd F(2x2, 3x3) path (odd output sizes clip the last tile);
    `tiles_only`: Winograd where the kernel library runs its AVX-512 tiles, im2col on the
    portable path of a host without them (too few channels and tiles for the BLAS version)."""
    from symjit.codegen.llvm.lower_conv import conv_method
    from symjit.codegen.llvm.lower_gemm import native_kernels_available
    from symjit.ops.conv_method import IM2COL, WINOGRAD
    out = _conv_out(xs, (3, 3), (1, 1), pad, (1, 1))
    want = WINOGRAD if native_kernels_available() or not tiles_only else IM2COL
    assert conv_method(xs[0], xs[1], 1, f, (3, 3), (1, 1), (1, 1), out) == want
    ins = [("x", xs), ("w", (f, xs[1], 3, 3)), ("b", (f,))]
    _check(_graph("Convolution", ins, _conv_attrs(f, (3, 3), (1, 1), pad, (1, 1), 1, False), post=("relu",)),
           expect_ops={"_with_epilogue"})
    _check(_graph("Convolution", ins[:2], _conv_attrs(f, (3, 3), (1, 1), pad, (1, 1), 1, True)))


# ------------------------------------------------------------------------------ random geometries

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def conv_geometries(draw):
    """(data shape, num_filter, kernel, stride, pad, dilate, groups) of a valid 1-D or 2-D convolution."""
    nd = draw(st.sampled_from([1, 2]))
    g = draw(st.sampled_from([1, 1, 2, 3]))
    c = g * draw(st.integers(1, 3))
    f = g * draw(st.integers(1, 3))
    kernel = tuple(draw(st.integers(1, 4)) for _ in range(nd))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    dilate = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    pad = tuple(draw(st.integers(0, 2)) for _ in range(nd))
    sp = tuple(max(draw(st.integers(1, 9)), (k - 1) * d + 1 - 2 * p)
               for k, d, p in zip(kernel, dilate, pad))
    n = draw(st.integers(1, 2))
    return (n, c) + sp, f, kernel, stride, pad, dilate, g


@settings(max_examples=25, deadline=None)
@given(conv_geometries(), st.booleans())
def test_random_convolution_geometries(case, no_bias):
    xs, f, k, s, p, d, g = case
    ins = [("x", xs), ("w", (f, xs[1] // g) + k)] + ([] if no_bias else [("b", (f,))])
    _check(_graph("Convolution", ins, _conv_attrs(f, k, s, p, d, g, no_bias)))


@settings(max_examples=15, deadline=None)
@given(conv_geometries())
def test_random_convolution_backward_geometries(case):
    xs, f, k, s, p, d, g = case
    geo = {"kernel": k, "stride": s, "pad": p, "dilate": d, "num_group": g}
    dys = (xs[0], f) + _conv_out(xs, k, s, p, d)
    ws = (f, xs[1] // g) + k
    _check(_graph("_backward_Convolution_data", [("dy", dys), ("w", ws), ("x", xs)], geo))
    _check(_graph("_backward_Convolution_weight", [("dy", dys), ("x", xs)], geo))


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([1, 2]), st.data())
def test_random_pooling_geometries(nd, data):
    kernel = tuple(data.draw(st.integers(1, 4)) for _ in range(nd))
    stride = tuple(data.draw(st.integers(1, 3)) for _ in range(nd))
    pad = tuple(data.draw(st.integers(0, k - 1)) for k in kernel)
    sp = tuple(max(data.draw(st.integers(1, 9)), k) for k in kernel)
    attrs = {"kernel": kernel, "stride": stride, "pad": pad,
             "pool_type": data.draw(st.sampled_from(["max", "avg", "sum"])),
             "pooling_convention": data.draw(st.sampled_from(["valid", "full"])),
             "count_include_pad": data.draw(st.booleans())}
    _check(_graph("Pooling", [("x", (2, 3) + sp)], attrs))


# ------------------------------------------------------------------------------ AVX-512 tiles vs portable path

@pytest.fixture(params=[1, 0], ids=["tiles", "portable"])
def kernel_path(request):
    """Run a test with the kernel library's AVX-512 tiles (where the CPU has them) and with its
    portable path (BLAS and loop nests); the tiles stay the default afterwards."""
    from symjit.codegen.llvm.lower_gemm import set_native_kernels
    set_native_kernels(request.param)
    yield request.param
    set_native_kernels(-1)


#: geometries sized to exercise the tiles' blocking: several column and filter blocks per image,
#: K blocks (accumulation), partial last panels, wide implicit-GEMM rows crossing panel edges,
#: groups, dilation, asymmetric padding, batch > 1
TILE_CONV_CASES = [
    ((1, 64, 56, 56), 64, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((2, 96, 13, 15), 80, (3, 3), (1, 1), (1, 0), (1, 1), 1),
    ((1, 40, 17, 19), 24, (3, 3), (1, 1), (2, 2), (2, 2), 2),
    ((3, 16, 9, 31), 33, (3, 5), (1, 1), (0, 2), (1, 1), 1),
    ((1, 512, 7, 7), 64, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((2, 48, 29, 29), 40, (3, 3), (2, 2), (1, 1), (1, 1), 1),
    ((1, 3, 64, 64), 24, (7, 7), (2, 2), (3, 3), (1, 1), 1),
    ((2, 70, 14, 14), 100, (1, 1), (1, 1), (0, 0), (1, 1), 1),
    ((1, 32, 37, 37), 48, (1, 1), (1, 1), (0, 0), (1, 1), 2),
    ((1, 24, 20), 36, (5,), (1,), (2,), (1,), 1),
    ((1, 4, 5, 300), 4, (3, 3), (1, 1), (1, 1), (1, 1), 4),      # depthwise, rows of 19 vectors
    ((1, 6, 9, 601), 6, (3, 5), (2, 2), (1, 2), (1, 1), 6),      # depthwise stride 2, wide rows
    ((2, 8, 12, 13), 16, (3, 3), (1, 2), (1, 1), (2, 1), 8),     # depthwise, multiplier 2, dilated
]


@pytest.mark.parametrize("case", TILE_CONV_CASES + [
    ((64, 3, 32, 32), 32, (3, 3), (1, 1), (1, 1), (1, 1), 1),   # a small-channel first layer, batch 64
    ((5, 32, 16, 16), 64, (3, 3), (1, 1), (1, 1), (1, 1), 1),   # images in chunks, some chunk short
    ((1, 24, 11, 11), 40, (1, 1), (2, 2), (0, 0), (1, 1), 1),   # 1x1 stride 2: one phase plane
])
def test_convolution_backward_tiles(case, kernel_path):
    """Weight and data gradients on both kernel paths (the tiles' weight gradient: implicit GEMM
    over phase planes per image, images in chunks accumulated separately, then summed)."""
    xs, f, k, s, p, d, g = case
    geo = {"kernel": k, "stride": s, "pad": p, "dilate": d, "num_group": g}
    dys = (xs[0], f) + _conv_out(xs, k, s, p, d)
    ws = (f, xs[1] // g) + k
    _check(_graph("_backward_Convolution_weight", [("dy", dys), ("x", xs)], geo))
    _check(_graph("_backward_Convolution_data", [("dy", dys), ("w", ws), ("x", xs)], geo))


@pytest.mark.parametrize("case", TILE_CONV_CASES)
def test_convolution_tiles(case, kernel_path):
    xs, f, k, s, p, d, g = case
    ins = [("x", xs), ("w", (f, xs[1] // g) + k), ("b", (f,))]
    _check(_graph("Convolution", ins, _conv_attrs(f, k, s, p, d, g, False), post=("relu",)),
           expect_ops={"_with_epilogue"})


@pytest.mark.parametrize("xs,h", [((64, 784), 512), ((1, 512), 1000), ((3, 300), 70), ((200, 33), 9),
                                  ((17, 1000), 130), ((300, 40), 520), ((70, 16), 100)])
def test_fully_connected_tiles(xs, h, kernel_path):
    """Every form of the dense tiles: X packed and C stored transposed (fewer rows than units
    and rows < 2 K), W packed and C row-major (more rows than units, or rows >= 2 K: the last
    two cases), the dot-product GEMV (1-3 rows)."""
    ins = [("x", xs), ("w", (h, xs[1])), ("b", (h,))]
    _check(_graph("FullyConnected", ins, {"num_hidden": h}, post=("relu",)), expect_ops={"_with_epilogue"})


@pytest.mark.parametrize("ls,rs,ta,tb", [
    ((130, 600), (600, 90), False, False), ((600, 130), (600, 90), True, False),
    ((130, 600), (90, 600), False, True), ((600, 130), (90, 600), True, True),
    ((5, 33, 300), (5, 300, 47), False, False),
])
def test_dot_tiles(ls, rs, ta, tb, kernel_path):
    op = "batch_dot" if len(ls) == 3 else "dot"
    _check(_graph(op, [("a", ls), ("b", rs)], {"transpose_a": ta, "transpose_b": tb}))


def _conv_const_weights(xs, f, k, s, p, d, g, seed=0):
    """Convolution + bias + relu whose weights and bias are `_const` nodes (compile-time
    constants, as in imported models), so the lowering may pack them."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder(name="t_conv_const")
    x = b.add_input("x", TensorType(tuple(xs), "float32"))
    w = b.add_node("_const", [], {"value": rng.standard_normal((f, xs[1] // g) + k).astype(np.float32)},
                   already_parsed=True)[0]
    bias = b.add_node("_const", [], {"value": rng.standard_normal((f,)).astype(np.float32)}, already_parsed=True)[0]
    y = b.add_node("Convolution", [x, w, bias], _conv_attrs(f, k, s, p, d, g, False))[0]
    return b.build([b.add_node("relu", [y], {})[0]])


#: constant-weight geometries: the filter-vector path (few positions, 1x1), fused Winograd with
#: U packed at compile time (odd sizes, several tile-row blocks), groups, and plain implicit GEMM
CONST_CONV_CASES = [
    ((1, 96, 7, 7), 64, (1, 1), (1, 1), (0, 0), (1, 1), 1),
    ((2, 64, 7, 7), 96, (1, 1), (1, 1), (0, 0), (1, 1), 2),
    ((1, 64, 7, 7), 96, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((1, 64, 15, 13), 72, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((3, 96, 28, 28), 64, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((1, 32, 20, 20), 40, (3, 3), (2, 2), (1, 1), (1, 1), 1),
    ((1, 48, 14, 14), 96, (3, 3), (2, 2), (1, 1), (1, 1), 1),     # filter-vector over phase planes
    ((2, 40, 28, 28), 64, (3, 3), (2, 2), (1, 1), (1, 1), 1),
]


@pytest.mark.parametrize("case", CONST_CONV_CASES)
def test_convolution_constant_weights(case, kernel_path):
    from symjit.codegen.llvm.lower_conv import conv_desc, conv_method, pack_weights
    xs, f, k, s, p, d, g = case
    _check(_conv_const_weights(xs, f, k, s, p, d, g))
    # the packing the library asks for is deterministic in the descriptor
    out = _conv_out(xs, k, s, p, d)
    desc = conv_desc(xs[0], xs[1], g, f, xs[2:], k, out, s, d, p,
                     conv_method(xs[0], xs[1], g, f, k, s, d, out))
    w = np.ones((f, xs[1] // g) + k, np.float32)
    a, b = pack_weights(desc, w), pack_weights(desc, w)
    assert (a is None) == (b is None) and (a is None or np.array_equal(a, b))


#: fused Winograd (nnkernels.c conv_wnat) geometries whose blocks differ between the block
#: choosers and thread counts: many small blocks (64 ch 56x56), filters split across threads
#: (one block of tile rows), odd output sizes (the last tile row and column clipped), batch 2
WNAT_BLOCK_CASES = [
    ((1, 64, 56, 56), 64), ((1, 128, 28, 28), 128), ((1, 256, 14, 14), 256),
    ((1, 64, 11, 13), 72), ((2, 96, 15, 13), 64),
]


@pytest.mark.parametrize("xs,f", WNAT_BLOCK_CASES)
def test_winograd_blocks_do_not_change_the_result(xs, f):
    """The fused Winograd's blocks (tile rows per block, tile shape, filters per task) only
    reorder independent work: every output element sums its input channels in the same order,
    so the result is bit-identical for the built-in budget of V + M, a much smaller one
    (symjit_nn_tune TUNE_WBLOCK: shorter blocks) and 1, 2 or 3 threads, and matches the
    interpreter."""
    from symjit import runtime
    from symjit.codegen.llvm.lower_conv import conv_method
    from symjit.ops.conv_method import WINOGRAD
    from symjit.codegen.llvm.lower_gemm import native_kernels_available
    if not native_kernels_available():
        pytest.skip("the fused Winograd needs the AVX-512 tiles")
    assert conv_method(xs[0], xs[1], 1, f, (3, 3), (1, 1), (1, 1), xs[2:]) == WINOGRAD
    g = _conv_const_weights(xs, f, (3, 3), (1, 1), (1, 1), (1, 1), 1)
    opt, _ = compile_graph(g, "inference")
    cg = compile_planned(opt, g.name)
    x = np.random.default_rng(1).standard_normal(xs).astype(np.float32)
    tune = _kernel_tune()
    results = {}
    try:
        for choice in (0, WNAT_SMALL_BUDGET):
            tune(TUNE_WBLOCK, choice)
            for n in (1, 2, 3):
                with runtime.threads(n):
                    results[(choice, n)] = cg([x])[0]
    finally:
        tune(TUNE_WBLOCK, 0)
    first = results[(0, 1)]
    for key, y in results.items():
        assert np.array_equal(y, first), key
    ref = run(g, {"x": x}).outputs[0]
    np.testing.assert_allclose(first, ref, rtol=1e-4, atol=1e-5 * max(float(np.abs(ref).max()), 1.0))


# ------------------------------------------------------------------ ReLU epilogue in the stores

#: (data shape, num_filter, kernel, stride, pad, groups): the kernel paths whose stores apply a
#: ReLU epilogue themselves (nnkernels.c symjit_nn_epi_relu): 1x1 over many positions (GEMM
#: tiles, rows stored from registers), few positions over packed weights (filter-vector tiles,
#: transposed stores; 3072 inputs per output: two K blocks, so ReLU must wait for the last),
#: stride 2 (implicit GEMM over phase planes, wide rows), depthwise wide planes (row kernel)
RELU_CASES = [
    ((1, 24, 20, 20), 40, (1, 1), (1, 1), (0, 0), 1),
    ((1, 512, 7, 7), 32, (3, 3), (1, 1), (1, 1), 1),
    ((1, 3072, 7, 7), 48, (1, 1), (1, 1), (0, 0), 1),
    ((2, 16, 23, 23), 24, (3, 3), (2, 2), (1, 1), 1),
    ((1, 8, 40, 40), 8, (3, 3), (1, 1), (1, 1), 8),
    ((1, 8, 41, 70), 8, (3, 3), (2, 2), (1, 1), 8),
]


def _compile_with_constant_weights(g, feeds):
    consts = {k: v for k, v in feeds.items() if k != "x"}
    opt, _ = compile_graph(g, "inference", constants=consts)
    return compile_planned(opt, g.name), [np.ascontiguousarray(feeds[v.name]) for v in opt.inputs]


def _assert_conv_close(got, want):
    """The convolution tolerance of this file: rtol 1e-4, atol 1e-5 x the output's scale."""
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * max(float(np.abs(want).max()), 1.0))


@pytest.mark.parametrize("case", RELU_CASES)
def test_relu_epilogue_applied_in_the_stores(case):
    xs, f, k, s, p, grp = case
    ins = [("x", xs), ("w", (f, xs[1] // grp) + k), ("b", (f,))]
    g = _graph("Convolution", ins, _conv_attrs(f, k, s, p, (1, 1), grp, False), post=("relu",))
    rng = np.random.default_rng(5)
    feeds = _feeds(g, rng)
    feeds["x"][0, 0, :3, :3] = np.nan                    # NaN must survive the ReLU
    cg, arrays = _compile_with_constant_weights(g, feeds)
    assert "@symjit_nn_epi_relu" in cg.module.ir and "@sj_epi" not in cg.module.ir
    got, want = cg(arrays)[0], run(g, feeds).outputs[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got).any() and (got[~np.isnan(got)] >= 0).all() and (want == 0).mean() > 0.2
    assert not np.signbit(got[got == 0]).any()         # relu gives +0, never -0
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-4, atol=1e-4 * float(np.abs(want[ok]).max()))


@pytest.mark.parametrize("m, k, h", [(64, 300, 200), (3, 13000, 40)])   # the second: two K blocks
def test_relu_epilogue_of_a_dense_layer(m, k, h):
    rng = np.random.default_rng(6)
    g = _graph("FullyConnected", [("x", (m, k)), ("w", (h, k)), ("b", (h,))], {"num_hidden": h}, post=("relu",))
    feeds = _feeds(g, rng)
    cg, arrays = _compile_with_constant_weights(g, feeds)
    assert "@symjit_nn_epi_relu" in cg.module.ir
    want = run(g, feeds).outputs[0]
    assert (want == 0).mean() > 0.2
    np.testing.assert_allclose(cg(arrays)[0], want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


def test_other_epilogues_stay_generated():
    rng = np.random.default_rng(6)
    g = _graph("FullyConnected", [("x", (64, 300)), ("w", (200, 300)), ("b", (200,))],
               {"num_hidden": 200}, post=("softsign",))
    cg, arrays = _compile_with_constant_weights(g, _feeds(g, rng))
    assert "@symjit_nn_epi_" not in cg.module.ir and "@sj_epi" in cg.module.ir


# ------------------------------------------------------- sigmoid and tanh epilogues of the library

@pytest.mark.parametrize("act", ["sigmoid", "tanh"])
@pytest.mark.parametrize("op, ins, attrs", [
    ("FullyConnected", [("x", (64, 300)), ("w", (200, 300)), ("b", (200,))], {"num_hidden": 200}),
    ("FullyConnected", [("x", (3, 13000)), ("w", (40, 13000)), ("b", (40,))], {"num_hidden": 40}),
    ("Convolution", [("x", (2, 16, 23, 23)), ("w", (24, 16, 3, 3)), ("b", (24,))],
     _conv_attrs(24, (3, 3), (2, 2), (1, 1), (1, 1), 1, False)),
])
def test_sigmoid_and_tanh_epilogues_come_from_the_library(act, op, ins, attrs, monkeypatch):
    """An epilogue that is exactly sigmoid or tanh of the result calls the kernel library's
    function (runtime/nn/epilogue.c): no kernel is generated for it. It computes symjit's own
    float32 exp / tanh step for step, so it matches the generated kernel (bit for bit on FMA
    machines; 2 ulp allowed) and the reference like it; NaN, +-inf and values far beyond the
    saturation points included."""
    from symjit.codegen.llvm import lower_gemm
    rng = np.random.default_rng(7)
    g = _graph(op, ins, attrs, post=(act,))
    feeds = _feeds(g, rng)
    feeds["w"] = feeds["w"] * 6.0                      # results spread past the saturation points
    feeds["x"].reshape(-1)[:4] = [np.nan, np.inf, -np.inf, 1e30]
    cg, arrays = _compile_with_constant_weights(g, feeds)
    assert f"@symjit_nn_epi_{act}" in cg.module.ir and "@sj_epi" not in cg.module.ir
    got = cg(arrays)[0]
    monkeypatch.setattr(lower_gemm, "LIBRARY_EPILOGUES", {})
    generated, arrays = _compile_with_constant_weights(g, feeds)
    assert "@sj_epi" in generated.module.ir
    gen = generated(arrays)[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(gen))
    finite = got[~np.isnan(got)]
    assert np.isnan(got).any() and np.isin(finite, [-1.0, 0.0, 1.0]).any()   # NaN and saturation seen
    np.testing.assert_array_max_ulp(got[~np.isnan(got)], gen[~np.isnan(gen)], maxulp=2)
    want = run(g, feeds).outputs[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    # the reference sums its products in another order (numpy's GEMM; the portable path's is a
    # BLAS's): pre-activations of ~100 from 300 products of ~6 differ by up to ~1e-4, which
    # sigmoid (slope <= 1/4) and tanh (slope <= 1, but ~0 that far out) pass on as below
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-5, atol=3e-5)


# ------------------------------------------------------- portable register tiles (nn/gemm.c pt_gemm)

@pytest.mark.parametrize("xs,f,k,s,p", [
    ((1, 40, 15, 13), 23, (3, 3), (1, 1), (1, 1)),    # K = 360: two K blocks; 23 filters: a partial row tile
    ((2, 3, 33, 35), 64, (7, 7), (2, 2), (3, 3)),     # a stem: K = 147, 17x18 positions
    ((1, 20, 12, 12), 50, (5, 5), (1, 1), (0, 0)),    # LeNet's second layer: 64 positions, whole strips
])
def test_portable_im2col_convolution_does_not_depend_on_its_blocks(xs, f, k, s, p):
    """On the portable path an im2col convolution's GEMMs run on the library's register tiles
    (pt_gemm) where few of their lanes would be wasted: every output sums its products one fixed
    way, so one block or one per thread gives the same floats, and both equal the interpreter
    within the convolution tolerance."""
    from symjit.codegen.llvm.lower_gemm import set_native_kernels
    g = _graph("Convolution", [("x", xs), ("w", (f, xs[1]) + k), ("b", (f,))],
               _conv_attrs(f, k, s, p, (1, 1), 1, False), post=("relu",))
    feeds = _feeds(g, np.random.default_rng(11))
    set_native_kernels(0)
    try:
        cg, arrays = _compile_with_constant_weights(g, feeds)
        outs = over_task_splits(lambda: cg(arrays)[0])
        blas = under_tune("portable_blas", 1, lambda: cg(arrays)[0])   # the same convolution on the BLAS
    finally:
        set_native_kernels(-1)
    np.testing.assert_array_equal(outs[0], outs[1])
    want = run(g, feeds).outputs[0]
    for got in (outs[0], blas):
        _assert_conv_close(got, want)


@pytest.mark.skipif(host_has_avx512(), reason="the portable 1x1 tiles run on hosts without AVX-512 "
                    "(there the AVX-512 filter-vector tiles take these layers)")
@pytest.mark.parametrize("xs,f", [((1, 256, 13, 13), 48),    # SqueezeNet's squeeze layer: one channel block
                                  ((1, 64, 55, 55), 16),     # few filters, chunks of 96 positions
                                  ((1, 200, 7, 7), 40),      # a partial panel of filters; 49 positions
                                  ((1, 512, 14, 14), 100)])  # four channel blocks, 6 x 16 + 4 filters
def test_portable_pointwise_tiles_on_packed_weights(xs, f):
    """Batch-1 1x1 convolutions with many input channels or few filters run on the portable
    filter-vector tiles (nn/conv.c pw_fvec_task) on weights packed at compile time: the
    library packs them (symjit_nn_conv_pack), every task split gives the same floats, and the
    result equals the interpreter's and the BLAS path's (tune conv=no_fvec) within the
    convolution tolerance."""
    from symjit.codegen.llvm.lower_conv import conv_desc
    from symjit.codegen.llvm.lower_gemm import packing_job
    desc = conv_desc(xs[0], xs[1], 1, f, xs[2:], (1, 1), xs[2:], (1, 1), (1, 1), (0, 0))
    assert packing_job("symjit_nn_conv_pack", desc, np.ones((f, xs[1], 1, 1), np.float32)) is not None
    g = _graph("Convolution", [("x", xs), ("w", (f, xs[1], 1, 1)), ("b", (f,))],
               _conv_attrs(f, (1, 1), (1, 1), (0, 0), (1, 1), 1, False), post=("relu",))
    feeds = _feeds(g, np.random.default_rng(12))
    cg, arrays = _compile_with_constant_weights(g, feeds)
    assert "@symjit_nn_conv_packed" in cg.module.ir
    outs = over_task_splits(lambda: cg(arrays)[0])
    blas = under_tune("conv", TUNE_CONV_VALUES["no_fvec"], lambda: cg(arrays)[0])   # the same layer on the BLAS
    np.testing.assert_array_equal(outs[0], outs[1])
    want = run(g, feeds).outputs[0]
    for got in (outs[0], blas):
        _assert_conv_close(got, want)


#: depthwise planes on the portable path (nn/depthwise.c dw_plane_pt: 8-column output vectors
#: in registers over padded phase planes): rows of one vector with its overhang onto the next
#: rows (7 and 3 wide), tails, strides 1-3 and unequal ones, dilation, a channel multiplier, two
#: images, and 81 taps (more than its offset table holds: the tap-by-tap accumulator passes)
DW_PORTABLE_CASES = [
    # (data shape, kernel, stride, pad, dilate, multiplier)
    ((1, 5, 20, 21), (3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((2, 3, 17, 33), (3, 3), (2, 2), (1, 1), (1, 1), 1),
    ((1, 4, 9, 7), (3, 3), (1, 1), (1, 1), (1, 1), 2),
    ((1, 3, 4, 3), (3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((1, 2, 23, 25), (5, 5), (3, 3), (2, 2), (1, 1), 1),
    ((1, 2, 19, 19), (3, 3), (1, 1), (2, 2), (2, 2), 1),
    ((1, 3, 12, 30), (3, 5), (1, 2), (1, 2), (1, 1), 1),
    ((1, 2, 21, 22), (9, 9), (1, 1), (4, 4), (1, 1), 1),
]


@pytest.mark.skipif(host_has_avx512(), reason="the portable depthwise planes run on hosts without AVX-512 "
                    "(there the AVX-512 row and channel-vector kernels take these layers)")
@pytest.mark.parametrize("case", DW_PORTABLE_CASES)
def test_portable_depthwise_planes(case):
    """Each output sums the bias, then its taps in order, one FMA each, as the tap-by-tap passes
    over a wide accumulator that dw_plane_pt replaced (tune conv=dw_wide_acc): bit for bit the
    same floats, and the interpreter's within the convolution tolerance; a row's overhang never
    reaches the next plane (the planes' outputs are checked whole)."""
    xs, k, s, p, d, mult = case
    c = xs[1]
    g = _graph("Convolution", [("x", xs), ("w", (c * mult, 1) + k), ("b", (c * mult,))],
               _conv_attrs(c * mult, k, s, p, d, c, False), post=("relu",))
    feeds = _feeds(g, np.random.default_rng(21))
    cg, arrays = _compile_with_constant_weights(g, feeds)
    rows = np.array(cg(arrays)[0])
    wide = under_tune("conv", TUNE_CONV_VALUES["dw_wide_acc"], lambda: cg(arrays)[0])
    np.testing.assert_array_equal(rows, wide)
    _assert_conv_close(rows, run(g, feeds).outputs[0])


@pytest.mark.skipif(host_has_avx512(), reason="the portable GEMM tiles run on hosts without AVX-512")
@pytest.mark.parametrize("xs,f", [((2, 24, 15, 15), 36),     # 225 positions: a partial strip per block
                                  ((1, 16, 40, 40), 50),     # few channels at batch 1; 8 tiles + 2 rows
                                  ((2, 256, 8, 8), 20),      # PT_KC channels: the most the tiles take
                                  ((3, 8, 17, 16), 13)])
def test_portable_pointwise_tiles_on_packed_strips(xs, f):
    """1x1 convolutions that the filter-vector tiles do not take run on pt_gemm over strips of
    the input packed per K block, in output blocks of PW_TILES_OUT_FLOATS, the bias added in
    the tiles' stores: every task split gives the same floats, which equal the BLAS path's
    (tune conv=pw_blas) and the interpreter's within the convolution tolerance."""
    g = _graph("Convolution", [("x", xs), ("w", (f, xs[1], 1, 1)), ("b", (f,))],
               _conv_attrs(f, (1, 1), (1, 1), (0, 0), (1, 1), 1, False), post=("relu",))
    feeds = _feeds(g, np.random.default_rng(22))
    cg, arrays = _compile_with_constant_weights(g, feeds)
    outs = over_task_splits(lambda: cg(arrays)[0])
    blas = under_tune("conv", TUNE_CONV_VALUES["pw_blas"], lambda: cg(arrays)[0])
    np.testing.assert_array_equal(outs[0], outs[1])
    want = run(g, feeds).outputs[0]
    for got in (outs[0], blas):
        _assert_conv_close(got, want)
