"""Tests for the shape operators (symjit/ops/shape.py).

Every op: forward against an independent numpy formulation written here (explicit loops for
the index-driven ops), gradient against finite differences, partial shape inference, and
MXNet-style errors naming the op. Expected shapes of the special Reshape codes and the values
of the depth_to_space/slice/slice_axis/slice_like examples are MXNet's documented ones.
"""
from __future__ import annotations

import numpy as np
import pytest

from symjit import autograd, nd
from symjit.base import MXNetError
from symjit.ops.registry import apply_numpy, get_op
from symjit.test_utils import check_op_gradient

RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.uniform(-1, 1, size=shape)


def fwd(op, inputs, **attrs):
    """Output 0 of op's reference implementation."""
    return apply_numpy(op, inputs, attrs)[0]


def fwd_all(op, inputs, **attrs):
    return apply_numpy(op, inputs, attrs)


def infer(op_name, shapes, **attrs):
    op = get_op(op_name)
    return op.infer_shape(op.parse(attrs), list(shapes))


def infer_types(op_name, types, **attrs):
    op = get_op(op_name)
    return op.infer_type(op.parse(attrs), list(types))


# --------------------------------------------------------------------------------------
# Reshape
# --------------------------------------------------------------------------------------

RESHAPE_CASES = [  # (input shape, shape codes, reverse, output shape) from MXNet's documentation
    ((2, 3, 4), (4, 0, 2), False, (4, 3, 2)),
    ((2, 3, 4), (2, 0, 0), False, (2, 3, 4)),
    ((2, 3, 4), (6, 1, -1), False, (6, 1, 4)),
    ((2, 3, 4), (3, -1, 8), False, (3, 1, 8)),
    ((2, 3, 4), (-1,), False, (24,)),
    ((2, 3, 4), (-2,), False, (2, 3, 4)),
    ((2, 3, 4), (2, -2), False, (2, 3, 4)),
    ((2, 3, 4), (-2, 1, 1), False, (2, 3, 4, 1, 1)),
    ((2, 3, 4), (-3, 4), False, (6, 4)),
    ((2, 3, 4, 5), (-3, -3), False, (6, 20)),
    ((2, 3, 4), (0, -3), False, (2, 12)),
    ((2, 3, 4), (-3, -2), False, (6, 4)),
    ((2, 3, 4), (-4, 1, 2, -2), False, (1, 2, 3, 4)),
    ((2, 3, 4), (2, -4, -1, 3, -2), False, (2, 1, 3, 4)),
    ((10, 5, 4), (-1, 0), False, (40, 5)),
    ((10, 5, 4), (-1, 0), True, (50, 4)),
    ((2, 3, 4), (-4, -1, 1, -2), False, (2, 1, 3, 4)),
    # -1 after codes that change the dim count is placed at its output position
    ((2, 3, 4), (-4, 1, 2, -1), False, (1, 2, 12)),
    ((2, 3, 4), (-2, -1), False, (2, 3, 4, 1)),
]


@pytest.mark.parametrize("ishape, codes, reverse, oshape", RESHAPE_CASES)
def test_reshape_special_codes(ishape, codes, reverse, oshape):
    x = rand(*ishape)
    _, (out,) = infer("Reshape", [ishape], shape=codes, reverse=reverse)
    assert out == oshape
    y = fwd("Reshape", [x], shape=codes, reverse=reverse)
    assert y.shape == oshape
    np.testing.assert_array_equal(y, np.reshape(x, oshape))
    assert not np.shares_memory(y, x)


def test_reshape_mxnet_string_attrs_and_alias():
    x = rand(2, 3, 4)
    y = fwd("reshape", [x], shape="(-1, 0)", reverse="True")
    assert y.shape == (6, 4)


def test_reshape_legacy_target_shape():
    x = rand(2, 3, 4)
    assert fwd("Reshape", [x], target_shape=(0, 4)).shape == (6, 4)
    assert fwd("Reshape", [x], target_shape=(5, 0), keep_highest=True).shape == (2, 12)


def test_reshape_partial_shapes():
    # unknown input dim propagates; -3 of an unknown dim is unknown
    assert infer("Reshape", [(0, 3, 4)], shape=(-3, -2)) == ([(0, 3, 4)], [(0, 4)])
    assert infer("Reshape", [(0, 3, 4)], shape=(-1, 0)) == ([(0, 3, 4)], [(0, 3)])
    # the single unknown input dim is deduced from a fully known output
    assert infer("Reshape", [(0, 12)], shape=(2, 3, 4)) == ([(2, 12)], [(2, 3, 4)])
    assert infer("Reshape", [(3, 0)], shape=(-4, 1, 3, 4, 2)) == ([(3, 8)], [(1, 3, 4, 2)])
    assert infer("Reshape", [None], shape=(2, 3)) == ([None], [None])
    # two unknown dims: nothing to deduce
    assert infer("Reshape", [(0, 0)], shape=(2, 3)) == ([(0, 0)], [(2, 3)])


@pytest.mark.parametrize("ishape, codes", [
    ((2, 3), (4,)),             # size mismatch
    ((2, 3), (-1, -1)),         # two inferred dims
    ((2, 3), (0, 0, 0)),        # copies a dim the input lacks
    ((2, 3), (0, -3)),          # merges past the end
    ((2, 3), (-4, 1)),          # -4 needs two following values
    ((6, 4), (-4, 4, 2, 0)),    # 4*2 != 6
    ((6, 4), (-4, -1, -1, 0)),  # both split dims inferred
    ((2, 3), (-5, 6)),          # unknown code
    ((2, 3), (5, -1)),          # -1 cannot make the sizes agree
])
def test_reshape_errors(ishape, codes):
    with pytest.raises(MXNetError, match="Reshape"):
        infer("Reshape", [ishape], shape=codes)
    with pytest.raises(MXNetError, match="Reshape"):
        fwd("Reshape", [np.zeros(ishape)], shape=codes)


def test_reshape_gradient():
    check_op_gradient("Reshape", [rand(2, 3, 2)], {"shape": (-3, -4, 1, -1)})
    check_op_gradient("reshape_like", [rand(2, 6), rand(3, 4)], {}, wrt=[0])


def test_reshape_through_ndarray():
    x = nd.array(np.arange(24).reshape(2, 3, 4))
    y = x.reshape(4, -1)
    assert y.shape == (4, 6)
    np.testing.assert_array_equal(y.asnumpy(), np.arange(24).reshape(4, 6))
    assert x.reshape((-1,)).shape == (24,)
    assert x.reshape(shape=(0, -1)).shape == (2, 12)
    z = nd.reshape(x, shape=(0, -3), reverse=True)  # right to left: -3 merges the last two
    assert z.shape == (2, 12)
    with pytest.raises(MXNetError, match="Reshape"):
        x.reshape(5, 5)
    x.attach_grad()
    with autograd.record():
        y = x.reshape(-1) * nd.array(np.arange(24))
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), np.arange(24).reshape(2, 3, 4))


def test_reshape_like():
    lhs, rhs = rand(30, 7), rand(15, 2, 4)
    y = fwd("reshape_like", [lhs, rhs], lhs_begin=0, lhs_end=1, rhs_begin=0, rhs_end=2)
    np.testing.assert_array_equal(y, lhs.reshape(15, 2, 7))
    y = fwd("reshape_like", [rand(2, 12), rand(4, 6)])
    assert y.shape == (4, 6)
    lhs = rand(6, 4)
    y = fwd("reshape_like", [lhs, rand(5, 2, 3)], lhs_begin=-2, lhs_end=1, rhs_begin=1)
    np.testing.assert_array_equal(y, lhs.reshape(2, 3, 4))
    with pytest.raises(MXNetError, match="reshape_like"):
        fwd("reshape_like", [rand(2, 3), rand(4, 2)])
    assert infer("reshape_like", [(0, 6), (3, 4)]) == ([(2, 6), (3, 4)], [(3, 4)])
    assert nd.reshape_like(nd.ones((2, 6)), nd.ones((3, 4))).shape == (3, 4)


