"""Image transforms (MXNet 1.9.1 `gluon.data.vision.transforms`), as Blocks applied to
(H, W, C) images or (N, H, W, C) batches (Normalize, Rotate and RandomRotation to (C, H, W)
tensors).

HybridBlocks call the `_image_*` operators (`F.image.*`), so they hybridize and compile; the
Blocks that crop at random positions call `mx.image`'s functions (Python's `random`, as MXNet).
Random operators draw from symjit's generator: `mx.random.seed` makes them reproducible.
"""
from __future__ import annotations

import numbers
import random

import numpy as np

from .... import image
from ...block import Block, HybridBlock
from ...nn import HybridSequential, Sequential

__all__ = ["Compose", "HybridCompose", "Cast", "ToTensor", "Normalize", "Rotate", "RandomRotation",
           "RandomResizedCrop", "CropResize", "CenterCrop", "Resize", "RandomCrop",
           "RandomFlipLeftRight", "RandomFlipTopBottom", "RandomBrightness", "RandomContrast",
           "RandomSaturation", "RandomHue", "RandomColorJitter", "RandomLighting", "RandomApply",
           "HybridRandomApply"]


def _pair(size):
    """An int size as (size, size); a (w, h) pair unchanged."""
    return (size, size) if isinstance(size, numbers.Number) else tuple(size)


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


class HybridCompose(HybridSequential):
    """Chains HybridBlock transforms into one hybridizable block."""

    def __init__(self, transforms):
        super().__init__()
        for t in transforms:
            if not isinstance(t, HybridBlock):
                raise ValueError(f"HybridCompose expects HybridBlocks, got {type(t)}")
            self.add(t)
        self.hybridize()


class Cast(HybridBlock):
    """Casts the input to `dtype`."""

    def __init__(self, dtype="float32"):
        super().__init__()
        self._dtype = np.dtype(dtype).name

    def hybrid_forward(self, F, x):
        return F.cast(x, self._dtype)


class ToTensor(HybridBlock):
    """(H, W, C) or (N, H, W, C) uint8 images in [0, 255] -> float32 (C, H, W) / (N, C, H, W)
    in [0, 1]."""

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


class Rotate(Block):
    """Rotates float32 (C, H, W) / (N, C, H, W) tensors by `rotation_degrees` (see
    mx.image.imrotate)."""

    def __init__(self, rotation_degrees, zoom_in=False, zoom_out=False):
        super().__init__()
        self._args = (rotation_degrees, zoom_in, zoom_out)

    def forward(self, x):
        if x.dtype is not np.float32:
            raise TypeError("This transformation only supports float32. Consider calling it after ToTensor")
        return image.imrotate(x, *self._args)


class RandomRotation(Block):
    """Rotates float32 tensors by an angle drawn from `angle_limits`, with probability
    `rotate_with_proba`."""

    def __init__(self, angle_limits, zoom_in=False, zoom_out=False, rotate_with_proba=1.0):
        super().__init__()
        lower, upper = angle_limits
        if lower >= upper:
            raise ValueError("`angle_limits` must be an ordered tuple")
        if not 0 <= rotate_with_proba <= 1:
            raise ValueError("Probability of rotating the image should be between 0 and 1")
        self._args = (angle_limits, zoom_in, zoom_out)
        self._rotate_with_proba = rotate_with_proba

    def forward(self, x):
        if np.random.random() > self._rotate_with_proba:
            return x
        if x.dtype is not np.float32:
            raise TypeError("This transformation only supports float32. Consider calling it after ToTensor")
        return image.random_rotate(x, *self._args)


