"""The fused `RNN` op (MXNet's packed parameters) and `_rnn_param_concat`: forward against
an independent numpy step reference, gradients by finite differences, MXNet shape inference
and errors naming the op."""
from __future__ import annotations

import numpy as np
import pytest

from symjit import nd
from symjit.base import MXNetError
from symjit.ops.registry import apply_numpy, get_op
from symjit.ops.rnn import param_size, reserve_size
from symjit.test_utils import check_op_gradient


def sig(x):
    return 1 / (1 + np.exp(-x))


def ref_rnn(mode, x, flat, h0, c0, H, L, D):
    """Unpack MXNet's layout (all weights, then all biases) and run every step in numpy."""
    G = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}[mode]
    pos, W = 0, {}
    for l in range(L):
        ni = x.shape[2] if l == 0 else D * H
        for d in range(D):
            W[l, d] = [flat[pos:pos + G * H * ni].reshape(G * H, ni)]
            pos += G * H * ni
            W[l, d].append(flat[pos:pos + G * H * H].reshape(G * H, H))
            pos += G * H * H
    for l in range(L):
        for d in range(D):
            W[l, d] += [flat[pos:pos + G * H], flat[pos + G * H:pos + 2 * G * H]]
            pos += 2 * G * H
    assert pos == flat.size
    inp, hs, cs = x, [], []
    for l in range(L):
        outs = []
        for d in range(D):
            wi, wh, bi, bh = W[l, d]
            h, c = h0[l * D + d], c0[l * D + d]
            seq = [None] * x.shape[0]
            for t in (range(x.shape[0]) if d == 0 else reversed(range(x.shape[0]))):
                gi, gh = inp[t] @ wi.T + bi, h @ wh.T + bh
                if mode == "lstm":
                    i, f, g, o = np.split(gi + gh, 4, axis=1)
                    c = sig(f) * c + sig(i) * np.tanh(g)
                    h = sig(o) * np.tanh(c)
                elif mode == "gru":
                    r = sig(gi[:, :H] + gh[:, :H])
                    z = sig(gi[:, H:2 * H] + gh[:, H:2 * H])
                    n = np.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
                    h = (1 - z) * n + z * h
                elif mode == "rnn_tanh":
                    h = np.tanh(gi + gh)
                else:
                    h = np.maximum(gi + gh, 0)
                seq[t] = h
            outs.append(np.stack(seq))
            hs.append(h)
            cs.append(c)
        inp = np.concatenate(outs, axis=2)
    return inp, np.stack(hs), np.stack(cs)


@pytest.mark.parametrize("mode", ["rnn_relu", "rnn_tanh", "lstm", "gru"])
@pytest.mark.parametrize("L,bidirectional", [(1, False), (2, True)])
def test_rnn_forward_matches_reference(mode, L, bidirectional):
    rs = np.random.RandomState(0)
    H, D = 3, 2 if bidirectional else 1
    attrs = dict(state_size=H, num_layers=L, bidirectional=bidirectional, mode=mode, state_outputs=True)
    x = rs.randn(4, 2, 5)
    flat = rs.randn(param_size(attrs, 5)) * 0.5
    h0, c0 = rs.randn(L * D, 2, H), rs.randn(L * D, 2, H)
    ins = [x, flat, h0] + ([c0] if mode == "lstm" else [])
    *outs, reserve = apply_numpy("RNN", ins, attrs)
    ref = ref_rnn(mode, x, flat, h0, c0 if mode == "lstm" else np.zeros_like(h0), H, L, D)
    assert len(outs) == (3 if mode == "lstm" else 2)
    for got, want in zip(outs, ref):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # the hidden reserve (the native kernel's traces) is left zero by the reference
    assert reserve.shape == (reserve_size(get_op("RNN").parse(attrs), 4, 2, 5),) and not reserve.any()
    only = apply_numpy("RNN", ins, {**attrs, "state_outputs": False})
    assert len(only) == 2


@pytest.mark.parametrize("mode", ["rnn_tanh", "lstm", "gru"])
def test_rnn_gradients_by_finite_differences(mode):
    rs = np.random.RandomState(1)
    attrs = dict(state_size=2, num_layers=2, bidirectional=True, mode=mode, state_outputs=True)
    ins = [rs.randn(3, 2, 3), rs.randn(param_size(attrs, 3)) * 0.5, rs.randn(4, 2, 2)]
    if mode == "lstm":
        ins.append(rs.randn(4, 2, 2))
    check_op_gradient("RNN", ins, attrs, rtol=1e-3, atol=1e-6)


