"""Detection contrib operators (box_nms, box_iou, bipartite_matching, box_encode, box_decode,
MultiBoxPrior, MultiBoxTarget, MultiBoxDetection): the worked examples of MXNet 1.9.1's
operator documentation and of the "Dive into Deep Learning" book (MXNet edition, anchor boxes
chapter), straightforward loop implementations of the documented rules, gradients, the
Symbol / hybridized paths and bad input refused with MXNetError."""
from __future__ import annotations

import math

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from symjit.ops import apply_numpy

RNG = np.random.default_rng(3)


# ---- loop references ----------------------------------------------------------------------

def _edges(b, fmt):
    if fmt == "corner":
        return b[0], b[1], b[2], b[3]
    return b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2


def _iou(a, b, fmt="corner"):
    al, at, ar, ab = _edges(a, fmt)
    bl, bt, br, bb = _edges(b, fmt)
    w = max(0.0, min(ar, br) - max(al, bl))
    h = max(0.0, min(ab, bb) - max(at, bt))
    inter = w * h
    if inter <= 0:
        return 0.0
    area = lambda l, t, r, b_: 0.0 if (r - l) < 0 or (b_ - t) < 0 else (r - l) * (b_ - t)
    return inter / (area(al, at, ar, ab) + area(bl, bt, br, bb) - inter)


def _naive_nms(x, thresh, valid, topk, cs, si, ii, bg, force, in_fmt, out_fmt):
    out = -np.ones_like(x)
    for b in range(x.shape[0]):
        rows = [i for i in range(x.shape[1]) if x[b, i, si] > valid and (ii < 0 or x[b, i, ii] != bg)]
        rows.sort(key=lambda i: -x[b, i, si])          # Python's sort is stable
        rows = rows[:topk] if topk >= 0 else rows
        kept = []
        for i in rows:
            if all(not (_iou(x[b, i, cs:cs + 4], x[b, j, cs:cs + 4], in_fmt) > thresh and
                        (force or ii < 0 or int(x[b, i, ii]) == int(x[b, j, ii]))) for j in kept):
                kept.append(i)
        for k, i in enumerate(kept):
            out[b, k] = x[b, i]
            if in_fmt != out_fmt and out[b, k, cs] >= 0:
                c = out[b, k, cs:cs + 4].copy()
                if out_fmt == "center":
                    out[b, k, cs:cs + 4] = [(c[0] + c[2]) / 2, (c[1] + c[3]) / 2, c[2] - c[0], c[3] - c[1]]
                else:
                    out[b, k, cs:cs + 4] = _edges(c, "center")
    return out


# ---- box_nms ------------------------------------------------------------------------------

DOC_NMS = np.array([[0, 0.5, 0.1, 0.1, 0.2, 0.2], [1, 0.4, 0.1, 0.1, 0.2, 0.2],
                    [0, 0.3, 0.1, 0.1, 0.14, 0.14], [2, 0.6, 0.5, 0.5, 0.7, 0.8]], np.float32)
DOC_NMS_ATTRS = dict(overlap_thresh=0.1, coord_start=2, score_index=1, id_index=0,
                     force_suppress=True, in_format="corner", out_format="corner")


def test_box_nms_documented_example_and_gradient():
    x = mx.nd.array(DOC_NMS)
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.contrib.box_nms(x, **DOC_NMS_ATTRS)
    expect = np.array([[2, 0.6, 0.5, 0.5, 0.7, 0.8], [0, 0.5, 0.1, 0.1, 0.2, 0.2],
                       [-1] * 6, [-1] * 6], np.float32)
    np.testing.assert_allclose(y.asnumpy(), expect)
    head = np.repeat(np.array([[0.1], [0.2], [0.3], [0.4]], np.float32), 6, axis=1)
    y.backward(mx.nd.array(head))
    grad = np.zeros((4, 6), np.float32)
    grad[0], grad[3] = 0.2, 0.1
    np.testing.assert_allclose(x.grad.asnumpy(), grad)
    assert mx.nd.contrib.box_non_maximum_suppression(x, **DOC_NMS_ATTRS).shape == (4, 6)


