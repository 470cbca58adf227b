"""The HWC image operators of symjit/ops/image_aug.py through mx.nd.image and mx.sym.image:
values against numpy references (slicing, flips, the colour formulas with the alpha recovered
from a seeded draw, OpenCV's colorsys-equivalent HLS), shapes, dtypes, gradients of the
deterministic ops by finite differences, and errors naming the op."""
from __future__ import annotations

import colorsys

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from symjit.test_utils import check_op_gradient

RNG = np.random.default_rng(5)
LUMA = np.array([0.299, 0.587, 0.114])


@pytest.fixture
def img():
    return RNG.integers(0, 256, (6, 8, 3)).astype(np.uint8)


def test_resize_sizes_and_values(img):
    x = mx.nd.array(img, dtype=np.uint8)
    assert mx.nd.image.resize(x, size=(4, 3)).shape == (3, 4, 3)
    assert mx.nd.image.resize(x, size=5).shape == (5, 5, 3)
    assert mx.nd.image.resize(x, size=3, keep_ratio=True).shape == (3, 4, 3)
    up = mx.nd.image.resize(x, size=(16, 12), interp=0)
    assert up.dtype == np.uint8
    np.testing.assert_array_equal(up.asnumpy(), np.repeat(np.repeat(img, 2, 0), 2, 1))
    batch = mx.nd.array(np.stack([img, img[::-1]]), dtype=np.uint8)
    out = mx.nd.image.resize(batch, size=(16, 12), interp=0).asnumpy()
    np.testing.assert_array_equal(out[1], np.repeat(np.repeat(img[::-1], 2, 0), 2, 1))
    with pytest.raises(MXNetError, match="_image_resize"):
        mx.nd.image.resize(mx.nd.ones((2, 3)), size=2)


def test_crop_and_its_gradient(img):
    x = mx.nd.array(img)
    np.testing.assert_array_equal(mx.nd.image.crop(x, x=2, y=1, width=4, height=3).asnumpy(), img[1:4, 2:6])
    batch = mx.nd.array(np.stack([img, img + 1]))
    assert mx.nd.image.crop(batch, x=0, y=0, width=2, height=2).shape == (2, 2, 2, 3)
    with pytest.raises(MXNetError, match="_image_crop.*inside"):
        mx.nd.image.crop(x, x=6, y=0, width=4, height=2)
    check_op_gradient("_image_crop", [RNG.normal(size=(5, 6, 3))], dict(x=1, y=2, width=3, height=2))


def test_flips_and_their_gradients(img):
    x = mx.nd.array(img, dtype=np.uint8)
    np.testing.assert_array_equal(mx.nd.image.flip_left_right(x).asnumpy(), img[:, ::-1])
    np.testing.assert_array_equal(mx.nd.image.flip_top_bottom(x).asnumpy(), img[::-1])
    check_op_gradient("_image_flip_left_right", [RNG.normal(size=(3, 4, 3))])
    with pytest.raises(MXNetError, match=r"Input image must have shape \(height, width, channels\)"):
        mx.nd.image.flip_left_right(mx.nd.zeros((2, 3, 4, 3)))     # as MXNet 1.9.1: no batches
    check_op_gradient("_image_flip_top_bottom", [RNG.normal(size=(3, 4, 1))])
    mx.random.seed(0)
    seen = set()
    for _ in range(20):
        out = mx.nd.image.random_flip_left_right(x).asnumpy()
        assert np.array_equal(out, img) or np.array_equal(out, img[:, ::-1])
        seen.add(np.array_equal(out, img))
        out = mx.nd.image.random_flip_top_bottom(x).asnumpy()
        assert np.array_equal(out, img) or np.array_equal(out, img[::-1])
    assert seen == {True, False}


def test_random_crops(img):
    x = mx.nd.array(img, dtype=np.uint8)
    mx.random.seed(1)
    for _ in range(5):
        out = mx.nd.image.random_crop(x, width=3, height=2).asnumpy()
        hits = [(y, x0) for y in range(5) for x0 in range(6) if np.array_equal(img[y:y + 2, x0:x0 + 3], out)]
        assert hits, "the crop is a window of the image"
    fixed = mx.nd.image.random_crop(x, xrange=(1, 1), yrange=(0, 0), width=3, height=2).asnumpy()
    np.testing.assert_array_equal(fixed, img[0:2, 5:8])
    assert mx.nd.image.random_crop(x, width=10, height=9).shape == (9, 10, 3)
    out = mx.nd.image.random_resized_crop(x, width=5, height=4)
    assert out.shape == (4, 5, 3) and out.dtype == np.uint8
    whole = mx.nd.image.random_resized_crop(x, width=8, height=6, area=(1, 1), ratio=(8 / 6, 8 / 6))
    np.testing.assert_array_equal(whole.asnumpy(), img)