# --------------------------------------------------------------------------------------
# Flatten, transpose, expand_dims, squeeze, SwapAxis, reverse
# --------------------------------------------------------------------------------------

def test_flatten():
    x = rand(2, 3, 4)
    np.testing.assert_array_equal(fwd("Flatten", [x]), x.reshape(2, 12))
    assert fwd("flatten", [rand(5)]).shape == (5, 1)
    assert infer("Flatten", [(0, 3, 4)])[1] == [(0, 12)]
    assert infer("Flatten", [(2, 0, 4)])[1] == [(2, 0)]
    check_op_gradient("Flatten", [rand(2, 2, 3)])
    assert nd.ones((2, 3, 4)).flatten().shape == (2, 12)


@pytest.mark.parametrize("shape, axes, perm", [
    ((2, 3, 4), (), (2, 1, 0)),
    ((2, 3, 4), (1, 0, 2), (1, 0, 2)),
    ((2, 3, 4), (-1, 0, 1), (2, 0, 1)),
    ((2, 3, 4, 5), (3, 1, 0, 2), (3, 1, 0, 2)),
    ((5,), (), (0,)),
])
def test_transpose(shape, axes, perm):
    x = rand(*shape)
    y = fwd("transpose", [x], axes=axes)
    expected = np.empty([shape[p] for p in perm])
    for idx in np.ndindex(*expected.shape):
        src = [0] * len(shape)
        for out_pos, p in enumerate(perm):
            src[p] = idx[out_pos]
        expected[idx] = x[tuple(src)]
    np.testing.assert_array_equal(y, expected)
    check_op_gradient("transpose", [x[tuple(slice(0, 2) for _ in shape)]], {"axes": axes})


