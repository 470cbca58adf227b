"""gluon.contrib.estimator: Estimator.fit/evaluate and the event handlers, as MXNet 1.9.1."""
import logging
import os

import numpy as np
import pytest

import symjit as mx
from symjit import gluon, nd
from symjit.gluon.contrib.estimator import (BatchEnd, CheckpointHandler, EarlyStoppingHandler, EpochEnd,
                                            Estimator, GradientUpdateHandler, LoggingHandler, MetricHandler,
                                            StoppingHandler, ValidationHandler)


def _data(n=64, seed=0):
    rs = np.random.RandomState(seed)
    x = rs.randn(n, 4).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.float32)
    return x, y


def _loader(n=64, batch_size=8, seed=0):
    x, y = _data(n, seed)
    return gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=batch_size)


def _net(hybridize=False):
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(8, activation="relu"), gluon.nn.Dense(2))
    net.initialize(mx.init.Xavier(), force_reinit=True)
    if hybridize:
        net.hybridize()
    return net


def _estimator(net=None, lr=0.1, **kwargs):
    net = net or _net()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer, **kwargs)
    est.logger.handlers = []              # keep test output quiet; records still reach handlers added here
    return est


class _Count(BatchEnd, EpochEnd):
    def __init__(self):
        self.batches = self.epochs = 0

    def batch_end(self, estimator, *args, **kwargs):
        self.batches += 1

    def epoch_end(self, estimator, *args, **kwargs):
        self.epochs += 1


@pytest.mark.parametrize("hybridize", [False, True])
def test_fit_converges_and_default_metrics(hybridize):
    est = _estimator(_net(hybridize), train_metrics=mx.metric.Accuracy())
    assert [m.name for m in est.train_metrics] == ["training accuracy"]
    assert [m.name for m in est.val_metrics] == ["validation accuracy"]
    est.fit(_loader(), val_data=_loader(seed=1), epochs=12)
    assert est.train_metrics[0].get()[1] > 0.9
    assert est.val_metrics[0].get()[1] > 0.85


def test_default_metrics_from_the_loss_and_evaluate_matches_numpy():
    est = _estimator()
    assert [m.name for m in est.train_metrics] == ["training accuracy", "training softmaxcrossentropyloss"]
    assert [m.name for m in est.val_metrics] == ["validation accuracy", "validation softmaxcrossentropyloss"]
    est.fit(_loader(), epochs=2)
    x, y = _data(40, seed=3)
    est.evaluate(_loader(40, seed=3))
    logits = est.net(nd.array(x)).asnumpy()
    acc = np.mean(logits.argmax(axis=1) == y)
    shifted = logits - logits.max(axis=1, keepdims=True)
    ce = -(shifted[np.arange(40), y.astype(int)] - np.log(np.exp(shifted).sum(axis=1)))
    assert est.val_metrics[0].get()[1] == pytest.approx(acc)
    assert est.val_metrics[1].get()[1] == pytest.approx(ce.mean(), rel=1e-4)


def test_fit_by_batches_steps_the_trainer_that_many_times():
    est = _estimator()
    count = _Count()
    est.fit(_loader(), batches=11, event_handlers=[count])
    assert count.batches == 11 and est.trainer.optimizer.num_update == 11
    assert count.epochs == 2          # the loop ends inside the second epoch, which still ends


def test_fit_argument_errors():
    est = _estimator()
    with pytest.raises(ValueError, match="exactly one type of iteration"):
        est.fit(_loader(), epochs=1, batches=3)
    with pytest.raises(ValueError, match="exactly one type of iteration"):
        est.fit(_loader())
    with pytest.raises(ValueError, match="DataLoader"):
        est.fit([(nd.ones((2, 4)), nd.ones((2,)))], epochs=1)
    with pytest.raises(ValueError, match="loss must be a Loss"):
        Estimator(_net(), loss="l2")
    with pytest.raises(ValueError, match="Trainer must be a Gluon Trainer"):
        Estimator(_net(), gluon.loss.L2Loss(), trainer="sgd")
    with pytest.raises(ValueError, match="context must be a Context"):
        Estimator(_net(), gluon.loss.L2Loss(), context="cpu")
    with pytest.raises(ValueError, match="outside of the known"):
        est.fit(_loader(), epochs=1, event_handlers=[MetricHandler(metrics=mx.metric.Accuracy())])
    with pytest.raises(ValueError, match="fit_batch"), pytest.warns(UserWarning, match="default SGD"):
        Estimator(_net(), gluon.loss.L2Loss(), batch_processor=object())
    with pytest.warns(UserWarning, match="default SGD"):
        assert Estimator(_net(), gluon.loss.L2Loss()).trainer.learning_rate == 0.001


