"""gluon Block / HybridBlock (imperative) and the basic layers: MXNet 1.x naming, child
registration, reprs, hooks, parameter files, and layer numerics against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit import autograd, gluon, nd
from symjit.base import MXNetError
from symjit.gluon import nn
from symjit.symbol.naming import NameManager


@pytest.fixture(autouse=True)
def fresh_names(monkeypatch):
    """Automatic names count from 0 as in a fresh MXNet process."""
    monkeypatch.setattr(NameManager._current, "value", NameManager(), raising=False)


class MLP(gluon.Block):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.hidden = nn.Dense(8, activation="relu")
            self.output = nn.Dense(3)

    def forward(self, x):
        return self.output(self.hidden(x))


def test_prefixes_follow_mxnet_naming():
    d = nn.Dense(4)
    assert d.prefix == "dense0_" and d.name == "dense0"
    assert nn.Dense(4).prefix == "dense1_"
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Dense(3), nn.Dense(2, activation="relu"))
    assert net.prefix == "hybridsequential0_"
    assert sorted(net.collect_params().keys()) == [
        "hybridsequential0_dense0_bias", "hybridsequential0_dense0_weight",
        "hybridsequential0_dense1_bias", "hybridsequential0_dense1_weight"]
    assert net[1].act.prefix == "hybridsequential0_dense1_relu_"
    seq = nn.Sequential()
    seq.add(nn.Dense(2))
    assert seq.prefix == "sequential0_" and seq[0].prefix == "dense2_"
    named = nn.Dense(2, prefix="fc_")
    assert named.weight.name == "fc_weight"


def test_children_registered_by_attribute_and_collected():
    net = MLP()
    assert list(net._children) == ["hidden", "output"]
    keys = sorted(net.collect_params().keys())
    assert keys == ["mlp0_dense0_bias", "mlp0_dense0_weight", "mlp0_dense1_bias", "mlp0_dense1_weight"]
    assert sorted(net.collect_params(".*weight").keys()) == ["mlp0_dense0_weight", "mlp0_dense1_weight"]
    with pytest.raises(TypeError, match="Changing attribute type"):
        net.hidden = 3


def test_reprs_match_mxnet():
    net = nn.Sequential()
    with net.name_scope():
        net.add(nn.Dense(256, activation="relu"), nn.Dropout(0.5), nn.BatchNorm(), nn.Dense(10, in_units=256),
                nn.Flatten(), nn.Embedding(10, 4), nn.LayerNorm())
    assert repr(net) == (
        "Sequential(\n"
        "  (0): Dense(None -> 256, Activation(relu))\n"
        "  (1): Dropout(p = 0.5, axes=())\n"
        "  (2): BatchNorm(axis=1, eps=1e-05, momentum=0.9, fix_gamma=False, use_global_stats=False, "
        "in_channels=None)\n"
        "  (3): Dense(256 -> 10, linear)\n"
        "  (4): Flatten\n"
        "  (5): Embedding(10 -> 4, float32)\n"
        "  (6): LayerNorm(eps=1e-05, axis=-1, center=True, scale=True, in_channels=0)\n"
        ")")
    m = MLP()
    assert repr(m) == ("MLP(\n  (hidden): Dense(None -> 8, Activation(relu))\n"
                       "  (output): Dense(None -> 3, linear)\n)")


def test_dense_forward_matches_numpy_and_defers_shape():
    d = nn.Dense(5, activation="tanh")
    d.initialize()
    assert d.weight.shape == (5, 0)
    x = np.random.RandomState(0).randn(4, 3, 2).astype(np.float32)
    y = d(nd.array(x)).asnumpy()
    assert d.weight.shape == (5, 6)
    w, b = d.weight.data().asnumpy(), d.bias.data().asnumpy()
    np.testing.assert_allclose(y, np.tanh(x.reshape(4, 6) @ w.T + b), rtol=1e-5, atol=1e-6)
    nf = nn.Dense(2, flatten=False, use_bias=False)
    nf.initialize()
    y2 = nf(nd.array(x)).asnumpy()
    np.testing.assert_allclose(y2, x @ nf.weight.data().asnumpy().T, rtol=1e-5, atol=1e-6)
    assert nf.bias is None


def test_custom_block_with_deferred_parameter():
    class Scale(gluon.HybridBlock):
        def __init__(self, units, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.weights = self.params.get("weights", shape=(units, 0), allow_deferred_init=True)

        def hybrid_forward(self, F, x, weights):
            return F.FullyConnected(x, weights, num_hidden=self.weights.shape[0], no_bias=True)

    blk = Scale(3)
    blk.initialize(mx.init.One())
    out = blk(nd.ones((2, 4)))
    assert blk.weights.shape == (3, 4)
    np.testing.assert_array_equal(out.asnumpy(), np.full((2, 3), 4.0))


def test_hooks_and_detach():
    calls = []
    d = nn.Dense(2, in_units=3)
    d.initialize()
    h1 = d.register_forward_pre_hook(lambda blk, args: calls.append(("pre", args[0].shape)))
    h2 = d.register_forward_hook(lambda blk, args, out: calls.append(("post", out.shape)))
    d(nd.ones((4, 3)))
    assert calls == [("pre", (4, 3)), ("post", (4, 2))]
    h1.detach()
    with h2:
        pass
    d(nd.ones((4, 3)))
    assert len(calls) == 2


def test_apply_and_cast():
    net = MLP()
    net.initialize()
    net(nd.ones((1, 4)))
    seen = []
    net.apply(lambda b: seen.append(b.name))
    assert seen == ["mlp0_dense0_relu", "mlp0_dense0", "mlp0_dense1", "mlp0"]
    net.cast("float64")
    assert all(p.data().dtype == np.float64 for p in net.collect_params().values())
    assert net(nd.ones((1, 4), dtype="float64")).dtype == np.float64


def test_save_load_parameters_roundtrip(tmp_path):
    net = MLP()
    net.initialize()
    x = nd.array(np.random.RandomState(1).rand(2, 4))
    ref = net(x).asnumpy()
    fname = str(tmp_path / "mlp.params")
    net.save_parameters(fname)
    assert sorted(nd.load(fname)) == ["hidden.bias", "hidden.weight", "output.bias", "output.weight"]
    net2 = MLP()
    net2.load_parameters(fname)
    np.testing.assert_array_equal(net2(x).asnumpy(), ref)
    small = nn.Sequential()
    with small.name_scope():
        small.add(nn.Dense(8))
    with pytest.raises(AssertionError, match="'0.weight' is missing"):
        small.load_parameters(fname)
    with pytest.raises(ValueError, match="is not present in ParameterDict"):
        small.load_parameters(fname, allow_missing=True)

    class Bigger(MLP):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.extra = nn.Dense(1)
    with pytest.raises(AssertionError, match="'extra.weight' is missing"):
        Bigger().load_parameters(fname)
    b = Bigger()
    b.load_parameters(fname, allow_missing=True)
    assert b.hidden.weight.shape == (8, 4)


def test_load_parameters_cast_dtype(tmp_path):
    d = nn.Dense(2, in_units=2)
    d.initialize()
    fname = str(tmp_path / "d.params")
    d.save_parameters(fname)
    d64 = nn.Dense(2, in_units=2, dtype="float64")
    with pytest.raises(AssertionError, match="dtype incompatible"):
        d64.load_parameters(fname)
    d64.load_parameters(fname, cast_dtype=True)
    assert d64.weight.data().dtype == np.float64


def test_hybrid_block_requires_hybrid_children():
    net = nn.HybridSequential()
    with pytest.raises(ValueError, match="Children of HybridBlock must also be HybridBlock"):
        net.add(nn.Lambda(lambda x: x))


def test_sequential_slicing_and_len():
    net = nn.HybridSequential()
    net.add(nn.Dense(2), nn.Dense(3), nn.Dense(4))
    assert len(net) == 3
    sub = net[1:]
    assert isinstance(sub, nn.HybridSequential) and len(sub) == 2 and sub[0] is net[1]


def test_lambda_identity_concatenate():
    x = nd.array([[-1.0, 2.0], [3.0, -4.0]])
    assert (nn.Lambda("relu")(x).asnumpy() == np.maximum(x.asnumpy(), 0)).all()
    hl = nn.HybridLambda(lambda F, v: F.exp(v))
    np.testing.assert_allclose(hl(x).asnumpy(), np.exp(x.asnumpy()), rtol=1e-6)
    assert repr(nn.HybridLambda("tanh")) == "HybridLambda(tanh)"
    assert nn.Identity()(x) is x
    cat = nn.HybridConcatenate(axis=1)
    cat.add(nn.Identity(), nn.HybridLambda(lambda F, v: F.negative(v)))
    np.testing.assert_array_equal(cat(x).asnumpy(), np.concatenate([x.asnumpy(), -x.asnumpy()], axis=1))
    c2 = nn.Concatenate(axis=0)
    c2.add(nn.Identity(), nn.Identity())
    assert c2(x).shape == (4, 2)


def test_embedding_layernorm_flatten_numerics():
    rs = np.random.RandomState(2)
    emb = nn.Embedding(6, 3)
    emb.initialize()
    idx = np.array([[0, 5], [2, 2]], dtype=np.float32)
    out = emb(nd.array(idx)).asnumpy()
    np.testing.assert_array_equal(out, emb.weight.data().asnumpy()[idx.astype(int)])
    ln = nn.LayerNorm(in_channels=4)
    ln.initialize()
    ln.gamma.set_data(nd.array([1.0, 2.0, 0.5, -1.0]))
    ln.beta.set_data(nd.array([0.0, 1.0, 0.0, 2.0]))
    x = rs.randn(3, 4).astype(np.float32)
    y = ln(nd.array(x)).asnumpy()
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(y, (x - mu) / np.sqrt(var + 1e-5) * [1, 2, 0.5, -1] + [0, 1, 0, 2],
                               rtol=1e-5, atol=1e-5)
    assert nn.Flatten()(nd.ones((2, 3, 4))).shape == (2, 12)


def test_batchnorm_training_updates_running_statistics():
    bn = nn.BatchNorm(in_channels=2, momentum=0.8)
    bn.initialize()
    x = np.random.RandomState(3).randn(5, 2, 3).astype(np.float32) * 2 + 1
    with autograd.record():
        y = bn(nd.array(x))
    mean = x.mean(axis=(0, 2))
    var = x.var(axis=(0, 2))
    np.testing.assert_allclose(bn.running_mean.data().asnumpy(), 0.2 * mean, rtol=1e-5)
    np.testing.assert_allclose(bn.running_var.data().asnumpy(), 0.8 + 0.2 * var, rtol=1e-5)
    np.testing.assert_allclose(y.asnumpy(), (x - mean[None, :, None]) / np.sqrt(var[None, :, None] + 1e-5),
                               rtol=1e-4, atol=1e-4)
    before = bn.running_mean.data().asnumpy()
    bn(nd.array(x))  # inference: statistics untouched
    np.testing.assert_array_equal(bn.running_mean.data().asnumpy(), before)


def test_dropout_train_and_predict():
    dp = nn.Dropout(0.5)
    x = nd.ones((200, 10))
    np.testing.assert_array_equal(dp(x).asnumpy(), x.asnumpy())
    with autograd.record():
        y = dp(x).asnumpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 0.3 < (y == 0).mean() < 0.7


@pytest.mark.filterwarnings("ignore:All children of this Sequential")
def test_summary_prints_layers(capsys):
    net = nn.Sequential()
    net.add(nn.Dense(16, activation="relu"), nn.Dense(4))
    net.initialize()
    net.summary(nd.ones((2, 8)))
    out = capsys.readouterr().out.splitlines()
    # columns: name right-aligned in 20, two spaces, shape in 42, one space, count in 15
    assert out[1] == " " * 8 + "Layer (type)" + "  " + " " * 30 + "Output Shape" + " " + " " * 8 + "Param #"
    assert out[3] == " " * 15 + "Input" + "  " + " " * 36 + "(2, 8)" + " " + " " * 14 + "0"
    # as MXNet: the deferred-shape trace on Symbols runs the Activation child's hook first
    assert out[4] == " " * 8 + "Activation-1" + "  " + " " * 18 + "<Symbol dense0_relu_fwd>" + " " + " " * 14 + "0"
    assert out[5] == " " * 8 + "Activation-2" + "  " + " " * 35 + "(2, 16)" + " " + " " * 14 + "0"
    assert out[6] == " " * 13 + "Dense-3" + "  " + " " * 35 + "(2, 16)" + " " + " " * 12 + "144"
    assert "   Total params: 212" in out
    net.hybridize()
    with pytest.raises(MXNetError, match="must not be hybridized"):
        net.summary(nd.ones((2, 8)))


def test_forward_not_implemented_and_mixed_inputs():
    with pytest.raises(NotImplementedError):
        gluon.Block()(nd.ones(1))
    d = nn.Dense(1, in_units=1)
    d.initialize()
    with pytest.raises(MXNetError, match="mixed NDArrays and Symbols"):
        d.forward(nd.ones((1, 1)), mx.sym.var("x"))
    with pytest.raises(ValueError, match="there must be one NDArray or one Symbol"):
        d(np.ones((1, 1)))   # MXNet ignores non-array inputs when looking for arrays
    with pytest.raises(ValueError, match="there must be one NDArray or one Symbol"):
        d([])


def test_symbolic_forward_builds_named_nodes():
    net = nn.HybridSequential(prefix="net_")
    with net.name_scope():
        net.add(nn.Dense(4, activation="relu"), nn.Dense(2))
    out = net(mx.sym.var("data"))
    assert out.list_arguments() == ["data", "net_dense0_weight", "net_dense0_bias",
                                    "net_dense1_weight", "net_dense1_bias"]
    assert out.get_internals().list_outputs()[3:5] == ["net_dense0_fwd_output", "net_dense0_relu_fwd_output"]


def test_none_input_positions_mean_absent_in_F_ops():
    """hybrid_forward code passes `bias=None` positionally (MXNet's generated op functions skip it)."""
    class NoBias(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            self.w = self.params.get("w", shape=(2, 3), init=mx.init.One())

        def hybrid_forward(self, F, x, w):
            return F.FullyConnected(x, w, None, no_bias=True, num_hidden=2)

    blk = NoBias()
    blk.initialize()
    np.testing.assert_array_equal(blk(nd.ones((1, 3))).asnumpy(), [[3.0, 3.0]])
    blk.hybridize()
    np.testing.assert_array_equal(blk(nd.ones((1, 3))).asnumpy(), [[3.0, 3.0]])
    assert nd.sum(nd.ones((2, 2)), None).shape == (1,)  # a None attribute stays an attribute


def test_hybrid_block_input_checks_raise_value_error_as_mxnet():
    class Add(gluon.HybridBlock):
        def hybrid_forward(self, F, a, b=None):
            return a if b is None else a + b

    net = Add()
    assert net(mx.nd.ones((2,)), 1).asnumpy().tolist() == [2, 2]   # not hybridized: a plain call
    net.hybridize()
    with pytest.raises(ValueError):   # scalars cannot be graph inputs
        net(mx.nd.ones((2,)), 1)
    with pytest.raises(ValueError):   # NDArrays and Symbols mixed
        net(mx.nd.ones((2,)), mx.sym.var("a"))
    with pytest.raises(ValueError):   # several contexts
        net(mx.nd.ones((2,), ctx=mx.cpu(1)), mx.nd.ones((2,), ctx=mx.cpu(2)))
    with pytest.raises(ValueError):
        net(None, None)
    net = Add()
    net.hybridize()
    assert net(mx.nd.ones((2,))).asnumpy().tolist() == [1, 1]
    # trailing None arguments match the cached structure (defaults), other changes do not
    assert net(mx.nd.ones((2,)), None).asnumpy().tolist() == [1, 1]
    with pytest.raises(ValueError):
        net(mx.nd.ones((2,)), mx.nd.ones((2,)))
