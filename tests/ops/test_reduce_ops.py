"""Reduction and softmax ops: forward vs independent numpy formulas, MXNet shape rules,
gradients vs finite differences, partial shape inference and error messages."""
from __future__ import annotations

import io
from contextlib import redirect_stdout

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symjit import autograd, nd
from symjit.base import MXNetError
from symjit.ops import apply_numpy, get_op
from symjit.ops.reduce import _fma32, _onednn_exp
from symjit.test_utils import check_op_gradient, numeric_grad

RNG = np.random.default_rng(7)


def _distinct(shape, scale=1.0):
    """Values without ties (so max/min/sort have unique arg-extremes)."""
    n = int(np.prod(shape))
    return (RNG.permutation(n).reshape(shape) / n + 0.5) * scale


def _expected_axes(ndim, axis, exclude):
    """Independent statement of MXNet's rule: which axes a reduction removes."""
    if axis is None or axis == ():
        return set(range(ndim))
    listed = {a % ndim for a in ((axis,) if isinstance(axis, int) else axis)}
    return set(range(ndim)) - listed if exclude else listed


def _expected_shape(shape, reduced, keepdims):
    if keepdims:
        return tuple(1 if i in reduced else d for i, d in enumerate(shape))
    kept = tuple(d for i, d in enumerate(shape) if i not in reduced)
    return kept if kept else (1,)


NUMPY_REDUCERS = {
    "sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max, "min": np.min,
    "nansum": np.nansum, "nanprod": np.nanprod,
}

CASES = [
    ((3, 4, 5), None, False, False),
    ((3, 4, 5), None, True, False),
    ((3, 4, 5), (), False, True),          # axis=() reduces everything, exclude ignored
    ((3, 4, 5), 1, False, False),
    ((3, 4, 5), -1, True, False),
    ((3, 4, 5), (0, -1), False, False),
    ((3, 4, 5), (0, 2), True, True),
    ((3, 4, 5), 1, False, True),
    ((7,), 0, False, False),
    ((7,), 0, False, True),                # excluding the only axis reduces nothing
    ((2, 3, 1, 5), (1, 3), False, False),
    ((5, 1), 0, True, False),
]


@pytest.mark.parametrize("name", sorted(NUMPY_REDUCERS))
@pytest.mark.parametrize("shape,axis,keepdims,exclude", CASES)
def test_reduce_forward(name, shape, axis, keepdims, exclude):
    x = _distinct(shape).astype(np.float32)
    attrs = {"axis": axis, "keepdims": keepdims, "exclude": exclude}
    (y,) = apply_numpy(name, [x], attrs)
    reduced = _expected_axes(len(shape), axis, exclude)
    want = NUMPY_REDUCERS[name](x.astype(np.float64), axis=tuple(sorted(reduced)))
    want_shape = _expected_shape(shape, reduced, keepdims)
    assert y.shape == want_shape and y.dtype == np.float32
    np.testing.assert_allclose(y, np.reshape(want, want_shape), rtol=2e-6)
    # shape inference agrees with compute
    op = get_op(name)
    _, (out,) = op.infer_shape(op.parse(attrs), [shape])
    assert out == want_shape


def test_full_reduction_is_shape_1_not_0d():
    x = nd.array([[1, 2], [3, 4]])
    s = nd.sum(x)
    assert s.shape == (1,) and s.asscalar() == 10
    assert nd.max(x, keepdims=True).shape == (1, 1)
    assert nd.sum_axis(x, axis=0).asnumpy().tolist() == [4, 6]
    assert nd.max_axis(x, axis=1).asnumpy().tolist() == [2, 4]
    assert nd.min_axis(x, axis=1).asnumpy().tolist() == [1, 3]
    assert x.mean(axis=1).asnumpy().tolist() == [1.5, 3.5]


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data())
def test_sum_random_axes(shape, data):
    ndim = len(shape)
    axes = data.draw(st.lists(st.integers(-ndim, ndim - 1), unique_by=lambda a: a % ndim, max_size=ndim))
    keepdims, exclude = data.draw(st.booleans()), data.draw(st.booleans())
    axis = tuple(axes) if axes else None
    x = RNG.standard_normal(shape)
    (y,) = apply_numpy("sum", [x], {"axis": axis, "keepdims": keepdims, "exclude": exclude})
    reduced = _expected_axes(ndim, axis, exclude)
    want_shape = _expected_shape(tuple(shape), reduced, keepdims)
    want = x.sum(axis=tuple(sorted(reduced))) if reduced else x
    np.testing.assert_allclose(y, np.reshape(want, want_shape), rtol=1e-12, atol=1e-12)