def _random_boxes(batch, n, width=6, ids=3):
    x = np.zeros((batch, n, width), np.float32)
    x[..., 0] = RNG.integers(0, ids, (batch, n))
    x[..., 1] = RNG.uniform(0, 1, (batch, n))
    lo = RNG.uniform(0, 0.6, (batch, n, 2))
    x[..., 2:4] = lo
    x[..., 4:6] = lo + RNG.uniform(0.05, 0.4, (batch, n, 2))
    return x


@pytest.mark.parametrize("kw", [
    dict(),
    dict(overlap_thresh=0.3, topk=5, id_index=0),
    dict(overlap_thresh=0.2, id_index=0, background_id=1, valid_thresh=0.3),
    dict(overlap_thresh=0.2, id_index=0, force_suppress=True, out_format="center"),
    dict(overlap_thresh=0.25, in_format="center", out_format="corner"),
    dict(overlap_thresh=0.25, topk=3),
])
def test_box_nms_is_greedy_suppression_of_the_sorted_boxes(kw):
    x = _random_boxes(2, 12)
    x[0, 3, 1] = x[0, 5, 1]                          # a score tie keeps input order
    full = dict(overlap_thresh=0.5, valid_thresh=0.0, topk=-1, coord_start=2, score_index=1,
                id_index=-1, background_id=-1, force_suppress=False, in_format="corner",
                out_format="corner")
    full.update(kw)
    got = mx.nd.contrib.box_nms(mx.nd.array(x.reshape(2, 1, 12, 6)), **kw).asnumpy()
    ref = _naive_nms(x.astype(np.float64), full["overlap_thresh"], full["valid_thresh"], full["topk"],
                     2, 1, full["id_index"], full["background_id"], full["force_suppress"],
                     full["in_format"], full["out_format"])
    assert got.shape == (2, 1, 12, 6)
    np.testing.assert_allclose(got.reshape(2, 12, 6), ref, rtol=1e-6, atol=1e-6)


def test_box_nms_topk_zero_returns_the_input_and_nothing_valid_gives_minus_one():
    x = _random_boxes(1, 5)[0]
    np.testing.assert_array_equal(mx.nd.contrib.box_nms(mx.nd.array(x), topk=0).asnumpy(), x)
    assert (mx.nd.contrib.box_nms(mx.nd.array(x), valid_thresh=2.0).asnumpy() == -1).all()


