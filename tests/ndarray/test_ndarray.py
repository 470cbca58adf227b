"""NDArray semantics: creation, repr, arithmetic, in-place writes, indexing, contexts, errors."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit import nd
from symjit.base import MXNetError


def test_creation_defaults_and_attributes():
    x = nd.array([[1, 2], [3, 4]])
    assert x.shape == (2, 2) and x.size == 4 and x.ndim == 2
    assert x.dtype is np.float32 and x.context == mx.cpu(0) and x.stype == "default"
    assert nd.array(np.arange(3, dtype=np.float64)).dtype is np.float32  # MXNet: numpy sources -> float32
    assert nd.array(nd.array([1, 2], dtype="int32")).dtype is np.int32  # NDArray sources keep dtype
    assert nd.zeros((2, 3), dtype="int64").asnumpy().dtype == np.int64
    np.testing.assert_array_equal(nd.full((2, 2), 7).asnumpy(), np.full((2, 2), 7, np.float32))
    np.testing.assert_array_equal(nd.arange(0, 5, 2).asnumpy(), [0, 2, 4])
    np.testing.assert_allclose(nd.linspace(0, 1, 5).asnumpy(), np.linspace(0, 1, 5))
    np.testing.assert_array_equal(nd.eye(3, k=1).asnumpy(), np.eye(3, k=1))
    assert nd.ones(4).shape == (4,)


def test_repr_matches_mxnet_format():
    assert repr(nd.array([[1, 2], [3, 4]])) == "\n[[1. 2.]\n [3. 4.]]\n<NDArray 2x2 @cpu(0)>"
    assert repr(nd.array([1, 2, 3], ctx=mx.cpu(1))) == "\n[1. 2. 3.]\n<NDArray 3 @cpu(1)>"
    assert str(nd.array([5], dtype="int32")) == "\n[5]\n<NDArray 1 @cpu(0)>"


def test_arithmetic_with_broadcasting_and_scalars():
    a = nd.array([[1, 2, 3], [4, 5, 6]])
    b = nd.array([10, 20, 30])
    np.testing.assert_array_equal((a + b).asnumpy(), a.asnumpy() + b.asnumpy())
    np.testing.assert_array_equal((2 - a).asnumpy(), 2 - a.asnumpy())
    np.testing.assert_array_equal((a / 2).asnumpy(), a.asnumpy() / 2)
    np.testing.assert_array_equal((1 / a).asnumpy(), (1 / a.asnumpy()).astype(np.float32))
    np.testing.assert_array_equal((a ** 2).asnumpy(), a.asnumpy() ** 2)
    np.testing.assert_array_equal((2 ** a).asnumpy(), 2 ** a.asnumpy())
    np.testing.assert_array_equal((-a).asnumpy(), -a.asnumpy())
    np.testing.assert_array_equal((a > 3).asnumpy(), (a.asnumpy() > 3).astype(np.float32))
    np.testing.assert_array_equal((a == a).asnumpy(), np.ones((2, 3)))
    assert (a + b).dtype is np.float32
    with pytest.raises(MXNetError, match=r"broadcast_add.*\(2, 3\).*\(2,\)"):
        a + nd.array([1, 2])


def test_nd_ufunc_dispatch():
    x = nd.array([1, 2, 3])
    np.testing.assert_array_equal(nd.power(x, 2).asnumpy(), [1, 4, 9])
    np.testing.assert_array_equal(nd.power(2, x).asnumpy(), [2, 4, 8])
    np.testing.assert_array_equal(nd.maximum(x, 2).asnumpy(), [2, 2, 3])
    np.testing.assert_array_equal(nd.subtract(10, x).asnumpy(), [9, 8, 7])
    assert nd.add(1, 2) == 3


def test_inplace_ops_keep_object_and_buffer():
    x = nd.ones((2, 2))
    buf = x._data
    xid = id(x)
    x += 1
    x *= nd.array([[2, 3], [4, 5]])
    assert id(x) == xid and x._data is buf
    np.testing.assert_array_equal(x.asnumpy(), [[4, 6], [8, 10]])
    z = nd.zeros((2, 2))
    z[:] = x + 1
    assert z._data is not buf and z.asnumpy()[1, 1] == 11
    out = nd.zeros((2, 2))
    res = nd.elemwise_add(x, x, out=out)
    assert res is out and out.asnumpy()[0, 0] == 8
    with pytest.raises(MXNetError, match="out= has shape"):
        nd.elemwise_add(x, x, out=nd.zeros((3,)))


def test_indexing_reads_and_writes():
    x = nd.array(np.arange(12).reshape(3, 4))
    row = x[1]
    assert row.shape == (4,)
    row[:] = 0  # a contiguous row is a view, as in MXNet
    assert x.asnumpy()[1].sum() == 0
    assert x[1:3].shape == (2, 4)
    assert x[0, 1].shape == (1,) and x[0, 1].asscalar() == 1
    col = x[:, 1]
    col[:] = 100  # a strided column is a copy
    assert x.asnumpy()[0, 1] == 1
    x[0, 2] = 50
    x[2] = nd.array([7, 7, 7, 7])
    assert x.asnumpy()[0, 2] == 50 and x.asnumpy()[2].tolist() == [7, 7, 7, 7]
    np.testing.assert_array_equal(x[nd.array([0, 2])].asnumpy(), x.asnumpy()[[0, 2]])
    with pytest.raises(MXNetError, match="out of bounds"):
        x[5]
    with pytest.raises(MXNetError, match="cannot assign"):
        x[0] = nd.array([1, 2, 3])



def test_conversions():
    x = nd.array([1.5, 2.5])
    assert x.astype("int32").dtype is np.int32
    assert x.astype(np.float32, copy=False) is x
    assert nd.array([3]).asscalar() == 3
    with pytest.raises(MXNetError, match="asscalar"):
        x.asscalar()
    assert bool(nd.array([1])) and not bool(nd.array([0]))
    with pytest.raises(ValueError):
        bool(x)
    assert len(nd.zeros((4, 2))) == 4
    assert [r.shape for r in nd.zeros((3, 2))] == [(2,)] * 3


def test_contexts_are_distinct_labels():
    a = nd.ones((2,), ctx=mx.cpu(0))
    b = a.copyto(mx.cpu(1))
    assert b.context == mx.cpu(1) and a.as_in_context(mx.cpu(0)) is a
    with pytest.raises(MXNetError, match="same context"):
        a + b
    t = nd.zeros((2,))
    a.copyto(t)
    assert t.asnumpy().tolist() == [1, 1]
    with mx.Context("cpu", 3):
        assert nd.zeros((1,)).context == mx.cpu(3)


def test_gpu_without_device_is_a_clear_error():
    if mx.num_gpus() > 0:
        pytest.skip("a GPU is present")
    with pytest.raises(MXNetError, match="GPU"):
        nd.zeros((100,), ctx=mx.gpu(0))
    with pytest.raises(MXNetError, match="GPU"):
        nd.ones((2,)).copyto(mx.gpu(0))


def test_bad_input_errors():
    with pytest.raises(MXNetError, match="cannot convert"):
        nd.array([[1, 2], [3]])
    with pytest.raises(MXNetError, match="unknown dtype"):
        nd.zeros((2,), dtype="float7")
    with pytest.raises(MXNetError, match="invalid shape"):
        nd.zeros((-1, 2))
    with pytest.raises(MXNetError, match="must be an NDArray"):
        nd.invoke("relu", [np.ones(3)], {})
    with pytest.raises(MXNetError, match="unknown operator"):
        nd.invoke("no_such_op", [], {})


def test_every_registered_op_is_an_nd_function():
    for name in mx.ops.list_ops():
        assert callable(getattr(nd, name)), name


def test_nan_input_flows_through():
    x = nd.array([np.nan, 1.0])
    y = nd.relu(x) + 1
    assert np.isnan(y.asnumpy()[0]) and y.asnumpy()[1] == 2


def test_reshape_shares_memory_and_copy_does_not():
    x = nd.array(np.arange(6))
    y = x.reshape((2, 3))
    y[0, 0] = 42
    assert x.asnumpy()[0] == 42
    c = x.copy()
    c[:] = 0
    assert x.asnumpy()[0] == 42


@pytest.mark.parametrize("dtype", [None, "float32", "float16", "float64", "int32", "int8", "uint8", "bool"])
def test_zeros_are_owned_writable_zeros_of_the_dtype(dtype):
    a = mx.nd.zeros((3, 1 << 16), dtype=dtype)   # large enough to come from fresh pages
    want = np.dtype("float32" if dtype is None else dtype)
    assert a.dtype == want and a.shape == (3, 1 << 16) and a.context == mx.cpu()
    assert a._data.flags.owndata and a._data.flags.writeable and a._data.flags.c_contiguous
    assert not a.asnumpy().any()
    a[1] = 1
    b = mx.nd.zeros((3, 1 << 16), dtype=dtype)   # a fresh array, not sharing a's memory
    assert a.asnumpy()[1].all() and not b.asnumpy().any()
    out = mx.nd.ones((2, 2), dtype=dtype)
    assert mx.nd.zeros((2, 2), dtype=dtype, out=out) is out and not out.asnumpy().any()
    with pytest.raises(mx.base.MXNetError, match="not fully known"):
        mx.nd.zeros((2, 0), dtype=dtype)
