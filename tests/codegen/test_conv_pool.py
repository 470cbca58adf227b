"""Convolution + max pooling as one node (passes/conv_pool.py, lower_conv.plan_conv_pool,
nnkernels.c symjit_nn_conv_pool).

The pass: which graphs fuse and which must not. The kernel: every geometry is compiled with
and without the pass and run on the same data; the fused result must equal the separate
convolution and pooling bit for bit where the kernel library's own tiles compute the
convolutions (the same tiles sum each output in the same order; the pooling is exact) -- on the
portable path a BLAS does, and the blocks it gets (one image at a time in the fallback, column
blocks of the whole batch when separate) may sum in different orders, so there the two agree to
1e-6 of the output's scale -- and both equal the interpreter within the convolution tolerance (rtol 1e-4,
atol 1e-5 x the output's scale). Each geometry runs on the kernel library's fused blocks (the
default on AVX-512), its fallback (the whole convolution, then the pooling: tune value 7) and
the portable path.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from symjit.codegen.llvm.executable import compile_planned
from symjit.runtime import native_kernels_in_use
from symjit.codegen.llvm.lower_gemm import TUNE_CONV_VALUES, TUNE_KEYS
from symjit.ir import GraphBuilder, TensorType, run
from symjit.passes.conv_pool import fuse_conv_pool
from symjit.passes.manager import compile_graph

from shared_data import model_path

#: the symjit_nn_tune key and value (runtime/nnkernels.h) that run the convolution, then the pooling
TUNE_CONV, FUSED_OFF = TUNE_KEYS["conv"], TUNE_CONV_VALUES["pool_unfused"]


def _net(xs, f, k, s, p, d=None, post=("relu",), pool=None, no_bias=False, extra_reader=False,
         conv_is_output=False, groups=1):
    """x -> Convolution -> post ops -> Pooling (max unless `pool` says otherwise)."""
    b = GraphBuilder(name="conv_pool")
    x = b.add_input("x", TensorType(xs, "float32"))
    w = b.add_input("w", TensorType((f, xs[1] // groups) + k, "float32"))
    ins = [x, w] + ([] if no_bias else [b.add_input("b", TensorType((f,), "float32"))])
    y = b.add_node("Convolution", ins, {"num_filter": f, "kernel": k, "stride": s, "pad": p, "num_group": groups,
                                        "dilate": d or (1,) * len(k), "no_bias": no_bias})[0]
    for op in post:
        y = b.add_node(op, [y])[0]
    z = b.add_node("Pooling", [y], dict({"pool_type": "max"}, **(pool or {})))[0]
    outs = [z]
    if extra_reader:
        outs.append(b.add_node("sigmoid", [y])[0])
    if conv_is_output:
        outs.append(y)
    return b.build(outs)


def _ops(g):
    return [n.op.name for n in g.nodes if n.op.name != "_const"]


@pytest.fixture(params=["fused", "fallback", "portable"])
def conv_pool_path(request):
    """The kernel library's fused blocks, its whole-convolution fallback, or its portable path."""
    from symjit.codegen.llvm.lower_gemm import kernel_library, set_native_kernels
    tune = kernel_library().symjit_nn_tune
    tune.restype = ctypes.c_int64
    tune.argtypes = [ctypes.c_int64, ctypes.c_int64]
    if request.param == "fallback":
        tune(TUNE_CONV, FUSED_OFF)
    if request.param == "portable":
        set_native_kernels(0)
    yield request.param
    tune(TUNE_CONV, 0)
    set_native_kernels(-1)


# ------------------------------------------------------------------------------ the pass