def test_integer_mean_truncates_like_c():
    x = np.array([[-3, 0], [7, 0]], dtype=np.int32)
    (y,) = apply_numpy("mean", [x], {"axis": 1})
    assert y.dtype == np.int32 and y.tolist() == [-1, 3]
    (s,) = apply_numpy("sum", [x])
    assert s.dtype == np.int32 and s.tolist() == [4]


def test_nan_reductions():
    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, 2.0]], dtype=np.float32)
    assert apply_numpy("nansum", [x], {"axis": 1})[0].tolist() == [4.0, 2.0]
    assert apply_numpy("nanprod", [x], {"axis": 1})[0].tolist() == [3.0, 2.0]
    # gradient at NaN positions is zero
    g = nd.array(x)
    g.attach_grad()
    with autograd.record():
        y = nd.nansum(g)
    y.backward()
    assert g.grad.asnumpy().tolist() == [[1, 0, 1], [0, 0, 1]]


GRAD_CASES = [{}, {"axis": 1}, {"axis": (0, -1), "keepdims": True}, {"axis": 1, "exclude": True},
              {"axis": -1}]


@pytest.mark.parametrize("name", sorted(NUMPY_REDUCERS))
@pytest.mark.parametrize("attrs", GRAD_CASES)
def test_reduce_gradient(name, attrs):
    x = _distinct((3, 4, 5))
    check_op_gradient(name, [x], attrs)


def test_max_gradient_ties_go_to_every_maximum():
    x = nd.array([[1, 3, 3], [2, 2, 0]])
    x.attach_grad()
    with autograd.record():
        y = nd.max(x, axis=1)
    y.backward(nd.array([10, 5]))
    assert x.grad.asnumpy().tolist() == [[0, 10, 10], [5, 5, 0]]
    x.attach_grad()
    with autograd.record():
        y = nd.min(x)
    y.backward()
    assert x.grad.asnumpy().tolist() == [[0, 0, 0], [0, 0, 1]]


def test_prod_gradient_is_out_over_x():
    x = np.array([[2.0, 3.0, 4.0]])
    check_op_gradient("prod", [x], {"axis": 1})
    g = nd.array(x)
    g.attach_grad()
    with autograd.record():
        y = nd.prod(g)
    y.backward()
    assert g.grad.asnumpy().tolist() == [[12, 8, 6]]


@pytest.mark.parametrize("name", ["_backward_sum", "_backward_mean"])
def test_backward_broadcast_ops(name):
    x = RNG.standard_normal((3, 4, 5))
    g = RNG.standard_normal((3, 5))
    (y,) = apply_numpy(name, [g, x], {"axis": 1})
    want = np.broadcast_to(g[:, None, :], x.shape) / (4 if name == "_backward_mean" else 1)
    np.testing.assert_allclose(y, want)
    check_op_gradient(name, [g, x], {"axis": 1}, wrt=[0])
    with pytest.raises(MXNetError, match=name):
        apply_numpy(name, [np.ones((3, 4)), x], {"axis": 1})


def test_reduce_partial_shape_inference():
    op = get_op("sum")
    ins, (out,) = op.infer_shape(op.parse({"axis": 1}), [(0, 4, 5)])
    assert out == (0, 5)
    _, (out,) = op.infer_shape(op.parse({"axis": (1,), "keepdims": True}), [(2, 0, 5)])
    assert out == (2, 1, 5)
    _, (out,) = op.infer_shape(op.parse({}), [None])
    assert out is None
    bop = get_op("_backward_sum")
    (g, d), (o,) = bop.infer_shape(bop.parse({"axis": 1}), [None, (3, 4, 5)])
    assert g == (3, 5) and o == (3, 4, 5)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "nanprod"])
def test_reduce_errors(name):
    x = np.ones((2, 3), np.float32)
    with pytest.raises(MXNetError, match=name):
        apply_numpy(name, [x], {"axis": 2})
    with pytest.raises(MXNetError, match=name):
        apply_numpy(name, [x], {"axis": -3})
    with pytest.raises(MXNetError, match="duplicate"):
        apply_numpy(name, [x], {"axis": (1, -1)})
    with pytest.raises(MXNetError, match=name):
        nd.array(x).sum(axis=5) if name == "sum" else getattr(nd, name)(nd.array(x), axis=5)


