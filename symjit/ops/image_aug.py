"""Image operators on HWC images (MXNet 1.9.1's `mx.nd.image.*` / `mx.sym.image.*` besides
to_tensor and normalize): resize, crop, random_crop, random_resized_crop, flips, random colour
jitters and PCA lighting.

Every op takes an image (H, W, C) or a batch (N, H, W, C) (uint8 or float) and returns the same
dtype (as in MXNet 1.9.1 the flips, colour jitters and lighting ops take one image only).
Integer results of resizing are rounded and saturated (OpenCV's saturate_cast), those of the
colour and lighting ops saturated and truncated (MXNet's cast). Random ops draw from the op's
generator (`mx.random.seed` makes them reproducible), independently for each image of
a batch. Sizes are (width, height), as MXNet's.

  * resize(size, keep_ratio, interp): `size` (w, h), or one int: a square, or with keep_ratio
    the shorter edge (the other int(edge * size / short edge)). OpenCV interpolation codes.
  * crop(x, y, width, height): the region [y, y + height) x [x, x + width); its gradient puts
    the head gradient back in place (zeros elsewhere).
  * random_crop(xrange, yrange, width, height, interp): the crop's left/top edge is
    u * (W - width) / u * (H - height) with u ~ U(range); an image smaller than the crop is
    resized to it first.
  * random_resized_crop(width, height, area, ratio, interp, max_trial): a crop covering a random
    fraction `area` of the image with aspect ratio log-uniform in `ratio`, resized to
    (width, height); after max_trial misses the centre crop of the target's aspect ratio.
  * flip_left_right / flip_top_bottom (gradient: the same flip); random_flip_* flip with
    probability 1/2.
  * random_brightness / random_contrast / random_saturation (min_factor, max_factor): alpha ~
    U(min, max); brightness x * alpha, contrast alpha x + (1 - alpha) mean luma, saturation
    alpha x + (1 - alpha) 0.114 * blue (MXNet's operator sums no other channel into its grey).
    random_hue: the hue turned by alpha of a full circle (HLS).
  * random_color_jitter(brightness, contrast, saturation, hue): those > 0 in that order, with
    alpha = 1 + U(-v, v) (hue: U(-hue, hue)).
  * adjust_lighting(alpha) adds eigvec @ (alpha * eigval) (ImageNet's RGB PCA) to every pixel
    (gradient: the identity); random_lighting(alpha_std) draws alpha ~ N(0, alpha_std).
Random ops have no gradient (the draw is not kept), as resize and the random crops.
"""
from __future__ import annotations

import math

import numpy as np

from ..base import MXNetError
from . import image_kernels as K
from .attrs import Bool, Float, FloatTuple, Int, Param, Shape
from .registry import MAX_TENSOR_ELEMENTS, Op, register

__all__ = ["resize_shape"]


def _err(op: str, msg: str) -> MXNetError:
    return MXNetError(f"{op}: {msg}")


def _check_image(op: str, shape, single: bool = False) -> None:
    if single and len(shape) != 3:      # MXNet's flips, colour and lighting ops take one image
        raise _err(op, f"Input image must have shape (height, width, channels), but got {list(shape)}")
    if len(shape) not in (3, 4):
        raise _err(op, f"input must be an image (H, W, C) or a batch (N, H, W, C), got shape {tuple(shape)}")


def _per_image(x: np.ndarray, fn) -> np.ndarray:
    """fn applied to each image of a batch (or to the single image)."""
    if x.ndim == 3:
        return fn(x)
    return np.stack([fn(img) for img in x]) if len(x) else x.copy()


def _check_out_size(op: str, h: int, w: int) -> tuple:
    """(h, w) of an output image: positive, and an image a tensor may hold."""
    if h <= 0 or w <= 0:
        raise _err(op, f"the output size must be positive, got (w={w}, h={h})")
    if h * w > MAX_TENSOR_ELEMENTS:
        raise _err(op, f"the output size (w={w}, h={h}) exceeds {MAX_TENSOR_ELEMENTS} pixels")
    return h, w


