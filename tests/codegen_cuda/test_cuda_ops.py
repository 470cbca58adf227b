"""CUDA lowerings of the library ops (GEMM family, convolutions, pooling, reductions, softmax,
normalization, data movement) against the reference interpreter, through the host emulation
of the generated source (codegen/cuda/emulate.py; runtime/cuda_host_emu.h).

Each test builds one graph with many outputs (one compile each, so the default run stays
fast); shapes are deliberately not multiples of the GEMM tiles (64 x 64 x 16) or of the block
size, so boundary handling is exercised. Tolerance: float32 rtol 1e-4 / atol 1e-5 (sums of up
to a few hundred products in a different order than numpy's), integers exact.
"""
from __future__ import annotations

import numpy as np
import pytest

from cuda_util import Net, assert_close, emulate_graph, needs_cxx
from symjit.base import MXNetError
from symjit.codegen.cuda import lower_graph, plan_graph
from symjit.ir import GraphBuilder, TensorType

pytestmark = needs_cxx


def _check(net: Net, tmp_path, rtol=1e-4, atol=1e-5, disabled=()):
    got, want, plan = emulate_graph(net.graph(), net.feeds, tmp_path, net.consts, disabled=disabled)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, rtol=rtol, atol=atol, what=f"output {k}")
    return plan


def test_gemm_family(tmp_path):
    net = Net("gemm")
    x = net.input("x", (5, 33))
    w = net.input("w", (70, 33), const=True)
    bias = net.input("bias", (70,), const=True)
    x3 = net.input("x3", (2, 3, 11))
    w3 = net.input("w3", (9, 11))
    a = net.input("a", (33, 5))
    bt = net.input("bt", (6, 33))
    ba = net.input("ba", (3, 7, 19))
    bb = net.input("bb", (3, 19, 66))
    bbt = net.input("bbt", (3, 66, 19))
    v = net.input("v", (33,))
    fc, = net.op("FullyConnected", [x, w, bias], num_hidden=70)
    net.output(fc)
    net.output(*net.op("relu", [fc]))                        # fused epilogue in the GEMM
    row = net.input("row", (1, 70))
    fc2, = net.op("FullyConnected", [x, w], num_hidden=70, no_bias=True)
    net.output(*net.op("broadcast_mul", [fc2, row]))         # an epilogue input broadcast along rows
    net.output(*net.op("FullyConnected", [x3, w3], num_hidden=9, no_bias=True, flatten=False))
    net.output(*net.op("dot", [a, x], transpose_a=True, transpose_b=True))   # (5, 5)
    net.output(*net.op("dot", [x, bt], transpose_b=True))
    net.output(*net.op("dot", [v, a]))
    net.output(*net.op("batch_dot", [ba, bb]))
    net.output(*net.op("batch_dot", [ba, bbt], transpose_b=True))
    net.output(*net.op("batch_dot", [bb, ba], transpose_a=True, transpose_b=True))
    plan = _check(net, tmp_path)
    assert any(k.barriers for k in plan.kernels)              # the tiled GEMM ran with real barriers


def test_convolutions(tmp_path):
    net = Net("conv")
    x = net.input("x", (2, 6, 9, 11))
    outs = []
    for k, (attrs, wshape) in enumerate([
            (dict(kernel=(3, 3), num_filter=5, pad=(1, 1)), (5, 6, 3, 3)),
            (dict(kernel=(3, 2), num_filter=4, stride=(2, 3), dilate=(2, 1), pad=(2, 0)), (4, 6, 3, 2)),
            (dict(kernel=(1, 1), num_filter=7, no_bias=True), (7, 6, 1, 1)),
            (dict(kernel=(3, 3), num_filter=4, num_group=2, pad=(1, 1)), (4, 3, 3, 3)),
            (dict(kernel=(3, 3), num_filter=6, num_group=6, pad=(1, 1), stride=(2, 2)), (6, 1, 3, 3)),   # depthwise
            (dict(kernel=(3, 3), num_filter=12, num_group=6, pad=(0, 1)), (12, 1, 3, 3)),   # depthwise, multiplier 2
    ]):
        w = net.input(f"w{k}", wshape, const=True)
        ins = [x, w] if attrs.get("no_bias") else [x, w, net.input(f"b{k}", (attrs["num_filter"],), const=True)]
        y, = net.op("Convolution", ins, **attrs)
        outs.append(y)
    net.output(*outs)
    res = net.input("res", (2, 5, 9, 11))
    s, = net.op("elemwise_add", [outs[0], res])                # residual epilogue with an extra input
    net.output(*net.op("sigmoid", [s]))
    x1 = net.input("x1", (2, 3, 17))
    w1d = net.input("w1d", (4, 3, 5), const=True)
    net.output(*net.op("Convolution", [x1, w1d], kernel=(5,), num_filter=4, no_bias=True, stride=(2,), pad=(2,)))
    x3 = net.input("x3", (1, 2, 5, 6, 7))
    w3d = net.input("w3d", (3, 2, 2, 3, 3), const=True)
    net.output(*net.op("Convolution", [x3, w3d], kernel=(2, 3, 3), num_filter=3, no_bias=True, pad=(0, 1, 1)))
    _check(net, tmp_path)


