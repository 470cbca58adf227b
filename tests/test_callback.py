"""mx.callback: MXNet's log lines and checkpoint file names."""
from __future__ import annotations

import logging
import os

import numpy as np

import symjit as mx
from symjit.model import BatchEndParam


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _metric(value_pairs):
    m = mx.metric.Accuracy()
    labels, preds = value_pairs
    m.update([mx.nd.array(labels)], [mx.nd.array(preds)])
    return m


def test_speedometer_lines(caplog, monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(mx.callback.time, "time", clock)
    caplog.set_level(logging.INFO)
    metric = _metric(([1, 0], [[0.2, 0.8], [0.3, 0.7]]))   # accuracy 0.5
    speedo = mx.callback.Speedometer(batch_size=10, frequent=2)
    for nbatch in range(5):
        clock.now += 0.5
        speedo(BatchEndParam(epoch=3, nbatch=nbatch, eval_metric=metric, locals=None))
    lines = [r.getMessage() for r in caplog.records]
    # batches 2 and 4 log: 2 batches * 10 samples in 1 s; auto_reset clears the metric after
    assert lines == ["Epoch[3] Batch [0-2]\tSpeed: 20.00 samples/sec\taccuracy=0.500000",
                     "Epoch[3] Batch [2-4]\tSpeed: 20.00 samples/sec\taccuracy=nan"]
    caplog.clear()
    speedo = mx.callback.Speedometer(batch_size=4, frequent=1, auto_reset=False)
    speedo(BatchEndParam(0, 0, metric, None))
    clock.now += 2.0
    speedo(BatchEndParam(0, 1, metric, None))
    speedo(BatchEndParam(0, 1, None, None))     # no time passed, no metric
    assert [r.getMessage() for r in caplog.records] == [
        "Epoch[0] Batch [0-1]\tSpeed: 2.00 samples/sec\taccuracy=nan",
        "Iter[0] Batch [1]\tSpeed: inf samples/sec"]


def test_log_train_metric_progress_bar_validation(caplog):
    caplog.set_level(logging.INFO)
    metric = _metric(([1, 1, 0, 0], [[0, 1], [0, 1], [0, 1], [1, 0]]))
    cb = mx.callback.log_train_metric(period=2, auto_reset=True)
    cb(BatchEndParam(1, 1, metric, None))
    cb(BatchEndParam(1, 2, metric, None))
    mx.callback.ProgressBar(total=4, length=8)(BatchEndParam(0, 1, None, None))
    mx.callback.LogValidationMetricsCallback()(BatchEndParam(5, 0, _metric(([1], [[0, 1]])), None))
    assert [r.getMessage() for r in caplog.records] == [
        "Iter[1] Batch[2] Train-accuracy=0.750000", "[==------] 25%\r", "Epoch[5] Validation-accuracy=1.000000"]
    assert np.isnan(metric.get()[1])   # auto_reset


def test_do_checkpoint_and_module_checkpoint_files(tmp_path):
    data = mx.sym.var("data")
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(data, num_hidden=2, name="fc"), name="softmax")
    arg = {"fc_weight": mx.nd.ones((2, 3)), "fc_bias": mx.nd.zeros((2,))}
    prefix = str(tmp_path / "model")
    cb = mx.callback.do_checkpoint(prefix, period=2)
    for epoch in range(4):
        cb(epoch, net, arg, {})
    assert sorted(os.listdir(tmp_path)) == ["model-0002.params", "model-0004.params", "model-symbol.json"]
    sym, arg2, aux2 = mx.model.load_checkpoint(prefix, 4)
    assert sym.list_arguments() == net.list_arguments() and aux2 == {}
    np.testing.assert_array_equal(arg2["fc_weight"].asnumpy(), np.ones((2, 3)))
    assert sorted(mx.nd.load(prefix + "-0002.params")) == ["arg:fc_bias", "arg:fc_weight"]

    mod = mx.mod.Module(net, context=mx.cpu())
    mod.bind(data_shapes=[("data", (4, 3))], label_shapes=[("softmax_label", (4,))])
    mod.init_params()
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    mprefix = str(tmp_path / "mod")
    cb = mx.callback.module_checkpoint(mod, mprefix, period=1, save_optimizer_states=True)
    cb(0)
    assert {"mod-symbol.json", "mod-0001.params", "mod-0001.states"} <= set(os.listdir(tmp_path))
