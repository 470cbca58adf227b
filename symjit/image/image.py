"""`mx.image`: image functions, augmenters and ImageIter with MXNet 1.9.1's names, defaults and
randomness (Python's `random` for crops and jitters, numpy's global RNG for lighting noise, so
`random.seed` / `np.random.seed` make a pipeline reproducible, as in MXNet).

Images are HxWxC NDArrays (uint8 after decoding, RGB unless `to_rgb=0`); augmenters take and
return such NDArrays. Sizes are given as (width, height), as MXNet does.
"""
from __future__ import annotations

import json
import logging
import numbers
import os
import random
import warnings

import numpy as np

from .. import io as _io
from .. import recordio
from ..base import MXNetError
from ..ops import image_kernels as codec

__all__ = ["imread", "imdecode", "imresize", "scale_down", "copyMakeBorder", "resize_short",
           "fixed_crop", "random_crop", "center_crop", "color_normalize", "random_size_crop",
           "imrotate", "random_rotate",
           "Augmenter", "SequentialAug", "ResizeAug", "ForceResizeAug", "RandomCropAug",
           "RandomSizedCropAug", "CenterCropAug", "RandomOrderAug", "BrightnessJitterAug",
           "ContrastJitterAug", "SaturationJitterAug", "HueJitterAug", "ColorJitterAug", "LightingAug",
           "ColorNormalizeAug", "RandomGrayAug", "HorizontalFlipAug", "CastAug", "CreateAugmenter",
           "ImageIter"]

#: ImageNet's RGB mean and std (CreateAugmenter's mean=True / std=True)
IMAGENET_MEAN = (123.68, 116.28, 103.53)
IMAGENET_STD = (58.395, 57.12, 57.375)
IMAGENET_EIGVAL = codec.IMAGENET_EIGVAL
IMAGENET_EIGVEC = codec.IMAGENET_EIGVEC


def _np(src) -> np.ndarray:
    """numpy view of an NDArray or array-like image."""
    return src.asnumpy() if hasattr(src, "asnumpy") else np.asarray(src)


def _nd(arr: np.ndarray):
    """A CPU NDArray holding `arr` (its dtype kept)."""
    from ..context import cpu
    from ..ndarray.ndarray import NDArray
    return NDArray(np.ascontiguousarray(arr), cpu())


def _hwc(src, what: str) -> np.ndarray:
    img = _np(src)
    if img.ndim != 3:
        raise MXNetError(f"{what}: expected an image of shape (height, width, channels), got {img.shape}")
    return img


# ---- decoding and resizing -------------------------------------------------------------------

def imdecode(buf, flag=1, to_rgb=1, out=None):
    """Decode an encoded image (bytes, bytearray, uint8 numpy array or NDArray) to an HxWxC uint8
    NDArray: `flag` 1 colour, 0 grayscale (C = 1); `to_rgb` 1 RGB, 0 BGR (OpenCV's order)."""
    if hasattr(buf, "asnumpy"):
        buf = buf.asnumpy().astype(np.uint8).tobytes()
    elif isinstance(buf, np.ndarray):
        buf = buf.astype(np.uint8, copy=False).tobytes()
    elif not isinstance(buf, (bytes, bytearray, memoryview)):
        raise ValueError("buf must be of type bytes, bytearray or numpy.ndarray, if you would like "
                         "to input type str, please convert to bytes")
    img = _nd(codec.decode(bytes(buf), int(flag), bool(to_rgb)))
    if out is not None:
        out[:] = img
        return out
    return img


def imread(filename, flag=1, to_rgb=1, out=None):
    """Read and decode the image file `filename` (see `imdecode`)."""
    try:
        with open(filename, "rb") as fin:
            data = fin.read()
    except OSError as err:
        raise MXNetError(f"imread: cannot open {filename!r}: {err}") from err
    return imdecode(data, flag, to_rgb, out)


def imresize(src, w, h, interp=1, out=None):
    """`src` (HxWxC) resized to width `w` and height `h` with OpenCV interpolation `interp`
    (0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 Lanczos)."""
    img = _nd(codec.resize(_hwc(src, "imresize"), w, h, interp))
    if out is not None:
        out[:] = img
        return out
    return img