def test_transpose_shapes_and_errors():
    assert infer("transpose", [(0, 3, 4)])[1] == [(4, 3, 0)]
    assert infer("transpose", [(0, 3, 4)], axes=(1, 2, 0))[1] == [(3, 4, 0)]
    for axes in [(0, 1), (0, 0, 1), (0, 1, 3)]:
        with pytest.raises(MXNetError, match="transpose"):
            infer("transpose", [(2, 3, 4)], axes=axes)
    v = nd.array([1, 2, 3, 4])
    np.testing.assert_array_equal(v.T.asnumpy(), [1, 2, 3, 4])
    m = nd.array([[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(m.T.asnumpy(), [[1, 4], [2, 5], [3, 6]])


def test_expand_dims():
    x = rand(2, 3)
    assert fwd("expand_dims", [x], axis=0).shape == (1, 2, 3)
    assert fwd("expand_dims", [x], axis=2).shape == (2, 3, 1)
    assert fwd("expand_dims", [x], axis=-1).shape == (2, 3, 1)
    assert fwd("expand_dims", [x], axis=-3).shape == (1, 2, 3)
    np.testing.assert_array_equal(fwd("expand_dims", [x], axis=1)[:, 0, :], x)
    assert infer("expand_dims", [(0, 3)], axis=1)[1] == [(0, 1, 3)]
    for axis in (3, -4):
        with pytest.raises(MXNetError, match="expand_dims"):
            fwd("expand_dims", [x], axis=axis)
    check_op_gradient("expand_dims", [rand(2, 3)], {"axis": 1})


def test_squeeze():
    x = rand(1, 3, 1, 2)
    assert fwd("squeeze", [x]).shape == (3, 2)
    assert fwd("squeeze", [x], axis=2).shape == (1, 3, 2)
    assert fwd("squeeze", [x], axis=(0, -2)).shape == (3, 2)
    np.testing.assert_array_equal(fwd("squeeze", [x]), x[0, :, 0, :])
    assert fwd("squeeze", [rand(1, 1)]).shape == (1,)
    assert infer("squeeze", [(1, 0, 1)], axis=0)[1] == [(0, 1)]
    with pytest.raises(MXNetError, match="squeeze"):
        fwd("squeeze", [x], axis=1)
    with pytest.raises(MXNetError, match="squeeze"):
        fwd("squeeze", [x], axis=4)
    check_op_gradient("squeeze", [rand(1, 3, 1)], {"axis": (0,)})


def test_swapaxis():
    x = rand(2, 3, 4)
    y = fwd("SwapAxis", [x], dim1=0, dim2=2)
    assert y.shape == (4, 3, 2)
    for i, j, k in np.ndindex(2, 3, 4):
        assert y[k, j, i] == x[i, j, k]
    np.testing.assert_array_equal(fwd("swapaxes", [x], dim1=-1, dim2=1), np.swapaxes(x, 2, 1))
    assert infer("SwapAxis", [(0, 3, 4)], dim1=0, dim2=1)[1] == [(3, 0, 4)]
    with pytest.raises(MXNetError, match="SwapAxis"):
        fwd("SwapAxis", [x], dim1=0, dim2=3)
    check_op_gradient("SwapAxis", [rand(2, 3, 2)], {"dim1": 0, "dim2": 2})
    assert nd.ones((2, 3)).swapaxes(0, 1).shape == (3, 2)


def test_reverse():
    x = rand(2, 3, 4)
    y = fwd("reverse", [x], axis=1)
    for i, j, k in np.ndindex(2, 3, 4):
        assert y[i, j, k] == x[i, 2 - j, k]
    y = fwd("flip", [x], axis=(0, -1))
    for i, j, k in np.ndindex(2, 3, 4):
        assert y[i, j, k] == x[1 - i, j, 3 - k]
    with pytest.raises(MXNetError, match="reverse"):
        fwd("flip", [x], axis=3)
    check_op_gradient("flip", [rand(2, 3)], {"axis": (0, 1)})
    np.testing.assert_array_equal(nd.flip(nd.array([1, 2, 3]), axis=0).asnumpy(), [3, 2, 1])


# --------------------------------------------------------------------------------------
# Broadcasting, tile, repeat
# --------------------------------------------------------------------------------------

def test_broadcast_to():
    x = rand(1, 3, 1)
    y = fwd("broadcast_to", [x], shape=(2, 3, 4))
    for i, j, k in np.ndindex(2, 3, 4):
        assert y[i, j, k] == x[0, j, 0]
    assert fwd("broadcast_to", [x], shape=(2, 0, 4)).shape == (2, 3, 4)
    assert infer("broadcast_to", [(1, 0)], shape=(5, 0))[1] == [(5, 0)]
    with pytest.raises(MXNetError, match="broadcast_to"):
        fwd("broadcast_to", [rand(2, 3)], shape=(3, 3))
    with pytest.raises(MXNetError, match="broadcast_to"):
        fwd("broadcast_to", [rand(2, 3)], shape=(1, 2, 3))
    check_op_gradient("broadcast_to", [rand(1, 3, 1)], {"shape": (2, 3, 2)})


def test_broadcast_axis():
    x = rand(1, 3, 1)
    y = fwd("broadcast_axis", [x], axis=(0, 2), size=(2, 4))
    assert y.shape == (2, 3, 4)
    for i, j, k in np.ndindex(2, 3, 4):
        assert y[i, j, k] == x[0, j, 0]
    assert fwd("broadcast_axes", [x], axis=-1, size=5).shape == (1, 3, 5)
    with pytest.raises(MXNetError, match="broadcast_axis"):
        fwd("broadcast_axis", [x], axis=1, size=4)
    with pytest.raises(MXNetError, match="broadcast_axis"):
        fwd("broadcast_axis", [x], axis=(0, 2), size=(2,))
    check_op_gradient("broadcast_axis", [rand(1, 3)], {"axis": 0, "size": 3})


def test_broadcast_like():
    lhs, rhs = rand(1, 3, 1), rand(2, 3, 4)
    y = fwd("broadcast_like", [lhs, rhs])
    np.testing.assert_array_equal(y, np.tile(lhs, (2, 1, 4)))
    y = fwd("broadcast_like", [rand(1, 3), rand(4, 5, 6)], lhs_axes=(0,), rhs_axes=(-1,))
    assert y.shape == (6, 3)
    assert fwd("broadcast_like", [rand(3), rand(2, 3)]).shape == (2, 3)  # right-aligned lower rank
    with pytest.raises(MXNetError, match="broadcast_like"):
        fwd("broadcast_like", [rand(2, 3), rand(3, 3)])
    with pytest.raises(MXNetError, match="broadcast_like"):
        fwd("broadcast_like", [rand(2, 3), rand(3, 3)], lhs_axes=(0,), rhs_axes=(1,))
    assert infer("broadcast_like", [(1, 3), (4, 0)])[1] == [(4, 3)]
    check_op_gradient("broadcast_like", [rand(1, 3), rand(2, 3)], wrt=[0])


@pytest.mark.parametrize("shape, reps, expected", [
    ((2, 2), (2, 3), (4, 6)),
    ((2, 3), (2,), (2, 6)),
    ((2, 2), (2, 2, 3), (2, 4, 6)),
    ((3,), (), (3,)),
])
def test_tile(shape, reps, expected):
    from symjit.util import np_shape
    x = rand(*shape)
    with np_shape(0 in reps):      # a zero-size result needs NumPy shape semantics
        y = fwd("tile", [x], reps=reps)
    assert y.shape == expected
    m = len(expected)
    xe = x.reshape((1,) * (m - x.ndim) + x.shape)
    for idx in np.ndindex(*expected):
        assert y[idx] == xe[tuple(i % d for i, d in zip(idx, xe.shape))]
    assert infer("tile", [shape], reps=reps)[1] == [expected]
    with np_shape(0 in reps):
        check_op_gradient("tile", [x], {"reps": reps})



def test_tile_errors_and_partial():
    assert infer("tile", [(0, 3)], reps=(2, 2))[1] == [(0, 6)]
    with pytest.raises(MXNetError, match="tile"):
        fwd("tile", [rand(2)], reps=(-1,))


@pytest.mark.parametrize("shape, repeats, axis", [
    ((2, 3), 2, None), ((2, 3), 3, 1), ((2, 3), 2, 0), ((2, 3, 2), 2, -1), ((2, 2), 1, None)])
def test_repeat(shape, repeats, axis):
    x = rand(*shape)
    y = fwd("repeat", [x], repeats=repeats, axis=axis)
    if axis is None:
        flat = x.reshape(-1)
        expected = np.array([flat[i // repeats] for i in range(flat.size * repeats)])
    else:
        a = axis % x.ndim
        oshape = list(shape)
        oshape[a] *= repeats
        expected = np.empty(oshape)
        for idx in np.ndindex(*oshape):
            src = list(idx)
            src[a] //= repeats
            expected[idx] = x[tuple(src)]
    np.testing.assert_array_equal(y, expected)
    assert infer("repeat", [shape], repeats=repeats, axis=axis)[1] == [expected.shape]
    check_op_gradient("repeat", [x], {"repeats": repeats, "axis": axis})


def test_repeat_edge_cases():
    assert fwd("repeat", [rand(2, 3)], repeats=0, axis=1).shape == (0,)  # MXNet: empty 1-D
    with pytest.raises(MXNetError, match="repeat"):
        fwd("repeat", [rand(2, 3)], repeats=-1)
    with pytest.raises(MXNetError, match="repeat"):
        fwd("repeat", [rand(2, 3)], repeats=2, axis=2)
    assert infer("repeat", [(0, 3)], repeats=2)[1] == [(0,)]
    assert infer("repeat", [(0, 3)], repeats=2, axis=1)[1] == [(0, 6)]


# --------------------------------------------------------------------------------------
# Concat, stack, SliceChannel
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_concat(dim):
    shapes = {0: [(1, 3, 2), (2, 3, 2), (1, 3, 2)], 1: [(2, 1, 2), (2, 2, 2), (2, 1, 2)],
              -1: [(2, 3, 1), (2, 3, 2), (2, 3, 1)]}[dim]
    xs = [rand(*s) for s in shapes]
    y = fwd("Concat", xs, num_args=3, dim=dim)
    a = dim % 3
    expected_shape = list(shapes[0])
    expected_shape[a] = sum(s[a] for s in shapes)
    assert y.shape == tuple(expected_shape)
    off = 0
    for x in xs:
        sl = [slice(None)] * 3
        sl[a] = slice(off, off + x.shape[a])
        np.testing.assert_array_equal(y[tuple(sl)], x)
        off += x.shape[a]
    check_op_gradient("Concat", xs, {"num_args": 3, "dim": dim})


def test_concat_shapes_and_errors():
    op = get_op("concat")
    assert op.input_names(op.parse({"num_args": 3})) == ["arg0", "arg1", "arg2"]
    ins, outs = infer("Concat", [(2, 3), (0, 3), None], num_args=3, dim=0)
    assert outs == [(0, 3)] and ins[2] is None and ins[1] == (0, 3)
    ins, outs = infer("Concat", [(2, 0), (4, 3)], num_args=2, dim=0)
    assert outs == [(6, 3)] and ins == [(2, 3), (4, 3)]
    with pytest.raises(MXNetError, match="Concat"):
        fwd("Concat", [rand(2, 3), rand(2, 4)], num_args=2, dim=0)
    with pytest.raises(MXNetError, match="Concat"):
        fwd("Concat", [rand(2, 3), rand(2, 3, 1)], num_args=2, dim=0)
    with pytest.raises(MXNetError, match="Concat"):
        fwd("Concat", [rand(2, 3), rand(2, 3)], num_args=2, dim=2)
    a, b = nd.ones((2, 3)), nd.zeros((1, 3))
    c = nd.concat(a, b, dim=0)
    np.testing.assert_array_equal(c.asnumpy(), np.concatenate([np.ones((2, 3)), np.zeros((1, 3))]))
    assert nd.concatenate([a, b], axis=0).shape == (3, 3)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_stack(axis):
    xs = [rand(2, 3) for _ in range(3)]
    y = fwd("stack", xs, axis=axis, num_args=3)
    a = axis % 3
    for i, x in enumerate(xs):
        sl = [slice(None)] * 3
        sl[a] = i
        np.testing.assert_array_equal(y[tuple(sl)], x)
    assert infer("stack", [(2, 0), None, (0, 3)], axis=axis, num_args=3)[1] == [
        tuple(np.insert(np.array([2, 3]), a, 3))]
    check_op_gradient("stack", xs, {"axis": axis, "num_args": 3})
    with pytest.raises(MXNetError, match="stack"):
        fwd("stack", [rand(2, 3), rand(3, 2)], num_args=2)
    assert nd.stack(nd.ones(2), nd.zeros(2), axis=1).shape == (2, 2)


def test_slice_channel():
    x = rand(2, 6, 2)
    outs = fwd_all("SliceChannel", [x], num_outputs=3, axis=1)
    assert len(outs) == 3
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(o, x[:, 2 * i:2 * i + 2, :])
    outs = fwd_all("split", [x], num_outputs=2, axis=-1, squeeze_axis=True)
    np.testing.assert_array_equal(outs[1], x[:, :, 1])
    op = get_op("SliceChannel")
    assert op.output_names(op.parse({"num_outputs": 2})) == ["output0", "output1"]
    assert infer("SliceChannel", [(0, 6)], num_outputs=3)[1] == [(0, 2)] * 3
    assert infer("SliceChannel", [(4, 0)], num_outputs=2, axis=1)[1] == [(4, 0)] * 2
    with pytest.raises(MXNetError, match="SliceChannel"):
        fwd("SliceChannel", [x], num_outputs=4, axis=1)
    with pytest.raises(MXNetError, match="SliceChannel"):
        fwd("SliceChannel", [x], num_outputs=3, axis=1, squeeze_axis=True)
    with pytest.raises(MXNetError, match="SliceChannel"):
        fwd("SliceChannel", [x], num_outputs=2, axis=3)
    check_op_gradient("SliceChannel", [rand(2, 4)], {"num_outputs": 2, "axis": 1})
    check_op_gradient("SliceChannel", [rand(3, 2)], {"num_outputs": 3, "axis": 0, "squeeze_axis": True})
    parts = nd.split(nd.array(np.arange(6).reshape(2, 3)), num_outputs=3, axis=1)
    assert [p.shape for p in parts] == [(2, 1)] * 3
    np.testing.assert_array_equal(parts[2].asnumpy(), [[2], [5]])


def test_split_autograd_with_unused_output():
    x = nd.array(np.arange(8.0).reshape(2, 4))
    x.attach_grad()
    with autograd.record():
        a, b = nd.split(x, num_outputs=2, axis=1)
        y = a * 3
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [[3, 3, 0, 0], [3, 3, 0, 0]])


# --------------------------------------------------------------------------------------
# slice, _slice_assign, slice_axis, slice_like
# --------------------------------------------------------------------------------------

def test_slice_documented_examples():
    x = np.array([[1., 2., 3., 4.], [5., 6., 7., 8.], [9., 10., 11., 12.]])
    np.testing.assert_array_equal(fwd("slice", [x], begin=(0, 1), end=(2, 4)), [[2., 3., 4.], [6., 7., 8.]])
    np.testing.assert_array_equal(fwd("slice", [x], begin=(None, 0), end=(None, 3), step=(-1, 2)),
                                  [[9., 11.], [5., 7.], [1., 3.]])
    np.testing.assert_array_equal(fwd("crop", [x], begin="(None, 0)", end="(None, 3)", step="(-1, 2)"),
                                  [[9., 11.], [5., 7.], [1., 3.]])


@pytest.mark.parametrize("begin, end, step", [
    ((1,), (3,), ()), ((None, -1), (None, 0), (None, -1)), ((-2, None), (None, None), (1, 2)),
    ((0, 1, 1), (2, 3, 4), (1, 1, 2)), ((5,), (7,), ()), ((3, None), (-5, None), (-2, None)),
])
def test_slice_against_python_slicing(begin, end, step):
    x = rand(4, 3, 5)
    y = fwd("slice", [x], begin=begin, end=end, step=step)
    key = []
    for i in range(3):
        if i < len(begin):
            key.append(slice(begin[i], end[i], step[i] if step else None))
        else:
            key.append(slice(None))
    expected = x[tuple(key)]
    np.testing.assert_array_equal(y, expected)
    assert infer("slice", [x.shape], begin=begin, end=end, step=step)[1] == [expected.shape]
    if y.size:
        check_op_gradient("slice", [x[:, :2, :3]], {"begin": begin, "end": end, "step": step})


def test_slice_partial_and_errors():
    assert infer("slice", [(0, 5)], begin=(1, 1), end=(3, 4))[1] == [(0, 3)]
    with pytest.raises(MXNetError, match="slice"):
        fwd("slice", [rand(3, 3)], begin=(0,), end=(2,), step=(0,))
    with pytest.raises(MXNetError, match="slice"):
        fwd("slice", [rand(3, 3)], begin=(0, 0, 0), end=(1, 1, 1))
    with pytest.raises(MXNetError, match="slice"):
        fwd("slice", [rand(3, 3)], begin=(0, 0), end=(1,))
    with pytest.raises(MXNetError, match="slice"):
        fwd("slice", [rand(3, 3)], begin=(0,), end=(1,), step=(1, 1))


def test_slice_assign():
    lhs, rhs = rand(4, 5), rand(2, 2)
    y = fwd("_slice_assign", [lhs, rhs], begin=(1, None), end=(3, None), step=(None, 3))
    expected = lhs.copy()
    for i in range(2):
        for j in range(2):
            expected[1 + i, 3 * j] = rhs[i, j]
    np.testing.assert_array_equal(y, expected)
    with pytest.raises(MXNetError, match="_slice_assign"):
        fwd("_slice_assign", [lhs, rand(2, 3)], begin=(1, None), end=(3, None), step=(None, 3))
    y = fwd("_slice_assign_scalar", [lhs], scalar=7.0, begin=(None, 2), end=(None, 4))
    expected = lhs.copy()
    expected[:, 2:4] = 7.0
    np.testing.assert_array_equal(y, expected)
    assert infer("_slice_assign", [(4, 5), None], begin=(1,), end=(3,)) == ([(4, 5), (2, 5)], [(4, 5)])
    attrs = {"begin": (1, None), "end": (3, None), "step": (None, 2)}
    check_op_gradient("_slice_assign", [rand(4, 3), rand(2, 2)], attrs)
    check_op_gradient("_slice_assign_scalar", [rand(4, 3)], {"scalar": 2.0, **attrs})


def test_slice_axis():
    x = np.array([[1., 2., 3., 4.], [5., 6., 7., 8.], [9., 10., 11., 12.]])
    np.testing.assert_array_equal(fwd("slice_axis", [x], axis=0, begin=1, end=3),
                                  [[5., 6., 7., 8.], [9., 10., 11., 12.]])
    np.testing.assert_array_equal(fwd("slice_axis", [x], axis=1, begin=0, end=2),
                                  [[1., 2.], [5., 6.], [9., 10.]])
    np.testing.assert_array_equal(fwd("slice_axis", [x], axis=1, begin=-3, end=-1),
                                  [[2., 3.], [6., 7.], [10., 11.]])
    np.testing.assert_array_equal(fwd("slice_axis", [x], axis=-1, begin=2, end=None), x[:, 2:])
    assert infer("slice_axis", [(0, 4)], axis=1, begin=1, end=None)[1] == [(0, 3)]
    assert infer("slice_axis", [(0, 4)], axis=0, begin=1, end=2)[1] == [(0, 4)]
    for attrs in [dict(axis=0, begin=2, end=1), dict(axis=0, begin=0, end=4), dict(axis=2, begin=0, end=1)]:
        with pytest.raises(MXNetError, match="slice_axis"):
            fwd("slice_axis", [x], **attrs)
    check_op_gradient("slice_axis", [rand(3, 4)], {"axis": -1, "begin": 1, "end": None})
    check_op_gradient("slice_axis", [rand(3, 4)], {"axis": 0, "begin": -2, "end": -1})
    assert nd.slice_axis(nd.array(x), 1, 1, 3).shape == (3, 2)


def test_slice_like():
    x = np.array([[1., 2., 3., 4.], [5., 6., 7., 8.], [9., 10., 11., 12.]])
    y = np.zeros((2, 3))
    np.testing.assert_array_equal(fwd("slice_like", [x, y]), [[1., 2., 3.], [5., 6., 7.]])
    np.testing.assert_array_equal(fwd("slice_like", [x, y], axes=(0, 1)), [[1., 2., 3.], [5., 6., 7.]])
    np.testing.assert_array_equal(fwd("slice_like", [x, y], axes=(0,)), [[1., 2., 3., 4.], [5., 6., 7., 8.]])
    np.testing.assert_array_equal(fwd("slice_like", [x, y], axes=(-1,)),
                                  [[1., 2., 3.], [5., 6., 7.], [9., 10., 11.]])
    assert fwd("slice_like", [rand(2, 3, 4, 5), rand(1, 2, 3)], axes=(0, 2)).shape == (1, 3, 3, 5)
    with pytest.raises(MXNetError, match="slice_like"):
        fwd("slice_like", [rand(2, 3, 4, 5), rand(1, 2, 3)])
    with pytest.raises(MXNetError, match="slice_like"):
        fwd("slice_like", [rand(2, 3), rand(3, 3)])
    assert infer("slice_like", [(0, 4), (2, 3)], axes=(1,))[1] == [(0, 3)]
    ins, outs = infer_types("slice_like", ["float32", "int32"])
    assert outs == ["float32"] and ins == ["float32", "int32"]
    check_op_gradient("slice_like", [rand(3, 4), rand(2, 3)], {"axes": (1,)}, wrt=[0])


def test_getitem_through_ndarray():
    base = np.arange(24.0).reshape(4, 6)
    x = nd.array(base)
    np.testing.assert_array_equal(x[1:3].asnumpy(), base[1:3])
    np.testing.assert_array_equal(x[1].asnumpy(), base[1])
    x.attach_grad()
    with autograd.record():
        y = x[1:3, ::2]
        z = x[2]
        w = x[[0, 3, 3]]
        loss = y * 2 + 0
    loss.backward()
    expected = np.zeros((4, 6))
    expected[1:3, ::2] = 2
    np.testing.assert_array_equal(x.grad.asnumpy(), expected)
    np.testing.assert_array_equal(y.asnumpy(), base[1:3, ::2])
    np.testing.assert_array_equal(z.asnumpy(), base[2])
    np.testing.assert_array_equal(w.asnumpy(), base[[0, 3, 3]])
    with autograd.record():
        w = x[[0, 3, 3]]
    w.backward()
    expected = np.zeros((4, 6))
    expected[0] = 1
    expected[3] = 2
    np.testing.assert_array_equal(x.grad.asnumpy(), expected)


# --------------------------------------------------------------------------------------
# take, pick, one_hot, gather_nd, scatter_nd
# --------------------------------------------------------------------------------------

def _take_reference(a, idx, axis, mode):
    n = a.shape[axis]
    out = np.empty(a.shape[:axis] + idx.shape + a.shape[axis + 1:])
    for o in np.ndindex(*out.shape):
        j = int(idx[o[axis:axis + idx.ndim]])
        j = min(max(j, 0), n - 1) if mode == "clip" else j % n
        out[o] = a[o[:axis] + (j,) + o[axis + idx.ndim:]]
    return out


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_take(axis, mode):
    a = rand(3, 4, 2)
    idx = np.array([[0, 5], [-1, 2]])
    y = fwd("take", [a, idx], axis=axis, mode=mode)
    np.testing.assert_array_equal(y, _take_reference(a, idx, axis % 3, mode))
    assert infer("take", [a.shape, idx.shape], axis=axis)[1] == [y.shape]
    check_op_gradient("take", [a, idx], {"axis": axis, "mode": mode})


def test_take_details():
    a = rand(4, 3)
    np.testing.assert_array_equal(fwd("take", [a, np.array([1.7, 3.0])]), a[[1, 3]])  # floats truncate
    np.testing.assert_array_equal(fwd("take", [a, np.array([0, 3])], mode="raise"), a[[0, 3]])
    with pytest.raises(MXNetError, match="take"):
        fwd("take", [a, np.array([4])], mode="raise")
    with pytest.raises(MXNetError, match="take"):
        fwd("take", [a, np.array([0])], axis=2)
    assert infer("take", [(0, 3), (5,)], axis=1)[1] == [(0, 5)]
    # the indices keep their own dtype (MXNet binds unknown ones as float32)
    assert infer_types("take", ["float64", None]) == (["float64", None], ["float64"])
    assert infer_types("take", ["float64", "float32"]) == (["float64", "float32"], ["float64"])
    # duplicate indices accumulate in the gradient; the scatter-add's own gradient is a gather
    check_op_gradient("take", [a, np.array([1, 1, 2, 1])], {"axis": 0})
    check_op_gradient("_backward_take", [rand(3, 2), np.array([0, 2])], {"axis": 1, "shape": (3, 4)})
    g = fwd("_backward_take", [np.ones((3, 2)), np.array([1, 1])], axis=1, shape=(3, 4))
    np.testing.assert_array_equal(g, np.tile([0., 2., 0., 0.], (3, 1)))
    r = nd.take(nd.array(a), nd.array([2, 0]))
    np.testing.assert_array_equal(r.asnumpy(), a[[2, 0]].astype(np.float32))


def _pick_reference(x, idx, axis, mode, keepdims):
    n = x.shape[axis]
    reduced = x.shape[:axis] + x.shape[axis + 1:]
    idx = idx.reshape(reduced)
    out = np.empty(reduced)
    for o in np.ndindex(*reduced):
        j = int(idx[o])
        j = min(max(j, 0), n - 1) if mode == "clip" else j % n
        out[o] = x[o[:axis] + (j,) + o[axis:]]
    return np.expand_dims(out, axis) if keepdims else out


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_pick(axis, keepdims):
    x = rand(3, 4, 2)
    a = axis % 3
    reduced = x.shape[:a] + x.shape[a + 1:]
    idx = RNG.integers(-2, x.shape[a] + 2, size=reduced)
    for mode in ("clip", "wrap"):
        y = fwd("pick", [x, idx], axis=axis, keepdims=keepdims, mode=mode)
        np.testing.assert_array_equal(y, _pick_reference(x, idx, a, mode, keepdims))
    idx_kept = np.expand_dims(idx, a)  # index may also carry the picked axis as size 1
    y2 = fwd("pick", [x, idx_kept], axis=axis, keepdims=keepdims)
    np.testing.assert_array_equal(y2, _pick_reference(x, idx, a, "clip", keepdims))
    ins, outs = infer("pick", [x.shape, None], axis=axis, keepdims=keepdims)
    assert ins[1] == reduced and outs[0] == y.shape
    check_op_gradient("pick", [x, idx], {"axis": axis, "keepdims": keepdims})


def test_pick_errors_and_ndarray():
    with pytest.raises(MXNetError, match="pick"):
        fwd("pick", [rand(3, 4), np.zeros(4)], axis=1)
    with pytest.raises(MXNetError, match="pick"):
        fwd("pick", [rand(3, 4), np.zeros(3)], axis=None)
    with pytest.raises(MXNetError, match="pick"):
        fwd("pick", [rand(3, 4), np.zeros(3)], axis=2)
    x = nd.array([[1., 2.], [3., 4.], [5., 6.]])
    np.testing.assert_array_equal(nd.pick(x, nd.array([0, 1, 0]), axis=1).asnumpy(), [1., 4., 5.])
    np.testing.assert_array_equal(nd.pick(x, nd.array([0., 1.]), 0).asnumpy(), [1., 4.])
    check_op_gradient("_backward_pick", [rand(3), np.array([1, 0, 1])], {"axis": 1, "shape": (3, 2)})


def test_one_hot():
    idx = np.array([[0, 2], [5, -1]])
    y = fwd("one_hot", [idx], depth=3)
    expected = np.zeros((2, 2, 3))
    for i, j in np.ndindex(2, 2):
        if 0 <= idx[i, j] < 3:
            expected[i, j, idx[i, j]] = 1
    np.testing.assert_array_equal(y, expected)
    assert y.dtype == np.float32
    y = fwd("one_hot", [np.array([1., 0.])], depth=2, on_value=8, off_value=-1, dtype="int32")
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [[-1, 8], [8, -1]])
    assert infer("one_hot", [(0, 2)], depth=4)[1] == [(0, 2, 4)]
    assert infer_types("one_hot", ["int32"], depth=2, dtype="float64")[1] == ["float64"]
    with pytest.raises(MXNetError, match="one_hot"):
        fwd("one_hot", [idx], depth=-1)
    op = get_op("one_hot")
    from symjit.ops.registry import numpy_emitter
    g = op.grad(numpy_emitter(), op.parse({"depth": 3}), [idx.astype(np.float64)], [y], [np.ones((2, 2, 3))])
    np.testing.assert_array_equal(g[0], np.zeros((2, 2)))
    assert nd.one_hot(nd.array([1, 0]), 2).shape == (2, 2)


def test_gather_nd():
    data = np.arange(24.0).reshape(2, 3, 4)
    idx = np.array([[0, 1, -1], [2, 0, 1]])
    y = fwd("gather_nd", [data, idx])
    expected = np.stack([data[int(i) % 2, int(j) % 3] for i, j in idx.T])
    np.testing.assert_array_equal(y, expected)
    idx3 = np.array([[[1]], [[2]], [[3]]])  # M=3: picks scalars, output (1, 1)
    np.testing.assert_array_equal(fwd("gather_nd", [data, idx3]), [[data[1, 2, 3]]])
    assert infer("gather_nd", [(2, 3, 0), (2, 5)])[1] == [(5, 0)]
    with pytest.raises(MXNetError, match="gather_nd"):
        fwd("gather_nd", [data, np.array([[2], [0]])])
    with pytest.raises(MXNetError, match="gather_nd"):
        fwd("gather_nd", [data, np.array([0, 1])])
    with pytest.raises(MXNetError, match="gather_nd"):
        fwd("gather_nd", [data, np.zeros((4, 1))])
    check_op_gradient("gather_nd", [rand(2, 3, 2), np.array([[0, 1, 0], [2, 0, 2]])])
    check_op_gradient("_backward_gather_nd", [rand(3, 2), np.array([[0, 1, 0]])], {"shape": (2, 2)})
    g = fwd("_backward_gather_nd", [np.ones(3), np.array([[0, 1, 0]])], shape=(2,))
    np.testing.assert_array_equal(g, [2., 1.])


def test_scatter_nd():
    data = np.array([2., 3., 0.])
    idx = np.array([[1, 1, 0], [0, 1, 0]])
    y = fwd("scatter_nd", [data, idx], shape=(2, 2))
    np.testing.assert_array_equal(y, [[0., 0.], [2., 3.]])
    data = rand(2, 3)
    y = fwd("scatter_nd", [data, np.array([[1, 3]])], shape=(4, 3))
    expected = np.zeros((4, 3))
    expected[1], expected[3] = data[0], data[1]
    np.testing.assert_array_equal(y, expected)
    with pytest.raises(MXNetError, match="scatter_nd"):
        fwd("scatter_nd", [rand(3, 3), np.array([[1, 3]])], shape=(4, 3))
    check_op_gradient("scatter_nd", [rand(2, 3), np.array([[1, 3]])], {"shape": (4, 3)})


# --------------------------------------------------------------------------------------
# Pad, diag, depth/space, shape_array/size_array
# --------------------------------------------------------------------------------------

def _pad_reference(x, pw, mode, value):
    pairs = [(pw[2 * i], pw[2 * i + 1]) for i in range(x.ndim)]
    out = np.empty([n + b + a for n, (b, a) in zip(x.shape, pairs)])
    for o in np.ndindex(*out.shape):
        src = []
        for p, (b, _), n in zip(o, pairs, x.shape):
            i = p - b
            if 0 <= i < n:
                src.append(i)
            elif mode == "constant":
                src = None
                break
            elif mode == "edge":
                src.append(min(max(i, 0), n - 1))
            else:  # reflect (no repetition of the border element)
                src.append(-i if i < 0 else 2 * (n - 1) - i)
        out[o] = value if src is None else x[tuple(src)]
    return out


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
@pytest.mark.parametrize("shape, pw", [((1, 2, 3, 3), (0, 0, 0, 0, 1, 2, 2, 0)),
                                       ((1, 1, 2, 3, 3), (0, 0, 0, 0, 1, 0, 0, 1, 2, 1))])
def test_pad(mode, shape, pw):
    x = rand(*shape)
    y = fwd("Pad", [x], mode=mode, pad_width=pw, constant_value=1.5)
    np.testing.assert_array_equal(y, _pad_reference(x, pw, mode, 1.5))
    assert infer("pad", [shape], mode=mode, pad_width=pw)[1] == [y.shape]
    check_op_gradient("Pad", [x], {"mode": mode, "pad_width": pw, "constant_value": 1.5})
    check_op_gradient("_backward_Pad", [rand(*y.shape)], {"mode": mode, "pad_width": pw})


def test_pad_errors_and_seed_example():
    for shape, pw, mode in [((3, 3), (1, 1, 1, 1), "constant"),
                            ((1, 1, 3, 3), (1, 0, 0, 0, 1, 1, 1, 1), "constant"),
                            ((1, 1, 3, 3), (0, 0, 0, 0, 1, 1), "edge"),
                            ((1, 1, 3, 3), (0, 0, 0, 0, 3, 0, 0, 0), "reflect")]:
        with pytest.raises(MXNetError, match="Pad"):
            fwd("Pad", [np.zeros(shape)], mode=mode, pad_width=pw)
    with pytest.raises(MXNetError, match="Pad"):
        fwd("Pad", [np.zeros((1, 1, 2, 2))], pad_width=(0,) * 8)  # mode is required
    assert infer("Pad", [(0, 3, 0, 4)], mode="edge", pad_width=(0, 0, 0, 0, 1, 1, 2, 2))[1] == [(0, 3, 0, 8)]
    data = nd.array([1, 2, 3])  # E27
    padded = nd.pad(data.reshape(1, 1, 1, 3), mode="constant", pad_width=[0, 0, 0, 0, 0, 0, 0, 7],
                    constant_value=0)
    np.testing.assert_array_equal(padded.reshape(10).asnumpy(), [1, 2, 3, 0, 0, 0, 0, 0, 0, 0])


@pytest.mark.parametrize("shape, k, axis1, axis2", [
    ((3,), 0, 0, 1), ((3,), 1, 0, 1), ((2,), -2, 0, 1),
    ((3, 4), 0, 0, 1), ((3, 4), 2, 0, 1), ((3, 4), -1, 0, 1), ((3, 4), 3, 0, 1),
    ((2, 3, 4), 1, 0, 2), ((2, 3, 4), -1, -1, 1),
])
def test_diag(shape, k, axis1, axis2):
    x = rand(*shape)
    y = fwd("diag", [x], k=k, axis1=axis1, axis2=axis2)
    if x.ndim == 1:
        n = shape[0] + abs(k)
        expected = np.zeros((n, n))
        for i in range(shape[0]):
            expected[(i, i + k) if k >= 0 else (i - k, i)] = x[i]
    else:
        a1, a2 = axis1 % x.ndim, axis2 % x.ndim
        rest = [d for i, d in enumerate(shape) if i not in (a1, a2)]
        diag = [(i, i + k) if k >= 0 else (i - k, i) for i in range(max(shape))]
        diag = [(r, c) for r, c in diag if r < shape[a1] and c < shape[a2]]
        expected = np.zeros(rest + [len(diag)])
        for o in np.ndindex(*rest):
            for t, (r, c) in enumerate(diag):
                src = list(o)
                for ax, v in sorted([(a1, r), (a2, c)]):
                    src.insert(ax, v)
                expected[o + (t,)] = x[tuple(src)]
    np.testing.assert_array_equal(y, expected)
    assert infer("diag", [shape], k=k, axis1=axis1, axis2=axis2)[1] == [y.shape]
    check_op_gradient("diag", [x], {"k": k, "axis1": axis1, "axis2": axis2})


def test_diag_errors():
    with pytest.raises(MXNetError, match="diag"):
        fwd("diag", [rand(3, 3)], axis1=1, axis2=1)
    with pytest.raises(MXNetError, match="diag"):
        fwd("diag", [rand(3, 3)], axis1=0, axis2=2)
    check_op_gradient("_backward_diag", [rand(2, 2)], {"k": 1, "axis1": 0, "axis2": 2, "shape": (3, 2, 3)})


def test_depth_to_space_documented_example():
    x = np.arange(24.0).reshape(1, 4, 2, 3)
    expected = [[[[0, 6, 1, 7, 2, 8], [12, 18, 13, 19, 14, 20], [3, 9, 4, 10, 5, 11],
                  [15, 21, 16, 22, 17, 23]]]]
    np.testing.assert_array_equal(fwd("depth_to_space", [x], block_size=2), expected)
    np.testing.assert_array_equal(fwd("space_to_depth", [np.array(expected, dtype=float)], block_size=2), x)


def test_depth_space_general():
    b = 2
    x = rand(2, 8, 2, 3)
    y = fwd("depth_to_space", [x], block_size=b)
    assert y.shape == (2, 2, 4, 6)
    c2 = 2
    for n, c, h, w, i, j in np.ndindex(2, c2, 2, 3, b, b):
        assert y[n, c, h * b + i, w * b + j] == x[n, (i * b + j) * c2 + c, h, w]
    z = fwd("space_to_depth", [y], block_size=b)
    np.testing.assert_array_equal(z, x)
    assert infer("depth_to_space", [(0, 8, 2, 3)], block_size=2)[1] == [(0, 2, 4, 6)]
    assert infer("space_to_depth", [(1, 2, 4, 0)], block_size=2)[1] == [(1, 8, 2, 0)]
    with pytest.raises(MXNetError, match="depth_to_space"):
        fwd("depth_to_space", [rand(1, 6, 2, 2)], block_size=2)
    with pytest.raises(MXNetError, match="depth_to_space"):
        fwd("depth_to_space", [rand(4, 2, 2)], block_size=2)
    with pytest.raises(MXNetError, match="space_to_depth"):
        fwd("space_to_depth", [rand(1, 1, 3, 2)], block_size=2)
    with pytest.raises(MXNetError, match="space_to_depth"):
        fwd("space_to_depth", [rand(1, 1, 2, 2)], block_size=0)
    check_op_gradient("depth_to_space", [rand(1, 4, 2, 1)], {"block_size": 2})
    check_op_gradient("space_to_depth", [rand(1, 1, 2, 4)], {"block_size": 2})


def test_shape_and_size_array():
    x = rand(2, 3, 4)
    y = fwd("shape_array", [x])
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, [2, 3, 4])
    z = fwd("size_array", [x])
    assert z.dtype == np.int64 and z.tolist() == [24]
    assert infer("shape_array", [(0, 3)])[1] == [(2,)]
    assert infer("size_array", [None])[1] == [(1,)]
    assert infer_types("shape_array", ["float32"])[1] == ["int64"]
    assert nd.ones((5, 2)).shape_array().asnumpy().tolist() == [5, 2]


def test_every_op_is_registered_with_its_kernel_family():
    gather = {"take", "pick", "gather_nd", "scatter_nd", "_backward_take", "_backward_pick",
              "_backward_gather_nd"}
    names = ["Reshape", "reshape_like", "Flatten", "transpose", "expand_dims", "squeeze", "SwapAxis",
             "reverse", "broadcast_to", "broadcast_axis", "broadcast_like", "tile", "repeat", "Concat",
             "stack", "SliceChannel", "slice", "_slice_assign", "_slice_assign_scalar", "slice_axis",
             "slice_like", "one_hot", "Pad", "diag", "depth_to_space", "space_to_depth", "shape_array",
             "size_array", "_backward_Pad", "_backward_diag", *gather]
    for name in names:
        assert get_op(name).kernel == ("gather" if name in gather else "shape"), name
    for alias, name in [("reshape", "Reshape"), ("flatten", "Flatten"), ("swapaxes", "SwapAxis"),
                        ("flip", "reverse"), ("broadcast_axes", "broadcast_axis"), ("concat", "Concat"),
                        ("split", "SliceChannel"), ("crop", "slice"), ("pad", "Pad")]:
        assert get_op(alias) is get_op(name)


# --------------------------------------------------------------------------------------
# The same gradient rules through eager autograd (NDArrays) and the IR autodiff pass
# --------------------------------------------------------------------------------------

GRAD_PATH_CASES = [
    ("Reshape", [(2, 3, 2)], {"shape": (-1, 0)}),
    ("transpose", [(2, 3, 2)], {"axes": (1, 2, 0)}),
    ("broadcast_to", [(1, 3)], {"shape": (2, 3)}),
    ("tile", [(2, 3)], {"reps": (2, 1, 2)}),
    ("repeat", [(2, 3)], {"repeats": 2, "axis": -1}),
    ("Concat", [(2, 1), (2, 3)], {"num_args": 2, "dim": 1}),
    ("stack", [(2, 3), (2, 3)], {"num_args": 2, "axis": 1}),
    ("SliceChannel", [(4, 2)], {"num_outputs": 2, "axis": 0}),
    ("slice", [(4, 3)], {"begin": (None, 1), "end": (-1, None), "step": (2, None)}),
    ("slice_axis", [(4, 3)], {"axis": 0, "begin": 1, "end": 3}),
    ("slice_like", [(4, 3), (2, 2)], {}),
    ("take", [(4, 3), "idx"], {"axis": 0}),
    ("pick", [(4, 3), "idx"], {"axis": 1}),
    ("gather_nd", [(4, 3), "idx_nd"], {}),
    ("Pad", [(1, 1, 3, 3)], {"mode": "reflect", "pad_width": (0, 0, 0, 0, 1, 2, 2, 1)}),
    ("diag", [(3, 4)], {"k": -1}),
]

_INDICES = {"take": np.array([3, 0, 3]), "pick": np.array([2, 0, 1, 1]), "gather_nd": np.array([[0, 3, 0]])}


def _grad_case_inputs(op, specs):
    return [(_INDICES[op].astype(np.float64) if isinstance(s, str) else rand(*s)) for s in specs]


def _numeric_grads(op, xs, attrs, heads, float_inputs):
    from symjit.test_utils import numeric_grad
    nvis = get_op(op).num_visible_outputs(get_op(op).parse(attrs))

    def loss():
        ys = apply_numpy(op, xs, attrs)[:nvis]
        return float(sum(np.sum(y * h) for y, h in zip(ys, heads)))
    return [numeric_grad(loss, xs[i]) for i in float_inputs]


@pytest.mark.parametrize("op, specs, attrs", GRAD_PATH_CASES, ids=[c[0] for c in GRAD_PATH_CASES])
def test_gradients_through_autograd_and_ir(op, specs, attrs):
    from symjit.ir import interpreter
    from symjit.ir.builder import GraphBuilder
    from symjit.ir.graph import TensorType
    from symjit.passes.autodiff import autodiff

    xs = _grad_case_inputs(op, specs)
    data_inputs = [i for i, s in enumerate(specs) if not isinstance(s, str)]
    nvis = get_op(op).num_visible_outputs(get_op(op).parse(attrs))
    outs = apply_numpy(op, xs, attrs)[:nvis]
    heads = [rand(*o.shape) for o in outs]
    expected = _numeric_grads(op, xs, attrs, heads, data_inputs)

    # eager: autograd over NDArrays
    arrays = [nd.array(x, dtype="float64") for x in xs]
    for i in data_inputs:
        arrays[i].attach_grad()
    with autograd.record():
        ys = getattr(nd, op)(*arrays, **attrs)
    ys = ys if isinstance(ys, list) else [ys]
    autograd.backward(ys, [nd.array(h, dtype="float64") for h in heads])
    for i, e in zip(data_inputs, expected):
        np.testing.assert_allclose(arrays[i].grad.asnumpy(), e, rtol=1e-5, atol=1e-7)

    # IR: autodiff pass, run by the interpreter
    b = GraphBuilder(name=op)
    vs = [b.add_input(f"x{i}", TensorType(x.shape, "float64")) for i, x in enumerate(xs)]
    g = b.build(b.add_node(op, vs, attrs)[:nvis])
    bwd, stats = autodiff(g, wrt=[vs[i] for i in data_inputs])
    fwd_run = interpreter.run(g, {v: x for v, x in zip(vs, xs)}, keep=[fv for fv, _ in stats.saved])
    feeds = {bv: fwd_run.kept[fv] if fv in fwd_run.kept else xs[vs.index(fv)] for fv, bv in stats.saved}
    feeds.update({hv: h for hv, h in zip(stats.head_grads, heads)})
    got = interpreter.run(bwd, feeds).outputs
    assert len(got) == len(expected) == len(data_inputs)
    for gv, e in zip(got, expected):
        np.testing.assert_allclose(gv, e, rtol=1e-5, atol=1e-7)


def test_partial_inference_in_a_graph():
    """The IR inference pass deduces an unknown input dim through Reshape and Concat."""
    from symjit.ir.builder import GraphBuilder
    from symjit.ir.graph import TensorType
    from symjit.passes.infer import infer_types

    b = GraphBuilder(name="partial", infer=False)
    x = b.add_input("x", TensorType((0, 12), "float32"))
    y = b.add_input("y", TensorType((0, 4), "float32"))
    r = b.add_node("Reshape", [x], {"shape": "(-1, 4)"})[0]
    c = b.add_node("Concat", [r, y], {"num_args": 2, "dim": 0})[0]
    g, _ = infer_types(b.build([c]), shapes={"y": (5, 4), "x": (2, 12)})
    assert g.outputs[0].type.shape == (11, 4)
    b = GraphBuilder(name="partial2", infer=False)
    x = b.add_input("x", TensorType((0, 12), "float32"))
    r = b.add_node("Reshape", [x], {"shape": "(2, 3, 4)"})[0]
    g, _ = infer_types(b.build([r]))
    assert g.inputs[0].type.shape == (2, 12)


def test_symbolic_take_with_float_indices_and_slice_axis_without_end():
    """MXNet: `sym.take` accepts float32 indices (truncated); `slice_axis(end=None)` runs to the end."""
    import symjit as mx
    a, i = mx.sym.var("a"), mx.sym.var("i")
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = mx.sym.take(a, i).eval(a=mx.nd.array(data), i=mx.nd.array([0.0, 2.7, 3.0]))[0].asnumpy()
    np.testing.assert_array_equal(out, data[[0, 2, 3]])
    s = mx.sym.slice_axis(a, axis=1, begin=1, end=None)
    np.testing.assert_array_equal(s.eval(a=mx.nd.array(data))[0].asnumpy(), data[:, 1:])
    np.testing.assert_array_equal(mx.sym.load_json(s.tojson()).eval(a=mx.nd.array(data))[0].asnumpy(), data[:, 1:])


def test_scatter_ops():
    """_scatter_set_nd writes rhs into a copy of lhs at the indices; the scalar/elementwise
    _scatter_* forms compute as their plain ops on dense arrays."""
    from symjit import nd
    lhs, rhs, idx = np.arange(6.0).reshape(2, 3), np.array([10.0, 20.0]), np.array([[0, 1], [2, 0]])
    out = nd._scatter_set_nd(nd.array(lhs), nd.array(rhs), nd.array(idx), shape=(2, 3)).asnumpy()
    np.testing.assert_array_equal(out, [[0, 1, 10], [20, 4, 5]])
    check_op_gradient("_scatter_set_nd", [lhs, rhs, idx], {"shape": (2, 3)}, wrt=[0, 1])
    assert nd._scatter_plus_scalar(nd.ones(2), scalar=2).asnumpy().tolist() == [3, 3]
    assert nd._scatter_minus_scalar(nd.ones(2), scalar=2).asnumpy().tolist() == [-1, -1]
    assert nd._scatter_elemwise_div(nd.ones(2), nd.ones(2) * 4).asnumpy().tolist() == [0.25, 0.25]


def test_div_sqrt_dim():
    import symjit as mx
    x = np.arange(24.0).reshape(2, 12)
    np.testing.assert_allclose(mx.nd.contrib.div_sqrt_dim(mx.nd.array(x)).asnumpy(), x / np.sqrt(12), rtol=1e-6)
    check_op_gradient("_contrib_div_sqrt_dim", [x])


@pytest.mark.parametrize("op,shape", [("depth_to_space", (1, 9, 0, 4)), ("space_to_depth", (1, 0, 3, 3))])
def test_depth_space_refuse_zero_dims(op, shape):
    with pytest.raises(MXNetError, match=f"{op}: every dimension"):
        getattr(nd, op)(nd.array(np.zeros(shape, np.float32)), 3)


def test_transpose_deduces_its_input_from_the_output():
    """infer_shape_backward permutes the output's dims back (axes (1, 2, 0): input dim a is
    output dim i where axes[i] == a)."""
    op = get_op("transpose")
    attrs = op.parse({"axes": (1, 2, 0)})
    assert op.infer_shape_backward(attrs, [(0, 0, 0)], [(3, 4, 2)]) == [(2, 3, 4)]
    assert op.infer_shape_backward(attrs, [(2, 0, 0)], [None]) == [(2, 0, 0)]
    with pytest.raises(MXNetError, match="transpose"):
        op.infer_shape_backward(attrs, [(5, 0, 0)], [(3, 4, 2)])


def test_reshape_deduces_one_unknown_input_dim_from_the_output():
    op = get_op("Reshape")
    attrs = op.parse({"shape": (-1,)})
    assert op.infer_shape_backward(attrs, [(2, 0, 5)], [(30,)]) == [(2, 3, 5)]
    assert op.infer_shape_backward(attrs, [(0, 0, 5)], [(30,)]) == [(0, 0, 5)]   # two unknown: no


def test_tile_zero_rep_needs_np_shape():
    """A 0 in reps makes a zero-size output: refused in legacy shape semantics, numpy's
    result under NumPy shape semantics."""
    from symjit.util import np_shape
    x = nd.array(np.arange(16, dtype=np.float32).reshape(4, 4))
    with pytest.raises(MXNetError, match="tile: reps"):
        nd.tile(x, (1, 0, 3))
    with np_shape():
        assert nd.tile(x, (1, 0, 3)).shape == np.tile(x.asnumpy(), (1, 0, 3)).shape
