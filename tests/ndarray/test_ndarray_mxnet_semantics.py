"""NDArray behaviours MXNet 1.9.1 documents and its own unit tests rely on."""
import pickle

import numpy as np
import pytest

import symjit as mx
from symjit import autograd, nd
from symjit.test_utils import check_op_gradient


def test_zero_dim_arrays_keep_their_shape():
    assert nd.array(np.ones([])).shape == () and nd.array(5).shape == ()
    x = nd.zeros((1,))
    x[0] = np.array([4.0], np.float32)      # a same-size value fills the element
    assert x.asnumpy().tolist() == [4.0]
    assert np.all(nd.array([50000001], dtype="int32") == 50000001)   # numpy sees the values


def test_creation_out_argument():
    out = nd.zeros((2, 2))
    assert nd.ones((2, 2), out=out) is out and out.asnumpy().sum() == 4
    nd.zeros((2, 2), out=out)
    assert out.asnumpy().sum() == 0
    with pytest.raises(ValueError):
        nd.ones((3,), out=out)


def test_from_numpy_shares_memory_and_locks_the_source():
    a = np.array([[1, 2], [3, 4]], dtype="float32")
    x = nd.from_numpy(a)
    with pytest.raises(ValueError):
        a[0, 0] = 9
    x[1, 1] = 100
    assert a[1, 1] == 100
    assert nd.from_numpy(a)[1, 1].asnumpy()[0] == 100   # a second import still shares
    with pytest.raises(ValueError):
        nd.from_numpy(np.ones((2, 3)).T)
    assert nd.from_numpy(np.ones((2, 3)).T, zero_copy=False).shape == (3, 2)


def test_inplace_shape_views():
    t = (nd.arange(30) + 1).reshape(2, 3, 5)
    copy, ref = t.flatten(), t.flatten(inplace=True)
    e = t.expand_dims(axis=1, inplace=True)
    t[0] = -1
    assert copy.asnumpy()[0, 0] == 1 and ref.asnumpy()[0, 0] == -1 and e.shape == (2, 1, 3, 5)
    with pytest.raises(ValueError):
        t.reshape((2, 3))


def test_partial_assignment_while_recording_is_refused():
    x = nd.zeros((2, 3))
    y = nd.ones((3,))
    y.attach_grad()
    with autograd.record():
        with pytest.raises(mx.MXNetError, match="not supported when recording with autograd"):
            x[0] = y
        x[None] = nd.ones((2, 3))   # the whole array: a copy, allowed as in MXNet


def test_recorded_advanced_and_ellipsis_indexing_differentiate():
    a = nd.array(np.arange(24.0).reshape(2, 3, 4))
    a.attach_grad()
    with autograd.record():
        y = a[1, [2, 0]] * 2 + a[None, 0, ..., -1].sum()
    y.backward()
    want = np.zeros((2, 3, 4))
    want[1, [2, 0]] += 2
    want[0, :, -1] += 2 * 4   # the sum broadcast over y's 2x4 elements
    np.testing.assert_allclose(a.grad.asnumpy(), want)


def test_basic_indexing_contiguity_matches_numpy():
    x = np.zeros((6, 7, 8, 9))
    for key in [(slice(None),) * 4, (slice(1, 4), slice(None), slice(None), slice(None)),
                (slice(None), slice(None, None, 2), slice(None), slice(None)), (slice(0, 1), slice(3, 4))]:
        assert nd.NDArray._basic_indexing_slice_is_contiguous(key, x.shape) == x[key].flags.c_contiguous


def test_moveaxis_as_numpy():
    x = nd.zeros((4, 1, 2, 3))
    for src, dst in [(0, 2), ([0, 1], [2, 3]), ([3, 0], [1, 0]), (-1, 0)]:
        assert nd.moveaxis(x, src, dst).shape == np.moveaxis(np.zeros((4, 1, 2, 3)), src, dst).shape
    for src, dst in [(4, 0), ([0, 0], [0, 1]), (0, [0, 1])]:
        with pytest.raises(ValueError):
            nd.moveaxis(x, src, dst)


def test_split_v2_as_numpy_split():
    data = np.arange(5 * 17 * 6.0).reshape(5, 17, 6)
    x = nd.array(data)
    for arg in [3, (1, 3, 5)]:
        got = x.split_v2(arg, axis=2)
        for g, w in zip(got, np.split(data, arg, axis=2)):
            np.testing.assert_array_equal(g.asnumpy(), w)
    with pytest.raises(ValueError):
        nd.split_v2(x, 4, axis=2)
    check_op_gradient("_split_v2", [np.random.rand(3, 4)], {"indices": (0, 1, 3), "axis": 1})
    check_op_gradient("_split_v2", [np.random.rand(3, 2)], {"indices": (), "sections": 2, "axis": 1,
                                                             "squeeze_axis": True})


