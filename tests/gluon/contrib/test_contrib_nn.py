"""gluon.contrib.nn against MXNet 1.9.1's documented behaviour, numbers checked with numpy."""
import numpy as np
import pytest

import symjit as mx
from symjit import autograd, gluon, nd
from symjit.base import MXNetError
from symjit.gluon.contrib import nn as cnn
from symjit.gluon.contrib.nn import basic_layers


def _pixel_shuffle_ref(x, fs):
    n, c = x.shape[0], x.shape[1] // int(np.prod(fs))
    spatial = x.shape[2:]
    y = x.reshape((n, c) + tuple(fs) + spatial)
    k = len(fs)
    axes = (0, 1) + tuple(a for i in range(k) for a in (2 + k + i, 2 + i))
    return y.transpose(axes).reshape((n, c) + tuple(d * f for d, f in zip(spatial, fs)))


@pytest.mark.parametrize("cls, factor, shape", [
    (cnn.PixelShuffle1D, 2, (2, 6, 5)),
    (cnn.PixelShuffle2D, (2, 3), (1, 12, 3, 4)),
    (cnn.PixelShuffle2D, 2, (2, 8, 2, 3)),
    (cnn.PixelShuffle3D, (1, 2, 2), (1, 8, 2, 3, 2)),
])
@pytest.mark.parametrize("hybridize", [False, True])
def test_pixel_shuffle(cls, factor, shape, hybridize):
    x = np.random.RandomState(0).rand(*shape).astype(np.float32)
    layer = cls(factor)
    if hybridize:
        layer.hybridize()
    fs = (factor,) * cls._ndim if np.ndim(factor) == 0 else factor
    np.testing.assert_array_equal(layer(nd.array(x)).asnumpy(), _pixel_shuffle_ref(x, fs))


def test_pixel_shuffle_documented_example():
    # MXNet's PixelShuffle1D docstring: (1, 6, 2) with factor 3 -> (1, 2, 6), channel blocks interleaved
    x = np.arange(12, dtype=np.float32).reshape(1, 6, 2)
    y = cnn.PixelShuffle1D(3)(nd.array(x)).asnumpy()
    assert y.shape == (1, 2, 6)
    np.testing.assert_array_equal(y[0, 0], [0, 2, 4, 1, 3, 5])
    assert repr(cnn.PixelShuffle2D((2, 3))) == "PixelShuffle2D((2, 3))" and repr(cnn.PixelShuffle1D(2)) == "PixelShuffle1D(2)"
    with pytest.raises(MXNetError, match="PixelShuffle2D"):
        cnn.PixelShuffle2D((2, 2, 2))


@pytest.mark.parametrize("hybrid", [False, True])
def test_concurrent_names_and_values(hybrid):
    cls = cnn.HybridConcurrent if hybrid else cnn.Concurrent
    net = cls(axis=1)
    with net.name_scope():
        net.add(gluon.nn.Dense(3, in_units=4), gluon.nn.Dense(2, in_units=4), cnn.Identity())
    net.initialize()
    assert net.prefix == ("hybridconcurrent0_" if hybrid else "concurrent0_")
    assert sorted(net.collect_params()) == sorted(f"{net.prefix}dense{i}_{p}" for i in (0, 1) for p in ("weight", "bias"))
    x = np.random.RandomState(1).rand(5, 4).astype(np.float32)
    d0, d1 = net[0], net[1]
    want = np.concatenate([x @ d0.weight.data().asnumpy().T + d0.bias.data().asnumpy(),
                           x @ d1.weight.data().asnumpy().T + d1.bias.data().asnumpy(), x], axis=1)
    np.testing.assert_allclose(net(nd.array(x)).asnumpy(), want, rtol=1e-5)
    if hybrid:
        net.hybridize()
        np.testing.assert_allclose(net(nd.array(x)).asnumpy(), want, rtol=1e-5)


def test_sparse_embedding_forward_and_row_sparse_update():
    emb = cnn.SparseEmbedding(10, 3, weight_initializer=mx.init.Uniform(1.0))
    emb.initialize()
    assert emb.weight.stype == "row_sparse" and emb.weight._grad_stype == "row_sparse"
    trainer = gluon.Trainer(emb.collect_params(), "sgd", {"learning_rate": 1.0})
    before = emb.weight.row_sparse_data(nd.arange(0, 10)).asnumpy()
    idx = nd.array([[1, 3], [3, 7]])
    with autograd.record():
        y = emb(idx)
        loss = y.sum()
    assert y.shape == (2, 2, 3)
    np.testing.assert_allclose(y.asnumpy(), before[[[1, 3], [3, 7]]], rtol=1e-6)
    loss.backward()
    trainer.step(1)
    after = emb.weight.row_sparse_data(nd.arange(0, 10)).asnumpy()
    counts = np.bincount([1, 3, 3, 7], minlength=10)[:, None]
    np.testing.assert_allclose(after, before - counts, rtol=1e-5, atol=1e-6)   # untouched rows unchanged
    assert repr(emb) == "SparseEmbedding(10 -> 3, float32)"


