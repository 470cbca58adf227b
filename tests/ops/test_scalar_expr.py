"""Scalar expressions are hash-consed: structural equality is identity, so equality, hashing
and memos keyed by expressions cost O(1) however much the DAG shares (no tree walks)."""
import copy
import gc
import pickle
import time

import numpy as np

from symjit.ops import scalar as S


def _relu_chain(x, k):
    # MXNet's relu, max(x, 0) propagating NaN, reads its input several times
    for _ in range(k):
        x = S.select(S.ne(x, x), x, S.maximum(x, 0.0))
    return x


def test_structurally_equal_expressions_are_one_object():
    a = S.call("exp", S.Input(0)) + 1.5
    b = S.call("exp", S.Input(0)) + 1.5
    assert a is b and a == b and hash(a) == hash(b)
    assert S.Input(0) is not S.Input(1)
    assert S.Const(1.0) is not S.Const(2.0)
    assert S.cast(S.Input(0), "int32") is not S.cast(S.Input(0), "float16")


def test_constants_are_keyed_by_their_bits():
    # 0.0 == -0.0 as numbers, but x * -0.0 and x * 0.0 differ (sign of zero): two constants
    assert S.Const(0.0) is not S.Const(-0.0)
    assert S.Const(-0.0).value == 0.0 and np.signbit(S.Const(-0.0).value)
    assert S.Const(float("nan")) is S.Const(float("nan"))


def test_pickle_and_copy_keep_identity():
    e = _relu_chain(S.Input(0), 5)
    assert pickle.loads(pickle.dumps(e)) is e
    assert copy.copy(e) is e and copy.deepcopy(e) is e


def test_expressions_are_immutable():
    e = S.Input(0) + 1.0
    for name in ("op", "args", "value"):
        try:
            setattr(e, name, None)
        except AttributeError:
            continue
        raise AssertionError(f"{name} was writable")


def test_dead_expressions_leave_the_intern_table():
    gc.collect()
    before = len(S._INTERNED)
    e = _relu_chain(S.Input(7) * 3.25, 30)
    assert len(S._INTERNED) > before
    del e
    gc.collect()
    assert len(S._INTERNED) <= before


def test_deep_shared_dags_compare_hash_and_memoize_in_linear_time():
    # 60 relus: 3**60 paths; separately built copies must be the same object at once
    t0 = time.perf_counter()
    a = _relu_chain(S.Input(0), 60)
    b = _relu_chain(S.Input(0), 60)
    memo = {a: 1}
    assert a is b and memo[b] == 1
    text = S.to_text(a)
    assert len(text) < 60 * 200
    assert repr(a) == f"Expr<{text}>"
    x = np.array([-1.0, np.nan, 2.0], np.float32)
    np.testing.assert_array_equal(S.evaluate(a, [x], "float32"), np.array([0.0, np.nan, 2.0], np.float32))
    assert time.perf_counter() - t0 < 10.0     # generous: it takes milliseconds
