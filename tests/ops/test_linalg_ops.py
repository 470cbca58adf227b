"""Matrix products (dot, batch_dot, linalg_gemm2): forward vs np.tensordot / einsum,
gradients vs finite differences, partial shape inference and error messages."""
from __future__ import annotations

import numpy as np
import pytest

from symjit import autograd, nd
from symjit.base import MXNetError
from symjit.ops import apply_numpy, find_op, get_op
from symjit.test_utils import check_op_gradient, numeric_grad

RNG = np.random.default_rng(3)


def R(*shape):
    return RNG.uniform(-1, 1, shape)


def _np_dot(a, b, ta, tb):
    """MXNet dot as a tensordot: lhs contracts its last (first if ta) axis, rhs its first
    (last if tb) axis."""
    if a.ndim == 1 and b.ndim == 1:
        return np.array([np.sum(a * b)])
    return np.tensordot(a, b, axes=([0 if ta else a.ndim - 1], [b.ndim - 1 if tb else 0]))


DOT_CASES = [
    ((3, 4), (4, 5), False, False),
    ((4, 3), (4, 5), True, False),
    ((3, 4), (5, 4), False, True),
    ((4, 3), (5, 4), True, True),
    ((2, 3, 4), (4, 5), False, False),
    ((4, 2, 3), (4, 5), True, False),
    ((2, 3, 4), (5, 3, 4), False, True),
    ((4,), (4, 2, 3), False, False),
    ((2, 3, 4), (4,), False, False),
    ((4,), (4,), False, False),
    ((2, 3), (3, 1, 2, 2), False, False),
]


@pytest.mark.parametrize("ls,rs,ta,tb", DOT_CASES)
def test_dot_forward_and_shape(ls, rs, ta, tb):
    a, b = R(*ls).astype(np.float32), R(*rs).astype(np.float32)
    attrs = {"transpose_a": ta, "transpose_b": tb}
    (y,) = apply_numpy("dot", [a, b], attrs)
    want = _np_dot(a.astype(np.float64), b.astype(np.float64), ta, tb)
    assert y.dtype == np.float32 and y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    op = get_op("dot")
    _, (out,) = op.infer_shape(op.parse(attrs), [ls, rs])
    assert out == want.shape


@pytest.mark.parametrize("ls,rs,ta,tb", DOT_CASES)
def test_dot_gradient(ls, rs, ta, tb):
    check_op_gradient("dot", [R(*ls), R(*rs)], {"transpose_a": ta, "transpose_b": tb})


def test_seed_e20_dot_of_vectors():
    x = nd.array([1, 2, 3, 4])
    y = nd.array([2, 2, 2, 1])
    out = nd.dot(x, y)
    assert out.shape == (1,)
    assert repr(out) == "\n[16.]\n<NDArray 1 @cpu(0)>"


@pytest.mark.skipif(find_op("transpose") is None, reason="transpose is not registered yet")
def test_seed_e20_as_written():
    x = nd.array([1, 2, 3, 4])
    y = nd.array([2, 2, 2, 1])
    assert repr(nd.dot(x, y.T)) == "\n[16.]\n<NDArray 1 @cpu(0)>"


def test_dot_float64_float16_and_autograd():
    a, b = R(3, 4), R(4, 2)
    (y,) = apply_numpy("dot", [a, b])
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, a @ b, rtol=1e-12)
    (h,) = apply_numpy("dot", [a.astype(np.float16), b.astype(np.float16)])
    assert h.dtype == np.float16
    np.testing.assert_allclose(h, a @ b, rtol=1e-2, atol=1e-2)
    x, w = nd.array(a), nd.array(b)
    x.attach_grad()
    w.attach_grad()
    with autograd.record():
        z = nd.dot(x, w)
    z.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), np.ones((3, 2)) @ b.T, rtol=1e-5)
    np.testing.assert_allclose(w.grad.asnumpy(), a.T @ np.ones((3, 2)), rtol=1e-5)


