"""mx.monitor.Monitor on executors and Modules: install, tic/toc every `interval` batches,
pattern filtering, the default statistic ||x|| / sqrt(size), custom statistics, sorting and
MXNet's log line."""
from __future__ import annotations

import logging
import math

import numpy as np
import pytest

import symjit as mx


def _net():
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc1")
    act = mx.sym.Activation(fc, act_type="relu", name="relu1")
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(act, num_hidden=2, name="fc2"), name="softmax")


def test_monitor_on_an_executor_reports_outputs_weights_and_interval():
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    exe = _net().simple_bind(mx.cpu(), data=(2, 4), grad_req="null")
    for name, arr in exe.arg_dict.items():
        arr[:] = np.full(arr.shape, 0.1, np.float32) if name != "data" else x
    mon = mx.monitor.Monitor(interval=2, pattern=".*")
    mon.install(exe)
    rows_per_step = []
    for _ in range(3):
        mon.tic()
        exe.forward(is_train=False)
        rows_per_step.append(mon.toc())
    assert rows_per_step[1] == []                 # interval 2: steps 0 and 2 only
    rows = {name: text for _, name, text in rows_per_step[0]}
    assert {"fc1_output", "relu1_output", "fc2_output", "softmax_output", "fc1_weight", "fc2_bias"} <= set(rows)
    assert "data" in rows and "softmax_label" in rows   # toc adds every argument
    fc1 = x @ np.full((4, 3), 0.1) + 0.1
    assert float(rows["fc1_output"]) == pytest.approx(np.linalg.norm(fc1) / math.sqrt(fc1.size), rel=1e-5)
    assert rows_per_step[0][0][0] == 1 and rows_per_step[2][0][0] == 3   # the step counter


def test_monitor_pattern_stat_func_sort_and_module(caplog):
    caplog.set_level(logging.INFO)
    mod = mx.mod.Module(_net(), context=mx.cpu())
    mod.bind(data_shapes=[("data", (4, 4))], label_shapes=[("softmax_label", (4,))])
    mod.init_params(initializer=mx.init.Constant(0.5))
    mon = mx.monitor.Monitor(1, stat_func=lambda a: mx.nd.max(mx.nd.abs(a)).reshape((1,)),
                             pattern="fc.*_output|fc2_weight", sort=True)
    mod.install_monitor(mon)
    batch = mx.io.DataBatch([mx.nd.ones((4, 4))], [mx.nd.zeros((4,))])
    mon.tic()
    mod.forward(batch, is_train=True)
    rows = mon.toc()
    assert [name for _, name, _ in rows] == ["fc1_output", "fc2_output", "fc2_weight"]
    assert [float(text) for _, _, text in rows] == pytest.approx([4 * 0.5, 3 * 2.0 * 0.5, 0.5])   # biases start at 0
    mon.tic()
    mod.forward(batch, is_train=True)
    mon.toc_print()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Batch:")]
    assert lines[0] == "Batch: {:7d} {:30s} {:s}".format(2, "fc1_output", "2.0\t")


def test_monitor_in_fit_and_batchnorm_statistics_update_once():
    data = mx.sym.var("data")
    bn = mx.sym.BatchNorm(data, name="bn", momentum=0.5)
    net = mx.sym.LinearRegressionOutput(mx.sym.FullyConnected(bn, num_hidden=1, name="fc"), name="lro")
    x = np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32) + 2
    it = mx.io.NDArrayIter(x, np.zeros(8, np.float32), 8, label_name="lro_label")

    def fit(monitor):
        mod = mx.mod.Module(net, label_names=["lro_label"])
        mod.fit(it, num_epoch=1, monitor=monitor, initializer=mx.init.One(), eval_metric="mse")
        return mod.get_params()[1]["bn_moving_mean"].asnumpy()
    mon = mx.monitor.Monitor(1, pattern="bn_output")
    np.testing.assert_allclose(fit(mon), fit(None), rtol=1e-6)
    assert mon.step == 1


def test_executor_monitor_callback_direct():
    exe = _net().simple_bind(mx.cpu(), data=(1, 4), grad_req="null")
    seen = []
    exe.set_monitor_callback(lambda name, arr: seen.append((name, arr.shape)), monitor_all=True)
    exe.forward()
    assert ("fc1_output", (1, 3)) in seen and ("fc1_weight", (3, 4)) in seen
    with pytest.raises(mx.base.MXNetError, match="callable"):
        exe.set_monitor_callback(3)


