"""Metric checks shared by the Estimator and its event handlers (MXNet 1.9.1's estimator/utils)."""
from __future__ import annotations

from ....metric import Accuracy, CompositeEvalMetric, EvalMetric
from ...loss import SoftmaxCrossEntropyLoss

__all__ = ["_check_metrics", "_check_handler_metric_ref", "_suggest_metric_for_loss"]


def _check_metrics(metrics) -> list:
    """A list of EvalMetrics from one metric, a composite (flattened) or a list; ValueError otherwise."""
    if isinstance(metrics, CompositeEvalMetric):
        return [m for metric in metrics.metrics for m in _check_metrics(metric)]
    if isinstance(metrics, EvalMetric):
        return [metrics]
    metrics = list(metrics or [])
    if not all(isinstance(m, EvalMetric) for m in metrics):
        raise ValueError(f"metrics must be a Metric or a list of Metric, refer to mxnet.metric.EvalMetric:{metrics}")
    return metrics


def _check_metric_known(handler, metric, known_metrics) -> None:
    if metric not in known_metrics:
        raise ValueError(f"Event handler {type(handler).__name__} refers to a metric instance {metric} outside of "
                         "the known training and validation metrics. Please use the metrics from "
                         "estimator.train_metrics and estimator.val_metrics instead.")


def _check_handler_metric_ref(handler, known_metrics) -> None:
    """Every metric a handler holds (attributes named *metric*) must be one of `known_metrics`."""
    for attribute in dir(handler):
        if "metric" not in attribute or attribute.startswith("__"):
            continue
        reference = getattr(handler, attribute)
        if not reference or callable(reference):
            continue
        for metric in reference if isinstance(reference, list) else [reference]:
            _check_metric_known(handler, metric, known_metrics)


def _suggest_metric_for_loss(loss):
    """Accuracy for a softmax cross-entropy loss, else None."""
    return Accuracy() if isinstance(loss, SoftmaxCrossEntropyLoss) else None