def test_rnn_shape_inference_param_size_and_errors():
    op = get_op("RNN")
    attrs = op.parse({"state_size": "4", "num_layers": "2", "mode": "lstm", "bidirectional": "True",
                      "state_outputs": "True"})
    # 4 gates * 4 hidden: layer0 (5 + 4 + 2) * 16 per direction, layer1 (8 + 4 + 2) * 16
    assert param_size(attrs, 5) == 2 * 16 * 11 + 2 * 16 * 14
    ins, outs = op.infer_shape(attrs, [(7, 3, 5), None, None, None])
    assert ins[1] == (param_size(attrs, 5),) and ins[2] == ins[3] == (4, 3, 4)
    assert outs == [(7, 3, 8), (4, 3, 4), (4, 3, 4), (reserve_size(attrs, 7, 3, 5),)]
    with pytest.raises(MXNetError, match="RNN.*parameters"):
        apply_numpy("RNN", [np.zeros((2, 1, 3)), np.zeros(5), np.zeros((1, 1, 2))],
                    {"state_size": 2, "num_layers": 1, "mode": "gru"})
    with pytest.raises(MXNetError, match="RNN.*state"):
        a = {"state_size": 2, "num_layers": 1, "mode": "gru"}
        apply_numpy("RNN", [np.zeros((2, 1, 3)), np.zeros(param_size(op.parse(a), 3)), np.zeros((2, 1, 2))], a)
    with pytest.raises(MXNetError, match="projection_size"):
        a = {"state_size": 2, "num_layers": 1, "mode": "lstm", "projection_size": 1}
        apply_numpy("RNN", [np.zeros((2, 1, 3)), np.zeros(10), np.zeros((1, 1, 2)), np.zeros((1, 1, 2))], a)


def test_rnn_param_concat_and_ndarray_entry():
    a, b = np.arange(3.0), np.arange(4.0, 6.0)
    np.testing.assert_array_equal(apply_numpy("_rnn_param_concat", [a, b], {"num_args": 2})[0], [0, 1, 2, 4, 5])
    check_op_gradient("_rnn_param_concat", [a, b], {"num_args": 2})
    out = nd.RNN(nd.ones((2, 1, 3)), nd.zeros((param_size(get_op("RNN").parse(
        {"state_size": 2, "num_layers": 1, "mode": "rnn_tanh"}), 3),)), nd.zeros((1, 1, 2)),
        state_size=2, num_layers=1, mode="rnn_tanh")
    np.testing.assert_array_equal(out.asnumpy(), np.zeros((2, 1, 2)))


def test_rnn_flat_input_weight_infers_the_input_size():
    op = get_op("_rnn_flat_input_weight")
    attrs = op.parse({"rows": 6})
    ins, outs = op.infer_shape(attrs, [(6, 0), (4, 2, 5)])
    assert ins[0] == (6, 5) and outs == [(30,)]
    w = np.arange(30.0).reshape(6, 5)
    np.testing.assert_array_equal(apply_numpy("_rnn_flat_input_weight", [w, np.zeros((4, 2, 5))], {"rows": 6})[0],
                                  np.arange(30.0))
    check_op_gradient("_rnn_flat_input_weight", [w, np.zeros((4, 2, 5))], {"rows": 6}, wrt=[0])
    with pytest.raises(MXNetError, match="_rnn_flat_input_weight"):
        op.infer_shape(attrs, [(6, 4), (4, 2, 5)])


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_rnn_dropout_between_layers_trains(mode):
    """Training-mode dropout (p > 0): the forward keeps its masks as a hidden output and the
    backward replays them, so the gradient is that of the forward with those masks."""
    from symjit.ops.registry import ComputeContext, numpy_emitter
    from symjit.test_utils import numeric_grad
    rs = np.random.RandomState(2)
    attrs = dict(state_size=2, num_layers=3, bidirectional=True, mode=mode, state_outputs=True, p=0.4)
    op = get_op("RNN")
    parsed = op.parse(attrs)
    ins = [rs.randn(3, 2, 3), rs.randn(param_size(parsed, 3)) * 0.5, rs.randn(6, 2, 2)]
    if mode == "lstm":
        ins.append(rs.randn(6, 2, 2))

    def ctx():   # the same masks at every call: a fresh generator with one seed
        return ComputeContext(is_train=True, rng=np.random.default_rng(7))
    outs = op.compute(parsed, ins, ctx())
    n_vis = op.num_visible_outputs(parsed)
    masks = outs[n_vis]
    assert masks.shape == (2, 3, 2, 4) and set(np.unique(masks)) <= {0.0, 1 / 0.6}
    assert (masks == 0).any()
    heads = [rs.randn(*o.shape) for o in outs[:n_vis]]

    def loss():
        return float(sum((o * h).sum() for o, h in zip(op.compute(parsed, ins, ctx())[:n_vis], heads)))
    grads = op.grad(numpy_emitter(ctx()), parsed, ins, outs, heads + [np.zeros_like(masks)])
    for i in (0, 1, 2):
        np.testing.assert_allclose(grads[i], numeric_grad(loss, ins[i], 1e-6), rtol=1e-4, atol=1e-7)
    inference = op.compute(parsed, ins, ComputeContext(is_train=False))
    assert (inference[n_vis] == 1).all()
