"""Gluon under NumPy semantics (`npx.set_np()`): blocks written with F.np / F.npx, Parameters as
mx.np arrays, layers and losses switching to npx operators, export / SymbolBlock.imports of
np-mode graphs (one exported by MXNet 1.9.1 itself: tests/golden/make_npx.py)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as onp
import pytest

import symjit as mx
from symjit import autograd, gluon, np, npx
from symjit.gluon import nn

DATA = Path(__file__).resolve().parents[1] / "golden" / "data"


@pytest.fixture
def np_mode():
    npx.set_np()
    yield
    npx.reset_np()


class NpBlock(gluon.HybridBlock):
    """The network of tests/golden/make_npx.py, written the same way."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.conv = nn.Conv2D(4, 3, padding=1)
            self.bn = nn.BatchNorm()
            self.pool = nn.MaxPool2D(2)
            self.dense = nn.Dense(5)

    def hybrid_forward(self, F, x):
        y = F.npx.relu(self.bn(self.conv(x)))
        y = self.pool(y) * 0.5 + 1
        y = F.np.tanh(self.dense(y))
        z = F.npx.reshape(y, (-2, -1)) - F.np.mean(y, axis=1, keepdims=True)
        return F.npx.softmax(z, axis=-1), F.np.sum(F.np.square(y), axis=0)


def _golden_io():
    with onp.load(DATA / "npx_model_io.npz") as d:
        return d["data"], d["out0"], d["out1"]


def _check_against_mxnet(net, hybridize: bool):
    """Run `net` (hybridized or not) on the golden input: both outputs np arrays equal to
    MXNet's. Returns the golden (input, out0, out1)."""
    x, out0, out1 = _golden_io()
    if hybridize:
        net.hybridize()
    got = net(np.array(x))
    assert all(isinstance(g, np.ndarray) for g in got)
    onp.testing.assert_allclose(got[0].asnumpy(), out0, rtol=1e-5, atol=1e-6)
    onp.testing.assert_allclose(got[1].asnumpy(), out1, rtol=1e-5, atol=1e-6)
    return x, out0, out1


@pytest.mark.parametrize("hybridize", [False, True])
def test_imports_model_exported_by_mxnet_in_np_mode(np_mode, hybridize):
    net = gluon.SymbolBlock.imports(str(DATA / "npx_model-symbol.json"), ["data"],
                                    str(DATA / "npx_model-0000.params"))
    _check_against_mxnet(net, hybridize)


@pytest.mark.parametrize("hybridize", [False, True])
def test_block_with_f_np_matches_mxnet_and_exports(np_mode, hybridize, tmp_path):
    """The same hybrid_forward in symjit, with MXNet's weights, gives MXNet's outputs; its
    export holds MXNet's np-mode operators and loads back."""
    net = NpBlock(prefix="npxmodel_")
    net.collect_params().load(str(DATA / "npx_model-0000.params"))
    assert isinstance(net.dense.weight.data(), np.ndarray)
    x, out0, _ = _check_against_mxnet(net, hybridize)
    if hybridize:
        sym_file, params_file = net.export(str(tmp_path / "m"))
        ours = sorted(n["op"] for n in json.load(open(sym_file))["nodes"])
        theirs = sorted(n["op"] for n in json.load(open(DATA / "npx_model-symbol.json"))["nodes"])
        assert ours == theirs
        back = gluon.SymbolBlock.imports(sym_file, ["data"], params_file)
        onp.testing.assert_allclose(back(np.array(x))[0].asnumpy(), out0, rtol=1e-5, atol=1e-6)


def test_parameters_are_np_arrays_with_numpy_unknown_dims(np_mode):
    dense = nn.Dense(3)
    assert dense.weight.shape == (3, -1)          # MXNet: -1 marks the unknown dim in np mode
    dense.initialize()
    x = np.ones((2, 4))
    with autograd.record():
        y = dense(x)
    y.backward()
    assert dense.weight.shape == (3, 4)
    for p in dense.collect_params().values():
        assert isinstance(p.data(), np.ndarray) and isinstance(p.grad(), np.ndarray)
    onp.testing.assert_allclose(dense.weight.grad().asnumpy(), onp.full((3, 4), 2.0))
    npx.reset_np()
    assert nn.Dense(3).weight.shape == (3, 0)


