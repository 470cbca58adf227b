"""Row-sparse Parameters (MXNet 1.x): storage types of value and gradient, `row_sparse_data`
through the Trainer's KVStore, and updates of row_sparse weights."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit import gluon, nd


def test_sparse_parameter_storage_and_gradient_storage():
    p = gluon.Parameter("weight", shape=(6, 3), stype="row_sparse", grad_stype="row_sparse")
    p.initialize(init="xavier", ctx=[mx.cpu(0), mx.cpu(1)])
    assert [d.stype for d in p._data] == ["row_sparse", "row_sparse"]
    assert [g.stype for g in p.list_grad()] == ["row_sparse", "row_sparse"]
    q = gluon.Parameter("w2", shape=(6, 3), grad_stype="row_sparse")
    q.initialize(ctx=mx.cpu(0))
    assert q.data().stype == "default" and q.grad().stype == "row_sparse"


def test_row_sparse_data_needs_a_trainer_and_a_row_sparse_parameter():
    p = gluon.Parameter("weight", shape=(4, 2), stype="row_sparse")
    p.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    rows = nd.arange(0, 4, ctx=mx.cpu(1))
    with pytest.raises(RuntimeError, match="no Trainer"):
        p.row_sparse_data(rows)
    gluon.Trainer([p], "sgd")
    with pytest.raises(TypeError, match="row_id must have NDArray type"):
        p.row_sparse_data([0, 1])
    dense = gluon.Parameter("dense", shape=(4, 2))
    dense.initialize()
    with pytest.raises(RuntimeError, match="Please use data"):
        dense.row_sparse_data(rows)


def test_row_sparse_data_pulls_the_requested_rows_on_the_row_ids_context():
    p = gluon.Parameter("x", shape=(4, 2), stype="row_sparse")
    p.initialize(init="xavier", ctx=[mx.cpu(1), mx.cpu(2)])
    gluon.Trainer([p], "sgd")
    full = p._data[0].asnumpy()
    got = p.row_sparse_data(nd.array([0, 2], ctx=mx.cpu(2)))
    assert got.context == mx.cpu(2) and got.stype == "row_sparse" and got.shape == (4, 2)
    expect = np.zeros_like(full)
    expect[[0, 2]] = full[[0, 2]]
    np.testing.assert_allclose(got.asnumpy(), expect)
    assert len(p.list_row_sparse_data(nd.arange(0, 4))) == 2


def test_trainer_updates_row_sparse_weight_through_the_kvstore():
    params = gluon.ParameterDict()
    x = params.get("x", shape=(10, 1), stype="row_sparse", grad_stype="row_sparse")
    params.initialize(ctx=[mx.cpu(0), mx.cpu(1)], init="zeros")
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": 0.1}, kvstore="device")
    rows = nd.arange(0, 10)
    with mx.autograd.record():
        for w in x.list_row_sparse_data(rows):
            (w + 1).backward()
    trainer.step(1)
    np.testing.assert_allclose(x.row_sparse_data(rows).asnumpy(), np.full((10, 1), -0.2, np.float32))


def test_sparse_retain_keeps_exactly_the_requested_rows():
    dense = np.arange(8, dtype=np.float32).reshape(4, 2)
    r = nd.array(dense).tostype("row_sparse")
    out = nd.sparse.retain(r, nd.array([3, 1]))
    np.testing.assert_array_equal(out.indices.asnumpy(), [1, 3])
    np.testing.assert_array_equal(out.asnumpy(), dense * np.array([[0], [1], [0], [1]], np.float32))
    with pytest.raises(mx.base.MXNetError, match="retain: data must be a RowSparseNDArray"):
        nd.sparse.retain(nd.array(dense), nd.array([0]))
