"""MXNet's legacy row operators (symjit/ops/legacy.py) against their numpy definitions."""
import numpy as np
import pytest

import symjit as mx
from symjit import nd


def test_batch_take_clips_and_has_no_gradient_rule():
    a = np.arange(12.0).reshape(3, 4)
    got = nd.batch_take(nd.array(a), nd.array([1, 7, -2], dtype="int32")).asnumpy()
    np.testing.assert_array_equal(got, [a[0, 1], a[1, 3], a[2, 0]])
    x, idx = mx.sym.Variable("x"), mx.sym.Variable("idx")
    y = mx.sym.batch_take(x, idx)
    types = {"x": np.float32, "idx": np.int32}
    # a gradient through it is refused at bind time, as MXNet's missing FGradient
    with pytest.raises(mx.MXNetError, match="not differentiable"):
        y.simple_bind(mx.cpu(), x=(3, 4), idx=(3,), type_dict=types)
    # stop_gradient after it: no gradient rule is needed, the input gradient is zero
    exe = mx.sym.stop_gradient(y).simple_bind(mx.cpu(), x=(3, 4), idx=(3,), type_dict=types)
    exe.arg_dict["x"][:] = a
    exe.forward(is_train=True)
    exe.backward()
    assert not exe.grad_dict["x"].asnumpy().any()