def test_box_nms_in_symbol_graph_and_hybridized_block():
    data = mx.sym.var("data")
    s = mx.sym.contrib.box_nms(data, **DOC_NMS_ATTRS)
    assert s.list_outputs() == [s.list_outputs()[0]] and len(s.list_outputs()) == 1
    ex = s.simple_bind(mx.cpu(), data=(4, 6))
    ex.arg_dict["data"][:] = DOC_NMS
    out = ex.forward(is_train=True)[0].asnumpy()
    eager = mx.nd.contrib.box_nms(mx.nd.array(DOC_NMS), **DOC_NMS_ATTRS).asnumpy()
    np.testing.assert_array_equal(out, eager)
    head = RNG.uniform(-1, 1, (4, 6)).astype(np.float32)
    ex.backward(mx.nd.array(head))
    expect = np.zeros((4, 6), np.float32)
    expect[0], expect[3] = head[1], head[0]
    np.testing.assert_allclose(ex.grad_dict["data"].asnumpy(), expect)

    class Net(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return F.contrib.box_nms(x * 1.0, **DOC_NMS_ATTRS)
    net = Net()
    net.hybridize()
    np.testing.assert_array_equal(net(mx.nd.array(DOC_NMS)).asnumpy(), eager)


@pytest.mark.parametrize("kw,msg", [
    (dict(score_index=3), "conflicts with the coordinates"),
    (dict(coord_start=3), "out of range"),
    (dict(id_index=1), "conflicts with score_index"),
])
def test_box_nms_refuses_bad_layouts(kw, msg):
    with pytest.raises(MXNetError, match=msg):
        mx.nd.contrib.box_nms(mx.nd.array(DOC_NMS), **kw)
    with pytest.raises(MXNetError, match="at least 2 dimensions"):
        mx.nd.contrib.box_nms(mx.nd.array(np.zeros(6, np.float32)))


# ---- box_iou ------------------------------------------------------------------------------

def test_box_iou_documented_example():
    x = mx.nd.array([[0.5, 0.5, 1.0, 1.0], [0.0, 0.0, 0.5, 0.5]])
    y = mx.nd.array([[0.25, 0.25, 0.75, 0.75]])
    np.testing.assert_allclose(mx.nd.contrib.box_iou(x, y, format="corner").asnumpy(),
                               [[1 / 7], [1 / 7]], rtol=1e-6)


@pytest.mark.parametrize("fmt", ["corner", "center"])
def test_box_iou_is_the_pairwise_overlap(fmt):
    a = RNG.uniform(0, 1, (2, 3, 4)).astype(np.float32)
    b = RNG.uniform(0, 1, (5, 4)).astype(np.float32)
    if fmt == "corner":
        a[..., 2:] += a[..., :2]
    b[0] = [-1, -1, -1, -1]                              # degenerate box: IoU 0
    got = mx.nd.contrib.box_iou(mx.nd.array(a), mx.nd.array(b), format=fmt).asnumpy()
    assert got.shape == (2, 3, 5)
    ref = np.array([[_iou(p.astype(np.float64), q.astype(np.float64), fmt) for q in b]
                    for p in a.reshape(-1, 4)]).reshape(2, 3, 5)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-7)


def test_box_iou_has_a_zero_gradient_and_checks_shapes():
    a, b = mx.nd.array(RNG.uniform(0, 1, (3, 4))), mx.nd.array(RNG.uniform(0, 1, (2, 4)))
    a.attach_grad()
    with mx.autograd.record():
        y = mx.nd.contrib.box_iou(a, b)
    y.backward()
    assert (a.grad.asnumpy() == 0).all()
    with pytest.raises(MXNetError, match="last dimension of 4"):
        mx.nd.contrib.box_iou(mx.nd.zeros((3, 5)), b)


# ---- bipartite_matching -------------------------------------------------------------------

def test_bipartite_matching_documented_example():
    x = mx.nd.array([[0.5, 0.6], [0.1, 0.2], [0.3, 0.4]])
    rows, cols = mx.nd.contrib.bipartite_matching(x, threshold=1e-12, is_ascend=False)
    np.testing.assert_array_equal(rows.asnumpy(), [1, -1, 0])
    np.testing.assert_array_equal(cols.asnumpy(), [2, 0])


def _naive_matching(s, thr, ascend, topk):
    n, m = s.shape
    pairs = sorted(((s[r, c], r, c) for r in range(n) for c in range(m)),
                   key=lambda t: t[0] if ascend else -t[0])
    rows, cols, count = [-1] * n, [-1] * m, 0
    for v, r, c in pairs:
        if rows[r] != -1 or cols[c] != -1:
            continue
        if not (v < thr if ascend else v > thr):
            break
        rows[r], cols[c] = c, r
        count += 1
        if topk > 0 and count > topk:
            break
    return rows, cols


@pytest.mark.parametrize("ascend,thr,topk", [(False, 0.2, -1), (True, 0.7, -1), (False, 0.0, 1), (False, 0.0, 2)])
def test_bipartite_matching_is_greedy_over_sorted_scores(ascend, thr, topk):
    s = RNG.uniform(0, 1, (2, 4, 5)).astype(np.float32)
    rows, cols = mx.nd.contrib.bipartite_matching(mx.nd.array(s), threshold=thr, is_ascend=ascend, topk=topk)
    assert rows.shape == (2, 4) and cols.shape == (2, 5)
    for b in range(2):
        r, c = _naive_matching(s[b], thr, ascend, topk)
        np.testing.assert_array_equal(rows.asnumpy()[b], r)
        np.testing.assert_array_equal(cols.asnumpy()[b], c)


