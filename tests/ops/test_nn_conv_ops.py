"""Dense/convolutional ops (symjit/ops/nn_conv.py): forward vs independent loop references,
gradients vs finite differences, shape inference (incl. filling weight shapes), errors,
the seed examples E48/E49/E108, and a real exported model (lenet)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symjit import nd
from symjit.base import MXNetError
from symjit.ops import apply_numpy, get_op
from symjit.ops.registry import numpy_emitter
from symjit.test_utils import check_op_gradient

from shared_data import model_path

RNG = np.random.default_rng(7)


def infer(name, attrs, shapes):
    op = get_op(name)
    return op.infer_shape(op.parse(attrs), list(shapes))


# ======================================================================================
# Independent references (direct loops; tiny shapes only)
# ======================================================================================

def conv_ref(x, w, b, stride, pad, dilate, groups):
    """Direct-loop N-D convolution, float64."""
    n, c = x.shape[:2]
    f = w.shape[0]
    kernel = w.shape[2:]
    nd_ = len(kernel)
    cg, fg = c // groups, f // groups
    out_sp = [(x.shape[2 + i] + 2 * pad[i] - (dilate[i] * (kernel[i] - 1) + 1)) // stride[i] + 1
              for i in range(nd_)]
    y = np.zeros((n, f, *out_sp))
    for bn, ff in itertools.product(range(n), range(f)):
        g = ff // fg
        for o in itertools.product(*(range(s) for s in out_sp)):
            acc = 0.0 if b is None else float(b[ff])
            for cc in range(cg):
                for k in itertools.product(*(range(kk) for kk in kernel)):
                    pos = [o[i] * stride[i] + k[i] * dilate[i] - pad[i] for i in range(nd_)]
                    if all(0 <= pos[i] < x.shape[2 + i] for i in range(nd_)):
                        acc += x[(bn, g * cg + cc, *pos)] * w[(ff, cc, *k)]
            y[(bn, ff, *o)] = acc
    return y


def deconv_ref(x, w, b, stride, pad, dilate, groups, out_sp):
    """Direct scatter loops: out[n, g*Fg+f, i*s - p + k*d] += x[n, c, i] * w[c, f, k]."""
    n, c = x.shape[:2]
    fg = w.shape[1]
    kernel = w.shape[2:]
    nd_ = len(kernel)
    cg = c // groups
    y = np.zeros((n, fg * groups, *out_sp))
    for bn, cc in itertools.product(range(n), range(c)):
        g = cc // cg
        for i in itertools.product(*(range(s) for s in x.shape[2:])):
            for ff in range(fg):
                for k in itertools.product(*(range(kk) for kk in kernel)):
                    pos = [i[d] * stride[d] + k[d] * dilate[d] - pad[d] for d in range(nd_)]
                    if all(0 <= pos[d] < out_sp[d] for d in range(nd_)):
                        y[(bn, g * fg + ff, *pos)] += x[(bn, cc, *i)] * w[(cc, ff, *k)]
    if b is not None:
        y += b.reshape((1, -1) + (1,) * nd_)
    return y


def pool_ref(x, kernel, stride, pad, pool_type, convention="valid", count_include_pad=True, p=None):
    """MXNet pool.h semantics, written as loops: windows start at o*s - p; max/lp over the part
    inside the input; avg divides by the window clipped to the padded input (or to the input)."""
    nd_ = len(kernel)
    in_sp = x.shape[2:]
    out_sp = []
    for d, k, s, pp in zip(in_sp, kernel, stride, pad):
        if convention == "valid":
            out_sp.append(1 + (d + 2 * pp - k) // s)
        elif convention == "full":
            out_sp.append(1 + math.ceil((d + 2 * pp - k) / s))
        else:
            out_sp.append(math.ceil((d + 2 * pp) / s))
    y = np.zeros(x.shape[:2] + tuple(out_sp))
    for n, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for o in itertools.product(*(range(s) for s in out_sp)):
            start = [o[i] * stride[i] - pad[i] for i in range(nd_)]
            end_pad = [min(start[i] + kernel[i], in_sp[i] + pad[i]) for i in range(nd_)]
            lo = [max(s_, 0) for s_ in start]
            hi = [min(e, in_sp[i]) for i, e in enumerate(end_pad)]
            vals = [x[(n, c, *pos)] for pos in itertools.product(*(range(a, b) for a, b in zip(lo, hi)))]
            if pool_type == "max":
                y[(n, c, *o)] = max(vals) if vals else np.finfo(np.float32).min
            elif pool_type == "sum":
                y[(n, c, *o)] = sum(vals)
            elif pool_type == "lp":
                s_ = sum(v ** p for v in vals)
                y[(n, c, *o)] = s_ if p == 1 else (math.sqrt(s_) if p == 2 else np.cbrt(s_))
            else:
                size = (np.prod([e - s_ for s_, e in zip(start, end_pad)]) if count_include_pad
                        else np.prod([b - a for a, b in zip(lo, hi)]))
                with np.errstate(divide="ignore", invalid="ignore"):
                    y[(n, c, *o)] = np.float64(sum(vals)) / size
    return y


def sampler_ref(data, grid):
    """Bilinear sampling with zero padding, float64 loops."""
    n, c, h, w = data.shape
    oh, ow = grid.shape[2:]
    out = np.zeros((n, c, oh, ow))
    for b, i, j in itertools.product(range(n), range(oh), range(ow)):
        xs = (grid[b, 0, i, j] + 1) * (w - 1) / 2
        ys = (grid[b, 1, i, j] + 1) * (h - 1) / 2
        x0, y0 = math.floor(xs), math.floor(ys)
        for yy, xx in ((y0, x0), (y0, x0 + 1), (y0 + 1, x0), (y0 + 1, x0 + 1)):
            if 0 <= yy < h and 0 <= xx < w:
                wgt = (1 - abs(xs - xx)) * (1 - abs(ys - yy))
                out[b, :, i, j] += wgt * data[b, :, yy, xx]
    return out


# ======================================================================================
# FullyConnected
# ======================================================================================

@pytest.mark.parametrize("flatten", [True, False])
def test_fully_connected_forward(flatten):
    x = RNG.normal(size=(3, 2, 5)).astype(np.float32)
    units = 10 if flatten else 5
    w = RNG.normal(size=(7, units)).astype(np.float32)
    b = RNG.normal(size=7).astype(np.float32)
    (y,) = apply_numpy("FullyConnected", [x, w, b], {"num_hidden": 7, "flatten": flatten})
    x64 = x.astype(np.float64)
    if flatten:
        want = np.einsum("nk,hk->nh", x64.reshape(3, 10), w) + b
    else:
        want = np.einsum("abk,hk->abh", x64, w) + b
    assert y.dtype == np.float32 and y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_fully_connected_no_bias_and_input_names():
    op = get_op("FullyConnected")
    assert op.input_names(op.parse({"num_hidden": 3})) == ["data", "weight", "bias"]
    assert op.input_names(op.parse({"num_hidden": 3, "no_bias": "True"})) == ["data", "weight"]
    x, w = RNG.normal(size=(2, 4)), RNG.normal(size=(3, 4))
    (y,) = apply_numpy("FullyConnected", [x, w], {"num_hidden": 3, "no_bias": True})
    np.testing.assert_allclose(y, x @ w.T, rtol=1e-12)


def test_fully_connected_infer_shape_fills_weight_and_bias():
    ins, outs = infer("FullyConnected", {"num_hidden": 10}, [(4, 3, 5), None, None])
    assert ins == [(4, 3, 5), (10, 15), (10,)] and outs == [(4, 10)]
    ins, outs = infer("FullyConnected", {"num_hidden": 10, "flatten": False}, [(4, 3, 5), None, None])
    assert ins[1] == (10, 5) and outs == [(4, 3, 10)]
    # unknown batch stays unknown; unknown data: nothing deduced (MXNet's shape function)
    ins, outs = infer("FullyConnected", {"num_hidden": 10}, [(0, 6), None, None])
    assert ins[1] == (10, 6) and outs == [(0, 10)]
    ins, outs = infer("FullyConnected", {"num_hidden": 10, "no_bias": True}, [None, None])
    assert ins[1] is None and outs == [None]
    # in_units deduced from a known weight when flatten=False
    ins, _ = infer("FullyConnected", {"num_hidden": 2, "flatten": False}, [(4, 0), (2, 9), None])
    assert ins[0] == (4, 9)


def test_empty_batch():
    """A batch of zero samples gives empty outputs of the right shape (no reshape ambiguity)."""
    (y,) = apply_numpy("FullyConnected", [np.zeros((0, 3, 2)), np.ones((4, 6)), np.ones(4)], {"num_hidden": 4})
    assert y.shape == (0, 4)
    (dw,) = apply_numpy("_backward_FullyConnected_weight", [np.zeros((0, 4)), np.zeros((0, 3, 2))],
                        {"num_hidden": 4})
    np.testing.assert_array_equal(dw, np.zeros((4, 6)))
    (y,) = apply_numpy("Convolution", [np.zeros((0, 3, 5, 5)), np.ones((2, 3, 3, 3))],
                       {"kernel": (3, 3), "num_filter": 2, "no_bias": True})
    assert y.shape == (0, 2, 3, 3)
    (y,) = apply_numpy("Pooling", [np.zeros((0, 3, 5, 5))], {"kernel": (2, 2)})
    assert y.shape == (0, 3, 4, 4)
    # an empty spatial dim is an error (not "unknown", as 0 means in shape inference)
    with pytest.raises(MXNetError, match="Convolution.*empty spatial"):
        apply_numpy("Convolution", [np.zeros((1, 3, 0, 5)), np.ones((2, 3, 1, 1))],
                    {"kernel": (1, 1), "num_filter": 2, "no_bias": True})
    with pytest.raises(MXNetError, match="Pooling.*empty spatial"):
        apply_numpy("Pooling", [np.zeros((1, 3, 0, 5))], {"kernel": (1, 1)})


def test_fully_connected_shape_errors():
    with pytest.raises(MXNetError, match=r"FullyConnected.*weight.*\(10, 15\).*\(10, 14\)"):
        infer("FullyConnected", {"num_hidden": 10}, [(4, 3, 5), (10, 14), None])
    with pytest.raises(MXNetError, match="FullyConnected.*bias"):
        infer("FullyConnected", {"num_hidden": 10}, [(4, 3), None, (9,)])
    with pytest.raises(MXNetError, match="FullyConnected"):
        apply_numpy("FullyConnected", [np.ones((2, 3)), np.ones((4, 2)), np.ones(4)], {"num_hidden": 4})


@pytest.mark.parametrize("flatten", [True, False])
def test_fully_connected_gradient(flatten):
    x = RNG.normal(size=(3, 2, 4))
    w = RNG.normal(size=(5, 8 if flatten else 4))
    check_op_gradient("FullyConnected", [x, w, RNG.normal(size=5)], {"num_hidden": 5, "flatten": flatten})


def test_fully_connected_second_order():
    a = {"num_hidden": 3, "flatten": True}
    dy, w, x = RNG.normal(size=(2, 3)), RNG.normal(size=(3, 4)), RNG.normal(size=(2, 2, 2))
    check_op_gradient("_backward_FullyConnected_data", [dy, w, x], a, wrt=[0, 1])
    check_op_gradient("_backward_FullyConnected_weight", [dy, x], a)


# ======================================================================================
# Convolution
# ======================================================================================

CONV_CASES = [
    # (data shape, num_filter, kernel, stride, pad, dilate, groups)
    ((1, 3, 7), 5, (3,), (1,), (0,), (1,), 1),                    # 1-D, prime channels, batch 1
    ((2, 2, 9), 4, (2,), (3,), (2,), (2,), 2),                    # 1-D stride/pad/dilate/groups
    ((2, 3, 5, 6), 5, (3, 3), (1, 1), (1, 1), (1, 1), 1),         # 2-D same padding
    ((1, 4, 7, 5), 6, (3, 2), (2, 3), (1, 0), (1, 1), 2),         # anisotropic, odd sizes
    ((2, 6, 6, 7), 3, (2, 3), (1, 2), (2, 1), (2, 1), 3),         # dilation + groups
    ((1, 5, 5, 5), 5, (3, 3), (2, 2), (1, 1), (1, 1), 5),         # depthwise
    ((1, 3, 4, 4), 6, (3, 3), (1, 1), (1, 1), (1, 1), 3),         # depthwise multiplier 2
    ((1, 2, 3, 4, 4), 3, (2, 2, 3), (1, 2, 1), (0, 1, 1), (1, 1, 1), 1),  # 3-D
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}-k{c[2]}-s{c[3]}-g{c[6]}")
def test_convolution_forward_matches_loops(case):
    shape, nf, kernel, stride, pad, dilate, g = case
    x = RNG.normal(size=shape).astype(np.float32)
    w = RNG.normal(size=(nf, shape[1] // g) + kernel).astype(np.float32)
    b = RNG.normal(size=nf).astype(np.float32)
    attrs = {"kernel": kernel, "stride": stride, "pad": pad, "dilate": dilate, "num_filter": nf,
             "num_group": g}
    (y,) = apply_numpy("Convolution", [x, w, b], attrs)
    want = conv_ref(x.astype(np.float64), w.astype(np.float64), b, stride, pad, dilate, g)
    assert y.dtype == np.float32 and y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    # inference agrees with compute and fills weight/bias from data
    ins, outs = infer("Convolution", attrs, [shape, None, None])
    assert ins[1] == w.shape and ins[2] == (nf,) and outs[0] == y.shape


def test_convolution_string_attrs_and_defaults():
    """JSON-style string attributes; stride/dilate/pad default to 1/1/0."""
    x = RNG.normal(size=(1, 2, 5, 5))
    w = RNG.normal(size=(3, 2, 3, 3))
    (y,) = apply_numpy("Convolution", [x, w], {"kernel": "(3, 3)", "num_filter": "3", "no_bias": "True",
                                               "layout": "NCHW", "cudnn_tune": "off", "workspace": "512"})
    np.testing.assert_allclose(y, conv_ref(x, w, None, (1, 1), (0, 0), (1, 1), 1), rtol=1e-10)


@pytest.mark.parametrize("case", [CONV_CASES[1], CONV_CASES[3], CONV_CASES[4], CONV_CASES[6]],
                         ids=["1d", "2d-aniso", "2d-dilate-groups", "depthwise"])
def test_convolution_gradient(case):
    shape, nf, kernel, stride, pad, dilate, g = case
    x = RNG.normal(size=shape)
    w = RNG.normal(size=(nf, shape[1] // g) + kernel)
    attrs = {"kernel": kernel, "stride": stride, "pad": pad, "dilate": dilate, "num_filter": nf,
             "num_group": g}
    check_op_gradient("Convolution", [x, w, RNG.normal(size=nf)], attrs)


def test_convolution_family_second_order():
    geo = {"kernel": (3, 2), "stride": (2, 1), "pad": (1, 1), "dilate": (1, 2), "num_group": 2}
    x = RNG.normal(size=(1, 4, 5, 5))
    w = RNG.normal(size=(4, 2, 3, 2))
    (y,) = apply_numpy("Convolution", [x, w], dict(geo, num_filter=4, no_bias=True))
    dy = RNG.normal(size=y.shape)
    check_op_gradient("_backward_Convolution_data", [dy, w, x], geo, wrt=[0, 1])
    check_op_gradient("_backward_Convolution_weight", [dy, x], geo)
    check_op_gradient("_backward_Deconvolution_data", [x, RNG.normal(size=(4, 2, 3, 2)), dy], geo,
                      wrt=[0, 1])
    check_op_gradient("_backward_bias", [dy, RNG.normal(size=4)], {"axis": 1}, wrt=[0])
    check_op_gradient("_broadcast_bias", [RNG.normal(size=4), dy], {"axis": 1}, wrt=[0])


def test_convolution_backward_data_is_adjoint():
    """<conv(x), dy> == <x, backward_data(dy)> for random x, dy (independent of the gradient rule)."""
    geo = {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "dilate": (1, 1), "num_group": 1}
    x = RNG.normal(size=(2, 3, 7, 6))
    w = RNG.normal(size=(4, 3, 3, 3))
    (y,) = apply_numpy("Convolution", [x, w], dict(geo, num_filter=4, no_bias=True))
    dy = RNG.normal(size=y.shape)
    (dx,) = apply_numpy("_backward_Convolution_data", [dy, w, x], geo)
    (dw,) = apply_numpy("_backward_Convolution_weight", [dy, x], geo)
    assert math.isclose(np.sum(y * dy), np.sum(x * dx), rel_tol=1e-10)
    assert math.isclose(np.sum(y * dy), np.sum(w * dw), rel_tol=1e-10)


def test_convolution_hidden_ops_validate_inputs():
    geo = {"kernel": (3, 3), "pad": (1, 1)}
    x, w = np.ones((1, 2, 4, 4)), np.ones((3, 2, 3, 3))
    with pytest.raises(MXNetError, match="_backward_Convolution_data.*weight.*kernel"):
        apply_numpy("_backward_Convolution_data", [np.ones((1, 3, 4, 4)), np.ones((3, 2, 2, 2)), x], geo)
    with pytest.raises(MXNetError, match="_backward_Convolution_data.*ograd has 2 channels, expected 3"):
        apply_numpy("_backward_Convolution_data", [np.ones((1, 2, 4, 4)), w, x], geo)
    with pytest.raises(MXNetError, match="_backward_Convolution_data.*exceeds"):
        apply_numpy("_backward_Convolution_data", [np.ones((1, 3, 5, 4)), w, x], geo)
    with pytest.raises(MXNetError, match="_backward_Deconvolution_data.*data has 1 channels"):
        apply_numpy("_backward_Deconvolution_data", [np.ones((1, 2, 4, 4)), w, np.ones((1, 1, 4, 4))], geo)
    with pytest.raises(MXNetError, match="_backward_bias"):
        apply_numpy("_backward_bias", [np.ones((1, 3, 2, 2)), np.ones(4)], {"axis": 1})


def test_convolution_infer_shape_partial():
    attrs = {"kernel": (3, 3), "num_filter": 8, "pad": (1, 1)}
    ins, outs = infer("Convolution", attrs, [(0, 3, 10, 0), None, None])
    assert ins[1] == (8, 3, 3, 3) and outs == [(0, 8, 10, 0)]
    ins, outs = infer("Convolution", attrs, [None, None, None])
    assert ins[1] == (8, 0, 3, 3) and ins[2] == (8,) and outs == [None]
    ins, outs = infer("Convolution", dict(attrs, num_group=2), [(2, 0, 5, 5), (8, 2, 3, 3), None])
    assert ins[0] == (2, 4, 5, 5) and outs == [(2, 8, 5, 5)]


def test_convolution_errors():
    base = {"kernel": (3, 3), "num_filter": 4}
    with pytest.raises(MXNetError, match=r"Convolution.*kernel.*exceeds.*padded input"):
        infer("Convolution", base, [(1, 1, 2, 5), None, None])
    with pytest.raises(MXNetError, match=r"Convolution.*weight.*\(4, 3, 3, 3\).*\(4, 2, 3, 3\)"):
        infer("Convolution", base, [(1, 3, 5, 5), (4, 2, 3, 3), None])
    with pytest.raises(MXNetError, match="Convolution.*divisible by num_group"):
        infer("Convolution", dict(base, num_group=2), [(1, 3, 5, 5), None, None])
    with pytest.raises(MXNetError, match="Convolution.*4-D"):
        infer("Convolution", base, [(1, 3, 5), None, None])
    with pytest.raises(MXNetError, match="Convolution.*NHWC.*GPU"):
        infer("Convolution", dict(base, layout="NHWC"), [(1, 5, 5, 3), None, None])
    with pytest.raises(MXNetError, match="Convolution.*stride"):
        infer("Convolution", dict(base, stride=(1, 1, 1)), [(1, 3, 5, 5), None, None])
    with pytest.raises(MXNetError, match="Convolution.*weight"):
        apply_numpy("Convolution", [np.ones((1, 3, 5, 5)), np.ones((4, 3, 2, 2)), np.ones(4)], base)


def test_convolution_float16_and_float64():
    x = RNG.normal(size=(1, 2, 4, 4))
    w = RNG.normal(size=(3, 2, 2, 2))
    a = {"kernel": (2, 2), "num_filter": 3, "no_bias": True}
    want = conv_ref(x, w, None, (1, 1), (0, 0), (1, 1), 1)
    (y64,) = apply_numpy("Convolution", [x, w], a)
    (y16,) = apply_numpy("Convolution", [x.astype(np.float16), w.astype(np.float16)], a)
    assert y64.dtype == np.float64 and y16.dtype == np.float16
    np.testing.assert_allclose(y64, want, rtol=1e-12)
    np.testing.assert_allclose(y16, want, rtol=2e-2, atol=2e-2)


# ======================================================================================
# Deconvolution
# ======================================================================================

DECONV_CASES = [
    # (data shape, num_filter, kernel, stride, pad, adj, dilate, groups)
    ((1, 3, 4), 2, (3,), (2,), (1,), (1,), (1,), 1),
    ((2, 2, 3, 4), 3, (3, 2), (2, 1), (1, 0), (1, 0), (1, 1), 1),
    ((1, 4, 3, 3), 6, (2, 3), (3, 2), (0, 1), (2, 1), (1, 2), 2),
    ((1, 3, 4, 3), 3, (3, 3), (1, 1), (1, 1), (0, 0), (1, 1), 3),   # depthwise
]


@pytest.mark.parametrize("case", DECONV_CASES, ids=lambda c: f"{c[0]}-k{c[2]}-s{c[3]}-a{c[5]}")
def test_deconvolution_forward_matches_loops(case):
    shape, nf, kernel, stride, pad, adj, dilate, g = case
    x = RNG.normal(size=shape)
    w = RNG.normal(size=(shape[1], nf // g) + kernel)
    b = RNG.normal(size=nf)
    attrs = {"kernel": kernel, "stride": stride, "pad": pad, "adj": adj, "dilate": dilate,
             "num_filter": nf, "num_group": g, "no_bias": False}
    (y,) = apply_numpy("Deconvolution", [x, w, b], attrs)
    out_sp = [s * (i - 1) + d * (k - 1) + 1 - 2 * p + a
              for i, k, s, p, a, d in zip(shape[2:], kernel, stride, pad, adj, dilate)]
    assert y.shape == (shape[0], nf, *out_sp)
    np.testing.assert_allclose(y, deconv_ref(x, w, b, stride, pad, dilate, g, out_sp), rtol=1e-10,
                               atol=1e-12)
    ins, outs = infer("Deconvolution", attrs, [shape, None, None])
    assert ins[1] == w.shape and ins[2] == (nf,) and outs[0] == y.shape


def test_deconvolution_defaults_and_target_shape():
    op = get_op("Deconvolution")
    assert op.input_names(op.parse({"kernel": (2, 2), "num_filter": 1})) == ["data", "weight"]
    x = RNG.normal(size=(1, 2, 4, 5))
    w = RNG.normal(size=(2, 3, 3, 3))
    a = {"kernel": (3, 3), "stride": (2, 2), "num_filter": 3, "target_shape": (8, 10)}
    (y,) = apply_numpy("Deconvolution", [x, w], a)
    assert y.shape == (1, 3, 8, 10)
    # InferPad: excess = s*(in-1) + k - target -> pad (excess+1)//2, adj excess%2
    # H: 2*3+3-8 = 1 -> pad 1, adj 1; W: 2*4+3-10 = 1 -> pad 1, adj 1
    np.testing.assert_allclose(y, deconv_ref(x, w, None, (2, 2), (1, 1), (1, 1), 1, (8, 10)), rtol=1e-10)
    check_op_gradient("Deconvolution", [x, w], a)


@pytest.mark.parametrize("case", [DECONV_CASES[0], DECONV_CASES[2]], ids=["1d-adj", "2d-groups-dilate"])
def test_deconvolution_gradient(case):
    shape, nf, kernel, stride, pad, adj, dilate, g = case
    attrs = {"kernel": kernel, "stride": stride, "pad": pad, "adj": adj, "dilate": dilate,
             "num_filter": nf, "num_group": g, "no_bias": False}
    check_op_gradient("Deconvolution", [RNG.normal(size=shape), RNG.normal(size=(shape[1], nf // g) + kernel),
                                        RNG.normal(size=nf)], attrs)


def test_deconvolution_errors():
    a = {"kernel": (3, 3), "stride": (2, 2), "num_filter": 2}
    with pytest.raises(MXNetError, match="Deconvolution.*adj.*smaller than stride"):
        infer("Deconvolution", dict(a, adj=(2, 0)), [(1, 2, 4, 4), None])
    with pytest.raises(MXNetError, match="Deconvolution.*too big target shape"):
        infer("Deconvolution", dict(a, target_shape=(20, 20)), [(1, 2, 4, 4), None])
    with pytest.raises(MXNetError, match=r"Deconvolution.*weight.*\(2, 2, 3, 3\)"):
        infer("Deconvolution", a, [(1, 2, 4, 4), (2, 3, 3, 3)])


# ======================================================================================
# Pooling
# ======================================================================================

POOL_CASES = [
    # (data shape, kernel, stride, pad, convention)
    ((2, 3, 7, 6), (3, 2), (2, 2), (1, 1), "valid"),
    ((1, 2, 8, 7), (3, 3), (2, 2), (0, 1), "full"),
    ((1, 2, 5, 5), (2, 2), (3, 3), (1, 1), "full"),
    ((2, 3, 9), (4,), (3,), (2,), "valid"),
    ((1, 2, 4, 5, 3), (2, 2, 2), (2, 1, 2), (1, 0, 0), "full"),
]


@pytest.mark.parametrize("pool_type", ["max", "avg", "sum"])
@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: f"{c[0]}-k{c[1]}-s{c[2]}-p{c[3]}-{c[4]}")
def test_pooling_forward_matches_loops(case, pool_type):
    shape, kernel, stride, pad, conv = case
    x = RNG.normal(size=shape).astype(np.float32)
    attrs = {"kernel": kernel, "stride": stride, "pad": pad, "pool_type": pool_type,
             "pooling_convention": conv}
    (y,) = apply_numpy("Pooling", [x], attrs)
    want = pool_ref(x.astype(np.float64), kernel, stride, pad, pool_type, conv)
    assert y.dtype == np.float32 and y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_pooling_output_size_formulas():
    """valid floors, full ceils (MXNet 1.x), same = ceil(x / s)."""
    def out(d, k, s, p, conv):
        return infer("Pooling", {"kernel": (k,), "stride": (s,), "pad": (p,), "pooling_convention": conv},
                     [(1, 1, d)])[1][0][2]
    assert [out(8, 3, 2, 0, "valid"), out(8, 3, 2, 0, "full")] == [3, 4]
    assert [out(7, 3, 2, 0, "valid"), out(7, 3, 2, 0, "full")] == [3, 3]
    assert [out(11, 3, 3, 1, "valid"), out(11, 3, 3, 1, "full")] == [4, 5]
    assert out(7, 3, 2, 0, "same") == 4 and out(6, 2, 3, 0, "same") == 2


def test_pooling_avg_count_include_pad_false_and_same():
    x = RNG.normal(size=(1, 2, 5, 6))
    a = {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg", "count_include_pad": False}
    (y,) = apply_numpy("Pooling", [x], a)
    np.testing.assert_allclose(y, pool_ref(x, (3, 3), (2, 2), (1, 1), "avg", count_include_pad=False),
                               rtol=1e-12)
    (y,) = apply_numpy("Pooling", [x], dict(a, count_include_pad=True))
    np.testing.assert_allclose(y, pool_ref(x, (3, 3), (2, 2), (1, 1), "avg"), rtol=1e-12)
    x1 = RNG.normal(size=(2, 2, 7))
    for pt in ("max", "avg"):
        (y,) = apply_numpy("Pooling", [x1], {"kernel": (3,), "stride": (2,), "pool_type": pt,
                                             "pooling_convention": "same"})
        np.testing.assert_allclose(y, pool_ref(x1, (3,), (2,), (0,), pt, "same"), rtol=1e-12)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_pooling_lp(p):
    x = RNG.uniform(0.2, 2.0, size=(1, 2, 5, 6))
    a = {"kernel": (2, 3), "stride": (1, 2), "pad": (1, 0), "pool_type": "lp", "p_value": p}
    (y,) = apply_numpy("Pooling", [x], a)
    np.testing.assert_allclose(y, pool_ref(x, (2, 3), (1, 2), (1, 0), "lp", p=p), rtol=1e-12)
    check_op_gradient("Pooling", [x], a)


@pytest.mark.parametrize("pool_type", ["max", "avg", "sum"])
def test_pooling_global(pool_type):
    x = RNG.normal(size=(2, 3, 4, 5)).astype(np.float32)
    a = {"kernel": (1, 1), "global_pool": "True", "pool_type": pool_type, "pooling_convention": "full",
         "pad": (0, 0), "stride": (1, 1), "layout": "NCHW"}
    (y,) = apply_numpy("Pooling", [x], a)
    want = {"max": np.max, "avg": np.mean, "sum": np.sum}[pool_type](x.astype(np.float64), axis=(2, 3),
                                                                    keepdims=True)
    assert y.shape == (2, 3, 1, 1)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    (y1,) = apply_numpy("Pooling", [x[:, :, 0]], {"global_pool": True, "pool_type": pool_type})
    assert y1.shape == (2, 3, 1)


def test_pooling_channel_last_layout():
    x = RNG.normal(size=(2, 5, 6, 3))
    a = {"kernel": (3, 2), "stride": (2, 2), "pad": (1, 0), "pool_type": "avg", "layout": "NHWC"}
    (y,) = apply_numpy("Pooling", [x], a)
    want = pool_ref(np.moveaxis(x, -1, 1), (3, 2), (2, 2), (1, 0), "avg")
    np.testing.assert_allclose(y, np.moveaxis(want, 1, -1), rtol=1e-12)
    assert infer("Pooling", a, [x.shape])[1] == [y.shape]
    check_op_gradient("Pooling", [x], a)


@pytest.mark.parametrize("pool_type", ["max", "avg", "sum"])
@pytest.mark.parametrize("case", [POOL_CASES[0], POOL_CASES[1], POOL_CASES[3]], ids=["2d", "2d-full", "1d"])
def test_pooling_gradient(case, pool_type):
    shape, kernel, stride, pad, conv = case
    x = RNG.permutation(int(np.prod(shape))).reshape(shape) / 7.0    # distinct values: no max ties
    check_op_gradient("Pooling", [x], {"kernel": kernel, "stride": stride, "pad": pad,
                                       "pool_type": pool_type, "pooling_convention": conv})


def test_pooling_max_backward_routes_to_first_maximum():
    x = np.array([[[[1.0, 3.0, 3.0], [0.0, 3.0, 2.0], [1.0, 1.0, 1.0]]]])
    a = {"kernel": (2, 2), "stride": (1, 1), "pool_type": "max"}
    (y,) = apply_numpy("Pooling", [x], a)
    dy = np.array([[[[1.0, 10.0], [100.0, 1000.0]]]])
    (dx,) = apply_numpy("_backward_Pooling", [dy, x, y], a)
    want = np.zeros_like(x)
    want[0, 0, 0, 1] = 1.0 + 10.0        # windows (0,0), (0,1): the 3 at (0,1) is first in row-major order
    want[0, 0, 1, 1] = 100.0 + 1000.0    # windows (1,0), (1,1): their only 3 is at (1,1)
    np.testing.assert_array_equal(dx, want)


def test_pooling_max_nan_and_empty_windows_follow_mxnet():
    """pool.h starts from the lowest finite value and keeps `v > max`: NaN never wins, and a
    window lying entirely in the padding yields the lowest float (not -inf)."""
    x = np.array([[[np.nan, 1.0, np.nan, np.nan, -np.inf]]], dtype=np.float32)
    (y,) = apply_numpy("Pooling", [x], {"kernel": (2,), "stride": (2,), "pool_type": "max",
                                        "pooling_convention": "full", "pad": (1,)})
    lowest = np.finfo(np.float32).min
    np.testing.assert_array_equal(y, [[[lowest, 1.0, lowest, lowest]]])


@pytest.mark.parametrize("pool_type", ["max", "avg", "sum"])
def test_pooling_second_order(pool_type):
    x = RNG.permutation(50).reshape(1, 2, 5, 5) / 9.0
    a = {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": pool_type}
    (y,) = apply_numpy("Pooling", [x], a)
    check_op_gradient("_backward_Pooling", [RNG.normal(size=y.shape), x, y], a, wrt=[0])
    if pool_type == "max":
        check_op_gradient("_pool_max_gather", [RNG.normal(size=x.shape), x], a, wrt=[0])
        # gather picks src at each window's argmax: with src = data it reproduces max pooling
        (g,) = apply_numpy("_pool_max_gather", [x, x], a)
        np.testing.assert_array_equal(g, y)


def test_pooling_errors():
    with pytest.raises(MXNetError, match=r"Pooling: kernel size \(5\) exceeds input \(2 padded to 4\)"):
        infer("Pooling", {"kernel": (5, 1), "pad": (1, 0)}, [(1, 1, 2, 3)])
    with pytest.raises(MXNetError, match="Pooling.*kernel must be given"):
        infer("Pooling", {}, [(1, 1, 4, 4)])
    with pytest.raises(MXNetError, match="Pooling.*p_value"):
        infer("Pooling", {"kernel": (2, 2), "pool_type": "lp"}, [(1, 1, 4, 4)])
    with pytest.raises(MXNetError, match="Pooling.*same.*pad"):
        infer("Pooling", {"kernel": (2,), "pad": (1,), "pooling_convention": "same"}, [(1, 1, 4)])
    with pytest.raises(MXNetError, match="Pooling.*4-D|Pooling.*needs 4-D"):
        infer("Pooling", {"kernel": (2, 2)}, [(1, 1, 4)])
    with pytest.raises(MXNetError, match="Pooling.*pool_type"):
        get_op("Pooling").parse({"kernel": (2, 2), "pool_type": "median"})


# ======================================================================================
# UpSampling
# ======================================================================================

def test_upsampling_nearest_single_and_multi():
    a = RNG.normal(size=(2, 3, 2, 3)).astype(np.float32)
    y = nd.UpSampling(nd.array(a), scale=3, sample_type="nearest").asnumpy()
    np.testing.assert_array_equal(y, np.kron(a, np.ones((1, 1, 3, 3), dtype=np.float32)))
    b = RNG.normal(size=(2, 2, 4, 6)).astype(np.float32)
    (yc,) = apply_numpy("UpSampling", [a, b], {"scale": 2, "sample_type": "nearest", "num_args": 2})
    assert yc.shape == (2, 5, 4, 6)
    np.testing.assert_array_equal(yc[:, :3], np.kron(a, np.ones((1, 1, 2, 2))))
    np.testing.assert_array_equal(yc[:, 3:], b)
    b3 = RNG.normal(size=(2, 3, 2, 3)).astype(np.float32)
    (ys,) = apply_numpy("UpSampling", [a, b3], {"scale": 2, "sample_type": "nearest", "num_args": 2,
                                                 "multi_input_mode": "sum"})
    np.testing.assert_allclose(ys, np.kron(a + b3, np.ones((1, 1, 2, 2))), rtol=1e-6)
    op = get_op("UpSampling")
    assert op.input_names(op.parse({"scale": 2, "sample_type": "nearest", "num_args": 2})) == ["arg0", "arg1"]


def test_upsampling_gradients():
    a = {"scale": 2, "sample_type": "nearest", "num_args": 2}
    check_op_gradient("UpSampling", [RNG.normal(size=(1, 2, 2, 3)), RNG.normal(size=(1, 1, 1, 3))], a)
    check_op_gradient("UpSampling", [RNG.normal(size=(1, 2, 2, 3)), RNG.normal(size=(1, 2, 4, 6))],
                      dict(a, multi_input_mode="sum"))


@pytest.mark.parametrize("scale", [2, 3])
def test_upsampling_bilinear_is_depthwise_deconvolution(scale):
    c = 2
    k = 2 * scale - scale % 2
    p = math.ceil((scale - 1) / 2)
    x = RNG.normal(size=(1, c, 3, 2))
    w = RNG.normal(size=(c, 1, k, k))
    a = {"scale": scale, "sample_type": "bilinear", "num_args": 1, "num_filter": c}
    (y,) = apply_numpy("UpSampling", [x, w], a)
    assert y.shape == (1, c, 3 * scale, 2 * scale)
    want = deconv_ref(x, w, None, (scale, scale), (p, p), (1, 1), c, (3 * scale, 2 * scale))
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-12)
    ins, _ = infer("UpSampling", a, [x.shape, None])
    assert ins[1] == (c, 1, k, k)
    op = get_op("UpSampling")
    assert op.input_names(op.parse(a)) == ["data", "weight"]
    check_op_gradient("UpSampling", [x, w], a)


def test_upsampling_errors():
    with pytest.raises(MXNetError, match="UpSampling.*does not divide"):
        infer("UpSampling", {"scale": 2, "sample_type": "nearest", "num_args": 2}, [(1, 1, 3, 3), (1, 1, 4, 4)])
    with pytest.raises(MXNetError, match="UpSampling.*channels must be the same"):
        infer("UpSampling", {"scale": 1, "sample_type": "nearest", "num_args": 2, "multi_input_mode": "sum"},
              [(1, 1, 3, 3), (1, 2, 3, 3)])
    with pytest.raises(MXNetError, match="UpSampling.*4-D"):
        infer("UpSampling", {"scale": 2, "sample_type": "nearest", "num_args": 1}, [(1, 3, 3)])
    with pytest.raises(MXNetError, match="UpSampling.*num_filter"):
        infer("UpSampling", {"scale": 2, "sample_type": "bilinear", "num_args": 1, "num_filter": 3},
              [(1, 2, 3, 3), None])


# ======================================================================================
# Embedding
# ======================================================================================

def test_embedding_seed_example_e108():
    y = nd.array([[0., 1., 2., 3., 4.], [5., 6., 7., 8., 9.], [10., 11., 12., 13., 14.],
                  [15., 16., 17., 18., 19.]])
    x = nd.array([[1., 3.], [0., 2.]])
    out = nd.Embedding(x, y, 4, 5)
    assert repr(out) == ("\n[[[ 5.  6.  7.  8.  9.]\n  [15. 16. 17. 18. 19.]]\n\n"
                         " [[ 0.  1.  2.  3.  4.]\n  [10. 11. 12. 13. 14.]]]\n<NDArray 2x2x5 @cpu(0)>")


def test_embedding_forward_clip_and_shapes():
    w = RNG.normal(size=(5, 3)).astype(np.float32)
    idx = np.array([[0.0, 4.9, -2.0], [7.0, 2.0, 1.0]], dtype=np.float32)
    (out,) = apply_numpy("Embedding", [idx, w], {"input_dim": 5, "output_dim": 3})
    rows = [[0, 4, 0], [4, 2, 1]]   # truncation toward zero, then clipping to [0, 4]
    np.testing.assert_array_equal(out, w[np.array(rows)])
    (out_i,) = apply_numpy("Embedding", [np.array([3, 1], dtype=np.int32), w], {"input_dim": 5, "output_dim": 3})
    np.testing.assert_array_equal(out_i, w[[3, 1]])
    ins, outs = infer("Embedding", {"input_dim": 5, "output_dim": 3}, [(2, 7), None])
    assert ins == [(2, 7), (5, 3)] and outs == [(2, 7, 3)]
    op = get_op("Embedding")
    assert op.infer_type(op.parse({"input_dim": 5, "output_dim": 3, "dtype": "float16"}),
                         ["int32", None]) == (["int32", "float16"], ["float16"])


def test_embedding_gradient_scatter_adds_repeated_rows():
    w = RNG.normal(size=(4, 3))
    idx = np.array([[1.0, 3.0, 1.0], [0.0, 1.0, 3.0]])
    check_op_gradient("Embedding", [idx, w], {"input_dim": 4, "output_dim": 3}, wrt=[1])
    dy = RNG.normal(size=(2, 3, 3))
    (dw,) = apply_numpy("_backward_Embedding", [dy, idx], {"input_dim": 4, "output_dim": 3})
    want = np.zeros((4, 3))
    for i, j in itertools.product(range(2), range(3)):
        want[int(idx[i, j])] += dy[i, j]
    np.testing.assert_allclose(dw, want, rtol=1e-12)
    op = get_op("Embedding")
    grads = op.grad(numpy_emitter(), op.parse({"input_dim": 4, "output_dim": 3}), [idx, w], [None], [dy])
    assert not np.any(grads[0])


def test_embedding_errors():
    with pytest.raises(MXNetError, match=r"Embedding.*weight.*\(4, 3\).*\(4, 2\)"):
        infer("Embedding", {"input_dim": 4, "output_dim": 3}, [(2,), (4, 2)])
    with pytest.raises(MXNetError, match="Embedding.*input_dim"):
        get_op("Embedding").parse({"output_dim": 3})


# ======================================================================================
# GridGenerator and BilinearSampler
# ======================================================================================

DATA_4X4 = [[[[2, 5, 3, 6], [1, 8, 7, 9], [0, 4, 1, 8], [2, 0, 3, 4]]]]


def test_seed_e48_bilinear_zoom_out():
    data = nd.array(DATA_4X4)
    affine = nd.array([[2, 0, 0, 0, 2, 0]])
    grid = nd.GridGenerator(data=affine, transform_type="affine", target_shape=(4, 4))
    out = nd.BilinearSampler(data, grid)
    assert repr(out) == (
        "\n[[[[0.        0.        0.        0.       ]\n   [0.        4.0000005 6.25      0.       ]\n"
        "   [0.        1.5       4.        0.       ]\n   [0.        0.        0.        0.       ]]]]\n"
        "<NDArray 1x1x4x4 @cpu(0)>")


def test_seed_e49_bilinear_warp_shift():
    data = nd.array(DATA_4X4)
    flow = nd.array([[np.ones((4, 4)), np.zeros((4, 4))]])
    grid = nd.GridGenerator(data=flow, transform_type="warp")
    out = nd.BilinearSampler(data, grid)
    assert repr(out) == ("\n[[[[5. 3. 6. 0.]\n   [8. 7. 9. 0.]\n   [4. 1. 8. 0.]\n   [0. 3. 4. 0.]]]]\n"
                         "<NDArray 1x1x4x4 @cpu(0)>")


def test_grid_generator_formulas():
    theta = RNG.normal(size=(2, 6))
    (g,) = apply_numpy("GridGenerator", [theta], {"transform_type": "affine", "target_shape": (3, 5)})
    ys, xs = np.meshgrid(np.linspace(-1, 1, 3), np.linspace(-1, 1, 5), indexing="ij")
    for n in range(2):
        t = theta[n].reshape(2, 3)
        np.testing.assert_allclose(g[n, 0], t[0, 0] * xs + t[0, 1] * ys + t[0, 2], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(g[n, 1], t[1, 0] * xs + t[1, 1] * ys + t[1, 2], rtol=1e-12, atol=1e-12)
    flow = RNG.normal(size=(1, 2, 3, 5))
    (gw,) = apply_numpy("GridGenerator", [flow], {"transform_type": "warp"})
    np.testing.assert_allclose(gw[0, 0], (flow[0, 0] + np.arange(5)) / 2.0 - 1, rtol=1e-12)
    np.testing.assert_allclose(gw[0, 1], (flow[0, 1] + np.arange(3)[:, None]) / 1.0 - 1, rtol=1e-12)


def test_bilinear_sampler_matches_loops():
    data = RNG.normal(size=(2, 3, 4, 5))
    grid = RNG.uniform(-1.3, 1.3, size=(2, 2, 3, 6))
    (out,) = apply_numpy("BilinearSampler", [data, grid], {})
    np.testing.assert_allclose(out, sampler_ref(data, grid), rtol=1e-12, atol=1e-12)
    assert infer("BilinearSampler", {}, [data.shape, grid.shape])[1] == [(2, 3, 3, 6)]


def test_spatial_transformer_gradients():
    check_op_gradient("GridGenerator", [RNG.normal(size=(2, 6))], {"transform_type": "affine",
                                                                  "target_shape": (3, 4)})
    check_op_gradient("GridGenerator", [RNG.normal(size=(1, 2, 3, 4))], {"transform_type": "warp"})
    check_op_gradient("_backward_GridGenerator", [RNG.normal(size=(2, 2, 3, 4))],
                      {"transform_type": "affine", "target_shape": (3, 4)})
    data = RNG.normal(size=(2, 2, 4, 5))
    # grid points whose source coordinates stay away from integer positions (kinks)
    grid = np.empty((2, 2, 3, 3))
    grid[:, 0] = (RNG.integers(-1, 5, size=(2, 3, 3)) + RNG.uniform(0.2, 0.8, size=(2, 3, 3))) * 2 / 4 - 1
    grid[:, 1] = (RNG.integers(-1, 4, size=(2, 3, 3)) + RNG.uniform(0.2, 0.8, size=(2, 3, 3))) * 2 / 3 - 1
    check_op_gradient("BilinearSampler", [data, grid], {})


def test_spatial_transformer_errors():
    with pytest.raises(MXNetError, match="GridGenerator.*target_shape"):
        infer("GridGenerator", {"transform_type": "affine"}, [(1, 6)])
    with pytest.raises(MXNetError, match=r"GridGenerator.*\(batch, 6\)"):
        infer("GridGenerator", {"transform_type": "affine", "target_shape": (2, 2)}, [(1, 5)])
    with pytest.raises(MXNetError, match="GridGenerator.*optical flow"):
        infer("GridGenerator", {"transform_type": "warp"}, [(1, 3, 4, 4)])
    with pytest.raises(MXNetError, match="BilinearSampler.*grid"):
        infer("BilinearSampler", {}, [(1, 1, 4, 4), (1, 3, 4, 4)])
    with pytest.raises(MXNetError, match="BilinearSampler.*batch"):
        apply_numpy("BilinearSampler", [np.ones((2, 1, 4, 4)), np.zeros((1, 2, 4, 4))])


# ======================================================================================
# Eager autograd through nd (the same rules the IR autodiff pass uses)
# ======================================================================================

def test_autograd_conv_pool_fc_chain():
    from symjit import autograd
    x = nd.array(RNG.normal(size=(2, 1, 6, 6)))
    w = nd.array(RNG.normal(size=(2, 1, 3, 3)))
    fw = nd.array(RNG.normal(size=(3, 8)))
    for a in (x, w, fw):
        a.attach_grad()
    with autograd.record():
        h = nd.Convolution(x, w, kernel=(3, 3), num_filter=2, no_bias=True)
        p = nd.Pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="avg")
        y = nd.FullyConnected(p, fw, num_hidden=3, no_bias=True)
    y.backward()
    assert x.grad.shape == x.shape and w.grad.shape == w.shape and fw.grad.shape == fw.shape

    def loss(xv):
        (hh,) = apply_numpy("Convolution", [xv, w.asnumpy()], {"kernel": (3, 3), "num_filter": 2, "no_bias": True})
        (pp,) = apply_numpy("Pooling", [hh], {"kernel": (2, 2), "stride": (2, 2), "pool_type": "avg"})
        return float(np.sum(pp.reshape(2, -1) @ fw.asnumpy().T))
    x0 = x.asnumpy().astype(np.float64)
    e = np.zeros_like(x0)
    e[1, 0, 2, 3] = 1e-3
    num = (loss(x0 + e) - loss(x0 - e)) / 2e-3
    assert math.isclose(float(x.grad.asnumpy()[1, 0, 2, 3]), num, rel_tol=1e-3, abs_tol=1e-4)


# ======================================================================================
# Real models exported by MXNet 1.9.1 (Conv, BatchNorm, Pooling max/avg/global, FC, depthwise)
# ======================================================================================

def _run_exported_model(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Run an exported graph node by node: this module's ops through apply_numpy, the few
    other ops (BatchNorm in inference, relu/tanh/sigmoid, Flatten, add, Dropout) as numpy formulas."""
    import json
    params = {k.split(":", 1)[1]: v.asnumpy() for k, v in nd.load(str(model_path(f"{name}-0000.params"))).items()}
    graph = json.loads(model_path(f"{name}-symbol.json").read_text())
    vals = {}
    for i, node in enumerate(graph["nodes"]):
        op, attrs = node["op"], node.get("attrs", {})
        ins = [vals[j] for j, *_ in node["inputs"]]
        if op == "null":
            y = (np.load(model_path(f"{name}-input.npy")) if node["name"] == "data" else params[node["name"]])
        elif op in ("Convolution", "FullyConnected", "Pooling"):
            (y,) = apply_numpy(op, ins, attrs)
        elif op == "BatchNorm":
            x, gamma, beta, mean, var = ins
            sh = (1, -1, 1, 1)
            gamma = np.ones_like(gamma) if attrs.get("fix_gamma", "True") == "True" else gamma
            y = ((x - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + float(attrs.get("eps", 1e-3)))
                 * gamma.reshape(sh) + beta.reshape(sh))
        elif op == "Activation":
            y = {"relu": lambda v: np.maximum(v, 0), "tanh": np.tanh,
                 "sigmoid": lambda v: 1 / (1 + np.exp(-v))}[attrs["act_type"]](ins[0])
        elif op == "Flatten":
            y = ins[0].reshape(ins[0].shape[0], -1)
        elif op == "elemwise_add":
            y = ins[0] + ins[1]
        elif op == "Dropout":
            y = ins[0]
        else:
            raise AssertionError(f"unexpected op {op} in {name}")
        vals[i] = np.asarray(y, dtype=np.float32)
    return vals[graph["heads"][0][0]], np.load(model_path(f"{name}-output.npy"))


