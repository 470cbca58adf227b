"""mx.mod BucketingModule, SequentialModule, PythonLossModule and mx.model.FeedForward."""
from __future__ import annotations

import os

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError


def _blobs(n, dim=6, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((classes, dim)).astype(np.float32) * 3
    y = rng.integers(0, classes, n)
    return (centers[y] + rng.standard_normal((n, dim)).astype(np.float32) * 0.5), y.astype(np.float32)


# ---- BucketingModule -----------------------------------------------------------------------------
def _sym_gen(seq_len):
    data = mx.sym.var("data")                                   # (batch, seq_len, 4)
    fc = mx.sym.FullyConnected(data, num_hidden=3, flatten=False, name="fc")
    pooled = mx.sym.mean(fc, axis=1)
    return mx.sym.SoftmaxOutput(pooled, name="softmax"), ("data",), ("softmax_label",)


class _BucketIter(mx.io.DataIter):
    """Batches of sequences whose length (the bucket key) varies; the class is told by the
    sign pattern of every step's features."""

    def __init__(self, keys, batch_size=8, seed=0):
        super().__init__(batch_size)
        rng = np.random.default_rng(seed)
        pattern = np.array([[1, -1, 1, -1], [-1, 1, 1, -1], [1, 1, -1, -1]], np.float32)
        self.batches = []
        for key in keys:
            y = rng.integers(0, 3, batch_size)
            x = pattern[y][:, None, :] + rng.standard_normal((batch_size, key, 4)).astype(np.float32) * 0.3
            self.batches.append(mx.io.DataBatch([mx.nd.array(x)], [mx.nd.array(y)], bucket_key=key,
                                                provide_data=[mx.io.DataDesc("data", x.shape)],
                                                provide_label=[mx.io.DataDesc("softmax_label", y.shape)]))
        self.default_bucket_key = max(keys)
        self.provide_data = [mx.io.DataDesc("data", (batch_size, self.default_bucket_key, 4))]
        self.provide_label = [mx.io.DataDesc("softmax_label", (batch_size,))]
        self.cursor = 0

    def reset(self):
        self.cursor = 0

    def next(self):
        if self.cursor == len(self.batches):
            raise StopIteration
        self.cursor += 1
        return self.batches[self.cursor - 1]


def test_bucketing_module_shares_parameters_and_trains(tmp_path):
    train = _BucketIter([5, 3, 7, 3, 5, 7] * 4)
    mod = mx.mod.BucketingModule(_sym_gen, default_bucket_key=train.default_bucket_key, context=mx.cpu())
    mod.fit(train, num_epoch=6, optimizer="sgd", optimizer_params={"learning_rate": 0.5},
            initializer=mx.init.Xavier())
    assert sorted(mod._buckets) == [3, 5, 7]
    weights = {id(m._execs[0].arg_dict["fc_weight"]) for m in mod._buckets.values()}
    assert len(weights) == 1                      # one parameter array for every bucket
    assert mod.score(_BucketIter([3, 5, 7] * 3, seed=1), "acc")[0][1] > 0.9
    prefix = str(tmp_path / "bucket")
    mod.save_checkpoint(prefix, 6)
    assert sorted(os.listdir(tmp_path)) == ["bucket-0006.params", "bucket-3-symbol.json", "bucket-5-symbol.json",
                                            "bucket-7-symbol.json"]
    loaded = mx.mod.BucketingModule.load(prefix, 6, sym_gen=_sym_gen, default_bucket_key=7)
    loaded.bind(train.provide_data, train.provide_label, for_training=False)
    np.testing.assert_array_equal(loaded.get_params()[0]["fc_weight"].asnumpy(),
                                  mod.get_params()[0]["fc_weight"].asnumpy())
    with pytest.raises(MXNetError, match="default_bucket_key"):
        mx.mod.BucketingModule(_sym_gen)


def _auto_named_sym_gen(seq_len):
    """Nodes named automatically (embedding<k>, fullyconnected<k>)."""
    data = mx.sym.var("data")
    embed = mx.sym.Embedding(data, input_dim=10, output_dim=4)
    pooled = mx.sym.mean(embed, axis=1)
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(pooled, num_hidden=3), name="softmax"), ("data",), \
        ("softmax_label",)


def test_bucketing_symbols_are_named_with_fresh_counters():
    """Every bucket's symbol comes from sym_gen under fresh automatic-name counters, so buckets
    (and symbols made before) agree on parameter names, as MXNet's BucketingModule."""
    _auto_named_sym_gen(1)                         # advance the process-wide counters
    mod = mx.mod.BucketingModule(_auto_named_sym_gen, default_bucket_key=6, context=mx.cpu())
    mod.bind([("data", (2, 6))], [("softmax_label", (2,))])
    mod.init_params()
    mod.switch_bucket(3, [("data", (2, 3))], [("softmax_label", (2,))])
    for key in (6, 3):
        assert mod._buckets[key].symbol.list_arguments() == [
            "data", "embedding0_weight", "fullyconnected0_weight", "fullyconnected0_bias", "softmax_label"]
    before = mod._buckets[6]._total_exec_bytes
    assert before == sum(e.allocated_bytes() >> 20 for e in mod._buckets[6]._exec_group.execs)
    del mod._buckets[3]
    mod.switch_bucket(3, [("data", (2, 3))], [("softmax_label", (2,))])
    assert mod._buckets[6]._total_exec_bytes == before