def test_bipartite_matching_needs_threshold():
    with pytest.raises(MXNetError, match="threshold"):
        mx.nd.contrib.bipartite_matching(mx.nd.zeros((2, 2)))


# ---- box_encode / box_decode -------------------------------------------------------------

def _corner_boxes(*shape):
    lo = RNG.uniform(0, 0.5, shape + (2,))
    return np.concatenate([lo, lo + RNG.uniform(0.1, 0.5, shape + (2,))], axis=-1).astype(np.float32)


def test_box_encode_is_the_normalized_centre_offset():
    b, n, m = 2, 6, 3
    anchors, refs = _corner_boxes(b, n), _corner_boxes(b, m)
    samples = RNG.choice([-1.0, 0.0, 1.0], (b, n)).astype(np.float32)
    matches = RNG.integers(0, m, (b, n)).astype(np.float32)
    means = np.array([0.1, -0.1, 0.0, 0.2], np.float32)
    stds = np.array([0.1, 0.1, 0.2, 0.2], np.float32)
    t, mask = mx.nd.contrib.box_encode(*[mx.nd.array(v) for v in (samples, matches, anchors, refs, means, stds)])
    for i in range(b):
        for j in range(n):
            if samples[i, j] > 0.5:
                a, g = anchors[i, j].astype(np.float64), refs[i, int(matches[i, j])].astype(np.float64)
                aw, ah, gw, gh = a[2] - a[0], a[3] - a[1], g[2] - g[0], g[3] - g[1]
                raw = [((g[0] + gw / 2) - (a[0] + aw / 2)) / aw, ((g[1] + gh / 2) - (a[1] + ah / 2)) / ah,
                       math.log(gw / aw), math.log(gh / ah)]
                np.testing.assert_allclose(t.asnumpy()[i, j], (np.array(raw) - means) / stds, rtol=1e-5, atol=1e-5)
                assert (mask.asnumpy()[i, j] == 1).all()
            else:
                assert (t.asnumpy()[i, j] == 0).all() and (mask.asnumpy()[i, j] == 0).all()


@pytest.mark.parametrize("fmt", ["corner", "center"])
def test_box_decode_inverts_box_encode(fmt):
    n = 5
    anchors, refs = _corner_boxes(1, n), _corner_boxes(1, n)
    stds = np.array([0.1, 0.1, 0.2, 0.2], np.float32)
    t, _ = mx.nd.contrib.box_encode(mx.nd.ones((1, n)), mx.nd.array(np.arange(n)[None].astype(np.float32)),
                                    mx.nd.array(anchors), mx.nd.array(refs), mx.nd.zeros(4), mx.nd.array(stds))
    a = anchors.copy()
    if fmt == "center":
        a = np.concatenate([(a[..., :2] + a[..., 2:]) / 2, a[..., 2:] - a[..., :2]], axis=-1)
    got = mx.nd.contrib.box_decode(t, mx.nd.array(a), std0=0.1, std1=0.1, std2=0.2, std3=0.2, format=fmt)
    np.testing.assert_allclose(got.asnumpy(), refs, rtol=1e-5, atol=1e-6)


def test_box_decode_clips_the_size_exponent():
    data = mx.nd.array([[[0.0, 0.0, 3.0, -3.0]]])
    anchor = mx.nd.array([[[0.5, 0.5, 0.2, 0.2]]])
    got = mx.nd.contrib.box_decode(data, anchor, clip=1.0).asnumpy()[0, 0]
    hw, hh = math.exp(1.0) * 0.1, math.exp(-3.0) * 0.1
    np.testing.assert_allclose(got, [0.5 - hw, 0.5 - hh, 0.5 + hw, 0.5 + hh], rtol=1e-6)
    with pytest.raises(MXNetError, match="shape"):
        mx.nd.contrib.box_decode(mx.nd.zeros((1, 2, 3)), anchor)


