"""gluon.contrib.rnn: convolutional cells, LSTMPCell and VariationalDropoutCell, checked
against straightforward numpy and MXNet 1.9.1's documented shapes and names."""
import itertools
import json

import numpy as np
import pytest

import symjit as mx
from symjit import autograd, gluon, nd
from symjit.base import MXNetError
from symjit.gluon.contrib import rnn as crnn


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _conv(x, w, b, pad, dilate):
    """Stride-1 N-d convolution, channel-first: x (N, C, *S), w (F, C, *K)."""
    k = w.shape[2:]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out_size = [xp.shape[2 + i] - dilate[i] * (k[i] - 1) for i in range(len(k))]
    out = np.zeros((x.shape[0], w.shape[0]) + tuple(out_size))
    for off in itertools.product(*[range(n) for n in k]):
        window = xp[(slice(None), slice(None)) + tuple(slice(o * d, o * d + s) for o, d, s in zip(off, dilate, out_size))]
        out += np.einsum("nc...,fc->nf...", window, w[(slice(None), slice(None)) + off])
    return out + b.reshape((1, -1) + (1,) * len(k))


def _params(cell):
    return {n.split("_", 2)[-1] if False else n[len(cell.prefix):]: p.data().asnumpy().astype(np.float64)
            for n, p in cell.collect_params().items()}


