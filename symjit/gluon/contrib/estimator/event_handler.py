"""The Estimator's event handlers (MXNet 1.9.1's estimator/event_handler.py).

A handler subclasses the events it reacts to (TrainBegin, TrainEnd, EpochBegin, EpochEnd,
BatchBegin, BatchEnd); handlers run in ascending `priority` order (default 0): gradient
update (-2000), then metrics and validation (-1000), user handlers, logging last (inf). An
EpochEnd or BatchEnd handler returning True stops training.

The 'auto' mode of CheckpointHandler and EarlyStoppingHandler compares with `greater` for
metrics whose name contains 'acc' or 'f1' and with `less` otherwise, as MXNet documents it.
"""
from __future__ import annotations

import os
import re
import time
import warnings

import numpy as np

from ....metric import CompositeEvalMetric, EvalMetric
from ....metric import Loss as metric_loss
from .utils import _check_metrics

__all__ = ["TrainBegin", "TrainEnd", "EpochBegin", "EpochEnd", "BatchBegin", "BatchEnd",
           "StoppingHandler", "MetricHandler", "ValidationHandler", "LoggingHandler", "CheckpointHandler",
           "EarlyStoppingHandler", "GradientUpdateHandler"]


class EventHandler:
    """Base of every event handler."""


def _check_event_handlers(handlers) -> list:
    if isinstance(handlers, EventHandler):
        return [handlers]
    handlers = list(handlers or [])
    if not all(isinstance(h, EventHandler) for h in handlers):
        raise ValueError(f"handlers must be an EventHandler or a list of EventHandler, got: {handlers}")
    return handlers


class TrainBegin(EventHandler):
    def train_begin(self, estimator, *args, **kwargs):
        pass


class TrainEnd(EventHandler):
    def train_end(self, estimator, *args, **kwargs):
        pass


class EpochBegin(EventHandler):
    def epoch_begin(self, estimator, *args, **kwargs):
        pass


class EpochEnd(EventHandler):
    def epoch_end(self, estimator, *args, **kwargs):
        return False


class BatchBegin(EventHandler):
    def batch_begin(self, estimator, *args, **kwargs):
        pass


class BatchEnd(EventHandler):
    def batch_end(self, estimator, *args, **kwargs):
        return False


class StoppingHandler(TrainBegin, BatchEnd, EpochEnd):
    """Stops training after `max_epoch` epochs or `max_batch` batches (the estimator's fit
    arguments, read at train begin)."""

    def __init__(self, max_epoch=None, max_batch=None):
        self.max_epoch = max_epoch
        self.max_batch = max_batch
        self.current_batch = 0
        self.current_epoch = 0
        self.stop_training = False

    def train_begin(self, estimator, *args, **kwargs):
        self.max_epoch = estimator.max_epoch
        self.max_batch = estimator.max_batch
        self.current_batch = 0
        self.current_epoch = 0
        self.stop_training = False

    def batch_end(self, estimator, *args, **kwargs):
        self.current_batch += 1
        if self.current_batch == self.max_batch:
            self.stop_training = True
        return self.stop_training

    def epoch_end(self, estimator, *args, **kwargs):
        self.current_epoch += 1
        if self.current_epoch == self.max_epoch:
            self.stop_training = True
        return self.stop_training


class MetricHandler(EpochBegin, BatchEnd):
    """Resets `metrics` at each epoch and updates them after each batch (Loss metrics with the
    loss values, the others with (label, pred))."""

    def __init__(self, metrics, priority=-1000):
        self.metrics = _check_metrics(metrics)
        self.priority = priority

    def epoch_begin(self, estimator, *args, **kwargs):
        for metric in self.metrics:
            metric.reset()

    def batch_end(self, estimator, *args, **kwargs):
        pred, label, loss = kwargs["pred"], kwargs["label"], kwargs["loss"]
        for metric in self.metrics:
            if isinstance(metric, metric_loss):
                metric.update(0, loss)
            else:
                metric.update(label, pred)


