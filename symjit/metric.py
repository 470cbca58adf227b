"""symjit.metric (`mx.metric`): evaluation metrics of MXNet 1.x (accumulate, then `get()`)."""
from __future__ import annotations

import numpy as np

from .base import MXNetError

__all__ = ["EvalMetric", "Accuracy", "TopKAccuracy", "MAE", "MSE", "RMSE", "CrossEntropy", "Perplexity",
           "Loss", "CompositeEvalMetric", "create", "check_label_shapes"]

_REGISTRY: dict[str, type] = {}


def _register(*names):
    def deco(cls):
        for n in names:
            _REGISTRY[n] = cls
        return cls
    return deco


def _np(x) -> np.ndarray:
    return x.asnumpy() if hasattr(x, "asnumpy") else np.asarray(x)


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
        self._kwargs = kwargs
        self.reset()

    def __str__(self):
        return f"EvalMetric: {dict(self.get_name_value())}"

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

    def _add(self, metric, n):
        self.sum_metric += metric
        self.global_sum_metric += metric
        self.num_inst += n
        self.global_num_inst += n


@_register("acc", "accuracy")
class Accuracy(EvalMetric):
    """Fraction of predictions (argmax over `axis`, or given class ids) equal to the label."""

    def __init__(self, axis=1, name="accuracy", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)
        self.axis = axis

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            p, l = _np(pred), _np(label)
            if p.shape != l.shape:
                p = np.argmax(p, axis=self.axis)
            p = p.astype("int64").ravel()
            l = l.astype("int64").ravel()
            check_label_shapes(l, p, shape=True)
            self._add(float((p == l).sum()), len(p))


@_register("top_k_accuracy", "top_k_acc")
class TopKAccuracy(EvalMetric):
    def __init__(self, top_k=1, name="top_k_accuracy", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)
        if top_k <= 1:
            raise MXNetError("TopKAccuracy: use Accuracy for top_k <= 1")
        self.top_k = top_k
        self.name += f"_{top_k}"

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            p = np.argsort(_np(pred).astype("float32"), axis=1)
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
        return float(np.abs(l - p).mean())


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
        return float(np.sqrt(((l - p) ** 2.0).mean()))


@_register("ce", "cross-entropy")
class CrossEntropy(EvalMetric):
    """Mean of -log p[label] over instances."""

    def __init__(self, eps=1e-12, name="cross-entropy", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)
        self.eps = eps

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            l = _np(label).ravel().astype("int64")
            p = _np(pred)
            prob = p[np.arange(l.shape[0]), l]
            self._add(float((-np.log(prob + self.eps)).sum()), l.shape[0])


@_register("perplexity")
class Perplexity(CrossEntropy):
    def __init__(self, ignore_label=None, axis=-1, name="perplexity", output_names=None, label_names=None):
        super().__init__(1e-12, name, output_names, label_names)
        self.ignore_label = ignore_label

    def get(self):
        if self.num_inst == 0:
            return self.name, float("nan")
        return self.name, float(np.exp(self.sum_metric / self.num_inst))


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

    def get(self):
        names, values = [], []
        for m in self.metrics:
            n, v = m.get()
            names.extend(n if isinstance(n, list) else [n])
            values.extend(v if isinstance(v, list) else [v])
        return names, values


def create(metric, *args, **kwargs) -> EvalMetric:
    """A metric from an instance, a registered name ('acc', 'ce', ...), a list, or a function."""
    if isinstance(metric, EvalMetric):
        return metric
    if callable(metric):
        return _CustomMetric(metric)
    if isinstance(metric, list):
        return CompositeEvalMetric(metric)
    if isinstance(metric, str) and metric.lower() in _REGISTRY:
        return _REGISTRY[metric.lower()](*args, **kwargs)
    raise MXNetError(f"unknown metric {metric!r}; registered: {sorted(_REGISTRY)}")


class _CustomMetric(EvalMetric):
    def __init__(self, feval, name=None):
        super().__init__(name or getattr(feval, "__name__", "custom"))
        self._feval = feval

    def update(self, labels, preds):
        for label, pred in zip(labels, preds):
            r = self._feval(_np(label), _np(pred))
            if isinstance(r, tuple):
                self._add(r[0], r[1])
            else:
                self._add(r, 1)