# ---- MultiBoxPrior ------------------------------------------------------------------------

def _naive_prior(h, w, sizes, ratios, steps, offsets, clip):
    sy = steps[0] if steps[0] > 0 else 1 / h
    sx = steps[1] if steps[1] > 0 else 1 / w
    out = []
    for r in range(h):
        cy = (r + offsets[0]) * sy
        for c in range(w):
            cx = (c + offsets[1]) * sx
            shapes = [(s, ratios[0]) for s in sizes] + [(sizes[0], q) for q in ratios[1:]]
            for s, q in shapes:
                hw, hh = s * h / w * math.sqrt(q) / 2, s / math.sqrt(q) / 2
                out.append([cx - hw, cy - hh, cx + hw, cy + hh])
    out = np.array(out)
    return np.clip(out, 0, 1) if clip else out


@pytest.mark.parametrize("kw", [
    dict(),
    dict(sizes=(0.5, 0.25, 0.1), ratios=(1, 2, 0.5)),
    dict(sizes=(0.3,), ratios=(2, 1), clip=True),
    dict(sizes=(0.4, 0.2), ratios=(1, 3), steps=(0.2, 0.1), offsets=(0.25, 0.75)),
])
def test_multibox_prior_is_the_documented_anchor_layout(kw):
    full = dict(sizes=(1.0,), ratios=(1.0,), steps=(-1, -1), offsets=(0.5, 0.5), clip=False)
    full.update(kw)
    got = mx.nd.contrib.MultiBoxPrior(mx.nd.zeros((2, 3, 4, 5)), **kw).asnumpy()
    ref = _naive_prior(4, 5, full["sizes"], full["ratios"], full["steps"], full["offsets"], full["clip"])
    assert got.shape == (1, len(ref), 4)
    np.testing.assert_allclose(got[0], ref, rtol=1e-5, atol=1e-6)


def test_multibox_prior_matches_the_d2l_anchor_example():
    # d2l.ai, "Anchor Boxes": a 561 x 728 image, sizes 0.75/0.5/0.25, ratios 1/2/0.5;
    # the first anchor centred on (250, 250) is printed as [0.06, 0.07, 0.63, 0.82]
    boxes = mx.nd.contrib.MultiBoxPrior(mx.nd.zeros((1, 3, 561, 728)), sizes=[0.75, 0.5, 0.25], ratios=[1, 2, 0.5])
    assert boxes.shape == (1, 2042040, 4)
    np.testing.assert_allclose(boxes.asnumpy().reshape(561, 728, 5, 4)[250, 250, 0], [0.06, 0.07, 0.63, 0.82], atol=5e-3)


def test_multibox_prior_legacy_name_symbol_and_errors():
    s = mx.sym.contrib.MultiBoxPrior(mx.sym.var("data"), sizes=(0.5,), ratios=(1, 2))
    _, out_shapes, _ = s.infer_shape(data=(1, 8, 3, 3))
    assert out_shapes == [(1, 18, 4)]
    ex = s.simple_bind(mx.cpu(), data=(1, 8, 3, 3))
    got = ex.forward()[0].asnumpy()
    np.testing.assert_allclose(got[0], _naive_prior(3, 3, (0.5,), (1, 2), (-1, -1), (0.5, 0.5), False), rtol=1e-5, atol=1e-6)
    legacy = apply_numpy("_contrib_MultiBoxPrior", [np.zeros((1, 8, 3, 3), np.float32)], {"sizes": "(0.5,)", "ratios": "(1,2)"})
    np.testing.assert_array_equal(legacy[0], got)
    with pytest.raises(MXNetError, match="ratios"):
        mx.nd.contrib.MultiBoxPrior(mx.nd.zeros((1, 1, 2, 2)), ratios=(0,))
    with pytest.raises(MXNetError, match="4-D"):
        mx.nd.contrib.MultiBoxPrior(mx.nd.zeros((1, 2, 2)))


