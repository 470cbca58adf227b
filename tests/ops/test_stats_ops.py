"""moments, cumsum, histogram, amp casts and ravel/unravel against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit import nd
from symjit.base import MXNetError
from symjit.test_utils import check_op_gradient

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("keepdims", [False, True])
def test_moments(keepdims):
    x = RNG.normal(size=(3, 4, 5))
    mean, var = nd.moments(nd.array(x, dtype="float64"), axes=(0, 2), keepdims=keepdims)
    np.testing.assert_allclose(mean.asnumpy(), x.mean(axis=(0, 2), keepdims=keepdims), rtol=1e-10)
    np.testing.assert_allclose(var.asnumpy(), x.var(axis=(0, 2), keepdims=keepdims), rtol=1e-10)
    check_op_gradient("moments", [x], {"axes": (0, 2), "keepdims": keepdims})
    with pytest.raises(MXNetError, match="moments.*out of bounds"):
        nd.moments(nd.array(x), axes=(3,))


def test_cumsum():
    x = RNG.normal(size=(3, 4))
    np.testing.assert_allclose(nd.cumsum(nd.array(x), axis=1).asnumpy(), np.cumsum(x, axis=1), rtol=1e-6)
    np.testing.assert_allclose(nd.cumsum(nd.array(x)).asnumpy(), np.cumsum(x), rtol=1e-6)
    check_op_gradient("cumsum", [x], {"axis": 0})
    check_op_gradient("cumsum", [x], {})


def test_histogram():
    x = RNG.normal(size=(4, 5))
    counts, edges = nd.histogram(nd.array(x, dtype="float64"), bins=5, range=(-2, 2))
    c, e = np.histogram(x, 5, range=(-2, 2))
    np.testing.assert_array_equal(counts.asnumpy(), c)
    np.testing.assert_allclose(edges.asnumpy(), e)
    bins = np.array([-1.0, 0.5, 2.0, 4.5])
    counts, _ = nd.histogram(nd.array(x), bins=nd.array(bins))
    np.testing.assert_array_equal(counts.asnumpy(), np.histogram(x.astype(np.float32), bins)[0])
    s = mx.sym.histogram(a=mx.sym.var("data"), bins=4, range=(-1, 1))
    out = s.bind(mx.cpu(), {"data": nd.array(x)}).forward()[0].asnumpy()
    np.testing.assert_array_equal(out, np.histogram(x.astype(np.float32), 4, range=(-1, 1))[0])
    with pytest.raises(MXNetError, match="range"):
        nd.histogram(nd.array(x), bins=3, range=(1, 0))


def test_amp_casts():
    h, f = nd.ones((2,), dtype="float16"), nd.ones((2,))
    outs = nd.amp_multicast(h, f, num_outputs=2)
    assert [o.dtype for o in outs] == [np.float32, np.float32]
    outs = nd.amp_multicast(h, f, num_outputs=2, cast_narrow=True)
    assert [o.dtype for o in outs] == [np.float16, np.float16]
    assert nd.amp_cast(f, dtype="float16").dtype == np.float16
    assert nd.amp_cast(nd.ones((2,), dtype="int32"), dtype="float16").dtype == np.int32
    x = mx.sym.var("x", dtype=np.float16)
    assert mx.sym.amp_cast(x, dtype="float32").infer_type()[1] == [np.float32]


def test_ravel_unravel():
    data = RNG.integers(0, 7, size=(3, 20))
    shape = tuple(int(v) for v in data.max(axis=1) + 1)
    flat = np.ravel_multi_index(data, shape)
    np.testing.assert_array_equal(nd.ravel_multi_index(nd.array(data), shape=shape).asnumpy(), flat)
    np.testing.assert_array_equal(nd.unravel_index(nd.array(flat), shape=shape).asnumpy(), data)
    lead = (-1,) + shape[1:]
    np.testing.assert_array_equal(nd.ravel_multi_index(nd.array(data), shape=lead).asnumpy(), flat)
    np.testing.assert_array_equal(nd.unravel_index(nd.array(flat), shape=lead).asnumpy(), data)
    with pytest.raises(MXNetError, match="ravel_multi_index"):
        nd.ravel_multi_index(nd.array(data), shape=(2, 2))


def test_quantize_dequantize():
    """MXNet's documented int8 example and the uint8 affine mapping."""
    a = nd.array([[0.1392, 0.5928], [0.6027, 0.8579]])
    q, lo, hi = mx.nd.contrib.quantize(a, nd.array([0.0]), nd.array([1.0]), out_type="int8")
    np.testing.assert_array_equal(q.asnumpy(), [[18, 75], [77, 109]])
    back = mx.nd.contrib.dequantize(q, lo, hi, out_type="float32").asnumpy()
    # the documentation prints q / 127; MXNet 1.9.1's released build (oneDNN) gives q / 127.5
    np.testing.assert_allclose(back, np.array([[18, 75], [77, 109]]) / 127.5, rtol=1e-6)
    q, lo, hi = mx.nd.contrib.quantize(nd.array([0.0, 0.5, 1.0]), nd.array([0.0]), nd.array([1.0]))
    assert q.dtype == np.uint8 and q.asnumpy().tolist() == [0, 128, 255]


def test_index_array():
    s = mx.sym.contrib.index_array(mx.sym.var("data"), axes=(-1, 0))
    out = s.eval(data=nd.ones((2, 3)))[0].asnumpy()
    np.testing.assert_array_equal(out, np.stack(np.mgrid[0:2, 0:3], axis=-1)[..., [1, 0]])
    full = mx.nd.contrib.index_array(nd.ones((2, 2, 3))).asnumpy()
    np.testing.assert_array_equal(full, np.stack(np.mgrid[0:2, 0:2, 0:3], axis=-1))