def test_deconvolution(tmp_path):
    net = Net("deconv")
    x = net.input("x", (2, 4, 5, 6))
    w = net.input("w", (4, 3, 3, 3), const=True)
    b = net.input("b", (3,), const=True)
    net.output(*net.op("Deconvolution", [x, w, b], kernel=(3, 3), num_filter=3, stride=(2, 2), pad=(1, 1),
                       no_bias=False))
    wg = net.input("wg", (4, 2, 4, 3), const=True)
    net.output(*net.op("Deconvolution", [x, wg], kernel=(4, 3), num_filter=4, num_group=2, stride=(2, 1),
                       adj=(1, 0), no_bias=True))
    _check(net, tmp_path)


def test_pooling(tmp_path):
    net = Net("pool")
    x = net.input("x", (2, 3, 9, 10))
    variants = [dict(kernel=(3, 3), stride=(2, 2), pool_type="max"),
                dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max"),
                dict(kernel=(3, 2), stride=(2, 2), pad=(1, 1), pool_type="avg"),
                dict(kernel=(3, 2), stride=(2, 2), pad=(1, 1), pool_type="avg", count_include_pad=False),
                dict(kernel=(2, 2), stride=(2, 2), pool_type="avg", pooling_convention="full"),
                dict(kernel=(2, 3), stride=(1, 2), pool_type="sum"),
                dict(kernel=(2, 2), stride=(2, 2), pool_type="lp", p_value=2),
                dict(kernel=(2, 2), stride=(2, 2), pool_type="lp", p_value=3),
                dict(kernel=(1, 1), global_pool=True, pool_type="avg"),
                dict(kernel=(1, 1), global_pool=True, pool_type="max")]
    for attrs in variants:
        net.output(*net.op("Pooling", [x], **attrs))
    x1 = net.input("x1", (2, 3, 11))
    net.output(*net.op("Pooling", [x1], kernel=(3,), stride=(2,), pool_type="max"))
    x3 = net.input("x3", (1, 2, 4, 5, 6))
    net.output(*net.op("Pooling", [x3], kernel=(2, 2, 2), stride=(2, 2, 2), pool_type="avg"))
    _check(net, tmp_path)


def test_reductions_thread_and_block_kernels(tmp_path):
    net = Net("reduce")
    x = net.input("x", (3, 4, 5, 6))
    big = net.input("big", (3, 700))           # long rows: one block per output
    xi = net.input("xi", (4, 90), "int32", -50, 50)
    cases = [("sum", dict(axis=(1, 3))), ("mean", dict(axis=(0,), keepdims=True)), ("max", dict(axis=(2,))),
             ("min", dict()), ("prod", dict(axis=(3,))), ("sum", dict(axis=(1,), exclude=True)),
             ("nansum", dict(axis=(0, 2))), ("norm", dict(axis=(1,))), ("norm", dict(ord=1, axis=(2, 3)))]
    for op, attrs in cases:
        net.output(*net.op(op, [x], **attrs))
    for op in ("sum", "mean", "max", "min", "argmax", "argmin"):
        net.output(*net.op(op, [big], axis=1))
    net.output(*net.op("argmax", [x], axis=2), *net.op("argmin", [x], axis=0))
    net.output(*net.op("sum", [xi], axis=1), *net.op("max", [xi], axis=0), *net.op("mean", [xi], axis=1))
    net.output(*net.op("sum", [big], axis=0))   # column reduction, few elements per output
    plan = _check(net, tmp_path, rtol=1e-4, atol=1e-4)
    names = {k.name.rsplit("_", 1)[0] for k in plan.kernels}
    assert {"sj_reduce", "sj_reduce_block"} <= names