# ---- MultiBoxTarget -----------------------------------------------------------------------

D2L_ANCHORS = np.array([[0, 0.1, 0.2, 0.3], [0.15, 0.2, 0.4, 0.4], [0.63, 0.05, 0.88, 0.98],
                        [0.66, 0.45, 0.8, 0.8], [0.57, 0.3, 0.92, 0.9]], np.float32)
D2L_TRUTH = np.array([[0, 0.1, 0.08, 0.52, 0.92], [1, 0.55, 0.2, 0.9, 0.88]], np.float32)


def test_multibox_target_matches_the_d2l_labelling_example():
    # d2l.ai, "Anchor Boxes", labelling anchors in training data
    loc, mask, cls = mx.nd.contrib.MultiBoxTarget(mx.nd.array(D2L_ANCHORS[None]), mx.nd.array(D2L_TRUTH[None]),
                                                  mx.nd.zeros((1, 3, 5)))
    np.testing.assert_array_equal(cls.asnumpy(), [[0, 1, 2, 0, 2]])
    np.testing.assert_array_equal(mask.asnumpy(), [[0] * 4 + [1] * 8 + [0] * 4 + [1] * 4])
    np.testing.assert_allclose(loc.asnumpy(), [[0, 0, 0, 0, 1.40, 10.0, 2.59, 7.18, -1.20, 0.269, 1.68, -1.57,
                                                 0, 0, 0, 0, -0.571, -1.00, 4.17e-06, 0.626]], rtol=5e-3, atol=5e-3)


def test_multibox_target_negative_mining_and_padding():
    anchors = np.array([[[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0], [0.0, 0.5, 0.5, 1.0],
                         [0.5, 0.0, 1.0, 0.5], [0.1, 0.1, 0.4, 0.4]]], np.float32)
    labels = np.array([[[2, 0.0, 0.0, 0.5, 0.5], [-1, -1, -1, -1, -1]],
                       [[-1, -1, -1, -1, -1], [-1, -1, -1, -1, -1]]], np.float32)
    cls_pred = np.zeros((2, 3, 5), np.float32)
    cls_pred[0, 0] = [0, 0.1, 3.0, -2.0, 0]              # background logits: anchor 3 is the hardest
    loc, mask, cls = mx.nd.contrib.MultiBoxTarget(
        mx.nd.array(anchors), mx.nd.array(labels), mx.nd.array(cls_pred), overlap_threshold=0.5,
        negative_mining_ratio=2, negative_mining_thresh=0.3, ignore_label=-7)
    # anchor 0 matches the box exactly; anchor 4 overlaps it by 0.36 (>= 0.3: not a negative);
    # of anchors 1, 2, 3 the two with the lowest background probability (3 then 1) are negatives
    np.testing.assert_array_equal(cls.asnumpy(), [[3, 0, -7, 0, -7], [-7] * 5])
    np.testing.assert_array_equal(mask.asnumpy()[0], [1] * 4 + [0] * 16)
    np.testing.assert_allclose(loc.asnumpy()[0, :4], 0, atol=1e-6)
    assert (loc.asnumpy()[1] == 0).all() and (mask.asnumpy()[1] == 0).all()


def test_multibox_target_checks_shapes():
    with pytest.raises(MXNetError, match="label"):
        mx.nd.contrib.MultiBoxTarget(mx.nd.zeros((1, 5, 4)), mx.nd.zeros((1, 2, 4)), mx.nd.zeros((1, 3, 5)))
    with pytest.raises(MXNetError, match="cls_pred"):
        mx.nd.contrib.MultiBoxTarget(mx.nd.zeros((1, 5, 4)), mx.nd.zeros((1, 2, 5)), mx.nd.zeros((1, 3, 4)))


# ---- MultiBoxDetection ---------------------------------------------------------------------

D2L_DET_ANCHORS = np.array([[0.1, 0.08, 0.52, 0.92], [0.08, 0.2, 0.56, 0.95],
                            [0.15, 0.3, 0.62, 0.91], [0.55, 0.2, 0.9, 0.88]], np.float32)