def test_dot_partial_shape_inference():
    op = get_op("dot")
    (ls, rs), (out,) = op.infer_shape(op.parse({}), [(0, 3), (3, 5)])
    assert out == (0, 5)
    (ls, rs), (out,) = op.infer_shape(op.parse({}), [(2, 0), (3, 4)])
    assert ls == (2, 3) and out == (2, 4)
    (ls, rs), (out,) = op.infer_shape(op.parse({"transpose_b": True}), [(2, 6), (4, 0)])
    assert rs == (4, 6) and out == (2, 4)
    _, (out,) = op.infer_shape(op.parse({}), [None, (3, 4)])
    assert out is None


def test_dot_errors_name_op_and_shapes():
    with pytest.raises(MXNetError, match=r"dot.*\(2, 3\).*\(4, 5\)"):
        nd.dot(nd.ones((2, 3)), nd.ones((4, 5)))
    op = get_op("dot")
    with pytest.raises(MXNetError, match=r"dot.*\(2, 3\).*\(4, 5\)"):
        op.infer_shape(op.parse({}), [(2, 3), (4, 5)])
    with pytest.raises(MXNetError, match="dot"):
        nd.dot(nd.ones((3,)), nd.ones((3,)), transpose_a=True)
    with pytest.raises(MXNetError, match="dot.*int32"):
        apply_numpy("dot", [np.ones((2, 2), np.int32), np.ones((2, 2), np.int32)])
    with pytest.raises(MXNetError, match="dot.*int32"):
        op.infer_type(op.parse({}), ["int32", "int32"])
    with pytest.raises(MXNetError, match="dot"):
        op.infer_type(op.parse({}), ["float32", "float64"])
    assert op.kernel == "gemm"


def test_backward_dot_hidden_op():
    a, b = R(2, 3, 4), R(4, 5)
    dz = R(2, 3, 5)
    da, db = apply_numpy("_backward_dot", [dz, a, b])
    np.testing.assert_allclose(da, np.einsum("ijn,kn->ijk", dz, b), rtol=1e-12)
    np.testing.assert_allclose(db, np.einsum("ijk,ijn->kn", a, dz), rtol=1e-12)
    with pytest.raises(MXNetError, match="_backward_dot"):
        apply_numpy("_backward_dot", [R(2, 3), a, b])


# --------------------------------------------------------------------------------------
# batch_dot
# --------------------------------------------------------------------------------------

def _np_batch(a, b, ta, tb):
    a = np.swapaxes(a, -1, -2) if ta else a
    b = np.swapaxes(b, -1, -2) if tb else b
    return np.einsum("...ik,...kj->...ij", a, b)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("batch", [(3,), (2, 3)])
def test_batch_dot(ta, tb, batch):
    m, k, n = 2, 5, 3
    a = R(*batch, *((k, m) if ta else (m, k)))
    b = R(*batch, *((n, k) if tb else (k, n)))
    attrs = {"transpose_a": ta, "transpose_b": tb}
    (y,) = apply_numpy("batch_dot", [a, b], attrs)
    np.testing.assert_allclose(y, _np_batch(a, b, ta, tb), rtol=1e-12)
    assert y.shape == batch + (m, n)
    check_op_gradient("batch_dot", [a, b], attrs)
    op = get_op("batch_dot")
    _, (out,) = op.infer_shape(op.parse(attrs), [a.shape, b.shape])
    assert out == batch + (m, n)


