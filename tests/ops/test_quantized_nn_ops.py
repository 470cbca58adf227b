"""contrib.quantized_* layers: their int products against numpy, the Symbol path (types and a
compiled graph), and refusals with MXNetError. MXNet 1.9.1's values for the same ops are in the
golden tests (tests/golden/test_golden_contrib.py)."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError

RNG = np.random.default_rng(21)
nd = mx.nd


def _codes(kind, *shape):
    lo, hi = (-127, 128) if kind == "int8" else (0, 256)
    return RNG.integers(lo, hi, shape).astype(kind)


def _r(lo, hi):
    return [nd.array([lo]), nd.array([hi])]


def test_fully_connected_is_the_int_product_with_its_range():
    d, w = _codes("int8", 3, 7), _codes("int8", 4, 7)
    out, lo, hi = nd.contrib.quantized_fully_connected(nd.array(d, dtype="int8"), nd.array(w, dtype="int8"),
                                                       *_r(-2, 2), *_r(-0.5, 0.25), num_hidden=4, no_bias=True)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out.asnumpy(), d.astype(np.int64) @ w.astype(np.int64).T)
    expect = np.float32(np.float32(2 / 127) * np.float32(0.5 / 127)) * np.float32(2147483647)
    np.testing.assert_allclose([lo.asscalar(), hi.asscalar()], [-expect, expect], rtol=1e-6)


def test_quantized_graph_in_a_symbol():
    data = mx.sym.var("data")
    q, qmin, qmax = mx.sym.contrib.quantize_v2(data, out_type="int8", min_calib_range=-1.0, max_calib_range=1.0)
    pooled = mx.sym.contrib.quantized_pooling(q, qmin, qmax, kernel=(2, 2), stride=(2, 2), pool_type="max")
    flat = mx.sym.contrib.quantized_flatten(*pooled)
    _, out_types, _ = flat.infer_type(data="float32")
    assert out_types == [np.int8, np.float32, np.float32]
    x = RNG.uniform(-1, 1, (2, 3, 4, 4)).astype(np.float32)
    ex = flat.bind(mx.cpu(), {"data": nd.array(x)})
    got = ex.forward()[0].asnumpy()
    codes = nd.contrib.quantize_v2(nd.array(x), out_type="int8", min_calib_range=-1.0,
                                   max_calib_range=1.0)[0].asnumpy()
    expect = codes.reshape(2, 3, 2, 2, 2, 2).max(axis=(3, 5)).reshape(2, -1)
    np.testing.assert_array_equal(got, expect)


def test_refusals():
    d8 = nd.array(_codes("int8", 1, 2, 4, 4), dtype="int8")
    w8 = nd.array(_codes("int8", 3, 2, 3, 3), dtype="int8")
    with pytest.raises(MXNetError, match="uint8"):
        nd.contrib.quantized_conv(d8, w8, *_r(-1, 1), *_r(-1, 1), kernel=(3, 3), num_filter=3, no_bias=True)
    with pytest.raises(MXNetError, match="relu"):
        nd.contrib.quantized_act(d8, *_r(-1, 1), act_type="tanh")
    with pytest.raises(MXNetError, match="one type"):
        nd.contrib.quantized_concat(d8, nd.array(_codes("uint8", 1, 2, 4, 4), dtype="uint8"), *_r(-1, 1),
                                    *_r(0, 1), num_args=2, dim=1)
    with pytest.raises(MXNetError, match="int8"):
        nd.contrib.quantized_elemwise_add(nd.array(np.ones((2, 2))), nd.array(np.ones((2, 2))), *_r(-1, 1),
                                          *_r(-1, 1))
    with pytest.raises(MXNetError, match="pool_type"):
        nd.contrib.quantized_pooling(d8, *_r(-1, 1), kernel=(2, 2), pool_type="lp", p_value=2)
