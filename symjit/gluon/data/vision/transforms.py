"""Image transforms (MXNet 1.x `gluon.data.vision.transforms`), as Blocks applied to
(H, W, C) images or (N, H, W, C) batches."""
from __future__ import annotations

import numpy as np

from ...block import Block, HybridBlock
from ...nn import HybridSequential, Sequential

__all__ = ["Compose", "Cast", "ToTensor", "Normalize", "RandomFlipLeftRight", "RandomFlipTopBottom",
           "Resize", "CenterCrop"]


class Compose(Sequential):
    """Chains transforms; runs of consecutive HybridBlocks are grouped in a HybridSequential
    (hybridized as MXNet does, so they compile together)."""

    def __init__(self, transforms):
        super().__init__()
        transforms.append(None)
        hybrid = []
        for i in transforms:
            if isinstance(i, HybridBlock):
                hybrid.append(i)
                continue
            if len(hybrid) == 1:
                self.add(hybrid[0])
                hybrid = []
            elif len(hybrid) > 1:
                hblock = HybridSequential()
                for j in hybrid:
                    hblock.add(j)
                hblock.hybridize()
                self.add(hblock)
                hybrid = []
            if i is not None:
                if not isinstance(i, Block):
                    raise ValueError(f"Compose expects Blocks, got {type(i)}")
                self.add(i)
        transforms.pop()


class Cast(HybridBlock):
    """Casts the input to `dtype`."""

    def __init__(self, dtype="float32"):
        super().__init__()
        self._dtype = np.dtype(dtype).name

    def hybrid_forward(self, F, x):
        return F.cast(x, self._dtype)


class ToTensor(HybridBlock):
    """(H, W, C) or (N, H, W, C) uint8 images in [0, 255] -> float32 (C, H, W) / (N, C, H, W)
    in [0, 1)."""

    def __init__(self):
        super().__init__()

    def hybrid_forward(self, F, x):
        return F.image.to_tensor(x)


class Normalize(HybridBlock):
    """(x - mean[c]) / std[c] per channel of a (C, H, W) or (N, C, H, W) tensor."""

    def __init__(self, mean=0.0, std=1.0):
        super().__init__()
        self._mean = mean
        self._std = std

    def hybrid_forward(self, F, x):
        return F.image.normalize(x, self._mean, self._std)


class _RandomFlip(Block):
    """Flips an (H, W, C) image along `_axis` with probability 1/2 (draws from symjit's
    generator, so `mx.random.seed` makes it reproducible)."""

    _axis = 1

    def __init__(self):
        super().__init__()

    def forward(self, x):
        from .... import random as _random
        if _random.generator().random() < 0.5:
            return x.flip(axis=self._axis if x.ndim == 3 else self._axis + 1)
        return x.copy()


class RandomFlipLeftRight(_RandomFlip):
    """Randomly flips an image (H, W, C) or batch (N, H, W, C) left to right."""
    _axis = 1


class RandomFlipTopBottom(_RandomFlip):
    """Randomly flips an image (H, W, C) or batch (N, H, W, C) top to bottom."""
    _axis = 0


def _source_coords(out_len: int, in_len: int):
    """Lower source index and weight of the upper neighbour for each output pixel, with
    pixel centers aligned (OpenCV's INTER_LINEAR convention: src = (dst + 0.5) * scale - 0.5,
    clamped to the image)."""
    pos = (np.arange(out_len) + 0.5) * (in_len / out_len) - 0.5
    pos = np.clip(pos, 0, in_len - 1)
    lo = np.minimum(np.floor(pos).astype(np.int64), in_len - 1)
    return lo, np.minimum(lo + 1, in_len - 1), pos - lo


def imresize_bilinear(img: np.ndarray, w: int, h: int) -> np.ndarray:
    """Bilinear resize of an (H, W, C) array to (h, w, C); integer images are rounded and
    saturated to their dtype (values may differ from OpenCV's fixed-point result by 1)."""
    if w <= 0 or h <= 0:
        raise ValueError(f"resize: target size must be positive, got (w={w}, h={h})")
    y0, y1, fy = _source_coords(h, img.shape[0])
    x0, x1, fx = _source_coords(w, img.shape[1])
    src = img.astype(np.float64)
    top = src[y0][:, x0] * (1 - fx)[None, :, None] + src[y0][:, x1] * fx[None, :, None]
    bot = src[y1][:, x0] * (1 - fx)[None, :, None] + src[y1][:, x1] * fx[None, :, None]
    out = top * (1 - fy)[:, None, None] + bot * fy[:, None, None]
    if np.issubdtype(img.dtype, np.integer):
        info = np.iinfo(img.dtype)
        out = np.clip(np.floor(out + 0.5), info.min, info.max)
    return out.astype(img.dtype)


def _resize_nd(x, w, h):
    from .... import ndarray as nd
    if x.ndim not in (3, 4):
        raise ValueError(f"Resize expects (H, W, C) or (N, H, W, C) input, got shape {x.shape}")
    a = x.asnumpy()
    out = np.stack([imresize_bilinear(i, w, h) for i in a]) if a.ndim == 4 else imresize_bilinear(a, w, h)
    return nd.array(out, dtype=out.dtype)


class Resize(Block):
    """Bilinear resize of (H, W, C) images (or (N, H, W, C) batches) to `size`: an int (a
    square, or the shorter edge when `keep_ratio`) or (width, height). Only bilinear
    interpolation (1) is provided."""

    def __init__(self, size, keep_ratio=False, interpolation=1):
        super().__init__()
        if interpolation != 1:
            raise ValueError(f"Resize: only bilinear interpolation (1) is supported, got {interpolation}")
        self._size = size
        self._keep = keep_ratio

    def forward(self, x):
        if isinstance(self._size, (int, np.integer)):
            h, w = x.shape[-3], x.shape[-2]
            if not self._keep:
                wsize = hsize = self._size
            elif h > w:
                wsize, hsize = self._size, int(h * self._size / w)
            else:
                hsize, wsize = self._size, int(w * self._size / h)
        else:
            wsize, hsize = self._size
        return _resize_nd(x, wsize, hsize)


class CenterCrop(Block):
    """Crops the center `size` = int or (width, height) of an (H, W, C) image; an image smaller
    than `size` is cropped to the largest centered region of that aspect ratio and resized up."""

    def __init__(self, size, interpolation=1):
        super().__init__()
        if interpolation != 1:
            raise ValueError(f"CenterCrop: only bilinear interpolation (1) is supported, got {interpolation}")
        self._size = (size, size) if isinstance(size, (int, np.integer)) else tuple(size)

    def forward(self, x):
        h, w = x.shape[0], x.shape[1]
        new_w, new_h = self._size
        if new_w > w or new_h > h:  # MXNet's scale_down: keep the target's aspect ratio
            sw, sh = self._size
            if sh > h:
                sw, sh = sw * h / sh, h
            if sw > w:
                sw, sh = w, sh * w / sw
            new_w, new_h = int(sw), int(sh)
        x0, y0 = int((w - new_w) / 2), int((h - new_h) / 2)
        crop = x[y0:y0 + new_h, x0:x0 + new_w]
        if (new_w, new_h) != self._size:
            return _resize_nd(crop, *self._size)
        return crop.copy()