# ---- SequentialModule / PythonLossModule -----------------------------------------------------------
def _first_module(name="fc1"):
    net = mx.sym.Activation(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=16, name=name), act_type="relu")
    return mx.mod.Module(net, label_names=None)


def test_sequential_module_chains_and_trains():
    x, y = _blobs(240)
    train = mx.io.NDArrayIter(x[:200], y[:200], 20, shuffle=True)
    head = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=3, name="fc2"), name="softmax")
    seq = mx.mod.SequentialModule()
    seq.add(_first_module()).add(mx.mod.Module(head), take_labels=True, auto_wiring=True)
    seq.fit(train, num_epoch=5, optimizer="sgd", optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
            initializer=mx.init.Xavier())
    assert seq.output_shapes == [("softmax_output", (20, 3))]
    arg, _ = seq.get_params()
    assert {"fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"} == set(arg)
    assert seq.score(mx.io.NDArrayIter(x[200:], y[200:], 20), "acc")[0][1] > 0.95
    with pytest.raises(MXNetError, match="unknown meta"):
        seq.add(_first_module(), take_label=True)
    dup = mx.mod.SequentialModule().add(_first_module()).add(_first_module(), auto_wiring=True)
    dup.bind([("data", (2, 6))])
    with pytest.raises(MXNetError, match="Duplicated parameter names"):
        dup.init_params()


def test_python_loss_module_gives_the_gradient_of_its_loss():
    x, y = _blobs(200, seed=3)
    train = mx.io.NDArrayIter(x[:160], y[:160], 20, shuffle=True)
    scores = mx.mod.Module(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=3, name="fc"), label_names=None)

    def softmax_ce_grad(scores, labels):
        p = mx.nd.softmax(scores).asnumpy()
        p[np.arange(p.shape[0]), labels.asnumpy().astype(int)] -= 1
        return p

    loss = mx.mod.PythonLossModule(grad_func=softmax_ce_grad)
    seq = mx.mod.SequentialModule().add(scores).add(loss, take_labels=True, auto_wiring=True)
    seq.fit(train, num_epoch=5, optimizer="sgd", optimizer_params={"learning_rate": 0.1},
            initializer=mx.init.Xavier())
    assert loss.output_shapes == [("pyloss_output", (20, 3))]
    assert seq.score(mx.io.NDArrayIter(x[160:], y[160:], 20), "acc")[0][1] > 0.95
    bare = mx.mod.PythonLossModule()
    bare.bind([("data", (2, 3))], [("softmax_label", (2,))])
    bare.forward(mx.io.DataBatch([mx.nd.ones((2, 3))], [mx.nd.zeros((2,))]), is_train=True)
    with pytest.raises(MXNetError, match="grad_func"):
        bare.backward()


# ---- FeedForward -----------------------------------------------------------------------------------
def test_feedforward_fit_predict_score_save_load(tmp_path):
    x, y = _blobs(300, seed=5)
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(
        mx.sym.Activation(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=16, name="fc1"), act_type="relu"),
        num_hidden=3, name="fc2"), name="softmax")
    with pytest.warns(DeprecationWarning):
        model = mx.model.FeedForward(net, num_epoch=6, numpy_batch_size=25, learning_rate=0.1, momentum=0.9,
                                     initializer=mx.init.Xavier())
    model.fit(x[:250], y[:250], eval_data=(x[250:], y[250:]))
    prob = model.predict(x[250:])
    assert prob.shape == (50, 3) and (prob.argmax(axis=1) == y[250:]).mean() > 0.95
    assert model.score(mx.io.NDArrayIter(x[250:], y[250:], 25)) > 0.95
    model.save(str(tmp_path / "ff"))
    assert sorted(os.listdir(tmp_path)) == ["ff-0006.params", "ff-symbol.json"]
    with pytest.warns(DeprecationWarning):
        again = mx.model.FeedForward.load(str(tmp_path / "ff"), 6, numpy_batch_size=25)
    np.testing.assert_allclose(again.predict(x[250:]), prob, rtol=1e-5, atol=1e-6)
    out, data, label = again.predict(mx.io.NDArrayIter(x[250:], y[250:], 20), return_data=True)
    assert out.shape == (50, 3) and data.shape == (50, 6) and label.shape == (50,)   # padding removed
    with pytest.raises(ValueError, match="y must be specified"):
        model.fit(x)