def test_conv_relu_maxpool_becomes_one_node():
    g = _net((1, 3, 20, 20), 8, (3, 3), (1, 1), (1, 1), pool={"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)})
    opt, pm = compile_graph(g, "inference")
    assert _ops(opt) == ["_conv_pool"]
    node = [n for n in opt.nodes if n.op.name == "_conv_pool"][0]
    assert node.attrs["relu"] is True and node.attrs["num_args"] == 3
    assert node.outputs[0].type.shape == (1, 8, 10, 10)
    assert [r.stats for r in pm.records if r.name == "conv_pool"] == [{"conv_pool_fused": 1}]
    again, stats = fuse_conv_pool(opt)
    assert stats == {"conv_pool_fused": 0} and _ops(again) == ["_conv_pool"]


def test_conv_maxpool_without_activation_fuses():
    g = _net((1, 3, 12, 12), 4, (3, 3), (1, 1), (0, 0), post=(), pool={"kernel": (2, 2), "stride": (2, 2)})
    opt, _ = compile_graph(g, "inference")
    assert _ops(opt) == ["_conv_pool"]
    assert [n for n in opt.nodes if n.op.name == "_conv_pool"][0].attrs["relu"] is False


@pytest.mark.parametrize("why,kwargs", [
    ("average pooling", {"pool": {"kernel": (2, 2), "stride": (2, 2), "pool_type": "avg"}}),
    ("global pooling", {"pool": {"kernel": (2, 2), "global_pool": True}}),
    ("epilogue other than relu", {"post": ("sigmoid",)}),
    ("relu then another op", {"post": ("relu", "negative")}),
    ("convolution output read twice", {"extra_reader": True}),
    ("convolution output returned", {"conv_is_output": True}),
])
def test_what_does_not_fuse(why, kwargs):
    kw = dict(pool={"kernel": (2, 2), "stride": (2, 2)})
    kw.update(kwargs)
    opt, _ = compile_graph(_net((1, 3, 10, 10), 4, (3, 3), (1, 1), (1, 1), **kw), "inference")
    assert "_conv_pool" not in _ops(opt), why


def test_one_dimensional_convolution_does_not_fuse():
    opt, _ = compile_graph(_net((1, 3, 17), 4, (3,), (1,), (1,), pool={"kernel": (2,), "stride": (2,)}),
                           "inference")
    assert "_conv_pool" not in _ops(opt)


def test_cuda_planning_keeps_the_two_ops():
    from symjit.codegen.cuda import plan_graph
    opt = plan_graph(_net((1, 3, 10, 10), 4, (3, 3), (1, 1), (1, 1), pool={"kernel": (2, 2), "stride": (2, 2)}))
    assert "_conv_pool" not in _ops(opt) and "Pooling" in _ops(opt)


# ------------------------------------------------------------------------------ the kernel

#: (data shape, filters, kernel, stride, pad, dilate, pooling attrs, conv post ops)
CASES = [
    # resnet's stem, smaller: 7x7 stride 2, 3x3 stride-2 pooling with padding
    ((1, 3, 64, 64), 24, (7, 7), (2, 2), (3, 3), (1, 1), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}, ("relu",)),
    # several images, filters not a multiple of the tile rows, "full" convention (last window clipped)
    ((2, 5, 33, 47), 17, (3, 3), (1, 1), (1, 1), (1, 1),
     {"kernel": (2, 2), "stride": (2, 2), "pooling_convention": "full"}, ("relu",)),
    # stride-3 pooling (the gathered columns), convolution stride 3, no activation
    ((1, 4, 20, 23), 13, (5, 5), (3, 3), (2, 2), (1, 1), {"kernel": (3, 3), "stride": (3, 3), "pad": (1, 1)}, ()),
    # stride-5 pooling (gathered columns far apart), windows wider than the stride
    ((1, 3, 47, 61), 9, (3, 3), (1, 1), (1, 1), (1, 1), {"kernel": (6, 7), "stride": (5, 5), "pad": (2, 3)}, ("relu",)),
    # stride-1 pooling, dilated convolution
    ((2, 3, 15, 16), 8, (3, 3), (1, 1), (0, 0), (2, 2), {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1)}, ("relu",)),
    # asymmetric kernels and strides
    ((1, 6, 30, 9), 20, (3, 1), (1, 1), (1, 0), (1, 1), {"kernel": (2, 3), "stride": (2, 1), "pad": (0, 1)}, ("relu",)),
    # windows entirely in the padding (-FLT_MAX), a block with no convolution rows
    ((1, 2, 5, 5), 3, (3, 3), (1, 1), (0, 0), (1, 1), {"kernel": (2, 2), "stride": (2, 2), "pad": (2, 2)}, ("relu",)),
    # large enough for several pooled-row blocks and filter blocks per image
    ((1, 3, 112, 112), 64, (7, 7), (2, 2), (3, 3), (1, 1), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}, ("relu",)),
    ((3, 8, 40, 40), 32, (3, 3), (1, 1), (1, 1), (1, 1), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}, ("relu",)),
    # a geometry the library runs as Winograd: the fused node takes the fallback on every path
    ((1, 64, 20, 20), 64, (3, 3), (1, 1), (1, 1), (1, 1), {"kernel": (2, 2), "stride": (2, 2)}, ("relu",)),
]


