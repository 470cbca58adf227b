"""all_finite, multi_all_finite, reset_arrays, allclose, quadratic, boolean_mask."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from symjit.test_utils import check_op_gradient


def test_finite_flags():
    z = mx.sym.all_finite(mx.sym.var("d"))
    assert z.eval(d=mx.nd.array([[np.inf, 0]]))[0].asnumpy().tolist() == [0.0]
    assert z.eval(d=mx.nd.array([[1.0, 0]]))[0].asnumpy().tolist() == [1.0]
    m = mx.sym.multi_all_finite(mx.sym.var("a"), mx.sym.var("b"), num_arrays=2)
    assert m.eval(a=mx.nd.ones(2), b=mx.nd.array([np.nan]))[0].asnumpy().tolist() == [0.0]
    assert m.eval(a=mx.nd.ones(2), b=mx.nd.ones(3))[0].asnumpy().tolist() == [1.0]


def test_reset_arrays_zeroes_every_input_in_place():
    rng = np.random.default_rng(3)
    arrays = [mx.nd.array(rng.uniform(1, 2, size=shape), dtype=dt)
              for shape, dt in (((2, 3), "float32"), ((4,), "float16"), ((1, 2, 2), "float64"))]
    got = mx.nd.reset_arrays(*arrays, num_arrays=len(arrays))
    assert got == []
    for a, dt in zip(arrays, ("float32", "float16", "float64")):
        assert a.dtype == np.dtype(dt)
        np.testing.assert_array_equal(a.asnumpy(), np.zeros(a.shape))
    with pytest.raises(MXNetError, match="reset_arrays.*missing input .arg1."):
        mx.nd.reset_arrays(mx.nd.ones(2), num_arrays=2)
    with pytest.raises(MXNetError, match="reset_arrays.*num_arrays"):
        mx.nd.reset_arrays(num_arrays=0)


def test_allclose_matches_numpy():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 4))
    for b in (a + 1e-9, a + 1e-3):
        got = mx.nd.contrib.allclose(mx.nd.array(a, dtype="float64"), mx.nd.array(b, dtype="float64"),
                                     rtol=1e-5, atol=1e-7)
        assert got.shape == () and got.asnumpy().tolist() == int(np.allclose(a, b, 1e-5, 1e-7))
    with pytest.raises(MXNetError, match="allclose"):
        mx.nd.contrib.allclose(mx.nd.ones(2), mx.nd.ones(3))


def test_quadratic():
    x = np.array([0.3, -1.2, 2.0])
    out = mx.nd.contrib.quadratic(mx.nd.array(x), a=0.5, b=2.0, c=1.0).asnumpy()
    np.testing.assert_allclose(out, 0.5 * x ** 2 + 2 * x + 1, rtol=1e-6)
    check_op_gradient("_contrib_quadratic", [x], {"a": 0.5, "b": 2.0, "c": 1.0})


def test_boolean_mask_and_gradient():
    data = mx.nd.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    data.attach_grad()
    with mx.autograd.record():
        out = mx.nd.contrib.boolean_mask(data, mx.nd.array([1, 0, 1]))
    out.backward()
    assert out.asnumpy().tolist() == [[1, 2, 3], [7, 8, 9]]
    assert data.grad.asnumpy().tolist() == [[1, 1, 1], [0, 0, 0], [1, 1, 1]]
    with pytest.raises(MXNetError, match="boolean_mask"):
        mx.nd.contrib.boolean_mask(data, mx.nd.array([1, 0]))