class ValidationHandler(TrainBegin, BatchEnd, EpochEnd):
    """Runs `eval_fn(val_data=..., event_handlers=...)` every `epoch_period` epochs and/or every
    `batch_period` batches."""

    def __init__(self, val_data, eval_fn, epoch_period=1, batch_period=None, priority=-1000, event_handlers=None):
        self.val_data = val_data
        self.eval_fn = eval_fn
        self.epoch_period = epoch_period
        self.batch_period = batch_period
        self.current_batch = 0
        self.current_epoch = 0
        self.priority = priority
        self.event_handlers = event_handlers

    def train_begin(self, estimator, *args, **kwargs):
        self.current_batch = 0
        self.current_epoch = 0

    def batch_end(self, estimator, *args, **kwargs):
        self.current_batch += 1
        if self.batch_period and self.current_batch % self.batch_period == 0:
            self.eval_fn(val_data=self.val_data, event_handlers=self.event_handlers)

    def epoch_end(self, estimator, *args, **kwargs):
        self.current_epoch += 1
        if self.epoch_period and self.current_epoch % self.epoch_period == 0:
            self.eval_fn(val_data=self.val_data, event_handlers=self.event_handlers)


class LoggingHandler(TrainBegin, TrainEnd, EpochBegin, EpochEnd, BatchBegin, BatchEnd):
    """Logs progress and `metrics` through `estimator.logger`, every epoch (`log_interval=
    'epoch'`) or every `log_interval` batches."""

    def __init__(self, log_interval="epoch", metrics=None, priority=np.inf):
        super().__init__()
        if not isinstance(log_interval, int) and log_interval != "epoch":
            raise ValueError("log_interval must be either an integer or string 'epoch'")
        self.metrics = _check_metrics(metrics)
        self.batch_index = 0
        self.current_epoch = 0
        self.processed_samples = 0
        self.priority = priority
        self.log_interval = log_interval
        self.log_interval_time = 0
        self.train_start = self.batch_start = self.epoch_start = time.time()

    def train_begin(self, estimator, *args, **kwargs):
        self.train_start = time.time()
        trainer = estimator.trainer
        estimator.logger.info("Training begin: using optimizer %s with current learning rate %.4f ",
                              trainer.optimizer.__class__.__name__, trainer.learning_rate)
        if estimator.max_epoch:
            estimator.logger.info("Train for %d epochs.", estimator.max_epoch)
        else:
            estimator.logger.info("Train for %d batches.", estimator.max_batch)
        self.current_epoch = 0
        self.batch_index = 0
        self.processed_samples = 0
        self.log_interval_time = 0

    def _metric_text(self) -> str:
        return "".join("%s: %.4f, " % metric.get() for metric in self.metrics)

    def train_end(self, estimator, *args, **kwargs):
        train_time = time.time() - self.train_start
        msg = "Train finished using total %ds with %d epochs. " % (train_time, self.current_epoch)
        estimator.logger.info((msg + self._metric_text()).rstrip(", "))

    def batch_begin(self, estimator, *args, **kwargs):
        if isinstance(self.log_interval, int):
            self.batch_start = time.time()

    def batch_end(self, estimator, *args, **kwargs):
        if isinstance(self.log_interval, int):
            batch_time = time.time() - self.batch_start
            msg = "[Epoch %d][Batch %d]" % (self.current_epoch, self.batch_index)
            self.processed_samples += kwargs["batch"][0].shape[0]
            msg += "[Samples %s] " % self.processed_samples
            self.log_interval_time += batch_time
            if self.batch_index % self.log_interval == 0:
                msg += "time/interval: %.3fs " % self.log_interval_time
                self.log_interval_time = 0
                estimator.logger.info((msg + self._metric_text()).rstrip(", "))
        self.batch_index += 1

    def epoch_begin(self, estimator, *args, **kwargs):
        is_training = any("training" in metric.name for metric in self.metrics)
        self.epoch_start = time.time()
        if is_training:
            estimator.logger.info("[Epoch %d] Begin, current learning rate: %.4f",
                                  self.current_epoch, estimator.trainer.learning_rate)
        else:
            estimator.logger.info("Validation Begin")

    def epoch_end(self, estimator, *args, **kwargs):
        epoch_time = time.time() - self.epoch_start
        msg = "[Epoch %d] Finished in %.3fs, " % (self.current_epoch, epoch_time)
        estimator.logger.info((msg + self._metric_text()).rstrip(", "))
        self.current_epoch += 1
        self.batch_index = 0


