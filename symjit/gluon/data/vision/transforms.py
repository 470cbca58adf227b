"""Image transforms (MXNet 1.x `gluon.data.vision.transforms`), as Blocks applied to
(H, W, C) images or (N, H, W, C) batches."""
from __future__ import annotations

import numpy as np

from ...block import Block, HybridBlock
from ...nn import HybridSequential, Sequential

__all__ = ["Compose", "Cast", "ToTensor", "Normalize", "RandomFlipLeftRight", "RandomFlipTopBottom"]


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
