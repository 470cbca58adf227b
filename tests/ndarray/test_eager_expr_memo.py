"""Small eager elementwise ops reuse their scalar expression per attribute values
(`Elementwise._eager_expr`): a memo hit must build the same result as a fresh expression, with
scalars told apart by their bits (0.0 and -0.0) and by type (1, 1.0, True), here and in the
memo of parsed attributes (`Op.parse`) in front of it."""
from __future__ import annotations

import numpy as np

import symjit as mx
from symjit.ops import registry
from symjit.ops.registry import get_op


def _bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, np.float32).view(np.uint32)


def test_signed_zero_scalars_stay_distinct():
    x = mx.nd.array(np.array([-0.0, 1.5, -2.0], np.float32))
    for _ in range(2):   # the second round hits the memo
        times_neg = mx.nd._mul_scalar(x, scalar=-0.0).asnumpy()
        times_pos = mx.nd._mul_scalar(x, scalar=0.0).asnumpy()
        np.testing.assert_array_equal(_bits(times_neg), _bits(np.float32([0.0, -0.0, 0.0])))
        np.testing.assert_array_equal(_bits(times_pos), _bits(np.float32([-0.0, 0.0, -0.0])))


def test_memo_hits_equal_fresh_expressions_and_stay_bounded():
    op = get_op("_mul_scalar")
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    for i in range(registry._EXPR_MEMO_MAX + 10):
        attrs = op.parse({"scalar": 0.25 * i})
        assert op._eager_expr(attrs) is op.full_expr(attrs)
        np.testing.assert_array_equal(op.compute(attrs, [x], None)[0], x * np.float32(0.25 * i))
    assert len(op._expr_memo) <= registry._EXPR_MEMO_MAX


def test_memo_key_separates_types_and_skips_unhashable_values():
    assert registry._expr_memo_key({"scalar": 1}) != registry._expr_memo_key({"scalar": 1.0})
    assert registry._expr_memo_key({"scalar": True}) != registry._expr_memo_key({"scalar": 1})
    assert registry._expr_memo_key({"scalar": 0.0}) != registry._expr_memo_key({"scalar": -0.0})
    assert registry._expr_memo_key({"axes": (1, 2)}) is None