def test_backward_reports_the_gradient_along_every_operator_input():
    data = mx.sym.var("data")
    fc1 = mx.sym.FullyConnected(data, num_hidden=3, name="fc1")
    net = mx.sym.LinearRegressionOutput(mx.sym.FullyConnected(fc1, num_hidden=2, name="fc2"), name="lro")
    exe = net.simple_bind(mx.cpu(), data=(2, 4))
    rng = np.random.default_rng(0)
    for name, arr in exe.arg_dict.items():
        arr[:] = rng.standard_normal(arr.shape).astype(np.float32)
    seen = {}
    exe.set_monitor_callback(lambda name, arr: seen.__setitem__(name, arr.asnumpy().copy()))
    exe.forward(is_train=True)
    exe.backward()
    assert {"fc1_backward_data", "fc1_backward_weight", "fc1_backward_bias", "fc2_backward_data",
            "fc2_backward_weight", "fc2_backward_bias", "lro_backward_data", "lro_backward_label"} <= set(seen)
    for reported, arg in (("fc1_backward_weight", "fc1_weight"), ("fc1_backward_bias", "fc1_bias"),
                          ("fc2_backward_weight", "fc2_weight"), ("fc1_backward_data", "data")):
        np.testing.assert_allclose(seen[reported], exe.grad_dict[arg].asnumpy(), rtol=1e-5)
    d_out = seen["lro_backward_data"]      # (out - label) * grad_scale / outputs per example
    np.testing.assert_allclose(d_out, (exe.outputs[0].asnumpy() - exe.arg_dict["lro_label"].asnumpy()) / 2,
                               rtol=1e-5)
    np.testing.assert_allclose(seen["fc2_backward_data"], d_out @ exe.arg_dict["fc2_weight"].asnumpy(), rtol=1e-5)


def _monitored_names(sym, monitor_all):
    names = []
    exe = sym.simple_bind(mx.cpu(), grad_req="null")
    exe.set_monitor_callback(lambda name, arr: names.append(name), monitor_all=monitor_all)
    exe.forward()
    return names


def test_monitor_all_reports_each_operator_inputs_then_outputs_in_mxnet_order():
    data = mx.sym.Variable("data", shape=(2, 3, 4, 4))
    conv = mx.sym.Convolution(data, kernel=(2, 2), num_filter=1, name="conv")
    assert _monitored_names(conv, True) == ["data", "conv_data", "conv_weight", "conv_weight", "conv_bias",
                                            "conv_bias", "conv_output"]
    assert _monitored_names(conv, False) == ["conv_output"]
    # ops MXNet lists no input names for report `<node>_input<i>`; a variable read twice twice
    act = mx.sym.Activation(mx.sym.concat(data, data, dim=0, name="cat"), act_type="relu", name="act")
    assert _monitored_names(act, True) == ["data", "cat_arg0", "data", "cat_arg1", "cat_output",
                                           "act_input0", "act_output"]


def test_monitor_arrays_convert_to_handles_and_back():
    import ctypes
    from symjit.base import NDArrayHandle
    seen = {}

    def callback(name, arr):
        view = mx.nd.NDArray(ctypes.cast(arr, NDArrayHandle), writable=False)
        seen[name] = view.asnumpy().copy()
        assert not view._data.flags.writeable

    x = mx.sym.Variable("x")
    exe = (x * 2).simple_bind(mx.cpu(), x=(3,))
    exe.arg_dict["x"][:] = np.arange(3)
    exe.set_monitor_callback(callback, monitor_all=True)
    exe.forward()
    np.testing.assert_array_equal(seen["x"], np.arange(3))
    np.testing.assert_array_equal(seen[exe.symbol.list_outputs()[0]], 2 * np.arange(3))
    with pytest.raises(mx.base.MXNetError, match="handle"):
        mx.nd.NDArray(ctypes.c_void_p(1))


def test_given_shape_replaces_variable_shape_hint_and_reshape_keeps_monitor():
    data = mx.sym.Variable("data", shape=(1, 3, 5, 5))
    sym = mx.sym.Convolution(data, kernel=(1, 1), num_filter=1, name="conv")
    exe = sym.simple_bind(mx.cpu(), data=(1, 3, 5, 7))
    assert exe.outputs[0].shape == (1, 1, 5, 7)
    mod = mx.mod.Module(sym, label_names=None)
    mod.bind(for_training=False, data_shapes=[("data", (1, 3, 5, 5))])
    mod.init_params()
    names = []
    mod._exec_group.execs[0].set_monitor_callback(lambda n, a: names.append(n))
    mod.forward(mx.io.DataBatch(data=[mx.nd.ones((1, 3, 5, 9))]), is_train=False)
    assert mod.get_outputs()[0].shape == (1, 1, 5, 9)
    assert names == ["conv_output"]
