"""Tests for `mx.nd.contrib` (symjit/ndarray/contrib.py) and the `_contrib_index_copy` op
(symjit/ops/contrib.py): rand_zipfian's formula and distribution, imperative while_loop /
foreach / cond (values, padding, autograd through iterations, errors) and index_copy
(forward against a loop, gradients against finite differences, errors naming the op)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from symjit.ops.registry import apply_numpy, get_op
from symjit.test_utils import check_op_gradient

nd = mx.nd
RNG = np.random.default_rng(3)


# --------------------------------------------------------------------------------------
# rand_zipfian
# --------------------------------------------------------------------------------------

def zipf_prob(c, range_max):
    return math.log((c + 2.0) / (c + 1.0)) / math.log(range_max + 1.0)


def test_rand_zipfian_counts_follow_the_formula():
    mx.random.seed(5)
    true = nd.array([0, 2, 3])
    samples, exp_true, exp_sample = nd.contrib.rand_zipfian(true, 7, 4)
    assert samples.shape == (7,) and samples.dtype == np.int64
    assert exp_true.dtype == np.float64 and exp_sample.dtype == np.float64
    np.testing.assert_allclose(exp_true.asnumpy(), [7 * zipf_prob(c, 4) for c in (0, 2, 3)], rtol=1e-12)
    np.testing.assert_allclose(exp_sample.asnumpy(), [7 * zipf_prob(int(c), 4) for c in samples.asnumpy()],
                               rtol=1e-12)
    assert np.all((samples.asnumpy() >= 0) & (samples.asnumpy() < 4))


def test_rand_zipfian_spec_value():
    """E52: 3 * log(4/3) / log(5) printed by MXNet as 0.53624076."""
    _, exp_true, _ = nd.contrib.rand_zipfian(nd.array([2]), 3, 4)
    assert f"{exp_true.asnumpy()[0]:.8f}" == "0.53624076"


def test_rand_zipfian_distribution_is_log_uniform():
    mx.random.seed(0)
    samples, _, _ = nd.contrib.rand_zipfian(nd.array([0]), 200_000, 10)
    freq = np.bincount(samples.asnumpy(), minlength=10) / 200_000
    expect = np.array([zipf_prob(c, 10) for c in range(10)])
    expect[0] += 1 - expect.sum()  # draws of exactly log(range_max + 1) wrap to class 0 (never in practice)
    np.testing.assert_allclose(freq, expect, atol=4e-3)


def test_rand_zipfian_rejects_non_arrays():
    with pytest.raises(MXNetError, match="rand_zipfian"):
        nd.contrib.rand_zipfian([2], 3, 4)


# --------------------------------------------------------------------------------------
# while_loop / foreach / cond
# --------------------------------------------------------------------------------------

def test_while_loop_stacks_and_pads_with_zero_rows():
    cond = lambda i, s: i <= 7  # noqa: E731
    func = lambda i, s: ([i + s], [i + 1, s + i])  # noqa: E731
    outputs, states = nd.contrib.while_loop(cond, func, (nd.array([0], dtype="int64"),
                                                         nd.array([1], dtype="int64")), max_iterations=10)
    assert isinstance(outputs, list) and len(outputs) == 1
    got = outputs[0].asnumpy()
    assert got.shape == (10, 1) and got.dtype == np.int64
    i, s, rows = 0, 1, []
    while i <= 7:
        rows.append(i + s)
        i, s = i + 1, s + i
    np.testing.assert_array_equal(got[:, 0], rows + [0] * (10 - len(rows)))
    assert [x.asnumpy().tolist() for x in states] == [[8], [29]]


def test_while_loop_max_iterations_stops_early_and_single_var():
    outputs, state = nd.contrib.while_loop(lambda x: x < 100, lambda x: (x * 2, x + 1), nd.array([1.0]),
                                           max_iterations=3)
    assert isinstance(state, nd.NDArray) and state.asnumpy().tolist() == [4.0]
    np.testing.assert_array_equal(outputs.asnumpy(), [[2.0], [4.0], [6.0]])


def test_while_loop_no_iteration_gives_no_outputs():
    outputs, states = nd.contrib.while_loop(lambda x: x > 5, lambda x: ([x], [x + 1]), [nd.array([1.0])],
                                            max_iterations=4)
    assert outputs == [] and states[0].asnumpy().tolist() == [1.0]


def test_while_loop_gradient_flows_through_iterations():
    x = nd.array([1.5])
    x.attach_grad()
    with mx.autograd.record():
        outputs, (final,) = nd.contrib.while_loop(lambda v: v < 10, lambda v: ([v * v], [v * 2]), [x],
                                                  max_iterations=5)
        loss = outputs[0].sum() + final.sum()
    loss.backward()
    # iterations: v = 1.5, 3, 6 -> outputs 1.5^2 + 9 + 36 = (1+4+16) x^2, final 8x
    np.testing.assert_allclose(x.grad.asnumpy(), [2 * 21 * 1.5 + 8], rtol=1e-6)


def test_while_loop_errors():
    with pytest.raises(ValueError, match="max_iterations"):
        nd.contrib.while_loop(lambda x: x < 1, lambda x: ([x], [x]), [nd.array([0.0])])
    with pytest.raises(ValueError, match="at least one"):
        nd.contrib.while_loop(lambda: True, lambda: ([], []), [], max_iterations=2)
    with pytest.raises(ValueError, match="consistent"):
        nd.contrib.while_loop(lambda x: x < 1, lambda x: ([x], [x, x]), [nd.array([0.0])], max_iterations=2)
    with pytest.raises(ValueError, match="inconsistent"):  # step outputs growing in length
        nd.contrib.while_loop(lambda x: x < 3, lambda x: ([nd.zeros((int(x.asscalar()) + 1,))], [x + 1]),
                              [nd.array([0.0])], max_iterations=3)
    with pytest.raises(MXNetError, match="asscalar"):
        nd.contrib.while_loop(lambda x: x, lambda x: ([x], [x]), [nd.array([0.0, 1.0])], max_iterations=2)


def test_foreach_scans_the_first_axis():
    data = nd.array(RNG.uniform(-1, 1, size=(4, 2)))
    outs, state = nd.contrib.foreach(lambda x, s: (x + s, x + s), data, nd.zeros((2,)))
    np.testing.assert_allclose(outs.asnumpy(), np.cumsum(data.asnumpy(), axis=0), rtol=1e-6)
    np.testing.assert_allclose(state.asnumpy(), data.asnumpy().sum(axis=0), rtol=1e-6)
    a, b = nd.array(np.arange(6).reshape(3, 2)), nd.array(np.arange(3))
    outs, states = nd.contrib.foreach(lambda xs, ss: ([xs[0] * 2, xs[1]], [ss[0] + xs[1]]), [a, b], [nd.zeros((1,))])
    np.testing.assert_array_equal(outs[0].asnumpy(), 2 * np.arange(6).reshape(3, 2))
    np.testing.assert_array_equal(outs[1].asnumpy(), np.arange(3).reshape(3, 1))  # rows of 1-D data are (1,)
    assert states[0].asnumpy().tolist() == [3.0]
    with pytest.raises(MXNetError, match="foreach"):
        nd.contrib.foreach(lambda x, s: (x, s), [a, nd.zeros((2,))], [nd.zeros((1,))])


def test_cond_picks_a_branch():
    x = nd.array([2.0])
    assert nd.contrib.cond(x > 1, lambda: x * 10, lambda: x - 10).asnumpy().tolist() == [20.0]
    assert nd.contrib.cond(x > 3, lambda: x * 10, lambda: x - 10).asnumpy().tolist() == [-8.0]
    with pytest.raises(MXNetError):
        nd.contrib.cond(nd.array([1.0, 0.0]), lambda: x, lambda: x)


def test_contrib_namespace_exposes_registered_ops():
    assert nd.contrib.index_copy.__name__ == "index_copy"
    assert "index_copy" in dir(nd.contrib) and "while_loop" in dir(nd.contrib)
    with pytest.raises(AttributeError):
        nd.contrib.no_such_op


# --------------------------------------------------------------------------------------
# _contrib_index_copy
# --------------------------------------------------------------------------------------

def index_copy_loop(old, index, new):
    out = old.copy()
    for k, r in enumerate(index):
        out[int(r)] = new[k]
    return out


@pytest.mark.parametrize("shape, index", [((6, 3), [0, 4, 2]), ((5,), [4, 1]), ((4, 2, 3), [3])])
def test_index_copy_forward(shape, index):
    old = RNG.uniform(-1, 1, size=shape)
    new = RNG.uniform(-1, 1, size=(len(index),) + shape[1:])
    for idx in (np.array(index, np.float32), np.array(index, np.int64)):
        (out,) = apply_numpy("_contrib_index_copy", [old, idx, new])
        np.testing.assert_array_equal(out, index_copy_loop(old, idx, new))
        assert not np.shares_memory(out, old)


def test_index_copy_spec_example():
    a = nd.zeros((6, 3))
    b = nd.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    out = nd.contrib.index_copy(a, nd.array([0, 4, 2]), b)
    np.testing.assert_array_equal(out.asnumpy(), [[1, 2, 3], [0, 0, 0], [7, 8, 9], [0, 0, 0], [4, 5, 6], [0, 0, 0]])
    assert a.asnumpy().sum() == 0  # the input is not modified


def test_index_copy_gradient():
    old, new = RNG.uniform(-1, 1, size=(5, 2)), RNG.uniform(-1, 1, size=(2, 2))
    idx = np.array([3.0, 1.0])
    check_op_gradient("_contrib_index_copy", [old, idx, new], wrt=[0, 2])


def test_index_copy_gradient_values_through_autograd():
    old, new = nd.array(RNG.uniform(size=(4, 2))), nd.array(RNG.uniform(size=(2, 2)))
    old.attach_grad()
    new.attach_grad()
    head = RNG.uniform(-1, 1, size=(4, 2))
    with mx.autograd.record():
        y = nd.contrib.index_copy(old, nd.array([2, 0]), new)
    y.backward(nd.array(head))
    expect_old = head.copy()
    expect_old[[2, 0]] = 0
    np.testing.assert_allclose(old.grad.asnumpy(), expect_old, rtol=1e-6)
    np.testing.assert_allclose(new.grad.asnumpy(), head[[2, 0]], rtol=1e-6)


def test_index_copy_inference():
    op = get_op("_contrib_index_copy")
    ins, outs = op.infer_shape({}, [(6, 3), (2,), None])
    assert ins[2] == (2, 3) and outs == [(6, 3)]
    ins, outs = op.infer_shape({}, [(6, 3), None, (4, 3)])
    assert ins[1] == (4,)
    assert op.infer_type({}, ["float32", "int64", None]) == (["float32", "int64", "float32"], ["float32"])


def test_index_copy_errors_name_the_op():
    old = np.zeros((4, 2))
    with pytest.raises(MXNetError, match="_contrib_index_copy.*out of range"):
        apply_numpy("_contrib_index_copy", [old, np.array([4.0]), np.zeros((1, 2))])
    with pytest.raises(MXNetError, match="_contrib_index_copy.*new_tensor"):
        apply_numpy("_contrib_index_copy", [old, np.array([1.0]), np.zeros((1, 3))])
    with pytest.raises(MXNetError, match="_contrib_index_copy.*1-D"):
        apply_numpy("_contrib_index_copy", [old, np.array([[1.0]]), np.zeros((1, 2))])
    with pytest.raises(MXNetError, match="_contrib_index_copy.*whole numbers"):
        apply_numpy("_contrib_index_copy", [old, np.array([1.5]), np.zeros((1, 2))])
    with pytest.raises(MXNetError, match="_contrib_index_copy"):
        get_op("_contrib_index_copy").infer_shape({}, [(4, 2), (3,), (2, 2)])
