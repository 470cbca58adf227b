"""Tests for the image operators (symjit/ops/image.py): `_image_to_tensor`, `_image_normalize`
and its backward op, through the registry, `mx.nd.image` and `mx.sym.image`.

Forward values come from explicit per-pixel loops written here; gradients from finite
differences (both ops are linear, so a large step is exact); errors name the op.
"""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from symjit.ops.registry import apply_numpy, get_op
from symjit.symbol.naming import NameManager
from symjit.test_utils import check_op_gradient

RNG = np.random.default_rng(11)


def to_tensor_loops(img: np.ndarray) -> np.ndarray:
    """(H, W, C) -> (C, H, W) float32 / 255, one pixel at a time."""
    h, w, c = img.shape
    out = np.empty((c, h, w), np.float32)
    for y in range(h):
        for x in range(w):
            for k in range(c):
                out[k, y, x] = np.float32(img[y, x, k]) / np.float32(255.0)
    return out


def normalize_loops(t: np.ndarray, mean, std) -> np.ndarray:
    """(C, H, W): channel k -> (x - mean[k]) / std[k] (one-element mean/std for all channels)."""
    out = np.empty(t.shape, np.float32)
    for k in range(t.shape[0]):
        m = mean[k] if len(mean) > 1 else mean[0]
        s = std[k] if len(std) > 1 else std[0]
        out[k] = (t[k].astype(np.float32) - np.float32(m)) / np.float32(s)
    return out


# --------------------------------------------------------------------------------------
# to_tensor
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.int32])
def test_to_tensor_hwc(dtype):
    img = RNG.integers(0, 256, size=(4, 2, 3)).astype(dtype)
    (out,) = apply_numpy("_image_to_tensor", [img])
    assert out.dtype == np.float32 and out.shape == (3, 4, 2)
    np.testing.assert_array_equal(out, to_tensor_loops(img))


def test_to_tensor_nhwc_is_per_image():
    imgs = RNG.integers(0, 256, size=(2, 4, 2, 3)).astype(np.uint8)
    (out,) = apply_numpy("_image_to_tensor", [imgs])
    assert out.shape == (2, 3, 4, 2)
    for n in range(2):
        np.testing.assert_array_equal(out[n], to_tensor_loops(imgs[n]))


def test_to_tensor_nd_and_inference():
    img = mx.nd.array(RNG.integers(0, 256, size=(5, 3, 1)), dtype="uint8")
    out = mx.nd.image.to_tensor(img)
    assert out.shape == (1, 5, 3) and out.dtype == np.float32
    op = get_op("_image_to_tensor")
    assert op.infer_shape({}, [(5, 3, 1)]) == ([(5, 3, 1)], [(1, 5, 3)])
    assert op.infer_shape({}, [(8, 5, 3, 1)])[1] == [(8, 1, 5, 3)]
    assert op.infer_shape({}, [None])[1] == [None]
    assert op.infer_type({}, ["uint8"])[1] == ["float32"]


def test_to_tensor_gradient_float_input():
    check_op_gradient("_image_to_tensor", [RNG.uniform(0, 255, size=(3, 2, 3))], eps=0.5)
    check_op_gradient("_image_to_tensor", [RNG.uniform(0, 255, size=(2, 3, 2, 1))], eps=0.5)


def test_to_tensor_gradient_through_autograd():
    x = mx.nd.array(RNG.uniform(0, 255, size=(2, 3, 3)))
    x.attach_grad()
    head = RNG.uniform(-1, 1, size=(3, 2, 3)).astype(np.float32)
    with mx.autograd.record():
        y = mx.nd.image.to_tensor(x)
    y.backward(mx.nd.array(head))
    np.testing.assert_allclose(x.grad.asnumpy(), np.transpose(head, (1, 2, 0)) / 255.0, rtol=1e-6)


@pytest.mark.parametrize("shape", [(4, 4), (2, 2, 2, 2, 2), (3,)])
def test_to_tensor_rejects_bad_rank(shape):
    with pytest.raises(MXNetError, match="_image_to_tensor"):
        apply_numpy("_image_to_tensor", [np.zeros(shape, np.uint8)])
    with pytest.raises(MXNetError, match="_image_to_tensor"):
        get_op("_image_to_tensor").infer_shape({}, [shape])


# --------------------------------------------------------------------------------------
# normalize
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("mean, std", [((0, 1, 2), (3, 2, 1)), ((0.5,), (0.25,)), ((0.1, 0.2, 0.3), (2.0,))])
def test_normalize_chw(mean, std):
    t = RNG.uniform(0, 1, size=(3, 4, 2)).astype(np.float32)
    (out,) = apply_numpy("_image_normalize", [t], {"mean": mean, "std": std})
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, normalize_loops(t, mean, std), rtol=1e-6)


