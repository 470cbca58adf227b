"""Large-batch SGD variants of MXNet 1.x: LARS (layer-wise adaptive rate scaling, You et al.,
"Large Batch Training of Convolutional Networks") and LBSGD (large-batch SGD emulated by
accumulating `batch_scale` gradients, with a warm-up schedule or LARS scaling of the rate).

Both end in MXNet's `sgd_update` / `sgd_mom_update` kernels with the scaled learning rate."""
from __future__ import annotations

import logging
import math

import numpy as np

from ..base import MXNetError
from ..ndarray import NDArray, invoke
from ..ops.optimizer_multi import sum_sq
from .optimizer import SGD, _as_lists, _is_sparse, register

__all__ = ["LARS", "LBSGD"]


def _sum_sq(x) -> float:
    """The sum of squares of NDArray x's elements (float64 accumulation, as `multi_sum_sq`)."""
    return sum_sq(x.asnumpy())


def _excluded_from_lars(name: str) -> bool:
    """Biases and batch-norm scales/shifts keep the global learning rate (MXNet's rule)."""
    return name.endswith(("gamma", "beta", "bias"))


@register
class LARS(SGD):
    """SGD with momentum whose per-layer rate is
    `lr * eta * ||w|| / (||rescale_grad * g|| + wd * ||w|| + eps)` (or `lr` when either norm is
    0, and for parameters named *gamma, *beta, *bias). With `momentum_correction` the momentum is
    scaled by lr_now / lr_before when a scheduler changes the rate."""

    _fuse_updates = False   # the momentum correction tracks the rate once per call

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
        """The LARS-scaled learning rate of parameter `index` (norms computed here, as MXNet's
        per-parameter path does for sparse parameters)."""
        name = self.idx2name.get(index, str(index))
        if _excluded_from_lars(name):
            return lr
        w_norm = math.sqrt(_sum_sq(weight))
        g_norm = math.sqrt(_sum_sq(grad)) * abs(self.rescale_grad)
        if w_norm > 0.0 and g_norm > 0.0:
            return lr * self.eta * w_norm / (g_norm + wd * w_norm + self.eps)
        return lr

    def _lars_rates(self, indices, weights, grads, lrs, wds) -> list:
        """The LARS rates of dense parameters from MXNet's kernels: `multi_sum_sq` of the
        weights and of the gradients, then `multi_lars` (parameters excluded from LARS keep lr)."""
        pos = [k for k, i in enumerate(indices) if not _excluded_from_lars(self.idx2name.get(i, str(i)))]
        if not pos:
            return list(lrs)
        ctx = weights[0].context
        n = len(pos)
        w_sq = invoke("multi_sum_sq", [weights[k] for k in pos], {"num_arrays": n})
        g_sq = invoke("multi_sum_sq", [grads[k] for k in pos], {"num_arrays": n})
        sub_lrs, sub_wds = (NDArray(np.array([v[k] for k in pos], np.float32), ctx) for v in (lrs, wds))
        scaled = invoke("multi_lars", [sub_lrs, w_sq, g_sq, sub_wds],
                        {"eta": self.eta, "eps": self.eps, "rescale_grad": self.rescale_grad}).asnumpy()
        out = list(lrs)
        for k, v in zip(pos, scaled):
            out[k] = float(v)
        return out

    def _update_impl(self, indices, weights, grads, states, multi_precision=False) -> None:
        """MXNet 1.9.1's LARS step: the counts, the global rate (tracked for the momentum
        correction), per-layer rates (`multi_sum_sq` + `multi_lars` for dense parameters), then
        the `preloaded_multi_[mp_]sgd[_mom]_update` kernels (per-parameter SGD ops when sparse)."""
        indices, weights, grads, states = _as_lists(indices, weights, grads, states)
        self._update_count(indices)
        self._track_lr()
        lrs, wds = self._get_lrs(indices), self._get_wds(indices)
        kw = self._common(indices[0])
        if self.momentum > 0:
            kw["momentum"] = self.momentum * (self.cur_lr / self.last_lr) \
                if self.momentum_correction and self.last_lr else self.momentum
        if any(_is_sparse(a) for a in weights + grads):
            lrs = [self.layer_lr(i, w, g, lr, wd) for i, w, g, lr, wd in zip(indices, weights, grads, lrs, wds)]
        else:
            lrs = self._lars_rates(indices, weights, grads, lrs, wds)
        self._apply_updates(weights, grads, states, lrs, wds, kw, multi_precision, preloaded=True)


@register
class LBSGD(SGD):
    """Large-batch SGD: gradients of `batch_scale` consecutive updates of a parameter are
    averaged and applied once, the rate multiplied by a warm-up factor growing from 1 to
    `batch_scale` over `warmup_epochs * updates_per_epoch` updates ('linear', 'power2', 'sqrt'),
    or by the LARS factor sqrt(|w|^2 / (|g|^2 + wd |w|^2)) clipped to [0.01, 100] ('lars')."""

    _STRATEGIES = ("linear", "power2", "sqrt", "lars")

    _multi_ops = None
    _fuse_updates = False

    def __init__(self, momentum=0.0, multi_precision=False, warmup_strategy="linear", warmup_epochs=5,
                 batch_scale=1, updates_per_epoch=32, begin_epoch=0, num_epochs=60, aggregate_num=0, **kwargs):
        super().__init__(momentum=momentum, multi_precision=multi_precision, aggregate_num=aggregate_num,
                         **kwargs)
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
        self._apply_updates([weight], [grad], [state], [lr], [wd], self._kwargs(index),
                            isinstance(state, (tuple, list)))
        cgrad["cum_grad"] = cgrad["cum_grad"] * 0

    def update_multi_precision(self, index, weight, grad, state):
        """`update` for each parameter (a (momentum, float32 master) state takes the mp_ ops)."""
        if isinstance(index, (tuple, list)):
            for i, w, g, st in zip(index, weight, grad, state):
                self.update_multi_precision(i, w, g, st)
        elif _is_sparse(weight) or _is_sparse(grad):
            self._update_sparse(index, weight, grad, state)
        else:
            self.update(index, weight, grad, state)