def test_layers_write_npx_operators(np_mode):
    net = nn.HybridSequential()
    net.add(nn.Conv2D(2, 3, activation="relu"), nn.MaxPool2D(), nn.BatchNorm(), nn.Flatten(),
            nn.Dense(4, activation="sigmoid"), nn.Dropout(0.5), nn.LeakyReLU(0.1))
    net.initialize()
    out = net(mx.sym.np.var("data"))
    assert isinstance(out, mx.sym.np._Symbol)
    ops = [n["op"] for n in json.loads(out.tojson())["nodes"] if n["op"] != "null"]
    assert ops == ["Convolution", "Activation", "Pooling", "BatchNorm", "Flatten", "FullyConnected",
                   "Activation", "Dropout", "LeakyReLU"]


@pytest.mark.parametrize("hybridize", [False, True])
def test_np_mode_blocks_match_legacy_mode(hybridize):
    """Layers and losses compute the same values in both modes (np switches only the API)."""
    rng = onp.random.RandomState(0)
    x = rng.uniform(-1, 1, size=(4, 3, 8, 8)).astype(onp.float32)
    label = onp.array([1, 0, 3, 2], dtype=onp.float32)
    dense_label = rng.uniform(0, 1, size=(4, 4)).astype(onp.float32)
    results = {}
    for mode in ("legacy", "np"):
        if mode == "np":
            npx.set_np()
        try:
            make = np.array if mode == "np" else mx.nd.array
            mx.random.seed(1)
            net = nn.HybridSequential()
            net.add(nn.Conv2D(4, 3, activation="relu"), nn.AvgPool2D(), nn.BatchNorm(), nn.Dense(4),
                    nn.LayerNorm(), nn.ELU(), nn.SELU(), nn.GELU(), nn.Swish())
            net.initialize(mx.init.Xavier())
            losses = [gluon.loss.SoftmaxCrossEntropyLoss(), gluon.loss.L2Loss(), gluon.loss.L1Loss(),
                      gluon.loss.SoftmaxCrossEntropyLoss(sparse_label=False),
                      gluon.loss.SigmoidBinaryCrossEntropyLoss()]
            if hybridize:
                net.hybridize()
                for loss in losses:
                    loss.hybridize()
            with autograd.record():
                y = net(make(x))
                values = [losses[0](y, make(label)), losses[1](y, make(dense_label)),
                          losses[2](y, make(dense_label)), losses[3](y, make(dense_label)),
                          losses[4](y, make(dense_label))]
                total = values[0] + values[1] + values[2] + values[3] + values[4]
            total.backward()
            if mode == "np":
                assert isinstance(y, np.ndarray) and all(isinstance(v, np.ndarray) for v in values)
            results[mode] = [y.asnumpy()] + [v.asnumpy() for v in values] + \
                [p.grad().asnumpy() for p in net.collect_params().values() if p.grad_req != "null"]
        finally:
            npx.reset_np()
    for k, (a, b) in enumerate(zip(results["np"], results["legacy"])):
        onp.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"value {k}")


@pytest.mark.parametrize("workers, threads", [(0, False), (2, True), (2, False)])
def test_dataloader_batches_are_np_arrays(np_mode, workers, threads):
    features = onp.arange(30, dtype=onp.float32).reshape(10, 3)
    data = gluon.data.ArrayDataset(np.array(features), np.array(onp.arange(10, dtype=onp.float32)))
    loader = gluon.data.DataLoader(data, 4, num_workers=workers, thread_pool=threads)
    batches = list(loader)
    assert [b[0].shape for b in batches] == [(4, 3), (4, 3), (2, 3)]
    assert all(isinstance(x, np.ndarray) and isinstance(y, np.ndarray) for x, y in batches)
    onp.testing.assert_array_equal(onp.concatenate([x.asnumpy() for x, _ in batches]), features)


def test_np_inputs_take_the_inference_fast_path(np_mode):
    """Repeated inference calls with np arrays run the compiled fast path and still return np
    arrays equal to the general path's; in legacy mode the same block returns NDArrays."""
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="relu"), nn.Dense(3))
    net.initialize()
    net.hybridize()
    x = np.array(onp.random.RandomState(0).uniform(size=(4, 5)).astype(onp.float32))
    first = net(x)
    assert net._fast_call is not None
    again = net(x)
    assert isinstance(first, np.ndarray) and isinstance(again, np.ndarray)
    onp.testing.assert_array_equal(first.asnumpy(), again.asnumpy())
    npx.reset_np()
    legacy = net(mx.nd.array(x.asnumpy()))
    assert type(legacy) is mx.nd.NDArray
    onp.testing.assert_array_equal(legacy.asnumpy(), first.asnumpy())