def copyMakeBorder(src, top, bot, left, right, type=0, value=0.0, values=(), out=None):  # noqa: A002
    """`src` padded by `top`, `bot`, `left`, `right` pixels (OpenCV border `type`; constant
    borders are `values` per channel if given, else `value`)."""
    img = _nd(codec.make_border(_hwc(src, "copyMakeBorder"), top, bot, left, right, type,
                                list(values) if len(values) else value))
    if out is not None:
        out[:] = img
        return out
    return img


def scale_down(src_size, size):
    """`size` (w, h) shrunk, keeping its aspect ratio, to fit in `src_size` (w, h)."""
    w, h = size
    sw, sh = src_size
    if sh < h:
        w, h = float(w * sh) / h, sh
    if sw < w:
        w, h = sw, float(h * sw) / w
    return int(w), int(h)


def _get_interp_method(interp, sizes=()):
    """The OpenCV code for `interp`: 9 picks area for shrinking and bicubic for enlarging
    (bilinear otherwise; sizes = (old h, old w, new h, new w)), 10 a random code."""
    if interp == 9:
        if not sizes:
            return 2
        oh, ow, nh, nw = sizes
        if nh > oh and nw > ow:
            return 2
        if nh < oh and nw < ow:
            return 3
        return 1
    if interp == 10:
        return random.randint(0, 4)
    return codec.check_interp(interp)


def resize_short(src, size, interp=2):
    """`src` resized so that its shorter edge is `size`, keeping the aspect ratio."""
    h, w, _ = _hwc(src, "resize_short").shape
    if h > w:
        new_h, new_w = size * h // w, size
    else:
        new_h, new_w = size, size * w // h
    return imresize(src, new_w, new_h, interp=_get_interp_method(interp, (h, w, new_h, new_w)))


def fixed_crop(src, x0, y0, w, h, size=None, interp=2):
    """The region (x0, y0, w, h) of `src`, resized to `size` (w, h) when given and different."""
    img = _hwc(src, "fixed_crop")
    out = img[y0:y0 + h, x0:x0 + w]
    if size is not None and (w, h) != tuple(size):
        sizes = (h, w, size[1], size[0])
        return _nd(codec.resize(out, size[0], size[1], _get_interp_method(interp, sizes)))
    return _nd(out)


def random_crop(src, size, interp=2):
    """A random region of `src` of `size` (w, h) (scaled down to fit), resized to `size`.
    Returns (image, (x0, y0, w, h))."""
    h, w, _ = _hwc(src, "random_crop").shape
    new_w, new_h = scale_down((w, h), size)
    x0 = random.randint(0, w - new_w)
    y0 = random.randint(0, h - new_h)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def center_crop(src, size, interp=2):
    """The central region of `src` of `size` (w, h) (scaled down to fit), resized to `size`.
    Returns (image, (x0, y0, w, h))."""
    h, w, _ = _hwc(src, "center_crop").shape
    new_w, new_h = scale_down((w, h), size)
    x0 = int((w - new_w) / 2)
    y0 = int((h - new_h) / 2)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def color_normalize(src, mean, std=None):
    """(src - mean) / std, broadcasting per-channel `mean` and `std` (std None: no scaling).
    As MXNet's, a floating-point NDArray `src` is normalized in place and returned (other
    inputs give a new float32 array)."""
    arr = _np(src)
    floating = np.issubdtype(arr.dtype, np.floating)
    out = arr if floating else arr.astype(np.float32)
    if mean is not None:
        out = out - np.asarray(_np(mean), dtype=out.dtype)
    if std is not None:
        out = out / np.asarray(_np(std), dtype=out.dtype)
    if floating and hasattr(src, "asnumpy"):
        src[:] = out
        return src
    return _nd(out)


