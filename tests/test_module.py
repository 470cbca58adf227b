"""Module API: bind/init/forward/backward/update, fit, multi-context equivalence, checkpoints."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit import nd
from symjit.base import MXNetError


def _mlp():
    data = mx.sym.Variable("data")
    h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=16, name="fc1"), act_type="relu")
    out = mx.sym.FullyConnected(h, num_hidden=3, name="fc2")
    return mx.sym.SoftmaxOutput(out, name="softmax")


def _data(n=96, seed=0):
    rng = np.random.default_rng(seed)
    centers = np.array([[2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 0]], dtype=np.float32)
    y = rng.integers(0, 3, n)
    x = centers[y] + 0.3 * rng.standard_normal((n, 4)).astype(np.float32)
    return x.astype(np.float32), y.astype(np.float32)


def test_fit_learns_separable_classes():
    x, y = _data()
    it = mx.io.NDArrayIter(x, y, batch_size=16, shuffle=False)
    mod = mx.mod.Module(_mlp(), context=mx.cpu())
    mx.random.seed(0)
    mod.fit(it, num_epoch=8, optimizer="sgd", optimizer_params={"learning_rate": 0.5},
            initializer=mx.init.Xavier())
    (name, acc), = mod.score(mx.io.NDArrayIter(x, y, batch_size=16), "acc")
    assert name == "accuracy" and acc > 0.95
    pred = mod.predict(mx.io.NDArrayIter(x, y, batch_size=16))
    assert pred.shape == (96, 3)
    np.testing.assert_allclose(pred.asnumpy().sum(1), 1, rtol=1e-5)


def _one_step(contexts):
    x, y = _data(32, seed=1)
    mod = mx.mod.Module(_mlp(), context=contexts)
    mod.bind(data_shapes=[("data", (32, 4))], label_shapes=[("softmax_label", (32,))])
    mx.random.seed(3)
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    batch = mx.io.DataBatch([mx.nd.array(x)], [mx.nd.array(y)])
    for _ in range(2):
        mod.forward_backward(batch)
        mod.update()
    return mod.get_params()[0]


def test_two_contexts_match_one():
    one = _one_step([mx.cpu(0)])
    two = _one_step([mx.cpu(0), mx.cpu(1)])
    for k in one:
        np.testing.assert_allclose(two[k].asnumpy(), one[k].asnumpy(), rtol=1e-5, atol=1e-6)


def test_manual_step_matches_numpy_sgd():
    data = mx.sym.Variable("data")
    out = mx.sym.LinearRegressionOutput(mx.sym.FullyConnected(data, num_hidden=1, name="fc"), name="lro")
    mod = mx.mod.Module(out, label_names=["lro_label"])
    mod.bind(data_shapes=[("data", (4, 2))], label_shapes=[("lro_label", (4, 1))])
    w0 = np.array([[0.5, -0.25]], dtype=np.float32)
    mod.init_params(arg_params={"fc_weight": mx.nd.array(w0), "fc_bias": mx.nd.zeros((1,))})
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1})
    x = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], dtype=np.float32)
    t = np.ones((4, 1), dtype=np.float32)
    mod.forward(mx.io.DataBatch([mx.nd.array(x)], [mx.nd.array(t)]), is_train=True)
    mod.backward()
    mod.update()
    grad = ((x @ w0.T - t) * x).sum(0)  # LinearRegressionOutput: d/dout = out - label
    want = w0 - 0.1 * grad / 4         # rescale_grad = 1/batch_size
    np.testing.assert_allclose(mod.get_params()[0]["fc_weight"].asnumpy(), want, rtol=1e-5)


def test_checkpoint_round_trip(tmp_path):
    mod = mx.mod.Module(_mlp())
    mod.bind(data_shapes=[("data", (2, 4))], label_shapes=[("softmax_label", (2,))])
    mod.init_params(mx.init.Xavier())
    prefix = str(tmp_path / "m")
    mod.save_checkpoint(prefix, 3)
    sym, arg, aux = mx.model.load_checkpoint(prefix, 3)
    assert sym.list_arguments() == _mlp().list_arguments()
    for k, v in mod.get_params()[0].items():
        np.testing.assert_array_equal(arg[k].asnumpy(), v.asnumpy())


def test_input_name_errors():
    with pytest.raises(ValueError, match="input_data"):
        mx.mod.Module(_mlp(), data_names=("input_data",))
    mod = mx.mod.Module(_mlp())
    with pytest.raises(MXNetError, match="bind"):
        mod.init_params()


def _fc_module(ctx):
    sym = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3, name="fc")
    mod = mx.mod.Module(sym, ("data",), None, context=ctx)
    mod.bind(data_shapes=[("data", (4, 2))])
    mod.init_params()
    return mod


def test_module_optimizer_rules_and_states_round_trip(tmp_path):
    mod = _fc_module(mx.cpu())
    opt = mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, rescale_grad=0.25)
    mod.init_optimizer(optimizer=opt)
    assert mod._optimizer.idx2name == {0: "fc_weight", 1: "fc_bias"}
    assert mod._kvstore is None and not mod._update_on_kvstore   # one device: no store
    multi = _fc_module([mx.cpu(0), mx.cpu(1)])
    multi.init_optimizer(optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    assert multi._update_on_kvstore and multi._updater is None   # the store applies the updates
    multi.forward(mx.io.DataBatch([nd.ones((4, 2))]), is_train=True)
    multi.backward([nd.ones((4, 3))])
    multi.update()
    w = [ex.arg_dict["fc_weight"].asnumpy() for ex in multi._execs]
    np.testing.assert_array_equal(w[0], w[1])
    multi.save_checkpoint(str(tmp_path / "m"), 0, save_optimizer_states=True)
    mod2 = mx.mod.Module.load(str(tmp_path / "m"), 0, load_optimizer_states=True, data_names=("data",),
                              label_names=None)
    mod2.bind(data_shapes=[("data", (4, 2))])
    mod2.init_optimizer(optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    states = multi._kvstore._updater.states
    assert set(states) == set(mod2._updater.states) == {0, 1}
    for k in states:
        np.testing.assert_array_equal(states[k].asnumpy(), mod2._updater.states[k].asnumpy())


def test_module_set_params_missing_and_extra():
    mod = _fc_module(mx.cpu())
    good = {"fc_weight": nd.ones((3, 2)), "fc_bias": nd.zeros(3)}
    with pytest.raises(RuntimeError):    # missing, not allowed
        mod.set_params({"fc_weight": nd.ones((3, 2))}, {}, allow_missing=False)
    with pytest.raises(ValueError):      # extra, not allowed
        mod.set_params(dict(good, other=nd.ones(1)), {}, allow_extra=False)
    mod.set_params(dict(good, other=nd.ones(1)), {}, allow_extra=True)
    # predict takes a single array as one batch
    np.testing.assert_allclose(mod.predict(np.ones((4, 2))).asnumpy(), 2 * np.ones((4, 3)))