def test_max_of_empty_raises():
    with pytest.raises(MXNetError, match="max"):
        apply_numpy("max", [np.ones((0, 3), np.float32)])


# --------------------------------------------------------------------------------------
# argmax / argmin / argmax_channel
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,fn", [("argmax", np.argmax), ("argmin", np.argmin)])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (None, True), (0, False), (-1, True), (1, False)])
def test_arg_reduce_forward(name, fn, axis, keepdims):
    x = _distinct((3, 4, 5)).astype(np.float32)
    (y,) = apply_numpy(name, [x], {"axis": axis, "keepdims": keepdims})
    assert y.dtype == np.float32
    if axis is None:
        want = np.array([fn(x.reshape(-1))], np.float32).reshape((1, 1, 1) if keepdims else (1,))
    else:
        want = fn(x, axis=axis)
        want = np.expand_dims(want, axis) if keepdims else want
    np.testing.assert_array_equal(y, want)


def test_arg_reduce_ties_dtype_and_errors():
    x = nd.array([[1, 5, 5], [7, 7, 0]])
    assert nd.argmax(x, axis=1).asnumpy().tolist() == [1, 0]
    assert nd.argmin(x, axis=0).asnumpy().tolist() == [0, 0, 1]
    assert nd.argmax(nd.array([1, 2], dtype="float64"), axis=0).dtype == np.float64
    assert nd.argmax_channel(nd.array([[0, 1, 2], [3, 4, 5]])).asnumpy().tolist() == [2, 2]
    with pytest.raises(MXNetError, match="argmax"):
        nd.argmax(x, axis=2)
    with pytest.raises(MXNetError, match="argmin"):
        apply_numpy("argmin", [np.ones((2, 0))], {"axis": 1})
    # not differentiable: zero gradient
    x.attach_grad()
    with autograd.record():
        y = nd.argmax(x, axis=1)
    y.backward()
    assert not x.grad.asnumpy().any()


# --------------------------------------------------------------------------------------
# norm
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("ord_", [1, 2])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, False), ((0, 2), True), (-1, False)])
def test_norm_forward(ord_, axis, keepdims):
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    (y,) = apply_numpy("norm", [x], {"ord": ord_, "axis": axis, "keepdims": keepdims})
    ax = None if axis is None else axis
    x64 = x.astype(np.float64)
    want = (np.abs(x64).sum(axis=ax, keepdims=keepdims) if ord_ == 1
            else np.sqrt((x64 ** 2).sum(axis=ax, keepdims=keepdims)))
    want = np.reshape(want, (1, 1, 1) if axis is None and keepdims else np.shape(want) or (1,))
    assert y.dtype == np.float32 and y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_norm_out_dtype_gradient_and_errors():
    x = RNG.standard_normal((3, 4))
    (y,) = apply_numpy("norm", [x.astype(np.float32)], {"out_dtype": "float64"})
    assert y.dtype == np.float64 and y.shape == (1,)
    for attrs in ({}, {"ord": 1, "axis": 1}, {"axis": (0, 1), "keepdims": True}, {"axis": 0}):
        check_op_gradient("norm", [x], attrs)
    check_op_gradient("norm", [x.astype(np.float32)], {"out_dtype": "float64", "axis": 1})
    with pytest.raises(MXNetError, match="norm.*ord"):
        apply_numpy("norm", [x], {"ord": 3})
    with pytest.raises(MXNetError, match="norm"):
        apply_numpy("norm", [x], {"axis": 2})
    assert nd.norm(nd.array([[3, 4]])).asscalar() == 5


# --------------------------------------------------------------------------------------
# softmax family
# --------------------------------------------------------------------------------------

E94_MXNET = """[[2.4258138e-03 8.0748327e-04 1.9912291e-04 1.7924473e-02 9.7864312e-01]
 [6.6843736e-03 6.0796243e-05 9.9204904e-01 9.0463163e-04 3.0112558e-04]]
"""