def _conv_ref(kind, cell, xs, pad, dilate, h2h_dilate):
    p = _params(cell)
    hk = p["h2h_weight"].shape[2:]
    h2h_pad = [d * (k - 1) // 2 for d, k in zip(h2h_dilate, hk)]
    state = np.zeros((xs[0].shape[0],) + cell._state_shape)
    h, c, outs = state, state, []
    for x in xs:
        i2h = _conv(x, p["i2h_weight"], p["i2h_bias"], pad, dilate)
        h2h = _conv(h, p["h2h_weight"], p["h2h_bias"], h2h_pad, h2h_dilate)
        if kind == "RNN":
            h = np.tanh(i2h + h2h)
        elif kind == "LSTM":
            i, f, g, o = np.split(i2h + h2h, 4, axis=1)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
        else:
            ir, iz, i_n = np.split(i2h, 3, axis=1)
            hr, hz, h_n = np.split(h2h, 3, axis=1)
            r, z = _sigmoid(ir + hr), _sigmoid(iz + hz)
            h = (1 - z) * np.tanh(i_n + r * h_n) + z * h
        outs.append(h)
    return outs


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("hybridize", [False, True])
def test_conv_cells_match_numpy(kind, dims, hybridize):
    rs = np.random.RandomState(dims)
    spatial = (5, 4, 3)[:dims]
    in_shape = (2,) + spatial
    pad, dilate, h2h_dilate = (1,) * dims, (1,) * dims, (2,) * dims if dims == 1 else (1,) * dims
    cls = getattr(crnn, f"Conv{dims}D{kind}Cell")
    cell = cls(in_shape, 3, i2h_kernel=3, h2h_kernel=3, i2h_pad=pad, h2h_dilate=h2h_dilate)
    cell.initialize(mx.init.Uniform(0.3))
    if hybridize:
        cell.hybridize()
    xs = [rs.randn(2, *in_shape).astype(np.float32) for _ in range(3)]
    outputs, states = cell.unroll(3, [nd.array(x) for x in xs], merge_outputs=False)
    want = _conv_ref(kind, cell, xs, pad, dilate, h2h_dilate)
    for got, ref in zip(outputs, want):
        np.testing.assert_allclose(got.asnumpy(), ref, rtol=1e-4, atol=1e-5)
    assert len(states) == (2 if kind == "LSTM" else 1) and states[0].shape == (2, 3) + spatial


def test_conv_cell_names_shapes_and_errors():
    cell = crnn.Conv2DGRUCell((3, 8, 8), 4, i2h_kernel=(3, 3), h2h_kernel=(5, 5))
    assert cell.prefix.startswith("conv_gru")
    assert cell.i2h_weight.shape == (12, 3, 3, 3) and cell.h2h_weight.shape == (12, 4, 5, 5)
    assert cell.state_info(7) == [{"shape": (7, 4, 6, 6), "__layout__": "NCHW"}]
    assert repr(cell).startswith("Conv2DGRUCell(3 -> 12, tanh, NCHW")
    lstm = crnn.Conv1DLSTMCell((10, 2), 5, 3, 3, conv_layout="NWC")     # input_shape in layout order
    assert lstm.i2h_weight.shape == (20, 3, 2) and lstm.state_info(1)[0]["shape"] == (1, 8, 5)
    with pytest.raises(MXNetError, match="odd"):
        crnn.Conv2DRNNCell((3, 8, 8), 4, 3, 2)
    with pytest.raises(MXNetError, match="length 2"):
        crnn.Conv2DRNNCell((3, 8, 8), 4, (3, 3, 3), 3)
    with pytest.raises(MXNetError, match="input_shape"):
        crnn.Conv3DRNNCell((3, 8, 8), 4, 3, 3)


def test_conv_lstm_trains():
    cell = crnn.Conv2DLSTMCell((1, 6, 6), 2, 3, 3, i2h_pad=1)
    cell.initialize(mx.init.Xavier())
    trainer = gluon.Trainer(cell.collect_params(), "adam", {"learning_rate": 0.05})
    x = nd.array(np.random.RandomState(0).rand(4, 3, 1, 6, 6))
    losses = []
    for _ in range(15):
        with autograd.record():
            out, _ = cell.unroll(3, x, layout="NTC", merge_outputs=True)
            loss = ((out - 0.5) ** 2).mean()
        loss.backward()
        trainer.step(4)
        losses.append(loss.asscalar())
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize("hybridize", [False, True])
def test_lstmp_cell_matches_numpy(hybridize):
    cell = crnn.LSTMPCell(6, 3, input_size=5, prefix="lstmp0_")
    cell.initialize(mx.init.Uniform(0.5))
    if hybridize:
        cell.hybridize()
    assert sorted(cell.collect_params()) == sorted(f"lstmp0_{n}" for n in
                                                   ("i2h_weight", "h2h_weight", "h2r_weight", "i2h_bias", "h2h_bias"))
    assert repr(cell) == "LSTMPCell(5 -> 24 -> 3)"
    rs = np.random.RandomState(4)
    xs = [rs.randn(2, 5) for _ in range(4)]
    outputs, (r_last, c_last) = cell.unroll(4, [nd.array(x) for x in xs])
    p = _params(cell)
    r, c = np.zeros((2, 3)), np.zeros((2, 6))
    for x, got in zip(xs, outputs):
        gates = x @ p["i2h_weight"].T + p["i2h_bias"] + r @ p["h2h_weight"].T + p["h2h_bias"]
        i, f, g, o = np.split(gates, 4, axis=1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        r = (_sigmoid(o) * np.tanh(c)) @ p["h2r_weight"].T
        np.testing.assert_allclose(got.asnumpy(), r, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(c_last.asnumpy(), c, rtol=1e-4, atol=1e-5)


def _vardrop(**drops):
    cell = crnn.VariationalDropoutCell(gluon.rnn.RNNCell(40, prefix="rnn_"), **drops)
    cell.initialize(mx.init.Xavier())
    return cell


@pytest.mark.parametrize("hybridize", [False, True])
def test_variational_dropout_one_mask_per_sequence(hybridize):
    cell = _vardrop(drop_outputs=0.5, drop_states=0.5)
    if hybridize:
        cell.hybridize()
    x = nd.random.uniform(shape=(8, 4, 10))
    with autograd.record():
        out1, _ = cell.unroll(4, x, merge_outputs=True)
        out2, _ = cell.unroll(4, x, merge_outputs=True)
    zeros = out1.asnumpy() == 0
    assert 0.3 < zeros.mean() < 0.7
    assert (zeros == zeros[:, :1, :]).all()                  # the same units dropped at every step
    assert not np.array_equal(zeros, out2.asnumpy() == 0)     # a new sequence draws new masks
    base = cell.base_cell
    inference, _ = cell.unroll(4, x, merge_outputs=True)     # not training: the base cell
    cell.base_cell._modified = False
    plain, _ = base.unroll(4, x, merge_outputs=True)
    cell.base_cell._modified = True
    np.testing.assert_allclose(inference.asnumpy(), plain.asnumpy(), rtol=1e-6)


def test_variational_dropout_without_state_dropout_drops_whole_sequences():
    cell = _vardrop(drop_inputs=0.5, drop_outputs=0.5)
    x = nd.ones((6, 5, 10))
    with autograd.record():
        out, states = cell.unroll(5, x, merge_outputs=True)
    zeros = out.asnumpy() == 0
    assert zeros.any() and (zeros == zeros[:, :1, :]).all()
    assert out.shape == (6, 5, 40) and states[0].shape == (6, 40)
    assert repr(cell) == "VariationalDropoutCell(p_out = 0.5, p_state = 0.0)"
    with pytest.raises(MXNetError, match="Bidirectional"):
        crnn.VariationalDropoutCell(gluon.rnn.BidirectionalCell(gluon.rnn.RNNCell(2), gluon.rnn.RNNCell(2)),
                                    drop_states=0.5)


def test_variational_dropout_symbolic_unroll_shapes():
    cell = _vardrop(drop_inputs=0.3, drop_states=0.3, drop_outputs=0.3)
    inputs = [mx.sym.Variable("rnn_t%d_data" % i) for i in range(3)]
    outputs, _ = cell.unroll(3, inputs, merge_outputs=False)
    _, outs, _ = mx.sym.Group(outputs).infer_shape(rnn_t0_data=(10, 50), rnn_t1_data=(10, 50), rnn_t2_data=(10, 50))
    assert outs == [(10, 40)] * 3


@pytest.mark.parametrize("cell_cls", [gluon.rnn.LSTMCell, gluon.rnn.GRUCell])
def test_dynamic_unroll_matches_unroll(cell_cls):
    cell = cell_cls(6, input_size=4)
    cell.initialize(mx.init.Uniform(0.5))
    rs = np.random.RandomState(5)
    x = nd.array(rs.randn(5, 3, 4))                           # TNC
    begin = cell.begin_state(3)
    want, want_states = cell.unroll(5, x, begin, layout="TNC", merge_outputs=True)
    got, states = crnn.dynamic_unroll(cell, x, begin, layout="TNC")
    np.testing.assert_allclose(got.asnumpy(), want.asnumpy(), rtol=1e-5, atol=1e-6)
    for a, b in zip(states, want_states):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-6)
    # NTC input: outputs come back time-major
    got_ntc, _ = crnn.dynamic_unroll(cell, nd.array(x.asnumpy().transpose(1, 0, 2)), begin, layout="NTC")
    np.testing.assert_allclose(got_ntc.asnumpy(), want.asnumpy(), rtol=1e-5, atol=1e-6)
    # valid lengths: states of each sample's last valid step, zero outputs after it
    lengths = nd.array([5, 2, 3])
    want_v, want_vs = cell.unroll(5, x, begin, layout="TNC", merge_outputs=True, valid_length=lengths)
    got_v, got_vs = crnn.dynamic_unroll(cell, x, begin, layout="TNC", valid_length=lengths)
    np.testing.assert_allclose(got_v.asnumpy(), want_v.asnumpy(), rtol=1e-5, atol=1e-6)
    for a, b in zip(got_vs, want_vs):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-6)


def test_dynamic_unroll_hybridized_is_one_loop():
    class Net(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.cell = gluon.rnn.LSTMCell(6, input_size=4)

        def hybrid_forward(self, F, x, h, c):
            return crnn.dynamic_unroll(self.cell, x, [h, c], layout="TNC")[0]

    net = Net()
    net.initialize()
    x = nd.array(np.random.RandomState(6).rand(5, 3, 4))
    h, c = nd.zeros((3, 6)), nd.zeros((3, 6))
    eager = net(x, h, c).asnumpy()
    net.hybridize()
    np.testing.assert_allclose(net(x, h, c).asnumpy(), eager, rtol=1e-5, atol=1e-6)
    sym = net._cached_graph[1]
    assert sum(node["op"] == "_foreach" for node in json.loads(sym.tojson())["nodes"]) == 1