def test_legacy_row_ops():
    a = np.arange(12.0).reshape(3, 4)
    idx = np.array([1, 0, 3])
    np.testing.assert_array_equal(nd.choose_element_0index(nd.array(a), nd.array(idx)).asnumpy(),
                                  a[np.arange(3), idx])
    filled = a.copy()
    filled[np.arange(3), idx] = [7, 8, 9]
    np.testing.assert_array_equal(nd.fill_element_0index(nd.array(a), nd.array([7, 8, 9]),
                                                         nd.array(idx)).asnumpy(), filled)
    out = nd.ones((3, 4))
    nd.onehot_encode(nd.array(idx), out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.eye(4)[idx])
    check_op_gradient("fill_element_0index", [np.random.rand(3, 4), np.random.rand(3), idx.astype(float)],
                      wrt=[0, 1])
    with pytest.raises(mx.MXNetError, match="out of range"):
        nd.fill_element_0index(nd.array(a), nd.array([1, 1, 1]), nd.array([0, 4, 0]))


def test_contrib_isinf_isfinite_isnan():
    v = np.array([np.inf, -np.inf, np.nan, 1.0, 0.0], np.float32)
    x = nd.array(v)
    np.testing.assert_array_equal(nd.contrib.isinf(x).asnumpy(), np.isinf(v))
    np.testing.assert_array_equal(nd.contrib.isfinite(x).asnumpy(), np.isfinite(v))
    np.testing.assert_array_equal(nd.contrib.isnan(x).asnumpy(), np.isnan(v))


def test_relu_gradient_propagates_nan():
    x = nd.array([np.nan, 2.0, -1.0])
    x.attach_grad()
    with autograd.record():
        y = nd.relu(x)
    y.backward()
    g = x.grad.asnumpy()
    assert np.isnan(g[0]) and g[1:].tolist() == [1.0, 0.0]


def test_state_round_trip_and_mxnet_gpu_state():
    x = nd.array([[1, 2], [3, 4]])
    y = nd.zeros((1,))
    y.__setstate__(x.__getstate__())
    np.testing.assert_array_equal(y.asnumpy(), x.asnumpy())
    # the state MXNet writes for mx.nd.arange(1, ctx=mx.gpu()): loads on the CPU
    gpu_state = {"handle": bytearray(b"\xc9\xfa\x93\xf9" + b"\x00" * 4 + b"\x01\x00\x00\x00" +
                                     b"\x01" + b"\x00" * 7 + b"\x02\x00\x00\x00" + b"\x00" * 12)}
    z = nd.zeros((3,))
    z.__setstate__(gpu_state)
    assert z.shape == (1,) and z.context == mx.cpu() and z.asnumpy()[0] == 0
    assert pickle.loads(pickle.dumps(x)).asnumpy().tolist() == [[1, 2], [3, 4]]


def test_dlpack_round_trip():
    a = nd.random.uniform(shape=(3, 4))
    b = nd.from_dlpack(a.to_dlpack_for_read())
    c = nd.from_dlpack(nd.to_dlpack_for_write(a))
    np.testing.assert_array_equal(b.asnumpy(), a.asnumpy())
    np.testing.assert_array_equal(c.asnumpy(), a.asnumpy())
    assert nd.from_dlpack(np.arange(3.0)).asnumpy().tolist() == [0.0, 1.0, 2.0]


def test_save_load_follows_np_shape(tmp_path):
    fname = str(tmp_path / "arrays")
    zero_size = [nd.array(np.zeros((2, 0, 1))), nd.array(np.ones((3,)))]
    nd.save(fname, zero_size)                 # legacy file
    assert [a.shape for a in nd.load(fname)] == [(2, 0, 1), (3,)]
    with mx.np_shape():
        with pytest.raises(mx.MXNetError, match="unknown"):   # a legacy 0 dim means unknown
            nd.load(fname)
        nd.save(fname, [nd.array(np.ones(())), nd.array(np.zeros((0, 4)))])
        assert [a.shape for a in nd.load(fname)] == [(), (0, 4)]
    with pytest.raises(mx.MXNetError, match="numpy shape semantics"):
        nd.load(fname)


def test_cached_op_runs_a_symbol_imperatively():
    sym = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3, name="fc") + 2
    op = nd.CachedOp(sym)
    data, w, b = nd.ones((2, 4)), nd.ones((3, 4)), nd.zeros((3,))
    np.testing.assert_allclose(op(data, w, b).asnumpy(), np.full((2, 3), 6.0))
    out = nd.zeros((2, 3))
    op(data, w, b + 1, out=out)
    np.testing.assert_allclose(out.asnumpy(), np.full((2, 3), 7.0))
    w.attach_grad()
    with autograd.record():
        y = op(data, w, b)
    y.backward()
    np.testing.assert_allclose(w.grad.asnumpy(), np.full((3, 4), 2.0))
    with pytest.raises(mx.MXNetError, match="expected 3 inputs"):
        op(data, w)


def test_sparse_scalar_arithmetic():
    r = (nd.ones((3, 2)) * 2).tostype("row_sparse")
    assert (r * 3).stype == "row_sparse" and (r * 3).asnumpy().sum() == 36
    assert (r - 2).asnumpy().sum() == 0 and (-r).asnumpy().sum() == -12


@pytest.mark.parametrize("spelling,dtype", [("half", np.float16), ("double", np.float64), ("f4", np.float32),
                                            ("int8", np.int8)])
def test_numpy_dtype_spellings_are_accepted(spelling, dtype):
    assert nd.array([1.5, 2.0], dtype=spelling).dtype == dtype


def test_unknown_dtype_spelling_is_refused():
    with pytest.raises(mx.base.MXNetError, match="unknown dtype"):
        nd.array([1.0], dtype="quarter")
