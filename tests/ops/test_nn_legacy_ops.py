"""LRN, SVMOutput, ROIPooling, im2col/col2im, SpatialTransformer, Crop: forward against numpy
formulations of MXNet's semantics, gradients against finite differences."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from symjit.ops import apply_numpy
from symjit.test_utils import check_op_gradient

RNG = np.random.default_rng(0)


def test_lrn():
    x = RNG.normal(size=(2, 5, 3, 3))
    out = apply_numpy("LRN", [x], {"nsize": 3, "alpha": 0.1})[0]
    ref = np.zeros_like(x)
    for c in range(5):
        s = sum(x[:, j] ** 2 for j in range(max(0, c - 1), min(5, c + 2)))
        ref[:, c] = x[:, c] * (2 + 0.1 / 3 * s) ** -0.75
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    check_op_gradient("LRN", [x], {"nsize": 3, "alpha": 0.1})
    s = mx.sym.LRN(mx.sym.var("data"), nsize=1, name="lrn")
    assert s.list_outputs() == ["lrn_output"]


@pytest.mark.parametrize("use_linear", [True, False])
def test_svm_output(use_linear):
    x = RNG.uniform(size=(20, 10)).astype(np.float32)
    lab = RNG.integers(0, 10, 20)
    xs, ls = mx.sym.var("X"), mx.sym.var("L")
    y = mx.sym.SVMOutput(data=xs, label=ls, use_linear=use_linear, margin=1.5, regularization_coefficient=0.5)
    grad = mx.nd.zeros((20, 10))
    ex = y.bind(mx.cpu(), args=[mx.nd.array(x), mx.nd.array(lab)], args_grad={"X": grad})
    ex.forward(is_train=True)
    np.testing.assert_array_equal(ex.outputs[0].asnumpy(), x)
    ex.backward()
    sign = np.where(lab[:, None] == np.arange(10), 1.0, -1.0)
    slack = 1.5 - sign * x
    expected = (-0.5 * sign * (slack > 0)) if use_linear else (-2 * 0.5 * sign * np.maximum(slack, 0))
    np.testing.assert_allclose(grad.asnumpy(), expected, rtol=1e-5, atol=1e-6)


def test_roi_pooling():
    data = RNG.normal(size=(2, 3, 12, 8))
    rois = np.array([[0, 1.1, 1.1, 6.2, 6.2], [1, 3.1, 1.1, 5.2, 10.2], [0, 3, 3, 3, 3]])
    out = apply_numpy("ROIPooling", [data, rois], {"pooled_size": (2, 2), "spatial_scale": 1.0})[0]
    # roi 0: rows/cols 1..6 -> bins [1,4) and [4,7) per axis
    np.testing.assert_allclose(out[0, :, 0, 0], data[0, :, 1:4, 1:4].max(axis=(1, 2)))
    np.testing.assert_allclose(out[0, :, 1, 1], data[0, :, 4:7, 4:7].max(axis=(1, 2)))
    np.testing.assert_allclose(out[2, :, 0, 0], data[0, :, 3, 3])
    check_op_gradient("ROIPooling", [data, rois], {"pooled_size": (4, 4), "spatial_scale": 1.0}, wrt=[0])
    with pytest.raises(MXNetError, match="ROIPooling.*batch index"):
        apply_numpy("ROIPooling", [data, np.array([[5, 0, 0, 1, 1.0]])], {"pooled_size": (2, 2), "spatial_scale": 1.0})


@pytest.mark.parametrize("k,s,d,p", [(3, 1, 1, 0), (3, 2, 1, 0), (3, 2, 2, 1)])
def test_im2col_is_convolution_and_col2im_its_adjoint(k, s, d, p):
    kw = dict(kernel=(k, k), stride=(s, s), dilate=(d, d), pad=(p, p))
    data = mx.nd.array(RNG.uniform(size=(2, 3, 11, 9)))
    w = mx.nd.array(RNG.uniform(size=(4, 3, k, k)))
    col = mx.nd.im2col(data, **kw)
    c1 = mx.nd.dot(col.transpose((0, 2, 1)), w.reshape(4, -1).T).transpose((0, 2, 1)).asnumpy()
    c2 = mx.nd.Convolution(data, num_filter=4, weight=w, no_bias=True, **kw).asnumpy()
    np.testing.assert_allclose(c1.reshape(c2.shape), c2, rtol=1e-5, atol=1e-5)
    im1 = mx.nd.col2im(col, (11, 9), **kw).asnumpy()
    im2 = (mx.nd.col2im(mx.nd.ones_like(col), (11, 9), **kw) * data).asnumpy()
    np.testing.assert_allclose(im1, im2, rtol=1e-5, atol=1e-5)
    x = RNG.normal(size=(1, 2, 6, 5))
    check_op_gradient("im2col", [x], kw)
    check_op_gradient("col2im", [apply_numpy("im2col", [x], kw)[0]], dict(output_size=(6, 5), **kw))


def test_spatial_transformer():
    data, loc = mx.sym.Variable("data"), mx.sym.Variable("loc")
    stn = mx.sym.SpatialTransformer(data=data, loc=loc, target_shape=(3, 3), transform_type="affine",
                                    sampler_type="bilinear")
    assert stn.infer_shape(data=(1, 2, 5, 5))[1] == [(1, 2, 3, 3)]
    dv = mx.nd.array(RNG.normal(size=(1, 2, 5, 5)))
    grads = [mx.nd.zeros((1, 2, 5, 5)), mx.nd.zeros((1, 6))]
    ex = stn.bind(mx.cpu(), args={"data": dv, "loc": mx.nd.array([[0.5, 0, 0, 0, 0.5, 0]])}, args_grad=grads)
    ex.forward(is_train=True)
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), dv.asnumpy()[:, :, 1:4, 1:4], rtol=1e-5, atol=1e-6)
    ex.backward([mx.nd.ones((1, 2, 3, 3))])
    expected = np.zeros((5, 5))
    expected[1:4, 1:4] = 1
    np.testing.assert_allclose(grads[0].asnumpy()[0, 0], expected, atol=1e-6)
    check_op_gradient("SpatialTransformer", [RNG.normal(size=(1, 2, 5, 5)),
                                             np.array([[0.437, 0.113, 0.031, 0.053, 0.409, -0.021]])],
                      {"target_shape": (3, 3), "transform_type": "affine", "sampler_type": "bilinear"}, eps=1e-6)


def test_crop():
    x = RNG.normal(size=(1, 2, 5, 5))
    np.testing.assert_array_equal(mx.nd.Crop(mx.nd.array(x), num_args=1, h_w=(2, 3), center_crop=True).asnumpy(),
                                  x[:, :, 1:3, 1:4].astype(np.float32))
    like = mx.nd.zeros((1, 1, 3, 2))
    np.testing.assert_array_equal(mx.nd.Crop(mx.nd.array(x), like, num_args=2, offset=(2, 1)).asnumpy(),
                                  x[:, :, 2:5, 1:3].astype(np.float32))
    check_op_gradient("Crop", [x], {"num_args": 1, "h_w": (2, 3), "offset": (1, 1)})
    with pytest.raises(MXNetError, match="Crop.*exceeds"):
        mx.nd.Crop(mx.nd.array(x), num_args=1, h_w=(4, 4), offset=(2, 2))


def _naive_correlation(a, b, k, md, s1, s2, pad, mul):
    pa = np.pad(a, [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    pb = np.pad(b, [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    border = md + (k - 1) // 2
    th, tw = (pa.shape[2] - 2 * border) // s1, (pa.shape[3] - 2 * border) // s1
    r = md // s2
    out = np.zeros((a.shape[0], (2 * r + 1) ** 2, th, tw))
    for i in range(th):
        for j in range(tw):
            y1, x1 = i * s1 + md, j * s1 + md
            for c, (oy, ox) in enumerate((oy, ox) for oy in range(-r, r + 1) for ox in range(-r, r + 1)):
                w1 = pa[:, :, y1:y1 + k, x1:x1 + k]
                w2 = pb[:, :, y1 + oy * s2:y1 + oy * s2 + k, x1 + ox * s2:x1 + ox * s2 + k]
                out[:, c, i, j] = (w1 * w2 if mul else np.abs(w1 - w2)).sum(axis=(1, 2, 3))
    return out / (k * k * a.shape[1])


@pytest.mark.parametrize("shape,k,md,s1,s2,pad,mul", [((1, 2, 6, 6), 1, 2, 1, 1, 2, False),
                                                      ((1, 1, 7, 7), 1, 2, 1, 2, 2, True),
                                                      ((2, 1, 6, 4), 3, 1, 2, 1, 2, False),
                                                      ((1, 1, 7, 7), 5, 1, 1, 1, 2, True)])
def test_correlation(shape, k, md, s1, s2, pad, mul):
    a, b = RNG.normal(size=shape), RNG.normal(size=shape)
    attrs = dict(kernel_size=k, max_displacement=md, stride1=s1, stride2=s2, pad_size=pad, is_multiply=mul)
    got = apply_numpy("Correlation", [a, b], attrs)[0]
    np.testing.assert_allclose(got, _naive_correlation(a, b, k, md, s1, s2, pad, mul), rtol=1e-10, atol=1e-12)
    check_op_gradient("Correlation", [a, b], attrs)
    with pytest.raises(MXNetError, match="Correlation"):
        mx.nd.Correlation(mx.nd.ones((1, 1, 28, 28)), mx.nd.ones((1, 1, 28, 28)), kernel_size=27)


def test_correlation_abs_ties_follow_mxnet():
    """|a - b| at a == b differentiates as +1 for data1 and -1 for data2 (MXNet's kernel)."""
    ones = np.ones((1, 1, 3, 3))
    attrs = dict(kernel_size=1, max_displacement=0, stride1=1, stride2=1, pad_size=0, is_multiply=False)
    g1, g2 = apply_numpy("_backward_Correlation", [np.ones((1, 1, 3, 3)), ones, ones], attrs)
    np.testing.assert_array_equal(g1, ones)
    np.testing.assert_array_equal(g2, -ones)
