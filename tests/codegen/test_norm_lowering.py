"""Native softmax family and normalizations (lower_norm.py): compiled graphs equal the
interpreter and run as one native call; BatchNorm in training reports the moving-average
update through the compiled graph's state outputs and through an executor."""
from __future__ import annotations

import numpy as np
import pytest

from lowering_util import assert_close, compile_and_run, one_node_graph

FLOATS = ["float32", "float64"]
AUX = ("moving_mean", "moving_var")


def _feeds(rng, ins):
    out = {}
    for n, s, d in ins:
        a = rng.standard_normal(s)
        if n in ("moving_var", "std", "var", "invstd"):
            a = np.abs(a) + 0.5
        if n == "label":
            a = rng.integers(0, 3, s)
        out[n] = a.astype(d)
    return out


def _check(op, ins, attrs, n_out=None, is_train=False, tol=1e-5, rng=None):
    rng = rng or np.random.default_rng(0)
    g = one_node_graph(op, ins, attrs, n_outputs=n_out, aux=AUX)
    got, want, cg, upd, ref_upd = compile_and_run(g, _feeds(rng, ins), is_train=is_train)
    for a, b in zip(got, want):
        assert_close(a, b, rtol=tol, atol=tol)
    assert cg.native, [n.op.name for n in cg.module.python_nodes]
    return upd, ref_upd


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "softmin"])
def test_softmax_family(op, dtype):
    rng = np.random.default_rng(1)
    for shape in [(3, 5, 7), (4, 33), (70,)]:
        for axis in range(-1, len(shape)):
            _check(op, [("x", shape, dtype)], {"axis": axis}, rng=rng)
    _check(op, [("x", (3, 5, 7), dtype)], {"axis": 1, "temperature": 2.5}, rng=rng)
    _check(op, [("x", (3, 5), dtype)], {"axis": -1, "dtype": "float64"}, rng=rng)


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_row_lengths_and_nan_rows(dtype):
    """The max pass (a vectorized NaN-propagating max) compiles and agrees with the reference
    for every short row length and a few long ones; a row holding NaN is NaN throughout."""
    rng = np.random.default_rng(4)
    for n in list(range(1, 20)) + [31, 33, 64, 100, 1000]:
        for op in ("softmax", "log_softmax"):
            _check(op, [("x", (3, n), dtype)], {"axis": -1}, rng=rng)
    x = rng.standard_normal((3, 40)).astype(dtype)
    x[1, 7] = np.nan
    for op in ("softmax", "log_softmax"):
        g = one_node_graph(op, [("x", x.shape, dtype)], {"axis": -1})
        got, _, _, _, _ = compile_and_run(g, {"x": x})
        assert np.isnan(got[0][1]).all() and np.isfinite(got[0][[0, 2]]).all()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["_backward_softmax", "_backward_log_softmax"])
def test_softmax_gradients(op, dtype):
    """The softmax family's gradient kernels equal the reference (float64 sums both ways;
    tolerance 1e-5 covers the float32 exp's last bits)."""
    rng = np.random.default_rng(3)
    for shape in [(3, 5, 7), (4, 33), (70,), (8, 5000)]:
        for axis in range(-1, len(shape)):
            _check(op, [("ograd", shape, dtype), ("output", shape, dtype)], {"axis": axis}, rng=rng)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the reference's exp of an all -inf row
