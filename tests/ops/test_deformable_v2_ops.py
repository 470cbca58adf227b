"""ModulatedDeformableConvolution (DCNv2; MXNet 1.9.1 runs it on GPUs only, so there are no CPU
golden values): the forward against a per-element loop of the CUDA kernel's sampling rule
(neighbours outside the image read 0, points outside (-1, H) x (-1, W) read 0, each sample
scaled by its mask), gradients of every input against finite differences, and its relation
to DeformableConvolution."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from symjit.ops import apply_numpy
from symjit.test_utils import check_op_gradient

RNG = np.random.default_rng(31)
OP = "_contrib_ModulatedDeformableConvolution"


def _zero_padded_bilinear(img, y, x):
    h, w = img.shape
    if not (-1 < y < h and -1 < x < w):
        return 0.0
    y0, x0 = int(np.floor(y)), int(np.floor(x))
    ly, lx = y - y0, x - x0
    at = lambda r, c: img[r, c] if 0 <= r < h and 0 <= c < w else 0.0
    return ((1 - ly) * (1 - lx) * at(y0, x0) + (1 - ly) * lx * at(y0, x0 + 1)
            + ly * (1 - lx) * at(y0 + 1, x0) + ly * lx * at(y0 + 1, x0 + 1))


def _naive(x, off, mask, wt, pad, dg):
    n, c, h, w = x.shape
    _, _, kh, kw = wt.shape
    oh, ow = off.shape[2:]
    cols = np.zeros((n, c, kh, kw, oh, ow))
    for b in range(n):
        for ch in range(c):
            g = ch // (c // dg)
            for i in range(kh):
                for j in range(kw):
                    k = i * kw + j
                    for y in range(oh):
                        for z in range(ow):
                            py = y - pad + i + off[b, g * 2 * kh * kw + 2 * k, y, z]
                            px = z - pad + j + off[b, g * 2 * kh * kw + 2 * k + 1, y, z]
                            cols[b, ch, i, j, y, z] = (_zero_padded_bilinear(x[b, ch], py, px)
                                                       * mask[b, g * kh * kw + k, y, z])
    return np.einsum("fcij,ncijyz->nfyz", wt, cols)


def _offsets(shape):
    """Offsets 0.05 away from whole numbers (the interpolation's kinks), reaching past the edges."""
    return RNG.integers(-2, 2, size=shape) + RNG.uniform(0.05, 0.95, size=shape)


@pytest.mark.parametrize("dg", [1, 2])
def test_forward_is_the_sampling_formula_and_gradients_match_finite_differences(dg):
    x = RNG.uniform(size=(1, 4, 4, 5))
    off = _offsets((1, dg * 18, 4, 5))
    mask = RNG.uniform(size=(1, dg * 9, 4, 5))
    w, b = RNG.normal(size=(3, 4, 3, 3)), RNG.normal(size=3)
    attrs = {"kernel": (3, 3), "pad": (1, 1), "num_filter": 3, "num_deformable_group": dg}
    y = apply_numpy(OP, [x, off, mask, w, b], attrs)[0]
    np.testing.assert_allclose(y, _naive(x, off, mask, w, 1, dg) + b.reshape(1, -1, 1, 1), rtol=1e-10, atol=1e-12)
    check_op_gradient(OP, [x, off, mask, w, b], attrs, rtol=1e-3, atol=1e-6)


def test_unit_mask_inside_the_image_is_deformable_convolution():
    x = RNG.uniform(size=(1, 2, 7, 7))
    # every tap stays strictly inside [0, H - 1), where both sampling rules agree: taps on the
    # last row / column move up / left, the others down / right
    i, j = np.divmod(np.arange(9), 3)
    pos_h = i[:, None, None] + np.arange(5)[None, :, None] + np.zeros((1, 1, 5))
    pos_w = j[:, None, None] + np.arange(5)[None, None, :] + np.zeros((1, 5, 1))
    step = lambda pos: np.where(pos >= 6, -1.0, 1.0) * RNG.uniform(0.05, 0.9, size=pos.shape)
    off = np.stack([step(pos_h), step(pos_w)], axis=1).reshape(1, 18, 5, 5)
    w = RNG.normal(size=(2, 2, 3, 3))
    attrs = {"kernel": (3, 3), "num_filter": 2, "no_bias": True}
    v1 = apply_numpy("_contrib_DeformableConvolution", [x, off, w], attrs)[0]
    v2 = apply_numpy(OP, [x, off, np.ones((1, 9, 5, 5)), w], attrs)[0]
    np.testing.assert_allclose(v2, v1, rtol=1e-12)


def test_symbol_shapes_autograd_and_errors():
    s = mx.sym.contrib.ModulatedDeformableConvolution(mx.sym.var("x"), mx.sym.var("off"), mx.sym.var("m"),
                                                      kernel=(3, 3), num_filter=4, pad=(1, 1))
    args, outs, _ = s.infer_shape(x=(2, 3, 6, 5))
    assert outs == [(2, 4, 6, 5)] and args[1] == (2, 18, 6, 5) and args[2] == (2, 9, 6, 5)
    with pytest.raises(MXNetError, match="mask"):
        s.infer_shape(x=(2, 3, 6, 5), m=(2, 18, 6, 5))
    x = mx.nd.array(RNG.uniform(size=(1, 2, 4, 4)))
    off, m = mx.nd.array(_offsets((1, 18, 4, 4))), mx.nd.array(RNG.uniform(size=(1, 9, 4, 4)))
    w = mx.nd.array(RNG.normal(size=(2, 2, 3, 3)))
    for a in (x, off, m, w):
        a.attach_grad()
    with mx.autograd.record():
        y = mx.nd.contrib.ModulatedDeformableConvolution(x, off, m, w, kernel=(3, 3), num_filter=2, pad=(1, 1),
                                                         no_bias=True)
    y.backward()
    grads = apply_numpy("_backward_ModulatedDeformableConvolution",
                        [np.ones(y.shape, np.float32)] + [a.asnumpy() for a in (x, off, m, w)],
                        {"kernel": (3, 3), "num_filter": 2, "pad": (1, 1), "no_bias": True})
    for a, g in zip((x, off, m, w), grads):
        np.testing.assert_allclose(a.grad.asnumpy(), g, rtol=1e-5, atol=1e-6)