def test_normalize_nchw_and_one_channel():
    t = RNG.uniform(0, 1, size=(2, 3, 4, 2)).astype(np.float32)
    out = mx.nd.image.normalize(mx.nd.array(t), mean=(0, 1, 2), std=(3, 2, 1)).asnumpy()
    for n in range(2):
        np.testing.assert_allclose(out[n], normalize_loops(t[n], (0, 1, 2), (3, 2, 1)), rtol=1e-6)
    g = RNG.uniform(0, 1, size=(1, 5, 5)).astype(np.float32)
    (o,) = apply_numpy("_image_normalize", [g], {"mean": "(0.5,)", "std": "(0.5,)"})
    np.testing.assert_allclose(o, (g - 0.5) / 0.5, rtol=1e-6)


def test_normalize_gradient():
    attrs = {"mean": (0.0, 1.0, 2.0), "std": (3.0, 2.0, 0.5)}
    check_op_gradient("_image_normalize", [RNG.uniform(0, 1, size=(3, 2, 2))], attrs, eps=0.5)
    check_op_gradient("_image_normalize", [RNG.uniform(0, 1, size=(2, 3, 2, 2))], attrs, eps=0.5)
    check_op_gradient("_backward_image_normalize", [RNG.uniform(-1, 1, size=(3, 2, 2)),
                                                    RNG.uniform(0, 1, size=(3, 2, 2))], attrs, wrt=[0], eps=0.5)


def test_normalize_backward_values():
    g = RNG.uniform(-1, 1, size=(2, 3, 2, 2)).astype(np.float32)
    (dx,) = apply_numpy("_backward_image_normalize", [g, np.zeros_like(g)], {"mean": (0.0,), "std": (3.0, 2.0, 0.5)})
    np.testing.assert_allclose(dx, g / np.array([3.0, 2.0, 0.5], np.float32).reshape(1, 3, 1, 1), rtol=1e-6)


def test_normalize_errors_name_the_op():
    with pytest.raises(MXNetError, match="_image_normalize.*1 or 3"):
        apply_numpy("_image_normalize", [np.zeros((2, 4, 4), np.float32)], {"mean": (0,), "std": (1,)})
    with pytest.raises(MXNetError, match="_image_normalize.*mean must have either 1 or 3"):
        apply_numpy("_image_normalize", [np.zeros((3, 4, 4), np.float32)], {"mean": (0, 1), "std": (1,)})
    with pytest.raises(MXNetError, match="_image_normalize.*std"):
        get_op("_image_normalize").infer_shape(get_op("_image_normalize").parse({"mean": "(0,)", "std": "(1, 2)"}),
                                               [(1, 3, 4, 4)])
    with pytest.raises(MXNetError, match="_image_normalize.*shape"):
        apply_numpy("_image_normalize", [np.zeros((4, 4), np.float32)], {"mean": (0,), "std": (1,)})
    with pytest.raises(MXNetError, match="_image_normalize"):
        apply_numpy("_image_normalize", [np.zeros((3, 4, 4), np.float32)], {"mean": "bad"})


# --------------------------------------------------------------------------------------
# symbol frontend
# --------------------------------------------------------------------------------------

def test_symbol_image_names_and_values():
    with NameManager():
        x = mx.sym.var("x")
        t = mx.sym.image.to_tensor(x)
        n = mx.sym.image.normalize(t, mean=(0, 1, 2), std=(3, 2, 1))
        assert t.name == "to_tensor0" and n.name == "normalize0"
    img = RNG.integers(0, 256, size=(4, 2, 3)).astype(np.uint8)
    (out,) = n.eval(x=mx.nd.array(img, dtype="uint8"))
    np.testing.assert_allclose(out.asnumpy(), normalize_loops(to_tensor_loops(img), (0, 1, 2), (3, 2, 1)),
                               rtol=1e-6)
    assert n.infer_shape(x=(4, 2, 3))[1] == [(3, 4, 2)]
    with pytest.raises(AttributeError):
        mx.sym.image.no_such_op


def test_normalize_default_statistics_follow_mxnet():
    """MXNet's defaults are 4-element tuples, which fit neither 1 nor 3 channels: MXNet
    1.9.1 rejects a call without mean/std, and so does symjit."""
    with pytest.raises(MXNetError, match="_image_normalize.*mean"):
        mx.nd.image.normalize(mx.nd.zeros((3, 2, 2)))
