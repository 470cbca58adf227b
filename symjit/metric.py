"""symjit.metric (`mx.metric`): evaluation metrics of MXNet 1.x (accumulate, then `get()`)."""
from __future__ import annotations

import math

import numpy

from .base import MXNetError, MXNetValueError

__all__ = ["EvalMetric", "Accuracy", "TopKAccuracy", "MAE", "MSE", "RMSE", "CrossEntropy", "Perplexity",
           "Loss", "CompositeEvalMetric", "create", "check_label_shapes", "F1", "MCC", "PearsonCorrelation",
           "NegativeLogLikelihood", "CustomMetric", "np", "PCC", "Torch", "Caffe", "register", "alias"]

_REGISTRY: dict[str, type] = {}


def _register(*names):
    """Registers a metric class under its lower-cased class name and the aliases `names`
    (the names `create` accepts)."""
    def deco(cls):
        for n in (cls.__name__.lower(),) + names:
            _REGISTRY[n] = cls
        return cls
    return deco


def register(klass):
    """MXNet's `mx.metric.register`: makes `create` accept the lower-cased class name."""
    return _register()(klass)


def alias(*aliases):
    """MXNet's `mx.metric.alias`: a decorator registering a metric class under `aliases`."""
    return _register(*aliases)


def _np(x) -> numpy.ndarray:
    return x.asnumpy() if hasattr(x, "asnumpy") else numpy.asarray(x)


def check_label_shapes(labels, preds, wrap=False, shape=False):
    if not shape:
        label_shape, pred_shape = len(labels), len(preds)
    else:
        label_shape, pred_shape = labels.shape, preds.shape
    if label_shape != pred_shape:
        raise MXNetError(f"Shape of labels {label_shape} does not match shape of predictions {pred_shape}")
    if wrap:
        if not isinstance(labels, (list, tuple)):
            labels = [labels]
        if not isinstance(preds, (list, tuple)):
            preds = [preds]
    return labels, preds


class EvalMetric:
    """Base: `update(labels, preds)` accumulates `sum_metric` over `num_inst` instances."""

    def __init__(self, name, output_names=None, label_names=None, **kwargs):
        self.name = str(name)
        self.output_names = output_names
        self.label_names = label_names
        self._has_global_stats = kwargs.pop("has_global_stats", False)
        self._kwargs = kwargs
        self.reset()

    def __str__(self):
        return f"EvalMetric: {dict(self.get_name_value())}"

    def get_config(self):
        """The constructor arguments: `create(**config)` (with 'metric' the class name) remakes it."""
        config = self._kwargs.copy()
        config.update({"metric": type(self).__name__, "name": self.name, "output_names": self.output_names,
                       "label_names": self.label_names})
        return config

    def update_dict(self, label, pred):
        preds = [pred[n] for n in self.output_names] if self.output_names is not None else list(pred.values())
        labels = [label[n] for n in self.label_names] if self.label_names is not None else list(label.values())
        self.update(labels, preds)

    def update(self, labels, preds):
        raise MXNetError(f"{type(self).__name__} must define update()")

    def reset(self):
        self.num_inst = 0
        self.sum_metric = 0.0
        self.global_num_inst = 0
        self.global_sum_metric = 0.0

    def reset_local(self):
        self.num_inst = 0
        self.sum_metric = 0.0

    def get(self):
        if self.num_inst == 0:
            return self.name, float("nan")
        return self.name, self.sum_metric / self.num_inst

    def get_global(self):
        if self.global_num_inst == 0:
            return self.name, float("nan")
        return self.name, self.global_sum_metric / self.global_num_inst

    def get_name_value(self):
        name, value = self.get()
        if not isinstance(name, list):
            name, value = [name], [value]
        return list(zip(name, value))

    def get_global_name_value(self):
        """(name, value) pairs of the statistics since the last `reset` (not `reset_local`)."""
        name, value = self.get_global()
        if not isinstance(name, list):
            name, value = [name], [value]
        return list(zip(name, value))

    def _add(self, metric, n):
        self.sum_metric += metric
        self.global_sum_metric += metric
        self.num_inst += n
        self.global_num_inst += n


