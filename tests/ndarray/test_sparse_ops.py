"""Operators on sparse storage (symjit/ndarray/sparse_ops.py, runtime/nn/sparse.c): values
against scipy.sparse / numpy references, output storage types as MXNet 1.9.1 gives them, the
compressed mode kept by sparse kernels, gradients through sparse dot, lazy optimizer updates."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import symjit as mx
from symjit.base import MXNetError

sps = pytest.importorskip("scipy.sparse")
nd = mx.nd


def random_csr(rows, cols, density, dtype=np.float32, seed=0):
    m = sps.random(rows, cols, density=density, format="csr", dtype=dtype, random_state=seed)
    m.sort_indices()
    return m, nd.sparse.csr_matrix(m)


def random_rsp(rows, cols, present, seed=0):
    rng = np.random.default_rng(seed)
    dense = np.zeros((rows, cols), np.float32)
    dense[present] = rng.standard_normal((len(present), cols)).astype(np.float32)
    return dense, nd.array(dense).tostype("row_sparse")


# ---- dot ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_csr_dot_dense_matches_scipy_and_stays_compressed(dtype):
    a, csr = random_csr(40, 30, 0.1, dtype)
    b = np.random.default_rng(1).standard_normal((30, 7)).astype(dtype)
    out = nd.sparse.dot(csr, nd.array(b, dtype=dtype))
    assert out.stype == "default" and out.dtype == dtype
    np.testing.assert_allclose(out.asnumpy(), a @ b, rtol=1e-5, atol=1e-5)
    assert csr.is_compressed   # the kernel read the compressed arrays, never a dense copy
    same = nd.dot(csr, nd.array(b, dtype=dtype))   # nd.dot dispatches the same way
    np.testing.assert_array_equal(same.asnumpy(), out.asnumpy())


def test_csr_transposed_dot_dense_is_row_sparse():
    a, csr = random_csr(50, 40, 0.03)
    b = np.random.default_rng(2).standard_normal((50, 5)).astype(np.float32)
    out = nd.sparse.dot(csr, nd.array(b), transpose_a=True)
    assert out.stype == "row_sparse"
    np.testing.assert_allclose(out.asnumpy(), a.T @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out.indices.asnumpy(), np.unique(a.indices))   # the nonzero columns
    dense_out = nd.sparse.dot(csr, nd.array(b), transpose_a=True, forward_stype="default")
    assert dense_out.stype == "default"
    np.testing.assert_allclose(dense_out.asnumpy(), a.T @ b, rtol=1e-5, atol=1e-5)


def test_dense_dot_csr_is_csr_also_with_transpose_b():
    a, csr = random_csr(30, 20, 0.1)
    d = np.random.default_rng(3).standard_normal((6, 30)).astype(np.float32)
    out = nd.dot(nd.array(d), csr)
    assert out.stype == "csr"
    np.testing.assert_allclose(out.asnumpy(), d @ a.toarray(), rtol=1e-5, atol=1e-5)
    # MXNet's structure: every row of the result on the columns of the csr operand holding entries
    columns = np.unique(a.indices)
    np.testing.assert_array_equal(out.indices.asnumpy(), np.tile(columns, 6))
    dense_out = nd.dot(nd.array(d), csr, forward_stype="default")
    assert dense_out.stype == "default"
    np.testing.assert_allclose(dense_out.asnumpy(), d @ a.toarray(), rtol=1e-5, atol=1e-5)
    dt = np.random.default_rng(5).standard_normal((30, 6)).astype(np.float32)
    np.testing.assert_allclose(nd.dot(nd.array(dt), csr, transpose_a=True).asnumpy(), dt.T @ a.toarray(),
                               rtol=1e-5, atol=1e-5)
    e = np.random.default_rng(4).standard_normal((6, 20)).astype(np.float32)
    out_t = nd.dot(nd.array(e), csr, transpose_b=True)
    assert out_t.stype == "csr"   # MXNet 1.9.1: dense . csr^T is csr too (its dense product cast)
    np.testing.assert_allclose(out_t.asnumpy(), e @ a.toarray().T, rtol=1e-5, atol=1e-5)


def test_csr_dot_transposed_dense_and_row_sparse_lhs_and_no_vector():
    a, csr = random_csr(12, 9, 0.3)
    rng = np.random.default_rng(5)
    bt = rng.standard_normal((4, 9)).astype(np.float32)
    np.testing.assert_allclose(nd.dot(csr, nd.array(bt), transpose_b=True).asnumpy(), a @ bt.T, rtol=1e-5,
                               atol=1e-5)
    v = rng.standard_normal(9).astype(np.float32)
    with pytest.raises(MXNetError, match="2-dimensional rhs"):   # MXNet 1.9.1 refuses a vector rhs
        nd.dot(csr, nd.array(v))
    dense, rsp = random_rsp(8, 5, [1, 6])
    w = rng.standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(nd.dot(rsp, nd.array(w)).asnumpy(), dense @ w, rtol=1e-5, atol=1e-5)
    w2 = rng.standard_normal((8, 3)).astype(np.float32)
    np.testing.assert_allclose(nd.dot(rsp, nd.array(w2), transpose_a=True).asnumpy(), dense.T @ w2,
                               rtol=1e-5, atol=1e-5)


def test_dot_shape_and_dtype_errors():
    _, csr = random_csr(4, 3, 0.5)
    with pytest.raises(MXNetError, match="dot: shape mismatch"):
        nd.sparse.dot(csr, nd.ones((4, 2)))
    with pytest.raises(MXNetError, match="dot: dtype mismatch"):
        nd.sparse.dot(csr, nd.ones((3, 2), dtype="float64"))
    with pytest.raises(MXNetError, match="dot: only supports float"):
        nd.sparse.dot(csr.astype("int32"), nd.ones((3, 2), dtype="int32"))


def test_empty_rows_and_float16_take_the_numpy_path():
    dense = np.zeros((5, 4), np.float16)
    dense[3, 1] = 2
    csr = nd.array(dense, dtype="float16").tostype("csr")
    b = np.arange(8, dtype=np.float16).reshape(4, 2)
    np.testing.assert_array_equal(nd.dot(csr, nd.array(b, dtype="float16")).asnumpy(), dense @ b)
    np.testing.assert_array_equal(nd.dot(csr, nd.array(np.ones((5, 2), np.float16), dtype="float16"),
                                         transpose_a=True).asnumpy(), dense.T @ np.ones((5, 2), np.float16))


def test_gradient_of_sparse_dot_wrt_the_dense_operand():
    a, csr = random_csr(20, 15, 0.1)
    w = nd.array(np.random.default_rng(6).standard_normal((15, 4)).astype(np.float32))
    w.attach_grad()
    head = np.random.default_rng(7).standard_normal((20, 4)).astype(np.float32)
    with mx.autograd.record():
        y = nd.sparse.dot(csr, w)
    y.backward(nd.array(head))
    assert w.grad.stype == "default"
    np.testing.assert_allclose(w.grad.asnumpy(), a.T @ head, rtol=1e-5, atol=1e-5)
    # finite differences of sum(head * dot(csr, w)) in one coordinate
    base = w.asnumpy()
    eps = 1e-2
    for (i, j) in [(0, 0), (a.indices[0], 2)]:
        plus, minus = base.copy(), base.copy()
        plus[i, j] += eps
        minus[i, j] -= eps
        f = [float((head * (a @ p)).sum()) for p in (plus, minus)]
        assert abs((f[0] - f[1]) / (2 * eps) - w.grad.asnumpy()[i, j]) < 1e-2


# ---- elementwise storage rules -------------------------------------------------------------------

@pytest.mark.parametrize("op,ref", [("abs", np.abs), ("sqrt", lambda x: np.sqrt(np.abs(x))),
                                    ("square", np.square), ("sign", np.sign), ("negative", np.negative),
                                    ("tanh", np.tanh)])
def test_zero_preserving_unary_ops_keep_the_storage(op, ref):
    a, csr = random_csr(10, 8, 0.3)
    x = nd.sparse.abs(csr) if op == "sqrt" else csr
    out = getattr(nd, op)(x)
    assert out.stype == "csr" and out.is_compressed
    np.testing.assert_allclose(out.asnumpy(), ref(a.toarray()), rtol=1e-6)
    dense, rsp = random_rsp(6, 3, [0, 4])
    out = getattr(nd, op)(nd.abs(rsp) if op == "sqrt" else rsp)
    assert out.stype == "row_sparse"
    np.testing.assert_allclose(out.asnumpy(), ref(dense), rtol=1e-6)


def test_other_unary_ops_and_scalar_addition_give_dense():
    a, csr = random_csr(5, 4, 0.4)
    assert nd.exp(csr).stype == "default"
    np.testing.assert_allclose(nd.exp(csr).asnumpy(), np.exp(a.toarray()), rtol=1e-6)
    assert (csr + 1).stype == "default"
    assert (csr * 3).stype == "csr" and (csr / 2).stype == "csr"
    np.testing.assert_allclose((csr * 3).asnumpy(), a.toarray() * 3, rtol=1e-6)
    assert nd.clip(csr, -1, 1).stype == "csr"
    with pytest.raises(MXNetError, match="clip"):   # MXNet refuses a sparse clip that moves zero
        nd.clip(csr, 0.5, 1)


def test_elemwise_binary_ops_on_csr_and_row_sparse():
    a, x = random_csr(9, 7, 0.3, seed=1)
    b, y = random_csr(9, 7, 0.3, seed=2)
    for op, ref in (("elemwise_add", a + b), ("elemwise_sub", a - b), ("elemwise_mul", a.multiply(b))):
        out = getattr(nd, op)(x, y)
        assert out.stype == "csr", op
        np.testing.assert_allclose(out.asnumpy(), ref.toarray(), rtol=1e-6)
    # stored positions: the union for + (and for * of row_sparse, as MXNet), the intersection for csr *
    assert nd.elemwise_add(x, y).data.shape[0] == (abs(a) + abs(b)).nnz
    dp, p = random_rsp(8, 3, [0, 2, 5], seed=3)
    dq, q = random_rsp(8, 3, [2, 7], seed=4)
    for op, ref in (("elemwise_add", dp + dq), ("elemwise_sub", dp - dq), ("elemwise_mul", dp * dq)):
        out = getattr(nd, op)(p, q)
        assert out.stype == "row_sparse", op
        np.testing.assert_allclose(out.asnumpy(), ref, rtol=1e-6)
    assert nd.elemwise_add(p, q).indices.asnumpy().tolist() == [0, 2, 5, 7]
    assert nd.elemwise_mul(p, q).indices.asnumpy().tolist() == [0, 2, 5, 7]
    assert nd.sparse.add(p, q).stype == "row_sparse" and nd.sparse.multiply(x, y).stype == "csr"


def test_sparse_with_dense_operands():
    a, x = random_csr(6, 5, 0.4)
    dense = np.random.default_rng(8).standard_normal((6, 5)).astype(np.float32)
    out = nd.elemwise_add(x, nd.array(dense))
    assert out.stype == "default"
    np.testing.assert_allclose(out.asnumpy(), a.toarray() + dense, rtol=1e-6)
    np.testing.assert_allclose(nd.elemwise_sub(nd.array(dense), x).asnumpy(), dense - a.toarray(), rtol=1e-6)
    prod = nd.elemwise_mul(x, nd.array(dense))
    assert prod.stype == "csr"
    np.testing.assert_allclose(prod.asnumpy(), a.toarray() * dense, rtol=1e-6)
    row = np.arange(1, 6, dtype=np.float32)[None, :]
    out = nd.broadcast_mul(x, nd.array(row))
    assert out.stype == "csr"
    np.testing.assert_allclose(out.asnumpy(), a.toarray() * row, rtol=1e-6)
    col = np.arange(1, 7, dtype=np.float32)[:, None]
    out = nd.broadcast_div(x, nd.array(col))
    assert out.stype == "csr"
    np.testing.assert_allclose(out.asnumpy(), a.toarray() / col, rtol=1e-6)
    assert nd.broadcast_add(x, nd.array(row)).stype == "default"
    dp, p = random_rsp(6, 5, [1, 3])
    out = nd.elemwise_mul(nd.array(dense), p)
    assert out.stype == "row_sparse"
    np.testing.assert_allclose(out.asnumpy(), dense * dp, rtol=1e-6)


# ---- cast_storage, retain, slice, sum / mean, where ---------------------------------------------------

def test_cast_storage_all_pairs():
    a, csr = random_csr(7, 6, 0.3)
    dense = a.toarray()
    for src in (nd.array(dense), csr, nd.array(dense).tostype("row_sparse")):
        for stype in ("default", "csr", "row_sparse"):
            out = nd.sparse.cast_storage(src, stype)
            assert out.stype == stype
            np.testing.assert_array_equal(out.asnumpy(), dense)


def test_retain_works_on_the_compressed_rows():
    dense, rsp = random_rsp(10, 3, [1, 4, 8])
    out = nd.sparse.retain(rsp, nd.array([8, 0, 4]))
    assert out.stype == "row_sparse" and out.is_compressed
    expect = np.zeros_like(dense)
    expect[[4, 8]] = dense[[4, 8]]
    np.testing.assert_array_equal(out.asnumpy(), expect)


def test_slice_of_csr_stays_csr():
    a, csr = random_csr(10, 8, 0.4)
    out = nd.slice(csr, begin=(2, 1), end=(7, 6))
    assert out.stype == "csr" and out.shape == (5, 5)
    np.testing.assert_array_equal(out.asnumpy(), a.toarray()[2:7, 1:6])
    ref = a[2:7, 1:6].tocsr()
    ref.sort_indices()
    np.testing.assert_array_equal(out.indptr.asnumpy(), ref.indptr)
    rows = nd.slice(csr, begin=(3,), end=(9,))
    assert rows.stype == "csr"
    np.testing.assert_array_equal(rows.asnumpy(), a.toarray()[3:9])
    assert csr[1:4].stype == "csr"


@pytest.mark.parametrize("op", ["sum", "mean"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_and_mean_of_csr_by_axis(op, axis, keepdims):
    a, csr = random_csr(9, 6, 0.3)
    out = getattr(nd, op)(csr, axis=axis, keepdims=keepdims)
    assert out.stype == "default"
    np.testing.assert_allclose(out.asnumpy(), getattr(np, op)(a.toarray(), axis=axis, keepdims=keepdims),
                               rtol=1e-5, atol=1e-6)


def test_where_with_csr_condition():
    a, cond = random_csr(6, 5, 0.3)
    rng = np.random.default_rng(9)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    y = rng.standard_normal((6, 5)).astype(np.float32)
    out = nd.where(cond, nd.array(x), nd.array(y))
    assert out.stype == "default"
    np.testing.assert_array_equal(out.asnumpy(), np.where(a.toarray() != 0, x, y))


# ---- lazy updates ---------------------------------------------------------------------------------

@pytest.mark.parametrize("op_name,attrs,n_states", [
    ("sgd_update", {"lr": 0.1, "wd": 0.01}, 0),
    ("sgd_mom_update", {"lr": 0.1, "wd": 0.01, "momentum": 0.9}, 1),
    ("adam_update", {"lr": 0.01, "wd": 0.01}, 2),
    ("_adagrad_update", {"lr": 0.1, "wd": 0.01}, 1),
])
def test_update_ops_on_row_sparse_gradients_touch_only_present_rows(op_name, attrs, n_states):
    rng = np.random.default_rng(10)
    weight = rng.standard_normal((8, 3)).astype(np.float32)
    states = [np.abs(rng.standard_normal((8, 3))).astype(np.float32) for _ in range(n_states)]
    rows = [1, 5]
    gdense, grad = random_rsp(8, 3, rows, seed=11)
    w = nd.array(weight)
    st = [nd.array(s) for s in states]
    getattr(nd, op_name)(w, grad, *st, out=w, **attrs)
    from symjit.ndarray.ndarray import invoke
    ref_w, ref_st = nd.array(weight), [nd.array(s) for s in states]
    invoke(op_name, [ref_w, nd.array(gdense)] + ref_st, attrs, out=ref_w)
    keep = [r for r in range(8) if r not in rows]
    np.testing.assert_array_equal(w.asnumpy()[keep], weight[keep])       # untouched rows
    np.testing.assert_allclose(w.asnumpy()[rows], ref_w.asnumpy()[rows], rtol=1e-5, atol=1e-6)
    for s, old, ref in zip(st, states, ref_st):
        np.testing.assert_array_equal(s.asnumpy()[keep], old[keep])
        np.testing.assert_allclose(s.asnumpy()[rows], ref.asnumpy()[rows], rtol=1e-5, atol=1e-6)


def test_sgd_with_lazy_update_false_decays_every_row():
    weight = np.ones((4, 2), np.float32)
    _, grad = random_rsp(4, 2, [2])
    w = nd.array(weight)
    nd.sgd_update(w, grad, lr=0.5, wd=0.1, lazy_update=False, out=w)
    np.testing.assert_allclose(w.asnumpy()[[0, 1, 3]], np.full((3, 2), 1 - 0.5 * 0.1), rtol=1e-6)


@pytest.mark.parametrize("name,kwargs", [("sgd", {"momentum": 0.9, "wd": 0.01}), ("adam", {"wd": 0.01}),
                                         ("adagrad", {"wd": 0.01}), ("ftrl", {"wd": 0.01})])
def test_optimizers_update_row_sparse_weights_lazily(name, kwargs, monkeypatch):
    from symjit.ndarray import sparse_ops
    calls = []
    real = sparse_ops.lazy_rows_update
    monkeypatch.setattr(sparse_ops, "lazy_rows_update", lambda *a: calls.append(a[0]) or real(*a))
    opt = mx.optimizer.create(name, learning_rate=0.1, **kwargs)
    rng = np.random.default_rng(12)
    weight_np = rng.standard_normal((6, 4)).astype(np.float32)
    weight = nd.array(weight_np).tostype("row_sparse")
    state = opt.create_state_multi_precision(0, weight)
    _, grad = random_rsp(6, 4, [0, 3], seed=13)
    opt.update_multi_precision(0, weight, grad, state)
    assert weight.stype == "row_sparse"
    after = weight.asnumpy()
    np.testing.assert_array_equal(after[[1, 2, 4, 5]], weight_np[[1, 2, 4, 5]])
    assert np.all(after[[0, 3]] != weight_np[[0, 3]])
    assert len(calls) == 1   # the row kernel ran (gathered rows only), not a dense update


# ---- cast_storage as an operator, _square_sum, khatri_rao ---------------------------------------------

def test_cast_storage_between_sparse_types_keeps_compressed_mode():
    a, csr = random_csr(9, 6, 0.3)
    rsp = nd.cast_storage(csr, stype="row_sparse")
    assert rsp.stype == "row_sparse" and rsp.is_compressed and csr.is_compressed
    np.testing.assert_array_equal(rsp.indices.asnumpy(), np.nonzero(np.diff(a.indptr))[0])
    back = nd.cast_storage(rsp, "csr")
    assert back.stype == "csr"
    np.testing.assert_array_equal(back.indptr.asnumpy(), a.indptr)
    np.testing.assert_array_equal(back.asnumpy(), a.toarray())
    assert nd.cast_storage(nd.array(a.toarray()), "csr").stype == "csr"
    sym = mx.sym.cast_storage(mx.sym.Variable("x"), stype="csr")
    assert sym.list_arguments() == ["x"]


@pytest.mark.parametrize("axis,keepdims,stype", [(1, True, "row_sparse"), (1, False, "default"),
                                                 (0, False, "default"), (0, True, "default")])
def test_square_sum_of_row_sparse(axis, keepdims, stype):
    dense, rsp = random_rsp(7, 4, [0, 3, 6])
    out = nd._internal._square_sum(rsp, axis=axis, keepdims=keepdims)
    assert out.stype == stype
    np.testing.assert_allclose(out.asnumpy(), np.sum(dense ** 2, axis=axis, keepdims=keepdims), rtol=1e-5)
    dense_out = nd._internal._square_sum(nd.array(dense), axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(dense_out.asnumpy(), out.asnumpy(), rtol=1e-5)


def test_square_sum_gradient_is_twice_the_input():
    x = nd.array(np.random.default_rng(14).standard_normal((3, 4)).astype(np.float32))
    x.attach_grad()
    with mx.autograd.record():
        y = nd._internal._square_sum(x, axis=1)
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * x.asnumpy(), rtol=1e-6)


def _khatri_rao_reference(mats):
    cols = mats[0].shape[1]
    out = []
    for j in range(cols):
        col = mats[0][:, j]
        for m in mats[1:]:
            col = np.kron(col, m[:, j])
        out.append(col)
    return np.stack(out, axis=1)


def test_khatri_rao_values_and_gradients():
    rng = np.random.default_rng(15)
    mats = [rng.standard_normal((r, 3)) for r in (2, 4, 3)]
    arrays = [nd.array(m, dtype="float64") for m in mats]
    for x in arrays:
        x.attach_grad()
    head = rng.standard_normal((24, 3))
    with mx.autograd.record():
        y = nd.khatri_rao(*arrays)
    np.testing.assert_allclose(y.asnumpy(), _khatri_rao_reference(mats), rtol=1e-12)
    y.backward(nd.array(head, dtype="float64"))
    eps = 1e-6
    for i, x in enumerate(arrays):
        for (r, c) in [(0, 0), (1, 2)]:
            plus = [m.copy() for m in mats]
            minus = [m.copy() for m in mats]
            plus[i][r, c] += eps
            minus[i][r, c] -= eps
            fd = ((_khatri_rao_reference(plus) - _khatri_rao_reference(minus)) * head).sum() / (2 * eps)
            assert abs(fd - x.grad.asnumpy()[r, c]) < 1e-6
    with pytest.raises(MXNetError, match="khatri_rao: every input needs the same number of columns"):
        nd.khatri_rao(nd.ones((2, 3)), nd.ones((2, 4)))


# ---- Embedding with sparse_grad ----------------------------------------------------------------------

def test_embedding_sparse_grad_stores_exactly_the_indexed_rows():
    rng = np.random.default_rng(16)
    weight = rng.standard_normal((10, 3)).astype(np.float32)
    w = nd.array(weight)
    w.attach_grad(stype="row_sparse")
    idx = np.array([[1, 7], [7, 4]], np.float32)
    head = rng.standard_normal((2, 2, 3)).astype(np.float32)
    head[1, 1] = 0   # row 4's gradient is zero: MXNet still stores the row
    with mx.autograd.record():
        y = nd.Embedding(nd.array(idx), w, input_dim=10, output_dim=3, sparse_grad=True)
    y.backward(nd.array(head))
    assert w.grad.stype == "row_sparse" and w.grad.is_compressed
    np.testing.assert_array_equal(w.grad.indices.asnumpy(), [1, 4, 7])
    expect = np.zeros((10, 3), np.float32)
    np.add.at(expect, idx.astype(int).reshape(-1), head.reshape(-1, 3))
    np.testing.assert_allclose(w.grad.asnumpy(), expect, rtol=1e-6)
    # grad_req='add' accumulates into the union of the stored rows
    w.attach_grad(grad_req="add", stype="row_sparse")
    for rows in ([[2]], [[5]]):
        with mx.autograd.record():
            y = nd.Embedding(nd.array(rows), w, input_dim=10, output_dim=3, sparse_grad=True)
        y.backward()
    np.testing.assert_array_equal(w.grad.indices.asnumpy(), [2, 5])


def test_gluon_sparse_embedding_trains_only_the_indexed_rows():
    emb = mx.gluon.nn.Embedding(12, 4, sparse_grad=True)
    emb.initialize()
    before = emb.weight.data().asnumpy()
    trainer = mx.gluon.Trainer(emb.collect_params(), "sgd", {"learning_rate": 0.1, "wd": 0.1, "momentum": 0.9})
    with mx.autograd.record():
        loss = emb(nd.array([[1, 7], [7, 3]])).sum()
    loss.backward()
    assert emb.weight.grad().stype == "row_sparse"
    trainer.step(1)
    changed = np.nonzero(np.any(emb.weight.data().asnumpy() != before, axis=1))[0]
    np.testing.assert_array_equal(changed, [1, 3, 7])   # weight decay too: lazy update


def test_contrib_sparse_embedding_gives_row_sparse_gradients():
    w = nd.array(np.arange(12, dtype=np.float32).reshape(6, 2))
    w.attach_grad(stype="row_sparse")
    with mx.autograd.record():
        y = nd.contrib.SparseEmbedding(nd.array([4, 0, 4]), w, input_dim=6, output_dim=2)
    np.testing.assert_array_equal(y.asnumpy(), w.asnumpy()[[4, 0, 4]])
    y.backward()
    np.testing.assert_array_equal(w.grad.indices.asnumpy(), [0, 4])
    np.testing.assert_array_equal(w.grad.data.asnumpy(), [[1, 1], [2, 2]])


def test_numpy_fallback_matches_the_c_kernels(monkeypatch):
    """Without the native runtime (SYMJIT_BACKEND=interp) the products run on numpy index
    arithmetic and give the same values."""
    from symjit.ndarray import sparse_ops
    a, csr = random_csr(30, 25, 0.1)
    rng = np.random.default_rng(17)
    b, c, d = (rng.standard_normal(s).astype(np.float32) for s in ((25, 6), (30, 6), (4, 30)))
    native = [nd.dot(csr, nd.array(b)).asnumpy(), nd.dot(csr, nd.array(c), transpose_a=True).asnumpy(),
              nd.dot(nd.array(d), csr).asnumpy()]
    monkeypatch.setattr(sparse_ops, "_native", lambda: None)
    fallback = [nd.dot(csr, nd.array(b)).asnumpy(), nd.dot(csr, nd.array(c), transpose_a=True).asnumpy(),
                nd.dot(nd.array(d), csr).asnumpy()]
    for x, y, ref in zip(native, fallback, (a @ b, a.T @ c, d @ a.toarray())):
        np.testing.assert_allclose(x, ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


# ---- KVStore.row_sparse_pull ------------------------------------------------------------------------

def test_row_sparse_pull_stores_exactly_the_requested_rows():
    kv = mx.kv.create("local")
    w = np.arange(15, dtype=np.float32).reshape(5, 3)
    w[3] = 0   # a requested row that is zero is stored all the same (MXNet)
    kv.init("e", nd.array(w))
    outs = [nd.sparse.zeros("row_sparse", (5, 3)) for _ in range(2)]
    kv.row_sparse_pull("e", out=outs, row_ids=[nd.array([3, 1, 3]), nd.array([4])])
    assert outs[0].is_compressed
    np.testing.assert_array_equal(outs[0].indices.asnumpy(), [1, 3])
    np.testing.assert_array_equal(outs[0].data.asnumpy(), w[[1, 3]])
    np.testing.assert_array_equal(outs[1].indices.asnumpy(), [4])
    expect = np.zeros_like(w)
    expect[4] = w[4]
    np.testing.assert_array_equal(outs[1].asnumpy(), expect)


def test_trainer_with_row_sparse_weights_updates_the_pushed_rows_only():
    """Row_sparse gradients pushed to the KVStore reach the optimizer as row_sparse (the union of
    the devices' rows), so SGD's lazy update leaves every other row as it was, decay included."""
    p = mx.gluon.Parameter("w", shape=(6, 2), stype="row_sparse", grad_stype="row_sparse")
    p.initialize(init="ones", ctx=[mx.cpu(0), mx.cpu(1)])
    trainer = mx.gluon.Trainer([p], "sgd", {"learning_rate": 0.1, "wd": 0.1})
    with mx.autograd.record():
        for row, w in zip((1, 4), p.list_row_sparse_data(nd.array([1, 4]))):
            nd.Embedding(nd.array([row], ctx=w.context), w, input_dim=6, output_dim=2, sparse_grad=True).backward()
    trainer.step(1)
    expect = np.ones((6, 2), np.float32)
    expect[[1, 4]] = 1 - 0.1 * (1 + 0.1)
    np.testing.assert_allclose(p.row_sparse_data(nd.arange(0, 6)).asnumpy(), expect, rtol=1e-6)


def test_norm_and_add_n_of_sparse_arrays():
    a, csr = random_csr(8, 5, 0.3)
    np.testing.assert_allclose(nd.norm(csr).asnumpy(), [np.linalg.norm(a.toarray())], rtol=1e-6)
    np.testing.assert_allclose(nd.norm(csr, ord=1).asnumpy(), [np.abs(a.toarray()).sum()], rtol=1e-6)
    np.testing.assert_allclose(nd.norm(csr, axis=1).asnumpy(), np.linalg.norm(a.toarray(), axis=1), rtol=1e-6)
    parts = [random_rsp(7, 3, rows, seed=i) for i, rows in enumerate(([0, 2], [2, 5], [6]))]
    total = nd.add_n(*[p for _, p in parts])
    assert total.stype == "row_sparse"
    np.testing.assert_array_equal(total.indices.asnumpy(), [0, 2, 5, 6])
    np.testing.assert_allclose(total.asnumpy(), sum(d for d, _ in parts), rtol=1e-6)


# ---- properties over random shapes and densities (empty rows, columns and matrices included) ---------

@settings(max_examples=30, deadline=None)
@given(rows=st.integers(0, 9), cols=st.integers(0, 9), k=st.integers(1, 5),
       density=st.sampled_from([0.0, 0.1, 0.5, 1.0]), seed=st.integers(0, 2 ** 16))
def test_products_and_sums_match_scipy(rows, cols, k, density, seed):
    a, csr = random_csr(rows, cols, density, seed=seed)
    b, _ = random_csr(rows, cols, density, seed=seed + 1)
    rng = np.random.default_rng(seed)
    right = rng.standard_normal((cols, k)).astype(np.float32)
    left = rng.standard_normal((k, rows)).astype(np.float32)
    under = rng.standard_normal((rows, k)).astype(np.float32)
    tol = dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(nd.dot(csr, nd.array(right)).asnumpy(), a @ right, **tol)
    np.testing.assert_allclose(nd.dot(csr, nd.array(under), transpose_a=True).asnumpy(), a.T @ under, **tol)
    np.testing.assert_allclose(nd.dot(nd.array(left), csr).asnumpy(), left @ a.toarray(), **tol)
    other = nd.sparse.csr_matrix(b)
    np.testing.assert_allclose(nd.elemwise_add(csr, other).asnumpy(), (a + b).toarray(), **tol)
    np.testing.assert_allclose(nd.elemwise_mul(csr, other).asnumpy(), a.multiply(b).toarray(), **tol)
    if rows and cols:
        np.testing.assert_allclose(nd.sum(csr, axis=0).asnumpy(), a.toarray().sum(axis=0), **tol)


def test_sparse_adagrad_update_is_lazy_and_refuses_weight_decay():
    """`nd.sparse.adagrad_update` (MXNet's `_sparse_adagrad_update`): only the gradient's rows and
    their history change, by history += g^2, w -= lr * g / sqrt(history + eps); wd must be 0."""
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((6, 3)).astype(np.float32)
    h0 = rng.uniform(0.1, 1.0, (6, 3)).astype(np.float32)
    rows, vals = np.array([1, 4]), rng.standard_normal((2, 3)).astype(np.float32)
    w, h = mx.nd.array(w0), mx.nd.array(h0)
    grad = mx.nd.sparse.row_sparse_array((vals, rows), shape=(6, 3))
    mx.nd.sparse.adagrad_update(w, grad, h, lr=0.05, epsilon=1e-6, out=w)
    want_h, want_w = h0.copy(), w0.copy()
    want_h[rows] += vals * vals
    want_w[rows] -= 0.05 * vals / np.sqrt(want_h[rows] + 1e-6)
    np.testing.assert_allclose(h.asnumpy(), want_h, rtol=1e-6)
    np.testing.assert_allclose(w.asnumpy(), want_w, rtol=1e-6, atol=1e-7)
    with pytest.raises(mx.MXNetError, match="_sparse_adagrad_update.*weight decay"):
        mx.nd.sparse.adagrad_update(w, grad, h, lr=0.05, wd=0.01, out=w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 3])
def test_csr_transpose_product_split_into_parallel_parts(dtype, threads):
    """csr^T . dense with enough entries for several row ranges scattered in parallel (and
    summed afterwards): the same product as numpy, whatever the thread count."""
    from symjit.runtime import set_num_threads
    a, csr = random_csr(700, 300, 0.2, dtype=dtype, seed=12)   # ~42000 entries: parts of 16384
    b = np.random.default_rng(13).standard_normal((700, 5)).astype(dtype)
    previous = set_num_threads(threads)
    try:
        out = nd.sparse.dot(csr, nd.array(b, dtype=dtype), transpose_a=True)
    finally:
        set_num_threads(previous)
    assert out.stype == "row_sparse" and out.dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(out.asnumpy(), a.toarray().T @ b, rtol=tol, atol=tol)