def test_seed_e94_softmax_prints_mxnet_digits():
    input_data = nd.array([[2., 0.9, -0.5, 4., 8.], [4., -.7, 9., 2., 0.9]])
    soft_max_act = nd.softmax(input_data)
    buf = io.StringIO()
    with redirect_stdout(buf):
        print(soft_max_act.asnumpy())
    assert buf.getvalue() == E94_MXNET


def _np_softmax(x, axis, t=1.0):
    z = (x - x.max(axis=axis, keepdims=True)) / t
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape,axis", [((2, 5), -1), ((3, 4, 5), 1), ((3, 4, 5), 0), ((6,), 0),
                                        ((2, 3, 4, 5), -1), ((2, 3, 37), -1), ((2, 1, 2, 3, 4), -1)])
def test_softmax_forward(shape, axis):
    x = RNG.standard_normal(shape).astype(np.float32) * 3
    (y,) = apply_numpy("softmax", [x], {"axis": axis})
    assert y.dtype == np.float32 and y.shape == x.shape
    np.testing.assert_allclose(y, _np_softmax(x.astype(np.float64), axis), rtol=2e-6, atol=1e-9)
    (ly,) = apply_numpy("log_softmax", [x], {"axis": axis})
    np.testing.assert_allclose(ly, np.log(_np_softmax(x.astype(np.float64), axis)), rtol=1e-5, atol=2e-6)
    (sy,) = apply_numpy("softmin", [x], {"axis": axis})
    np.testing.assert_allclose(sy, _np_softmax(-x.astype(np.float64), axis), rtol=2e-6, atol=1e-9)


def test_softmax_temperature_dtype_and_stability():
    x = RNG.standard_normal((3, 4))
    (y,) = apply_numpy("softmax", [x], {"temperature": 2.5, "axis": 0})
    np.testing.assert_allclose(y, _np_softmax(x, 0, 2.5), rtol=1e-12)
    (y,) = apply_numpy("softmax", [x.astype(np.float32)], {"dtype": "float64"})
    assert y.dtype == np.float64
    big = np.array([[1000.0, 1001.0, -1000.0]], np.float32)
    for name in ("softmax", "log_softmax", "softmin"):
        (y,) = apply_numpy(name, [big])
        assert np.all(np.isfinite(y))
    (y,) = apply_numpy("log_softmax", [big])
    np.testing.assert_allclose(y, [[-1.3132616, -0.3132617, -2001.3132]], rtol=1e-6)
    masked = np.array([[0.0, -np.inf, 1.0]], np.float32)   # -inf entries get probability 0
    for attrs in ({}, {"temperature": 1.0}):
        (y,) = apply_numpy("softmax", [masked], attrs)
        np.testing.assert_allclose(y, [[0.26894142, 0.0, 0.7310586]], rtol=1e-6)


def test_softmax_use_length():
    x = RNG.standard_normal((2, 3, 5))
    length = np.array([[5, 2, 1], [3, 4, 0]], dtype=np.int32)
    (y,) = apply_numpy("softmax", [x, length], {"use_length": True})
    for i in range(2):
        for j in range(3):
            n = length[i, j]
            want = np.zeros(5)
            if n:
                want[:n] = _np_softmax(x[i, j, :n], 0)
            np.testing.assert_allclose(y[i, j], want, rtol=1e-12, atol=1e-15)
    via_nd = nd.softmax(nd.array(x), nd.array(length, dtype="int32"), use_length=True)
    np.testing.assert_allclose(via_nd.asnumpy(), y.astype(np.float32), rtol=1e-6)
    op = get_op("softmax")
    ins, (out,) = op.infer_shape(op.parse({"use_length": True}), [(2, 3, 5), None])
    assert ins[1] == (2, 3) and out == (2, 3, 5)
    with pytest.raises(MXNetError, match="softmax.*length"):
        apply_numpy("softmax", [x, np.ones((3, 2))], {"use_length": True})


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
@pytest.mark.parametrize("attrs", [{}, {"axis": 0}, {"axis": 1, "temperature": 0.7}])
def test_softmax_gradient(name, attrs):
    x = RNG.standard_normal((3, 4, 5))
    check_op_gradient(name, [x], attrs)


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_gradient_op_is_the_vjp_and_differentiable(name, axis):
    """`_backward_<name>`(dy, y) equals the vector-Jacobian product of the forward (finite
    differences of <dy, f(x)>, rtol 1e-5 in float64), and its own gradient checks too."""
    x, dy = RNG.standard_normal((3, 4, 5)), RNG.standard_normal((3, 4, 5))
    (y,) = apply_numpy(name, [x], {"axis": axis})
    (dx,) = apply_numpy(f"_backward_{name}", [dy, y], {"axis": axis})
    want = numeric_grad(lambda: np.sum(dy * apply_numpy(name, [x], {"axis": axis})[0]), x)
    np.testing.assert_allclose(dx, want, rtol=1e-5, atol=1e-7)
    check_op_gradient(f"_backward_{name}", [dy, y], {"axis": axis})
    with pytest.raises(MXNetError, match=f"_backward_{name}.*axis"):
        apply_numpy(f"_backward_{name}", [dy, y], {"axis": 3})
    with pytest.raises(MXNetError, match=f"_backward_{name}.*'output'"):
        apply_numpy(f"_backward_{name}", [dy, y[:, :2]], {"axis": axis})


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_length_gradient(name):
    x = RNG.standard_normal((3, 4))
    length = np.array([4, 2, 1])
    check_op_gradient(name, [x, length], {"use_length": True}, wrt=[0])


