"""Checked inference in the op registry: every shape a native lowering sees passed
`Op.infer_shape_checked` (arity, non-negative bounded dims, refinement only), and gradient ops
accept only the shapes the op they differentiate could have produced."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from symjit.ops.attrs import MAX_COUNT
from symjit.ops.registry import (MAX_TENSOR_ELEMENTS, OPS, check_shape, forward_shapes, get_op,
                                 list_ops, merge_shape)


def _bind(sym, **shapes):
    return sym.simple_bind(mx.cpu(), grad_req="null", **shapes)


def test_backward_bias_with_mismatched_bias_is_refused_before_running():
    # used to corrupt the heap ("free(): invalid next size") on the third forward
    y = mx.sym._backward_bias(mx.sym.var("a"), mx.sym.var("b"), axis=-1)
    with pytest.raises(MXNetError, match=r"_backward_bias.*12 channels on axis 3.*bias \(4,\) has 4"):
        _bind(y, a=(1, 16, 12, 12), b=(4,))


def test_backward_bias_with_matching_bias_runs():
    y = mx.sym._backward_bias(mx.sym.var("a"), mx.sym.var("b"), axis=1)
    ex = _bind(y, a=(2, 3, 4), b=(3,))
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for _ in range(3):
        out = ex.forward(a=mx.nd.array(a))[0].asnumpy()
    np.testing.assert_allclose(out, a.sum(axis=(0, 2)))


def test_backward_deconvolution_data_with_inconsistent_shapes_is_refused():
    # used to die with SIGFPE in the native kernel
    a, b, c = (mx.sym.var(n) for n in "abc")
    y = mx.sym._backward_Deconvolution_data(a, b, c, kernel=(1,), num_group=3)
    with pytest.raises(MXNetError, match="_backward_Deconvolution_data: ograd must be 3-D"):
        _bind(y, a=(2, 1), b=(1, 16, 12, 12), c=(1, 3, 5, 5))
    y = mx.sym._backward_Deconvolution_data(a, b, c, kernel=(1, 1), num_group=3)
    with pytest.raises(MXNetError, match="channels"):
        _bind(y, a=(1, 3, 5, 5), b=(16, 1, 1, 1), c=(1, 3, 5, 5))


def test_backward_fully_connected_with_zero_hidden_is_refused():
    # used to raise IndexError / ZeroDivisionError inside the lowering
    a, b, c = (mx.sym.var(n) for n in "abc")
    y = mx.sym._backward_FullyConnected_data(a, b, c, num_hidden=0)
    with pytest.raises(MXNetError, match="num_hidden must be at least 1"):
        _bind(y, a=(2, 3), b=(3, 4), c=(2, 4))
    with pytest.raises(MXNetError, match="num_hidden must be at least 1"):
        _bind(mx.sym.FullyConnected(mx.sym.var("x"), num_hidden=0), x=(2, 4))


def test_backward_fully_connected_checks_ograd_against_the_forward_output():
    a, b, c = (mx.sym.var(n) for n in "abc")
    y = mx.sym._backward_FullyConnected_data(a, b, c, num_hidden=3)
    with pytest.raises(MXNetError, match="do not match the FullyConnected"):
        _bind(y, a=(2, 5), b=(3, 4), c=(2, 4))
    ex = _bind(y, a=(2, 3), b=(3, 4), c=(2, 4))
    dy, w = np.ones((2, 3), np.float32), np.arange(12, dtype=np.float32).reshape(3, 4)
    out = ex.forward(a=mx.nd.array(dy), b=mx.nd.array(w))[0].asnumpy()
    np.testing.assert_allclose(out, dy @ w)


def test_check_shape_refuses_what_no_kernel_can_take():
    assert check_shape("op", "input 'x'", (2, 0, 3)) == (2, 0, 3)
    assert check_shape("op", "x", None) is None
    with pytest.raises(MXNetError, match="op: x shape .* negative"):
        check_shape("op", "x", (2, -1))
    with pytest.raises(MXNetError, match="more than the 2147483647"):
        check_shape("op", "x", (MAX_TENSOR_ELEMENTS, 2))
    with pytest.raises(MXNetError, match="dimensions"):
        check_shape("op", "x", (1,) * 33)
    with pytest.raises(MXNetError, match="tuple of ints"):
        check_shape("op", "x", (2.5, 1))


@pytest.mark.parametrize("shape", [(True, 2), (np.bool_(True), 2), (1.0, 2), (2, "3"),
                                   (MAX_TENSOR_ELEMENTS + 1,), (2 ** 16, 2 ** 16, 0), (0, -3)])
def test_check_shape_tuple_fast_path_refuses_the_same(shape):
    """Plain tuples take a quick path; bools, floats, strings, negative or too many elements
    are still refused."""
    with pytest.raises(MXNetError):
        check_shape("op", "x", shape)


@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 4), (MAX_TENSOR_ELEMENTS,), (1,) * 32,
                                   [2, 3], (np.int64(2), 3), (np.int32(0), np.uint8(7))])
def test_check_shape_returns_plain_int_tuples(shape):
    got = check_shape("op", "x", shape)
    assert type(got) is tuple and got == tuple(int(d) for d in shape)
    assert all(type(d) is int for d in got)


def test_merge_shape_of_equal_and_partial_shapes():
    assert merge_shape("op", "x", (2, 3), (2, 3)) == (2, 3)
    assert merge_shape("op", "x", (2, 0), [2, 5]) == (2, 5)
    assert merge_shape("op", "x", (0, 3), (2, 3)) == (2, 3)
    assert merge_shape("op", "x", None, [4]) == (4,)
    assert merge_shape("op", "x", [4], None) == (4,)
    with pytest.raises(MXNetError, match="shape mismatch"):
        merge_shape("op", "x", (2, 3), (2, 4))
    with pytest.raises(MXNetError, match="shape mismatch"):
        merge_shape("op", "x", (2, 3), (2, 3, 1))


def test_infer_shape_checked_validates_arity_and_outputs():
    relu = get_op("relu")
    attrs = relu.parse({})
    assert relu.infer_shape_checked(attrs, [(2, 3)]) == ([(2, 3)], [(2, 3)])
    with pytest.raises(MXNetError, match=r"relu: expected 1 inputs \['data'\], got 2"):
        relu.infer_shape_checked(attrs, [(2, 3), (2, 3)])
    with pytest.raises(MXNetError, match="negative"):
        relu.infer_shape_checked(attrs, [(2, -3)])
    bcast = get_op("broadcast_to")
    with pytest.raises(MXNetError, match="elements"):
        bcast.infer_shape_checked(bcast.parse({"shape": (2 ** 40, 2 ** 10)}), [(1, 1)])


def test_huge_declared_shapes_are_refused_before_allocation():
    with pytest.raises(MXNetError, match="elements"):
        _bind(mx.sym.broadcast_to(mx.sym.var("x"), shape=(99999999999,)), x=(1,))


def test_forward_shapes_merges_gradients_with_the_forward_outputs():
    ins, ograds = forward_shapes("_g", "FullyConnected", {"num_hidden": 3, "no_bias": True},
                                 [(2, 4), None], {0: None})
    assert ins == [(2, 4), (3, 4)] and ograds == {0: (2, 3)}
    with pytest.raises(MXNetError, match="_g: inputs do not match the FullyConnected"):
        forward_shapes("_g", "FullyConnected", {"num_hidden": 3, "no_bias": True},
                       [(2, 4), None], {0: (2, 5)})


def test_gradient_op_declarations_name_real_inputs_and_outputs():
    """forward_inputs / forward_outputs must name inputs of both ops (a typo would silently
    skip the check)."""
    ops = {op.name: op for op in OPS.values() if op.forward_op is not None}
    assert {"_backward_Pooling", "_backward_BatchNorm", "_backward_dot", "_backward_RNN"} <= set(ops)
    dynamic = {"LeakyReLU": {"gamma"}}   # inputs that only some attributes declare
    rnn = {"data", "parameters", "state", "state_cell", "sequence_length"}
    for op in ops.values():
        fwd = get_op(op.forward_op)
        fwd_names = rnn if fwd.name == "RNN" else set(fwd.inputs) | dynamic.get(fwd.name, set())
        mine = set(op.inputs)
        if op.name == "_backward_RNN":
            mine = rnn | {"ograd_output", "ograd_hy", "ograd_cy"}
        assert set(op.forward_inputs) <= mine, op.name
        assert set(op.forward_inputs.values()) <= fwd_names, op.name
        assert set(op.forward_outputs) <= mine, op.name


@pytest.mark.parametrize("name", ["Concat", "stack", "SliceChannel", "UpSampling"])
def test_counts_are_bounded_when_parsed(name):
    op = get_op(name)
    key = "num_outputs" if "num_outputs" in op.params else "num_args"
    with pytest.raises(MXNetError, match=f"count between 0 and {MAX_COUNT}"):
        op.parse({key: "99999999999"})


def test_every_registered_op_has_checked_inference():
    for name in list_ops():
        assert callable(OPS[name].infer_shape_checked)
