"""Numpy-level image kernels shared by the `_image_*` operators, `mx.image`, `mx.io`'s image
iterators and `gluon.data.vision`: decoding, resizing, border padding and the colour
adjustments (brightness, contrast, saturation, hue, PCA lighting).

Images are HxWxC numpy arrays (C = 1 or 3; a 2-D array is HxW). JPEG is decoded with
simplejpeg (libjpeg-turbo), everything else with OpenCV; resizing and padding use OpenCV, as
MXNet's `_cvimdecode` / `_cvimresize` / `_cvcopyMakeBorder` do, so interpolation codes are
OpenCV's: 0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 Lanczos
(benchmarks/bench_decode.py measures the choice). OpenCV and simplejpeg are imported on first
use, so loading the operator registry does not load them.
"""
from __future__ import annotations

import functools

import numpy as np

from ..base import MXNetError

__all__ = ["decode", "resize", "make_border", "check_interp", "opencv", "INTERP_CODES", "GRAY_COEF",
           "IMAGENET_EIGVAL", "IMAGENET_EIGVEC", "adjust_brightness", "adjust_contrast",
           "adjust_saturation", "adjust_saturation_op", "adjust_hue", "lighting_offset"]

#: the interpolation codes OpenCV (and so MXNet) accepts
INTERP_CODES = (0, 1, 2, 3, 4)
_JPEG_MAGIC = b"\xff\xd8"
_RESIZABLE = (np.uint8, np.uint16, np.int16, np.float32, np.float64)


@functools.lru_cache(maxsize=None)
def opencv():
    """The cv2 module, imported (single-threaded) on first use."""
    import cv2
    cv2.setNumThreads(1)   # one image per call; data loaders parallelize across images
    return cv2


def _decode_jpeg(buf: bytes, flag: int, to_rgb: bool):
    """simplejpeg's decode, or None when it cannot (OpenCV then tries)."""
    import simplejpeg
    space = "GRAY" if flag == 0 else ("RGB" if to_rgb else "BGR")
    try:
        return simplejpeg.decode_jpeg(buf, colorspace=space)
    except (ValueError, RuntimeError):
        return None


def decode(buf, flag: int = 1, to_rgb: bool = True) -> np.ndarray:
    """Decode encoded image bytes to a uint8 HxWxC array.

    flag 1: colour (C = 3), 0: grayscale (C = 1), -1: the file's own channels (and depth);
    to_rgb: colour channels in RGB order (else OpenCV's BGR). Undecodable bytes raise
    MXNetError."""
    if flag not in (-1, 0, 1):
        raise MXNetError(f"imdecode: flag must be -1, 0 or 1, got {flag}")
    data = bytes(buf) if not isinstance(buf, bytes) else buf
    if not data:
        raise MXNetError("imdecode: the image buffer is empty")
    img = _decode_jpeg(data, flag, to_rgb) if data[:2] == _JPEG_MAGIC and flag != -1 else None
    if img is None:
        cv2 = opencv()
        mode = {1: cv2.IMREAD_COLOR, 0: cv2.IMREAD_GRAYSCALE, -1: cv2.IMREAD_UNCHANGED}[flag]
        img = cv2.imdecode(np.frombuffer(data, np.uint8), mode)
        if img is None:
            raise MXNetError("imdecode: Decoding failed. Invalid image file.")
        if img.ndim == 2:
            img = img[:, :, None]
        elif to_rgb and img.shape[2] >= 3:
            img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB if img.shape[2] == 3 else cv2.COLOR_BGRA2RGBA)
    return np.ascontiguousarray(img)


def check_interp(interp: int) -> int:
    """`interp` as an OpenCV code, ValueError for others."""
    if int(interp) not in INTERP_CODES:
        raise ValueError(f"Unknown interp method {interp}: expected one of {INTERP_CODES}")
    return int(interp)


def resize(img: np.ndarray, w: int, h: int, interp: int = 1) -> np.ndarray:
    """`img` (HxW or HxWxC) resized to width `w`, height `h`, keeping its rank and dtype."""
    if int(w) <= 0 or int(h) <= 0:
        raise MXNetError(f"imresize: target size must be positive, got (w={w}, h={h})")
    if img.ndim not in (2, 3) or 0 in img.shape[:2]:
        raise MXNetError(f"imresize: expected an HxW or HxWxC image, got shape {img.shape}")
    interp = check_interp(interp)
    cv2 = opencv()
    src = img if img.dtype.type in _RESIZABLE else img.astype(np.float32)
    out = cv2.resize(np.ascontiguousarray(src), (int(w), int(h)), interpolation=interp)
    if img.ndim == 3 and out.ndim == 2:
        out = out[:, :, None]
    return out if out.dtype == img.dtype else out.astype(img.dtype)


def make_border(img: np.ndarray, top: int, bot: int, left: int, right: int, border_type: int = 0,
                value=0.0) -> np.ndarray:
    """`img` padded by OpenCV's copyMakeBorder (type 0 constant `value`, 1 replicate, 2
    reflect, 3 wrap, 4 reflect-101); `value` is a number or per-channel sequence."""
    if min(top, bot, left, right) < 0:
        raise MXNetError(f"copyMakeBorder: padding must be non-negative, got {(top, bot, left, right)}")
    if border_type not in (0, 1, 2, 3, 4):
        raise MXNetError(f"copyMakeBorder: type must be 0-4, got {border_type}")
    vals = list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value] * 4
    out = opencv().copyMakeBorder(np.ascontiguousarray(img), int(top), int(bot), int(left), int(right),
                             border_type, value=[float(v) for v in vals])
    if img.ndim == 3 and out.ndim == 2:
        out = out[:, :, None]
    return out