def _with_hw(shape: tuple, h: int, w: int) -> tuple:
    return tuple(shape[:-3]) + (h, w, shape[-1])


class _ImageOp(Op):
    """An op mapping HWC images to HWC images of the same dtype (output size from `out_hw`).
    `single_image`: the op takes one (H, W, C) image only, no batch (as in MXNet 1.9.1)."""
    inputs = ("data",)
    single_image = False

    def out_hw(self, attrs, h: int, w: int) -> tuple:
        return h, w

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        _check_image(self.name, d, self.single_image)
        h, w = d[-3], d[-2]
        if not (h and w):
            return [tuple(d)], [None]
        return [tuple(d)], [_with_hw(tuple(d), *self.out_hw(attrs, h, w))]

    def infer_type(self, attrs, in_types):
        return list(in_types), list(in_types)

    def one(self, attrs, img: np.ndarray, rng) -> np.ndarray:
        raise NotImplementedError

    def compute(self, attrs, inputs, ctx):
        (x,) = inputs
        _check_image(self.name, x.shape, self.single_image)
        rng = ctx.random() if self.is_random else None
        return [np.ascontiguousarray(_per_image(x, lambda img: self.one(attrs, img, rng)))]


# ---- geometry ------------------------------------------------------------------------------

def resize_shape(op: str, size: tuple, keep_ratio: bool, h: int, w: int) -> tuple:
    """(new h, new w) of `_image_resize` for an h x w image."""
    if len(size) == 1:
        s = size[0]
        if not keep_ratio:
            return s, s
        return (int(h * s / w), s) if h > w else (s, int(w * s / h))
    if len(size) == 2:
        return size[1], size[0]
    raise _err(op, f"size must be (width, height) or a single int, got {size}")


@register("_image_resize")
class Resize(_ImageOp):
    """Resize images to `size` with OpenCV interpolation `interp`."""
    differentiable = False
    params = {
        "size": Param(Shape, (), "Size of new image: (width, height) or one int."),
        "keep_ratio": Param(Bool, False, "Resize the short edge to `size` when `size` is one int."),
        "interp": Param(Int, 1, "Interpolation: 0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 Lanczos."),
    }

    def out_hw(self, attrs, h, w):
        nh, nw = resize_shape(self.name, tuple(attrs["size"]), attrs["keep_ratio"], h, w)
        return _check_out_size(self.name, nh, nw)

    def one(self, attrs, img, rng):
        nh, nw = self.out_hw(attrs, img.shape[0], img.shape[1])
        try:
            return K.resize(img, nw, nh, attrs["interp"])
        except ValueError as err:
            raise _err(self.name, str(err)) from None


_CROP_PARAMS = {
    "x": Param(Int, doc="Left boundary of the cropping area."),
    "y": Param(Int, doc="Top boundary of the cropping area."),
    "width": Param(Int, doc="Width of the cropping area."),
    "height": Param(Int, doc="Height of the cropping area."),
}


def _check_crop(op: str, attrs, h: int, w: int) -> None:
    x, y, cw, ch = attrs["x"], attrs["y"], attrs["width"], attrs["height"]
    if x < 0 or y < 0 or cw <= 0 or ch <= 0 or x + cw > w or y + ch > h:
        raise _err(op, f"the crop (x={x}, y={y}, width={cw}, height={ch}) must lie inside the "
                       f"{h}x{w} image")


@register("_image_crop")
class Crop(_ImageOp):
    """The region (x, y, width, height) of each image."""
    params = _CROP_PARAMS

    def out_hw(self, attrs, h, w):
        _check_crop(self.name, attrs, h, w)
        return attrs["height"], attrs["width"]

    def one(self, attrs, img, rng):
        _check_crop(self.name, attrs, img.shape[0], img.shape[1])
        x, y = attrs["x"], attrs["y"]
        return img[y:y + attrs["height"], x:x + attrs["width"]]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F._backward_image_crop(ograds[0], inputs[0], x=attrs["x"], y=attrs["y"],
                                       width=attrs["width"], height=attrs["height"])]