def random_size_crop(src, size, area, ratio, interp=2, **kwargs):
    """A random region covering a fraction `area` (a number: [area, 1]; or (min, max)) of `src`
    with aspect ratio drawn log-uniformly from `ratio`, resized to `size`; after 10 failed
    draws the center crop. Returns (image, (x0, y0, w, h))."""
    h, w, _ = _hwc(src, "random_size_crop").shape
    src_area = h * w
    if "min_area" in kwargs:
        warnings.warn("`min_area` is deprecated. Please use `area` instead.", DeprecationWarning)
        area = kwargs.pop("min_area")
    if kwargs:
        raise TypeError(f"unexpected keyword arguments for `random_size_crop`: {sorted(kwargs)}")
    if isinstance(area, numbers.Number):
        area = (area, 1.0)
    for _ in range(10):
        target_area = random.uniform(area[0], area[1]) * src_area
        log_ratio = (np.log(ratio[0]), np.log(ratio[1]))
        new_ratio = np.exp(random.uniform(*log_ratio))
        new_w = int(round(np.sqrt(target_area * new_ratio)))
        new_h = int(round(np.sqrt(target_area / new_ratio)))
        if new_w <= w and new_h <= h:
            x0 = random.randint(0, w - new_w)
            y0 = random.randint(0, h - new_h)
            return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)
    return center_crop(src, size, interp)


def _bilinear_sample(img: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """img (C, H, W) sampled at pixel coordinates (xs, ys) (each (H', W')) bilinearly, zero
    outside the image (BilinearSampler's convention)."""
    c, h, w = img.shape
    x0, y0 = np.floor(xs).astype(np.int64), np.floor(ys).astype(np.int64)
    out = np.zeros((c,) + xs.shape, np.float32)
    for dy in (0, 1):
        for dx in (0, 1):
            xi, yi = x0 + dx, y0 + dy
            wgt = (1 - np.abs(xs - xi)) * (1 - np.abs(ys - yi))
            inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
            vals = img[:, np.clip(yi, 0, h - 1), np.clip(xi, 0, w - 1)]
            out += np.where(inside, wgt, 0).astype(np.float32) * vals
    return out


def _rotation_scale(h: int, w: int, rad: float, zoom_in: bool, zoom_out: bool) -> float:
    """The sampling-grid scale that keeps the rotated image free of padding (zoom_in) or
    entirely visible (zoom_out); 1 otherwise."""
    if not (zoom_in or zoom_out):
        return 1.0
    rho, ang = np.hypot(h, w), np.arctan(h / w)
    max_x = max(abs(rho * np.cos(ang + abs(rad))), abs(rho * np.cos(ang - abs(rad))))
    max_y = max(abs(rho * np.sin(ang + abs(rad))), abs(rho * np.sin(ang - abs(rad))))
    if zoom_out:
        return max(max_x / w, max_y / h)
    return min(w / max_x, h / max_y)


def imrotate(src, rotation_degrees, zoom_in=False, zoom_out=False):
    """Rotate float32 CHW images (or an NCHW batch, with one angle or one per image) by
    `rotation_degrees` about their centre, keeping the shape; uncovered pixels are 0.
    `zoom_in` scales so no padding shows, `zoom_out` so the whole image stays visible."""
    if zoom_in and zoom_out:
        raise ValueError("`zoom_in` and `zoom_out` cannot be both True")
    img = _np(src)
    if img.dtype != np.float32:
        raise TypeError("Only `float32` images are supported by this function")
    if img.ndim == 3:
        if not isinstance(rotation_degrees, numbers.Number):
            raise TypeError("When a single image is passed the rotation angle is required to be a scalar.")
        return _nd(_rotate_one(img, float(rotation_degrees), zoom_in, zoom_out))
    if img.ndim != 4:
        raise ValueError("Only 3D and 4D are supported by this function")
    angles = np.broadcast_to(np.asarray(_np(rotation_degrees), np.float64).reshape(-1), (len(img),)) \
        if np.size(_np(rotation_degrees)) in (1, len(img)) else None
    if angles is None:
        raise ValueError("The number of images must be equal to the number of rotation angles")
    return _nd(np.stack([_rotate_one(i, a, zoom_in, zoom_out) for i, a in zip(img, angles)]))


def _rotate_one(img: np.ndarray, degrees: float, zoom_in: bool, zoom_out: bool) -> np.ndarray:
    _, h, w = img.shape
    rad = np.pi * degrees / 180
    hc, wc = (h - 1) / 2, (w - 1) / 2
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    scale = _rotation_scale(h, w, rad, zoom_in, zoom_out)
    xr = ((xx - wc) * np.cos(rad) - (yy - hc) * np.sin(rad)) * scale + wc
    yr = ((xx - wc) * np.sin(rad) + (yy - hc) * np.cos(rad)) * scale + hc
    return _bilinear_sample(img, xr, yr)


def random_rotate(src, angle_limits, zoom_in=False, zoom_out=False):
    """imrotate by an angle drawn uniformly from `angle_limits` (numpy's global RNG; one angle
    per image of a batch)."""
    img = _np(src)
    if img.ndim == 3:
        angle = np.random.uniform(*angle_limits)
    else:
        angle = np.random.uniform(*angle_limits, size=len(img))
    return imrotate(src, angle, zoom_in, zoom_out)


# ---- augmenters ------------------------------------------------------------------------------

class Augmenter:
    """Image augmenter base class: `aug(src)` returns the augmented HxWxC NDArray; `dumps()` is
    the JSON [lower-case class name, constructor arguments]."""

    def __init__(self, **kwargs):
        self._kwargs = {k: (_np(v).tolist() if hasattr(v, "asnumpy") or isinstance(v, np.ndarray) else v)
                        for k, v in kwargs.items()}

    def dumps(self):
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])

    def __call__(self, src):
        raise NotImplementedError("Must override implementation.")