#: ITU-R BT.601 luma weights of R, G, B (contrast and saturation adjustments)
GRAY_COEF = np.array([0.299, 0.587, 0.114], dtype=np.float32)
#: ImageNet's RGB eigenvalues / eigenvectors (AlexNet-style PCA lighting noise)
IMAGENET_EIGVAL = np.array([55.46, 4.794, 1.148])
IMAGENET_EIGVEC = np.array([[-0.5675, 0.7192, 0.4009],
                            [-0.5808, -0.0045, -0.8140],
                            [-0.5836, -0.6948, 0.4203]])


def _like(out: np.ndarray, img: np.ndarray) -> np.ndarray:
    """`out` in `img`'s dtype: integer images are rounded and saturated (OpenCV's
    saturate_cast), float images keep their values."""
    if np.issubdtype(img.dtype, np.integer):
        info = np.iinfo(img.dtype)
        return np.clip(np.rint(out), info.min, info.max).astype(img.dtype)
    return out.astype(img.dtype, copy=False)


def adjust_brightness(img: np.ndarray, alpha: float) -> np.ndarray:
    """img * alpha."""
    return _like(img * np.float32(alpha), img)


def adjust_contrast(img: np.ndarray, alpha: float, coef: np.ndarray = GRAY_COEF) -> np.ndarray:
    """alpha * img + (1 - alpha) * the image's mean luma (HxWx3 RGB; `coef` weighs the channels)."""
    gray_mean = np.sum(img * coef, dtype=np.float64) / (img.shape[0] * img.shape[1])
    return _like(img * np.float32(alpha) + np.float32((1 - alpha) * gray_mean), img)


def adjust_saturation(img: np.ndarray, alpha: float, coef: np.ndarray = GRAY_COEF) -> np.ndarray:
    """alpha * img + (1 - alpha) * each pixel's luma (HxWx3 RGB; `coef` weighs the channels)."""
    gray = np.sum(img * coef, axis=2, keepdims=True, dtype=np.float32)
    return _like(img * np.float32(alpha) + gray * np.float32(1 - alpha), img)


def adjust_saturation_op(img: np.ndarray, alpha: float) -> np.ndarray:
    """The saturation kernel of MXNet's `_image_random_saturation` and
    `_image_random_color_jitter` operators: alpha * img + (1 - alpha) * grey, where its C++ loop
    assigns (instead of summing) the weighted channels, so grey is 0.114 * the third channel
    (mx.image's SaturationJitterAug uses the true luma: `adjust_saturation`). An image with
    one channel is returned unchanged."""
    if img.shape[-1] != 3:
        return img
    gray = img[..., 2:3].astype(np.float32) * np.float32(GRAY_COEF[2])
    return _like(img * np.float32(alpha) + gray * np.float32(1 - alpha), img)


def _rgb_to_hls(rgb: np.ndarray):
    """h in degrees [0, 360), l and s in [0, 1] of float RGB values in [0, 1]."""
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    vmax, vmin = rgb.max(-1), rgb.min(-1)
    diff = vmax - vmin
    l = (vmax + vmin) / 2
    denom = np.where(l < 0.5, vmax + vmin, 2 - vmax - vmin)
    s = np.where(diff == 0, 0, diff / np.where(denom == 0, 1, denom))
    safe = np.where(diff == 0, 1, diff)
    h = np.where(vmax == r, (g - b) / safe, np.where(vmax == g, 2 + (b - r) / safe, 4 + (r - g) / safe))
    h = np.where(diff == 0, 0, h * 60) % 360
    return h, l, s


def _hls_to_rgb(h, l, s):
    """Inverse of _rgb_to_hls."""
    c = (1 - np.abs(2 * l - 1)) * s
    hp = (h % 360) / 60
    x = c * (1 - np.abs(hp % 2 - 1))
    zero = np.zeros_like(c)
    sector = np.floor(hp).astype(int) % 6
    choices_r = [c, x, zero, zero, x, c]
    choices_g = [x, c, c, x, zero, zero]
    choices_b = [zero, zero, x, c, c, x]
    m = l - c / 2
    rgb = [np.choose(sector, ch) + m for ch in (choices_r, choices_g, choices_b)]
    return np.stack(rgb, -1)


def adjust_hue(img: np.ndarray, alpha: float) -> np.ndarray:
    """The hue rotated by alpha of a full turn (HxWx3 RGB, values in [0, 255]); |alpha| < 1e-3
    leaves the image unchanged."""
    if abs(alpha) < 1e-3:
        return img.copy()
    h, l, s = _rgb_to_hls(img.astype(np.float64) / 255.0)
    return _like(_hls_to_rgb(h + alpha * 360.0, l, s) * 255.0, img)


def lighting_offset(alpha) -> np.ndarray:
    """The RGB offset eigvec @ (alpha * eigval) of PCA lighting noise with weights `alpha`."""
    return np.dot(IMAGENET_EIGVEC * np.asarray(alpha, np.float64), IMAGENET_EIGVAL).astype(np.float32)