@register("_backward_image_crop")
class BackwardCrop(Op):
    """Gradient of `_image_crop`: the head gradient placed at the crop, zeros elsewhere."""
    inputs = ("ograd", "data")
    params = _CROP_PARAMS
    hidden = True

    def infer_shape(self, attrs, in_shapes):
        g, d = in_shapes
        return [g, d], [None if d is None else tuple(d)]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[1] if in_types[1] is not None else in_types[0]]

    def compute(self, attrs, inputs, ctx):
        g, x = inputs
        _check_crop(self.name, attrs, x.shape[-3], x.shape[-2])
        out = np.zeros(x.shape, x.dtype)
        xs, ys = attrs["x"], attrs["y"]
        out[..., ys:ys + attrs["height"], xs:xs + attrs["width"], :] = g
        return [out]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F._image_crop(ograds[0], x=attrs["x"], y=attrs["y"], width=attrs["width"],
                              height=attrs["height"]), F.zeros_like(inputs[1])]


def _pair(op: str, key: str, attrs) -> tuple:
    """A (low, high) range attribute."""
    v = attrs[key]
    if len(v) != 2:
        raise _err(op, f"{key} must be a (low, high) pair, got {v}")
    return v


def _fit(img, w: int, h: int, interp: int) -> np.ndarray:
    """`img` enlarged to at least w x h (both edges scaled to cover it), else unchanged."""
    ih, iw = img.shape[:2]
    if ih >= h and iw >= w:
        return img
    return K.resize(img, max(w, iw), max(h, ih), interp)


@register("_image_random_crop")
class RandomCrop(_ImageOp):
    """A crop of (width, height) at a random position (left edge u * (W - width), u ~ U(xrange);
    likewise the top edge)."""
    is_random = True
    differentiable = False
    params = {
        "xrange": Param(FloatTuple, (0.0, 1.0), "Range of the crop's left edge, as a fraction of W - width."),
        "yrange": Param(FloatTuple, (0.0, 1.0), "Range of the crop's top edge, as a fraction of H - height."),
        "width": Param(Int, doc="Width of the crop."),
        "height": Param(Int, doc="Height of the crop."),
        "interp": Param(Int, 1, "Interpolation used when the image is smaller than the crop."),
    }

    def out_hw(self, attrs, h, w):
        return _check_out_size(self.name, attrs["height"], attrs["width"])

    def one(self, attrs, img, rng):
        ch, cw = self.out_hw(attrs, *img.shape[:2])
        img = _fit(img, cw, ch, attrs["interp"])
        h, w = img.shape[:2]
        x0 = int(np.nan_to_num(rng.uniform(*_pair(self.name, "xrange", attrs)) * (w - cw)))
        y0 = int(np.nan_to_num(rng.uniform(*_pair(self.name, "yrange", attrs)) * (h - ch)))
        x0, y0 = min(max(x0, 0), w - cw), min(max(y0, 0), h - ch)
        return img[y0:y0 + ch, x0:x0 + cw]