class SequentialAug(Augmenter):
    """Applies the augmenters `ts` in order."""

    def __init__(self, ts):
        super().__init__()
        self.ts = ts

    def dumps(self):
        return [self.__class__.__name__.lower(), [x.dumps() for x in self.ts]]

    def __call__(self, src):
        for aug in self.ts:
            src = aug(src)
        return src


class _SizedAug(Augmenter):
    """An augmenter with a target `size` and an interpolation code `interp`."""

    def __init__(self, size, interp=2):
        super().__init__(size=size, interp=interp)
        self.size = size
        self.interp = interp


class ResizeAug(_SizedAug):
    """Resizes the shorter edge to `size`."""

    def __call__(self, src):
        return resize_short(src, self.size, self.interp)


class ForceResizeAug(_SizedAug):
    """Resizes to `size` (w, h) regardless of the aspect ratio."""

    def __call__(self, src):
        img = _hwc(src, "ForceResizeAug")
        sizes = (img.shape[0], img.shape[1], self.size[1], self.size[0])
        return imresize(img, *self.size, interp=_get_interp_method(self.interp, sizes))


class RandomCropAug(_SizedAug):
    """A random crop of `size` (w, h)."""

    def __call__(self, src):
        return random_crop(src, self.size, self.interp)[0]


class RandomSizedCropAug(Augmenter):
    """A random crop of random area fraction and aspect ratio, resized to `size`
    (see `random_size_crop`)."""

    def __init__(self, size, area, ratio, interp=2, **kwargs):
        super().__init__(size=size, area=area, ratio=ratio, interp=interp)
        self.size = size
        if "min_area" in kwargs:
            warnings.warn("`min_area` is deprecated. Please use `area` instead.", DeprecationWarning)
            area = kwargs.pop("min_area")
        if kwargs:
            raise TypeError(f"unexpected keyword arguments for `RandomSizedCropAug`: {sorted(kwargs)}")
        self.area = area
        self.ratio = ratio
        self.interp = interp

    def __call__(self, src):
        return random_size_crop(src, self.size, self.area, self.ratio, self.interp)[0]


class CenterCropAug(_SizedAug):
    """The center crop of `size` (w, h)."""

    def __call__(self, src):
        return center_crop(src, self.size, self.interp)[0]


class RandomOrderAug(SequentialAug):
    """Applies the augmenters `ts` in a random order."""

    def __call__(self, src):
        random.shuffle(self.ts)
        return super().__call__(src)


class _FactorJitterAug(Augmenter):
    """src -> `_kernel(src, alpha)` with alpha = 1 + U(-v, v), v the one constructor argument."""
    _kernel = None

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        ((name, value),) = kwargs.items()
        setattr(self, name, value)
        self._value = value

    def __call__(self, src):
        alpha = 1.0 + random.uniform(-self._value, self._value)
        return _nd(type(self)._kernel(_np(src), alpha))


class BrightnessJitterAug(_FactorJitterAug):
    """Multiplies by 1 + U(-brightness, brightness)."""
    _kernel = staticmethod(codec.adjust_brightness)

    def __init__(self, brightness):
        super().__init__(brightness=brightness)


