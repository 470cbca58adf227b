"""Image transforms (MXNet 1.x `gluon.data.vision.transforms`), as Blocks applied to
(H, W, C) images or (N, H, W, C) batches."""
from __future__ import annotations

import numpy as np

from ...block import Block, HybridBlock
from ...nn import HybridSequential, Sequential

__all__ = ["Compose", "Cast", "ToTensor", "Normalize"]


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