def test_softmax_gradient_in_float32_with_dtype_cast():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    a = nd.array(x)
    a.attach_grad()
    with autograd.record():
        y = nd.softmax(a, dtype="float64")
    y.backward(nd.array([[1, 0, 0], [0, 1, 0]], dtype="float64"))
    assert a.grad.dtype == np.float32
    p = _np_softmax(x.astype(np.float64), -1)
    dy = np.array([[1, 0, 0], [0, 1, 0]], np.float64)
    want = p * (dy - (dy * p).sum(-1, keepdims=True))
    np.testing.assert_allclose(a.grad.asnumpy(), want, rtol=1e-5, atol=1e-7)


def test_softmax_activation():
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    (y,) = apply_numpy("SoftmaxActivation", [x])
    # instance mode: MXNet flattens the leading axes, so the softmax runs over the last one
    np.testing.assert_allclose(y, _np_softmax(x.astype(np.float64), -1), rtol=2e-6)
    (y,) = apply_numpy("SoftmaxActivation", [x], {"mode": "channel"})
    np.testing.assert_allclose(y, _np_softmax(x.astype(np.float64), 1), rtol=2e-6)
    check_op_gradient("SoftmaxActivation", [x.astype(np.float64)], {"mode": "channel"})
    check_op_gradient("SoftmaxActivation", [x[0, 0].astype(np.float64)])
    with pytest.raises(MXNetError, match="SoftmaxActivation"):
        apply_numpy("SoftmaxActivation", [x[0, 0]], {"mode": "channel"})
    with pytest.raises(MXNetError, match="SoftmaxActivation"):
        apply_numpy("SoftmaxActivation", [x], {"mode": "batch"})


def test_softmax_errors_and_kernel_family():
    with pytest.raises(MXNetError, match="softmax"):
        apply_numpy("softmax", [np.ones((2, 3))], {"axis": 2})
    with pytest.raises(MXNetError, match="log_softmax"):
        apply_numpy("log_softmax", [np.ones((2, 3))], {"axis": -3})
    assert get_op("softmax").kernel == "softmax"
    assert get_op("sum").kernel == "reduce"


def test_onednn_exp_accuracy_and_underflow():
    # a degree-5 polynomial: within a few float32 ulps of exp where the result is normal
    x = np.linspace(-86.0, 0.0, 20001).astype(np.float32)
    got = _onednn_exp(x)
    want = np.exp(x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=5e-7)
    assert _onednn_exp(np.array([-88.0, -200.0], np.float32)).tolist() == [0.0, 0.0]


def test_fma32_rounds_once():
    # a*b + c lies just below the midpoint between c and its float32 successor: a correct FMA
    # returns c, while rounding through float64 first lands on the midpoint and rounds up.
    a = np.array([1 + 2.0 ** -18], np.float32)
    b = np.array([(1 - 2.0 ** -18) * 2.0 ** -24], np.float32)
    c = np.array([1 + 2.0 ** -23], np.float32)
    assert _fma32(a, b, c)[0] == c[0]
    naive = (a.astype(np.float64) * b + c).astype(np.float32)
    assert naive[0] != c[0]


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