class RandomResizedCrop(Block):
    """A crop of random area fraction (`scale`) and aspect ratio (`ratio`) resized to `size`
    (int or (w, h))."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0), interpolation=1):
        super().__init__()
        self._args = (_pair(size), scale, ratio, interpolation)

    def forward(self, x):
        return image.random_size_crop(x, *self._args)[0]


class CropResize(HybridBlock):
    """The region (x, y, width, height), resized to `size` (int or (w, h)) when given."""

    def __init__(self, x, y, width, height, size=None, interpolation=None):
        super().__init__()
        self._x, self._y, self._width, self._height = x, y, width, height
        self._size = size
        self._interpolation = interpolation

    def hybrid_forward(self, F, x):
        out = F.image.crop(x, self._x, self._y, self._width, self._height)
        if self._size:
            interp = {} if self._interpolation is None else {"interp": self._interpolation}
            out = F.image.resize(out, self._size, False, **interp)
        return out


class CenterCrop(Block):
    """The centre crop of `size` (int or (w, h)); an image smaller than `size` is cropped to the
    largest centred region of that aspect ratio and resized up."""

    def __init__(self, size, interpolation=1):
        super().__init__()
        self._args = (_pair(size), interpolation)

    def forward(self, x):
        return image.center_crop(x, *self._args)[0]


class Resize(HybridBlock):
    """Resizes (H, W, C) images or (N, H, W, C) batches to `size`: (w, h), or an int (a square,
    or the shorter edge with `keep_ratio`); OpenCV interpolation codes."""

    def __init__(self, size, keep_ratio=False, interpolation=1):
        super().__init__()
        self._size = size
        self._keep = keep_ratio
        self._interpolation = interpolation

    def hybrid_forward(self, F, x):
        return F.image.resize(x, self._size, self._keep, self._interpolation)


class RandomCrop(Block):
    """A random crop of `size` (int or (w, h)) after optional zero padding `pad` (an int for
    every side of H and W, or numpy.pad widths); an image smaller than `size` is resized up."""

    def __init__(self, size, pad=None, interpolation=2):
        super().__init__()
        self._args = (_pair(size), interpolation)
        if isinstance(pad, numbers.Number):
            pad = ((pad, pad), (pad, pad), (0, 0))
        self._pad = pad

    def forward(self, x):
        if self._pad:
            x = image.image._nd(np.pad(x.asnumpy(), self._pad, mode="constant"))
        return image.random_crop(x, *self._args)[0]


class RandomFlipLeftRight(HybridBlock):
    """Flips the image left to right with probability 1/2."""

    def hybrid_forward(self, F, x):
        return F.image.random_flip_left_right(x)


class RandomFlipTopBottom(HybridBlock):
    """Flips the image top to bottom with probability 1/2."""

    def hybrid_forward(self, F, x):
        return F.image.random_flip_top_bottom(x)


class _RandomFactor(HybridBlock):
    """An `F.image.<op>` jitter with its factor drawn from [max(0, 1 - v), 1 + v]."""
    _op = ""

    def __init__(self, value):
        super().__init__()
        self._args = (max(0, 1 - value), 1 + value)

    def hybrid_forward(self, F, x):
        return getattr(F.image, self._op)(x, *self._args)


class RandomBrightness(_RandomFactor):
    """Multiplies by a factor from [max(0, 1 - brightness), 1 + brightness]."""
    _op = "random_brightness"


class RandomContrast(_RandomFactor):
    """Blends with the mean luma by a factor from [max(0, 1 - contrast), 1 + contrast]."""
    _op = "random_contrast"


class RandomSaturation(_RandomFactor):
    """Blends with each pixel's luma by a factor from [max(0, 1 - saturation), 1 + saturation]."""
    _op = "random_saturation"


class RandomHue(_RandomFactor):
    """Turns the hue by a factor from [max(0, 1 - hue), 1 + hue] of a full circle."""
    _op = "random_hue"


class RandomColorJitter(HybridBlock):
    """Random brightness, contrast, saturation and hue jitters."""

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        super().__init__()
        self._args = (brightness, contrast, saturation, hue)

    def hybrid_forward(self, F, x):
        return F.image.random_color_jitter(x, *self._args)


class RandomLighting(HybridBlock):
    """AlexNet-style PCA lighting noise of standard deviation `alpha`."""

    def __init__(self, alpha):
        super().__init__()
        self._alpha = alpha

    def hybrid_forward(self, F, x):
        return F.image.random_lighting(x, self._alpha)


class RandomApply(Sequential):
    """Applies `transforms` with probability `p` (Python's `random`)."""

    def __init__(self, transforms, p=0.5):
        super().__init__()
        self.transforms = transforms
        self.p = p

    def forward(self, x):
        if self.p < random.random():
            return x
        return self.transforms(x)


class HybridRandomApply(HybridSequential):
    """Applies the HybridBlock `transforms` with probability `p`, inside the graph."""

    def __init__(self, transforms, p=0.5):
        super().__init__()
        if not isinstance(transforms, HybridBlock):
            raise ValueError(f"HybridRandomApply expects a HybridBlock, got {type(transforms)}")
        self.transforms = transforms
        self.p = p

    def hybrid_forward(self, F, x):
        cond = self.p < F.random.uniform(low=0, high=1, shape=1)
        return F.contrib.cond(cond, lambda: x, lambda: self.transforms(x))