@register("_image_random_resized_crop")
class RandomResizedCrop(_ImageOp):
    """A crop of random area fraction and aspect ratio, resized to (width, height)."""
    is_random = True
    differentiable = False
    params = {
        "width": Param(Int, doc="Width of the output."),
        "height": Param(Int, doc="Height of the output."),
        "area": Param(FloatTuple, (0.08, 1.0), "Range of the crop's area as a fraction of the image's."),
        "ratio": Param(FloatTuple, (3.0 / 4.0, 4.0 / 3.0), "Range of the crop's aspect ratio (w / h)."),
        "interp": Param(Int, 1, "Interpolation of the resize."),
        "max_trial": Param(Int, 10, "Draws before falling back to the centre crop."),
    }

    def out_hw(self, attrs, h, w):
        return _check_out_size(self.name, attrs["height"], attrs["width"])

    def one(self, attrs, img, rng):
        h, w = img.shape[:2]
        oh, ow = self.out_hw(attrs, h, w)
        (alo, ahi), (rlo, rhi) = _pair(self.name, "area", attrs), _pair(self.name, "ratio", attrs)
        if not (0 < rlo <= rhi and 0 < alo <= ahi):
            raise _err(self.name, f"area {attrs['area']} and ratio {attrs['ratio']} must be positive ranges")
        for _ in range(attrs["max_trial"]):
            area = rng.uniform(alo, ahi) * h * w
            ratio = math.exp(rng.uniform(math.log(rlo), math.log(rhi)))
            cw, ch = int(round(math.sqrt(area * ratio))), int(round(math.sqrt(area / ratio)))
            if 0 < cw <= w and 0 < ch <= h:
                x0, y0 = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
                return K.resize(img[y0:y0 + ch, x0:x0 + cw], ow, oh, attrs["interp"])
        cw, ch = min(w, max(1, int(h * ow / oh))), min(h, max(1, int(w * oh / ow)))
        x0, y0 = (w - cw) // 2, (h - ch) // 2
        return K.resize(img[y0:y0 + ch, x0:x0 + cw], ow, oh, attrs["interp"])


class _Flip(_ImageOp):
    """Reverses the width (axis=1) or height (axis=0) of each image."""
    single_image = True
    axis = 1
    kernel = "shape"

    def one(self, attrs, img, rng):
        return np.flip(img, self.axis)

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.apply(self.name, [ograds[0]])[0]]


@register("_image_flip_left_right")
class FlipLeftRight(_Flip):
    """Flip each image left to right."""
    axis = 1


@register("_image_flip_top_bottom")
class FlipTopBottom(_Flip):
    """Flip each image top to bottom."""
    axis = 0


class _RandomFlip(_ImageOp):
    """Flip the image along `axis` with probability 1/2."""
    single_image = True
    is_random = True
    differentiable = False
    axis = 1

    def one(self, attrs, img, rng):
        return np.flip(img, self.axis) if rng.random() < 0.5 else img


@register("_image_random_flip_left_right")
class RandomFlipLeftRight(_RandomFlip):
    """Flip each image left to right with probability 1/2."""
    axis = 1


@register("_image_random_flip_top_bottom")
class RandomFlipTopBottom(_RandomFlip):
    """Flip each image top to bottom with probability 1/2."""
    axis = 0


# ---- colour --------------------------------------------------------------------------------

def _check_rgb(op: str, img: np.ndarray) -> None:
    if img.shape[-1] != 3:
        raise _err(op, f"expects RGB images with 3 channels, got {img.shape[-1]} channels")


def _as_input_dtype(out: np.ndarray, img: np.ndarray) -> np.ndarray:
    """A float result in `img`'s dtype as MXNet's colour operators store it: integer images are
    saturated and truncated toward zero (static_cast), float images keep their values."""
    if np.issubdtype(img.dtype, np.integer):
        info = np.iinfo(img.dtype)
        return np.trunc(np.clip(out, info.min, info.max)).astype(img.dtype)
    return out.astype(img.dtype, copy=False)


def _adjust_contrast(img: np.ndarray, alpha: float) -> np.ndarray:
    """Contrast about the mean luma (RGB) or the mean value (one channel), as MXNet's operator."""
    if img.shape[-1] == 1:
        return img * np.float32(alpha) + np.float32((1 - alpha) * img.mean(dtype=np.float64))
    return K.adjust_contrast(img, alpha)


def _draw(rng, lo: float, hi: float) -> float:
    """lo + (hi - lo) * U(0, 1), also when lo > hi (MXNet draws so)."""
    return lo + (hi - lo) * rng.random()