def test_softmax_independent_and_int_input():
    x = np.random.default_rng(2).standard_normal((6, 50))
    g = one_node_graph("softmax", [("x", x.shape, "float64")], {"axis": -1})
    got, _, _, _, _ = compile_and_run(g, {"x": x})
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(got[0], e / e.sum(1, keepdims=True), rtol=1e-13)
    _check("softmax", [("x", (4, 6), "int32")], {"axis": -1, "dtype": "float32"})
    # -inf entries get probability 0; an all -inf row is NaN like the reference
    y = np.array([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]], np.float32)
    g = one_node_graph("softmax", [("x", y.shape, "float32")], {"axis": -1})
    got, want, _, _, _ = compile_and_run(g, {"x": y})
    assert_close(got[0], want[0])


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_activation_and_output(dtype):
    rng = np.random.default_rng(3)
    _check("SoftmaxActivation", [("x", (3, 5, 7), dtype)], {"mode": "channel"}, rng=rng)
    _check("SoftmaxActivation", [("x", (3, 5), dtype)], {}, rng=rng)
    _check("SoftmaxOutput", [("x", (3, 5, 4), dtype), ("label", (3, 5), dtype)], {"preserve_shape": True}, rng=rng)
    _check("SoftmaxOutput", [("x", (3, 5), dtype), ("label", (3,), dtype)], {}, rng=rng)
    _check("SoftmaxOutput", [("x", (3, 4, 2, 2), dtype), ("label", (3, 2, 2), dtype)], {"multi_output": True},
           rng=rng)
    _check("SoftmaxOutput", [("x", (3, 4, 2), dtype), ("label", (3, 4), dtype)], {}, rng=rng, is_train=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_and_instance_norm(dtype):
    rng = np.random.default_rng(4)
    for shape, axis in [((3, 5, 7), 1), ((3, 5, 7), -1), ((4, 9), 0), ((2, 3, 4, 5), 2)]:
        n = shape[axis]
        ins = [("x", shape, dtype), ("gamma", (n,), dtype), ("beta", (n,), dtype)]
        _check("LayerNorm", ins, {"axis": axis, "eps": 1e-3}, n_out=3, rng=rng)
        mshape = tuple(1 if i == axis % len(shape) else d for i, d in enumerate(shape))
        _check("_backward_LayerNorm", [("dy", shape, dtype), ("x", shape, dtype), ("gamma", (n,), dtype),
                                       ("mean", mshape, dtype), ("std", mshape, dtype)], {"axis": axis},
               n_out=3, rng=rng, tol=1e-4 if dtype == "float32" else 1e-9)
    _check("InstanceNorm", [("x", (3, 5, 7), dtype), ("gamma", (5,), dtype), ("beta", (5,), dtype)], {},
           n_out=3, rng=rng)
    _check("InstanceNorm", [("x", (2, 3, 4, 5), dtype), ("gamma", (3,), dtype), ("beta", (3,), dtype)],
           {"eps": 0.1}, n_out=3, rng=rng)


def test_layer_norm_independent():
    rng = np.random.default_rng(5)
    x, gam, bet = rng.standard_normal((4, 6)), rng.standard_normal(6), rng.standard_normal(6)
    g = one_node_graph("LayerNorm", [("x", x.shape, "float64"), ("gamma", (6,), "float64"),
                                     ("beta", (6,), "float64")], {"eps": 1e-5}, n_outputs=3)
    got, _, _, _, _ = compile_and_run(g, {"x": x, "gamma": gam, "beta": bet})
    mu, sd = x.mean(1, keepdims=True), np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got[0], (x - mu) / sd * gam + bet, rtol=1e-12)
    np.testing.assert_allclose(got[1], mu, rtol=1e-12)
    np.testing.assert_allclose(got[2], sd, rtol=1e-12)