def test_argmax_ties_and_nan(tmp_path):
    net = Net("argties")
    x = net.input("x", (2, 600))
    net.output(*net.op("argmax", [x], axis=1), *net.op("argmin", [x], axis=1), *net.op("max", [x], axis=1))
    g = net.graph()
    feeds = {"x": np.zeros((2, 600), np.float32)}
    feeds["x"][0, [17, 300, 599]] = 5.0                       # first maximum wins across threads
    feeds["x"][1, 450] = np.nan                               # NaN is the extreme, and propagates in max
    got, want, _ = emulate_graph(g, feeds, tmp_path)
    for a, b in zip(got, want):
        assert_close(a, b)


def test_softmax_family(tmp_path):
    net = Net("softmax")
    x = net.input("x", (3, 5, 7))
    wide = net.input("wide", (2, 300))
    net.output(*net.op("softmax", [x]), *net.op("softmax", [x], axis=1), *net.op("log_softmax", [x], axis=0))
    net.output(*net.op("softmax", [x], temperature=2.5), *net.op("softmin", [x], axis=2))
    net.output(*net.op("softmax", [wide]), *net.op("log_softmax", [wide]), *net.op("softmin", [wide]))
    net.output(*net.op("SoftmaxActivation", [x], mode="channel"), *net.op("SoftmaxActivation", [wide]))
    x2 = net.input("x2", (3, 7))
    label = net.input("label", (3,), low=0, high=4)
    net.output(*net.op("SoftmaxOutput", [x2, label]))
    _check(net, tmp_path)


def test_layer_norm(tmp_path):
    net = Net("layernorm")
    x = net.input("x", (3, 5, 7))
    wide = net.input("wide", (2, 300))
    for data, axis, c in ((x, -1, 7), (x, 1, 5), (wide, -1, 300)):
        g = net.input(f"g{axis}{c}", (c,), const=True, low=0.5, high=1.5)
        b = net.input(f"b{axis}{c}", (c,), const=True)
        net.output(*net.op("LayerNorm", [data, g, b], axis=axis, eps=1e-4, output_mean_var=True))
    plan = _check(net, tmp_path)
    assert {"sj_layernorm", "sj_layernorm_block"} <= {k.name.rsplit("_", 1)[0] for k in plan.kernels}


def test_norms_activations_and_data_movement(tmp_path):
    net = Net("misc")
    x = net.input("x", (2, 4, 3, 5))
    gamma = net.input("gamma", (4,), const=True, low=0.5, high=1.5)
    beta = net.input("beta", (4,), const=True)
    mean = net.input("mean", (4,), const=True)
    var = net.input("var", (4,), const=True, low=0.5, high=2.0)
    net.output(*net.op("BatchNorm", [x, gamma, beta, mean, var], fix_gamma=False)[:1])
    net.output(*net.op("BatchNorm", [x, gamma, beta, mean, var], fix_gamma=True, eps=1e-3)[:1])
    for act in ("leaky", "elu", "selu", "gelu"):
        net.output(*net.op("LeakyReLU", [x], act_type=act, slope=0.3))
    net.output(*net.op("LeakyReLU", [x, gamma], act_type="prelu"))
    net.output(*net.op("transpose", [x], axes=(0, 3, 1, 2)), *net.op("Flatten", [x]))
    a, b = net.op("SliceChannel", [x], num_outputs=2, axis=1)
    net.output(a, b, *net.op("Concat", [b, x, a], dim=1, num_args=3),
               *net.op("stack", [a, b], axis=2, num_args=2))
    net.output(*net.op("slice_axis", [x], axis=3, begin=1, end=4), *net.op("slice", [x], begin=(0, 1), end=(2, 4),
                                                                            step=(1, 2)))
    net.output(*net.op("reverse", [x], axis=2), *net.op("tile", [b], reps=(1, 2, 1, 1)))
    row = net.input("row", (1, 4, 1, 1))
    net.output(*net.op("broadcast_to", [row], shape=(2, 4, 3, 5)))
    net.output(*net.op("Pad", [x], mode="constant", pad_width=(0, 0, 0, 0, 1, 2, 2, 1), constant_value=0.5))
    net.output(*net.op("Cast", [x], dtype="int32"), *net.op("Dropout", [x], p=0.5)[:1])
    cond = net.input("cond", (2,), "int32", 0, 1)
    neg, = net.op("negative", [x])
    net.output(*net.op("where", [cond, x, neg]))
    plan = _check(net, tmp_path)
    assert len(plan.kernels) < len(plan.launches)          # identical kernels are generated once