def _monitor_op(monitor: EvalMetric, mode: str, who: str):
    """np.greater or np.less for `mode` ('min', 'max', 'auto': greater for acc/f1 metrics)."""
    if mode not in ("auto", "min", "max"):
        warnings.warn(f"{who} mode {mode} is unknown, fallback to auto mode. {who} will use max mode for f1 and "
                      "accuracy metric comparison and use min mode other wise", RuntimeWarning)
        mode = "auto"
    if mode == "min":
        return np.less
    if mode == "max":
        return np.greater
    name = monitor.get()[0].lower()
    if "acc" in name or "f1" in name:
        warnings.warn(f"`greater` operator will be used to determine if {monitor.get()[0]} has improved. "
                      "Please specify `mode='min'` to use the `less` operator. "
                      "Specify `mode='max' to disable this warning.`")
        return np.greater
    warnings.warn(f"`less` operator will be used to determine if {monitor.get()[0]} has improved. "
                  "Please specify `mode='max'` to use the `greater` operator. "
                  "Specify `mode='min' to disable this warning.`")
    return np.less


class CheckpointHandler(TrainBegin, BatchEnd, EpochEnd):
    """Saves `{model_prefix}-epoch{E}batch{B}.params` and `.states` (trainer) into `model_dir`
    every `epoch_period` epochs and/or `batch_period` batches, keeping the last
    `max_checkpoints`; the symbol (`-symbol.json`) once when the net is hybridized; with
    `save_best`, `{model_prefix}-best` whenever `monitor` improves. `resume_from_checkpoint`
    loads the newest checkpoint in `model_dir` and trains only the remaining epochs/batches."""

    def __init__(self, model_dir, model_prefix="model", monitor=None, verbose=0, save_best=False, mode="auto",
                 epoch_period=1, batch_period=None, max_checkpoints=5, resume_from_checkpoint=False):
        self.monitor = monitor
        self.verbose = verbose
        os.makedirs(model_dir, exist_ok=True)
        self.model_dir = model_dir
        self.model_prefix = model_prefix
        self.save_best = save_best
        if self.save_best and not isinstance(self.monitor, EvalMetric):
            raise ValueError("To save best model only, please provide one of the metric objects "
                             "from estimator.train_metrics and estimator.val_metrics as monitor.")
        self.epoch_period = epoch_period
        self.batch_period = batch_period
        self.current_batch = 0
        self.current_epoch = 0
        self.max_checkpoints = max_checkpoints
        self.resume_from_checkpoint = resume_from_checkpoint
        self.saved_checkpoints = []
        self.trained_epoch = self.trained_batch = -1
        if self.save_best:
            self.monitor_op = _monitor_op(monitor, mode, "CheckpointHandler")
            self.best = np.inf if self.monitor_op is np.less else -np.inf

    def train_begin(self, estimator, *args, **kwargs):
        self.current_epoch = 0
        self.current_batch = 0
        if self.save_best:
            self.best = np.inf if self.monitor_op is np.less else -np.inf
        if self.resume_from_checkpoint:
            error_msg = ("To use resume from checkpoint, you must only specify the same type of period you used "
                         "for training. For example, if you are training based on number of epochs, you must save "
                         "only based on epochs, and set batch_period to None.")
            if estimator.max_batch and (not self.batch_period or self.epoch_period):
                raise ValueError(error_msg)
            if estimator.max_epoch and (not self.epoch_period or self.batch_period):
                raise ValueError(error_msg)
            self._resume_from_checkpoint(estimator)

    def batch_end(self, estimator, *args, **kwargs):
        if self.current_batch == 0:
            self._save_symbol(estimator)
        if self.batch_period and (self.current_batch + 1) % self.batch_period == 0:
            self._save_checkpoint(estimator)
        self.current_batch += 1

    def epoch_end(self, estimator, *args, **kwargs):
        if self.epoch_period and (self.current_epoch + 1) % self.epoch_period == 0:
            self._save_checkpoint(estimator)
        self.current_epoch += 1

    def _save_checkpoint(self, estimator):
        if self.resume_from_checkpoint and self.trained_epoch >= 0:
            save_epoch_number = self.current_epoch + self.trained_epoch + 1
            if estimator.max_epoch:     # saved at epoch end: the batch count is already incremented
                save_batch_number = self.current_batch + self.trained_batch
            else:
                save_batch_number = self.current_batch + self.trained_batch + 1
        else:
            save_epoch_number = self.current_epoch
            save_batch_number = self.current_batch
        prefix = "%s-epoch%dbatch%d" % (self.model_prefix, save_epoch_number, save_batch_number)
        self._save_params_and_trainer(estimator, prefix)
        if self.verbose > 0:
            estimator.logger.info("[Epoch %d] CheckpointHandler: trained total %d batches, saving model at %s "
                                  "with prefix: %s", self.current_epoch, self.current_batch + 1, self.model_dir, prefix)
        if not self.save_best:
            return
        monitor_name, monitor_value = self.monitor.get()
        if np.isnan(monitor_value):
            warnings.warn(RuntimeWarning(f"Skipping save best because {monitor_name} is not updated, make sure you "
                                         "pass one of the metric objects estimator.train_metrics and "
                                         "estimator.val_metrics as monitor"))
        elif self.monitor_op(monitor_value, self.best):
            prefix = self.model_prefix + "-best"
            self._save_params_and_trainer(estimator, prefix)
            if self.verbose > 0:
                estimator.logger.info("[Epoch %d] CheckpointHandler: %s improved from %0.5f to %0.5f, updating best "
                                      "model at %s with prefix: %s", self.current_epoch, monitor_name, self.best,
                                      monitor_value, self.model_dir, prefix)
            self.best = monitor_value
        elif self.verbose > 0:
            estimator.logger.info("[Epoch %d] CheckpointHandler: %s did not improve from %0.5f, skipping updating "
                                  "best model", self.current_batch, monitor_name, self.best)

    def _save_symbol(self, estimator):
        symbol_file = os.path.join(self.model_dir, self.model_prefix + "-symbol.json")
        cached = getattr(estimator.net, "_cached_graph", None)
        if cached:
            cached[1].save(symbol_file)
        else:
            estimator.logger.info("Model architecture(symbol file) is not saved, please use HybridBlock to construct "
                                  "your model, and call net.hybridize() before passing to Estimator in order to save "
                                  "model architecture as %s.", symbol_file)

    def _save_params_and_trainer(self, estimator, file_prefix):
        estimator.net.save_parameters(os.path.join(self.model_dir, file_prefix + ".params"))
        estimator.trainer.save_states(os.path.join(self.model_dir, file_prefix + ".states"))
        if "best" not in file_prefix:
            self.saved_checkpoints.append(file_prefix)
        if len(self.saved_checkpoints) > self.max_checkpoints:
            prefix = self.saved_checkpoints.pop(0)
            for fname in os.listdir(self.model_dir):
                if fname.startswith(prefix + "."):
                    os.remove(os.path.join(self.model_dir, fname))

    def _resume_from_checkpoint(self, estimator):
        found = self._checkpoints()
        self.saved_checkpoints.extend("%s-epoch%dbatch%d" % (self.model_prefix, e, b) for e, b in found)
        self.trained_epoch = max((e for e, _ in found), default=-1)
        self.trained_batch = max((b for e, b in found if e == self.trained_epoch), default=-1)
        if self.trained_epoch == -1:
            msg = "CheckpointHandler: No checkpoint found, training from scratch for "
            msg += ("%d batches" % estimator.max_batch) if estimator.max_batch else ("%d epochs" % estimator.max_epoch)
            estimator.logger.info(msg)
            return
        msg = ("CheckpointHandler: Checkpoint resumed from epoch %d batch %d, continue to train for "
               % (self.trained_epoch, self.trained_batch))
        if estimator.max_epoch:
            if self.trained_epoch >= estimator.max_epoch - 1:
                raise ValueError("Found checkpoint with maximum number of epoch %d reached, please specify "
                                 "resume_from_checkpoint=False (default value) if you wan to train from scratch."
                                 % estimator.max_epoch)
            estimator.max_epoch = estimator.max_epoch - self.trained_epoch - 1
            msg += "%d epochs " % estimator.max_epoch
        if estimator.max_batch:
            if self.trained_batch >= estimator.max_batch - 1:
                raise ValueError("Found checkpoint with maximum number of batch %d reached, please specify"
                                 "resume_from_checkpoint=False (default value) if you wan to train from scratch."
                                 % estimator.max_batch)
            estimator.max_batch = estimator.max_batch - self.trained_batch - 1
            msg += "%d batches " % estimator.max_batch
        stem = os.path.join(self.model_dir, "%s-epoch%dbatch%d" % (self.model_prefix, self.trained_epoch,
                                                                   self.trained_batch))
        for ext in (".params", ".states"):
            if not os.path.exists(stem + ext):
                raise ValueError(f"Failed to load checkpoint, {stem + ext} does not exist")
        estimator.net.load_parameters(stem + ".params", ctx=estimator.context)
        estimator.trainer.load_states(stem + ".states")
        estimator.logger.warning(msg)

    def _checkpoints(self) -> list:
        """(epoch, batch) of every `{model_prefix}-epoch{E}batch{B}.params` in model_dir, oldest first."""
        pattern = re.compile(re.escape(self.model_prefix) + r"-epoch(\d+)batch(\d+)\.params$")
        found = [m.groups() for m in map(pattern.match, os.listdir(self.model_dir)) if m]
        return sorted((int(e), int(b)) for e, b in found)


