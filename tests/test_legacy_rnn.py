"""Legacy symbolic RNN API (mx.rnn): cells, unroll, weight packing, BucketSentenceIter; with
BucketingModule (mx.mod) and mx.callback."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import symjit as mx
from symjit import nd


def _lstm_step_reference(x, h, c, wi, bi, wh, bh):
    g = x @ wi.T + bi + h @ wh.T + bh
    i, f, cc, o = np.split(g, 4, axis=1)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    c2 = sig(f) * c + sig(i) * np.tanh(cc)
    return sig(o) * np.tanh(c2), c2


def test_lstm_cell_unroll_names_and_values():
    cell = mx.rnn.LSTMCell(num_hidden=4, prefix="l0_")
    begin = cell.begin_state(func=mx.sym.Variable)
    assert [s.name for s in begin] == ["l0_begin_state_0", "l0_begin_state_1"]
    out, states = cell.unroll(3, inputs=mx.sym.Variable("data"), begin_state=begin, merge_outputs=True)
    args = out.list_arguments()
    assert args == ["data", "l0_i2h_weight", "l0_i2h_bias", "l0_begin_state_0", "l0_h2h_weight", "l0_h2h_bias",
                    "l0_begin_state_1"]
    assert "l0_t2_out_output" in out.get_internals().list_outputs()
    rng = np.random.default_rng(0)
    vals = {"data": rng.standard_normal((2, 3, 5)), "l0_i2h_weight": rng.standard_normal((16, 5)),
            "l0_i2h_bias": rng.standard_normal(16), "l0_h2h_weight": rng.standard_normal((16, 4)),
            "l0_h2h_bias": rng.standard_normal(16), "l0_begin_state_0": rng.standard_normal((2, 4)),
            "l0_begin_state_1": rng.standard_normal((2, 4))}
    ex = out.bind(mx.cpu(), {k: nd.array(v) for k, v in vals.items()})
    got = ex.forward()[0].asnumpy()
    h, c = vals["l0_begin_state_0"], vals["l0_begin_state_1"]
    for t in range(3):
        h, c = _lstm_step_reference(vals["data"][:, t], h, c, vals["l0_i2h_weight"], vals["l0_i2h_bias"],
                                    vals["l0_h2h_weight"], vals["l0_h2h_bias"])
        np.testing.assert_allclose(got[:, t], h, rtol=1e-4, atol=1e-5)


def test_sequential_stack_and_pack_unpack_weights():
    stack = mx.rnn.SequentialRNNCell()
    for i in range(2):
        stack.add(mx.rnn.GRUCell(num_hidden=3, prefix="g%d_" % i))
    assert len(stack.state_info) == 2
    outs, states = stack.unroll(2, inputs=[mx.sym.Variable("a"), mx.sym.Variable("b")],
                                begin_state=stack.begin_state(func=mx.sym.Variable))
    assert len(outs) == 2 and len(states) == 2
    args = {"g0_i2h_weight": nd.array(np.arange(18).reshape(9, 2)), "g0_i2h_bias": nd.arange(9),
            "g0_h2h_weight": nd.zeros((9, 3)), "g0_h2h_bias": nd.zeros(9)}
    cell = mx.rnn.GRUCell(num_hidden=3, prefix="g0_")
    unpacked = cell.unpack_weights(args)
    assert sorted(unpacked) == sorted("g0_%s%s_%s" % (g, gate, k) for g in ("i2h", "h2h")
                                      for gate in ("_r", "_z", "_o") for k in ("weight", "bias"))
    np.testing.assert_array_equal(unpacked["g0_i2h_z_bias"].asnumpy(), [3, 4, 5])
    packed = cell.pack_weights(unpacked)
    np.testing.assert_array_equal(packed["g0_i2h_weight"].asnumpy(), args["g0_i2h_weight"].asnumpy())


def test_encode_sentences_and_bucket_sentence_iter():
    coded, vocab = mx.rnn.encode_sentences([["a", "b"], ["b", "c", "a"]], invalid_label=0, start_label=0)
    assert coded == [[1, 2], [2, 3, 1]] and vocab["\n"] == 0
    sents = [[1, 2, 3]] * 4 + [[4, 5, 6, 7, 8]] * 2 + [[1] * 30]
    it = mx.rnn.BucketSentenceIter(sents, batch_size=2, buckets=[4, 8, 16], invalid_label=-1)
    assert it.default_bucket_key == 16
    batches = list(it)
    assert sorted(b.bucket_key for b in batches) == [4, 4, 8]   # the 30-word sentence is dropped
    b = [b for b in batches if b.bucket_key == 4][0]
    np.testing.assert_array_equal(b.data[0].asnumpy()[0], [1, 2, 3, -1])
    np.testing.assert_array_equal(b.label[0].asnumpy()[0], [2, 3, -1, -1])
    assert b.provide_data[0].shape == (2, 4)


def test_bucketing_module_shares_parameters_and_optimizer(tmp_path):
    def sym_gen(seq_len):
        data = mx.sym.Variable("data")
        w = mx.sym.Variable("w", shape=(1,), init=mx.init.One())
        out = mx.sym.make_loss(mx.sym.sum(mx.sym.broadcast_mul(data, w)))
        return out, ("data",), None

    mod = mx.mod.BucketingModule(sym_gen=sym_gen, default_bucket_key=4)
    mod.bind(data_shapes=[("data", (2, 4))])
    mod.init_params()
    mod.init_optimizer(optimizer_params={"learning_rate": 0.1, "rescale_grad": 1.0})
    for key in (4, 2, 4):
        batch = mx.io.DataBatch([nd.ones((2, key))], None, bucket_key=key,
                                provide_data=[mx.io.DataDesc("data", (2, key))])
        mod.forward_backward(batch)
        mod.update()
    # d(sum(data * w))/dw = number of elements: 8, 4, 8 -> w = 1 - 0.1 * 20
    np.testing.assert_allclose(mod.get_params()[0]["w"].asnumpy(), [1 - 2.0], rtol=1e-6)
    assert sorted(mod._buckets) == [2, 4]
    mod.save_checkpoint(str(tmp_path / "b"), 1)
    mod2 = mx.mod.BucketingModule.load(str(tmp_path / "b"), 1, sym_gen=sym_gen, default_bucket_key=4)
    mod2.bind(data_shapes=[("data", (2, 4))])
    np.testing.assert_allclose(mod2.get_params()[0]["w"].asnumpy(), [-1.0], rtol=1e-6)


def test_speedometer_and_checkpoint_callbacks(tmp_path, caplog):
    metric = mx.metric.create("acc")
    speed = mx.callback.Speedometer(batch_size=4, frequent=2)
    with caplog.at_level(logging.INFO):
        for n in range(5):
            speed(mx.module.module._BatchEndParam(0, n, metric))
    assert any("samples/sec" in r.message for r in caplog.records)
    sym = mx.sym.Variable("x") * 2
    mx.callback.do_checkpoint(str(tmp_path / "m"), period=2)(1, sym, {"a": nd.ones(2)}, {})
    assert (tmp_path / "m-0002.params").exists()


def test_amp_loss_scaler_skips_overflowing_steps():
    p = mx.gluon.Parameter("w", shape=(2,))
    p.initialize(init="zeros")
    t = mx.gluon.Trainer([p], "sgd", {"learning_rate": 1.0})
    mx.contrib.amp.init_trainer(t)
    scale = t._amp_loss_scaler.loss_scale
    with mx.autograd.record():
        loss = (p.data() + 1).sum()
        with mx.contrib.amp.scale_loss(loss, t) as scaled:
            mx.autograd.backward(scaled)
    t.step(1)
    np.testing.assert_allclose(p.data().asnumpy(), [-1, -1], rtol=1e-6)   # the scale is divided out
    p.grad()[:] = np.inf
    t.step(1, ignore_stale_grad=True)
    np.testing.assert_allclose(p.data().asnumpy(), [-1, -1])   # skipped
    assert t._amp_loss_scaler._next_loss_scale == scale / 2


def _bind_module(sym, dshape, grad_req):
    mod = mx.mod.Module(sym, label_names=None)
    mod.bind(data_shapes=[("data", dshape)], label_shapes=None, inputs_need_grad=True, grad_req=grad_req)
    return mod


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_fused_cell_matches_its_unfused_stack(mode, bidirectional):
    """The fused RNN op and the unfused cells compute the same outputs and input gradients
    once the flat weight vector is unpacked per gate and packed per cell."""
    fused = mx.rnn.FusedRNNCell(6, num_layers=2, mode=mode, bidirectional=bidirectional,
                                get_next_state=True, prefix="")
    stack = fused.unfuse()
    dshape = (3, 4, 5)
    data = mx.sym.Variable("data")
    grad_req = {"data": "write", "parameters": "null"}  # a name only the fused graph has
    mods = [_bind_module(cell.unroll(4, data, layout="NTC", merge_outputs=True)[0], dshape, grad_req)
            for cell in (fused, stack)]
    mods[0].init_params()
    args, auxs = mods[0].get_params()
    assert list(args) == ["parameters"]
    mods[1].set_params(stack.pack_weights(fused.unpack_weights(args)), auxs)
    batch = mx.io.DataBatch(data=[nd.array(np.random.default_rng(1).uniform(size=dshape))])
    dy = nd.array(np.random.default_rng(2).uniform(size=(3, 4, 12 if bidirectional else 6)))
    outs, grads = [], []
    for mod in mods:
        mod.forward(batch, is_train=True)
        mod.backward(out_grads=[dy])
        outs.append(mod.get_outputs()[0].asnumpy())
        grads.append(mod.get_input_grads()[0].asnumpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-4, atol=1e-5)


def test_fused_cell_pack_unpack_roundtrip_and_layout():
    fused = mx.rnn.FusedRNNCell(3, num_layers=2, mode="gru", bidirectional=True, prefix="f_")
    num_input, h, gates, dirs = 4, 3, 3, 2
    total = dirs * gates * h * (num_input + h + 2) + dirs * gates * h * (dirs * h + h + 2)
    flat = nd.arange(total)
    unpacked = fused.unpack_weights({"f_parameters": flat})
    assert unpacked["f_l0_i2h_r_weight"].shape == (3, 4)
    assert unpacked["f_r1_i2h_o_weight"].shape == (3, 6)
    # storage order: layer 0 forward i2h gates (r, z, o) come first, then its h2h gates
    np.testing.assert_array_equal(unpacked["f_l0_i2h_z_weight"].asnumpy().ravel(), np.arange(12, 24))
    np.testing.assert_array_equal(unpacked["f_l0_h2h_r_weight"].asnumpy().ravel(), np.arange(36, 45))
    np.testing.assert_array_equal(fused.pack_weights(unpacked)["f_parameters"].asnumpy(), flat.asnumpy())
    with pytest.raises(mx.base.MXNetError, match="do not fit"):
        fused.unpack_weights({"f_parameters": nd.arange(total + 1)})


def test_fused_cell_states_and_stepping():
    fused = mx.rnn.FusedRNNCell(5, num_layers=3, mode="lstm", bidirectional=True)
    assert fused.state_info == [{"shape": (6, 0, 5), "__layout__": "LNC"}] * 2
    with pytest.raises(NotImplementedError):
        fused(mx.sym.Variable("x"), [])
    with pytest.raises(mx.base.MXNetError, match="mode"):
        mx.rnn.FusedRNNCell(5, mode="lstmx")
    stack = mx.rnn.FusedRNNCell(4, num_layers=2, mode="rnn_relu", dropout=0.5, prefix="p_").unfuse()
    assert [type(c).__name__ for c in stack._cells] == ["RNNCell", "DropoutCell", "RNNCell"]
