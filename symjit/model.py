"""symjit.model (`mx.model`): MXNet 1.x's checkpoint helpers, BatchEndParam and the legacy
FeedForward model (kept for old scripts; it trains and predicts through a Module)."""
from __future__ import annotations

import logging
import warnings
from collections import namedtuple

import numpy as np

from . import initializer as init_mod
from . import io
from . import metric as metric_mod
from . import ndarray as nd
from .base import MXNetError, MXNetTypeError, MXNetValueError
from .context import cpu
from .module.module import load_checkpoint, save_checkpoint

__all__ = ["save_checkpoint", "load_checkpoint", "load_params", "BatchEndParam", "FeedForward"]

#: What batch-end callbacks receive (MXNet's namedtuple).
BatchEndParam = namedtuple("BatchEndParams", ["epoch", "nbatch", "eval_metric", "locals"])


def load_params(prefix, epoch):
    """(arg_params, aux_params) of `prefix-%04d.params` (MXNet's `arg:`/`aux:` names)."""
    arg_params, aux_params = {}, {}
    for k, v in nd.load("%s-%04d.params" % (prefix, epoch)).items():
        kind, name = k.split(":", 1) if ":" in k else ("", k)
        if kind == "arg":
            arg_params[name] = v
        elif kind == "aux":
            aux_params[name] = v
        else:
            raise MXNetError(f"load_params: invalid key {k!r} in {prefix}-{epoch:04d}.params "
                             "(expected arg:NAME or aux:NAME)")
    return arg_params, aux_params


class _EpochSizeIter(io.DataIter):
    """`epoch_size` batches per epoch from `it`, rewinding `it` whenever it runs out (an epoch
    may span the end of the data)."""

    def __init__(self, it, epoch_size):
        super().__init__(getattr(it, "batch_size", 0))
        self._it = it
        self._epoch_size = epoch_size
        self._count = 0

    @property
    def provide_data(self):
        return self._it.provide_data

    @property
    def provide_label(self):
        return self._it.provide_label

    def reset(self):
        self._count = 0

    def next(self):
        if self._count >= self._epoch_size:
            raise StopIteration
        try:
            batch = self._it.next()
        except StopIteration:
            self._it.reset()
            batch = self._it.next()
        self._count += 1
        return batch


