"""Sorting ops (topk, sort, argsort): forward vs an independent pure-Python ordering,
return types and dtypes, gradients vs finite differences, shape inference and errors."""
from __future__ import annotations

import numpy as np
import pytest

from symjit import autograd, nd
from symjit.base import MXNetError
from symjit.ops import apply_numpy, get_op
from symjit.test_utils import check_op_gradient, numeric_grad

RNG = np.random.default_rng(11)


def _order(row, ascend):
    """Indices ordering a 1-D row, ties broken by position (Python's stable sort)."""
    return sorted(range(len(row)), key=lambda j: (row[j] if ascend else -row[j], j))


def _np_topk(x, axis, k, ascend):
    """(values, indices) of the top k along axis (flattened when None), row by row."""
    if axis is None:
        idx = np.array(_order(x.reshape(-1).tolist(), ascend)[:k])
        return x.reshape(-1)[idx], idx
    moved = np.moveaxis(x, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    idx = np.array([_order(r.tolist(), ascend)[:k] for r in flat]).reshape(moved.shape[:-1] + (k,))
    vals = np.take_along_axis(moved, idx, axis=-1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)


def _with_ties(shape):
    return RNG.integers(0, 4, size=shape).astype(np.float32)


@pytest.mark.parametrize("axis", [-1, 0, 1, None])
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("ascend", [False, True])
def test_topk_forward(axis, k, ascend):
    x = _with_ties((3, 4, 5))
    want_v, want_i = _np_topk(x, axis, k, ascend)
    attrs = {"axis": axis, "k": k, "is_ascend": ascend}
    (i,) = apply_numpy("topk", [x], attrs)
    assert i.dtype == np.float32
    np.testing.assert_array_equal(i, want_i)
    v, i2 = apply_numpy("topk", [x], {**attrs, "ret_typ": "both", "dtype": "int64"})
    assert v.dtype == np.float32 and i2.dtype == np.int64
    np.testing.assert_array_equal(v, want_v)
    np.testing.assert_array_equal(i2, want_i)
    v, hidden = apply_numpy("topk", [x], {**attrs, "ret_typ": "value"})
    assert hidden.dtype == np.int32
    np.testing.assert_array_equal(v, want_v)
    (mask,) = apply_numpy("topk", [x], {**attrs, "ret_typ": "mask"})
    want_mask = np.zeros(x.size if axis is None else x.shape, np.float32)
    if axis is None:
        want_mask[want_i] = 1
    else:
        np.put_along_axis(want_mask, want_i, 1, axis=axis)
    np.testing.assert_array_equal(mask, want_mask.reshape(x.shape))
    op = get_op("topk")
    _, outs = op.infer_shape(op.parse(attrs), [x.shape])
    assert outs == [want_i.shape]


def test_topk_mxnet_doc_examples_via_nd():
    x = nd.array([[0.3, 0.2, 0.4], [0.1, 0.3, 0.2]])
    assert nd.topk(x).asnumpy().tolist() == [[2.0], [1.0]]
    np.testing.assert_allclose(nd.topk(x, ret_typ="value", k=2).asnumpy(), [[0.4, 0.3], [0.3, 0.2]])
    assert nd.topk(x, axis=None, k=2).shape == (2,)
    assert nd.topk(x, axis=0, ret_typ="mask").asnumpy().tolist() == [[1, 0, 1], [0, 1, 0]]
    v, i = nd.topk(x, k=2, ret_typ="both", is_ascend=True)
    np.testing.assert_allclose(v.asnumpy(), [[0.2, 0.3], [0.1, 0.2]])
    assert i.asnumpy().tolist() == [[1.0, 0.0], [0.0, 2.0]]
    assert x.topk(k=0).shape == (2, 3)      # k < 1 selects everything


def test_sort_and_argsort():
    x = _with_ties((4, 6))
    for axis in (-1, 0, None):
        for ascend in (True, False):
            n = x.size if axis is None else x.shape[axis]
            want_v, want_i = _np_topk(x, axis, n, ascend)
            (v,) = apply_numpy("sort", [x], {"axis": axis, "is_ascend": ascend})[:1]
            np.testing.assert_array_equal(v, want_v)
            (i,) = apply_numpy("argsort", [x], {"axis": axis, "is_ascend": ascend})
            assert i.dtype == np.float32
            np.testing.assert_array_equal(i, want_i)
    a = nd.array([[0.3, 0.2, 0.4], [0.1, 0.3, 0.2]])
    assert nd.argsort(a, axis=None).asnumpy().tolist() == [3, 1, 5, 0, 4, 2]
    assert nd.argsort(a, dtype="int32").dtype == np.int32
    np.testing.assert_allclose(nd.sort(a, is_ascend=False).asnumpy(), [[0.4, 0.3, 0.2], [0.3, 0.2, 0.1]])
    s = get_op("sort")
    assert s.num_outputs(s.parse({})) == 2 and s.num_visible_outputs(s.parse({})) == 1


def _distinct(shape):
    n = int(np.prod(shape))
    return RNG.permutation(n).reshape(shape) / n


@pytest.mark.parametrize("attrs", [{"ret_typ": "value", "k": 2}, {"ret_typ": "both", "k": 3, "axis": 1},
                                   {"ret_typ": "value", "axis": None, "k": 5, "is_ascend": True},
                                   {"ret_typ": "value", "axis": 0, "k": 0}])
def test_topk_gradient(attrs):
    check_op_gradient("topk", [_distinct((3, 4, 5))], attrs)


@pytest.mark.parametrize("attrs", [{}, {"axis": 0, "is_ascend": False}, {"axis": None}])
def test_sort_gradient(attrs):
    check_op_gradient("sort", [_distinct((3, 4))], attrs)


def test_index_outputs_have_zero_gradient():
    x = nd.array(_distinct((2, 5)))
    x.attach_grad()
    with autograd.record():
        y = nd.argsort(x).sum() + nd.topk(x, k=2).sum()
    y.backward()
    assert not x.grad.asnumpy().any()
    with autograd.record():
        m = nd.topk(x, k=2, ret_typ="mask")
    m.backward()
    assert not x.grad.asnumpy().any()


def test_topk_value_gradient_scatters_via_autograd():
    x = nd.array([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
    x.attach_grad()
    with autograd.record():
        v = nd.topk(x, k=2, ret_typ="value")
    v.backward(nd.array([[10, 20], [30, 40]]))
    assert x.grad.asnumpy().tolist() == [[0, 10, 20], [40, 0, 30]]


def test_hidden_scatter_gather():
    x = RNG.standard_normal((3, 5))
    idx = np.array([[4, 0], [1, 2], [3, 4]])
    (t,) = apply_numpy("_take_along_axis", [x, idx], {"axis": 1})
    np.testing.assert_array_equal(t, [[x[0, 4], x[0, 0]], [x[1, 1], x[1, 2]], [x[2, 3], x[2, 4]]])
    g = RNG.standard_normal((3, 2))
    (s,) = apply_numpy("_backward_topk", [g, idx, x], {"axis": 1})
    want = np.zeros_like(x)
    for r in range(3):
        for j in range(2):
            want[r, idx[r, j]] = g[r, j]
    np.testing.assert_array_equal(s, want)
    check_op_gradient("_take_along_axis", [x, idx], {"axis": 1}, wrt=[0])
    check_op_gradient("_backward_topk", [g, idx, x], {"axis": 1}, wrt=[0])
    (flat,) = apply_numpy("_take_along_axis", [x, np.array([14, 0])], {"axis": None})
    assert flat.tolist() == [x[2, 4], x[0, 0]]
    with pytest.raises(MXNetError, match="_take_along_axis.*range"):
        apply_numpy("_take_along_axis", [x, np.array([[5], [0], [0]])], {"axis": 1})
    with pytest.raises(MXNetError, match="_backward_topk"):
        apply_numpy("_backward_topk", [g, idx[:2], x], {"axis": 1})


def test_sort_partial_shape_inference_and_types():
    op = get_op("topk")
    _, outs = op.infer_shape(op.parse({"k": 2, "ret_typ": "both", "axis": 1}), [(0, 5, 3)])
    assert outs == [(0, 2, 3), (0, 2, 3)]
    _, outs = op.infer_shape(op.parse({"k": 0, "axis": 1}), [(4, 0)])
    assert outs == [(4, 0)]
    _, outs = op.infer_shape(op.parse({}), [None])
    assert outs == [None]
    _, types = op.infer_type(op.parse({"ret_typ": "both", "dtype": "int32"}), ["float64"])
    assert types == ["float64", "int32"]
    _, types = op.infer_type(op.parse({}), ["float64"])
    assert types == ["float32"]
    a = get_op("argsort")
    _, outs = a.infer_shape(a.parse({"axis": None}), [(3, 4)])
    assert outs == [(12,)]
    assert get_op("topk").kernel == "sort"


def test_sort_errors():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(MXNetError, match="topk.*k"):
        apply_numpy("topk", [x], {"k": 5})
    with pytest.raises(MXNetError, match="topk.*axis"):
        apply_numpy("topk", [x], {"axis": 2})
    with pytest.raises(MXNetError, match="sort.*axis"):
        apply_numpy("sort", [x], {"axis": -3})
    with pytest.raises(MXNetError, match="argsort.*axis"):
        nd.argsort(nd.array(x), axis=7)
    with pytest.raises(MXNetError, match="topk.*float16"):
        apply_numpy("topk", [x.astype(np.float16)])
    with pytest.raises(MXNetError, match="argsort.*uint8"):
        apply_numpy("argsort", [np.zeros(300, np.float32)], {"dtype": "uint8"})
    with pytest.raises(MXNetError, match="topk"):
        apply_numpy("topk", [x], {"ret_typ": "values"})
    op = get_op("topk")
    with pytest.raises(MXNetError, match="topk.*k"):
        op.infer_shape(op.parse({"k": 9}), [(3, 4)])


# --------------------------------------------------------------------------------------
# The same gradient rules through the IR autodiff pass (run by the interpreter)
# --------------------------------------------------------------------------------------

def _ir_gradients(op, xs, attrs, wrt, heads):
    """Gradients of sum_j <out_j, head_j> w.r.t. xs[wrt] from the backward IR graph."""
    from symjit.ir import interpreter
    from symjit.ir.builder import GraphBuilder
    from symjit.ir.graph import TensorType
    from symjit.passes.autodiff import autodiff

    nvis = get_op(op).num_visible_outputs(get_op(op).parse(attrs))
    b = GraphBuilder(name=op)
    vs = [b.add_input(f"x{i}", TensorType(x.shape, x.dtype.name)) for i, x in enumerate(xs)]
    g = b.build(b.add_node(op, vs, attrs)[:nvis])
    bwd, stats = autodiff(g, wrt=[vs[i] for i in wrt])
    fwd = interpreter.run(g, dict(zip(vs, xs)), keep=[fv for fv, _ in stats.saved])
    feeds = {bv: fwd.kept[fv] if fv in fwd.kept else xs[vs.index(fv)] for fv, bv in stats.saved}
    feeds.update(dict(zip(stats.head_grads, heads)))
    return interpreter.run(bwd, feeds).outputs


def _check_ir_gradient(op, xs, attrs):
    wrt = [i for i, x in enumerate(xs) if x.dtype.kind == "f"]
    nvis = get_op(op).num_visible_outputs(get_op(op).parse(attrs))
    heads = [RNG.uniform(-1, 1, o.shape) for o in apply_numpy(op, xs, attrs)[:nvis]]

    def loss():
        return sum(float(np.sum(o * h)) for o, h in zip(apply_numpy(op, xs, attrs)[:nvis], heads))

    got = _ir_gradients(op, xs, attrs, wrt, heads)
    assert len(got) == len(wrt)
    for i, gv in zip(wrt, got):
        np.testing.assert_allclose(gv, numeric_grad(loss, xs[i]), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("op,attrs", [
    ("topk", {"k": 2, "ret_typ": "value"}),
    ("topk", {"k": 3, "ret_typ": "both", "axis": 0}),
    ("sort", {"axis": None, "is_ascend": False}),
    ("argsort", {}),
])
def test_ir_autodiff_gradient(op, attrs):
    _check_ir_gradient(op, [_distinct((3, 4))], attrs)
