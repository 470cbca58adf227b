"""A classic MXNet 1.x Module training script runs unchanged: Module.fit with Speedometer and
do_checkpoint on a small synthetic dataset converges, logs MXNet's lines and writes MXNet's
checkpoint files, which load back for prediction."""
from __future__ import annotations

import logging
import os

import numpy as np

import symjit as mx


def _dataset(n, rng):
    """Two Gaussian blobs per class in 8 dimensions, 3 classes."""
    centers = rng.standard_normal((3, 8)).astype(np.float32) * 3
    y = rng.integers(0, 3, n)
    x = centers[y] + rng.standard_normal((n, 8)).astype(np.float32) * 0.5
    return x, y.astype(np.float32)


def test_classic_module_script(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    rng = np.random.default_rng(42)
    x, y = _dataset(400, rng)
    batch_size = 20
    train_iter = mx.io.NDArrayIter(x[:320], y[:320], batch_size, shuffle=True)
    val_iter = mx.io.NDArrayIter(x[320:], y[320:], batch_size)
    prefix = str(tmp_path / "mlp")

    # --- the script, as written for MXNet 1.x ---
    data = mx.sym.Variable("data")
    fc1 = mx.sym.FullyConnected(data=data, name="fc1", num_hidden=32)
    act1 = mx.sym.Activation(data=fc1, name="relu1", act_type="relu")
    fc2 = mx.sym.FullyConnected(data=act1, name="fc2", num_hidden=3)
    mlp = mx.sym.SoftmaxOutput(data=fc2, name="softmax")
    mod = mx.mod.Module(symbol=mlp, context=mx.cpu(), data_names=["data"], label_names=["softmax_label"])
    mod.fit(train_iter, eval_data=val_iter, optimizer="sgd",
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
            eval_metric="acc", num_epoch=4,
            batch_end_callback=mx.callback.Speedometer(batch_size, 5),
            epoch_end_callback=mx.callback.do_checkpoint(prefix))
    score = mod.score(val_iter, ["acc"])
    # --- end of the script ---

    assert score[0][0] == "accuracy" and score[0][1] > 0.95
    assert sorted(os.listdir(tmp_path)) == ["mlp-0001.params", "mlp-0002.params", "mlp-0003.params",
                                            "mlp-0004.params", "mlp-symbol.json"]
    messages = [r.getMessage() for r in caplog.records]
    speed = [m for m in messages if m.startswith("Epoch[0] Batch [")]
    assert [m.split("\t")[0] for m in speed] == ["Epoch[0] Batch [0-5]", "Epoch[0] Batch [5-10]",
                                                 "Epoch[0] Batch [10-15]"]
    assert all("samples/sec\taccuracy=" in m for m in speed)
    assert any(m.startswith("Epoch[3] Validation-accuracy=") for m in messages)
    assert any(m.startswith("Epoch[3] Time cost=") for m in messages)

    sym, arg_params, aux_params = mx.model.load_checkpoint(prefix, 4)
    pred_mod = mx.mod.Module(symbol=sym, context=mx.cpu(), label_names=None)
    pred_mod.bind(for_training=False, data_shapes=[("data", (batch_size, 8))])
    pred_mod.set_params(arg_params, aux_params, allow_missing=True)
    prob = pred_mod.predict(mx.io.NDArrayIter(x[320:], None, batch_size)).asnumpy()
    assert (prob.argmax(axis=1) == y[320:]).mean() > 0.95
