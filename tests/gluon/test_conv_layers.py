"""gluon.nn convolution, pooling, padding and InstanceNorm/GroupNorm layers against numpy
formulations; naming, deferred shapes, repr; hybridized vs imperative forward and gradients."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import symjit as mx
from symjit import autograd, nd
from symjit.gluon import nn
from symjit.symbol.naming import NameManager


def np_conv(x, w, b, stride, pad, dilate, groups=1):
    """Direct N-D convolution: out[n,f,o] = sum_{c,k} xpad[n,c,o*s+k*d] * w[f,c,k] + b[f]."""
    nd_ = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    n, c = x.shape[:2]
    f, cg = w.shape[:2]
    ks = w.shape[2:]
    out_sp = [(xp.shape[2 + i] - (ks[i] - 1) * dilate[i] - 1) // stride[i] + 1 for i in range(nd_)]
    out = np.zeros((n, f, *out_sp))
    fg = f // groups
    for g in range(groups):
        for o in itertools.product(*[range(s) for s in out_sp]):
            for k in itertools.product(*[range(s) for s in ks]):
                idx = tuple(o[i] * stride[i] + k[i] * dilate[i] for i in range(nd_))
                patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + idx]  # (n, cg)
                wk = w[(slice(g * fg, (g + 1) * fg), slice(None)) + k]  # (fg, cg)
                out[(slice(None), slice(g * fg, (g + 1) * fg)) + o] += patch @ wk.T
    if b is not None:
        out += b.reshape((1, f) + (1,) * nd_)
    return out


def np_deconv2d(x, w, b, stride, pad, adj):
    """Transposed 2-D convolution by scattering: each input pixel adds x * w to the output."""
    n, c, h, wd = x.shape
    _, f, kh, kw = w.shape
    oh = (h - 1) * stride[0] - 2 * pad[0] + kh + adj[0]
    ow = (wd - 1) * stride[1] - 2 * pad[1] + kw + adj[1]
    full = np.zeros((n, f, (h - 1) * stride[0] + kh + adj[0], (wd - 1) * stride[1] + kw + adj[1]))
    for i in range(h):
        for j in range(wd):
            full[:, :, i * stride[0]:i * stride[0] + kh, j * stride[1]:j * stride[1] + kw] += \
                np.einsum("nc,cfab->nfab", x[:, :, i, j], w)
    out = full[:, :, pad[0]:pad[0] + oh, pad[1]:pad[1] + ow]
    return out + b.reshape(1, f, 1, 1)


def _init(block, x):
    block.initialize(mx.init.Uniform(0.5))
    return block(x)


@pytest.mark.parametrize("cls,shape,kw", [
    (nn.Conv1D, (2, 3, 9), dict(kernel_size=3, strides=2, padding=1)),
    (nn.Conv2D, (2, 4, 7, 6), dict(kernel_size=(3, 2), strides=(1, 2), padding=(1, 0), dilation=(2, 1))),
    (nn.Conv2D, (1, 4, 5, 5), dict(kernel_size=3, groups=2, use_bias=False)),
    (nn.Conv3D, (1, 2, 4, 5, 4), dict(kernel_size=2, padding=1)),
])
def test_conv_forward_matches_numpy(cls, shape, kw):
    rs = np.random.RandomState(0)
    x = rs.randn(*shape).astype(np.float32)
    layer = cls(4, **kw)
    y = _init(layer, nd.array(x)).asnumpy()
    nd_ = len(shape) - 2
    k = kw["kernel_size"]

    def tup(v, d):
        return (v,) * nd_ if isinstance(v, int) else tuple(v)
    w = layer.weight.data().asnumpy()
    assert w.shape == (4, shape[1] // kw.get("groups", 1)) + tup(k, 0)
    b = layer.bias.data().asnumpy() if layer.bias is not None else None
    ref = np_conv(x.astype(np.float64), w, b, tup(kw.get("strides", 1), 1), tup(kw.get("padding", 0), 0),
                  tup(kw.get("dilation", 1), 1), kw.get("groups", 1))
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def test_conv2d_transpose_matches_numpy():
    rs = np.random.RandomState(1)
    x = rs.randn(2, 3, 4, 5).astype(np.float32)
    layer = nn.Conv2DTranspose(2, kernel_size=3, strides=2, padding=1, output_padding=1)
    y = _init(layer, nd.array(x)).asnumpy()
    w = layer.weight.data().asnumpy()
    assert w.shape == (3, 2, 3, 3)
    ref = np_deconv2d(x.astype(np.float64), w, layer.bias.data().asnumpy(), (2, 2), (1, 1), (1, 1))
    assert y.shape == ref.shape == (2, 2, 8, 10)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def test_conv1d_transpose_shape_and_values():
    rs = np.random.RandomState(2)
    x = rs.randn(1, 2, 4).astype(np.float32)
    layer = nn.Conv1DTranspose(3, kernel_size=2, strides=2)
    y = _init(layer, nd.array(x)).asnumpy()
    w = layer.weight.data().asnumpy()  # (2, 3, 2)
    ref = np_deconv2d(x[..., None].astype(np.float64), w[..., None], layer.bias.data().asnumpy(),
                      (2, 1), (0, 0), (0, 0))[..., 0]
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def _np_pool(x, k, s, p, kind, include_pad=True):
    xp = np.pad(x, [(0, 0), (0, 0)] + [(q, q) for q in p], constant_values=np.nan)
    nd_ = x.ndim - 2
    out_sp = [(x.shape[2 + i] + 2 * p[i] - k[i]) // s[i] + 1 for i in range(nd_)]
    out = np.zeros(x.shape[:2] + tuple(out_sp))
    for o in itertools.product(*[range(v) for v in out_sp]):
        win = xp[(slice(None), slice(None)) + tuple(slice(o[i] * s[i], o[i] * s[i] + k[i]) for i in range(nd_))]
        win = win.reshape(x.shape[:2] + (-1,))
        if kind == "max":
            out[(slice(None), slice(None)) + o] = np.nanmax(win, axis=-1)
        elif include_pad:
            out[(slice(None), slice(None)) + o] = np.nansum(win, axis=-1) / win.shape[-1]
        else:
            out[(slice(None), slice(None)) + o] = np.nanmean(win, axis=-1)
    return out


@pytest.mark.parametrize("cls,shape,kw,k,s,p,kind,inc", [
    (nn.MaxPool1D, (2, 3, 8), {}, (2,), (2,), (0,), "max", True),
    (nn.MaxPool2D, (2, 3, 7, 6), dict(pool_size=3, strides=2, padding=1), (3, 3), (2, 2), (1, 1), "max", True),
    (nn.MaxPool3D, (1, 2, 4, 4, 4), {}, (2, 2, 2), (2, 2, 2), (0, 0, 0), "max", True),
    (nn.AvgPool1D, (2, 3, 7), dict(pool_size=3, strides=1, padding=1), (3,), (1,), (1,), "avg", True),
    (nn.AvgPool2D, (2, 3, 6, 6), dict(pool_size=3, strides=2, padding=1, count_include_pad=False),
     (3, 3), (2, 2), (1, 1), "avg", False),
    (nn.AvgPool3D, (1, 2, 4, 4, 4), {}, (2, 2, 2), (2, 2, 2), (0, 0, 0), "avg", True),
])
def test_pooling_matches_numpy(cls, shape, kw, k, s, p, kind, inc):
    x = np.random.RandomState(3).randn(*shape).astype(np.float32)
    y = cls(**kw)(nd.array(x)).asnumpy()
    np.testing.assert_allclose(y, _np_pool(x.astype(np.float64), k, s, p, kind, inc), rtol=1e-5, atol=1e-6)


def test_pooling_ceil_mode_and_global_pools():
    x = np.random.RandomState(4).randn(2, 3, 5, 7).astype(np.float32)
    assert nn.MaxPool2D(pool_size=2, ceil_mode=True)(nd.array(x)).shape == (2, 3, 3, 4)
    assert nn.MaxPool2D(pool_size=2)(nd.array(x)).shape == (2, 3, 2, 3)
    np.testing.assert_allclose(nn.GlobalMaxPool2D()(nd.array(x)).asnumpy(), x.max(axis=(2, 3), keepdims=True))
    np.testing.assert_allclose(nn.GlobalAvgPool2D()(nd.array(x)).asnumpy(), x.mean(axis=(2, 3), keepdims=True),
                               rtol=1e-5)
    x1 = x[:, :, 0, :]
    np.testing.assert_allclose(nn.GlobalMaxPool1D()(nd.array(x1)).asnumpy(), x1.max(axis=2, keepdims=True))
    np.testing.assert_allclose(nn.GlobalAvgPool1D()(nd.array(x1)).asnumpy(), x1.mean(axis=2, keepdims=True),
                               rtol=1e-5)


def test_reflection_pad_instance_and_group_norm_match_numpy():
    rs = np.random.RandomState(5)
    x = rs.randn(2, 4, 3, 5).astype(np.float32)
    y = nn.ReflectionPad2D(2)(nd.array(x)).asnumpy()
    np.testing.assert_array_equal(y, np.pad(x, [(0, 0), (0, 0), (2, 2), (2, 2)], mode="reflect"))

    inorm = nn.InstanceNorm(scale=True, in_channels=4)
    inorm.initialize()
    inorm.gamma.set_data(nd.array([1.0, 2.0, 0.5, -1.0]))
    inorm.beta.set_data(nd.array([0.0, 1.0, -1.0, 0.5]))
    xd = x.astype(np.float64)
    mu = xd.mean(axis=(2, 3), keepdims=True)
    var = xd.var(axis=(2, 3), keepdims=True)
    ref = (xd - mu) / np.sqrt(var + 1e-5) * np.array([1, 2, 0.5, -1]).reshape(1, 4, 1, 1) \
        + np.array([0, 1, -1, 0.5]).reshape(1, 4, 1, 1)
    np.testing.assert_allclose(inorm(nd.array(x)).asnumpy(), ref, rtol=1e-4, atol=1e-5)

    gnorm = nn.GroupNorm(num_groups=2)
    gnorm.initialize()
    gnorm.gamma.set_data(nd.array([1.5, -0.5]))
    gnorm.beta.set_data(nd.array([0.25, 0.0]))
    g = xd.reshape(2, 2, -1)
    gref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    gref = gref * np.array([1.5, -0.5]).reshape(1, 2, 1) + np.array([0.25, 0.0]).reshape(1, 2, 1)
    np.testing.assert_allclose(gnorm(nd.array(x)).asnumpy(), gref.reshape(x.shape), rtol=1e-4, atol=1e-5)

    # channel axis elsewhere: InstanceNorm(axis=3) normalizes over the other spatial axes
    inorm3 = nn.InstanceNorm(axis=3)
    inorm3.initialize()
    xs = np.swapaxes(x, 1, 3)
    np.testing.assert_allclose(inorm3(nd.array(xs)).asnumpy(),
                               np.swapaxes(((xd - mu) / np.sqrt(var + 1e-5)), 1, 3), rtol=1e-4, atol=1e-5)


def test_names_deferred_shapes_and_repr():
    with NameManager():
        net = nn.HybridSequential()
        with net.name_scope():
            net.add(nn.Conv2D(16, 3), nn.MaxPool2D(), nn.Conv2DTranspose(8, 3, strides=2),
                    nn.GroupNorm(2), nn.InstanceNorm())
    names = list(net.collect_params().keys())
    assert names == ["hybridsequential0_conv0_weight", "hybridsequential0_conv0_bias",
                     "hybridsequential0_conv1_weight", "hybridsequential0_conv1_bias",
                     "hybridsequential0_groupnorm0_gamma", "hybridsequential0_groupnorm0_beta",
                     "hybridsequential0_instancenorm0_gamma", "hybridsequential0_instancenorm0_beta"]
    assert net[0].weight.shape == (16, 0, 3, 3)
    assert repr(net[0]) == "Conv2D(None -> 16, kernel_size=(3, 3), stride=(1, 1))"
    net.initialize()
    y = net(nd.ones((1, 3, 8, 8)))
    assert y.shape == (1, 8, 7, 7)
    assert net[0].weight.shape == (16, 3, 3, 3)
    assert net[2].weight.shape == (16, 8, 3, 3)
    assert repr(net[0]) == "Conv2D(3 -> 16, kernel_size=(3, 3), stride=(1, 1))"
    assert repr(nn.Conv2D(16, (3, 3), in_channels=3, padding=1, groups=1, use_bias=False, activation="relu")) == \
        "Conv2D(3 -> 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False, Activation(relu))"
    assert repr(nn.Conv1D(8, 3, dilation=2, groups=2, in_channels=4)) == \
        "Conv1D(2 -> 8, kernel_size=(3,), stride=(1,), dilation=(2,), groups=2)"
    assert repr(net[1]) == ("MaxPool2D(size=(2, 2), stride=(2, 2), padding=(0, 0), ceil_mode=False, "
                            "global_pool=False, pool_type=max, layout=NCHW)")
    assert repr(net[3]) == "GroupNorm(eps=1e-05, num_groups=2, center=True, scale=True, in_channels=2)"
    assert repr(net[4]) == "InstanceNorm(eps=1e-05, axis=1, center=True, scale=False, in_channels=8)"
    with pytest.raises(ValueError, match="layouts"):
        nn.Conv2D(4, 3, layout="NCW")
    assert nn.Conv2D(4, 3, layout="NHWC", in_channels=3).weight.shape == (4, 3, 3, 3)


def test_hybridized_conv_net_agrees_with_imperative_forward_and_gradients():
    rs = np.random.RandomState(6)
    with NameManager():
        net = nn.HybridSequential()
        with net.name_scope():
            net.add(nn.Conv2D(4, 3, padding=1, activation="relu"), nn.AvgPool2D(), nn.Conv2DTranspose(3, 2, strides=2),
                    nn.InstanceNorm(scale=True), nn.GroupNorm(3), nn.ReflectionPad2D(1),
                    nn.MaxPool2D(pool_size=3, strides=1), nn.GlobalAvgPool2D())
    net.initialize(mx.init.Xavier())
    x = nd.array(rs.randn(2, 3, 6, 6))

    def run():
        xx = x.copy()
        xx.attach_grad()
        with autograd.record():
            y = net(xx)
            loss = (y * y).sum()
        loss.backward()
        return y.asnumpy(), xx.grad.asnumpy(), {k: p.grad().asnumpy() for k, p in net.collect_params().items()
                                                 if p.grad_req != "null"}
    ref = run()
    net.hybridize()
    got = run()
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-4, atol=1e-5)
    for k in ref[2]:
        np.testing.assert_allclose(got[2][k], ref[2][k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_conv_weight_gradient_matches_numpy():
    rs = np.random.RandomState(7)
    x = rs.randn(2, 2, 5).astype(np.float32)
    layer = nn.Conv1D(3, 2, in_channels=2)
    layer.initialize()
    with autograd.record():
        y = layer(nd.array(x))
    y.backward()
    # d(sum y)/dw[f, c, k] = sum_{n, o} x[n, c, o + k]
    ref = np.stack([x[:, :, k:k + 4].sum(axis=(0, 2)) for k in range(2)], axis=-1)
    np.testing.assert_allclose(layer.weight.grad().asnumpy(), np.broadcast_to(ref, (3, 2, 2)), rtol=1e-5)
    np.testing.assert_allclose(layer.bias.grad().asnumpy(), np.full(3, 8.0))
