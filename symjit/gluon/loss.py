"""Gluon losses (MXNet 1.x `gluon.loss`): each loss is a HybridBlock returning one value per
sample (the mean over every axis but `batch_axis`), optionally weighted by a scalar `weight`
and a broadcastable `sample_weight`."""
from __future__ import annotations

from .. import ndarray as _nd
from ..base import numeric_types
from ..util import is_np_array
from .block import HybridBlock

__all__ = ["Loss", "L2Loss", "SoftmaxCrossEntropyLoss", "SoftmaxCELoss"]


def _apply_weighting(F, loss, weight=None, sample_weight=None):
    """loss * sample_weight (broadcast) * weight (a number)."""
    if sample_weight is not None:
        loss = loss * sample_weight if is_np_array() else F.broadcast_mul(loss, sample_weight)
    if weight is not None:
        if not isinstance(weight, numeric_types):
            raise TypeError("weight must be a number")
        loss = loss * weight
    return loss


def _reshape_like(F, x, y):
    """`x` reshaped to `y`'s shape."""
    if F is _nd:
        return x.reshape(y.shape)
    return F.npx.reshape_like(x, y) if is_np_array() else F.reshape_like(x, y)


class Loss(HybridBlock):
    """Base class of losses: `weight` scales the loss, `batch_axis` is kept by the final mean."""

    def __init__(self, weight, batch_axis, **kwargs):
        super().__init__(**kwargs)
        self._weight = weight
        self._batch_axis = batch_axis

    def __repr__(self):
        return f"{self.__class__.__name__}(batch_axis={self._batch_axis}, w={self._weight})"

    def hybrid_forward(self, F, x, *args, **kwargs):
        raise NotImplementedError


