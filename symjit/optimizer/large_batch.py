"""Large-batch SGD variants of MXNet 1.x: LARS (layer-wise adaptive rate scaling, You et al.,
"Large Batch Training of Convolutional Networks") and LBSGD (large-batch SGD emulated by
accumulating `batch_scale` gradients, with a warm-up schedule or LARS scaling of the rate).

Both end in MXNet's `sgd_update` / `sgd_mom_update` kernels with the scaled learning rate."""
from __future__ import annotations

import logging
import math

import numpy as np

from ..base import MXNetError
from .optimizer import SGD, _apply, register

__all__ = ["LARS", "LBSGD"]


def _sum_sq(x) -> float:
    v = x.asnumpy().astype(np.float64, copy=False).ravel()
    return float(np.dot(v, v))


def _excluded_from_lars(name: str) -> bool:
    """Biases and batch-norm scales/shifts keep the global learning rate (MXNet's rule)."""
    return name.endswith(("gamma", "beta", "bias"))


@register
class LARS(SGD):
    """SGD with momentum whose per-layer rate is
    `lr * eta * ||w|| / (||rescale_grad * g|| + wd * ||w|| + eps)` (or `lr` when either norm is
    0, and for parameters named *gamma, *beta, *bias). With `momentum_correction` the momentum is
    scaled by lr_now / lr_before when a scheduler changes the rate."""

    def __init__(self, momentum=0.0, lazy_update=True, eta=0.001, eps=0, momentum_correction=True, **kwargs):
        super().__init__(momentum=momentum, lazy_update=lazy_update, **kwargs)
        self.momentum_correction = momentum_correction
        self.eta = eta
        self.eps = eps
        self.last_lr = None
        self.cur_lr = None

    def set_wd_mult(self, args_wd_mult):
        """Weight decay only on parameters named *_weight (others get wd_mult 0), then the
        given multipliers."""
        self.wd_mult = {n: 0.0 for n in self.idx2name.values() if not n.endswith("_weight")}
        self.wd_mult.update(args_wd_mult)

    def _track_lr(self) -> None:
        if self.cur_lr is not None:
            self.last_lr = self.cur_lr
        lr = self.learning_rate
        if self.cur_lr is None:
            self.last_lr = lr
        self.cur_lr = lr

    def layer_lr(self, index, weight, grad, lr, wd) -> float:
        """The LARS-scaled learning rate of parameter `index`."""
        name = self.idx2name.get(index, str(index))
        if _excluded_from_lars(name):
            return lr
        w_norm = math.sqrt(_sum_sq(weight))
        g_norm = math.sqrt(_sum_sq(grad)) * abs(self.rescale_grad)
        if w_norm > 0.0 and g_norm > 0.0:
            return lr * self.eta * w_norm / (g_norm + wd * w_norm + self.eps)
        return lr

    def update(self, index, weight, grad, state):
        self._update_count(index)
        self._track_lr()
        lr, wd = self._get_lr(index), self._get_wd(index)
        kw = dict(self._common(index), lr=self.layer_lr(index, weight, grad, lr, wd), wd=wd)
        if state is not None:
            momentum = self.momentum
            if self.momentum_correction and self.last_lr:
                momentum *= self.cur_lr / self.last_lr
            _apply("sgd_mom_update", weight, grad, [state], momentum=momentum, **kw)
        else:
            _apply("sgd_update", weight, grad, [], **kw)

    def _update_many(self, indices, weights, grads, states) -> bool:
        return False   # each layer's rate needs its own norms first


@register
class LBSGD(SGD):
    """Large-batch SGD: gradients of `batch_scale` consecutive updates of a parameter are
    averaged and applied once, the rate multiplied by a warm-up factor growing from 1 to
    `batch_scale` over `warmup_epochs * updates_per_epoch` updates ('linear', 'power2', 'sqrt'),
    or by the LARS factor sqrt(|w|^2 / (|g|^2 + wd |w|^2)) clipped to [0.01, 100] ('lars')."""

    _STRATEGIES = ("linear", "power2", "sqrt", "lars")

    def __init__(self, momentum=0.0, multi_precision=False, warmup_strategy="linear", warmup_epochs=5,
                 batch_scale=1, updates_per_epoch=32, begin_epoch=0, num_epochs=60, **kwargs):
        super().__init__(momentum=momentum, multi_precision=multi_precision, **kwargs)
        if warmup_strategy not in self._STRATEGIES:
            raise MXNetError(f"LBSGD: warmup_strategy must be one of {self._STRATEGIES}, got {warmup_strategy!r}")
        logging.info("Running Large-Batch SGD Algorithm")
        logging.info("(Batch_scale=%f, warmup_epochs=%d, warmup_strategy=%s, updates_per_epoch=%d)",
                     batch_scale, warmup_epochs, warmup_strategy, updates_per_epoch)
        self.warmup_strategy = warmup_strategy
        self.warmup_epochs = warmup_epochs
        self.batch_scale = batch_scale
        self.updates_per_epoch = updates_per_epoch
        self.init_updates = begin_epoch * updates_per_epoch
        self.num_epochs = num_epochs
        self.cumgrads = {}

    def _get_lbmult(self, nup) -> float:
        """The warm-up multiplier after `nup` accumulated updates."""
        nwup = self.warmup_epochs * self.updates_per_epoch
        maxmult = float(self.batch_scale)
        if nup >= nwup:
            return maxmult
        if nwup <= 1:
            return 1.0
        if self.warmup_strategy == "linear":
            return 1.0 + (maxmult - 1) * nup / nwup
        if self.warmup_strategy == "power2":
            return 1.0 + (maxmult - 1) * (nup * nup) / (nwup * nwup)
        if self.warmup_strategy == "sqrt":
            return 1.0 + (maxmult - 1) * math.sqrt(float(nup) / nwup)
        return 1.0

    @staticmethod
    def _get_lars(weight, grad, wd) -> float:
        weight2, grad2 = _sum_sq(weight), _sum_sq(grad)
        return min(max(math.sqrt(weight2 / (grad2 + wd * weight2 + 1e-18)), 0.01), 100.0)

    def _cumulate_gradient(self, grad, index) -> dict:
        cgrad = self.cumgrads.get(index)
        if cgrad and cgrad["num_cums"] > 0:
            cgrad = {"cum_grad": cgrad["cum_grad"] + grad, "num_cums": cgrad["num_cums"] + 1}
        else:
            cgrad = {"cum_grad": grad.copy(), "num_cums": self.init_updates + 1}
        self.cumgrads[index] = cgrad
        return cgrad

    def update(self, index, weight, grad, state):
        lr, wd = self._get_lr(index), self._get_wd(index)
        self._update_count(index)
        cgrad = self._cumulate_gradient(grad, index)
        if cgrad["num_cums"] % self.batch_scale != 0:
            return   # accumulating: the weight waits for the whole large batch
        grad = cgrad["cum_grad"] / self.batch_scale
        if self.warmup_strategy == "lars":
            lr *= self._get_lars(weight, grad, wd)
        else:
            lr *= self._get_lbmult(cgrad["num_cums"])
        kw = dict(self._common(index), lr=lr, wd=wd)
        if state is not None:
            _apply("sgd_mom_update", weight, grad, [state], momentum=self.momentum, **kw)
        else:
            _apply("sgd_update", weight, grad, [], **kw)
        cgrad["cum_grad"] = cgrad["cum_grad"] * 0

    def _update_many(self, indices, weights, grads, states) -> bool:
        return False
