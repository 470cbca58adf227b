"""A "Dive into Deep Learning"-style training script in NumPy mode (`npx.set_np()`): LeNet
built with gluon.nn.HybridSequential, hybridized, trained with SoftmaxCrossEntropyLoss and
sgd on synthetic data through a DataLoader, accuracy computed the d2l way. The script's code
is d2l's idiom, unchanged; the tests check it runs, that its arrays are `mx.np.ndarray`s, and
that it matches the same network in MXNet's legacy mode to 1e-5 at the same weights (forward
outputs, losses, updated weights), and that its export loads back in NumPy mode."""
from __future__ import annotations

import numpy as onp
import pytest

import symjit as mx
from symjit import autograd, gluon, init, np, npx
from symjit.gluon import nn

TOL = 1e-5
BATCH, STEPS, LR = 8, 3, 0.9


# ---- the d2l-style script (chapter 6.6, LeNet), as the book writes it --------------------------
def lenet(act="sigmoid"):
    net = nn.HybridSequential()
    net.add(nn.Conv2D(channels=6, kernel_size=5, padding=2, activation=act),
            nn.AvgPool2D(pool_size=2, strides=2),
            nn.Conv2D(channels=16, kernel_size=5, activation=act),
            nn.AvgPool2D(pool_size=2, strides=2),
            nn.Dense(120, activation=act),
            nn.Dense(84, activation=act),
            nn.Dense(10))
    return net


def accuracy(y_hat, y):
    """Compute the number of correct predictions."""
    if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
        y_hat = y_hat.argmax(axis=1)
    cmp = y_hat.astype(y.dtype) == y
    return float(cmp.astype(y.dtype).sum())


def load_array(data_arrays, batch_size, is_train=True):
    """Construct a Gluon data iterator."""
    dataset = gluon.data.ArrayDataset(*data_arrays)
    return gluon.data.DataLoader(dataset, batch_size, shuffle=is_train)


def train_epoch(net, train_iter, loss, trainer, record):
    """Train for one epoch; `record(net, y_hat, l)` sees every step."""
    total_loss, total_correct, total = 0.0, 0.0, 0
    for X, y in train_iter:
        with autograd.record():
            y_hat = net(X)
            l = loss(y_hat, y)
        l.backward()
        trainer.step(X.shape[0])
        record(net, y_hat, l)
        total_loss += float(l.sum())
        total_correct += accuracy(y_hat, y)
        total += y.size
    return total_loss / total, total_correct / total


def train_epoch_legacy(net, train_iter, loss, trainer, record):
    """The same loop in MXNet's legacy NDArray idiom (no float() of arrays there)."""
    total_loss, total_correct, total = 0.0, 0.0, 0
    for X, y in train_iter:
        with autograd.record():
            y_hat = net(X)
            l = loss(y_hat, y)
        l.backward()
        trainer.step(X.shape[0])
        record(net, y_hat, l)
        total_loss += l.sum().asscalar()
        total_correct += (y_hat.argmax(axis=1) == y).sum().asscalar()
        total += y.size
    return total_loss / total, total_correct / total


# ---- the comparison -------------------------------------------------------------------------
def _synthetic(n):
    rng = onp.random.RandomState(0)
    features = rng.uniform(0, 1, size=(n, 1, 28, 28)).astype(onp.float32)
    labels = rng.randint(0, 10, size=(n,)).astype(onp.float32)
    return features, labels


