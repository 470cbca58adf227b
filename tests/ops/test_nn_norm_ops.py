"""Normalization, activation, dropout and loss-head ops (symjit/ops/nn_norm.py).

Forward results are compared with numpy formulas written here; gradients with finite differences
(`check_op_gradient`) or, for loss heads whose "gradient" is not a derivative, with MXNet's
hand-derived formulas.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from symjit import autograd, nd
from symjit.base import MXNetError
from symjit.ops import ComputeContext, apply_numpy, get_op
from symjit.test_utils import check_op_gradient

RNG = np.random.default_rng(7)
TRAIN = ComputeContext(is_train=True)


def _bn_inputs(shape=(4, 3, 2, 2), axis=1, dtype=np.float64):
    c = shape[axis]
    return [RNG.normal(1.0, 2.0, shape).astype(dtype), RNG.uniform(0.5, 1.5, c).astype(dtype),
            RNG.normal(0, 1, c).astype(dtype), RNG.normal(0, 1, c).astype(dtype),
            RNG.uniform(0.5, 2.0, c).astype(dtype)]


def _bcast(v, ndim, axis):
    shape = [1] * ndim
    shape[axis] = -1
    return v.reshape(shape)


def _infer(op_name, in_shapes, **attrs):
    op = get_op(op_name)
    return op.infer_shape(op.parse(attrs), list(in_shapes))


# --------------------------------------------------------------------------------------------
# BatchNorm
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fix_gamma", [True, False])
@pytest.mark.parametrize("axis", [1, -1])
def test_batchnorm_inference_uses_moving_stats(fix_gamma, axis):
    x, g, b, mm, mv = _bn_inputs((3, 4, 5) if axis == 1 else (3, 5, 4), axis)
    eps = 1e-3
    out, mean, var = apply_numpy("BatchNorm", [x, g, b, mm, mv], {"fix_gamma": fix_gamma, "axis": axis})
    ax = axis % 3
    gamma = np.ones_like(g) if fix_gamma else g
    expect = (x - _bcast(mm, 3, ax)) / np.sqrt(_bcast(mv, 3, ax) + eps) * _bcast(gamma, 3, ax) + _bcast(b, 3, ax)
    np.testing.assert_allclose(out, expect, rtol=1e-12)
    np.testing.assert_allclose(mean, mm)
    np.testing.assert_allclose(var, 1 / np.sqrt(mv + eps))


def test_batchnorm_training_batch_stats_and_moving_update():
    x, g, b, mm, mv = _bn_inputs()
    eps, mom = 1e-5, 0.8
    res = apply_numpy("BatchNorm", [x, g, b, mm, mv],
                      {"fix_gamma": False, "eps": eps, "momentum": mom}, TRAIN)
    assert len(res) == 5  # output, mean, var + new moving_mean, moving_var
    out, mean, inv_std, new_mm, new_mv = res
    bm = x.mean(axis=(0, 2, 3))
    bv = x.var(axis=(0, 2, 3))  # biased, as MXNet normalizes
    expect = (x - bm[None, :, None, None]) / np.sqrt(bv[None, :, None, None] + eps) \
        * g[None, :, None, None] + b[None, :, None, None]
    np.testing.assert_allclose(out, expect, rtol=1e-10)
    np.testing.assert_allclose(mean, bm, rtol=1e-12)
    np.testing.assert_allclose(inv_std, 1 / np.sqrt(bv + eps), rtol=1e-12)
    np.testing.assert_allclose(new_mm, mm * mom + bm * (1 - mom), rtol=1e-12)
    np.testing.assert_allclose(new_mv, mv * mom + bv * (1 - mom), rtol=1e-12)


def test_batchnorm_use_global_stats_ignores_training_and_does_not_update():
    x, g, b, mm, mv = _bn_inputs()
    res = apply_numpy("BatchNorm", [x, g, b, mm, mv], {"use_global_stats": True}, TRAIN)
    assert len(res) == 3
    np.testing.assert_allclose(res[1], mm)


def test_batchnorm_float16_keeps_float32_statistics():
    x, g, b, mm, mv = _bn_inputs(dtype=np.float32)
    op = get_op("BatchNorm")
    ins, outs = op.infer_type(op.parse({}), ["float16", None, None, None, None])
    assert ins == ["float16"] + ["float32"] * 4 and outs == ["float16", "float32", "float32"]
    out, mean, var = apply_numpy("BatchNorm", [x.astype(np.float16), g, b, mm, mv])
    assert out.dtype == np.float16 and mean.dtype == np.float32
    ref = apply_numpy("BatchNorm", [x, g, b, mm, mv])[0]
    np.testing.assert_allclose(out, ref, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("is_train", [False, True])
@pytest.mark.parametrize("fix_gamma", [True, False])
def test_batchnorm_gradient(is_train, fix_gamma):
    ins = _bn_inputs((3, 2, 3))
    check_op_gradient("BatchNorm", ins, {"fix_gamma": fix_gamma, "eps": 1e-3}, wrt=[0, 1, 2],
                      is_train=is_train)


def test_batchnorm_gradient_channel_last_and_2d():
    check_op_gradient("BatchNorm", _bn_inputs((2, 3, 4), axis=2), {"fix_gamma": False, "axis": 2},
                      wrt=[0, 1, 2], is_train=True)
    check_op_gradient("BatchNorm", _bn_inputs((5, 3)), {"fix_gamma": False}, wrt=[0, 1, 2], is_train=True)


def test_batchnorm_fix_gamma_gives_zero_gamma_gradient():
    x, g, b, mm, mv = (nd.array(a) for a in _bn_inputs(dtype=np.float32))
    g.attach_grad()
    x.attach_grad()
    with autograd.record():
        y = nd.BatchNorm(x, g, b, mm, mv)
    y.backward()
    assert not g.grad.asnumpy().any()
    assert x.grad.asnumpy().any()


def test_batchnorm_aux_updated_in_place_under_record():
    x_np, g_np, b_np, mm_np, mv_np = _bn_inputs(dtype=np.float32)
    x, g, b, mm, mv = (nd.array(a) for a in (x_np, g_np, b_np, mm_np, mv_np))
    x.attach_grad()
    mm_obj, mv_obj = mm, mv
    nd.BatchNorm(x, g, b, mm, mv)  # not recording: inference, no update
    np.testing.assert_array_equal(mm.asnumpy(), mm_np)
    with autograd.record():
        y = nd.BatchNorm(x, g, b, mm, mv, momentum=0.9)
    y.backward()
    bm, bv = x_np.mean(axis=(0, 2, 3)), x_np.var(axis=(0, 2, 3))
    assert mm is mm_obj and mv is mv_obj
    np.testing.assert_allclose(mm.asnumpy(), 0.9 * mm_np + 0.1 * bm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mv.asnumpy(), 0.9 * mv_np + 0.1 * bv, rtol=1e-5)
    with autograd.record(train_mode=False):
        nd.BatchNorm(x, g, b, mm, mv)
    np.testing.assert_allclose(mm.asnumpy(), 0.9 * mm_np + 0.1 * bm, rtol=1e-5, atol=1e-6)


def test_batchnorm_output_mean_var_visible_outputs():
    ins = [nd.array(a) for a in _bn_inputs(dtype=np.float32)]
    assert isinstance(nd.BatchNorm(*ins), nd.NDArray)
    out = nd.BatchNorm(*ins, output_mean_var=True)
    assert len(out) == 3 and out[1].shape == (3,) and out[2].shape == (3,)


def test_batchnorm_shape_inference_fills_parameters_and_aux():
    ins, outs = _infer("BatchNorm", [(2, 8, 5, 5), None, None, None, None])
    assert ins[1:] == [(8,)] * 4
    assert outs == [(2, 8, 5, 5), (8,), (8,)]
    ins, outs = _infer("BatchNorm", [(2, 5, 7), None, None, None, None], axis=-1)
    assert ins[1] == (7,)
    # channel count learnt from a parameter when the data's channel dim is unknown
    ins, outs = _infer("BatchNorm", [(0, 0, 4, 4), (6,), None, None, None])
    assert ins[0] == (0, 6, 4, 4) and ins[4] == (6,)
    ins, outs = _infer("BatchNorm", [None, None, (3,), None, None])
    assert ins[1:] == [(3,)] * 4 and outs == [None, (3,), (3,)]


def test_batchnorm_errors_name_the_op():
    x, g, b, mm, mv = _bn_inputs()
    with pytest.raises(MXNetError, match="BatchNorm.*gamma.*expected \\(3,\\).*got \\(4,\\)"):
        apply_numpy("BatchNorm", [x, np.ones(4), b, mm, mv])
    with pytest.raises(MXNetError, match="BatchNorm.*moving_var"):
        _infer("BatchNorm", [(2, 3, 4), None, None, None, (5,)])
    with pytest.raises(MXNetError, match="BatchNorm.*axis 4"):
        apply_numpy("BatchNorm", [x, g, b, mm, mv], {"axis": 4})
    with pytest.raises(MXNetError, match="BatchNorm.*floating"):
        apply_numpy("BatchNorm", [x.astype(np.int32), g, b, mm, mv])
    with pytest.raises(MXNetError, match="BatchNorm.*momentum"):
        apply_numpy("BatchNorm", [x, g, b, mm, mv], {"momentum": "fast"})


def test_batchnorm_signature():
    op = get_op("BatchNorm")
    attrs = op.parse({})
    assert op.input_names(attrs) == ["data", "gamma", "beta", "moving_mean", "moving_var"]
    assert op.aux_names == ("moving_mean", "moving_var")
    assert op.output_names(attrs) == ["output", "mean", "var"]
    assert attrs["eps"] == 1e-3 and attrs["momentum"] == 0.9 and attrs["fix_gamma"] is True
    parsed = op.parse({"eps": "1e-05", "fix_gamma": "False", "axis": "1", "use_global_stats": "False",
                       "momentum": "0.9", "cudnn_off": "False", "min_calib_range": "None"})
    assert parsed["eps"] == 1e-5 and parsed["fix_gamma"] is False


# --------------------------------------------------------------------------------------------
# LayerNorm, InstanceNorm, GroupNorm, L2Normalization
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_layernorm_forward_and_gradient(axis):
    x = RNG.normal(size=(3, 4, 5))
    c = x.shape[axis]
    g, b = RNG.normal(size=c), RNG.normal(size=c)
    eps = 1e-5
    out, mean, std = apply_numpy("LayerNorm", [x, g, b], {"axis": axis, "output_mean_var": True})
    m = x.mean(axis=axis, keepdims=True)
    s = np.sqrt(x.var(axis=axis, keepdims=True) + eps)
    ax = axis % 3
    np.testing.assert_allclose(out, (x - m) / s * _bcast(g, 3, ax) + _bcast(b, 3, ax), rtol=1e-10)
    np.testing.assert_allclose(mean, m)
    np.testing.assert_allclose(std, s)
    check_op_gradient("LayerNorm", [x, g, b], {"axis": axis})


def test_layernorm_shapes_and_errors():
    ins, outs = _infer("LayerNorm", [(2, 3, 6), None, None])
    assert ins[1:] == [(6,), (6,)] and outs == [(2, 3, 6), (2, 3, 1), (2, 3, 1)]
    assert get_op("LayerNorm").num_visible_outputs(get_op("LayerNorm").parse({})) == 1
    with pytest.raises(MXNetError, match="LayerNorm.*beta"):
        apply_numpy("LayerNorm", [np.ones((2, 3)), np.ones(3), np.ones(2)])


def test_instancenorm_forward_and_gradient():
    x = RNG.normal(size=(2, 3, 4, 2))
    g, b = RNG.normal(size=3), RNG.normal(size=3)
    out, mean, var = apply_numpy("InstanceNorm", [x, g, b])
    m = x.mean(axis=(2, 3), keepdims=True)
    v = x.var(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(out, (x - m) / np.sqrt(v + 1e-3) * _bcast(g, 4, 1) + _bcast(b, 4, 1), rtol=1e-10)
    np.testing.assert_allclose(mean, m[:, :, 0, 0])
    np.testing.assert_allclose(var, v[:, :, 0, 0])
    check_op_gradient("InstanceNorm", [x, g, b])
    ins, outs = _infer("InstanceNorm", [(2, 3, 4, 2), None, None])
    assert ins[1:] == [(3,), (3,)] and outs[1:] == [(2, 3), (2, 3)]
    with pytest.raises(MXNetError, match="InstanceNorm.*3 dimensions"):
        apply_numpy("InstanceNorm", [np.ones((2, 3)), np.ones(3), np.ones(3)])


def test_groupnorm_forward_and_gradient():
    x = RNG.normal(size=(2, 6, 3))
    g, b = RNG.normal(size=3), RNG.normal(size=3)
    out, mean, std = apply_numpy("GroupNorm", [x, g, b], {"num_groups": 3, "eps": 1e-5})
    xg = x.reshape(2, 3, 2, 3)
    m = xg.mean(axis=(2, 3), keepdims=True)
    s = np.sqrt(xg.var(axis=(2, 3), keepdims=True) + 1e-5)
    expect = ((xg - m) / s * g.reshape(1, 3, 1, 1) + b.reshape(1, 3, 1, 1)).reshape(x.shape)
    np.testing.assert_allclose(out, expect, rtol=1e-10)
    np.testing.assert_allclose(mean, m[:, :, 0, 0])
    np.testing.assert_allclose(std, s[:, :, 0, 0])
    check_op_gradient("GroupNorm", [x, g, b], {"num_groups": 3})
    ins, outs = _infer("GroupNorm", [(2, 6, 3), None, None], num_groups=2)
    assert ins[1:] == [(2,), (2,)] and outs[1:] == [(2, 2), (2, 2)]
    with pytest.raises(MXNetError, match="GroupNorm.*divisible"):
        apply_numpy("GroupNorm", [x, np.ones(4), np.ones(4)], {"num_groups": 4})


@pytest.mark.parametrize("mode", ["instance", "channel", "spatial"])
def test_l2normalization(mode):
    x = RNG.normal(size=(2, 3, 4))
    eps = 1e-10
    axes = {"instance": (1, 2), "channel": (1,), "spatial": (2,)}[mode]
    n = np.sqrt((x * x).sum(axis=axes, keepdims=True) + eps)
    out, norm = apply_numpy("L2Normalization", [x], {"mode": mode})
    np.testing.assert_allclose(out, x / n, rtol=1e-12)
    expect_norm_shape = {"instance": (2,), "channel": (2, 1, 4), "spatial": (2, 3)}[mode]
    assert norm.shape == expect_norm_shape
    np.testing.assert_allclose(norm.reshape(-1), n.reshape(-1))
    assert _infer("L2Normalization", [(2, 3, 4)], mode=mode)[1][1] == expect_norm_shape
    check_op_gradient("L2Normalization", [x], {"mode": mode})


def test_l2normalization_channel_mode_needs_3d():
    with pytest.raises(MXNetError, match="L2Normalization.*3 dimensions"):
        apply_numpy("L2Normalization", [np.ones((2, 3))], {"mode": "channel"})
    with pytest.raises(MXNetError, match="L2Normalization.*mode"):
        apply_numpy("L2Normalization", [np.ones((2, 3))], {"mode": "pixel"})


# --------------------------------------------------------------------------------------------
# LeakyReLU
# --------------------------------------------------------------------------------------------

def _away_from_zero(shape):
    x = RNG.normal(size=shape)
    return np.where(np.abs(x) < 0.05, 0.3, x)


LEAKY = {
    "leaky": lambda x: np.where(x > 0, x, 0.25 * x),
    "elu": lambda x: np.where(x > 0, x, 0.25 * (np.exp(x) - 1)),
    "selu": lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * (np.exp(x) - 1)),
    "gelu": lambda x: 0.5 * x * (1 + sp.erf(x / math.sqrt(2))),
    "rrelu": lambda x: np.where(x > 0, x, (0.125 + 0.334) / 2 * x),
}


@pytest.mark.parametrize("act", sorted(LEAKY))
def test_leaky_relu_forward_and_gradient(act):
    x = _away_from_zero((3, 4))
    (y, *_) = apply_numpy("LeakyReLU", [x], {"act_type": act})
    np.testing.assert_allclose(y, LEAKY[act](x), rtol=1e-12)
    check_op_gradient("LeakyReLU", [x], {"act_type": act})


def test_leaky_relu_slope_parameter_and_float32():
    x = _away_from_zero((5,)).astype(np.float32)
    (y,) = apply_numpy("LeakyReLU", [x], {"act_type": "leaky", "slope": "0.1"})
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, np.where(x > 0, x, np.float32(0.1) * x), rtol=1e-6)


def test_prelu_gamma_per_channel_and_scalar():
    x = _away_from_zero((2, 3, 4))
    gamma = np.array([0.1, 0.2, 0.3])
    (y,) = apply_numpy("LeakyReLU", [x, gamma], {"act_type": "prelu"})
    np.testing.assert_allclose(y, np.where(x > 0, x, x * gamma[None, :, None]))
    check_op_gradient("LeakyReLU", [x, gamma], {"act_type": "prelu"})
    check_op_gradient("LeakyReLU", [x, np.array([0.2])], {"act_type": "prelu"})
    op = get_op("LeakyReLU")
    assert op.input_names(op.parse({"act_type": "prelu"})) == ["data", "gamma"]
    assert op.input_names(op.parse({})) == ["data"]
    assert _infer("LeakyReLU", [(2, 5, 4), None], act_type="prelu")[0][1] == (5,)
    with pytest.raises(MXNetError, match="LeakyReLU.*gamma"):
        apply_numpy("LeakyReLU", [x, np.ones(4)], {"act_type": "prelu"})


def test_prelu_gamma_per_sample_and_channel():
    """A 2-D gamma (N, C) matches data axes 0 and 1 (MXNet's expand_shape), 2-D or 4-D data."""
    import symjit as mx
    for shape in [(3, 4), (3, 4, 2, 5)]:
        x = _away_from_zero(shape)
        gamma = RNG.uniform(0.1, 0.5, size=(3, 4))
        g = gamma.reshape(gamma.shape + (1,) * (len(shape) - 2))
        (y,) = apply_numpy("LeakyReLU", [x, gamma], {"act_type": "prelu"})
        np.testing.assert_allclose(y, np.where(x > 0, x, x * g))
        check_op_gradient("LeakyReLU", [x, gamma], {"act_type": "prelu"})
        sym = mx.sym.LeakyReLU(mx.sym.var("x"), gamma=mx.sym.var("gamma"), act_type="prelu")
        exe = sym.bind(mx.cpu(), {"x": nd.array(x), "gamma": nd.array(gamma)},
                       args_grad={"x": nd.zeros(shape), "gamma": nd.zeros(gamma.shape)})
        np.testing.assert_allclose(exe.forward(is_train=True)[0].asnumpy(), y, rtol=1e-5)
        # MXNet reads one head gradient per output and ignores extra ones
        exe.backward([nd.ones(shape), nd.ones(gamma.shape)])
        np.testing.assert_allclose(exe.grad_dict["gamma"].asnumpy(),
                                   np.where(x > 0, 0, x).sum(axis=tuple(range(2, len(shape)))), rtol=1e-4)
        with pytest.raises(MXNetError, match="out_grads"):
            exe.backward([])
    with pytest.raises(MXNetError, match="LeakyReLU.*gamma"):
        apply_numpy("LeakyReLU", [np.ones((3, 4)), np.ones((4, 3))], {"act_type": "prelu"})


def test_rrelu_random_slope_in_training_and_gradient_uses_it():
    x = -np.abs(_away_from_zero((200,)))
    y, mask = apply_numpy("LeakyReLU", [x], {"act_type": "rrelu"}, TRAIN)
    slopes = y / x
    assert np.all((slopes >= 0.125) & (slopes < 0.334)) and slopes.std() > 0.01
    np.testing.assert_allclose(mask, slopes)
    xa = nd.array(x)
    xa.attach_grad()
    with autograd.record():
        ya = nd.LeakyReLU(xa, act_type="rrelu")
    ya.backward()
    np.testing.assert_allclose(xa.grad.asnumpy(), ya.asnumpy() / x, rtol=1e-5)


# --------------------------------------------------------------------------------------------
# Dropout
# --------------------------------------------------------------------------------------------

def test_dropout_identity_in_inference():
    x = RNG.normal(size=(4, 5)).astype(np.float32)
    y, mask = apply_numpy("Dropout", [x], {"p": 0.5})
    np.testing.assert_array_equal(y, x)
    assert y is not x
    check_op_gradient("Dropout", [x], {"p": 0.5})


def test_dropout_training_mask_statistics():
    x = np.ones((200, 100), np.float32)
    p = 0.3
    y, mask = apply_numpy("Dropout", [x], {"p": p}, ComputeContext(is_train=True, rng=np.random.default_rng(0)))
    np.testing.assert_allclose(np.unique(y), [0.0, 1 / (1 - p)], rtol=1e-6)
    assert abs((y == 0).mean() - p) < 0.02
    assert abs(y.mean() - 1.0) < 0.03  # expectation preserved
    np.testing.assert_array_equal(y, x * mask)


@pytest.mark.parametrize("compiled", [False, True])
def test_dropout_p_one_gives_nan_as_mxnet(compiled):
    """keep = 0: MXNet's mask is (u < 0) * (1 / 0) = 0 * inf, so the output is NaN, not zero."""
    import symjit as mx
    x = np.ones((8, 6), np.float32)
    if compiled:
        exe = mx.sym.Dropout(mx.sym.var("data"), p=1.0).simple_bind(mx.cpu(), data=x.shape)
        exe.arg_arrays[0][:] = x
        y = exe.forward(is_train=True)[0].asnumpy()
        exe.backward([nd.ones(x.shape)])
        assert np.isnan(exe.grad_arrays[0].asnumpy()).all()
        np.testing.assert_array_equal(exe.forward(is_train=False)[0].asnumpy(), x)
    else:
        y, _ = apply_numpy("Dropout", [x], {"p": 1.0}, ComputeContext(is_train=True, rng=np.random.default_rng(0)))
    assert np.isnan(y).all()


def test_dropout_axes_share_mask_and_mode_always():
    x = np.ones((6, 50, 4))
    y, _ = apply_numpy("Dropout", [x], {"p": 0.5, "axes": "(2,)", "mode": "always"})
    assert np.all(y == y[:, :, :1])  # one mask value along axis 2
    assert 0 < (y == 0).mean() < 1


def test_dropout_gradient_reuses_forward_mask():
    x = nd.array(RNG.normal(size=(50, 40)))
    x.attach_grad()
    head = nd.array(RNG.normal(size=(50, 40)))
    with autograd.record():
        y = nd.Dropout(x, p=0.4)
    y.backward(head)
    kept = y.asnumpy() != 0
    assert 0.5 < kept.mean() < 0.7
    expect = np.where(kept, head.asnumpy() / 0.6, 0.0)
    np.testing.assert_allclose(x.grad.asnumpy(), expect, rtol=1e-5)


def test_dropout_signature_and_errors():
    op = get_op("Dropout")
    attrs = op.parse({"p": "0.5", "axes": "()", "cudnn_off": "False"})
    assert op.is_random and op.num_visible_outputs(attrs) == 1 and op.output_names(attrs) == ["output", "mask"]
    with pytest.raises(MXNetError, match="Dropout.*p"):
        op.parse({"p": 1.5})
    with pytest.raises(MXNetError, match="Dropout.*axis 3"):
        apply_numpy("Dropout", [np.ones((2, 2))], {"axes": (3,)}, TRAIN)


# --------------------------------------------------------------------------------------------
# Loss heads
# --------------------------------------------------------------------------------------------

def _softmax(z, axis):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _head_backward(op_name, data, label, **attrs):
    """Forward and data gradient through nd + autograd with a random head gradient."""
    x = nd.array(data, dtype="float64")
    lab = nd.array(label, dtype="float64")
    x.attach_grad()
    lab.attach_grad()
    with autograd.record():
        y = getattr(nd, op_name)(x, lab, **attrs)
    y.backward(nd.array(RNG.normal(size=y.shape), dtype="float64"))
    return y.asnumpy(), x.grad.asnumpy(), lab.grad.asnumpy()


def _onehot(label, k):
    return (np.arange(k)[None, :] == label[:, None]).astype(float)


@pytest.mark.parametrize("normalization", ["null", "batch", "valid"])
def test_softmax_output_gradient_normalization_and_ignore(normalization):
    x = RNG.normal(size=(5, 4))
    label = np.array([0, 3, -1, 2, -1.0])
    y, dx, dlabel = _head_backward("SoftmaxOutput", x, label, grad_scale=2.0, use_ignore=True,
                                   normalization=normalization)
    p = _softmax(x, 1)
    np.testing.assert_allclose(y, p, rtol=1e-12)
    g = p - _onehot(label, 4)
    g[label == -1] = 0
    div = {"null": 1, "batch": 5, "valid": 3}[normalization]
    np.testing.assert_allclose(dx, g * 2.0 / div, rtol=1e-10)
    assert not dlabel.any()


def test_softmax_output_valid_counts_ignore_label_without_use_ignore():
    x = RNG.normal(size=(4, 3))
    label = np.array([1, 1, 0, 2.0])
    _, dx, _ = _head_backward("SoftmaxOutput", x, label, normalization="valid", ignore_label=1)
    np.testing.assert_allclose(dx, (_softmax(x, 1) - _onehot(label, 3)) / 2, rtol=1e-10)


def test_softmax_output_multi_output():
    x = RNG.normal(size=(2, 3, 4))
    label = np.array([[0, 1, 2, 1], [2, 2, 0, 1.0]])
    y, dx, _ = _head_backward("SoftmaxOutput", x, label, multi_output=True)
    p = _softmax(x, 1)
    np.testing.assert_allclose(y, p, rtol=1e-12)
    onehot = (np.arange(3)[None, :, None] == label[:, None, :]).astype(float)
    np.testing.assert_allclose(dx, (p - onehot) / 4, rtol=1e-10)  # null divides by spatial size
    _, dx_b, _ = _head_backward("SoftmaxOutput", x, label, multi_output=True, normalization="batch")
    np.testing.assert_allclose(dx_b, (p - onehot) / 4 / 2, rtol=1e-10)
    _, dx_v, _ = _head_backward("SoftmaxOutput", x, label, multi_output=True, normalization="valid")
    np.testing.assert_allclose(dx_v, (p - onehot) / 8, rtol=1e-10)
    ins, _ = _infer("SoftmaxOutput", [(2, 3, 4, 5), None], multi_output=True)
    assert ins[1] == (2, 20)
    _infer("SoftmaxOutput", [(2, 3, 4, 5), (2, 4, 5)], multi_output=True)
    _infer("SoftmaxOutput", [(2, 3, 4, 5), (2, 1, 4, 5)], multi_output=True)
    with pytest.raises(MXNetError, match="SoftmaxOutput.*label"):
        _infer("SoftmaxOutput", [(2, 3, 4, 5), (2, 3)], multi_output=True)


def test_softmax_output_preserve_shape_smoothing_out_grad_and_probability_label():
    x = RNG.normal(size=(2, 3, 4))
    label = np.array([[0, 1, 3], [2, 2, 0.0]])
    y, dx, _ = _head_backward("SoftmaxOutput", x, label, preserve_shape=True, smooth_alpha=0.3)
    p = _softmax(x, -1)
    np.testing.assert_allclose(y, p, rtol=1e-12)
    onehot = _onehot(label.reshape(-1), 4).reshape(2, 3, 4)
    target = np.where(onehot == 1, 1 - 0.3, 0.3 / 3)
    np.testing.assert_allclose(dx, p - target, rtol=1e-10)
    # probability labels: (softmax - label) * grad_scale, no normalization
    q = _softmax(RNG.normal(size=(3, 5)), 1)
    xx = RNG.normal(size=(3, 5))
    _, dx2, _ = _head_backward("SoftmaxOutput", xx, q, grad_scale=0.5, normalization="batch")
    np.testing.assert_allclose(dx2, (_softmax(xx, 1) - q) * 0.5, rtol=1e-10)
    # out_grad multiplies by the head gradient
    xo = nd.array(RNG.normal(size=(3, 4)), dtype="float64")
    lo = nd.array([1, 0, 3], dtype="float64")
    head = RNG.normal(size=(3, 4))
    xo.attach_grad()
    with autograd.record():
        yo = nd.SoftmaxOutput(xo, lo, out_grad=True)
    yo.backward(nd.array(head, dtype="float64"))
    expect = (_softmax(xo.asnumpy(), 1) - _onehot(np.array([1, 0, 3]), 4)) * head
    np.testing.assert_allclose(xo.grad.asnumpy(), expect, rtol=1e-10)


def test_softmax_output_default_flattens_non_batch_axes_and_alias():
    x = RNG.normal(size=(2, 2, 3))
    (y,) = apply_numpy("Softmax", [x, np.zeros((2, 2))])
    np.testing.assert_allclose(y, _softmax(x.reshape(2, 6), 1).reshape(x.shape), rtol=1e-12)
    ins, outs = _infer("SoftmaxOutput", [(8, 10), None])
    assert ins[1] == (8,) and outs == [(8, 10)]
    assert get_op("SoftmaxOutput").input_names({}) == ["data", "label"]
    with pytest.raises(MXNetError, match="SoftmaxOutput.*label.*expected \\(3,\\)"):
        apply_numpy("SoftmaxOutput", [np.ones((3, 4)), np.ones(4)])


@pytest.mark.parametrize("op_name", ["LinearRegressionOutput", "LogisticRegressionOutput",
                                     "MAERegressionOutput"])
def test_regression_outputs(op_name):
    x = RNG.normal(size=(4, 3))
    label = RNG.normal(size=(4, 3))
    y, dx, dlabel = _head_backward(op_name, x, label, grad_scale=1.5)
    out = 1 / (1 + np.exp(-x)) if op_name == "LogisticRegressionOutput" else x
    np.testing.assert_allclose(y, out, rtol=1e-12)
    diff = np.sign(out - label) if op_name == "MAERegressionOutput" else out - label
    np.testing.assert_allclose(dx, diff * 1.5 / 3, rtol=1e-10)
    assert not dlabel.any()


def test_regression_label_shapes():
    ins, _ = _infer("LinearRegressionOutput", [(8, 1), None])
    assert ins[1] == (8,)
    ins, _ = _infer("LinearRegressionOutput", [(8, 3), None])
    assert ins[1] == (8, 3)
    _, dx, _ = _head_backward("LinearRegressionOutput", np.array([[1.0], [2.0]]), np.array([0.5, 3.0]))
    np.testing.assert_allclose(dx, [[0.5], [-1.0]])
    with pytest.raises(MXNetError, match="LinearRegressionOutput.*label"):
        apply_numpy("LinearRegressionOutput", [np.ones((4, 3)), np.ones((3, 4))])
    with pytest.raises(MXNetError, match="MAERegressionOutput.*label"):
        _infer("MAERegressionOutput", [(4, 3), (4, 2)])


@pytest.mark.parametrize("normalization,expect", [("null", 2.0), ("batch", 0.5), ("valid", 2.0 / 5)])
def test_make_loss(normalization, expect):
    data = np.array([[0.5, -1.0, 2.0], [0.0, 3.0, 4.0], [1.0, -2.0, 0.0], [0.1, 0.0, -0.1]])
    x = nd.array(data)
    x.attach_grad()
    with autograd.record():
        y = nd.MakeLoss(x, grad_scale=2.0, normalization=normalization, valid_thresh=0.4)
    y.backward(nd.array(RNG.normal(size=data.shape)))
    np.testing.assert_allclose(y.asnumpy(), data)
    np.testing.assert_allclose(x.grad.asnumpy(), np.full(data.shape, expect), rtol=1e-6)


def test_make_loss_unary_passes_ones_back():
    x = nd.array([[1.0, -2.0], [3.0, 4.0]])
    x.attach_grad()
    with autograd.record():
        y = nd.make_loss(x * 3)
    y.backward(nd.array([[5.0, 5.0], [5.0, 5.0]]))
    np.testing.assert_allclose(y.asnumpy(), x.asnumpy() * 3)
    np.testing.assert_allclose(x.grad.asnumpy(), np.full((2, 2), 3.0))  # ones through the *3
    op = get_op("make_loss")
    assert op.output_names(op.parse({})) == ["loss"]
    with pytest.raises(MXNetError, match="make_loss.*grad_scale"):
        op.parse({"grad_scale": 2})


def test_smooth_l1():
    x = np.array([-3.0, -0.3, 0.05, 0.2, 1.5])
    sigma = 2.0
    (y,) = apply_numpy("smooth_l1", [x], {"scalar": sigma})
    s2 = sigma ** 2
    expect = np.where(np.abs(x) < 1 / s2, 0.5 * s2 * x * x, np.abs(x) - 0.5 / s2)
    np.testing.assert_allclose(y, expect, rtol=1e-12)
    check_op_gradient("smooth_l1", [x], {"scalar": sigma})


def test_softmax_cross_entropy():
    x = RNG.normal(size=(4, 5))
    label = np.array([0, 4, 2, 2.0])
    (loss,) = apply_numpy("softmax_cross_entropy", [x, label])
    assert loss.shape == (1,)
    p = _softmax(x, 1)
    np.testing.assert_allclose(loss, [-np.log(p[np.arange(4), [0, 4, 2, 2]]).sum()], rtol=1e-10)
    check_op_gradient("softmax_cross_entropy", [x, label], wrt=[0])
    with pytest.raises(MXNetError, match="softmax_cross_entropy.*labels"):
        apply_numpy("softmax_cross_entropy", [x, np.array([0, 5, 1, 1.0])])


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.integers(2, 5), st.integers(1, 4), st.sampled_from([0, 1, 2, -1]),
       st.floats(1e-5, 1e-1))
def test_batchnorm_training_output_is_standardized_per_channel(n, c, w, axis, eps):
    """Property: with gamma = 1 and beta = 0, each channel of the training output has mean 0
    and variance var / (var + eps) (biased batch variance)."""
    x = np.random.default_rng(n * 100 + c * 10 + w).normal(3.0, 2.0, (n + 1, c, w))
    ax = axis % 3
    k = x.shape[ax]
    out = apply_numpy("BatchNorm", [x, np.ones(k), np.zeros(k), np.zeros(k), np.ones(k)],
                      {"axis": axis, "eps": eps, "fix_gamma": False}, TRAIN)[0]
    red = tuple(i for i in range(3) if i != ax)
    v = x.var(axis=red)
    np.testing.assert_allclose(out.mean(axis=red), 0, atol=1e-10)
    np.testing.assert_allclose(out.var(axis=red), v / (v + eps), rtol=1e-8)
