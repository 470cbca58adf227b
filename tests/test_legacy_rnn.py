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


def _module_run(sym, dshape, args, x, dy):
    """(outputs, data gradient, parameter gradients) of `sym` bound by a Module with `args`."""
    mod = mx.mod.Module(sym, data_names=["data"], label_names=None)
    mod.bind(data_shapes=[("data", dshape)], inputs_need_grad=True)
    mod.init_params()
    mod.set_params(args, {})
    mod.forward(mx.io.DataBatch(data=[x]), is_train=True)
    out = mod.get_outputs()[0].asnumpy()
    mod.backward(out_grads=[dy])
    return out, mod.get_input_grads()[0].asnumpy(), mod


@pytest.mark.parametrize("mode,bidirectional", [("lstm", False), ("lstm", True), ("gru", True),
                                                ("rnn_tanh", False), ("rnn_relu", True)])
def test_fused_rnn_cell_matches_its_unfused_cells(mode, bidirectional):
    """FusedRNNCell (one RNN op) against unfuse()'s stacked cells with the same weights
    (unpack_weights / pack_weights): outputs and input gradients within float32 rounding."""
    T, N, I, H = 4, 3, 5, 6
    fused = mx.rnn.FusedRNNCell(H, num_layers=2, mode=mode, bidirectional=bidirectional, prefix="")
    stack = fused.unfuse()
    data = mx.sym.Variable("data")
    y1, _ = fused.unroll(T, data, layout="NTC", merge_outputs=True)
    y2, _ = stack.unroll(T, data, layout="NTC", merge_outputs=True)
    rng = np.random.default_rng(0)
    x = nd.array(rng.uniform(-1, 1, (N, T, I)))
    dy = nd.array(rng.uniform(-1, 1, (N, T, H * (2 if bidirectional else 1))))
    mod = mx.mod.Module(y1, data_names=["data"], label_names=None)
    mod.bind(data_shapes=[("data", (N, T, I))])
    mod.init_params(mx.init.Uniform(0.5))
    args, _ = mod.get_params()
    unpacked = fused.unpack_weights(args)
    assert fused.pack_weights(unpacked)[fused._parameter.name].asnumpy().tolist() == \
        args[fused._parameter.name].asnumpy().tolist()
    out1, dx1, _ = _module_run(y1, (N, T, I), args, x, dy)
    out2, dx2, _ = _module_run(y2, (N, T, I), stack.pack_weights(unpacked), x, dy)
    np.testing.assert_allclose(out1, out2, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dx1, dx2, rtol=1e-4, atol=1e-5)


def test_module_input_grads_are_none_with_null_grad_req():
    """MXNet: inputs_need_grad with grad_req 'null' binds, and get_input_grads gives None."""
    data = mx.sym.Variable("data")
    mod = mx.mod.Module(mx.sym.FullyConnected(data, num_hidden=3), label_names=None)
    mod.bind(data_shapes=[("data", (2, 4))], inputs_need_grad=True, grad_req="null")
    mod.init_params()
    mod.forward(mx.io.DataBatch(data=[nd.ones((2, 4))]), is_train=True)
    assert mod.get_input_grads()[0] is None


def test_module_grad_req_dict_ignores_names_the_symbol_lacks():
    data = mx.sym.Variable("data")
    mod = mx.mod.Module(mx.sym.FullyConnected(data, num_hidden=3, name="fc"), label_names=None)
    mod.bind(data_shapes=[("data", (2, 4))], inputs_need_grad=True,
             grad_req={"data": "write", "parameters": "null", "fc_bias": "null"})
    mod.init_params()
    mod.forward(mx.io.DataBatch(data=[nd.ones((2, 4))]), is_train=True)
    mod.backward(out_grads=[nd.ones((2, 3))])
    assert mod.get_input_grads()[0].shape == (2, 4)
