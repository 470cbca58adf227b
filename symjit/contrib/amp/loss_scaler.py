"""Dynamic loss scaling (MXNet's `amp.loss_scaler.LossScaler`)."""
from __future__ import annotations

import numpy as np

__all__ = ["LossScaler"]


class LossScaler:
    """The loss is multiplied by `loss_scale` before backward; a step whose gradients hold inf or
    NaN is skipped and halves the scale, and every `scale_seq_len` clean steps double it (up to
    2**24, MXNet's bounds and schedule)."""

    def __init__(self):
        self._loss_scale = 2. ** 16
        self._next_loss_scale = self._loss_scale
        self._max_loss_scale = 2. ** 24
        self._scale_seq_len = 2000
        self._unskipped = 0

    @property
    def loss_scale(self):
        return self._loss_scale

    def has_overflow(self, params):
        """True (and the scale is lowered) when a gradient of `params` is not finite."""
        overflow = False
        for param in params:
            if param.grad_req == "null":
                continue
            for grad in param.list_grad():
                if not np.all(np.isfinite(grad.asnumpy())):
                    overflow = True
                    break
            if overflow:
                break
        self._loss_scale = self._next_loss_scale
        if overflow:
            self._next_loss_scale = self._loss_scale / 2.
            self._unskipped = 0
        else:
            self._unskipped += 1
            if self._unskipped == self._scale_seq_len:
                self._unskipped = 0
                self._next_loss_scale = min(self._max_loss_scale, self._loss_scale * 2.)
        return overflow
