"""Contrib quantize / dequantize / requantize: MXNet's documented example and per-element float32
loop references of MXNet's kernels (quantization_utils: FloatToQuantized for quantize and
requantize; the oneDNN kernels of MXNet 1.9.1's released CPU build for quantize_v2 and dequantize,
with the ranges 127.5 / 255.5), the Symbol path, and bad input refused with MXNetError."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError

RNG = np.random.default_rng(5)
F = np.float32


def _to_int8(x, real_range):
    """FloatToQuantized<int8>(x, -r, r), one element at a time in float32."""
    scale = F(F(127) / F(real_range))
    m = min(F(abs(F(x)) * scale + F(0.5)), F(127))
    return int(np.sign(x)) * int(m)


def test_quantize_documented_example_round_trip():
    a = mx.nd.array([[0.1392, 0.5928], [0.6027, 0.8579]])
    q, lo, hi = mx.nd.contrib.quantize(a, mx.nd.array([0.0]), mx.nd.array([1.0]), out_type="int8")
    np.testing.assert_array_equal(q.asnumpy(), [[18, 75], [77, 109]])
    assert (lo.asnumpy(), hi.asnumpy()) == ([-1.0], [1.0])
    back = mx.nd.contrib.dequantize(q, lo, hi).asnumpy()
    # MXNet's documentation prints q / 127; its released build (oneDNN) gives q / 127.5
    np.testing.assert_allclose(back, [[18 / 127.5, 75 / 127.5], [77 / 127.5, 109 / 127.5]], rtol=1e-6)


def test_quantize_int8_and_uint8_follow_the_float32_kernels():
    x = RNG.uniform(-3, 3, 200).astype(F)
    q8 = mx.nd.contrib.quantize(mx.nd.array(x), mx.nd.array([-2.5]), mx.nd.array([2.0]), out_type="int8")[0].asnumpy()
    assert q8.dtype == np.int8
    np.testing.assert_array_equal(q8, [_to_int8(v, 2.5) for v in x])
    xu = RNG.uniform(-1, 2, 200).astype(F)
    qu, lo, hi = mx.nd.contrib.quantize(mx.nd.array(xu), mx.nd.array([-1.0]), mx.nd.array([2.0]))
    scale = F(255.0 / np.float64(F(3.0)))
    ref = [min(255, max(0, int(np.float64(F(F(v) - F(-1)) * scale) + 0.5))) for v in xu]
    np.testing.assert_array_equal(qu.asnumpy(), ref)
    deq = mx.nd.contrib.dequantize(qu, lo, hi).asnumpy()
    np.testing.assert_array_equal(deq, [F(v) * F(F(2.0) / F(255.5)) for v in ref])


def test_dequantize_refuses_int32_as_mxnet():
    q = np.array([-2147483647, -5, 0, 123456789], np.int32)
    with pytest.raises(MXNetError, match="int8 or uint8"):
        mx.nd.contrib.dequantize(mx.nd.array(q, dtype="int32"), mx.nd.array([-4.0]), mx.nd.array([3.0]))


@pytest.mark.parametrize("calib", [None, (-0.8, 0.5)])
def test_requantize_maps_int32_to_int8(calib):
    x = RNG.integers(-2 ** 30, 2 ** 30, (3, 7)).astype(np.int32)
    kw = {} if calib is None else dict(min_calib_range=calib[0], max_calib_range=calib[1])
    q, lo, hi = mx.nd.contrib.requantize(mx.nd.array(x, dtype="int32"), mx.nd.array([-1.5]), mx.nd.array([1.2]), **kw)
    in_scale = F(F(1.5) / F(2147483648.0))
    real = [F(F(v) * in_scale) for v in x.reshape(-1)]
    r = max(abs(F(calib[0])), abs(F(calib[1]))) if calib else max(abs(min(real)), abs(max(real)))
    assert q.dtype == np.int8
    np.testing.assert_array_equal(q.asnumpy().reshape(-1), [_to_int8(v, r) for v in real])
    np.testing.assert_allclose([lo.asscalar(), hi.asscalar()], [-r, r], rtol=1e-7)


def test_requantize_in_a_symbol_graph_and_refusals():
    s = mx.sym.contrib.requantize(mx.sym.var("d"), mx.sym.var("lo"), mx.sym.var("hi"),
                                  min_calib_range=-1.0, max_calib_range=1.0)
    _, out_types, _ = s.infer_type(d="int32", lo="float32", hi="float32")
    assert out_types == [np.int8, np.float32, np.float32]
    x = np.array([[1 << 29, -(1 << 28)]], np.int32)
    ex = s.bind(mx.cpu(), {"d": mx.nd.array(x, dtype="int32"), "lo": mx.nd.array([-2.0]), "hi": mx.nd.array([2.0])})
    np.testing.assert_array_equal(ex.forward()[0].asnumpy(), [[_to_int8(F(F(v) * F(F(2) / F(2 ** 31))), 1.0) for v in x[0]]])
    with pytest.raises(MXNetError, match="MKL-DNN"):
        mx.nd.contrib.requantize(mx.nd.array(x, dtype="int32"), mx.nd.array([-1.0]), mx.nd.array([1.0]), out_type="uint8")
    with pytest.raises(MXNetError, match="int32"):
        mx.nd.contrib.requantize(mx.nd.array(x), mx.nd.array([-1.0]), mx.nd.array([1.0]))
    with pytest.raises(MXNetError, match="int8 or uint8"):
        mx.nd.contrib.dequantize(mx.nd.array(x), mx.nd.array([-1.0]), mx.nd.array([1.0]))


@pytest.mark.parametrize("kw,kind", [(dict(), "int8"), (dict(min_calib_range=-1.0, max_calib_range=2.0), "int8"),
                                     (dict(out_type="auto", min_calib_range=0.0, max_calib_range=2.0), "uint8"),
                                     (dict(out_type="uint8"), "uint8")])
def test_quantize_v2_over_the_calibrated_or_the_data_range(kw, kind):
    x = RNG.uniform(-0.5, 2.5, (4, 5)).astype(F)
    q, lo, hi = mx.nd.contrib.quantize_v2(mx.nd.array(x), **kw)
    assert q.dtype == np.dtype(kind)
    dmin, dmax = (F(kw["min_calib_range"]), F(kw["max_calib_range"])) if "min_calib_range" in kw else (x.min(), x.max())
    r = max(abs(dmin), abs(dmax))
    top = F(127.5) if kind == "int8" else F(255.5)
    limits = (-128, 127) if kind == "int8" else (0, 255)
    ref = [min(limits[1], max(limits[0], int(np.rint(F(v) * F(top / r))))) for v in x.reshape(-1)]
    np.testing.assert_array_equal(q.asnumpy().reshape(-1), ref)
    assert (lo.asscalar(), hi.asscalar()) == ((-r, r) if kind == "int8" else (dmin, dmax))


def test_quantize_v2_passes_quantized_data_through():
    q = np.array([-3, 0, 100], np.int8)
    out, lo, hi = mx.nd.contrib.quantize_v2(mx.nd.array(q, dtype="int8"))
    np.testing.assert_array_equal(out.asnumpy(), q)
    assert (lo.asscalar(), hi.asscalar()) == (-127, 127)
    out, lo, hi = mx.nd.contrib.quantize_v2(mx.nd.array(q.astype(np.uint8), dtype="uint8"), min_calib_range=0.0,
                                            max_calib_range=4.0)
    assert out.dtype == np.uint8 and (lo.asscalar(), hi.asscalar()) == (0, 4)