@pytest.mark.parametrize("op,xs,attrs", [
    ("sum", [RNG.uniform(size=(3, 4))], {"axis": 1}),
    ("mean", [RNG.uniform(size=(3, 4))], {"axis": 0, "keepdims": True}),
    ("max", [RNG.permutation(12).reshape(3, 4) * 1.0], {"axis": (0,), "exclude": True}),
    ("prod", [RNG.uniform(0.5, 1.5, size=(3, 4))], {}),
    ("norm", [RNG.uniform(size=(3, 4))], {"axis": 1}),
    ("softmax", [RNG.uniform(size=(3, 4))], {"axis": 0, "temperature": 2.0}),
    ("log_softmax", [RNG.uniform(size=(3, 4)), np.array([1, 2, 4])], {"use_length": True}),
    ("softmin", [RNG.uniform(size=(3, 4))], {}),
    ("SoftmaxActivation", [RNG.uniform(size=(2, 3, 4))], {"mode": "channel"}),
])
def test_ir_autodiff_gradient(op, xs, attrs):
    _check_ir_gradient(op, xs, attrs)


def test_softmax_native_paths_round_once():
    # float32 with a temperature (MXNet's native kernel): x - max in float32, exp rounded to
    # float32, float64 sum, one rounding of the quotient: a few float32 ulps from the exact
    # softmax of the float32 differences (a float32 sum would drift further on long rows)
    x = np.random.default_rng(5).standard_normal((4, 300)).astype(np.float32)
    (y,) = apply_numpy("softmax", [x], {"temperature": 1.0})
    z32 = (x - x.max(axis=-1, keepdims=True)).astype(np.float64)
    assert np.all(np.abs(y - _np_softmax(z32, -1)) <= 4 * np.spacing(y))
    # float16 input: computed in float32, result float16 (or the requested dtype)
    h = x.astype(np.float16)
    (yh,) = apply_numpy("softmax", [h])
    assert yh.dtype == np.float16
    np.testing.assert_allclose(yh, _np_softmax(h.astype(np.float64), -1), rtol=1e-3, atol=1e-4)
    (y32,) = apply_numpy("softmax", [h], {"dtype": "float32"})
    assert y32.dtype == np.float32
    z16 = (h - h.max(axis=-1, keepdims=True)).astype(np.float64)  # MXNet subtracts in float16
    np.testing.assert_allclose(y32, _np_softmax(z16, -1), rtol=1e-6)


def _mxnet_native_softmax(x, axis, log):
    """MXNet's native softmax kernel written with explicit full-size casts: exp in float32
    (float64 for float64), sum in float64 (float32 for float16), one division or subtraction."""
    z = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(z.astype(np.float64 if x.dtype == np.float64 else np.float32))
    acc = np.float32 if x.dtype == np.float16 else np.float64
    s = np.sum(e.astype(acc), axis=axis, keepdims=True)
    out = z.astype(acc) - np.log(s) if log else e.astype(acc) / s
    return out.astype(x.dtype)


@pytest.mark.parametrize("shape,axis", [((64, 5000), 1), ((3, 9000), 1), ((9000, 2), 0), ((4, 6, 5), 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_native_path_is_bit_exact_without_full_size_casts(shape, axis, dtype, name):
    """The reference avoids full-size cast copies (the sum casts in numpy's reduction buffer,
    the result is written in the output dtype directly); the bits must not change, also for a
    reduced axis longer than the reduction buffer (9000), where it keeps the explicit cast."""
    x = (RNG.standard_normal(shape) * 4).astype(dtype)
    attrs = {"axis": axis} if name == "log_softmax" or dtype != np.float32 or axis != len(shape) - 1 else \
        {"axis": axis, "temperature": 1.0 + 1e-7}   # float32 last-axis softmax takes the oneDNN path
    (y,) = apply_numpy(name, [x], attrs)
    want = _mxnet_native_softmax(x, axis, name == "log_softmax")
    if "temperature" in attrs:
        z = ((x - np.max(x, axis=axis, keepdims=True)) / np.float32(attrs["temperature"])).astype(np.float32)
        e = np.exp(z)
        want = (e.astype(np.float64) / np.sum(e.astype(np.float64), axis=axis, keepdims=True)).astype(np.float32)
    assert y.dtype == want.dtype
    assert np.array_equal(y.view(np.uint8), want.view(np.uint8))
