"""Tests for sparse storage (symjit/ndarray/sparse.py): CSRNDArray / RowSparseNDArray
construction, MXNet's repr, dense round trips (Hypothesis), stored structure against a
hand-written compression, conversions and validation errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import symjit as mx
from symjit.base import MXNetError

nd = mx.nd


def csr_by_hand(dense: np.ndarray):
    """(data, indices, indptr) of a 2-D array, row by row."""
    data, indices, indptr = [], [], [0]
    for row in dense:
        for j, v in enumerate(row):
            if v != 0:
                data.append(v)
                indices.append(j)
        indptr.append(len(data))
    return np.array(data, dense.dtype), np.array(indices), np.array(indptr)


def test_zeros_csr_matches_mxnet_repr():
    x = nd.zeros((1, 2), mx.cpu(), stype="csr")
    assert isinstance(x, nd.sparse.CSRNDArray)
    assert repr(x) == "\n<CSRNDArray 1x2 @cpu(0)>"
    assert x.stype == "csr" and x.shape == (1, 2) and x.dtype == np.float32
    assert x.indptr.asnumpy().tolist() == [0, 0] and x.data.shape == (0,)


def test_zeros_row_sparse_float16():
    x = nd.zeros((1, 2), mx.cpu(), "float16", stype="row_sparse")
    assert isinstance(x, nd.sparse.RowSparseNDArray) and x.stype == "row_sparse"
    a = x.asnumpy()
    assert a.dtype == np.float16 and a.tolist() == [[0.0, 0.0]]
    assert repr(x) == "\n<RowSparseNDArray 1x2 @cpu(0)>"
    assert x.tostype("default").dtype == np.float16
    assert nd.sparse.zeros("row_sparse", (3, 2, 2)).asnumpy().shape == (3, 2, 2)


def test_csr_structure_matches_hand_compression():
    dense = np.array([[0, 1.5, 0, 2], [0, 0, 0, 0], [3, 0, 0, 4]], np.float32)
    x = nd.array(dense).tostype("csr")
    data, indices, indptr = csr_by_hand(dense)
    np.testing.assert_array_equal(x.data.asnumpy(), data)
    np.testing.assert_array_equal(x.indices.asnumpy(), indices)
    np.testing.assert_array_equal(x.indptr.asnumpy(), indptr)
    assert x.indices.dtype == np.int64
    back = x.tostype("default")
    assert isinstance(back, nd.NDArray) and back.stype == "default"
    np.testing.assert_array_equal(back.asnumpy(), dense)


def test_row_sparse_structure():
    dense = np.zeros((5, 2, 2), np.float32)
    dense[1, 0, 1] = 3
    dense[4] = 7
    x = nd.array(dense).tostype("row_sparse")
    assert x.indices.asnumpy().tolist() == [1, 4]
    np.testing.assert_array_equal(x.data.asnumpy(), dense[[1, 4]])
    np.testing.assert_array_equal(x.asnumpy(), dense)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=2, max_side=6),
                  elements=st.sampled_from([0.0, 0.0, 1.0, -2.5, 3.25])))
def test_csr_round_trip(dense):
    x = nd.array(dense)
    csr = x.tostype("csr")
    np.testing.assert_array_equal(csr.asnumpy(), dense)
    rebuilt = nd.sparse.csr_matrix((csr.data, csr.indices, csr.indptr), shape=dense.shape)
    np.testing.assert_array_equal(rebuilt.asnumpy(), dense)
    assert csr.data.shape[0] == int(np.count_nonzero(dense))
    np.testing.assert_array_equal(csr.tostype("row_sparse").asnumpy(), dense)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                  elements=st.sampled_from([0.0, 0.0, 0.0, 1.0, -4.0])))
def test_row_sparse_round_trip(dense):
    rsp = nd.array(dense, dtype="float64").tostype("row_sparse")
    assert rsp.dtype == np.float64
    np.testing.assert_array_equal(rsp.asnumpy(), dense)
    nonzero_rows = [i for i in range(dense.shape[0]) if np.any(dense[i] != 0)]
    assert rsp.indices.asnumpy().tolist() == nonzero_rows
    again = nd.sparse.row_sparse_array((rsp.data, rsp.indices), shape=dense.shape)
    np.testing.assert_array_equal(again.asnumpy(), dense)


def test_constructors_and_copies():
    c = nd.sparse.csr_matrix(([1.0, 2.0], [1, 0], [0, 1, 2]), shape=(2, 3))
    np.testing.assert_array_equal(c.asnumpy(), [[0, 1, 0], [2, 0, 0]])
    assert c.dtype == np.float32
    assert nd.sparse.csr_matrix((2, 3)).asnumpy().tolist() == [[0, 0, 0], [0, 0, 0]]
    assert nd.sparse.csr_matrix([[0, 5]]).indices.asnumpy().tolist() == [1]
    r = nd.sparse.row_sparse_array(([[1.0, 2.0]], [2]), shape=(4, 2))
    np.testing.assert_array_equal(r.asnumpy(), [[0, 0], [0, 0], [1, 2], [0, 0]])
    cp = nd.sparse.array(r)
    assert isinstance(cp, nd.sparse.RowSparseNDArray) and cp is not r
    h = r.astype("float16")
    assert h.dtype == np.float16 and r.dtype == np.float32
    dense = nd.zeros((4, 2))
    r.copyto(dense)
    np.testing.assert_array_equal(dense.asnumpy(), r.asnumpy())
    assert r.tostype("row_sparse") is r
    # the accessors hand out copies: the container cannot be changed through them
    d = r.data
    d[:] = 9
    assert r.asnumpy().max() == 2


def test_validation_errors():
    with pytest.raises(MXNetError, match="csr_matrix: indptr"):
        nd.sparse.csr_matrix(([1.0], [0], [0, 2]), shape=(1, 2))
    with pytest.raises(MXNetError, match="csr_matrix: column indices"):
        nd.sparse.csr_matrix(([1.0], [5], [0, 1]), shape=(1, 2))
    with pytest.raises(MXNetError, match="strictly increasing"):
        nd.sparse.csr_matrix(([1.0, 2.0], [1, 0], [0, 2]), shape=(1, 2))
    with pytest.raises(MXNetError, match="2-D"):
        nd.zeros((2, 2, 2), stype="csr")
    with pytest.raises(MXNetError, match="row_sparse_array: data"):
        nd.sparse.row_sparse_array(([1.0, 2.0], [0]), shape=(3,))
    with pytest.raises(MXNetError, match="row indices"):
        nd.sparse.row_sparse_array(([[1.0]], [3]), shape=(3, 1))
    with pytest.raises(MXNetError, match="unknown storage type"):
        nd.zeros((2, 2), stype="coo")
    with pytest.raises(MXNetError, match="cast_storage"):
        nd.ones((2, 2)).tostype("dense")
    with pytest.raises(ValueError):
        bool(nd.zeros((1, 1), stype="csr"))


# ---- sparse arrays under autograd (MXNet: CSRNDArray / RowSparseNDArray are NDArrays) ----------

@pytest.mark.parametrize("stype", ["default", "row_sparse", "csr"])
def test_attach_grad_on_sparse_arrays_records_and_backpropagates(stype):
    x = nd.zeros((3, 4)).tostype(stype)
    assert isinstance(x, nd.NDArray) and x.grad is None
    x.attach_grad()
    assert x.grad.stype == stype
    with mx.autograd.record():
        y = x * 2
    y.backward(out_grad=nd.ones_like(y).tostype(stype))
    np.testing.assert_array_equal(x.grad.asnumpy(), np.full((3, 4), 2, np.float32))
    assert x.grad.stype == stype


@pytest.mark.parametrize("array_stype", ["default", "row_sparse", "csr"])
@pytest.mark.parametrize("grad_stype", [None, "default", "row_sparse", "csr"])
def test_attach_grad_stype_and_detach_keep_storage(array_stype, grad_stype):
    x = nd.zeros((1, 1), stype=array_stype)
    x.attach_grad(stype=grad_stype)
    assert x.grad.stype == (grad_stype or array_stype)
    assert x.detach().stype == array_stype


def test_sparse_times_sparse_and_scalar_ops():
    dense = np.array([[0, 1, 0], [2, 0, 3]], np.float32)
    a = nd.array(dense).tostype("row_sparse")
    np.testing.assert_array_equal((a * a).asnumpy(), dense * dense)
    np.testing.assert_array_equal((a / 2).asnumpy(), dense / 2)
    assert (a * 3).stype == "row_sparse" and (-a).stype == "row_sparse"


def test_dot_gradient_into_row_sparse_gradient():
    lhs_np = np.array([[0, 1, 0, 2], [3, 0, 0, 0]], np.float32)
    lhs = nd.array(lhs_np).tostype("csr")
    for w in (nd.ones((4, 3)).tostype("row_sparse"), nd.ones((4, 3))):
        w.attach_grad(stype="row_sparse")
        with mx.autograd.record():
            y = nd.dot(lhs, w)
        y.backward()
        assert w.grad.stype == "row_sparse"
        np.testing.assert_allclose(w.grad.asnumpy(), lhs_np.T @ np.ones((2, 3), np.float32))
        # rows of the gradient that are zero are not stored
        np.testing.assert_array_equal(w.grad.indices.asnumpy(), [0, 1, 3])


def test_stored_positions_survive_zero_values():
    r = nd.sparse.row_sparse_array((np.zeros((1, 2), np.float32), [1]), shape=(3, 2))
    np.testing.assert_array_equal(r.indices.asnumpy(), [1])
    r2 = r.copy()
    np.testing.assert_array_equal(r2.indices.asnumpy(), [1])


def test_csr_from_scipy_and_row_slices_stay_csr():
    sps = pytest.importorskip("scipy.sparse")
    src = sps.coo_matrix(([2.0, 5.0], ([3, 0], [7, 1])), shape=(4, 9)).tocsr()
    c = nd.sparse.csr_matrix(src, ctx=mx.cpu(0))
    assert isinstance(c, nd.sparse.CSRNDArray) and c.shape == (4, 9)
    np.testing.assert_array_equal(c.asnumpy(), src.toarray())
    part = c[2:4]
    assert isinstance(part, nd.sparse.CSRNDArray) and part.shape == (2, 9)
    np.testing.assert_array_equal(part.indices.asnumpy(), [7])
    np.testing.assert_array_equal(part.indptr.asnumpy(), [0, 0, 1])
    parts = mx.gluon.utils.split_and_load(c, [mx.cpu(0), mx.cpu(0)])
    assert all(isinstance(p, nd.sparse.CSRNDArray) for p in parts)


def test_sparse_namespace_operators_keep_storage_where_zero_preserving():
    """`mx.nd.sparse.<op>` runs every operator; zero-preserving ones keep a sparse first input's
    storage (as MXNet's sparse kernels), others fall back to dense results."""
    dense = np.array([[0.0, 1.5, 0.0], [-2.0, 0.0, 3.0]], np.float32)
    csr = mx.nd.array(dense).tostype("csr")
    sq = mx.nd.sparse.square(csr)
    assert sq.stype == "csr"
    np.testing.assert_array_equal(sq.asnumpy(), dense ** 2)
    np.testing.assert_array_equal(sq.indices.asnumpy(), [1, 0, 2])
    prod = mx.nd.sparse.elemwise_mul(csr, mx.nd.array(dense).tostype("csr"))
    assert prod.stype == "csr"
    np.testing.assert_array_equal(prod.asnumpy(), dense * dense)
    ex = mx.nd.sparse.exp(csr)
    assert ex.stype == "default"
    np.testing.assert_allclose(ex.asnumpy(), np.exp(dense), rtol=1e-6)
    rsp = mx.nd.sparse.abs(mx.nd.array(dense).tostype("row_sparse"))
    assert rsp.stype == "row_sparse"
    np.testing.assert_array_equal(rsp.asnumpy(), np.abs(dense))
    with pytest.raises(AttributeError, match="no_such_op"):
        mx.nd.sparse.no_such_op
