"""gluon.loss losses against numpy formulas (weights, sample weights, batch_axis), hybridized
equality, and the CTCLoss op against brute-force alignment enumeration."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import symjit as mx
from symjit import autograd, nd
from symjit.base import MXNetError
from symjit.gluon import loss as gloss
from symjit.ops.registry import apply_numpy
from symjit.test_utils import check_op_gradient

RS = np.random.RandomState(0)
PRED = RS.randn(4, 3).astype(np.float64)
LAB01 = RS.uniform(0.05, 0.95, size=(4, 3))
SIGNED = np.sign(RS.randn(4, 3))
DIST = np.exp(RS.randn(4, 3))
DIST /= DIST.sum(1, keepdims=True)
SW = RS.uniform(0.5, 2, size=(4, 1))


def _softplus(x):
    return np.log1p(np.exp(x))


def _log_softmax(x):
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


CASES = [
    ("L1", lambda: gloss.L1Loss(), (PRED, LAB01), lambda p, y: np.abs(y - p)),
    ("BCE", lambda: gloss.SigmoidBCELoss(), (PRED, LAB01),
     lambda p, y: -(y * np.log(1 / (1 + np.exp(-p))) + (1 - y) * np.log(1 - 1 / (1 + np.exp(-p))))),
    ("BCE_sig", lambda: gloss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=True), (1 / (1 + np.exp(-PRED)), LAB01),
     lambda p, y: -(y * np.log(p) + (1 - y) * np.log(1 - p))),
    ("KL", lambda: gloss.KLDivLoss(), (_log_softmax(PRED), DIST), lambda p, y: y * (np.log(y) - p)),
    ("KL_raw", lambda: gloss.KLDivLoss(from_logits=False), (PRED, DIST),
     lambda p, y: y * (np.log(y) - _log_softmax(p))),
    ("Huber", lambda: gloss.HuberLoss(rho=0.7), (PRED, LAB01),
     lambda p, y: np.where(np.abs(y - p) > 0.7, np.abs(y - p) - 0.35, (y - p) ** 2 / 1.4)),
    ("Hinge", lambda: gloss.HingeLoss(margin=0.5), (PRED, SIGNED), lambda p, y: np.maximum(0, 0.5 - p * y)),
    ("SqHinge", lambda: gloss.SquaredHingeLoss(), (PRED, SIGNED), lambda p, y: np.maximum(0, 1 - p * y) ** 2),
    ("Logistic", lambda: gloss.LogisticLoss(), (PRED, SIGNED), lambda p, y: np.log1p(np.exp(-p * y))),
    ("LogisticBin", lambda: gloss.LogisticLoss(label_format="binary"), (PRED, (SIGNED + 1) / 2),
     lambda p, y: np.log1p(np.exp(-p * (2 * y - 1)))),
]


@pytest.mark.parametrize("name,make,args,f", CASES, ids=[c[0] for c in CASES])
def test_pointwise_losses_match_numpy(name, make, args, f):
    elem = f(*args)
    fn = make()
    ref = elem.mean(axis=1)
    got = fn(*[nd.array(a) for a in args]).asnumpy()
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    # sample_weight multiplies before the per-sample mean
    got_w = fn(*[nd.array(a) for a in args], nd.array(SW)).asnumpy()
    np.testing.assert_allclose(got_w, (elem * SW).mean(axis=1), rtol=1e-5, atol=1e-6)
    fn.hybridize()
    np.testing.assert_allclose(fn(*[nd.array(a) for a in args]).asnumpy(), ref, rtol=1e-4, atol=1e-6)


def test_weight_and_batch_axis():
    p, y = RS.randn(3, 5), RS.randn(3, 5)
    np.testing.assert_allclose(gloss.L1Loss(weight=2.5)(nd.array(p), nd.array(y)).asnumpy(),
                               2.5 * np.abs(p - y).mean(1), rtol=1e-5)
    np.testing.assert_allclose(gloss.L1Loss(batch_axis=1)(nd.array(p), nd.array(y)).asnumpy(),
                               np.abs(p - y).mean(0), rtol=1e-5)
    with pytest.raises(TypeError):
        gloss.L1Loss(weight=nd.array([1.0]))(nd.array(p), nd.array(y))
    with pytest.raises(ValueError):
        gloss.LogisticLoss(label_format="bogus")


def test_bce_pos_weight():
    pw = np.array([[1.0, 2.0, 3.0]])
    s = 1 / (1 + np.exp(-PRED))
    ref = -(pw * LAB01 * np.log(s) + (1 - LAB01) * np.log(1 - s))
    got = gloss.SigmoidBCELoss()(nd.array(PRED), nd.array(LAB01), None, nd.array(pw)).asnumpy()
    np.testing.assert_allclose(got, ref.mean(1), rtol=1e-5)
    got = gloss.SigmoidBCELoss(from_sigmoid=True)(nd.array(s), nd.array(LAB01), None, nd.array(pw)).asnumpy()
    np.testing.assert_allclose(got, ref.mean(1), rtol=1e-5)


def test_triplet_cosine_and_poisson():
    a, p, n = RS.randn(4, 3), RS.randn(4, 3), RS.randn(4, 3)
    ref = np.maximum(0, ((p - a) ** 2).sum(1) - ((n - a) ** 2).sum(1) + 1)
    np.testing.assert_allclose(gloss.TripletLoss()(nd.array(a), nd.array(p), nd.array(n)).asnumpy(), ref, rtol=1e-5)

    lab = np.array([1, -1, 1, -1])
    cos = (a * p).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(p, axis=1)
    ref = np.where(lab == 1, 1 - cos, np.maximum(0, cos - 0.1)).reshape(-1, 1)
    ce = gloss.CosineEmbeddingLoss(margin=0.1)
    np.testing.assert_allclose(ce(nd.array(a), nd.array(p), nd.array(lab)).asnumpy(), ref, rtol=1e-5, atol=1e-6)
    ce.hybridize()
    np.testing.assert_allclose(ce(nd.array(a), nd.array(p), nd.array(lab)).asnumpy(), ref, rtol=1e-4, atol=1e-6)

    rate, target = RS.uniform(0.5, 3, size=(4, 3)), RS.randint(0, 5, size=(4, 3)).astype(np.float64)
    got = gloss.PoissonNLLLoss()(nd.array(np.log(rate)), nd.array(target)).asnumpy()
    np.testing.assert_allclose(got, [(rate - target * np.log(rate)).mean()], rtol=1e-5)
    # targets >= 1: as in MXNet, a zero target makes the Stirling term 0 * log(0) = NaN
    target = target + 1
    full = gloss.PoissonNLLLoss(from_logits=False, compute_full=True)(nd.array(rate), nd.array(target)).asnumpy()
    stirling = np.where(target > 1, target * np.log(target) - target + 0.5 * np.log(2 * np.pi * target), 0)
    np.testing.assert_allclose(full, [(rate - target * np.log(rate + 1e-8) + stirling).mean()], rtol=1e-5)


def test_loss_gradient_matches_numpy_derivative():
    p = nd.array(PRED)
    p.attach_grad()
    with autograd.record():
        out = gloss.LogisticLoss()(p, nd.array(SIGNED))
    out.backward()
    # d/dp mean_j log(1 + exp(-p y)) = -y sigmoid(-p y) / 3
    ref = -SIGNED / (1 + np.exp(PRED * SIGNED)) / 3
    np.testing.assert_allclose(p.grad.asnumpy(), ref, rtol=1e-4, atol=1e-6)


# ---- CTC -----------------------------------------------------------------------------------

def _collapse(path, blank):
    out = []
    prev = None
    for s in path:
        if s != prev and s != blank:
            out.append(s)
        prev = s
    return out


def brute_ctc(logits, label, blank):
    """-log sum over every length-T path that collapses to `label` of prod softmax probs."""
    t_len, c = logits.shape
    prob = np.exp(logits - logits.max(1, keepdims=True))
    prob /= prob.sum(1, keepdims=True)
    total = 0.0
    for path in itertools.product(range(c), repeat=t_len):
        if _collapse(path, blank) == list(label):
            total += np.prod([prob[t, s] for t, s in enumerate(path)])
    return -math.log(total) if total > 0 else math.inf


def test_ctc_op_matches_brute_force_first_blank():
    rs = np.random.RandomState(1)
    x = rs.randn(5, 3, 4)
    labels = np.array([[1, 2, 0], [3, 3, 0], [2, 0, 0]], dtype=np.float32)  # 0 pads (blank first)
    got = apply_numpy("CTCLoss", [x.astype(np.float32), labels])[0]
    ref = [brute_ctc(x[:, i], [v for v in labels[i] if v != 0], 0) for i in range(3)]
    np.testing.assert_allclose(got, ref, rtol=1e-5)


def test_ctc_lengths_and_blank_last():
    rs = np.random.RandomState(2)
    x = rs.randn(5, 2, 3)
    labels = np.array([[0, 1, 1], [1, 0, -1]], dtype=np.float32)
    got = apply_numpy("CTCLoss", [x, labels, np.array([4, 5.0]), np.array([2, 2.0])],
                      {"use_data_lengths": True, "use_label_lengths": True, "blank_label": "last"})[0]
    ref = [brute_ctc(x[:4, 0], [0, 1], 2), brute_ctc(x[:, 1], [1, 0], 2)]
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    # a label too long for the sequence has zero probability
    inf = apply_numpy("CTCLoss", [x[:2], np.array([[1, 1, 1], [1, 0, -1]], dtype=np.float32)],
                      {"blank_label": "last"})[0]
    assert np.isinf(inf[0]) and np.isfinite(inf[1])


def test_ctc_gradient_by_finite_differences():
    rs = np.random.RandomState(3)
    x = rs.randn(4, 2, 3)
    labels = np.array([[1, 2], [2, 0]], dtype=np.float64)
    check_op_gradient("CTCLoss", [x, labels], wrt=[0], rtol=1e-3, atol=1e-5)
    check_op_gradient("CTCLoss", [x, labels, np.array([3.0, 4.0])], {"use_data_lengths": True}, wrt=[0],
                      rtol=1e-3, atol=1e-5)


def test_ctc_errors_name_the_op():
    x = np.zeros((3, 2, 4), dtype=np.float32)
    with pytest.raises(MXNetError, match="CTCLoss"):
        apply_numpy("CTCLoss", [x, np.zeros((3, 2), dtype=np.float32)])
    with pytest.raises(MXNetError, match="CTCLoss"):
        apply_numpy("CTCLoss", [x, np.array([[5, 0], [1, 0]], dtype=np.float32)])
    with pytest.raises(MXNetError, match="CTCLoss"):
        apply_numpy("CTCLoss", [x[0], np.zeros((2, 2), dtype=np.float32)])


def test_gluon_ctc_loss_layouts_weights_and_hybridize():
    rs = np.random.RandomState(4)
    pred = rs.randn(2, 5, 4).astype(np.float32)  # NTC
    label = np.array([[0, 1], [2, -1]], dtype=np.float32)  # blank last (3), -1 pads
    ref = np.array([brute_ctc(pred[0].astype(np.float64), [0, 1], 3), brute_ctc(pred[1].astype(np.float64), [2], 3)])
    ctc = gloss.CTCLoss()
    np.testing.assert_allclose(ctc(nd.array(pred), nd.array(label)).asnumpy(), ref, rtol=1e-5)
    tnc = gloss.CTCLoss(layout="TNC", label_layout="TN", weight=0.5)
    np.testing.assert_allclose(tnc(nd.array(pred.transpose(1, 0, 2)), nd.array(label.T)).asnumpy(), 0.5 * ref,
                               rtol=1e-5)
    got = ctc(nd.array(pred), nd.array(label), nd.array([3, 5]), nd.array([2, 1])).asnumpy()
    np.testing.assert_allclose(got[0], brute_ctc(pred[0, :3].astype(np.float64), [0, 1], 3), rtol=1e-5)
    p = nd.array(pred)
    p.attach_grad()
    with autograd.record():
        out = ctc(p, nd.array(label))
    out.backward()
    g_imp = p.grad.asnumpy().copy()
    ctc.hybridize()
    with autograd.record():
        out2 = ctc(p, nd.array(label))
    out2.backward()
    np.testing.assert_allclose(out2.asnumpy(), ref, rtol=1e-4)
    np.testing.assert_allclose(p.grad.asnumpy(), g_imp, rtol=1e-4, atol=1e-6)
    # gradient rows are softmax minus a distribution: they sum to zero over classes
    np.testing.assert_allclose(g_imp.sum(-1), 0, atol=1e-5)


def _ctc_reference(probs, seq, blank):
    """-log p(seq) summed over all alignments by brute force (tiny T, C)."""
    t_len, c = probs.shape
    total = 0.0
    for path in itertools.product(range(c), repeat=t_len):
        collapsed, prev = [], None
        for s in path:
            if s != prev and s != blank:
                collapsed.append(s)
            prev = s
        if collapsed == list(seq):
            total += float(np.prod([probs[t, s] for t, s in enumerate(path)]))
    return -math.log(total)


def test_ctc_label_lengths_ignore_padding_values_and_match_brute_force():
    # labels past label_lengths are padding whatever their value (MXNet: [[2,1,3,3],[3,2,2,3]]
    # with lengths [2,3] on 4 classes, blank last): the loss equals that of the same sequence
    # structure ([[1,0],[2,1,1]] padded with -1) under uniform probabilities
    loss = gloss.CTCLoss()
    a = loss(nd.ones((2, 20, 4)), nd.array([[1, 0, -1, -1], [2, 1, 1, -1]])).asnumpy()
    b = loss(nd.ones((2, 20, 4)), nd.array([[2, 1, 3, 3], [3, 2, 2, 3]]), None, nd.array([2, 3])).asnumpy()
    np.testing.assert_allclose(b, a, rtol=1e-5)
    np.testing.assert_allclose(a, [18.82820702, 16.50581741], rtol=1e-5)
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((1, 4, 3)).astype(np.float32)
    probs = np.exp(logits[0]) / np.exp(logits[0]).sum(-1, keepdims=True)
    got = loss(nd.array(logits), nd.array([[0, 1]])).asnumpy()[0]
    assert abs(got - _ctc_reference(probs, [0, 1], blank=2)) < 1e-4
    got = loss(nd.array(logits), nd.array([[1, 1]])).asnumpy()[0]   # a repeat needs a blank between
    assert abs(got - _ctc_reference(probs, [1, 1], blank=2)) < 1e-4


def test_sdml_loss_matches_definition():
    rng = np.random.default_rng(1)
    x1, x2 = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    got = gloss.SDMLLoss(smoothing_parameter=0.3)(nd.array(x1), nd.array(x2)).asnumpy()
    d = ((x1[:, None, :] - x2[None, :, :]) ** 2).sum(-1)
    logp = -d - np.log(np.exp(-d).sum(1, keepdims=True))
    lab = np.where(np.eye(4) > 0, 0.7, 0.3 / 3)
    expect = (lab * (np.log(lab + 1e-12) - logp)).sum(1)
    np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-5)


def test_ndarray_iter_labels_as_mxnet():
    # numpy inputs become float32 NDArrays (MXNet's nd.array), inputs are ordered by name, and a
    # label with more samples than the data is batched by the data's samples
    it = mx.io.NDArrayIter(np.arange(4).reshape(4, 1), {"w": np.arange(8), "label": np.arange(8, dtype=np.int8)},
                           batch_size=2)
    assert [d.name for d in it.provide_label] == ["label", "w"]
    assert all(d.dtype == np.float32 for d in it.provide_label + it.provide_data)
    batches = list(it)
    assert len(batches) == 2
    np.testing.assert_array_equal(batches[1].label[0].asnumpy(), [2, 3])
    with pytest.raises(MXNetError):
        mx.io.NDArrayIter(np.zeros((4, 1)), np.zeros(3), batch_size=2)