def test_validation_handler_batch_period():
    est = _estimator()
    calls = []
    handler = ValidationHandler(_loader(16), eval_fn=lambda val_data, event_handlers: calls.append(val_data),
                                epoch_period=None, batch_period=3)
    est.fit(_loader(), epochs=2, event_handlers=[handler])
    assert len(calls) == 16 // 3


def test_logging_handler_interval_messages():
    est = _estimator()
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    est.logger.addHandler(handler)
    est.fit(_loader(32), epochs=1, event_handlers=[LoggingHandler(log_interval=2, metrics=est.train_metrics)])
    messages = [r.getMessage() for r in records]
    assert messages[0].startswith("Training begin: using optimizer SGD with current learning rate 0.1000")
    assert messages[1] == "Train for 1 epochs."
    batch_lines = [m for m in messages if m.startswith("[Epoch 0][Batch")]
    assert [m.split("]")[1] for m in batch_lines] == ["[Batch 0", "[Batch 2"]
    assert "[Samples 8] time/interval" in batch_lines[0] and "training accuracy:" in batch_lines[0]
    assert messages[-1].startswith("Train finished using total") and "with 1 epochs" in messages[-1]
    with pytest.raises(ValueError, match="log_interval"):
        LoggingHandler(log_interval="batch")


def test_checkpoint_handler_files_rotation_best_and_symbol(tmp_path):
    est = _estimator(_net(hybridize=True))
    acc = est.train_metrics[0]
    ckpt = CheckpointHandler(str(tmp_path), model_prefix="m", monitor=acc, save_best=True, mode="max",
                             epoch_period=1, max_checkpoints=2)
    est.fit(_loader(), epochs=3, event_handlers=[ckpt])
    files = sorted(os.listdir(tmp_path))
    assert files == ["m-best.params", "m-best.states", "m-epoch1batch16.params", "m-epoch1batch16.states",
                     "m-epoch2batch24.params", "m-epoch2batch24.states", "m-symbol.json"]
    restored = _net()
    restored.load_parameters(str(tmp_path / "m-epoch2batch24.params"))
    x = nd.array(_data(8)[0])
    np.testing.assert_allclose(restored(x).asnumpy(), est.net(x).asnumpy(), rtol=1e-6)
    assert ckpt.best == pytest.approx(max(ckpt.best, acc.get()[1]))
    with pytest.raises(ValueError, match="save best"):
        CheckpointHandler(str(tmp_path), save_best=True)


def test_checkpoint_resume_trains_the_remaining_epochs(tmp_path):
    est = _estimator()
    est.fit(_loader(), epochs=2, event_handlers=[CheckpointHandler(str(tmp_path), model_prefix="r")])
    est2 = _estimator(_net())
    count = _Count()
    resume = CheckpointHandler(str(tmp_path), model_prefix="r", resume_from_checkpoint=True)
    est2.fit(_loader(), epochs=4, event_handlers=[resume, count])
    assert count.epochs == 2                                 # epochs 0 and 1 were done before
    assert "r-epoch3batch32.params" in os.listdir(tmp_path)
    est4 = _estimator(_net())
    with pytest.raises(ValueError, match="maximum number of epoch"):
        est4.fit(_loader(), epochs=2, event_handlers=[CheckpointHandler(str(tmp_path), model_prefix="r",
                                                                        resume_from_checkpoint=True)])


def test_early_stopping_when_the_monitor_stops_improving():
    est = _estimator(lr=0.0)                       # nothing learns: the loss never improves
    loss_metric = est.train_metrics[1]
    stopper = EarlyStoppingHandler(monitor=loss_metric, mode="min", patience=2)
    count = _Count()
    est.fit(_loader(), epochs=10, event_handlers=[stopper, count])
    assert count.epochs == 3 and stopper.stopped_epoch == 2 and stopper.stop_training
    with pytest.raises(ValueError, match="monitor"):
        EarlyStoppingHandler(monitor=None)
    with pytest.warns(UserWarning, match="`greater` operator"):
        assert EarlyStoppingHandler(monitor=est.train_metrics[0]).monitor_op is np.greater
    with pytest.warns(UserWarning, match="`less` operator"):
        assert EarlyStoppingHandler(monitor=loss_metric).monitor_op is np.less


def test_handlers_run_in_priority_order_and_stopping_handler():
    est = _estimator()
    order = []

    class Probe(BatchEnd):
        def __init__(self, name, priority):
            self.name, self.priority = name, priority

        def batch_end(self, estimator, *args, **kwargs):
            order.append(self.name)

    est.fit(_loader(8), epochs=1, event_handlers=[Probe("late", 10), Probe("early", -3000), GradientUpdateHandler()])
    assert order == ["early", "late"]
    stop = StoppingHandler()
    est.max_epoch, est.max_batch = None, 2
    stop.train_begin(est)
    assert [stop.batch_end(est), stop.batch_end(est)] == [False, True]