class ContrastJitterAug(_FactorJitterAug):
    """Blends with the image's mean gray level: alpha * src + (1 - alpha) * mean luma, alpha =
    1 + U(-contrast, contrast)."""
    _kernel = staticmethod(codec.adjust_contrast)

    def __init__(self, contrast):
        super().__init__(contrast=contrast)


class SaturationJitterAug(_FactorJitterAug):
    """Blends each pixel with its luma: alpha * src + (1 - alpha) * luma, alpha =
    1 + U(-saturation, saturation)."""
    _kernel = staticmethod(codec.adjust_saturation)

    def __init__(self, saturation):
        super().__init__(saturation=saturation)


#: RGB -> YIQ and YIQ -> RGB (HueJitterAug rotates the IQ plane)
_TYIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
_ITYIQ = np.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647], [1.0, -1.107, 1.705]])


def hue_matrix(alpha: float) -> np.ndarray:
    """The 3x3 matrix M with rgb_out = rgb_in @ M rotating hue by alpha * pi (in YIQ space)."""
    u, w = np.cos(alpha * np.pi), np.sin(alpha * np.pi)
    bt = np.array([[1.0, 0.0, 0.0], [0.0, u, -w], [0.0, w, u]])
    return np.dot(np.dot(_ITYIQ, bt), _TYIQ).T


class HueJitterAug(Augmenter):
    """Rotates the hue by U(-hue, hue) * pi in YIQ space."""

    def __init__(self, hue):
        super().__init__(hue=hue)
        self.hue = hue
        self.tyiq = _TYIQ
        self.ityiq = _ITYIQ

    def __call__(self, src):
        img = _hwc(src, "HueJitterAug")
        alpha = random.uniform(-self.hue, self.hue)
        return _nd(np.dot(img, hue_matrix(alpha).astype(np.float32)).astype(np.result_type(img.dtype, np.float32)))


class ColorJitterAug(RandomOrderAug):
    """Brightness, contrast and saturation jitters (those > 0) in a random order."""

    def __init__(self, brightness, contrast, saturation):
        ts = []
        if brightness > 0:
            ts.append(BrightnessJitterAug(brightness))
        if contrast > 0:
            ts.append(ContrastJitterAug(contrast))
        if saturation > 0:
            ts.append(SaturationJitterAug(saturation))
        super().__init__(ts)


class LightingAug(Augmenter):
    """AlexNet-style PCA lighting noise: adds eigvec @ (alpha * eigval), alpha ~ N(0, alphastd)
    per component (numpy's global RNG)."""

    def __init__(self, alphastd, eigval, eigvec):
        super().__init__(alphastd=alphastd, eigval=eigval, eigvec=eigvec)
        self.alphastd = alphastd
        self.eigval = np.asarray(eigval)
        self.eigvec = np.asarray(eigvec)

    def __call__(self, src):
        img = _np(src)
        alpha = np.random.normal(0, self.alphastd, size=(3,))
        rgb = np.dot(self.eigvec * alpha, self.eigval)
        return _nd((img + rgb.astype(np.float32)).astype(img.dtype, copy=False))


class ColorNormalizeAug(Augmenter):
    """(src - mean) / std per channel."""

    def __init__(self, mean, std):
        super().__init__(mean=mean, std=std)
        self.mean = None if mean is None else np.asarray(_np(mean), dtype=np.float32)
        self.std = None if std is None else np.asarray(_np(std), dtype=np.float32)

    def __call__(self, src):
        return color_normalize(src, self.mean, self.std)


class RandomGrayAug(Augmenter):
    """With probability `p`, replaces each channel by the gray level
    0.21 R + 0.72 G + 0.07 B."""

    def __init__(self, p):
        super().__init__(p=p)
        self.p = p
        self.mat = np.array([[0.21, 0.21, 0.21], [0.72, 0.72, 0.72], [0.07, 0.07, 0.07]], np.float32)

    def __call__(self, src):
        if random.random() < self.p:
            img = _hwc(src, "RandomGrayAug")
            return _nd(np.dot(img, self.mat).astype(np.result_type(img.dtype, np.float32)))
        return src


class HorizontalFlipAug(Augmenter):
    """Flips left-right with probability `p`."""

    def __init__(self, p):
        super().__init__(p=p)
        self.p = p

    def __call__(self, src):
        if random.random() < self.p:
            return _nd(_hwc(src, "HorizontalFlipAug")[:, ::-1])
        return src