def test_batch_dot_partial_shapes_and_errors():
    op = get_op("batch_dot")
    (ls, rs), (out,) = op.infer_shape(op.parse({}), [(0, 2, 5), (4, 5, 3)])
    assert ls == (4, 2, 5) and rs == (4, 5, 3) and out == (4, 2, 3)
    # MXNet infers nothing while a contraction dim is unknown
    (ls, rs), (out,) = op.infer_shape(op.parse({}), [(0, 2, 5), (4, 0, 3)])
    assert ls == (0, 2, 5) and rs == (4, 0, 3) and out is None
    with pytest.raises(MXNetError, match=r"batch_dot.*\(2, 3\)"):
        nd.batch_dot(nd.ones((2, 3)), nd.ones((3, 2)))
    with pytest.raises(MXNetError, match=r"batch_dot.*\(2, 3, 4\).*\(3, 4, 5\)"):
        nd.batch_dot(nd.ones((2, 3, 4)), nd.ones((3, 4, 5)))
    with pytest.raises(MXNetError, match=r"batch_dot.*\(2, 3, 4\).*\(2, 5, 5\)"):
        nd.batch_dot(nd.ones((2, 3, 4)), nd.ones((2, 5, 5)))
    out = nd.batch_dot(nd.ones((2, 3, 4)), nd.ones((2, 4, 5)))
    assert out.shape == (2, 3, 5) and out.asnumpy().max() == 4


# --------------------------------------------------------------------------------------
# linalg_gemm2
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_linalg_gemm2(ta, tb):
    m, k, n = 2, 4, 3
    a = R(5, *((k, m) if ta else (m, k)))
    b = R(5, *((n, k) if tb else (k, n)))
    attrs = {"transpose_a": ta, "transpose_b": tb, "alpha": 0.5}
    (y,) = apply_numpy("linalg_gemm2", [a, b], attrs)
    np.testing.assert_allclose(y, 0.5 * _np_batch(a, b, ta, tb), rtol=1e-12)
    check_op_gradient("_linalg_gemm2", [a, b], attrs)
    # rows on axis 0: same products with the row axis moved to the front
    a0 = np.ascontiguousarray(np.moveaxis(a, -2, 0))
    b0 = np.ascontiguousarray(np.moveaxis(b, -2, 0))
    (y0,) = apply_numpy("linalg_gemm2", [a0, b0], {**attrs, "axis": 0})
    np.testing.assert_allclose(y0, np.moveaxis(0.5 * _np_batch(a, b, ta, tb), -2, 0), rtol=1e-12)
    check_op_gradient("linalg_gemm2", [a0, b0], {**attrs, "axis": 0})


def test_linalg_gemm2_errors():
    with pytest.raises(MXNetError, match="_linalg_gemm2.*axis"):
        apply_numpy("linalg_gemm2", [R(2, 3), R(3, 2)], {"axis": -1})
    with pytest.raises(MXNetError, match="_linalg_gemm2"):
        apply_numpy("linalg_gemm2", [R(2, 2, 3), R(3, 3, 2)])
    with pytest.raises(MXNetError, match="_linalg_gemm2"):
        apply_numpy("linalg_gemm2", [R(2, 3), R(4, 2)])
    with pytest.raises(MXNetError, match="_linalg_gemm2"):
        apply_numpy("linalg_gemm2", [R(2, 3), R(2, 3, 2)])


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


@pytest.mark.parametrize("op,shapes,attrs", [
    ("dot", [(3, 4), (2, 4)], {"transpose_b": True}),
    ("dot", [(2, 3, 4), (4, 2)], {}),
    ("dot", [(4,), (4,)], {}),
    ("batch_dot", [(2, 4, 3), (2, 4, 2)], {"transpose_a": True}),
    ("linalg_gemm2", [(2, 3, 4), (2, 4, 2)], {"alpha": 2.0}),
])
def test_ir_autodiff_gradient(op, shapes, attrs):
    _check_ir_gradient(op, [R(*s) for s in shapes], attrs)


def test_dot_zero_size_operands():
    (y,) = apply_numpy("dot", [np.ones((2, 0), np.float32), np.ones((0, 3), np.float32)])
    assert y.shape == (2, 3) and not y.any()
    (y,) = apply_numpy("dot", [np.ones((0, 2), np.float32), np.ones((2, 3), np.float32)])
    assert y.shape == (0, 3)
