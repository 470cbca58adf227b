"""Numpy-level image primitives shared by `mx.image`, `mx.io`'s image iterators, the
`_image_*` operators and `gluon.data.vision`: decoding, resizing and border padding.

Images are HxWxC numpy arrays (C = 1 or 3; a 2-D array is HxW). JPEG is decoded with
simplejpeg (libjpeg-turbo), everything else with OpenCV; resizing and padding use OpenCV, as
MXNet's `_cvimdecode` / `_cvimresize` / `_cvcopyMakeBorder` do, so interpolation codes are
OpenCV's: 0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 Lanczos
(benchmarks/bench_decode.py measures the choice).
"""
from __future__ import annotations

import cv2
import numpy as np

from ..base import MXNetError

__all__ = ["decode", "resize", "make_border", "INTERP_CODES"]

#: the interpolation codes OpenCV (and so MXNet) accepts
INTERP_CODES = (0, 1, 2, 3, 4)
_JPEG_MAGIC = b"\xff\xd8"
_RESIZABLE = (np.uint8, np.uint16, np.int16, np.float32, np.float64)

cv2.setNumThreads(1)   # one image per call; data loaders parallelize across images


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
    out = cv2.copyMakeBorder(np.ascontiguousarray(img), int(top), int(bot), int(left), int(right),
                             border_type, value=[float(v) for v in vals])
    if img.ndim == 3 and out.ndim == 2:
        out = out[:, :, None]
    return out
