"""Creation ops without inputs: sym.zeros .. sym.linspace against numpy (MXNet's semantics)."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError


def _ev(s):
    return s.eval()[0].asnumpy()


def test_filled_arrays():
    np.testing.assert_array_equal(_ev(mx.sym.zeros((2, 3))), np.zeros((2, 3)))
    ones = _ev(mx.sym.ones((4,), dtype="float64"))
    assert ones.dtype == np.float64 and (ones == 1).all()
    np.testing.assert_array_equal(_ev(mx.sym.full((2, 2), 7.5)), np.full((2, 2), 7.5, np.float32))
    with pytest.raises(MXNetError, match="_zeros.*>= -1"):
        mx.sym.zeros((2, -2)).eval()


def test_arange_repeat_and_linspace_eye():
    np.testing.assert_array_equal(_ev(mx.sym.arange(2, 10, 3, repeat=2)), [2, 2, 5, 5, 8, 8])
    np.testing.assert_array_equal(_ev(mx.sym.arange(5)), np.arange(5, dtype=np.float32))
    np.testing.assert_allclose(_ev(mx.sym.arange(1, 0, -0.25)), [1, 0.75, 0.5, 0.25])
    np.testing.assert_allclose(_ev(mx.sym.linspace(0, 1, 5)), np.linspace(0, 1, 5))
    np.testing.assert_allclose(_ev(mx.sym.linspace(0, 1, 4, endpoint=False)), [0, 0.25, 0.5, 0.75])
    np.testing.assert_array_equal(_ev(mx.sym.eye(3, 4, 1)), np.eye(3, 4, 1))
    with pytest.raises(MXNetError, match="step"):
        mx.sym.arange(0, 3, 0).eval()


def test_creation_in_a_graph_and_json():
    """The begin_state pattern of exported Gluon RNNs: a zeros node combined with an input."""
    x = mx.sym.var("x")
    s = x + mx.sym.zeros((2, 3)) + mx.sym.ones((2, 3))
    out = mx.sym.load_json(s.tojson()).eval(x=mx.nd.ones((2, 3)))[0].asnumpy()
    np.testing.assert_array_equal(out, np.full((2, 3), 2.0))
    assert s.infer_shape()[1] == [(2, 3)]


def test_unknown_dims_filled_by_inference():
    """MXNet's begin_state: zeros(shape=(0, H)) takes its batch dim from what it meets."""
    x = mx.sym.var("x")
    for unknown in (0, -1):
        s = mx.sym.zeros((unknown, 3)) + x
        assert s.infer_shape(x=(2, 3))[1] == [(2, 3)]
        np.testing.assert_array_equal(s.eval(x=mx.nd.ones((2, 3)))[0].asnumpy(), np.ones((2, 3)))


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_arange_integer_dtype_truncates_start_and_step_first(dtype):
    """MXNet converts start and step to the dtype before counting (the length still comes from
    the real-valued range): arange(1.3, 10.0, 1.3) in int32 is 1, 2, ... (7 values), not 1, 2, 3,
    5, ... as truncating 1.3 * i would give."""
    n = int(np.ceil((10.0 - 1.3) / 1.3))
    expected = np.repeat(1 + np.arange(n), 2).astype(dtype)
    got_nd = mx.nd.arange(1.3, 10.0, 1.3, repeat=2, dtype=dtype).asnumpy()
    got_sym = mx.sym.arange(1.3, 10.0, 1.3, repeat=2, dtype=dtype).eval()[0].asnumpy()
    for got in (got_nd, got_sym):
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, expected)


def test_arange_integer_dtype_wraps_like_c():
    """A negative start or step in an unsigned dtype wraps modulo 2**bits (C conversions)."""
    got = mx.nd.arange(50, -50, -2, dtype="uint8").asnumpy()
    np.testing.assert_array_equal(got, ((50 - 2 * np.arange(50)) % 256).astype(np.uint8))


def test_arange_float_dtype_matches_numpy():
    for dtype in ("float32", "float64"):
        got = mx.nd.arange(1.3, 456.6, 1.3, dtype=dtype).asnumpy()
        np.testing.assert_allclose(got, np.arange(1.3, 456.6, 1.3, dtype=dtype), rtol=1e-5)


@pytest.mark.parametrize("make", [mx.nd.zeros, mx.nd.ones, lambda shape: mx.nd.full(shape, 2.0)])
def test_creation_refuses_unknown_shapes_outside_np_shape(make):
    """Legacy shape semantics: a 0 dim or () means unknown, so creating such an array fails;
    NumPy shape semantics make both real (zero-size, 0-d)."""
    for shape in [(), (0, 1, 3, 0)]:
        with pytest.raises(MXNetError, match="not fully known"):
            make(shape)
    with mx.np_shape():
        assert make(()).asnumpy().shape == ()
        assert make((0, 1, 0, 4)).asnumpy().shape == (0, 1, 0, 4)
    assert mx.nd.array(np.zeros((0, 3))).zeros_like().shape == (0, 3)


@pytest.mark.parametrize("shape,axis", [((4,), None), ((3, 5), None), ((3, 5), -1), ((2, 3, 4), 1)])
def test_arange_like_counts_over_the_shape_or_an_axis(shape, axis):
    data = mx.nd.array(np.random.default_rng(0).normal(size=shape))
    got = mx.nd.contrib.arange_like(data, start=2.0, step=0.5, repeat=2, axis=axis)
    n = int(np.prod(shape)) if axis is None else shape[axis]
    want = (2.0 + 0.5 * (np.arange(n) // 2)).astype(np.float32)
    np.testing.assert_allclose(got.asnumpy(), want.reshape(shape if axis is None else (n,)))
    sym = mx.sym.contrib.arange_like(mx.sym.var("x"), axis=axis)
    assert sym.infer_shape(x=shape)[1][0] == (shape if axis is None else (n,))


def test_arange_like_has_a_zero_gradient_and_checks_axis():
    x = mx.nd.ones((2, 3))
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.contrib.arange_like(x) * x
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), np.arange(6).reshape(2, 3))
    with pytest.raises(MXNetError, match="axis 2 is out of bounds"):
        mx.nd.contrib.arange_like(x, axis=2)