class L2Loss(Loss):
    """L = weight/2 * (label - pred)^2, averaged per sample."""

    def __init__(self, weight=1., batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = _reshape_like(F, label, pred)
        loss = F.np.square(label - pred) if is_np_array() else F.square(label - pred)
        loss = _apply_weighting(F, loss, self._weight / 2, sample_weight)
        return _batch_mean(F, loss, self._batch_axis)


class SoftmaxCrossEntropyLoss(Loss):
    """Cross entropy of softmax(pred) against integer labels (`sparse_label`) or distributions."""

    def __init__(self, axis=-1, sparse_label=True, from_logits=False, weight=None, batch_axis=0,
                 **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._axis = axis
        self._sparse_label = sparse_label
        self._from_logits = from_logits

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        if F is _nd and self._sparse_label and not self._from_logits and not is_np_array() \
                and _fused_nll_applies(pred):
            return self._fused_forward(pred, label, sample_weight)
        log_softmax, pick = (F.npx.log_softmax, F.npx.pick) if is_np_array() else (F.log_softmax, F.pick)
        if not self._from_logits:
            pred = log_softmax(pred, self._axis)
        if self._sparse_label:
            loss = -pick(pred, label, axis=self._axis, keepdims=True)
        else:
            label = _reshape_like(F, label, pred)
            loss = -(pred * label).sum(axis=self._axis, keepdims=True)
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return _batch_mean(F, loss, self._batch_axis)

    def _fused_forward(self, pred, label, sample_weight):
        """The eager sparse loss as one op, `_log_softmax_nll` (log_softmax, pick and negation,
        bit for bit, with one gradient op). For a 2-D `pred` with the classes on the other axis
        than the batch and no weighting, the per-sample mean is over one element (the identity),
        so the op's result without the class axis is the loss itself."""
        axis, batch_axis = self._axis % pred.ndim, self._batch_axis % pred.ndim
        direct = pred.ndim == 2 and axis != batch_axis and sample_weight is None and self._weight is None
        loss = _nd.invoke("_log_softmax_nll", [pred, label], {"axis": self._axis, "keepdims": not direct})
        if direct:
            return loss
        loss = _apply_weighting(_nd, loss, self._weight, sample_weight)
        return _batch_mean(_nd, loss, self._batch_axis)


def _fused_nll_applies(pred) -> bool:
    """The eager loss takes the fused op where its numpy computation is the one the separate
    ops would run (their native kernels take large float32 inputs)."""
    from ..ndarray import fastpath
    return not fastpath.compiles_eagerly("log_softmax", {}, [pred._data])


SoftmaxCELoss = SoftmaxCrossEntropyLoss


# ---- more losses (MXNet 1.x gluon.loss), appended ----------------------------------------
__all__ += ["L1Loss", "SigmoidBinaryCrossEntropyLoss", "SigmoidBCELoss", "KLDivLoss", "HuberLoss",
            "HingeLoss", "SquaredHingeLoss", "LogisticLoss", "TripletLoss", "CosineEmbeddingLoss",
            "PoissonNLLLoss", "CTCLoss"]


def _batch_mean(F, loss, batch_axis):
    """Mean over every axis but `batch_axis` (one value per sample). Under NumPy semantics MXNet
    averages over the axes after the first: `batch_flatten(loss).mean(axis=1)` on symbols."""
    if not is_np_array():
        return F.mean(loss, axis=batch_axis, exclude=True)
    if F is _nd:
        return loss.mean(axis=tuple(range(1, loss.ndim))) if loss.ndim > 1 else loss
    return F.npx.batch_flatten(loss).mean(axis=1)


class L1Loss(Loss):
    """L = weight * |label - pred|, averaged per sample."""

    def __init__(self, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = _reshape_like(F, label, pred)
        loss = F.abs(label - pred)
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return _batch_mean(F, loss, self._batch_axis)


class SigmoidBinaryCrossEntropyLoss(Loss):
    """Binary cross entropy of sigmoid(pred) (or of pred itself when `from_sigmoid`) against
    labels in [0, 1]; `pos_weight` (broadcastable) scales the positive term. Uses the stable
    form max(x, 0) - x*z + log(1 + exp(-|x|)) on logits."""

    def __init__(self, from_sigmoid=False, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._from_sigmoid = from_sigmoid

    def hybrid_forward(self, F, pred, label, sample_weight=None, pos_weight=None):
        label = _reshape_like(F, label, pred)
        if not self._from_sigmoid:
            if pos_weight is None:
                loss = F.relu(pred) - pred * label + F.Activation(-F.abs(pred), act_type="softrelu")
            else:
                log_weight = 1 + F.broadcast_mul(pos_weight - 1, label)
                loss = pred - pred * label + log_weight * (
                    F.Activation(-F.abs(pred), act_type="softrelu") + F.relu(-pred))
        else:
            eps = 1e-12
            if pos_weight is None:
                loss = -(F.log(pred + eps) * label + F.log(1. - pred + eps) * (1. - label))
            else:
                loss = -(F.broadcast_mul(F.log(pred + eps) * label, pos_weight)
                         + F.log(1. - pred + eps) * (1. - label))
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return _batch_mean(F, loss, self._batch_axis)


SigmoidBCELoss = SigmoidBinaryCrossEntropyLoss


class KLDivLoss(Loss):
    """KL divergence label * (log(label) - pred); pred are log-probabilities when
    `from_logits` (the default), else log_softmax(pred, axis) is taken first."""

    def __init__(self, from_logits=True, axis=-1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._from_logits = from_logits
        self._axis = axis

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        if not self._from_logits:
            pred = F.log_softmax(pred, self._axis)
        loss = label * (F.log(label + 1e-12) - pred)
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return _batch_mean(F, loss, self._batch_axis)


class HuberLoss(Loss):
    """Smoothed L1: |d| - rho/2 where |d| > rho, else d^2 / (2 rho); d = label - pred."""

    def __init__(self, rho=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._rho = rho

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = _reshape_like(F, label, pred)
        loss = F.abs(label - pred)
        loss = F.where(loss > self._rho, loss - 0.5 * self._rho, (0.5 / self._rho) * F.square(loss))
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return _batch_mean(F, loss, self._batch_axis)


class HingeLoss(Loss):
    """max(0, margin - pred * label) for labels in {-1, 1}."""

    def __init__(self, margin=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = _reshape_like(F, label, pred)
        loss = F.relu(self._margin - pred * label)
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return _batch_mean(F, loss, self._batch_axis)


class SquaredHingeLoss(Loss):
    """max(0, margin - pred * label)^2 for labels in {-1, 1}."""

    def __init__(self, margin=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = _reshape_like(F, label, pred)
        loss = F.square(F.relu(self._margin - pred * label))
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return _batch_mean(F, loss, self._batch_axis)


class LogisticLoss(Loss):
    """log(1 + exp(-pred * label)) for labels in {-1, 1} ('signed') or {0, 1} ('binary'),
    computed stably on the {0, 1} form."""

    def __init__(self, weight=None, batch_axis=0, label_format="signed", **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._label_format = label_format
        if self._label_format not in ["signed", "binary"]:
            raise ValueError(f"label_format can only be signed or binary, recieved {label_format}.")

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = _reshape_like(F, label, pred)
        if self._label_format == "signed":
            label = (label + 1.0) / 2.0
        loss = F.relu(pred) - pred * label + F.Activation(-F.abs(pred), act_type="softrelu")
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return _batch_mean(F, loss, self._batch_axis)


class TripletLoss(Loss):
    """max(0, ||pos - pred||^2 - ||neg - pred||^2 + margin), squared norms over every axis
    but `batch_axis`."""

    def __init__(self, margin=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F, pred, positive, negative, sample_weight=None):
        positive = _reshape_like(F, positive, pred)
        negative = _reshape_like(F, negative, pred)
        loss = F.sum(F.square(positive - pred) - F.square(negative - pred), axis=self._batch_axis,
                     exclude=True)
        loss = F.relu(loss + self._margin)
        return _apply_weighting(F, loss, self._weight, sample_weight)


class CosineEmbeddingLoss(Loss):
    """1 - cos(x1, x2) for label 1, max(0, cos(x1, x2) - margin) for label -1 (cosine over
    the last axis); output shape (N, 1) as MXNet's."""

    def __init__(self, weight=None, batch_axis=0, margin=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F, input1, input2, label, sample_weight=None):
        input1 = _reshape_like(F, input1, input2)
        label = label.reshape((-1, 1))
        cos_sim = self._cosine_similarity(F, input1, input2)
        y_1 = label == 1
        y_minus_1 = label == -1
        cos_sim_a = (1 - cos_sim) * y_1
        cos_sim_b = F.relu(y_minus_1 * (cos_sim - self._margin))  # max(0, .) as MXNet's
        loss = cos_sim_a + cos_sim_b
        return _apply_weighting(F, loss, self._weight, sample_weight)

    @staticmethod
    def _cosine_similarity(F, x, y, axis=-1):
        x_norm = F.norm(x, axis=axis).reshape((-1, 1))
        y_norm = F.norm(y, axis=axis).reshape((-1, 1))
        x_dot_y = F.sum(x * y, axis=axis).reshape((-1, 1))
        return x_dot_y / F.maximum(x_norm * y_norm, 1e-12)


class PoissonNLLLoss(Loss):
    """Negative log likelihood of a Poisson target: exp(pred) - target*pred on log-rates
    (`from_logits`), else pred - target*log(pred + eps); `compute_full` adds the Stirling
    term for targets > 1. Returns the mean over all elements (a scalar), as MXNet 1.x."""

    def __init__(self, weight=None, from_logits=True, batch_axis=0, compute_full=False, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._from_logits = from_logits
        self._compute_full = compute_full

    def hybrid_forward(self, F, pred, target, sample_weight=None, epsilon=1e-08):
        target = _reshape_like(F, target, pred)
        if self._from_logits:
            loss = F.exp(pred) - target * pred
        else:
            loss = pred - target * F.log(pred + epsilon)
        if self._compute_full:
            import math
            stirling_factor = target * F.log(target) - target + 0.5 * F.log(2 * target * math.pi)
            stirling_factor = stirling_factor * (target > 1)
            loss = loss + stirling_factor
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return F.mean(loss)


class CTCLoss(Loss):
    """Connectionist Temporal Classification loss (blank = the last class, labels padded
    with -1). pred is (N, T, C) for layout 'NTC' or (T, N, C) for 'TNC'; label (N, L) for
    'NT' or (L, N) for 'TN'; optional pred_lengths and label_lengths (N,)."""

    def __init__(self, layout="NTC", label_layout="NT", weight=None, **kwargs):
        if layout not in ["NTC", "TNC"]:
            raise ValueError(f"Only 'NTC' and 'TNC' layouts for pred are supported. Got: {layout}")
        if label_layout not in ["NT", "TN"]:
            raise ValueError(f"Only 'NT' and 'TN' layouts for label are supported. Got: {label_layout}")
        self._layout = layout
        self._label_layout = label_layout
        batch_axis = label_layout.find("N")
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F, pred, label, pred_lengths=None, label_lengths=None,
                       sample_weight=None):
        if self._layout == "NTC":
            pred = F.swapaxes(pred, 0, 1)
        if self._batch_axis == 1:
            label = F.swapaxes(label, 0, 1)
        inputs = [pred, label] + [x for x in (pred_lengths, label_lengths) if x is not None]
        loss = F.CTCLoss(*inputs, use_data_lengths=pred_lengths is not None,
                         use_label_lengths=label_lengths is not None, blank_label="last")
        return _apply_weighting(F, loss, self._weight, sample_weight)


__all__ += ["SDMLLoss"]


class SDMLLoss(Loss):
    """Smoothed Deep Metric Learning loss (Bonadiman et al.): for a batch of aligned pairs
    (x1[i], x2[i]), the softmax over negative squared distances of x1[i] to every x2[j] is pulled
    (KL divergence) towards a label putting 1 - smoothing_parameter on j = i and the rest spread
    evenly over the other samples. Needs the batch size, so it runs imperatively (as MXNet's)."""

    def __init__(self, smoothing_parameter=0.3, weight=1., batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self.kl_loss = KLDivLoss(from_logits=True)
        self.smoothing_parameter = smoothing_parameter

    def _compute_distances(self, F, x1, x2):
        """(N, N) squared euclidean distances between the rows of x1 and x2."""
        diffs = F.broadcast_sub(F.expand_dims(x1, 1), F.expand_dims(x2, 0))
        return F.sum(F.square(diffs), axis=2)

    def _compute_labels(self, F, batch_size):
        gold = F.eye(batch_size)
        return gold * (1 - self.smoothing_parameter) + \
            (1 - gold) * self.smoothing_parameter / (batch_size - 1)

    def hybrid_forward(self, F, x1, x2):
        batch_size = x1.shape[0]
        labels = self._compute_labels(F, batch_size)
        distances = self._compute_distances(F, x1, x2)
        log_probabilities = F.log_softmax(-distances, axis=1)
        # the KL loss averages over the N labels of each row: times N gives the row's sum
        return self.kl_loss(log_probabilities, labels.as_in_context(distances.context)) * batch_size