D2L_DET_PROBS = np.array([[0] * 4, [0.9, 0.8, 0.7, 0.1], [0.1, 0.2, 0.3, 0.9]], np.float32)


def test_multibox_detection_matches_the_d2l_prediction_example():
    # d2l.ai, "Anchor Boxes", predicting bounding boxes with non-maximum suppression
    out = mx.nd.contrib.MultiBoxDetection(mx.nd.array(D2L_DET_PROBS[None]), mx.nd.zeros((1, 16)),
                                          mx.nd.array(D2L_DET_ANCHORS[None]), nms_threshold=0.5)
    np.testing.assert_allclose(out.asnumpy()[0], [[0, 0.9, 0.1, 0.08, 0.52, 0.92], [1, 0.9, 0.55, 0.2, 0.9, 0.88],
                                                  [-1, 0.8, 0.08, 0.2, 0.56, 0.95], [-1, 0.7, 0.15, 0.3, 0.62, 0.91]],
                               rtol=1e-6)


def test_multibox_detection_decodes_offsets_thresholds_and_topk():
    probs = D2L_DET_PROBS.copy()
    probs[1, 2] = 0.005                                  # below threshold: background
    probs[2, 2] = 0.004
    loc = RNG.uniform(-1, 1, (1, 16)).astype(np.float32)
    out = mx.nd.contrib.MultiBoxDetection(mx.nd.array(probs[None]), mx.nd.array(loc), mx.nd.array(D2L_DET_ANCHORS[None]),
                                          nms_threshold=0.0, clip=False).asnumpy()[0]
    v = np.array([0.1, 0.1, 0.2, 0.2])
    expect = []
    for a, p, k in zip(D2L_DET_ANCHORS.astype(np.float64), loc.reshape(4, 4).astype(np.float64), range(4)):
        if k == 2:
            continue
        aw, ah = a[2] - a[0], a[3] - a[1]
        cx, cy = p[0] * v[0] * aw + (a[0] + a[2]) / 2, p[1] * v[1] * ah + (a[1] + a[3]) / 2
        hw, hh = math.exp(p[2] * v[2]) * aw / 2, math.exp(p[3] * v[3]) * ah / 2
        cid = int(np.argmax(probs[1:, k]))
        expect.append([cid, probs[1 + cid, k], cx - hw, cy - hh, cx + hw, cy + hh])
    np.testing.assert_allclose(out[:3], expect, rtol=1e-5, atol=1e-6)   # NMS off: anchor order
    assert (out[3] == -1).all()
    top = mx.nd.contrib.MultiBoxDetection(mx.nd.array(D2L_DET_PROBS[None]), mx.nd.zeros((1, 16)),
                                          mx.nd.array(D2L_DET_ANCHORS[None]), nms_topk=1, force_suppress=True).asnumpy()[0]
    np.testing.assert_allclose(top[0], [0, 0.9, 0.1, 0.08, 0.52, 0.92], rtol=1e-6)
    assert (top[1:, 0] == -1).all()


def test_multibox_detection_symbol_zero_gradient_and_shape_errors():
    c, l, a = mx.sym.var("c"), mx.sym.var("l"), mx.sym.var("a")
    s = mx.sym.contrib.MultiBoxDetection(c, l, a, nms_threshold=0.5)
    ex = s.simple_bind(mx.cpu(), c=(1, 3, 4), l=(1, 16), a=(1, 4, 4))
    ex.arg_dict["c"][:] = D2L_DET_PROBS[None]
    ex.arg_dict["a"][:] = D2L_DET_ANCHORS[None]
    out = ex.forward(is_train=True)[0].asnumpy()
    np.testing.assert_allclose(out[0, :2, 0], [0, 1])
    ex.backward(mx.nd.ones((1, 4, 6)))
    assert all((g.asnumpy() == 0).all() for g in ex.grad_arrays)
    with pytest.raises(MXNetError, match="loc_pred"):
        mx.nd.contrib.MultiBoxDetection(mx.nd.zeros((1, 3, 4)), mx.nd.zeros((1, 15)), mx.nd.zeros((1, 4, 4)))