class CastAug(Augmenter):
    """Casts to `typ` (float32 by default)."""

    def __init__(self, typ="float32"):
        super().__init__(type=typ)
        self.typ = typ

    def __call__(self, src):
        return _nd(_np(src).astype(self.typ))


def _channel_stats(value, default, what: str):
    """CreateAugmenter's mean/std argument: True -> `default`, None, or a 1- or 3-element array."""
    if value is True:
        return np.array(default, dtype=np.float32)
    if value is None or value is False:
        return None
    arr = _np(value)
    if not isinstance(value, np.ndarray) and not hasattr(value, "asnumpy"):
        raise AssertionError(f"CreateAugmenter: {what} must be True, None, a numpy array or an NDArray")
    if arr.shape[0] not in (1, 3):
        raise AssertionError(f"CreateAugmenter: {what} must have 1 or 3 elements, got shape {arr.shape}")
    return arr


def CreateAugmenter(data_shape, resize=0, rand_crop=False, rand_resize=False, rand_mirror=False,
                    mean=None, std=None, brightness=0, contrast=0, saturation=0, hue=0, pca_noise=0,
                    rand_gray=0, inter_method=2):
    """MXNet's standard augmenter list for images of `data_shape` (C, H, W): optional short-edge
    resize, a random (sized) or center crop, random mirror, cast to float32, colour jitter, hue
    jitter, PCA lighting noise, random gray and mean/std normalization."""
    auglist = []
    if resize > 0:
        auglist.append(ResizeAug(resize, inter_method))
    crop_size = (data_shape[2], data_shape[1])
    if rand_resize:
        if not rand_crop:
            raise AssertionError("CreateAugmenter: rand_resize needs rand_crop")
        auglist.append(RandomSizedCropAug(crop_size, 0.08, (3.0 / 4.0, 4.0 / 3.0), inter_method))
    elif rand_crop:
        auglist.append(RandomCropAug(crop_size, inter_method))
    else:
        auglist.append(CenterCropAug(crop_size, inter_method))
    if rand_mirror:
        auglist.append(HorizontalFlipAug(0.5))
    auglist.append(CastAug())
    if brightness or contrast or saturation:
        auglist.append(ColorJitterAug(brightness, contrast, saturation))
    if hue:
        auglist.append(HueJitterAug(hue))
    if pca_noise > 0:
        auglist.append(LightingAug(pca_noise, IMAGENET_EIGVAL, IMAGENET_EIGVEC))
    if rand_gray > 0:
        auglist.append(RandomGrayAug(rand_gray))
    mean = _channel_stats(mean, IMAGENET_MEAN, "mean")
    std = _channel_stats(std, IMAGENET_STD, "std")
    if mean is not None or std is not None:
        auglist.append(ColorNormalizeAug(mean, std))
    return auglist


# ---- ImageIter -------------------------------------------------------------------------------

_LABEL_DTYPES = ("int32", "float32", "int64", "float64")


def read_image_list_file(path: str, dtype: str):
    """({key: (label array, relative path)}, [keys]) of a .lst file (index, labels..., path)."""
    imglist, keys = {}, []
    with open(path) as fin:
        for lineno, line in enumerate(fin, 1):
            fields = line.strip().split("\t")
            if len(fields) < 3:
                raise MXNetError(f"ImageIter: {path}:{lineno}: expected 'index<TAB>label(s)<TAB>path', "
                                 f"got {line.strip()!r}")
            key = int(fields[0])
            imglist[key] = (np.array([float(v) for v in fields[1:-1]], dtype=dtype), fields[-1])
            keys.append(key)
    return imglist, keys


def read_image_list(items, dtype: str):
    """({'1': (label, path), ...}, keys) of an in-memory list of [label(s)..., path] entries."""
    imglist, keys = {}, []
    for index, img in enumerate(items, 1):
        key = str(index)
        if len(img) > 2:
            label = np.array(img[:-1], dtype=dtype)
        elif isinstance(img[0], numbers.Number):
            label = np.array([img[0]], dtype=dtype)
        else:
            label = np.array(_np(img[0]), dtype=dtype)
        imglist[key] = (label, img[-1])
        keys.append(key)
    return imglist, keys