@pytest.mark.parametrize("name", ["lenet", "mlp", "resnet18_v1", "mobilenet1.0"])
def test_exported_model_matches_mxnet_output(name):
    got, want = _run_exported_model(name)
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) < 1e-4 * max(1.0, float(np.max(np.abs(want))))


# ======================================================================================
# The same gradient rules through the IR autodiff pass (IR values instead of arrays)
# ======================================================================================

def test_ir_autodiff_through_conv_family_graph():
    ir = pytest.importorskip("symjit.ir")
    passes = pytest.importorskip("symjit.passes")
    if not hasattr(passes, "autodiff") or not hasattr(passes, "infer_types"):
        pytest.skip("IR autodiff pass not available")
    f64 = "float64"
    b = ir.GraphBuilder(name="cnn")
    x = b.add_input("data", ir.TensorType((2, 2, 6, 5), f64))
    cw, cb = b.add_input("conv_weight"), b.add_input("conv_bias")
    dw = b.add_input("deconv_weight")
    fw, fb = b.add_input("fc_weight"), b.add_input("fc_bias")
    emb_w = b.add_input("emb_weight")
    idx = b.add_input("idx", ir.TensorType((2, 3), f64))
    (h,) = b.add_node("Convolution", [x, cw, cb], {"kernel": (3, 2), "pad": (1, 1), "stride": (1, 2),
                                                  "num_filter": 4, "num_group": 2})
    (h,) = b.add_node("Pooling", [h], {"kernel": (2, 2), "stride": (2, 1), "pool_type": "avg",
                                       "pooling_convention": "full"})
    (h,) = b.add_node("Deconvolution", [h, dw], {"kernel": (2, 2), "stride": (2, 2), "num_filter": 2})
    (h,) = b.add_node("UpSampling", [h], {"scale": 2, "sample_type": "nearest", "num_args": 1})
    (h,) = b.add_node("FullyConnected", [h, fw, fb], {"num_hidden": 3})
    (e,) = b.add_node("Embedding", [idx, emb_w], {"input_dim": 4, "output_dim": 3, "dtype": f64})
    g = b.build([h, e])
    g, _ = passes.infer_types(g)
    ir.verify(g)
    rng = np.random.default_rng(3)
    feeds = {v: (np.array([[0.0, 3.0, 1.0], [3.0, 3.0, 2.0]]) if v.name == "idx"
                 else rng.uniform(-1, 1, v.type.shape)) for v in g.args}
    assert feeds[[v for v in g.args if v.name == "conv_weight"][0]].shape == (4, 1, 3, 2)  # filled by inference
    heads = [rng.uniform(-1, 1, v.type.shape) for v in g.outputs]
    wrt = [v for v in g.args if v.name != "idx"]
    bwd, st = passes.autodiff(g, wrt)
    ir.verify(bwd)
    res = ir.run(g, feeds, keep=[f for f, _ in st.saved])
    bfeeds = {bb: res.kept[f] for f, bb in st.saved}
    bfeeds.update(dict(zip(st.head_grads, heads)))
    grads = ir.run(bwd, bfeeds).outputs

    def loss():
        return float(sum(np.sum(o * hd) for o, hd in zip(ir.run(g, feeds).outputs, heads)))
    for (v, _), gr in zip(st.grad_outputs, grads):
        xv = feeds[v]
        for i in list(np.ndindex(xv.shape))[::5]:           # every fifth entry keeps this fast
            old = xv[i]
            xv[i] = old + 1e-6
            fp = loss()
            xv[i] = old - 1e-6
            fm = loss()
            xv[i] = old
            assert math.isclose(gr[i], (fp - fm) / 2e-6, rel_tol=1e-4, abs_tol=1e-6), (v.name, i)