_FACTORS = {
    "min_factor": Param(Float, doc="Minimum factor."),
    "max_factor": Param(Float, doc="Maximum factor."),
}


class _RandomAdjust(_ImageOp):
    """alpha ~ U(min_factor, max_factor) per image, then `adjust(img, alpha)`."""
    single_image = True
    is_random = True
    differentiable = False
    params = _FACTORS
    needs_rgb = True

    @staticmethod
    def adjust(img, alpha):
        raise NotImplementedError

    def one(self, attrs, img, rng):
        if self.needs_rgb:
            _check_rgb(self.name, img)
        alpha = _draw(rng, attrs["min_factor"], attrs["max_factor"])
        return _as_input_dtype(type(self).adjust(img.astype(np.float32), alpha), img)


@register("_image_random_brightness")
class RandomBrightness(_RandomAdjust):
    """x * alpha."""
    needs_rgb = False
    adjust = staticmethod(K.adjust_brightness)


@register("_image_random_contrast")
class RandomContrast(_RandomAdjust):
    """alpha * x + (1 - alpha) * mean luma (one channel: its mean)."""
    needs_rgb = False
    adjust = staticmethod(_adjust_contrast)


@register("_image_random_saturation")
class RandomSaturation(_RandomAdjust):
    """alpha * x + (1 - alpha) * luma (one channel: unchanged)."""
    needs_rgb = False
    adjust = staticmethod(K.adjust_saturation_op)


@register("_image_random_hue")
class RandomHue(_RandomAdjust):
    """Hue turned by alpha of a full circle."""
    adjust = staticmethod(K.adjust_hue)


@register("_image_random_color_jitter")
class RandomColorJitter(_ImageOp):
    """Brightness, contrast, saturation and hue jitters (those > 0), in that order."""
    single_image = True
    is_random = True
    differentiable = False
    params = {
        "brightness": Param(Float, doc="How much to jitter brightness."),
        "contrast": Param(Float, doc="How much to jitter contrast."),
        "saturation": Param(Float, doc="How much to jitter saturation."),
        "hue": Param(Float, doc="How much to jitter hue."),
    }

    def one(self, attrs, img, rng):
        if attrs["hue"] > 0:
            _check_rgb(self.name, img)
        for key, fn in (("brightness", K.adjust_brightness), ("contrast", _adjust_contrast),
                        ("saturation", K.adjust_saturation_op)):
            if attrs[key] > 0:        # each step stored in the image's dtype, as MXNet's
                img = _as_input_dtype(fn(img.astype(np.float32), 1 + rng.uniform(-attrs[key], attrs[key])), img)
        if attrs["hue"] > 0:
            img = _as_input_dtype(K.adjust_hue(img.astype(np.float32), rng.uniform(-attrs["hue"], attrs["hue"])), img)
        return img


def _lit(img: np.ndarray, alpha) -> np.ndarray:
    return _as_input_dtype(img + K.lighting_offset(alpha), img)


@register("_image_adjust_lighting")
class AdjustLighting(_ImageOp):
    """Adds eigvec @ (alpha * eigval) to every RGB pixel."""
    single_image = True
    params = {"alpha": Param(FloatTuple, doc="The lighting alphas for the R, G, B channels.")}
    kernel = "elementwise"

    def one(self, attrs, img, rng):
        _check_rgb(self.name, img)
        if len(attrs["alpha"]) != 3:
            raise _err(self.name, f"alpha must have 3 elements, got {attrs['alpha']}")
        return _lit(img, attrs["alpha"])

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.identity(ograds[0])]


@register("_image_random_lighting")
class RandomLighting(_ImageOp):
    """adjust_lighting with alpha ~ N(0, alpha_std) per image."""
    single_image = True
    is_random = True
    differentiable = False
    params = {"alpha_std": Param(Float, 0.05, "Level of the lighting noise.")}

    def one(self, attrs, img, rng):
        _check_rgb(self.name, img)
        return _lit(img, rng.normal(0, attrs["alpha_std"], 3))