def _compiled(g, disabled=()):
    opt, _ = compile_graph(g, "inference", disabled=set(disabled))
    cg = compile_planned(opt, g.name)
    assert cg.native, [n.op.name for n in cg.module.python_nodes]
    return opt, cg


def _run(opt, cg, feeds):
    return cg([np.ascontiguousarray(feeds[v.name]) for v in opt.inputs])[0]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("no_bias", [False, True])
def test_fused_equals_separate_and_interpreter(case, no_bias, conv_pool_path):
    xs, f, k, s, p, d, pool, post = case
    g = _net(xs, f, k, s, p, d, post=post, pool=pool, no_bias=no_bias)
    rng = np.random.default_rng(len(xs) + f)
    feeds = {v.name: rng.standard_normal(v.type.shape).astype(np.float32) for v in g.inputs}
    fused_opt, fused = _compiled(g)
    assert _ops(fused_opt) == ["_conv_pool"]
    sep_opt, separate = _compiled(g, disabled=("conv_pool",))
    assert "Pooling" in _ops(sep_opt)
    got, want = _run(fused_opt, fused, feeds), _run(sep_opt, separate, feeds)
    if conv_pool_path != "portable" and native_kernels_in_use():
        np.testing.assert_array_equal(got, want)
    else:   # GEMMs on a BLAS (module docstring)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * max(float(np.abs(want).max()), 1.0))
    ref = run(g, feeds).outputs[0]
    assert got.shape == ref.shape
    scale = max(float(np.abs(ref[np.isfinite(ref)]).max()), 1.0)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * scale)


@pytest.mark.parametrize("groups,f", [(2, 6), (8, 8), (8, 16)])   # grouped, depthwise, multiplier 2
def test_grouped_and_depthwise_convolutions_take_the_fallback(groups, f, conv_pool_path):
    g = _net((2, 8, 21, 19), f, (3, 3), (1, 1), (1, 1), pool={"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)},
             groups=groups)
    rng = np.random.default_rng(groups)
    feeds = {v.name: rng.standard_normal(v.type.shape).astype(np.float32) for v in g.inputs}
    fused_opt, fused = _compiled(g)
    assert _ops(fused_opt) == ["_conv_pool"]
    sep_opt, separate = _compiled(g, disabled=("conv_pool",))
    got = _run(fused_opt, fused, feeds)
    np.testing.assert_array_equal(got, _run(sep_opt, separate, feeds))
    ref = run(g, feeds).outputs[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * max(float(np.abs(ref).max()), 1.0))


def test_nan_inputs_pool_like_the_separate_ops(conv_pool_path):
    """NaN in the data makes NaN convolution outputs, which relu keeps and max pooling skips
    (numpy's fmax), as in the separate ops."""
    g = _net((1, 3, 24, 24), 16, (3, 3), (1, 1), (1, 1), pool={"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)})
    rng = np.random.default_rng(5)
    feeds = {v.name: rng.standard_normal(v.type.shape).astype(np.float32) for v in g.inputs}
    feeds["x"][0, :, 5, 7] = np.nan
    feeds["x"][0, 1, 20:, :] = np.nan
    fused_opt, fused = _compiled(g)
    sep_opt, separate = _compiled(g, disabled=("conv_pool",))
    got = _run(fused_opt, fused, feeds)
    np.testing.assert_array_equal(got, _run(sep_opt, separate, feeds))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(run(g, feeds).outputs[0]))


def test_resnet18_stem_is_fused():
    """resnet18_v1's 7x7 convolution, batch norm, relu and max pooling end as one node."""
    import symjit as mx
    from symjit.passes.infer import infer_types
    from symjit.symbol.lower import lower
    sym = mx.sym.load(str(model_path("resnet18_v1-symbol.json")))
    params = mx.nd.load(str(model_path("resnet18_v1-0000.params")))
    g, _ = lower(sym)
    g, _ = infer_types(g, shapes={"data": (1, 3, 224, 224)})
    consts = {k.split(":", 1)[1]: v.asnumpy() for k, v in params.items()}
    opt, _ = compile_graph(g, "inference", constants=consts)
    fused = [n for n in opt.nodes if n.op.name == "_conv_pool"]
    assert len(fused) == 1 and fused[0].attrs["relu"] and fused[0].outputs[0].type.shape == (1, 64, 56, 56)
    assert not any(n.op.name == "Pooling" and n.attrs["pool_type"] == "max" for n in opt.nodes)