class ImageIter(_io.DataIter):
    """Batches of decoded, augmented images from a RecordIO file (`path_imgrec`, with
    `path_imgidx` for shuffling or partitions), an image list file (`path_imglist`, paths
    relative to `path_root`) or an in-memory `imglist` ([label(s)..., path] entries).

    Data batches are (batch_size, C, H, W) float32, labels (batch_size,) or
    (batch_size, label_width). `last_batch_handle`: 'pad' fills the last batch from the start
    of the data (`pad` counts those), 'discard' drops it, 'roll_over' carries its samples into
    the first batch of the next epoch. Further keyword arguments go to `CreateAugmenter` when
    `aug_list` is None."""

    def __init__(self, batch_size, data_shape, label_width=1, path_imgrec=None, path_imglist=None,
                 path_root=None, path_imgidx=None, shuffle=False, part_index=0, num_parts=1,
                 aug_list=None, imglist=None, data_name="data", label_name="softmax_label",
                 dtype="float32", last_batch_handle="pad", **kwargs):
        super().__init__(batch_size)
        if not (path_imgrec or path_imglist or isinstance(imglist, list)):
            raise AssertionError("ImageIter: give path_imgrec, path_imglist or an imglist list")
        if dtype not in _LABEL_DTYPES:
            raise AssertionError(dtype + " label not supported")
        if last_batch_handle not in ("pad", "discard", "roll_over"):
            raise ValueError(f"ImageIter: last_batch_handle must be pad, discard or roll_over, "
                             f"got {last_batch_handle!r}")
        self.imgrec, self.imgidx = None, None
        if path_imgrec:
            if path_imgidx:
                self.imgrec = recordio.MXIndexedRecordIO(path_imgidx, path_imgrec, "r")
                self.imgidx = list(self.imgrec.keys)
            else:
                self.imgrec = recordio.MXRecordIO(path_imgrec, "r")
        imgkeys = None
        if path_imglist:
            self.imglist, imgkeys = read_image_list_file(path_imglist, dtype)
        elif isinstance(imglist, list):
            self.imglist, imgkeys = read_image_list(imglist, dtype)
        else:
            self.imglist = None
        self.path_root = path_root
        self.check_data_shape(data_shape)
        self.data_shape = tuple(data_shape)
        self.label_width = label_width
        self.provide_data = [_io.DataDesc(data_name, (batch_size,) + self.data_shape)]
        label_shape = (batch_size, label_width) if label_width > 1 else (batch_size,)
        self.provide_label = [_io.DataDesc(label_name, label_shape)]
        self.dtype = dtype
        self.shuffle = shuffle
        if self.imgrec is None:
            self.seq = imgkeys
        elif shuffle or num_parts > 1 or path_imgidx:
            if self.imgidx is None:
                raise AssertionError("ImageIter: shuffle and num_parts > 1 need path_imgidx")
            self.seq = self.imgidx
        else:
            self.seq = None
        if num_parts > 1:
            if not 0 <= part_index < num_parts:
                raise AssertionError(f"ImageIter: part_index {part_index} not in [0, {num_parts})")
            per_part = len(self.seq) // num_parts
            self.seq = self.seq[part_index * per_part:(part_index + 1) * per_part]
        self.auglist = CreateAugmenter(data_shape, **kwargs) if aug_list is None else aug_list
        self.cur = 0
        self._allow_read = True
        self.last_batch_handle = last_batch_handle
        self.num_image = len(self.seq) if self.seq is not None else None
        self._cache = None   # (data, label, count) of a rolled-over partial batch
        self.reset()

    def reset(self):
        """Rewind (reshuffling when `shuffle`); a rolled-over partial batch is kept."""
        if self.seq is not None and self.shuffle:
            random.shuffle(self.seq)
        if self.last_batch_handle != "roll_over" or self._cache is None:
            self._rewind()

    def hard_reset(self):
        """Rewind and drop any rolled-over samples."""
        if self.seq is not None and self.shuffle:
            random.shuffle(self.seq)
        self._cache = None
        self._rewind()

    def _rewind(self):
        if self.imgrec is not None:
            self.imgrec.reset()
        self.cur = 0
        self._allow_read = True

    def next_sample(self):
        """(label, encoded image bytes) of the next sample; StopIteration at the end of the data
        (after which reading starts over, except with 'discard')."""
        if not self._allow_read:
            raise StopIteration
        if self.seq is None:
            s = self.imgrec.read()
            if s is None:
                if self.last_batch_handle != "discard":
                    self.imgrec.reset()
                    self.cur = 0
                raise StopIteration
            self.cur += 1
            header, img = recordio.unpack(s)
            return header.label, img
        if self.cur >= self.num_image:
            if self.last_batch_handle != "discard":
                self.cur = 0
            raise StopIteration
        idx = self.seq[self.cur]
        self.cur += 1
        if self.imgrec is not None:
            header, img = recordio.unpack(self.imgrec.read_idx(idx))
            return (header.label if self.imglist is None else self.imglist[idx][0]), img
        label, fname = self.imglist[idx]
        return label, self.read_image(fname)

    def _batchify(self, data: np.ndarray, label: np.ndarray, start: int = 0) -> int:
        """Fill data[start:], label[start:] with samples; the number filled (StopIteration when
        nothing at all could be read). Samples whose `_prepare` raises RuntimeError are
        skipped."""
        i = start
        try:
            while i < self.batch_size:
                lab, s = self.next_sample()
                img = self.imdecode(s)
                try:
                    img, lab = self._prepare(img, lab)
                except RuntimeError as err:
                    logging.debug("Invalid image, skipping:  %s", err)
                    continue
                data[i] = _np(self.postprocess_data(img))
                self._store_label(label, i, lab)
                i += 1
        except StopIteration:
            if not i:
                raise
        return i

    def _prepare(self, img, label):
        """(augmented image, label) of a decoded sample; RuntimeError to skip it."""
        self.check_valid_image(img)
        return self.augmentation_transform(img), label

    @staticmethod
    def _store_label(batch_label: np.ndarray, i: int, label) -> None:
        batch_label[i] = np.reshape(_np(label), batch_label[i].shape)

    def next(self):
        c, h, w = self.data_shape
        if self._cache is not None:
            data, label, i = self._cache
        else:
            if not self._allow_read:
                raise StopIteration
            data = np.zeros((self.batch_size, c, h, w), np.float32)
            label = self._empty_label()
            i = self._batchify(data, label)
        pad = self.batch_size - i
        if pad:
            if self.last_batch_handle == "discard":
                raise StopIteration
            if self.last_batch_handle == "roll_over" and self._cache is None:
                self._cache = (data, label, i)
                raise StopIteration
            self._batchify(data, label, i)
            if self.last_batch_handle == "pad":
                self._allow_read = False
            else:
                self._cache = None
        return _io.DataBatch([_nd(data)], [_nd(label)], pad=pad)

    def _empty_label(self) -> np.ndarray:
        """The label buffer of a new batch."""
        return np.zeros(self.provide_label[0].shape, np.dtype(self.dtype))

    def check_data_shape(self, data_shape):
        """data_shape must be (3, H, W)."""
        if not len(data_shape) == 3:
            raise ValueError("data_shape should have length 3, with dimensions CxHxW")
        if not data_shape[0] == 3:
            raise ValueError("This iterator expects inputs to have 3 channels.")

    def check_valid_image(self, data):
        """RuntimeError for an empty decoded image."""
        if len(data[0].shape) == 0:
            raise RuntimeError("Data shape is wrong")

    def _locate(self) -> str:
        pos = (self.cur - 1) % self.num_image if self.num_image else self.cur - 1
        idx = self.seq[pos] if self.seq is not None else pos
        if self.imglist is not None:
            return f"Broken image filename: {self.imglist[idx][1]}"
        return f"Broken image index: {idx}"

    def imdecode(self, s):
        """Decode the sample bytes `s`; RuntimeError naming the sample when that fails."""
        try:
            return imdecode(s)
        except Exception as err:
            raise RuntimeError(f"{self._locate()}, {err}") from err

    def read_image(self, fname):
        """The bytes of the image file `fname` under `path_root`."""
        with open(os.path.join(self.path_root or "", fname), "rb") as fin:
            return fin.read()

    def augmentation_transform(self, data):
        """`data` passed through every augmenter."""
        for aug in self.auglist:
            data = aug(data)
        return data

    def postprocess_data(self, datum):
        """HxWxC -> CxHxW."""
        return _nd(np.transpose(_np(datum), (2, 0, 1)))
