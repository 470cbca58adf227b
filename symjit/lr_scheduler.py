"""symjit.lr_scheduler: MXNet 1.x learning-rate schedules (called with the update count)."""
from __future__ import annotations

import math

from .base import MXNetError

__all__ = ["LRScheduler", "FactorScheduler", "MultiFactorScheduler", "PolyScheduler", "CosineScheduler"]


class LRScheduler:
    """Base: optional warm-up from `warmup_begin_lr` to `base_lr` over `warmup_steps` updates."""

    def __init__(self, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0, warmup_mode="linear"):
        self.base_lr = base_lr
        if not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise MXNetError("LRScheduler: warmup_steps must be a non-negative integer")
        if warmup_mode not in ("linear", "constant"):
            raise MXNetError(f"LRScheduler: warmup_mode must be 'linear' or 'constant', got {warmup_mode!r}")
        self.warmup_steps = warmup_steps
        self.warmup_final_lr = base_lr
        self.warmup_begin_lr = warmup_begin_lr
        self.warmup_mode = warmup_mode

    def get_warmup_lr(self, num_update: int) -> float:
        if self.warmup_mode == "linear":
            inc = (self.warmup_final_lr - self.warmup_begin_lr) * float(num_update) / float(self.warmup_steps)
            return self.warmup_begin_lr + inc
        return self.warmup_begin_lr

    def __call__(self, num_update: int) -> float:
        raise MXNetError(f"{type(self).__name__} must define __call__")


class FactorScheduler(LRScheduler):
    """Multiply the rate by `factor` every `step` updates, never below `stop_factor_lr`."""

    def __init__(self, step, factor=1, stop_factor_lr=1e-8, base_lr=0.01, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if step < 1:
            raise MXNetError("FactorScheduler: schedule step must be greater or equal than 1 round")
        if factor > 1.0:
            raise MXNetError("FactorScheduler: factor must be no more than 1 to make lr reduce")
        self.step = step
        self.factor = factor
        self.stop_factor_lr = stop_factor_lr
        self.count = 0

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while num_update > self.count + self.step:
            self.count += self.step
            self.base_lr *= self.factor
            if self.base_lr < self.stop_factor_lr:
                self.base_lr = self.stop_factor_lr
        return self.base_lr


class MultiFactorScheduler(LRScheduler):
    """Multiply the rate by `factor` at each update count listed in `step` (increasing)."""

    def __init__(self, step, factor=1, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(step, list) or len(step) < 1:
            raise MXNetError("MultiFactorScheduler: step must be a non-empty list")
        for i, s in enumerate(step):
            if i and step[i] <= step[i - 1]:
                raise MXNetError("MultiFactorScheduler: schedule step must be an increasing integer list")
            if s < 1:
                raise MXNetError("MultiFactorScheduler: schedule step must be greater or equal than 1 round")
        if factor > 1.0:
            raise MXNetError("MultiFactorScheduler: factor must be no more than 1 to make lr reduce")
        self.step = step
        self.cur_step_ind = 0
        self.factor = factor
        self.count = 0

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while self.cur_step_ind <= len(self.step) - 1:
            if num_update > self.step[self.cur_step_ind]:
                self.count = self.step[self.cur_step_ind]
                self.cur_step_ind += 1
                self.base_lr *= self.factor
            else:
                return self.base_lr
        return self.base_lr


class _DecayScheduler(LRScheduler):
    """Base of schedules that decay from base_lr to final_lr over `max_update` updates."""

    def __init__(self, max_update, base_lr=0.01, final_lr=0, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(max_update, int) or max_update < 1:
            raise MXNetError(f"{type(self).__name__}: maximum number of updates must be strictly positive")
        self.base_lr_orig = self.base_lr
        self.max_update = max_update
        self.final_lr = final_lr
        self.max_steps = self.max_update - self.warmup_steps

    def decay(self, progress: float) -> float:
        """The fraction of (base_lr - final_lr) left after `progress` (0..1) of the schedule."""
        raise MXNetError(f"{type(self).__name__} must define decay()")

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            progress = float(num_update - self.warmup_steps) / float(self.max_steps)
            self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) * self.decay(progress)
        return self.base_lr


class PolyScheduler(_DecayScheduler):
    """final_lr + (base_lr - final_lr) * (1 - t / T)^pwr over `max_update` updates."""

    def __init__(self, max_update, base_lr=0.01, pwr=2, final_lr=0, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.power = pwr

    def decay(self, progress: float) -> float:
        return pow(1 - progress, self.power)


class CosineScheduler(_DecayScheduler):
    """Cosine decay from base_lr to final_lr over `max_update` updates."""

    def decay(self, progress: float) -> float:
        return (1 + math.cos(math.pi * progress)) / 2