# ======================================================================================
# Random geometries (Hypothesis) against the loop references
# ======================================================================================

@st.composite
def _geometry(draw):
    nd_ = draw(st.integers(1, 2))
    g = draw(st.integers(1, 3))
    cg, fg = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd_))
    dilate = tuple(draw(st.integers(1, 2)) for _ in range(nd_))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(nd_))
    pad = tuple(draw(st.integers(0, 2)) for _ in range(nd_))
    ext = [(k - 1) * d + 1 for k, d in zip(kernel, dilate)]
    spatial = tuple(draw(st.integers(max(1, e - 2 * p), e + 4)) for e, p in zip(ext, pad))
    n = draw(st.integers(1, 2))
    return n, g, cg, fg, kernel, dilate, stride, pad, spatial, draw(st.integers(0, 2 ** 31))


@settings(max_examples=25, deadline=None)
@given(_geometry())
def test_random_convolution_and_deconvolution_geometries(geo):
    n, g, cg, fg, kernel, dilate, stride, pad, spatial, seed = geo
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, g * cg) + spatial)
    w = rng.normal(size=(g * fg, cg) + kernel)
    attrs = {"kernel": kernel, "stride": stride, "dilate": dilate, "pad": pad, "num_filter": g * fg,
             "num_group": g, "no_bias": True}
    (y,) = apply_numpy("Convolution", [x, w], attrs)
    np.testing.assert_allclose(y, conv_ref(x, w, None, stride, pad, dilate, g), rtol=1e-10, atol=1e-10)
    # Deconvolution of y with the same weight (read as (C_in=F, F_out/g=Cg)) and some adj
    adj = tuple(min(s - 1, 1) for s in stride)
    dattrs = {"kernel": kernel, "stride": stride, "dilate": dilate, "pad": pad, "adj": adj,
              "num_filter": g * cg, "num_group": g}
    out_sp = [s * (i - 1) + (k - 1) * d + 1 - 2 * p + a
              for i, k, s, p, a, d in zip(y.shape[2:], kernel, stride, pad, adj, dilate)]
    if min(out_sp) <= 0:
        with pytest.raises(MXNetError, match="Deconvolution"):
            apply_numpy("Deconvolution", [y, w], dattrs)
        return
    (z,) = apply_numpy("Deconvolution", [y, w], dattrs)
    np.testing.assert_allclose(z, deconv_ref(y, w, None, stride, pad, dilate, g, out_sp), rtol=1e-10,
                               atol=1e-10)


