"""Contrib vision operators (AdaptiveAvgPooling2D, BilinearResize2D, ROIAlign, RROIAlign,
PSROIPooling, DeformableConvolution, Proposal, MultiProposal, SyncBatchNorm): outputs and
gradients against MXNet 1.9.1's (tests/data/contrib_ops/golden.npz, made by make_golden.py
there), forward against straightforward loop implementations of the documented formulas,
gradients against finite differences, and bad input refused with MXNetError."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from symjit.ops import apply_numpy
from symjit.test_utils import check_op_gradient

GOLDEN = np.load(Path(__file__).resolve().parents[1] / "data" / "contrib_ops" / "golden.npz")
CASES = sorted({k.split(":")[0] for k in GOLDEN.files})
RNG = np.random.default_rng(0)


def _case(name):
    get = lambda key: GOLDEN[f"{name}:{key}"]
    n_in = sum(1 for k in GOLDEN.files if k.startswith(f"{name}:in"))
    return (str(get("op")), json.loads(str(get("attrs"))), [get(f"in{k}") for k in range(n_in)], get)


@pytest.mark.parametrize("name", CASES)
def test_matches_mxnet(name):
    op, attrs, inputs, get = _case(name)
    arrs = [mx.nd.array(x, dtype=x.dtype) for x in inputs]
    has_grad = f"{name}:grad0" in GOLDEN.files
    for a in arrs:
        a.attach_grad()
    with mx.autograd.record():
        outs = getattr(mx.nd.contrib, op)(*arrs, **attrs)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    for k, o in enumerate(outs):
        key = f"{name}:out{k}"
        if key in GOLDEN.files:
            np.testing.assert_allclose(o.asnumpy(), GOLDEN[key], rtol=1e-4, atol=1e-5, err_msg=key)
    if has_grad:
        outs[0].backward(mx.nd.array(get("head")))
        for k, a in enumerate(arrs):
            if op == "SyncBatchNorm" and k >= 3:
                continue                      # aux states: MXNet leaves their gradient unwritten
            np.testing.assert_allclose(a.grad.asnumpy(), get(f"grad{k}"), rtol=1e-4, atol=1e-4,
                                       err_msg=f"{name}: gradient of input {k}")


# ---- straightforward reference loops ------------------------------------------------------

def _naive_adaptive(x, oh, ow):
    n, c, h, w = x.shape
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        h0, h1 = math.floor(i * h / oh), math.ceil((i + 1) * h / oh)
        for j in range(ow):
            w0, w1 = math.floor(j * w / ow), math.ceil((j + 1) * w / ow)
            y[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    return y


def _naive_bilinear(x, oh, ow, align):
    n, c, h, w = x.shape
    y = np.zeros((n, c, oh, ow))

    def src(d, i, o):
        if align:
            return d * ((i - 1) / (o - 1) if o > 1 else 0.0)
        return max((d + 0.5) * i / o - 0.5, 0.0)
    for a in range(oh):
        sy = src(a, h, oh)
        y0 = int(sy)
        y1, ly = min(y0 + 1, h - 1), sy - y0
        for b in range(ow):
            sx = src(b, w, ow)
            x0 = int(sx)
            x1, lx = min(x0 + 1, w - 1), sx - x0
            y[:, :, a, b] = ((1 - ly) * ((1 - lx) * x[:, :, y0, x0] + lx * x[:, :, y0, x1])
                             + ly * ((1 - lx) * x[:, :, y1, x0] + lx * x[:, :, y1, x1]))
    return y


def _bilinear_point(img, y, x):
    h, w = img.shape[-2:]
    if y < -1 or y > h or x < -1 or x > w:
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    if y0 >= h - 1:
        y0 = y1 = h - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= w - 1:
        x0 = x1 = w - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    return ((1 - ly) * (1 - lx) * img[..., y0, x0] + (1 - ly) * lx * img[..., y0, x1]
            + ly * (1 - lx) * img[..., y1, x0] + ly * lx * img[..., y1, x1])


def _naive_roi_align(data, rois, ph, pw, scale, ratio):
    out = np.zeros((len(rois), data.shape[1], ph, pw))
    for r, roi in enumerate(rois):
        img = data[int(roi[0])]
        x1, y1, x2, y2 = roi[1:] * scale
        rw, rh = max(x2 - x1, 1.0), max(y2 - y1, 1.0)
        gh = ratio if ratio > 0 else math.ceil(rh / ph)
        gw = ratio if ratio > 0 else math.ceil(rw / pw)
        for i in range(ph):
            for j in range(pw):
                acc = 0.0
                for a in range(gh):
                    for b in range(gw):
                        acc = acc + _bilinear_point(img, y1 + i * rh / ph + (a + 0.5) * rh / ph / gh,
                                                    x1 + j * rw / pw + (b + 0.5) * rw / pw / gw)
                out[r, :, i, j] = acc / (gh * gw)
    return out


def _naive_psroi(data, rois, k, p, g, scale):
    out = np.zeros((len(rois), k, p, p))
    h, w = data.shape[2:]
    for r, roi in enumerate(rois):
        sx, sy = round(roi[1]) * scale, round(roi[2]) * scale
        ex, ey = (round(roi[3]) + 1) * scale, (round(roi[4]) + 1) * scale
        bh, bw = max(ey - sy, 0.1) / p, max(ex - sx, 0.1) / p
        for i in range(p):
            for j in range(p):
                h0 = min(max(math.floor(i * bh + sy), 0), h)
                h1 = min(max(math.ceil((i + 1) * bh + sy), 0), h)
                w0 = min(max(math.floor(j * bw + sx), 0), w)
                w1 = min(max(math.ceil((j + 1) * bw + sx), 0), w)
                if h1 <= h0 or w1 <= w0:
                    continue
                for c in range(k):
                    ch = (c * g + i * g // p) * g + j * g // p
                    out[r, c, i, j] = data[int(roi[0]), ch, h0:h1, w0:w1].mean()
    return out


def _naive_deformable(x, off, wt, pad, dg):
    n, c, h, w = x.shape
    f, _, kh, kw = wt.shape
    oh, ow = off.shape[2:]
    cols = np.zeros((n, c, kh, kw, oh, ow))
    for b in range(n):
        for ch in range(c):
            gidx = ch // (c // dg)
            for i in range(kh):
                for j in range(kw):
                    k = i * kw + j
                    for y in range(oh):
                        for z in range(ow):
                            py = y - pad + i + off[b, gidx * 2 * kh * kw + 2 * k, y, z]
                            px = z - pad + j + off[b, gidx * 2 * kh * kw + 2 * k + 1, y, z]
                            if 0 <= py < h and 0 <= px < w:
                                cols[b, ch, i, j, y, z] = _bilinear_point(x[b, ch], py, px)
    return np.einsum("fcij,ncijyz->nfyz", wt, cols)


def test_adaptive_avg_pooling_is_the_window_mean():
    x = RNG.uniform(size=(2, 3, 11, 7))
    for size, (oh, ow) in (((4, 3), (4, 3)), (5, (5, 5)), ((), (1, 1)), ((11, 9), (11, 9))):
        y = apply_numpy("_contrib_AdaptiveAvgPooling2D", [x], {"output_size": size})[0]
        np.testing.assert_allclose(y, _naive_adaptive(x, oh, ow), rtol=1e-12)
    check_op_gradient("_contrib_AdaptiveAvgPooling2D", [x], {"output_size": (4, 5)})


@pytest.mark.parametrize("align", [True, False])
def test_bilinear_resize_is_the_interpolation_formula(align):
    x = RNG.uniform(size=(2, 2, 6, 5))
    for oh, ow in ((9, 3), (1, 8), (6, 5), (2, 2)):
        y = apply_numpy("_contrib_BilinearResize2D", [x], {"height": oh, "width": ow, "align_corners": align})[0]
        np.testing.assert_allclose(y, _naive_bilinear(x, oh, ow, align), rtol=1e-12)
    check_op_gradient("_contrib_BilinearResize2D", [x], {"height": 8, "width": 3, "align_corners": align})


def test_bilinear_resize_modes_pick_output_sizes():
    x = mx.nd.zeros((1, 1, 7, 10))
    f = mx.nd.contrib.BilinearResize2D
    assert f(x, mode="to_even_down").shape == (1, 1, 6, 10)
    assert f(x, mode="to_even_up").shape == (1, 1, 8, 10)
    assert f(x, mode="to_odd_down").shape == (1, 1, 7, 9)
    assert f(x, mode="to_odd_up").shape == (1, 1, 7, 11)
    assert f(x, scale_height=3, scale_width=0.5, mode="odd_scale").shape == (1, 1, 19, 5)
    assert f(x, mx.nd.zeros((1, 1, 2, 3)), mode="like").shape == (1, 1, 2, 3)
    s = mx.sym.contrib.BilinearResize2D(mx.sym.var("d"), mx.sym.var("l"), mode="like")
    assert s.list_arguments() == ["d", "l"]
    assert s.infer_shape(d=(2, 3, 8, 8), l=(1, 1, 4, 5))[1] == [(2, 3, 4, 5)]
    with pytest.raises(MXNetError, match="scale_height"):
        f(x, mode="odd_scale")


@pytest.mark.parametrize("ratio", [0, 2])
def test_roi_align_is_the_sampling_formula(ratio):
    data = RNG.uniform(size=(2, 3, 7, 9))
    rois = np.array([[0, 0.5, 1.0, 6.5, 5.0], [1, 2.2, 0.3, 14.0, 11.0], [1, 3, 3, 3.2, 3.1]])
    attrs = {"pooled_size": (2, 3), "spatial_scale": 0.7, "sample_ratio": ratio}
    y = apply_numpy("_contrib_ROIAlign", [data, rois], attrs)[0]
    np.testing.assert_allclose(y, _naive_roi_align(data, rois, 2, 3, 0.7, ratio), rtol=1e-10, atol=1e-12)
    check_op_gradient("_contrib_ROIAlign", [data, rois], attrs, wrt=[0])
    check_op_gradient("_contrib_ROIAlign", [RNG.uniform(size=(2, 12, 7, 9)), rois],
                      dict(attrs, position_sensitive=True), wrt=[0])


def test_roi_align_negative_batch_index_gives_zeros_and_bad_rois_raise():
    data = RNG.uniform(size=(1, 2, 4, 4))
    y = apply_numpy("_contrib_ROIAlign", [data, np.array([[-1, 0, 0, 2, 2.0]])],
                    {"pooled_size": (2, 2), "spatial_scale": 1.0})[0]
    assert not y.any()
    with pytest.raises(MXNetError, match="batch index 3"):
        apply_numpy("_contrib_ROIAlign", [data, np.array([[3, 0, 0, 2, 2.0]])],
                    {"pooled_size": (2, 2), "spatial_scale": 1.0})
    with pytest.raises(MXNetError, match=r"rois must have shape \(R, 5\)"):
        mx.sym.contrib.ROIAlign(mx.sym.var("d"), mx.sym.var("r"), pooled_size=(2, 2),
                                spatial_scale=1.0).infer_shape(d=(1, 2, 4, 4), r=(3, 4))
    with pytest.raises(MXNetError, match="multiple of"):
        mx.sym.contrib.ROIAlign(mx.sym.var("d"), mx.sym.var("r"), pooled_size=(2, 2), spatial_scale=1.0,
                                position_sensitive=True).infer_shape(d=(1, 6, 4, 4), r=(3, 5))


def test_rroi_align_without_rotation_is_roi_align():
    data = RNG.uniform(size=(1, 2, 8, 8))
    box = np.array([[0, 1.0, 2.0, 6.0, 7.0]])
    centred = np.array([[0, 3.5, 4.5, 5.0, 5.0, 0.0]])
    a = apply_numpy("_contrib_ROIAlign", [data, box], {"pooled_size": (2, 2), "spatial_scale": 1.0})[0]
    b = apply_numpy("_contrib_RROIAlign", [data, centred], {"pooled_size": (2, 2), "spatial_scale": 1.0})[0]
    np.testing.assert_allclose(a, b, rtol=1e-12)
    turned = apply_numpy("_contrib_RROIAlign", [data.transpose(0, 1, 3, 2).copy(), np.array(
        [[0, 4.5, 3.5, 5.0, 5.0, 90.0]])], {"pooled_size": (2, 2), "spatial_scale": 1.0})[0]
    assert turned.shape == (1, 2, 2, 2)


@pytest.mark.parametrize("k,p,g", [(2, 3, 3), (3, 2, 2), (2, 3, 2)])
def test_psroi_pooling_is_the_window_mean(k, p, g):
    data = RNG.uniform(size=(2, k * g * g, 6, 7))
    rois = np.array([[0, 10, 22, 61, 73], [1, 20, 15, 94, 80], [1, 0, 0, 3, 3], [0, 90, 90, 99, 99]], float)
    attrs = {"spatial_scale": 0.0625, "output_dim": k, "pooled_size": p, "group_size": g}
    y = apply_numpy("_contrib_PSROIPooling", [data, rois], attrs)[0]
    np.testing.assert_allclose(y, _naive_psroi(data, rois, k, p, g, 0.0625), rtol=1e-12)
    check_op_gradient("_contrib_PSROIPooling", [data, rois], attrs, wrt=[0])
    with pytest.raises(MXNetError, match="channels"):
        apply_numpy("_contrib_PSROIPooling", [data[:, 1:], rois], attrs)


@pytest.mark.parametrize("dg", [1, 2])
def test_deformable_convolution_is_the_sampling_formula(dg):
    x = RNG.uniform(size=(2, 4, 5, 6))
    shape = (2, dg * 18, 5, 6)      # offsets kept 0.05 away from integers (the interpolation's kinks)
    off = RNG.integers(-2, 2, size=shape) + RNG.uniform(0.05, 0.95, size=shape)
    w = RNG.normal(size=(3, 4, 3, 3))
    attrs = {"kernel": (3, 3), "pad": (1, 1), "num_filter": 3, "no_bias": True, "num_deformable_group": dg}
    y = apply_numpy("_contrib_DeformableConvolution", [x, off, w], attrs)[0]
    np.testing.assert_allclose(y, _naive_deformable(x, off, w, 1, dg), rtol=1e-10, atol=1e-12)
    check_op_gradient("_contrib_DeformableConvolution", [x, off, w], attrs, rtol=1e-3, atol=1e-6)


def test_deformable_convolution_with_zero_offsets_is_convolution_and_checks_shapes():
    x = RNG.uniform(size=(1, 4, 6, 6))
    w, b = RNG.normal(size=(4, 2, 3, 3)), RNG.normal(size=4)
    attrs = {"kernel": (3, 3), "stride": (2, 2), "dilate": (1, 2), "pad": (1, 2), "num_filter": 4, "num_group": 2}
    conv = apply_numpy("Convolution", [x, w, b], attrs)[0]
    off = np.zeros((1, 18) + conv.shape[2:])
    np.testing.assert_allclose(apply_numpy("_contrib_DeformableConvolution", [x, off, w, b], attrs)[0], conv,
                               rtol=1e-12)
    s = mx.sym.contrib.DeformableConvolution(mx.sym.var("x"), mx.sym.var("off"), kernel=(3, 3), num_filter=4)
    args, outs, _ = s.infer_shape(x=(2, 4, 6, 6))
    assert outs == [(2, 4, 4, 4)] and args[1] == (2, 18, 4, 4)
    with pytest.raises(MXNetError, match="offset"):
        s.infer_shape(x=(2, 4, 6, 6), off=(2, 18, 6, 6))


def _proposal_inputs(n, a=6, h=5, w=6):
    cls = RNG.uniform(size=(n, 2 * a, h, w)).astype(np.float32)
    bbox = RNG.uniform(-0.3, 0.3, size=(n, 4 * a, h, w)).astype(np.float32)
    info = np.tile(np.array([[70, 90, 0.8]], np.float32), (n, 1))
    return cls, bbox, info


def test_multi_proposal_stacks_proposal_per_image_and_has_zero_gradient():
    attrs = {"scales": (2, 4, 8), "ratios": (0.5, 2), "rpn_pre_nms_top_n": 50, "rpn_post_nms_top_n": 12,
             "output_score": True}
    cls, bbox, info = _proposal_inputs(3)
    rows, scores = apply_numpy("_contrib_MultiProposal", [cls, bbox, info], attrs)
    assert rows.shape == (36, 5) and scores.shape == (36, 1)
    for i in range(3):
        r, s = apply_numpy("_contrib_Proposal", [cls[i:i + 1], bbox[i:i + 1], info[i:i + 1]], attrs)
        np.testing.assert_array_equal(rows[12 * i:12 * (i + 1), 1:], r[:, 1:])
        np.testing.assert_array_equal(rows[12 * i:12 * (i + 1), 0], i)
        np.testing.assert_array_equal(scores[12 * i:12 * (i + 1)], s)
        assert (np.diff(s[:, 0]) <= 0).all()            # kept in score order
    g = mx.nd.contrib.MultiProposal
    c = mx.nd.array(cls)
    c.attach_grad()
    with mx.autograd.record():
        out = g(c, mx.nd.array(bbox), mx.nd.array(info), **dict(attrs, output_score=False))
    out.backward()
    assert not c.grad.asnumpy().any()
    with pytest.raises(MXNetError, match="one image"):
        apply_numpy("_contrib_Proposal", [cls, bbox, info], attrs)


def test_sync_batch_norm_is_batch_norm_with_the_variance_output():
    x = RNG.uniform(size=(4, 3, 5)).astype(np.float32)
    g, b = np.full(3, 1.5, np.float32), np.zeros(3, np.float32)
    sym = mx.sym.contrib.SyncBatchNorm(mx.sym.var("x"), fix_gamma=False, output_mean_var=True, key="k", name="sbn")
    assert sym.list_auxiliary_states() == ["sbn_moving_mean", "sbn_moving_var"]
    assert sym.list_outputs() == ["sbn_output", "sbn_mean", "sbn_var"]
    with mx.autograd.record():
        out, mean, var = mx.nd.contrib.SyncBatchNorm(mx.nd.array(x), mx.nd.array(g), mx.nd.array(b),
                                                     mx.nd.zeros(3), mx.nd.ones(3), fix_gamma=False,
                                                     output_mean_var=True, key="k")
    np.testing.assert_allclose(mean.asnumpy(), x.mean(axis=(0, 2)), rtol=1e-5)
    np.testing.assert_allclose(var.asnumpy(), x.var(axis=(0, 2)), rtol=1e-4)
    ref = (x - x.mean(axis=(0, 2), keepdims=True)) / np.sqrt(x.var(axis=(0, 2), keepdims=True) + 1e-3) * 1.5
    np.testing.assert_allclose(out.asnumpy(), ref, rtol=1e-4, atol=1e-5)
    check_op_gradient("_contrib_SyncBatchNorm", [x, g, b, np.zeros(3), np.ones(3)],
                      {"fix_gamma": False, "key": "k"}, wrt=[0, 1, 2], is_train=True)


def test_executor_ignores_the_shape_of_a_head_gradient_never_read():
    cls, bbox, info = _proposal_inputs(2)
    s = mx.sym.contrib.MultiProposal(cls_prob=mx.sym.var("c"), bbox_pred=mx.sym.var("b"), im_info=mx.sym.var("i"),
                                     scales=(2, 4, 8), ratios=(0.5, 2), rpn_post_nms_top_n=5)
    ex = s.simple_bind(mx.cpu(), c=cls.shape, b=bbox.shape, i=info.shape)
    ex.forward(is_train=True, c=mx.nd.array(cls), b=mx.nd.array(bbox), i=mx.nd.array(info))
    assert ex.outputs[0].shape == (10, 5)
    ex.backward([mx.nd.ones((5, 5))])             # MXNet accepts it: MultiProposal reads no head gradient
    assert not ex.grad_dict["c"].asnumpy().any()
    e2 = mx.sym.exp(mx.sym.var("x")).simple_bind(mx.cpu(), x=(3, 4))
    e2.forward(is_train=True, x=mx.nd.ones((3, 4)))
    with pytest.raises(MXNetError, match="out_grad"):
        e2.backward([mx.nd.ones((2, 4))])