class FeedForward:
    """MXNet's deprecated model API: `fit(X, y)`, `predict(X)`, `score(X)`, `save`/`load`.

    X is a DataIter, or a numpy array / NDArray with labels y (batched by `numpy_batch_size`,
    shuffled for training). Extra keyword arguments are optimizer parameters."""

    def __init__(self, symbol, ctx=None, num_epoch=None, epoch_size=None, optimizer="sgd",
                 initializer=init_mod.Uniform(0.01), numpy_batch_size=128, arg_params=None, aux_params=None,
                 allow_extra_params=False, begin_epoch=0, **kwargs):
        warnings.warn("mxnet.model.FeedForward has been deprecated. Please use mxnet.mod.Module instead.",
                      DeprecationWarning, stacklevel=2)
        if isinstance(symbol, str):
            raise MXNetTypeError("FeedForward: symbol must be a Symbol, got a str")
        self.symbol = symbol
        self.ctx = ctx if ctx is not None else [cpu()]
        if not isinstance(self.ctx, list):
            self.ctx = [self.ctx]
        self.num_epoch = num_epoch
        self.epoch_size = epoch_size
        self.optimizer = optimizer
        self.initializer = initializer
        self.numpy_batch_size = numpy_batch_size
        self.arg_params = arg_params
        self.aux_params = aux_params
        self.allow_extra_params = allow_extra_params
        self.begin_epoch = begin_epoch
        self.kwargs = kwargs.copy()
        self._pred_module = None

    # ---- data ---------------------------------------------------------------------------------
    def _init_iter(self, X, y, is_train):
        if isinstance(X, (np.ndarray, nd.NDArray)):
            if y is None:
                if is_train:
                    raise MXNetValueError("y must be specified when X is numpy.ndarray")
                y = np.zeros(X.shape[0])
            if not isinstance(y, (np.ndarray, nd.NDArray)):
                raise MXNetTypeError("y must be ndarray when X is numpy.ndarray")
            if X.shape[0] != y.shape[0]:
                raise MXNetValueError("The numbers of data points and labels not equal")
            if y.ndim == 2 and y.shape[1] == 1:
                y = y.reshape((-1,))
            if y.ndim != 1:
                raise MXNetValueError("Label must be 1D or 2D (with 2nd dimension being 1)")
            batch = min(X.shape[0], self.numpy_batch_size)
            if is_train:
                return io.NDArrayIter(X, y, batch, shuffle=True, last_batch_handle="roll_over")
            return io.NDArrayIter(X, y, batch, shuffle=False)
        if not isinstance(X, io.DataIter):
            raise MXNetTypeError("X must be DataIter, NDArray or numpy.ndarray")
        return X

    def _module(self, data_iter, for_training):
        from .module import Module
        data_names = [d[0] for d in data_iter.provide_data]
        label_names = [d[0] for d in (data_iter.provide_label or []) if d[0] in self.symbol.list_arguments()]
        mod = Module(self.symbol, data_names=data_names, label_names=label_names, context=self.ctx)
        label_shapes = [d for d in (data_iter.provide_label or []) if d[0] in label_names] or None
        mod.bind(data_iter.provide_data, label_shapes, for_training=for_training)
        return mod

    def _check_params(self):
        if self.arg_params is None:
            raise MXNetError("FeedForward: the model has no parameters yet; call fit() or load() first")

    # ---- training -------------------------------------------------------------------------------
    def fit(self, X, y=None, eval_data=None, eval_metric="acc", epoch_end_callback=None,
            batch_end_callback=None, kvstore="local", logger=None, work_load_list=None, monitor=None,
            eval_end_callback=None, eval_batch_end_callback=None):
        """Train for `num_epoch` epochs (from `begin_epoch`); eval_data is a DataIter or (X, y)."""
        from .callback import LogValidationMetricsCallback
        from .module import Module
        if self.num_epoch is None:
            raise MXNetError("FeedForward.fit: num_epoch must be given")
        data = self._init_iter(X, y, is_train=True)
        if isinstance(eval_data, (tuple, list)) and len(eval_data) == 2:
            eval_data = self._init_iter(eval_data[0], eval_data[1], is_train=False)
        if self.epoch_size is not None:
            data = _EpochSizeIter(data, self.epoch_size)
        data_names = [d[0] for d in data.provide_data]
        label_names = [d[0] for d in (data.provide_label or []) if d[0] in self.symbol.list_arguments()]
        mod = Module(self.symbol, data_names=data_names, label_names=label_names, context=self.ctx,
                     logger=logger or logging, work_load_list=work_load_list)
        params = dict(self.kwargs)
        params.setdefault("rescale_grad", 1.0 / (data.batch_size or data.provide_data[0][1][0]))
        mod.fit(data, eval_data=eval_data, eval_metric=eval_metric, epoch_end_callback=epoch_end_callback,
                batch_end_callback=batch_end_callback, kvstore=kvstore, optimizer=self.optimizer,
                optimizer_params=params, initializer=self.initializer, arg_params=self.arg_params,
                aux_params=self.aux_params, allow_missing=True, begin_epoch=self.begin_epoch,
                num_epoch=self.num_epoch, monitor=monitor,
                eval_end_callback=eval_end_callback or LogValidationMetricsCallback(),
                eval_batch_end_callback=eval_batch_end_callback)
        self.arg_params, self.aux_params = mod.get_params()
        self._pred_module = None

    def _predictor(self, data_iter):
        """A module bound for inference on `data_iter`'s shapes with the model's parameters."""
        self._check_params()
        mod = self._module(data_iter, for_training=False)
        mod.set_params(self.arg_params, self.aux_params, allow_missing=False, allow_extra=self.allow_extra_params)
        return mod

    def predict(self, X, num_batch=None, return_data=False, reset=True):
        """Outputs (numpy; a list when the symbol has several) for X, padding removed; with
        `return_data` also the data and labels: (outputs, data, label)."""
        X = self._init_iter(X, None, is_train=False)
        if reset:
            X.reset()
        mod = self._predictor(X)
        outputs, data, label = None, [], []
        for i, batch in enumerate(X):
            if num_batch is not None and i == num_batch:
                break
            mod.forward(batch, is_train=False)
            keep = batch.data[0].shape[0] - (batch.pad or 0)
            outs = [o.asnumpy()[:keep] for o in mod.get_outputs()]
            outputs = [[] for _ in outs] if outputs is None else outputs
            for acc, o in zip(outputs, outs):
                acc.append(o)
            if return_data:
                data.append([d.asnumpy()[:keep] for d in batch.data])
                label.append([lb.asnumpy()[:keep] for lb in (batch.label or [])])
        if outputs is None:
            raise MXNetError("FeedForward.predict: the data iterator gave no batch")
        outputs = [np.concatenate(o) for o in outputs]
        if return_data:
            data = [np.concatenate([b[j] for b in data]) for j in range(len(data[0]))]
            label = [np.concatenate([b[j] for b in label]) for j in range(len(label[0]))] if label[0] else []
            if len(outputs) == 1:
                return outputs[0], data[0], (label[0] if label else None)
            return outputs, data, label
        return outputs[0] if len(outputs) == 1 else outputs

    def score(self, X, eval_metric="acc", num_batch=None, batch_end_callback=None, reset=True):
        """The value of `eval_metric` over X (the first metric's value when composite)."""
        X = self._init_iter(X, None, is_train=False)
        mod = self._predictor(X)
        res = mod.score(X, eval_metric, num_batch=num_batch, batch_end_callback=batch_end_callback, reset=reset)
        return res[0][1]

    # ---- persistence ----------------------------------------------------------------------------
    def save(self, prefix, epoch=None):
        """`prefix-symbol.json` and `prefix-%04d.params` (epoch defaults to num_epoch)."""
        self._check_params()
        if epoch is None:
            epoch = self.num_epoch
        if epoch is None:
            raise MXNetError("FeedForward.save: give epoch (the model has no num_epoch)")
        save_checkpoint(prefix, epoch, self.symbol, self.arg_params, self.aux_params)

    @staticmethod
    def load(prefix, epoch, ctx=None, **kwargs):
        """A FeedForward from `save`'s files, continuing at `begin_epoch=epoch`."""
        symbol, arg_params, aux_params = load_checkpoint(prefix, epoch)
        return FeedForward(symbol, ctx=ctx, arg_params=arg_params, aux_params=aux_params, begin_epoch=epoch,
                           **kwargs)

    @staticmethod
    def create(symbol, X, y=None, ctx=None, num_epoch=None, epoch_size=None, optimizer="sgd",
               initializer=init_mod.Uniform(0.01), eval_data=None, eval_metric="acc", epoch_end_callback=None,
               batch_end_callback=None, kvstore="local", logger=None, work_load_list=None, eval_end_callback=None,
               eval_batch_end_callback=None, **kwargs):
        """Construct a FeedForward and fit it."""
        model = FeedForward(symbol, ctx=ctx, num_epoch=num_epoch, epoch_size=epoch_size, optimizer=optimizer,
                            initializer=initializer, **kwargs)
        model.fit(X, y, eval_data=eval_data, eval_metric=eval_metric, epoch_end_callback=epoch_end_callback,
                  batch_end_callback=batch_end_callback, kvstore=kvstore, logger=logger,
                  work_load_list=work_load_list, eval_end_callback=eval_end_callback,
                  eval_batch_end_callback=eval_batch_end_callback)
        return model