@settings(max_examples=25, deadline=None)
@given(_geometry(), st.sampled_from(["max", "avg", "sum"]), st.sampled_from(["valid", "full"]),
       st.booleans())
def test_random_pooling_geometries(geo, pool_type, convention, count_include_pad):
    n, _, c, _, kernel, _, stride, pad, spatial, seed = geo
    if any(k > s + 2 * p for k, s, p in zip(kernel, spatial, pad)):
        with pytest.raises(MXNetError, match="Pooling: kernel size"):
            infer("Pooling", {"kernel": kernel, "stride": stride, "pad": pad}, [(n, c) + spatial])
        return
    x = np.random.default_rng(seed).normal(size=(n, c) + spatial)
    attrs = {"kernel": kernel, "stride": stride, "pad": pad, "pool_type": pool_type,
             "pooling_convention": convention, "count_include_pad": count_include_pad}
    (y,) = apply_numpy("Pooling", [x], attrs)
    want = pool_ref(x, kernel, stride, pad, pool_type, convention, count_include_pad)
    if pool_type == "max":      # an all-padding window is the lowest value of the array's dtype
        want = np.where(want == np.finfo(np.float32).min, np.finfo(np.float64).min, want)
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-10)


def test_pooling_same_accepts_zero_pad_and_deconvolution_target_ignores_adj():
    """MXNet: 'same' pooling takes any all-zero pad; target_shape overrides adj."""
    import symjit as mx
    out = mx.nd.Pooling(mx.nd.ones((1, 1, 10)), kernel=2, stride=2, pad=(0, 0, 0), pool_type="max",
                        pooling_convention="same")
    assert out.shape == (1, 1, 5)
    s = mx.sym.Deconvolution(mx.sym.var("data"), kernel=(3, 3), stride=(2, 2), target_shape=(8, 8),
                             adj=(101, 101), num_filter=2)
    assert s.infer_shape(data=(1, 3, 4, 4))[1] == [(1, 2, 8, 8)]