def _bn_inputs(shape, axis, dtype):
    c = shape[axis]
    return [("x", shape, dtype), ("gamma", (c,), dtype), ("beta", (c,), dtype),
            ("moving_mean", (c,), dtype), ("moving_var", (c,), dtype)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("is_train", [False, True])
def test_batch_norm_modes(dtype, is_train):
    rng = np.random.default_rng(6)
    for shape, axis in [((4, 3, 6), 1), ((5, 3), 1), ((2, 3, 4, 5), -1)]:
        for fix_gamma in (False, True):
            attrs = {"axis": axis, "fix_gamma": fix_gamma, "momentum": 0.8, "eps": 1e-3}
            upd, ref = _check("BatchNorm", _bn_inputs(shape, axis, dtype), attrs, n_out=3,
                              is_train=is_train, rng=rng)
            assert {v.name for v in upd} == ({"moving_mean", "moving_var"} if is_train else set())
            ref = {v.name: a for v, a in ref.items()}
            for v, a in upd.items():
                assert_close(a, ref[v.name])
            c = shape[axis]
            _check("_backward_BatchNorm", [("dy", shape, dtype), ("mean", (c,), dtype), ("invstd", (c,), dtype),
                                           ("x", shape, dtype), ("gamma", (c,), dtype)],
                   attrs, n_out=3, is_train=is_train, rng=rng, tol=1e-4)
    # use_global_stats: inference semantics in both modes, no updates
    upd, _ = _check("BatchNorm", _bn_inputs((4, 3, 6), 1, dtype), {"use_global_stats": True, "fix_gamma": False},
                    n_out=3, is_train=is_train, rng=rng)
    assert not upd


def test_batch_norm_training_update_independent():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 2, 5))
    mm, mv = rng.standard_normal(2), np.abs(rng.standard_normal(2)) + 1
    feeds = {"x": x, "gamma": np.ones(2), "beta": np.zeros(2), "moving_mean": mm, "moving_var": mv}
    g = one_node_graph("BatchNorm", _bn_inputs(x.shape, 1, "float64"), {"momentum": 0.9}, aux=AUX)
    got, _, cg, upd, _ = compile_and_run(g, feeds, is_train=True)
    assert cg.native
    mean, var = x.mean((0, 2)), x.var((0, 2))
    byname = {v.name: a for v, a in upd.items()}
    np.testing.assert_allclose(byname["moving_mean"], mm * 0.9 + mean * 0.1, rtol=1e-12)
    np.testing.assert_allclose(byname["moving_var"], mv * 0.9 + var * 0.1, rtol=1e-12)
    np.testing.assert_allclose(got[0], (x - mean[None, :, None]) / np.sqrt(var[None, :, None] + 1e-3), rtol=1e-10)


def test_batch_norm_mode_unknown_keeps_python_step():
    """Compiled without a fixed mode (is_train=None), training BatchNorm is a reference step
    that takes the mode per call."""
    from symjit.codegen.llvm.executable import compile_planned
    from symjit.passes.manager import compile_graph
    g = one_node_graph("BatchNorm", _bn_inputs((4, 3), 1, "float32"), {}, aux=AUX)
    opt, _ = compile_graph(g, "training")
    cg = compile_planned(opt, "bn")
    assert not cg.native and [n.op.name for n in cg.module.python_nodes] == ["BatchNorm"]