def _run(np_mode: bool, act: str, weights=None):
    """Build, (initialize or load `weights`), hybridize and train LeNet for STEPS batches in
    one mode; returns (initial weights, per-step records, final weights, epoch metrics, net)."""
    if np_mode:
        npx.set_np()
    try:
        features, labels = _synthetic(BATCH * STEPS)
        make = np.array if np_mode else mx.nd.array
        net = lenet(act)
        net.initialize(init=init.Xavier())
        X0 = make(features[:BATCH])
        net(X0)
        params = list(net.collect_params().values())
        if weights is not None:
            for p, w in zip(params, weights):
                p.set_data(make(w))
        initial = [p.data().asnumpy() for p in params]
        net.hybridize()
        records = []

        def record(net_, y_hat, l):
            records.append((y_hat.asnumpy(), l.asnumpy(), [p.data().asnumpy() for p in params],
                            type(y_hat), type(l), type(params[0].data()), type(params[0].grad())))
        loss = gluon.loss.SoftmaxCrossEntropyLoss()
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": LR})
        train_iter = load_array((make(features), make(labels)), BATCH, is_train=False)
        metrics = (train_epoch if np_mode else train_epoch_legacy)(net, train_iter, loss, trainer, record)
        return initial, records, [p.data().asnumpy() for p in params], metrics, net
    finally:
        if np_mode:
            npx.reset_np()


@pytest.fixture(scope="module", params=["sigmoid", "relu"])
def runs(request):
    np_run = _run(True, request.param)
    legacy_run = _run(False, request.param, weights=np_run[0])
    return np_run, legacy_run


def test_script_runs_in_np_mode_with_np_arrays(runs):
    (_, records, _, (mean_loss, acc), _), _ = runs
    assert len(records) == STEPS
    for _, _, _, t_yhat, t_loss, t_data, t_grad in records:
        assert t_yhat is np.ndarray and t_loss is np.ndarray
        assert t_data is np.ndarray and t_grad is np.ndarray
    assert onp.isfinite(mean_loss) and 0.0 <= acc <= 1.0


def test_np_mode_matches_legacy_mode(runs):
    np_run, legacy_run = runs
    assert all(r[3] is mx.nd.NDArray and r[5] is mx.nd.NDArray for r in legacy_run[1])   # really legacy
    for a, b in zip(np_run[0], legacy_run[0]):
        onp.testing.assert_array_equal(a, b)   # the same starting weights
    for step, (r_np, r_legacy) in enumerate(zip(np_run[1], legacy_run[1])):
        onp.testing.assert_allclose(r_np[0], r_legacy[0], rtol=TOL, atol=TOL, err_msg=f"outputs, step {step}")
        onp.testing.assert_allclose(r_np[1], r_legacy[1], rtol=TOL, atol=TOL, err_msg=f"losses, step {step}")
        for k, (w_np, w_legacy) in enumerate(zip(r_np[2], r_legacy[2])):
            onp.testing.assert_allclose(w_np, w_legacy, rtol=TOL, atol=TOL,
                                        err_msg=f"parameter {k} after step {step}")
    assert np_run[3][0] == pytest.approx(legacy_run[3][0], rel=TOL)
    assert np_run[3][1] == legacy_run[3][1]
    # training moved the weights
    assert any(not onp.allclose(a, b) for a, b in zip(np_run[0], np_run[2]))


def test_losses_match_a_numpy_reference(runs):
    """The np-mode loss is softmax cross-entropy of the outputs (independent of either mode)."""
    features, labels = _synthetic(BATCH * STEPS)
    (_, records, _, _, _), _ = runs
    y_hat, l = records[0][0].astype(onp.float64), records[0][1]
    logp = y_hat - y_hat.max(axis=1, keepdims=True)
    logp -= onp.log(onp.exp(logp).sum(axis=1, keepdims=True))
    want = -logp[onp.arange(BATCH), labels[:BATCH].astype(int)]
    onp.testing.assert_allclose(l, want, rtol=1e-5, atol=1e-6)


def test_np_mode_export_loads_back(runs, tmp_path):
    np_run, _ = runs
    net = np_run[4]
    features, _ = _synthetic(BATCH)
    npx.set_np()
    try:
        X = np.array(features)
        want = net(X).asnumpy()
        sym_file, params_file = net.export(str(tmp_path / "lenet"))
        text = open(sym_file).read()
        assert '"is_np_shape"' in text
        back = gluon.SymbolBlock.imports(sym_file, ["data"], params_file)
        got = back(X)
        assert isinstance(got, np.ndarray)
        onp.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6, atol=1e-6)
    finally:
        npx.reset_np()
