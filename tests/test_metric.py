"""mx.metric: F1, MCC, PearsonCorrelation, NegativeLogLikelihood, CustomMetric and metric.np on
hand-computable cases (MXNet 1.9.1's documented formulas)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import symjit as mx
from symjit import nd


def _scores(pred_classes):
    """Two-class scores whose argmax is `pred_classes`."""
    p = np.zeros((len(pred_classes), 2), np.float32)
    p[np.arange(len(pred_classes)), pred_classes] = 1
    return nd.array(p)


# labels / predictions with TP=3, FP=1, FN=2, TN=4
LABELS = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]
PREDS = [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]


def test_f1_and_mcc_on_a_confusion_matrix():
    f1 = mx.metric.create("f1")
    f1.update([nd.array(LABELS)], [_scores(PREDS)])
    precision, recall = 3 / 4, 3 / 5
    assert f1.get() == ("f1", pytest.approx(2 * precision * recall / (precision + recall)))
    mcc = mx.metric.MCC()
    mcc.update([nd.array(LABELS)], [_scores(PREDS)])
    assert mcc.get()[1] == pytest.approx((3 * 4 - 1 * 2) / math.sqrt(4 * 5 * 5 * 6))


def test_f1_macro_averages_batches_micro_pools_them():
    batches = [([1, 0, 1, 1], [1, 0, 0, 1]), ([1, 0, 0, 1], [1, 1, 1, 0])]
    macro, micro = mx.metric.F1(average="macro"), mx.metric.F1(average="micro")
    for labels, preds in batches:
        for m in (macro, micro):
            m.update([nd.array(labels)], [_scores(preds)])
    f_a = 2 * 1.0 * (2 / 3) / (1.0 + 2 / 3)             # TP=2 FP=0 FN=1
    f_b = 2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2)      # TP=1 FP=2 FN=1
    assert macro.get()[1] == pytest.approx((f_a + f_b) / 2)
    f_all = 2 * (3 / 5) * (3 / 5) / (6 / 5)             # TP=3 FP=2 FN=2
    assert micro.get()[1] == pytest.approx(f_all)
    assert micro.num_inst == 8
    micro.reset_local()
    assert math.isnan(micro.get()[1]) and micro.get_global()[1] == pytest.approx(f_all)
    with pytest.raises(ValueError, match="binary"):
        macro.update([nd.array([0, 1, 2])], [_scores([0, 1, 1])])


def test_mcc_without_examples_and_degenerate_margins():
    mcc = mx.metric.MCC()
    mcc.update([nd.array([1, 1])], [_scores([1, 1])])   # TP=2 only: zero margins are skipped
    assert mcc.get()[1] == 0.0


def test_pearson_correlation_macro_and_micro():
    a, b = np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 4.0, 5.0, 9.0])
    m = mx.metric.create("pearsonr")
    m.update([nd.array(a)], [nd.array(b)])
    assert m.get()[1] == pytest.approx(np.corrcoef(a, b)[0, 1])
    micro = mx.metric.PearsonCorrelation(average="micro")
    micro.update([nd.array(a)], [nd.array(b)])   # one batch: the exact coefficient
    assert micro.get()[1] == pytest.approx(np.corrcoef(a, b)[0, 1])


def test_negative_log_likelihood():
    probs = nd.array([[0.1, 0.9], [0.6, 0.4], [0.25, 0.75]])
    m = mx.metric.create("nll_loss")
    m.update([nd.array([1, 0, 0])], [probs])
    assert m.get() == ("nll-loss", pytest.approx(-(math.log(0.9) + math.log(0.6) + math.log(0.25)) / 3))


def test_custom_metric_and_np():
    def mismatches(label, pred):
        return float((label != pred.argmax(axis=1)).sum()), label.size
    m = mx.metric.CustomMetric(mismatches)
    m.update([nd.array([1, 0, 1])], [_scores([1, 1, 0])])
    assert m.get() == ("mismatches", pytest.approx(2 / 3))
    m2 = mx.metric.np(lambda label, pred: float((label == pred.argmax(axis=1)).mean()))
    assert m2.name == "custom(<lambda>)"
    m2.update([nd.array([1, 0]), nd.array([0])], [_scores([1, 1]), _scores([0])])
    assert m2.get()[1] == pytest.approx((0.5 + 1.0) / 2)
    assert isinstance(mx.metric.create(mismatches), mx.metric.CustomMetric)
    with pytest.raises(mx.base.MXNetError):
        m.update([nd.array([1])], [_scores([1]), _scores([0])])


def test_perplexity_ignores_a_label_and_clips_class_ids_as_pick():
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.25, 0.25, 0.5], [0.2, 0.3, 0.5]], np.float32)
    labels = np.array([0, 5, -1, 2], np.float32)     # 5 picks the last class (clipped); -1 ignored
    m = mx.metric.Perplexity(ignore_label=-1)
    m.update([nd.array(labels)], [nd.array(p)])
    picked = [0.7, 0.3, 0.5]
    assert m.num_inst == 3
    assert m.get()[1] == pytest.approx(math.exp(-sum(math.log(v) for v in picked) / 3), rel=1e-6)
    plain = mx.metric.Perplexity()
    plain.update([nd.array(labels)], [nd.array(p)])       # without ignore_label -1 picks class 0
    assert plain.num_inst == 4
    assert plain.get()[1] == pytest.approx(math.exp(-sum(math.log(v) for v in picked + [0.25]) / 4), rel=1e-6)


def test_perplexity_along_another_axis_and_bad_shapes():
    p = np.array([[0.9, 0.5], [0.1, 0.5]], np.float32)    # classes along axis 0
    m = mx.metric.Perplexity(axis=0)
    m.update([nd.array([0, 1])], [nd.array(p)])
    assert m.get()[1] == pytest.approx(math.exp(-(math.log(0.9) + math.log(0.5)) / 2), rel=1e-6)
    with pytest.raises(mx.MXNetError, match="perplexity"):
        m.update([nd.array([0, 1, 1])], [nd.array(p)])


def _sklearn_style_multiclass_mcc(labels, preds, k):
    """The multiclass MCC straight from its definition over the confusion matrix (rows predicted)."""
    c = np.zeros((k, k))
    for p, t in zip(preds, labels):
        c[p, t] += 1
    n = c.sum()
    cov = lambda a, b: sum(np.dot(a[:, i] - a[:, i].mean(), b[:, i] - b[:, i].mean()) for i in range(k))
    onehot_p, onehot_t = np.eye(k)[preds], np.eye(k)[labels]
    assert n == len(labels)
    return cov(onehot_p, onehot_t) / math.sqrt(cov(onehot_p, onehot_p) * cov(onehot_t, onehot_t))


def test_pcc_is_mcc_on_two_classes_and_the_multiclass_correlation_beyond():
    pcc, mcc = mx.metric.create("pcc"), mx.metric.MCC()
    pcc.update([nd.array(LABELS)], [_scores(PREDS)])
    mcc.update([nd.array(LABELS)], [_scores(PREDS)])
    assert pcc.get() == ("pcc", pytest.approx(mcc.get()[1]))
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, 50)
    preds = np.where(rng.random(50) < 0.6, labels, rng.integers(0, 4, 50))
    scores = np.eye(4, dtype=np.float32)[preds] + 0.01
    pcc = mx.metric.PCC()
    pcc.update([nd.array(labels[:20])], [nd.array(scores[:20])])   # the matrix grows to 4 classes
    pcc.update([nd.array(labels[20:])], [nd.array(preds[20:])])    # class ids are taken as they are
    want = _sklearn_style_multiclass_mcc(labels, preds, 4)
    assert pcc.get()[1] == pytest.approx(want)
    pcc.reset_local()
    assert math.isnan(pcc.get()[1]) and pcc.get_global()[1] == pytest.approx(want)
    pcc.reset()
    assert math.isnan(pcc.get_global()[1])


def test_torch_caffe_loss_metrics_config_and_global_values():
    for cls, name in ((mx.metric.Torch, "torch"), (mx.metric.Caffe, "caffe")):
        m = mx.metric.create(name)
        assert isinstance(m, cls) and isinstance(m, mx.metric.Loss)
        m.update(None, [nd.array([1.0, 3.0])])
        assert m.get() == (name, 2.0)
    acc = mx.metric.Accuracy(axis=1, name="acc1")
    config = acc.get_config()
    assert config == {"axis": 1, "metric": "Accuracy", "name": "acc1", "output_names": None, "label_names": None}
    again = mx.metric.create(**config)
    assert isinstance(again, mx.metric.Accuracy) and again.name == "acc1"
    comp = mx.metric.create(["acc", "f1"])
    assert [c["metric"] for c in comp.get_config()["metrics"]] == ["Accuracy", "F1"]
    assert isinstance(comp.get_metric(1), mx.metric.F1)
    comp.update([nd.array([1, 0])], [nd.array([[0.0, 1.0], [0.0, 1.0]])])
    comp.reset_local()
    assert comp.get_global_name_value() == [("accuracy", 0.5), ("f1", pytest.approx(2 / 3))]
    assert all(math.isnan(v) for _, v in comp.get_name_value())
    assert isinstance(mx.metric.create("topkaccuracy", top_k=2), mx.metric.TopKAccuracy)

    @mx.metric.register
    @mx.metric.alias("always_one")
    class AlwaysOne(mx.metric.EvalMetric):
        def __init__(self, name="one"):
            super().__init__(name)

        def update(self, labels, preds):
            self.sum_metric, self.num_inst = 1.0, 1

    assert isinstance(mx.metric.create("always_one"), AlwaysOne)
    assert isinstance(mx.metric.create("alwaysone"), AlwaysOne)


def test_perplexity_ignores_the_ignore_label_and_clips_indices():
    rng = np.random.default_rng(3)
    probs = rng.random((6, 5)).astype(np.float32)
    probs /= probs.sum(axis=1, keepdims=True)
    labels = np.array([0, 4, 2, -1, 5, 1], np.float32)   # -1 is ignored; 5 is clipped to 4 (pick's clip)
    ppl = mx.metric.Perplexity(ignore_label=-1)
    ppl.update([nd.array(labels.reshape(2, 3))], [nd.array(probs)])
    picked = [probs[0, 0], probs[1, 4], probs[2, 2], probs[4, 4], probs[5, 1]]
    want = math.exp(-np.mean(np.log(picked)))
    assert ppl.get() == ("perplexity", pytest.approx(want, rel=1e-5))
    ppl.reset_local()
    assert math.isnan(ppl.get()[1]) and ppl.get_global()[1] == pytest.approx(want, rel=1e-5)
    plain = mx.metric.create("perplexity", ignore_label=None)
    plain.update([nd.array([0, 1])], [nd.array([[0.0, 1.0], [0.5, 0.5]])])   # p=0 is floored at 1e-10
    assert plain.get()[1] == pytest.approx(math.exp(-(math.log(1e-10) + math.log(0.5)) / 2), rel=1e-5)
    col = mx.metric.Perplexity(ignore_label=None, axis=0)
    col.update([nd.array([1, 0])], [nd.array(np.array([[0.2, 0.6], [0.8, 0.4]]))])
    assert col.get()[1] == pytest.approx(math.exp(-(math.log(0.8) + math.log(0.6)) / 2), rel=1e-5)
    with pytest.raises(mx.base.MXNetError, match="shape mismatch"):
        plain.update([nd.array([0, 1, 1])], [nd.array(np.ones((2, 2)))])