def _alpha(seed, lo, hi, n=1):
    """The alphas a seeded op draws (the generator mx.random.seed resets)."""
    mx.random.seed(seed)
    from symjit.ops import rng
    return rng.generator().uniform(lo, hi, n)


def test_colour_jitters_follow_their_formulas(img):
    f = img.astype(np.float32)
    x = mx.nd.array(f)
    (a,) = _alpha(3, 0.5, 1.5)
    mx.random.seed(3)
    np.testing.assert_allclose(mx.nd.image.random_brightness(x, min_factor=0.5, max_factor=1.5).asnumpy(), f * a,
                               rtol=1e-5)
    mx.random.seed(3)
    out = mx.nd.image.random_contrast(x, min_factor=0.5, max_factor=1.5).asnumpy()
    np.testing.assert_allclose(out, f * a + (1 - a) * (f @ LUMA).mean(), rtol=1e-4)
    mx.random.seed(3)
    out = mx.nd.image.random_saturation(x, min_factor=0.5, max_factor=1.5).asnumpy()
    # MXNet's operator takes 0.114 * blue as the grey level (tests/golden/test_golden_data.py checks it)
    np.testing.assert_allclose(out, f * a + (1 - a) * 0.114 * f[:, :, 2:3], rtol=1e-4, atol=1e-3)
    (h,) = _alpha(4, -0.3, 0.3)
    mx.random.seed(4)
    out = mx.nd.image.random_hue(x, min_factor=-0.3, max_factor=0.3).asnumpy()
    ref = np.empty_like(f)
    for i in np.ndindex(f.shape[:2]):
        hh, ll, ss = colorsys.rgb_to_hls(*(f[i] / 255))
        ref[i] = np.array(colorsys.hls_to_rgb((hh + h) % 1.0, ll, ss)) * 255
    np.testing.assert_allclose(out, ref, atol=1e-3)
    u8 = mx.nd.image.random_brightness(mx.nd.array(img, dtype=np.uint8), min_factor=3, max_factor=3).asnumpy()
    np.testing.assert_array_equal(u8, np.clip(np.rint(img * 3.0), 0, 255))
    mx.random.seed(5)
    jit = mx.nd.image.random_color_jitter(x, brightness=0.3, contrast=0, saturation=0, hue=0).asnumpy()
    (b,) = _alpha(5, -0.3, 0.3)
    np.testing.assert_allclose(jit, f * (1 + b), rtol=1e-5)
    with pytest.raises(MXNetError, match="_image_random_hue.*3 channels"):
        mx.nd.image.random_hue(mx.nd.ones((2, 2, 1)), min_factor=0, max_factor=0.1)


def test_lighting(img):
    f = img.astype(np.float32)
    eigval = np.array([55.46, 4.794, 1.148])
    eigvec = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140], [-0.5836, -0.6948, 0.4203]])
    alpha = np.array([0.1, -0.2, 0.3])
    out = mx.nd.image.adjust_lighting(mx.nd.array(f), alpha=tuple(alpha)).asnumpy()
    np.testing.assert_allclose(out, f + eigvec @ (alpha * eigval), rtol=1e-5)
    check_op_gradient("_image_adjust_lighting", [RNG.normal(size=(3, 2, 3))], dict(alpha=(0.1, 0.2, 0.3)))
    mx.random.seed(6)
    from symjit.ops import rng
    a = rng.generator().normal(0, 0.1, 3)
    mx.random.seed(6)
    out = mx.nd.image.random_lighting(mx.nd.array(f), alpha_std=0.1).asnumpy()
    np.testing.assert_allclose(out, f + eigvec @ (a * eigval), rtol=1e-5)


def test_ops_in_symbol_graphs(img):
    d = mx.sym.var("d")
    net = mx.sym.image.normalize(mx.sym.image.to_tensor(
        mx.sym.image.random_flip_left_right(mx.sym.image.resize(d, size=(4, 3)))), mean=0.5, std=0.25)
    assert net.infer_shape(d=(6, 8, 3))[1] == [(3, 3, 4)]
    ex = net.bind(mx.cpu(), {"d": mx.nd.array(img, dtype=np.uint8)})
    out = ex.forward()[0].asnumpy()
    ref = (mx.nd.image.resize(mx.nd.array(img, dtype=np.uint8), size=(4, 3)).asnumpy().transpose(2, 0, 1) / 255
           - 0.5) / 0.25
    assert np.allclose(out, ref, atol=1e-5) or np.allclose(out, ref[:, :, ::-1], atol=1e-5)
    crop = mx.sym.image.crop(d, x=1, y=1, width=2, height=2)
    ex = crop.simple_bind(mx.cpu(), d=(4, 4, 3))
    ex.forward(is_train=True, d=mx.nd.array(RNG.normal(size=(4, 4, 3))))
    ex.backward(mx.nd.ones((2, 2, 3)))
    g = np.zeros((4, 4, 3))
    g[1:3, 1:3] = 1
    np.testing.assert_array_equal(ex.grad_dict["d"].asnumpy(), g)