# ---- gradients, serialization and a hybridized SSD head ---------------------------------------

def test_box_nms_gradient_matches_finite_differences():
    from symjit.test_utils import check_op_gradient
    x = _random_boxes(2, 6).astype(np.float64)
    x[..., 0] += 0.5                      # class ids away from the int truncation's jumps
    check_op_gradient("_contrib_box_nms", [x], {"overlap_thresh": 0.3, "id_index": 0}, rtol=1e-6, atol=1e-8)


def test_detection_symbols_round_trip_through_json():
    data = mx.sym.var("data")
    s = mx.sym.contrib.box_nms(data, overlap_thresh=0.1, topk=2, in_format="center", out_format="corner")
    s = mx.sym.contrib.box_iou(s.reshape((-1, 6)).slice_axis(axis=1, begin=2, end=6), mx.sym.var("ref"), format="corner")
    back = mx.sym.load_json(s.tojson())
    x = _random_boxes(1, 5)[0]
    ref = RNG.uniform(0, 1, (3, 4)).astype(np.float32)
    a = s.eval(data=mx.nd.array(x), ref=mx.nd.array(ref))[0].asnumpy()
    b = back.eval(data=mx.nd.array(x), ref=mx.nd.array(ref))[0].asnumpy()
    np.testing.assert_array_equal(a, b)


def test_ssd_head_hybridized_matches_eager():
    class Head(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, feat, label, cls_pred, loc_pred):
            anchors = F.contrib.MultiBoxPrior(feat, sizes=(0.4, 0.2), ratios=(1, 2))
            loc_t, loc_m, cls_t = F.contrib.MultiBoxTarget(anchors, label, cls_pred, negative_mining_ratio=3)
            det = F.contrib.MultiBoxDetection(F.softmax(cls_pred, axis=1), loc_pred, anchors, nms_threshold=0.45)
            return loc_t, loc_m, cls_t, det
    feat = mx.nd.zeros((2, 4, 3, 3))
    label = mx.nd.array([[[0, 0.1, 0.1, 0.5, 0.6], [1, 0.5, 0.4, 0.9, 0.9]], [[1, 0.2, 0.2, 0.7, 0.7], [-1] * 5]])
    cls_pred = mx.nd.array(RNG.normal(size=(2, 3, 27)))
    loc_pred = mx.nd.array(RNG.normal(size=(2, 108)) * 0.1)
    head = Head()
    eager = [o.asnumpy() for o in head(feat, label, cls_pred, loc_pred)]
    head.hybridize()
    hybrid = [o.asnumpy() for o in head(feat, label, cls_pred, loc_pred)]
    for e, h in zip(eager, hybrid):
        np.testing.assert_allclose(h, e, rtol=1e-6, atol=1e-7)
    assert eager[3].shape == (2, 27, 6) and (eager[2] > 0).any()


def test_legacy_contrib_names_reach_the_same_ops():
    feat = mx.nd.zeros((1, 2, 2, 3))
    np.testing.assert_array_equal(mx.nd._contrib_MultiBoxPrior(feat, sizes=(0.3,)).asnumpy(),
                                  mx.contrib.ndarray.MultiBoxPrior(feat, sizes=(0.3,)).asnumpy())
    s = mx.sym._contrib_MultiBoxDetection(mx.sym.var("c"), mx.sym.var("l"), mx.sym.var("a"))
    assert s.infer_shape(c=(2, 3, 4), l=(2, 16), a=(1, 4, 4))[1] == [(2, 4, 6)]
    t = mx.contrib.symbol.MultiBoxTarget(mx.sym.var("a"), mx.sym.var("l"), mx.sym.var("c"))
    assert t.infer_shape(a=(1, 4, 4), l=(2, 3, 5), c=(2, 3, 4))[1] == [(2, 16), (2, 16), (2, 4)]