def test_executor_applies_native_batch_norm_updates():
    import symjit as mx
    data = mx.sym.Variable("data")
    net = mx.sym.BatchNorm(data, name="bn", fix_gamma=False, momentum=0.5)
    ex = net.simple_bind(mx.cpu(), data=(6, 2, 3))
    x = np.random.default_rng(8).standard_normal((6, 2, 3)).astype(np.float32)
    ex.arg_dict["data"][:] = x
    ex.arg_dict["bn_gamma"][:] = 1.0
    ex.aux_dict["bn_moving_var"][:] = 1.0
    ex.forward(is_train=True)
    np.testing.assert_allclose(ex.aux_dict["bn_moving_mean"].asnumpy(), 0.5 * x.mean((0, 2)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ex.aux_dict["bn_moving_var"].asnumpy(), 0.5 + 0.5 * x.var((0, 2)), rtol=1e-5)


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_output_backward(dtype):
    rng = np.random.default_rng(9)
    cases = [((4, 5), (4,), {}),
             ((4, 5), (4,), {"normalization": "batch", "grad_scale": 2.0}),
             ((4, 5), (4,), {"use_ignore": True, "ignore_label": 2, "smooth_alpha": 0.1, "out_grad": True}),
             ((4, 5), (4, 5), {"out_grad": True}),
             ((3, 4, 2, 2), (3, 4), {"multi_output": True, "normalization": "batch", "use_ignore": True,
                                     "ignore_label": 1}),
             ((3, 4, 2), (3, 4), {"preserve_shape": True}),
             ((3, 4, 2), (3, 4), {})]
    for shape, lshape, attrs in cases:
        k = shape[1] if attrs.get("multi_output") else shape[-1]
        g = one_node_graph("_backward_SoftmaxOutput", [("dy", shape, dtype), ("out", shape, dtype),
                                                       ("label", lshape, dtype)], attrs)
        label = rng.uniform(0, 1, lshape) if lshape == shape else rng.integers(0, k, lshape)
        feeds = {"dy": rng.standard_normal(shape).astype(dtype), "out": rng.uniform(0, 1, shape).astype(dtype),
                 "label": label.astype(dtype)}
        got, want, cg, _, _ = compile_and_run(g, feeds, is_train=True)
        assert_close(got[0], want[0], rtol=1e-6, atol=1e-6)
        assert cg.native
    # independent: plain cross-entropy gradient p - onehot
    p = rng.uniform(0, 1, (3, 4))
    lab = np.array([0.0, 3.0, 1.9])
    g = one_node_graph("_backward_SoftmaxOutput", [("dy", (3, 4), "float64"), ("out", (3, 4), "float64"),
                                                   ("label", (3,), "float64")], {})
    got, _, _, _, _ = compile_and_run(g, {"dy": np.zeros((3, 4)), "out": p, "label": lab}, is_train=True)
    np.testing.assert_allclose(got[0], p - np.eye(4)[[0, 3, 1]], rtol=1e-15)


@pytest.mark.parametrize("op", ["LinearRegressionOutput", "MAERegressionOutput", "LogisticRegressionOutput"])
def test_regression_heads(op):
    rng = np.random.default_rng(10)
    back = {"LinearRegressionOutput": "_backward_linear_reg_out", "MAERegressionOutput": "_backward_mae_reg_out",
            "LogisticRegressionOutput": "_backward_logistic_reg_out"}[op]
    for shape, lshape in [((4, 3), (4, 3)), ((4, 1), (4,))]:
        g = one_node_graph(op, [("x", shape, "float32"), ("label", lshape, "float32")], {"grad_scale": 0.5})
        feeds = {"x": (rng.standard_normal(shape) * 30).astype(np.float32),
                 "label": rng.standard_normal(lshape).astype(np.float32)}
        got, want, cg, _, _ = compile_and_run(g, feeds)
        assert_close(got[0], want[0])
        assert cg.native
        g = one_node_graph(back, [("label", lshape, "float32"), ("out", shape, "float32")], {"grad_scale": 0.5})
        feeds = {"out": rng.standard_normal(shape).astype(np.float32),
                 "label": rng.standard_normal(lshape).astype(np.float32)}
        got, want, cg, _, _ = compile_and_run(g, feeds, is_train=True)
        assert_close(got[0], want[0])
        assert cg.native
        d = feeds["out"] - feeds["label"].reshape(shape)
        d = np.sign(d) if op == "MAERegressionOutput" else d
        np.testing.assert_allclose(got[0], d * 0.5 / (np.prod(lshape) / lshape[0]), rtol=1e-6)


def test_make_loss():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    for norm, native in [("null", True), ("batch", True), ("valid", False)]:
        g = one_node_graph("_backward_MakeLoss", [("x", (4, 3), "float32")], {"grad_scale": 3.0, "normalization": norm})
        got, want, cg, _, _ = compile_and_run(g, {"x": x}, is_train=True)
        assert_close(got[0], want[0])
        assert cg.native == native
    g = one_node_graph("MakeLoss", [("x", (4, 3), "float32")], {})
    got, want, cg, _, _ = compile_and_run(g, {"x": x})
    assert_close(got[0], want[0])
    assert cg.native


@pytest.mark.parametrize("dtype", FLOATS)
def test_instance_norm_backward(dtype):
    rng = np.random.default_rng(12)
    for shape in [(3, 4, 5), (2, 3, 4, 5)]:
        n, c = shape[:2]
        _check("_backward_InstanceNorm", [("dy", shape, dtype), ("x", shape, dtype), ("gamma", (c,), dtype),
                                          ("mean", (n, c), dtype), ("var", (n, c), dtype)], {"eps": 0.01},
               n_out=3, is_train=True, rng=rng, tol=1e-4 if dtype == "float32" else 1e-9)


@pytest.mark.parametrize("dtype", FLOATS)
def test_leaky_relu_family(dtype):
    rng = np.random.default_rng(13)
    for kind in ["leaky", "elu", "selu", "gelu"]:
        _check("LeakyReLU", [("x", (4, 5), dtype)], {"act_type": kind, "slope": 0.3}, rng=rng, tol=2e-6)
    for gshape in [(3,), (1,)]:
        _check("LeakyReLU", [("x", (4, 3, 2), dtype), ("gamma", gshape, dtype)], {"act_type": "prelu"}, rng=rng)
    x = np.array([-2.0, -0.5, 0.0, 1.5])
    g = one_node_graph("LeakyReLU", [("x", (4,), "float64")], {"act_type": "leaky", "slope": 0.1})
    got, _, _, _, _ = compile_and_run(g, {"x": x})
    np.testing.assert_array_equal(got[0], np.where(x > 0, x, 0.1 * x))


@pytest.mark.parametrize("dtype", FLOATS)
def test_group_norm_and_backward(dtype):
    rng = np.random.default_rng(14)
    for shape, groups in [((3, 4, 5), 2), ((2, 6, 2, 3), 3), ((2, 4, 3), 1)]:
        n = shape[0]
        _check("GroupNorm", [("x", shape, dtype), ("gamma", (groups,), dtype), ("beta", (groups,), dtype)],
               {"num_groups": groups, "eps": 0.01}, n_out=3, rng=rng)
        _check("_backward_GroupNorm", [("dy", shape, dtype), ("x", shape, dtype), ("gamma", (groups,), dtype),
                                       ("mean", (n, groups), dtype), ("std", (n, groups), dtype)],
               {"num_groups": groups}, n_out=3, is_train=True, rng=rng, tol=1e-4 if dtype == "float32" else 1e-9)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", ["instance", "channel", "spatial"])
def test_l2_normalization_and_backward(dtype, mode):
    rng = np.random.default_rng(15)
    for shape in [(3, 4, 5), (2, 3, 2, 4)]:
        _check("L2Normalization", [("x", shape, dtype)], {"mode": mode, "eps": 1e-6}, n_out=2, rng=rng)
        norm_shape = {"instance": (shape[0],), "channel": (shape[0], 1) + shape[2:],
                      "spatial": (shape[0], shape[1])}[mode]
        _check("_backward_L2Normalization", [("dy", shape, dtype), ("y", shape, dtype), ("norm", norm_shape, dtype)],
               {"mode": mode}, rng=rng, tol=1e-5, is_train=True)
    x = rng.standard_normal((2, 6))
    g = one_node_graph("L2Normalization", [("x", x.shape, "float64")], {"mode": "instance"}, n_outputs=2)
    got, _, _, _, _ = compile_and_run(g, {"x": x})
    nrm = np.sqrt((x * x).sum(1, keepdims=True) + 1e-10)
    np.testing.assert_allclose(got[0], x / nrm, rtol=1e-14)
    np.testing.assert_allclose(got[1], nrm[:, 0], rtol=1e-14)