@_register("acc", "accuracy")
class Accuracy(EvalMetric):
    """Fraction of predictions (argmax over `axis`, or given class ids) equal to the label."""

    def __init__(self, axis=1, name="accuracy", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names, axis=axis)
        self.axis = axis

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            p, l = _np(pred), _np(label)
            if p.shape != l.shape:
                p = numpy.argmax(p, axis=self.axis)
            p = p.astype("int64").ravel()
            l = l.astype("int64").ravel()
            check_label_shapes(l, p, shape=True)
            self._add(float((p == l).sum()), len(p))


@_register("top_k_accuracy", "top_k_acc")
class TopKAccuracy(EvalMetric):
    def __init__(self, top_k=1, name="top_k_accuracy", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names, top_k=top_k)
        if top_k <= 1:
            raise MXNetError("TopKAccuracy: use Accuracy for top_k <= 1")
        self.top_k = top_k
        self.name += f"_{top_k}"

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            p = numpy.argsort(_np(pred).astype("float32"), axis=1)
            l = _np(label).astype("int64").ravel()
            top = p[:, -self.top_k:]
            self._add(float((top == l[:, None]).any(axis=1).sum()), len(l))


class _Regression(EvalMetric):
    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            l, p = _np(label), _np(pred)
            if l.ndim == 1:
                l = l.reshape(l.shape[0], 1)
            if p.ndim == 1:
                p = p.reshape(p.shape[0], 1)
            self._add(self._value(l, p), 1)