def test_sync_batchnorm_one_process_is_batchnorm_train_and_inference():
    x = nd.array(np.random.RandomState(2).randn(4, 3, 5, 5).astype(np.float32))
    a, b = gluon.nn.BatchNorm(in_channels=3), cnn.SyncBatchNorm(in_channels=3, num_devices=1)
    a.initialize()
    b.initialize()
    for hybrid in (False, True):
        if hybrid:
            a.hybridize()
            b.hybridize()
        with autograd.record():
            ya, yb = a(x), b(x)
        np.testing.assert_allclose(yb.asnumpy(), ya.asnumpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b.running_mean.data().asnumpy(), a.running_mean.data().asnumpy(), rtol=1e-5)
        np.testing.assert_allclose(b(x).asnumpy(), a(x).asnumpy(), rtol=1e-5, atol=1e-6)
    assert "ndev=1" in repr(b)
    with pytest.warns(UserWarning, match="SyncBatchNorm"):
        assert cnn.SyncBatchNorm().num_devices == 1          # no GPUs: one device, as MXNet
    two = cnn.SyncBatchNorm(in_channels=3, num_devices=2)
    two.initialize()
    with autograd.record(), pytest.warns(UserWarning, match="own statistics"):
        two(x)


class _TwinWorkers:
    """A process group of two workers that hold the same data: every sum doubles."""
    size = 2

    def allreduce(self, sends, recvs, op="sum", what=""):
        for s, r in zip(sends, recvs):
            r[...] = s * 2


def test_sync_batchnorm_combines_statistics_and_gradients_over_the_group(monkeypatch):
    """Two workers holding x each = BatchNorm over the batch [x; x]: same outputs, and each
    worker's gradients are that batch's gradients for its half (the backward sums over both)."""
    rs = np.random.RandomState(3)
    x = rs.randn(4, 3, 2, 2).astype(np.float32)
    w = rs.randn(4, 3, 2, 2).astype(np.float32)
    ref = gluon.nn.BatchNorm(in_channels=3, momentum=0.5)
    ref.initialize()
    ref.gamma.set_data(nd.array([0.5, 1.5, 2.0]))
    xx = nd.array(np.concatenate([x, x]))
    xx.attach_grad()
    with autograd.record():
        yref = ref(xx)
        loss = (yref * nd.array(np.concatenate([w, w]))).sum()
    loss.backward()

    monkeypatch.setattr(basic_layers, "_group", lambda: _TwinWorkers())
    sbn = cnn.SyncBatchNorm(in_channels=3, num_devices=1, momentum=0.5)
    sbn.initialize()
    sbn.gamma.set_data(nd.array([0.5, 1.5, 2.0]))
    xs = nd.array(x)
    xs.attach_grad()
    with autograd.record():
        y = sbn(xs)
        local = (y * nd.array(w)).sum()
    local.backward()
    np.testing.assert_allclose(y.asnumpy(), yref.asnumpy()[:4], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(xs.grad.asnumpy(), xx.grad.asnumpy()[:4], rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(2 * sbn.gamma.grad().asnumpy(), ref.gamma.grad().asnumpy(), rtol=1e-4)
    np.testing.assert_allclose(sbn.running_mean.data().asnumpy(), ref.running_mean.data().asnumpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sbn.running_var.data().asnumpy(), ref.running_var.data().asnumpy(), rtol=1e-4)


@pytest.mark.mpi
def test_sync_batchnorm_over_mpi_workers_matches_batchnorm_of_the_whole_batch():
    """Under `symjit launch -n 2 -- pytest -m mpi`: each worker holds its own part of the batch."""
    from symjit.kvstore import comm
    g = comm.get()
    if g.size < 2:
        pytest.skip("needs 2 MPI workers: run under `python -m symjit.launch -n 2 -- python -m pytest -m mpi`")
    rs = np.random.RandomState(7)
    parts = [rs.randn(3, 2, 4).astype(np.float32) for _ in range(g.size)]
    weights = [rs.randn(3, 2, 4).astype(np.float32) for _ in range(g.size)]
    ref = gluon.nn.BatchNorm(in_channels=2)
    ref.initialize()
    whole = nd.array(np.concatenate(parts))
    whole.attach_grad()
    with autograd.record():
        yref = ref(whole)
        (yref * nd.array(np.concatenate(weights))).sum().backward()
    sbn = cnn.SyncBatchNorm(in_channels=2, num_devices=1)
    sbn.initialize()
    mine = nd.array(parts[g.rank])
    mine.attach_grad()
    with autograd.record():
        y = sbn(mine)
        (y * nd.array(weights[g.rank])).sum().backward()
    rows = slice(3 * g.rank, 3 * g.rank + 3)
    np.testing.assert_allclose(y.asnumpy(), yref.asnumpy()[rows], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mine.grad.asnumpy(), whole.grad.asnumpy()[rows], rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(sbn.running_var.data().asnumpy(), ref.running_var.data().asnumpy(), rtol=1e-4)
    g.barrier("end of test")