def test_batchnorm_kernel(tmp_path):
    """BatchNorm as its own kernel (the inference rewrites, which usually fold it away, off)."""
    net = Net("bn")
    x = net.input("x", (2, 4, 3, 5))
    gamma = net.input("gamma", (4,), const=True, low=0.5, high=1.5)
    beta = net.input("beta", (4,), const=True)
    mean = net.input("mean", (4,), const=True)
    var = net.input("var", (4,), const=True, low=0.5, high=2.0)
    net.output(*net.op("BatchNorm", [x, gamma, beta, mean, var], fix_gamma=False, eps=1e-3))
    g5 = net.input("g5", (5,), const=True, low=0.5, high=1.5)
    net.output(*net.op("BatchNorm", [x, g5, g5, g5, g5], axis=-1, fix_gamma=True)[:1])
    plan = _check(net, tmp_path, disabled=("inference_rewrites",))
    assert any(k.name.startswith("sj_batchnorm") for k in plan.kernels)


def test_embedding_and_loss_heads(tmp_path):
    net = Net("embed")
    idx = net.input("idx", (3, 4), low=-3, high=12)          # out-of-range indices clip
    idx_i = net.input("idx_i", (5,), "int32", -2, 11)
    w = net.input("w", (10, 7), const=True)
    e, = net.op("Embedding", [idx, w], input_dim=10, output_dim=7)
    net.output(e, *net.op("Embedding", [idx_i, w], input_dim=10, output_dim=7))
    label = net.input("label", (3, 4, 7))
    net.output(*net.op("LogisticRegressionOutput", [e, label]), *net.op("LinearRegressionOutput", [e, label]))
    _check(net, tmp_path)


def test_single_element_copies(tmp_path):
    """Copies of one element (an index space that merges to nothing) stay valid, warning-free C."""
    net = Net("one")
    x = net.input("x", (1, 2))
    a, b = net.op("SliceChannel", [x], num_outputs=2, axis=1)
    m, = net.op("elemwise_mul", [a, b])
    net.output(m, *net.op("Concat", [m, a], dim=1, num_args=2), *net.op("transpose", [x]))
    _check(net, tmp_path)


def test_kernel_inputs_the_expressions_do_not_read(tmp_path):
    """x - x simplifies to 0 but x stays a kernel input: no index variables for it."""
    net = Net("unread")
    x, row = net.input("x", (3, 4)), net.input("row", (1, 4))
    d, = net.op("elemwise_sub", [x, x])
    net.output(*net.op("broadcast_add", [d, row]))
    _check(net, tmp_path)


def test_integer_elementwise_graph(tmp_path):
    net = Net("ints")
    a = net.input("a", (4, 6), "int32", -20, 20)
    b = net.input("b", (4, 6), "int32", 1, 7)
    s, = net.op("elemwise_add", [a, b])
    m, = net.op("broadcast_mod", [s, b])
    d, = net.op("broadcast_div", [a, b])
    net.output(m, d, *net.op("_maximum", [s, d]), *net.op("abs", [a]))
    _check(net, tmp_path)


def test_unsupported_op_raises_naming_it():
    b = GraphBuilder(name="u")
    x = b.add_input("x", TensorType((4, 5), "float32"))
    y = b.add_node("topk", [x], {"k": 2, "ret_typ": "value"})[0]
    g = b.build([y])
    with pytest.raises(MXNetError, match="topk"):
        lower_graph(plan_graph(g), {}, "u")
