"""gluon.rnn: RNN/LSTM/GRU layers and cells against a numpy step-by-step reference (MXNet's
gate orders and GRU formula), MXNet parameter names, states, hybridized forward/gradients."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit import autograd, nd
from symjit.gluon import rnn
from symjit.symbol.naming import NameManager


def sig(x):
    return 1 / (1 + np.exp(-x))


def np_step(mode, x, h, c, wi, wh, bi, bh):
    """One reference step; gates: LSTM [i, f, g, o], GRU [r, z, n]."""
    gi = x @ wi.T + bi
    gh = h @ wh.T + bh
    if mode == "rnn_tanh":
        return np.tanh(gi + gh), None
    if mode == "rnn_relu":
        return np.maximum(gi + gh, 0), None
    if mode == "lstm":
        i, f, g, o = np.split(gi + gh, 4, axis=1)
        c = sig(f) * c + sig(i) * np.tanh(g)
        return sig(o) * np.tanh(c), c
    ir, iz, in_ = np.split(gi, 3, axis=1)
    hr, hz, hn = np.split(gh, 3, axis=1)
    r, z = sig(ir + hr), sig(iz + hz)
    n = np.tanh(in_ + r * hn)
    return (1 - z) * n + z * h, None


def np_layer(mode, params, x, h0, c0, num_layers, dirs):
    """Reference multi-layer (bi)directional RNN over x (T, N, C); returns out, hn, cn."""
    T = x.shape[0]
    inp = x
    hn, cn = [], []
    for l in range(num_layers):
        outs = []
        for d, j in enumerate("lr"[:dirs]):
            P = {k: params[f"{j}{l}_{k}"] for k in ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias")}
            h, c = h0[l * dirs + d], None if c0 is None else c0[l * dirs + d]
            seq = [None] * T
            for t in (range(T) if d == 0 else reversed(range(T))):
                h, c = np_step(mode, inp[t], h, c, P["i2h_weight"], P["h2h_weight"], P["i2h_bias"], P["h2h_bias"])
                seq[t] = h
            outs.append(np.stack(seq))
            hn.append(h)
            cn.append(c)
        inp = np.concatenate(outs, axis=2)
    return inp, np.stack(hn), (np.stack(cn) if c0 is not None else None)


def _params(layer):
    prefix = layer.prefix
    return {k[len(prefix):]: v.data().asnumpy().astype(np.float64) for k, v in layer.collect_params().items()}


@pytest.mark.parametrize("cls,mode,kw", [
    (rnn.RNN, "rnn_relu", {}),
    (rnn.RNN, "rnn_tanh", {"activation": "tanh"}),
    (rnn.LSTM, "lstm", {}),
    (rnn.GRU, "gru", {}),
])
@pytest.mark.parametrize("num_layers,bidirectional,layout", [(1, False, "TNC"), (2, True, "NTC")])
def test_layer_matches_numpy_reference(cls, mode, kw, num_layers, bidirectional, layout):
    rs = np.random.RandomState(0)
    T, N, C, H = 4, 3, 5, 6
    layer = cls(H, num_layers, layout=layout, bidirectional=bidirectional, **kw)
    layer.initialize(mx.init.Uniform(0.5))
    dirs = 2 if bidirectional else 1
    x = rs.randn(T, N, C).astype(np.float32)
    h0 = rs.randn(num_layers * dirs, N, H).astype(np.float32)
    c0 = rs.randn(num_layers * dirs, N, H).astype(np.float32) if mode == "lstm" else None
    feed = x if layout == "TNC" else x.transpose(1, 0, 2)
    states = [nd.array(h0)] + ([nd.array(c0)] if c0 is not None else [])
    out, new_states = layer(nd.array(feed), states)
    ref_out, ref_h, ref_c = np_layer(mode, _params(layer), x.astype(np.float64), h0.astype(np.float64),
                                     None if c0 is None else c0.astype(np.float64), num_layers, dirs)
    if layout == "NTC":
        ref_out = ref_out.transpose(1, 0, 2)
    np.testing.assert_allclose(out.asnumpy(), ref_out, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(new_states[0].asnumpy(), ref_h, rtol=1e-4, atol=1e-5)
    if c0 is not None:
        np.testing.assert_allclose(new_states[1].asnumpy(), ref_c, rtol=1e-4, atol=1e-5)
    # without states: zeros, and only the output is returned
    alone = layer(nd.array(feed))
    ref0 = np_layer(mode, _params(layer), x.astype(np.float64), np.zeros_like(h0, dtype=np.float64),
                    None if c0 is None else np.zeros_like(c0, dtype=np.float64), num_layers, dirs)[0]
    np.testing.assert_allclose(alone.asnumpy(), ref0 if layout == "TNC" else ref0.transpose(1, 0, 2),
                               rtol=1e-4, atol=1e-5)


def test_parameter_names_shapes_and_repr():
    with NameManager():
        gru = rnn.GRU(100, 3)
        lstm = rnn.LSTM(8, 2, bidirectional=True, input_size=4)
    names = list(gru.collect_params().keys())
    assert names[:4] == ["gru0_l0_i2h_weight", "gru0_l0_h2h_weight", "gru0_l0_i2h_bias", "gru0_l0_h2h_bias"]
    assert len(names) == 12
    assert gru.l0_i2h_weight.shape == (300, 0) and gru.l1_i2h_weight.shape == (300, 100)
    assert list(lstm.collect_params().keys())[4:8] == ["lstm0_r0_i2h_weight", "lstm0_r0_h2h_weight",
                                                       "lstm0_r0_i2h_bias", "lstm0_r0_h2h_bias"]
    assert lstm.l1_i2h_weight.shape == (32, 16)
    assert repr(gru) == "GRU(None -> 100, TNC, num_layers=3)"
    assert repr(lstm) == "LSTM(4 -> 8, TNC, num_layers=2, bidirectional)"
    assert repr(rnn.RNN(3, dropout=0.5, layout="NTC")) == "RNN(None -> 3, NTC, dropout=0.5)"
    gru.initialize()
    out = gru(nd.random.uniform(shape=(5, 3, 10)))
    assert out.shape == (5, 3, 100) and gru.l0_i2h_weight.shape == (300, 10)
    out, hn = gru(nd.random.uniform(shape=(5, 3, 10)), nd.random.uniform(shape=(3, 3, 100)))
    assert isinstance(hn, list) and len(hn) == 1 and hn[0].shape == (3, 3, 100)
    with pytest.raises(ValueError, match="Invalid recurrent state shape"):
        gru(nd.ones((5, 3, 10)), nd.ones((2, 3, 100)))
    with pytest.raises(ValueError, match="layout"):
        rnn.LSTM(3, layout="CTN")


def test_begin_state_and_lstm_states():
    lstm = rnn.LSTM(4, 2)
    lstm.initialize()
    st = lstm.begin_state(batch_size=3)
    assert [s.shape for s in st] == [(2, 3, 4), (2, 3, 4)]
    out, (h, c) = lstm(nd.ones((6, 3, 2)), st)
    np.testing.assert_allclose(h.asnumpy()[-1], out.asnumpy()[-1], rtol=1e-6)
    assert c.shape == (2, 3, 4)


@pytest.mark.parametrize("cls,num_layers,bidirectional", [(rnn.LSTM, 2, True), (rnn.GRU, 1, True),
                                                         (rnn.RNN, 1, False)])
def test_hybridized_layer_agrees_forward_and_gradients(cls, num_layers, bidirectional):
    rs = np.random.RandomState(1)
    layer = cls(4, num_layers, bidirectional=bidirectional, layout="NTC")
    layer.initialize(mx.init.Uniform(0.4))
    x = nd.array(rs.randn(2, 3, 5))

    def run(inp):
        inp = inp.copy()
        inp.attach_grad()
        with autograd.record():
            out = layer(inp)
            loss = (out * out).sum()
        loss.backward()
        return out.asnumpy(), inp.grad.asnumpy(), {k: p.grad().asnumpy() for k, p in layer.collect_params().items()}
    ref = run(x)
    layer.hybridize()
    got = run(x)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-4, atol=1e-6)
    for k in ref[2]:
        np.testing.assert_allclose(got[2][k], ref[2][k], rtol=1e-4, atol=1e-6, err_msg=k)
    # another sequence length re-traces the unrolled graph
    longer = nd.array(rs.randn(2, 4, 5))
    hybrid_out = layer(longer).asnumpy()
    layer.hybridize(False)
    np.testing.assert_allclose(hybrid_out, layer(longer).asnumpy(), rtol=1e-4, atol=1e-6)


def test_layer_input_gradient_matches_finite_differences():
    rs = np.random.RandomState(2)
    layer = rnn.GRU(3, input_size=2)
    layer.initialize(mx.init.Uniform(0.5))
    x = rs.randn(3, 1, 2)
    xx = nd.array(x)
    xx.attach_grad()
    with autograd.record():
        loss = layer(xx).sum()
    loss.backward()
    P = _params(layer)

    def f(v):
        return np_layer("gru", P, v, np.zeros((1, 1, 3)), None, 1, 1)[0].sum()
    num = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        d = np.zeros_like(x)
        d[idx] = 1e-5
        num[idx] = (f(x + d) - f(x - d)) / 2e-5
    np.testing.assert_allclose(xx.grad.asnumpy(), num, rtol=1e-3, atol=1e-5)


def test_dropout_between_layers_only_in_training():
    layer = rnn.LSTM(4, 2, dropout=0.5)
    layer.initialize()
    x = nd.ones((3, 2, 3))
    a, b = layer(x).asnumpy(), layer(x).asnumpy()
    np.testing.assert_array_equal(a, b)
    with autograd.record():
        t = layer(x).asnumpy()
    assert not np.allclose(t, a)


def test_lstm_projection_and_state_clipping():
    rs = np.random.RandomState(3)
    layer = rnn.LSTM(4, projection_size=2, state_clip_min=-0.2, state_clip_max=0.2)
    layer.initialize(mx.init.Uniform(1.0))
    assert layer.l0_h2r_weight.shape == (2, 4) and layer.l0_h2h_weight.shape == (16, 2)
    x = rs.randn(3, 2, 3)
    out, (h, c) = layer(nd.array(x), layer.begin_state(2))
    P = _params(layer)
    hh, cc = np.zeros((2, 2)), np.zeros((2, 4))
    for t in range(3):
        g = x[t] @ P["l0_i2h_weight"].T + P["l0_i2h_bias"] + hh @ P["l0_h2h_weight"].T + P["l0_h2h_bias"]
        i, f, gg, o = np.split(g, 4, axis=1)
        cc = np.clip(sig(f) * cc + sig(i) * np.tanh(gg), -0.2, 0.2)
        hh = (sig(o) * np.tanh(cc)) @ P["l0_h2r_weight"].T
    assert out.shape == (3, 2, 2) and h.shape == (1, 2, 2) and c.shape == (1, 2, 4)
    np.testing.assert_allclose(h.asnumpy()[0], hh, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(c.asnumpy()[0], cc, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("cell_cls,mode", [(rnn.RNNCell, "rnn_tanh"), (rnn.LSTMCell, "lstm"), (rnn.GRUCell, "gru")])
def test_cells_unroll_matches_reference(cell_cls, mode):
    rs = np.random.RandomState(4)
    cell = cell_cls(5, input_size=3)
    cell.initialize(mx.init.Uniform(0.5))
    x = rs.randn(2, 4, 3)  # NTC
    outs, states = cell.unroll(4, nd.array(x), layout="NTC", merge_outputs=True)
    P = {k[len(cell.prefix):]: v.data().asnumpy().astype(np.float64) for k, v in cell.collect_params().items()}
    h, c = np.zeros((2, 5)), np.zeros((2, 5))
    ref = []
    for t in range(4):
        h, c = np_step(mode, x[:, t], h, c, P["i2h_weight"], P["h2h_weight"], P["i2h_bias"], P["h2h_bias"])
        ref.append(h)
    np.testing.assert_allclose(outs.asnumpy(), np.stack(ref, 1), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(states[0].asnumpy(), h, rtol=1e-4, atol=1e-6)
    if mode == "lstm":
        np.testing.assert_allclose(states[1].asnumpy(), c, rtol=1e-4, atol=1e-6)
    steps, _ = cell.unroll(4, nd.array(x), layout="NTC", merge_outputs=False)
    assert isinstance(steps, list) and len(steps) == 4
    # a hybridized cell computes the same step
    st = cell.begin_state(2)
    a, _ = cell(nd.array(x[:, 0]), st)
    cell.hybridize()
    b, _ = cell(nd.array(x[:, 0]), st)
    np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-7)


def test_cell_names_and_repr():
    with NameManager():
        seq = rnn.SequentialRNNCell()
        with seq.name_scope():
            seq.add(rnn.LSTMCell(4, input_size=3))
            seq.add(rnn.GRUCell(2))
        cell = rnn.RNNCell(3, activation="relu")
    assert list(seq.collect_params().keys())[0] == "sequentialrnncell0_lstm0_i2h_weight"
    assert cell.prefix == "rnn0_"
    assert repr(cell) == "RNNCell(None -> 3, relu)"
    assert repr(seq) == "SequentialRNNCell(\n(0): LSTMCell(3 -> 16, tanh)\n(1): GRUCell(None -> 6, tanh)\n)"
    assert [s["shape"] for s in seq.state_info(5)] == [(5, 4), (5, 4), (5, 2)]


def test_sequential_cell_unroll_and_valid_length():
    rs = np.random.RandomState(5)
    seq = rnn.SequentialRNNCell()
    seq.add(rnn.GRUCell(4, input_size=3))
    seq.add(rnn.RNNCell(2, input_size=4))
    seq.initialize(mx.init.Uniform(0.5))
    x = rs.randn(2, 5, 3)
    outs, states = seq.unroll(5, nd.array(x), merge_outputs=True)
    P = [{k[len(c.prefix):]: v.data().asnumpy().astype(np.float64) for k, v in c.collect_params().items()}
         for c in (seq[0], seq[1])]
    h1, h2 = np.zeros((2, 4)), np.zeros((2, 2))
    ref, hist = [], []
    for t in range(5):
        h1, _ = np_step("gru", x[:, t], h1, None, P[0]["i2h_weight"], P[0]["h2h_weight"], P[0]["i2h_bias"], P[0]["h2h_bias"])
        h2, _ = np_step("rnn_tanh", h1, h2, None, P[1]["i2h_weight"], P[1]["h2h_weight"], P[1]["i2h_bias"], P[1]["h2h_bias"])
        ref.append(h2)
        hist.append((h1, h2))
    np.testing.assert_allclose(outs.asnumpy(), np.stack(ref, 1), rtol=1e-4, atol=1e-6)
    assert [s.shape for s in states] == [(2, 4), (2, 2)]
    # valid_length: outputs past each length are zero, states are those of the last valid step
    outs, states = seq.unroll(5, nd.array(x), merge_outputs=True, valid_length=nd.array([2, 5]))
    o = outs.asnumpy()
    np.testing.assert_allclose(o[0, :2], np.stack(ref, 1)[0, :2], rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(o[0, 2:], 0)
    np.testing.assert_allclose(states[1].asnumpy()[0], hist[1][1][0], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(states[1].asnumpy()[1], hist[4][1][1], rtol=1e-4, atol=1e-6)


def test_bidirectional_and_residual_cells():
    rs = np.random.RandomState(6)
    bi = rnn.BidirectionalCell(rnn.GRUCell(3, input_size=2, prefix="l_"), rnn.GRUCell(3, input_size=2, prefix="r_"))
    bi.initialize(mx.init.Uniform(0.5))
    x = rs.randn(1, 4, 2)
    out, states = bi.unroll(4, nd.array(x), merge_outputs=True)
    assert out.shape == (1, 4, 6) and len(states) == 2
    l_out, _ = bi._children["l_cell"].unroll(4, nd.array(x), merge_outputs=True)
    r_out, _ = bi._children["r_cell"].unroll(4, nd.array(x[:, ::-1].copy()), merge_outputs=True)
    np.testing.assert_allclose(out.asnumpy()[..., :3], l_out.asnumpy(), rtol=1e-5)
    np.testing.assert_allclose(out.asnumpy()[..., 3:], r_out.asnumpy()[:, ::-1], rtol=1e-5)
    base = rnn.RNNCell(2, input_size=2)
    res = rnn.ResidualCell(base)
    res.initialize()
    o_res, _ = res.unroll(4, nd.array(x), merge_outputs=True)
    base._modified = False
    o_base, _ = base.unroll(4, nd.array(x), merge_outputs=True)
    np.testing.assert_allclose(o_res.asnumpy(), o_base.asnumpy() + x, rtol=1e-5)


@pytest.mark.parametrize("cls,mode", [(rnn.LSTM, "lstm"), (rnn.GRU, "gru"), (rnn.RNN, "rnn_relu")])
def test_layer_parameters_packed_as_mxnet_drive_the_fused_rnn_op(cls, mode):
    """Gluon's fused layers pack weights (then biases) per layer and direction for the `RNN`
    op: the unrolled layer must agree with the fused op on the packed vector."""
    rs = np.random.RandomState(7)
    layer = cls(3, 2, bidirectional=True)
    layer.initialize(mx.init.Uniform(0.5))
    x = rs.randn(4, 2, 5).astype(np.float32)
    states = layer.begin_state(2)
    states = [nd.array(rs.randn(*s.shape)) for s in states]
    out, new_states = layer(nd.array(x), states)
    P = layer.collect_params()
    flat = np.concatenate([P[f"{layer.prefix}{d}{l}_{g}_{t}"].data().asnumpy().reshape(-1)
                           for t in ("weight", "bias") for l in range(2) for d in "lr" for g in ("i2h", "h2h")])
    fused = nd.RNN(nd.array(x), nd.array(flat), *states, state_size=3, num_layers=2, bidirectional=True,
                   mode=mode, state_outputs=True)
    np.testing.assert_allclose(out.asnumpy(), fused[0].asnumpy(), rtol=1e-5, atol=1e-6)
    for a, b in zip(new_states, fused[1:]):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-6)


def test_layer_composed_on_symbols_builds_the_fused_graph():
    layer = rnn.LSTM(3, 2, bidirectional=True, layout="NTC", input_size=4)
    layer.initialize()
    x = nd.random.uniform(shape=(2, 5, 4))
    st = layer.begin_state(2)
    ref, ref_states = layer(x, st)
    data = mx.sym.var("data")
    svars = [mx.sym.var("s0"), mx.sym.var("s1")]
    out, out_states = layer(data, svars)
    ops = [n["op"] for n in __import__("json").loads(out.tojson())["nodes"]]
    assert "RNN" in ops and "_rnn_param_concat" in ops
    args = {p.name: p.data() for p in layer.collect_params().values()}
    res = mx.sym.Group([out] + out_states).eval(data=x, s0=st[0], s1=st[1], **args)
    np.testing.assert_allclose(res[0].asnumpy(), ref.asnumpy(), rtol=1e-5, atol=1e-6)
    for a, b in zip(res[1:], ref_states):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", ["TNC", "NTC"])
def test_rnn_inside_a_hybridized_parent_agrees_with_imperative(layout):
    """Traced by a parent (sequence length unknown), the layer uses the fused RNN op with zero
    begin states shaped from the input; forward and gradients match the imperative run."""
    from symjit.gluon import nn
    net = nn.HybridSequential()
    net.add(rnn.GRU(4, 2, bidirectional=True, layout=layout, input_size=3), nn.Dense(2, flatten=False))
    net.initialize(mx.init.Uniform(0.5))
    x = nd.array(np.random.RandomState(8).randn(5, 2, 3))

    def run():
        xx = x.copy()
        xx.attach_grad()
        with autograd.record():
            y = net(xx)
            loss = (y * y).sum()
        loss.backward()
        return y.asnumpy(), xx.grad.asnumpy(), net[0].l1_h2h_weight.grad().asnumpy()
    ref = run()
    net.hybridize()
    got = run()
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_zoneout_cell_keeps_previous_values_only_in_training():
    cell = rnn.ZoneoutCell(rnn.RNNCell(50, input_size=2), zoneout_outputs=0.5, zoneout_states=0.5)
    cell.initialize(mx.init.Uniform(1.0))
    x = nd.array(np.random.RandomState(9).randn(3, 4, 2))
    out, _ = cell.unroll(4, x, merge_outputs=True)
    cell.base_cell._modified = False
    ref, _ = cell.base_cell.unroll(4, x, merge_outputs=True)
    cell.base_cell._modified = True
    np.testing.assert_allclose(out.asnumpy(), ref.asnumpy(), rtol=1e-6)  # inference: no zoneout
    with autograd.record():
        tr, _ = cell.unroll(4, x, merge_outputs=True)
    t = tr.asnumpy()
    # step 0 keeps zeros (the initial previous output) where zoned out; later steps keep the previous output
    kept0 = t[:, 0] == 0
    assert 0.2 < kept0.mean() < 0.8
    assert 0.2 < (t[:, 1] == t[:, 0]).mean() < 0.8
    assert "ZoneoutCell(p_out=0.5, p_state=0.5, RNNCell(2 -> 50, tanh))" == repr(cell)


def test_deferred_input_size_inside_a_hybridized_parent():
    from symjit.gluon import nn
    net = nn.HybridSequential()
    net.add(rnn.LSTM(4, 2, bidirectional=True), nn.Dense(2, flatten=False))
    net.initialize(mx.init.Uniform(0.5))
    net.hybridize()
    x = nd.array(np.random.RandomState(10).randn(5, 2, 3))
    y = net(x).asnumpy()
    assert net[0].l0_i2h_weight.shape == (16, 3) and net[0].r0_i2h_weight.shape == (16, 3)
    net.hybridize(False)
    np.testing.assert_allclose(net(x).asnumpy(), y, rtol=1e-4, atol=1e-6)
