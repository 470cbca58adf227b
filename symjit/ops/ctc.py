"""Connectionist Temporal Classification loss (MXNet's `CTCLoss`, alias `ctc_loss`).

data (T, N, C) holds unnormalized activations (a softmax over C is taken inside), label
(N, L) the target sequences. With blank_label='first' the blank is class 0 and labels are
1..C-1 padded with 0; with 'last' the blank is C-1 and labels are 0..C-2 padded with -1.
Optional data_lengths / label_lengths (N,) override the sequence lengths (otherwise T, and
the position of the first padding value). Output: loss (N,) = -log p(label | data).

The reference runs the alpha-beta recursion in log space per sample; the gradient op
`_backward_CTCLoss` recomputes it and returns ograd[n] * (softmax - posterior occupancy).
Impossible alignments (a sequence too short for its label) give loss inf and gradient 0.
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Enum, Param
from .registry import Op, register

_PARAMS = {
    "use_data_lengths": Param(Bool, False, "whether data_lengths is given"),
    "use_label_lengths": Param(Bool, False, "whether label_lengths is given"),
    "blank_label": Param(Enum("first", "last"), "first", "the blank is class 0 or class C-1"),
}


def _ctc_inputs(attrs) -> list[str]:
    names = ["data", "label"]
    if attrs["use_data_lengths"]:
        names.append("data_lengths")
    if attrs["use_label_lengths"]:
        names.append("label_lengths")
    return names


def _logsumexp(*terms: np.ndarray) -> np.ndarray:
    """Elementwise log(sum(exp(terms))) that is -inf (not NaN) when every term is -inf."""
    stacked = np.stack(terms)
    m = stacked.max(axis=0)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(stacked - safe).sum(axis=0)) + safe


def _log_softmax(x: np.ndarray) -> np.ndarray:
    z = x - x.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def _sequences(op: str, attrs, inputs):
    """Validated (data as float64, per-sample label lists, per-sample lengths, blank index)."""
    data, label = inputs[0], inputs[1]
    if data.ndim != 3:
        raise MXNetError(f"{op}: data must be 3-D (sequence_length, batch_size, alphabet_size), "
                         f"got shape {data.shape}")
    if label.ndim != 2 or label.shape[0] != data.shape[1]:
        raise MXNetError(f"{op}: label must be 2-D (batch_size, label_length) with batch_size "
                         f"{data.shape[1]}, got shape {label.shape}")
    t_max, n, c = data.shape
    blank = 0 if attrs["blank_label"] == "first" else c - 1
    pad = 0 if attrs["blank_label"] == "first" else -1
    k = 2
    data_len = np.full(n, t_max, dtype=np.int64)
    if attrs["use_data_lengths"]:
        dl = inputs[k]
        k += 1
        if dl.shape != (n,):
            raise MXNetError(f"{op}: data_lengths must have shape ({n},), got {dl.shape}")
        data_len = dl.astype(np.int64)
        if (data_len < 0).any() or (data_len > t_max).any():
            raise MXNetError(f"{op}: data_lengths must lie in [0, {t_max}], got {dl.tolist()}")
    labels = []
    lab = label.astype(np.int64)
    if attrs["use_label_lengths"]:
        ll = inputs[k]
        if ll.shape != (n,):
            raise MXNetError(f"{op}: label_lengths must have shape ({n},), got {ll.shape}")
        lens = ll.astype(np.int64)
        if (lens < 0).any() or (lens > label.shape[1]).any():
            raise MXNetError(f"{op}: label_lengths must lie in [0, {label.shape[1]}], got {ll.tolist()}")
        labels = [lab[i, :lens[i]] for i in range(n)]
    else:
        for i in range(n):
            hits = np.nonzero(lab[i] == pad)[0]
            labels.append(lab[i, :hits[0]] if hits.size else lab[i])
    # MXNet reads the labels within each sequence's length as class indices without checking them
    # against the blank (the blank is told apart by position in the extended label, see
    # `_alpha_beta`); only indices outside the C classes are refused
    for i, seq in enumerate(labels):
        if seq.size and (seq.min() < 0 or seq.max() > c - 1):
            raise MXNetError(f"{op}: labels of sample {i} must lie in [0, {c - 1}] "
                             f"(blank_label='{attrs['blank_label']}'), got {seq.tolist()}")
    return data.astype(np.float64), labels, data_len, blank


def _alpha_beta(lp: np.ndarray, seq: np.ndarray, blank: int):
    """Log forward/backward variables over the blank-extended label; lp is (T, C) log-probs."""
    t_len = lp.shape[0]
    ext = np.full(2 * len(seq) + 1, blank, dtype=np.int64)
    ext[1::2] = seq
    s_len = ext.size
    # s-2 -> s skips are allowed onto a label position (odd s) whose label differs from the
    # previous label (positions, not values, tell labels from blanks, as MXNet's CTC does)
    skip = np.zeros(s_len, dtype=bool)
    skip[3::2] = ext[3::2] != ext[1:-2:2]
    neg = np.full(s_len, -np.inf)
    alpha = np.full((t_len, s_len), -np.inf)
    beta = np.full((t_len, s_len), -np.inf)
    if t_len == 0:
        return ext, alpha, beta, (0.0 if len(seq) == 0 else -np.inf)
    emit = lp[:, ext]
    alpha[0, 0] = emit[0, 0]
    if s_len > 1:
        alpha[0, 1] = emit[0, 1]
    for t in range(1, t_len):
        prev = alpha[t - 1]
        one = np.concatenate([[-np.inf], prev[:-1]])
        two = np.where(skip, np.concatenate([[-np.inf, -np.inf], prev[:-2]]), neg)
        alpha[t] = _logsumexp(prev, one, two) + emit[t]
    beta[-1, -1] = emit[-1, -1]
    if s_len > 1:
        beta[-1, -2] = emit[-1, -2]
    skip_from = np.concatenate([skip[2:], [False, False]])  # s -> s+2 allowed
    for t in range(t_len - 2, -1, -1):
        nxt = beta[t + 1]
        one = np.concatenate([nxt[1:], [-np.inf]])
        two = np.where(skip_from, np.concatenate([nxt[2:], [-np.inf, -np.inf]]), neg)
        beta[t] = _logsumexp(nxt, one, two) + emit[t]
    logp = _logsumexp(alpha[-1, -1], alpha[-1, -2]) if s_len > 1 else alpha[-1, -1]
    return ext, alpha, beta, float(logp)


def _ctc(op: str, attrs, inputs, want_grad: bool):
    """(loss (N,), gradient of the loss w.r.t. data (T, N, C) or None) in float64."""
    data, labels, data_len, blank = _sequences(op, attrs, inputs)
    t_max, n, c = data.shape
    loss = np.zeros(n)
    grad = np.zeros_like(data) if want_grad else None
    for i in range(n):
        t_len = int(data_len[i])
        lp = _log_softmax(data[:t_len, i, :])
        ext, alpha, beta, logp = _alpha_beta(lp, labels[i], blank)
        loss[i] = -logp
        if not want_grad or t_len == 0 or not np.isfinite(logp):
            continue
        occ = np.full((t_len, c), -np.inf)
        ab = alpha + beta
        for cls in np.unique(ext):
            occ[:, cls] = _logsumexp(*ab[:, ext == cls].T)
        with np.errstate(invalid="ignore"):
            post = np.exp(occ - lp - logp)
        grad[:t_len, i, :] = np.exp(lp) - np.nan_to_num(post)
    return loss, grad


@register("CTCLoss", aliases=("ctc_loss", "_contrib_CTCLoss", "_contrib_ctc_loss"))
class CTCLoss(Op):
    """Connectionist Temporal Classification loss of (T, N, C) activations and (N, L) labels."""
    params = _PARAMS
    inputs = ("data", "label", "data_lengths", "label_lengths")
    kernel = "ctc"

    def input_names(self, attrs):
        return _ctc_inputs(attrs)

    def infer_shape(self, attrs, in_shapes):
        data, label = in_shapes[0], in_shapes[1]
        n = 0
        if data is not None:
            if len(data) != 3:
                raise MXNetError(f"CTCLoss: data must be 3-D (sequence_length, batch_size, "
                                 f"alphabet_size), got shape {tuple(data)}")
            n = data[1]
        if label is not None:
            if len(label) != 2:
                raise MXNetError(f"CTCLoss: label must be 2-D (batch_size, label_length), got "
                                 f"shape {tuple(label)}")
            if n and label[0] and label[0] != n:
                raise MXNetError(f"CTCLoss: shape mismatch for input 'label': expected batch "
                                 f"size {n}, got shape {tuple(label)}")
            n = n or label[0]
        out = list(in_shapes)
        for k in range(2, len(in_shapes)):
            if out[k] is None and n:
                out[k] = (n,)
        return out, [(n,) if (data is not None or label is not None) else None]

    def infer_type(self, attrs, in_types):
        t = in_types[0]
        return list(in_types), [t]

    def compute(self, attrs, inputs, ctx):
        loss, _ = _ctc(self.name, attrs, inputs, want_grad=False)
        return [loss.astype(inputs[0].dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        g = F._backward_CTCLoss(ograds[0], *inputs, **attrs)
        return [g] + [F.zeros_like(x) for x in inputs[1:]]


@register("_backward_CTCLoss")
class BackwardCTCLoss(Op):
    """Gradient of CTCLoss w.r.t. data: ograd[n] * (softmax(data) - posterior occupancy)."""
    params = _PARAMS
    inputs = ("ograd", "data", "label", "data_lengths", "label_lengths")
    kernel = "ctc"
    hidden = True

    def input_names(self, attrs):
        return ["ograd"] + _ctc_inputs(attrs)

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), [in_shapes[1]]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[1]]

    def compute(self, attrs, inputs, ctx):
        dy = inputs[0]
        _, grad = _ctc(self.name, attrs, inputs[1:], want_grad=True)
        if dy.shape != (grad.shape[1],):
            raise MXNetError(f"_backward_CTCLoss: ograd must have shape ({grad.shape[1]},), got {dy.shape}")
        return [(grad * dy.astype(np.float64)[None, :, None]).astype(inputs[1].dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        raise MXNetError("_backward_CTCLoss: second-order gradients of CTCLoss are not supported")