@_register("mae")
class MAE(_Regression):
    def __init__(self, name="mae", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    @staticmethod
    def _value(l, p):
        return float(numpy.abs(l - p).mean())


@_register("mse")
class MSE(_Regression):
    def __init__(self, name="mse", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    @staticmethod
    def _value(l, p):
        return float(((l - p) ** 2.0).mean())


@_register("rmse")
class RMSE(_Regression):
    def __init__(self, name="rmse", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    @staticmethod
    def _value(l, p):
        return float(numpy.sqrt(((l - p) ** 2.0).mean()))


@_register("ce", "cross-entropy")
class CrossEntropy(EvalMetric):
    """Mean of -log p[label] over instances."""

    def __init__(self, eps=1e-12, name="cross-entropy", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names, eps=eps)
        self.eps = eps

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            l = _np(label).ravel().astype("int64")
            p = _np(pred)
            prob = p[numpy.arange(l.shape[0]), l]
            self._add(float((-numpy.log(prob + self.eps)).sum()), l.shape[0])


@_register("perplexity")
class Perplexity(EvalMetric):
    """exp of the mean of -log p[label] (p floored at 1e-10), as MXNet's: the probability of
    each label is picked along `axis` with MXNet's `pick` (class ids clipped into range), and
    instances whose label is `ignore_label` count neither in the sum nor in the number."""

    def __init__(self, ignore_label=None, axis=-1, name="perplexity", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names, ignore_label=ignore_label, axis=axis)
        self.ignore_label = ignore_label
        self.axis = axis

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            p = _np(pred)
            l = _np(label).ravel()
            axis = self.axis % p.ndim
            rest = p.shape[:axis] + p.shape[axis + 1:]
            if l.size != int(numpy.prod(rest)):
                raise MXNetError(f"perplexity: shape mismatch: {l.size} labels for predictions of shape "
                                 f"{p.shape} (axis {self.axis})")
            idx = numpy.clip(l.astype(numpy.int64), 0, p.shape[axis] - 1).reshape(rest)
            prob = numpy.take_along_axis(p, numpy.expand_dims(idx, axis), axis).reshape(-1)
            n = prob.size
            if self.ignore_label is not None:
                ignore = l == self.ignore_label
                prob = numpy.where(ignore, 1.0, prob)
                n -= int(ignore.sum())
            self._add(float(-numpy.log(numpy.maximum(prob, 1e-10)).sum()), n)

    def get(self):
        if self.num_inst == 0:
            return self.name, float("nan")
        return self.name, math.exp(self.sum_metric / self.num_inst)

    def get_global(self):
        if self.global_num_inst == 0:
            return self.name, float("nan")
        return self.name, math.exp(self.global_sum_metric / self.global_num_inst)


@_register("loss")
class Loss(EvalMetric):
    """Mean of the given loss values (labels are ignored)."""

    def __init__(self, name="loss", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    def update(self, _, preds):
        if not isinstance(preds, (list, tuple)):
            preds = [preds]
        for pred in preds:
            p = _np(pred)
            self._add(float(p.sum()), p.size)


@_register()
class Torch(Loss):
    """The mean of the outputs of a Torch criterion (a Loss metric named 'torch')."""

    def __init__(self, name="torch", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names)


@_register()
class Caffe(Loss):
    """The mean of the outputs of a Caffe loss layer (a Loss metric named 'caffe')."""

    def __init__(self, name="caffe", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names)


@_register("composite")
class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together."""

    def __init__(self, metrics=None, name="composite", output_names=None, label_names=None):
        self.metrics = [create(m) for m in (metrics or [])]
        super().__init__(name, output_names, label_names)

    def add(self, metric):
        self.metrics.append(create(metric))

    def update(self, labels, preds):
        for m in self.metrics:
            m.update(labels, preds)

    def reset(self):
        for m in getattr(self, "metrics", []):
            m.reset()

    def get_metric(self, index):
        """The child metric at `index`."""
        if not -len(self.metrics) <= index < len(self.metrics):
            raise MXNetValueError(f"Metric index {index} is out of range 0 and {len(self.metrics)}")
        return self.metrics[index]

    def update_dict(self, labels, preds):
        if self.label_names is not None:
            labels = {k: v for k, v in labels.items() if k in self.label_names}
        if self.output_names is not None:
            preds = {k: v for k, v in preds.items() if k in self.output_names}
        for m in self.metrics:
            m.update_dict(labels, preds)

    def reset_local(self):
        for m in self.metrics:
            m.reset_local()

    @staticmethod
    def _gather(pairs):
        names, values = [], []
        for n, v in pairs:
            names.extend(n if isinstance(n, list) else [n])
            values.extend(v if isinstance(v, list) else [v])
        return names, values

    def get(self):
        return self._gather(m.get() for m in self.metrics)

    def get_global(self):
        return self._gather(m.get_global() for m in self.metrics)

    def get_config(self):
        config = super().get_config()
        config["metrics"] = [m.get_config() for m in self.metrics]
        return config


def create(metric, *args, **kwargs) -> EvalMetric:
    """A metric from an instance, a registered name ('acc', 'ce', ...), a list, or a function."""
    if isinstance(metric, EvalMetric):
        return metric
    if callable(metric):
        return CustomMetric(metric, *args, **kwargs)
    if isinstance(metric, list):
        return CompositeEvalMetric(metric)
    if isinstance(metric, str) and metric.lower() in _REGISTRY:
        return _REGISTRY[metric.lower()](*args, **kwargs)
    raise MXNetError(f"unknown metric {metric!r}; registered: {sorted(_REGISTRY)}")


class _BinaryClassificationMetrics:
    """True/false positive/negative counts of binary predictions (argmax of `pred` along axis
    1), local and global, with the precision, recall, F1 and Matthews correlation they give."""

    def __init__(self):
        self.reset_stats()

    def update_binary_stats(self, label, pred, metric_name):
        pred = _np(pred)
        label = _np(label).astype("int32")
        pred_label = numpy.argmax(pred, axis=1)
        check_label_shapes(label, pred)
        if len(numpy.unique(label)) > 2:
            raise MXNetValueError(f"{metric_name} currently only supports binary classification.")
        pred_true = pred_label == 1
        pred_false = ~pred_true
        label_true = label == 1
        label_false = ~label_true
        counts = (int((pred_true & label_true).sum()), int((pred_true & label_false).sum()),
                  int((pred_false & label_true).sum()), int((pred_false & label_false).sum()))
        for attr, n in zip(("true_positives", "false_positives", "false_negatives", "true_negatives"), counts):
            setattr(self, attr, getattr(self, attr) + n)
            setattr(self, "global_" + attr, getattr(self, "global_" + attr) + n)

    @staticmethod
    def _fscore(tp, fp, fn):
        precision = tp / (tp + fp) if tp + fp > 0 else 0.0
        recall = tp / (tp + fn) if tp + fn > 0 else 0.0
        return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0

    @property
    def precision(self):
        tp, fp = self.true_positives, self.false_positives
        return float(tp) / (tp + fp) if tp + fp > 0 else 0.0

    @property
    def recall(self):
        tp, fn = self.true_positives, self.false_negatives
        return float(tp) / (tp + fn) if tp + fn > 0 else 0.0

    @property
    def fscore(self):
        return self._fscore(self.true_positives, self.false_positives, self.false_negatives)

    @property
    def global_fscore(self):
        return self._fscore(self.global_true_positives, self.global_false_positives, self.global_false_negatives)

    def matthewscc(self, use_global=False):
        """(TP*TN - FP*FN) / sqrt of the product of the non-zero margins (0 without examples)."""
        p = "global_" if use_global else ""
        tp, fp, fn, tn = (float(getattr(self, p + a)) for a in
                          ("true_positives", "false_positives", "false_negatives", "true_negatives"))
        if tp + fp + fn + tn == 0:
            return 0.0
        denom = 1.0
        for t in (tp + fp, tp + fn, tn + fp, tn + fn):
            if t != 0.0:
                denom *= t
        return (tp * tn - fp * fn) / math.sqrt(denom)

    @property
    def total_examples(self):
        return self.false_negatives + self.false_positives + self.true_negatives + self.true_positives

    @property
    def global_total_examples(self):
        return (self.global_false_negatives + self.global_false_positives + self.global_true_negatives
                + self.global_true_positives)

    def local_reset_stats(self):
        self.false_positives = self.false_negatives = self.true_positives = self.true_negatives = 0

    def reset_stats(self):
        self.local_reset_stats()
        self.global_false_positives = self.global_false_negatives = 0
        self.global_true_positives = self.global_true_negatives = 0


class _BinaryMetric(EvalMetric):
    """F1 and MCC: 'macro' averages the per-update (per batch) scores, 'micro' scores all
    examples seen together."""

    def __init__(self, name, output_names=None, label_names=None, average="macro"):
        self.average = average
        self.metrics = _BinaryClassificationMetrics()
        super().__init__(name, output_names=output_names, label_names=label_names, average=average)

    def _local(self):
        raise MXNetError(f"{type(self).__name__} must define _local()")

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            self.metrics.update_binary_stats(label, pred, type(self).__name__)
        local, glob = self._local(), self._global()
        if self.average == "macro":
            self.sum_metric += local
            self.global_sum_metric += glob
            self.num_inst += 1
            self.global_num_inst += 1
            self.metrics.reset_stats()
        else:
            self.sum_metric = local * self.metrics.total_examples
            self.global_sum_metric = glob * self.metrics.global_total_examples
            self.num_inst = self.metrics.total_examples
            self.global_num_inst = self.metrics.global_total_examples

    def reset(self):
        super().reset()
        self.metrics.reset_stats()

    def reset_local(self):
        super().reset_local()
        self.metrics.local_reset_stats()


@_register("f1")
class F1(_BinaryMetric):
    """F1 score of binary classification (class 1 is positive; predictions are scores per
    class, the argmax along axis 1 is the predicted class)."""

    def __init__(self, name="f1", output_names=None, label_names=None, average="macro"):
        super().__init__(name, output_names=output_names, label_names=label_names, average=average)

    def _local(self):
        return self.metrics.fscore

    def _global(self):
        return self.metrics.global_fscore


@_register("mcc")
class MCC(_BinaryMetric):
    """Matthews correlation coefficient of binary classification."""

    def __init__(self, name="mcc", output_names=None, label_names=None, average="macro"):
        super().__init__(name, output_names=output_names, label_names=label_names, average=average)

    def _local(self):
        return self.metrics.matthewscc()

    def _global(self):
        return self.metrics.matthewscc(use_global=True)


@_register()
class PCC(EvalMetric):
    """The multiclass Matthews correlation coefficient (Gorodkin's R_K) of the confusion matrix C
    (rows: predicted class, columns: true class) accumulated over updates:
        (n * trace(C) - sum_k x_k y_k) / sqrt((n^2 - sum_k x_k^2) (n^2 - sum_k y_k^2)),
    with x, y the row and column sums and n the count; NaN when either factor is 0. Predictions
    are class scores (argmax along axis 1) or class ids; the matrix grows with the classes seen.
    `get()` covers the updates since `reset_local`, `get_global()` those since `reset`."""

    def __init__(self, name="pcc", output_names=None, label_names=None, has_global_stats=True):
        self.k = 2
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=has_global_stats)

    @staticmethod
    def _mcc(cmat) -> float:
        n = cmat.sum()
        x, y = cmat.sum(axis=1), cmat.sum(axis=0)
        cov_xx, cov_yy = numpy.sum(x * (n - x)), numpy.sum(y * (n - y))
        if cov_xx == 0 or cov_yy == 0:
            return float("nan")
        cov_xy = numpy.sum(cmat.diagonal() * n - x * y)
        return float(cov_xy / math.sqrt(cov_xx * cov_yy))

    def _grow(self, k):
        pad = ((0, k - self.k), (0, k - self.k))
        self.lcm = numpy.pad(self.lcm, pad)
        self.gcm = numpy.pad(self.gcm, pad)
        self.k = k

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label, pred = _np(label).astype("int64"), _np(pred)
            pred = pred.argmax(axis=1) if pred.shape != label.shape else pred.astype("int64")
            label, pred = label.ravel(), pred.ravel()
            check_label_shapes(label, pred, shape=True)
            if max(pred.max(), label.max()) >= self.k:
                self._grow(int(max(pred.max(), label.max())) + 1)
            batch = numpy.zeros((self.k, self.k))
            numpy.add.at(batch, (pred, label), 1)
            self.lcm += batch
            self.gcm += batch
        self.num_inst += 1
        self.global_num_inst += 1

    def get(self):
        return self.name, (self._mcc(self.lcm) if self.num_inst else float("nan"))

    def get_global(self):
        return self.name, (self._mcc(self.gcm) if self.global_num_inst else float("nan"))

    def reset(self):
        self.global_num_inst = 0
        self.gcm = numpy.zeros((self.k, self.k))
        self.reset_local()

    def reset_local(self):
        self.num_inst = 0
        self.lcm = numpy.zeros((self.k, self.k))


@_register("pearsonr", "pearsoncorrelation")
class PearsonCorrelation(EvalMetric):
    """Pearson correlation of predictions and labels: 'macro' averages the per-update
    coefficients, 'micro' accumulates means, sums of squares and the co-moment over updates
    (MXNet's running formulas)."""

    def __init__(self, name="pearsonr", output_names=None, label_names=None, average="macro"):
        self.average = average
        super().__init__(name, output_names=output_names, label_names=label_names, average=average)

    def reset_micro(self):
        self._sse_p = 0
        self._mean_p = 0
        self._sse_l = 0
        self._mean_l = 0
        self._pred_nums = 0
        self._label_nums = 0
        self._conv = 0

    def reset(self):
        super().reset()
        if self.average == "micro":
            self.reset_micro()

    @staticmethod
    def update_variance(new_values, *aggregate):
        """Welford's update of (count, mean, M2) with a batch of values."""
        count, mean, m_2 = aggregate
        count += len(new_values)
        delta = new_values - mean
        mean += numpy.sum(delta / count)
        delta_2 = new_values - mean
        m_2 += numpy.sum(delta * delta_2)
        return count, mean, m_2

    def update_cov(self, label, pred):
        self._conv = self._conv + numpy.sum((label - self._mean_l) * (pred - self._mean_p))

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label, pred = _np(label), _np(pred)
            check_label_shapes(label, pred, False, True)
            label = label.ravel().astype(numpy.float64)
            pred = pred.ravel().astype(numpy.float64)
            self.num_inst += 1
            self.global_num_inst += 1
            if self.average == "macro":
                pearson_corr = numpy.corrcoef(pred, label)[0, 1]
                self.sum_metric += pearson_corr
                self.global_sum_metric += pearson_corr
            else:
                self._label_nums, self._mean_l, self._sse_l = self.update_variance(
                    label, self._label_nums, self._mean_l, self._sse_l)
                self.update_cov(label, pred)
                self._pred_nums, self._mean_p, self._sse_p = self.update_variance(
                    pred, self._pred_nums, self._mean_p, self._sse_p)

    def get(self):
        if self.num_inst == 0:
            return self.name, float("nan")
        if self.average == "macro":
            return self.name, self.sum_metric / self.num_inst
        n = self._label_nums
        pearsonr = self._conv / ((n - 1) * numpy.sqrt(self._sse_p / (n - 1)) * numpy.sqrt(self._sse_l / (n - 1)))
        return self.name, pearsonr


@_register("nll_loss", "negativeloglikelihood")
class NegativeLogLikelihood(EvalMetric):
    """Mean of -log(p[label] + eps) over examples; predictions are probabilities per class."""

    def __init__(self, eps=1e-12, name="nll-loss", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names, eps=eps)
        self.eps = eps

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label, pred = _np(label).ravel(), _np(pred)
            num_examples = pred.shape[0]
            if label.shape[0] != num_examples:
                raise MXNetValueError(f"NegativeLogLikelihood: {label.shape[0]} labels for {num_examples} "
                                      "predictions")
            prob = pred[numpy.arange(num_examples, dtype=numpy.int64), numpy.int64(label)]
            self._add(float((-numpy.log(prob + self.eps)).sum()), num_examples)


@_register("custommetric")
class CustomMetric(EvalMetric):
    """A metric from `feval(label, pred)` on numpy arrays, returning a value (one instance) or
    (sum_metric, num_inst)."""

    def __init__(self, feval, name=None, allow_extra_outputs=False, output_names=None, label_names=None):
        if name is None:
            name = feval.__name__
            if name.find("<") != -1:
                name = "custom(%s)" % name
        super().__init__(name, output_names=output_names, label_names=label_names, feval=feval,
                         allow_extra_outputs=allow_extra_outputs)
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs

    def update(self, labels, preds):
        if not self._allow_extra_outputs:
            labels, preds = check_label_shapes(labels, preds, True)
        for pred, label in zip(preds, labels):
            reval = self._feval(_np(label), _np(pred))
            if isinstance(reval, tuple):
                self._add(reval[0], reval[1])
            else:
                self._add(reval, 1)


#: the former private name of CustomMetric
_CustomMetric = CustomMetric


def np(numpy_feval, name=None, allow_extra_outputs=False):  # (MXNet's mx.metric.np; numpy is `numpy` here)
    """A CustomMetric over `numpy_feval(label, pred)` (numpy arrays), named after it."""
    def feval(label, pred):
        return numpy_feval(label, pred)
    feval.__name__ = numpy_feval.__name__
    return CustomMetric(feval, name, allow_extra_outputs)