class EarlyStoppingHandler(TrainBegin, EpochEnd, TrainEnd):
    """Stops training when `monitor` has not improved by more than `min_delta` for `patience`
    epochs (compared with `baseline` when given)."""

    def __init__(self, monitor, min_delta=0, patience=0, mode="auto", baseline=None):
        super().__init__()
        if not isinstance(monitor, EvalMetric):
            raise ValueError("Please provide one of the metric objects from estimator.train_metrics and "
                             "estimator.val_metrics as monitor.")
        if isinstance(monitor, CompositeEvalMetric):
            raise ValueError("CompositeEvalMetric is not supported for EarlyStoppingHandler, "
                             "please specify a simple metric instead.")
        self.monitor = monitor
        self.baseline = baseline
        self.patience = patience
        self.min_delta = min_delta
        self.wait = 0
        self.stopped_epoch = 0
        self.current_epoch = 0
        self.stop_training = False
        self.monitor_op = _monitor_op(monitor, mode, "EarlyStopping")
        self.min_delta = abs(min_delta) if self.monitor_op is np.greater else -abs(min_delta)
        self.best = np.inf if self.monitor_op is np.less else -np.inf

    def train_begin(self, estimator, *args, **kwargs):
        self.wait = 0
        self.stopped_epoch = 0
        self.current_epoch = 0
        self.stop_training = False
        if self.baseline is not None:
            self.best = self.baseline
        else:
            self.best = np.inf if self.monitor_op is np.less else -np.inf

    def epoch_end(self, estimator, *args, **kwargs):
        monitor_name, monitor_value = self.monitor.get()
        if np.isnan(monitor_value):
            warnings.warn(RuntimeWarning(f"{monitor_name} is not updated, make sure you pass one of the metric "
                                         "objects from estimator.train_metrics and estimator.val_metrics as monitor."))
        elif self.monitor_op(monitor_value - self.min_delta, self.best):
            self.best = monitor_value
            self.wait = 0
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.stopped_epoch = self.current_epoch
                self.stop_training = True
        self.current_epoch += 1
        return self.stop_training

    def train_end(self, estimator, *args, **kwargs):
        if self.stopped_epoch > 0:
            estimator.logger.info("[Epoch %d] EarlyStoppingHanlder: early stopping due to %s not improving",
                                  self.stopped_epoch, self.monitor.get()[0])


class GradientUpdateHandler(BatchEnd):
    """Steps the trainer after each batch, with the batch size the losses cover."""

    def __init__(self, priority=-2000):
        self.priority = priority

    def batch_end(self, estimator, *args, **kwargs):
        loss = kwargs["loss"]
        losses = loss if isinstance(loss, list) else [loss]
        estimator.trainer.step(sum(value.shape[0] for value in losses))
