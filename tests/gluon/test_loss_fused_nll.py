"""The eager SoftmaxCrossEntropyLoss (sparse labels) runs as one op, `_log_softmax_nll`, and one
gradient op: bit for bit the separate log_softmax / pick / negative / mean ops it replaces
(losses and gradients, every dtype, axis, weighting and out-of-range label), against numpy's
formula, against finite differences (first and second order), and through autograd's grad_req
write / add and create_graph."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit import autograd
from symjit.base import MXNetError
from symjit.gluon import loss as gloss
from symjit.ndarray.ndarray import invoke
from symjit.test_utils import check_op_gradient

RS = np.random.RandomState(7)

# (pred shape, class axis, batch axis)
LAYOUTS = [((64, 10), -1, 0), ((7, 5), 0, 1), ((4, 6, 5), -1, 0), ((4, 6, 5), 1, 0), ((3, 1), -1, 0)]


def _labels(shape, axis, low=-2, extra=2):
    """Labels shaped like pred without the class axis, some out of range (pick clips them)."""
    ax = axis % len(shape)
    lshape = tuple(d for i, d in enumerate(shape) if i != ax)
    return RS.randint(low, shape[ax] + extra, size=lshape).astype(np.float32)


def _run(pred, label, fused: bool, monkeypatch, grad_req="write", repeats=1, **kw):
    """(loss, pred gradient, names of the ops on the loss's tape) of the eager loss, fused or not."""
    monkeypatch.setattr(gloss, "_fused_nll_applies", lambda p: fused)
    sw = kw.pop("sample_weight", None)
    fn = gloss.SoftmaxCrossEntropyLoss(**kw)
    x = mx.nd.array(pred, dtype=pred.dtype)
    x.attach_grad(grad_req=grad_req)
    for _ in range(repeats):
        with autograd.record():
            loss = fn(x, mx.nd.array(label)) if sw is None else fn(x, mx.nd.array(label), mx.nd.array(sw))
        ops = {n.op.name for n in autograd._topo_nodes([loss]) if n.op is not None}
        loss.backward()
    return loss.asnumpy(), x.grad.asnumpy(), ops


@pytest.mark.parametrize("shape,axis,batch_axis", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighting", ["none", "weight", "sample_weight"])
def test_fused_equals_separate_ops_bitwise(monkeypatch, shape, axis, batch_axis, dtype, weighting):
    pred = (RS.randn(*shape) * 4).astype(dtype)
    label = _labels(shape, axis)
    kw = {"axis": axis, "batch_axis": batch_axis}
    if weighting == "weight":
        kw["weight"] = 0.7
    elif weighting == "sample_weight":
        sw_shape = [1] * len(shape)
        sw_shape[batch_axis] = shape[batch_axis]
        kw["sample_weight"] = RS.uniform(0.5, 2, size=sw_shape).astype(np.float32)
    fused = _run(pred, label, True, monkeypatch, **dict(kw))
    plain = _run(pred, label, False, monkeypatch, **dict(kw))
    assert "_log_softmax_nll" in fused[2] and "_log_softmax_nll" not in plain[2]
    assert fused[0].dtype == plain[0].dtype and fused[0].shape == plain[0].shape
    np.testing.assert_array_equal(fused[0], plain[0])
    np.testing.assert_array_equal(fused[1], plain[1])


@pytest.mark.parametrize("shape,axis,batch_axis", LAYOUTS[:4])
def test_signed_zero_head_gradients_bitwise(monkeypatch, shape, axis, batch_axis):
    """Head gradients holding +0.0, -0.0 and other values: the fused gradient's one-hot head
    (written directly, no scatter-add) keeps the separate ops' signs of zero."""
    pred = (RS.randn(*shape) * 4).astype(np.float32)
    label = _labels(shape, axis)
    results, head = [], None
    for fused in (True, False):
        monkeypatch.setattr(gloss, "_fused_nll_applies", lambda p, f=fused: f)
        x = mx.nd.array(pred)
        x.attach_grad()
        with autograd.record():
            loss = gloss.SoftmaxCrossEntropyLoss(axis=axis, batch_axis=batch_axis)(x, mx.nd.array(label))
        if head is None:
            head = RS.choice(np.array([0.0, -0.0, 1.5, -2.0], np.float32), size=loss.shape)
        loss.backward(mx.nd.array(head))
        results.append(x.grad.asnumpy())
    np.testing.assert_array_equal(results[0], results[1])
    assert (np.signbit(results[0]) == np.signbit(results[1])).all()


def test_non_finite_label_is_an_error():
    with pytest.raises(MXNetError, match="finite"):
        mx.nd._log_softmax_nll(mx.nd.ones((4, 3)), mx.nd.array([0, np.nan, 1, 2]))


def test_fused_matches_numpy_formula(monkeypatch):
    pred = RS.randn(16, 9).astype(np.float64) * 3
    label = _labels((16, 9), -1)
    loss, grad, op = _run(pred, label, True, monkeypatch)
    assert op == {"_log_softmax_nll"}
    j = np.clip(label.astype(np.int64), 0, 8)
    logp = pred - pred.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    np.testing.assert_allclose(loss, -logp[np.arange(16), j], rtol=1e-12, atol=1e-12)
    want = np.exp(logp)
    want[np.arange(16), j] -= 1
    np.testing.assert_allclose(grad, want, rtol=1e-12, atol=1e-12)


def test_grad_req_add_accumulates(monkeypatch):
    pred = RS.randn(8, 5).astype(np.float32)
    label = _labels((8, 5), -1)
    once = _run(pred, label, True, monkeypatch)[1]
    twice = _run(pred, label, True, monkeypatch, grad_req="add", repeats=2)[1]
    plain = _run(pred, label, False, monkeypatch, grad_req="add", repeats=2)[1]
    np.testing.assert_array_equal(twice, plain)
    np.testing.assert_allclose(twice, 2 * once, rtol=1e-6)


def test_default_route_small_fused_large_float32_native():
    """Small or non-float32 predictions take the fused op; large float32 ones keep the separate
    ops, whose native kernels run them."""
    fn = gloss.SoftmaxCrossEntropyLoss()
    for shape, dtype, want in [((64, 10), np.float32, "_log_softmax_nll"),
                               ((300, 300), np.float64, "_log_softmax_nll"),
                               ((300, 300), np.float32, "mean")]:
        x = mx.nd.array(RS.randn(*shape), dtype=dtype)
        x.attach_grad()
        with autograd.record():
            loss = fn(x, mx.nd.array(_labels(shape, -1, 0, 0)))
        assert loss._ag.node.op.name == want, (shape, dtype)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [-1, 0])
def test_op_gradients_finite_differences(keepdims, axis):
    x = RS.randn(5, 4)
    label = _labels((5, 4), axis).astype(np.int64)
    attrs = {"axis": axis, "keepdims": keepdims}
    check_op_gradient("_log_softmax_nll", [x, label], attrs, wrt=[0], rtol=1e-4, atol=1e-6)
    # the gradient op differentiates again (create_graph): wrt the head gradient and log-softmax
    n_out = [d for i, d in enumerate(x.shape) if i != axis % 2]
    g = RS.randn(*(n_out[:axis % 2] + [1] * keepdims + n_out[axis % 2:]))
    y = RS.randn(5, 4) - 2
    check_op_gradient("_backward_log_softmax_nll", [g, y, label], attrs, wrt=[0, 1], rtol=1e-4, atol=1e-6)


def test_second_order_equals_separate_ops(monkeypatch):
    """d/dx of <dloss/dx, v> through create_graph: the same as through the separate ops."""
    pred = RS.randn(6, 5)
    label = mx.nd.array(_labels((6, 5), -1))
    v = mx.nd.array(RS.randn(6, 5))
    got = []
    for fused in (True, False):
        monkeypatch.setattr(gloss, "_fused_nll_applies", lambda p, fused=fused: fused)
        x = mx.nd.array(pred, dtype=np.float64)
        x.attach_grad()
        with autograd.record():
            loss = gloss.SoftmaxCrossEntropyLoss()(x, label)
            (dx,) = autograd.grad(loss, [x], create_graph=True)
            z = (dx * v).sum()
        z.backward()
        got.append(x.grad.asnumpy())
    np.testing.assert_allclose(got[0], got[1], rtol=1e-10, atol=1e-12)


def test_hidden_log_softmax_output_gets_its_gradient():
    """Using the hidden log-softmax output directly adds its gradient (log_softmax's)."""
    pred = RS.randn(4, 6)
    label = mx.nd.array(_labels((4, 6), -1))
    w = mx.nd.array(RS.randn(4, 6), dtype=np.float64)
    grads = []
    for fused in (True, False):
        x = mx.nd.array(pred, dtype=np.float64)
        x.attach_grad()
        with autograd.record():
            if fused:
                nll, logp = invoke("_log_softmax_nll", [x, label], {"axis": -1}, all_outputs=True)
            else:
                logp = mx.nd.log_softmax(x, axis=-1)
                nll = -mx.nd.pick(logp, label, axis=-1)
            total = nll.sum() + (logp * w).sum()
        total.backward()
        grads.append(x.grad.asnumpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10, atol=1e-12)


def test_bad_label_shape_is_an_error():
    with pytest.raises(MXNetError, match="_log_softmax_nll"):
        mx.nd._log_softmax_nll(mx.nd.ones((4, 3)), mx.nd.ones((5,)))
