"""MXNet 1.9.1's `mx.nd.contrib` optimizer wrappers: `adamw_update`, `mp_adamw_update`,
`multi_adamw_update`, `multi_mp_adamw_update`, `multi_lamb_update`, `multi_mp_lamb_update`.

They take lists (weights, grads, states) and interleave them into the registered multi-tensor
ops (`ops.optimizer_multi`); `rescale_grad` may be a number or a one-element NDArray, and an
AdamW update is skipped (the weight kept) when it is NaN, Inf or 0."""
from __future__ import annotations

import math

import numpy as np

from ..base import MXNetError
from .ndarray import NDArray, invoke

__all__ = ["adamw_update", "mp_adamw_update", "multi_adamw_update", "multi_mp_adamw_update",
           "multi_lamb_update", "multi_mp_lamb_update"]


def _scale_array(rescale_grad, like: NDArray) -> NDArray:
    """rescale_grad as a one-element float32 NDArray on `like`'s context."""
    if isinstance(rescale_grad, NDArray):
        return rescale_grad.as_in_context(like.context)
    return NDArray(np.array([rescale_grad], np.float32), like.context)


def _interleave(*lists) -> list:
    """[a0, b0, ..., a1, b1, ...] of equally long lists (MXNet's _flatten_list(zip(...)))."""
    n = len(lists[0])
    for seq in lists[1:]:
        if len(seq) != n:
            raise MXNetError(f"multi-tensor update: lists of {n} and {len(seq)} arrays; every list "
                             "(weights, grads, states) must have one entry per weight")
    return [x for group in zip(*lists) for x in group]


def adamw_update(weight, grad, mean, var, rescale_grad, lr, eta, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 wd=0, clip_gradient=-1, out=None, name=None, **kwargs):
    """AdamW on (weight, grad, mean, var): `_adamw_update` with the scale read from
    `rescale_grad`; the weight is returned unchanged (copied into `out`) when it is NaN, Inf or 0."""
    scale = float(_scale_array(rescale_grad, weight).asnumpy().reshape(-1)[0])
    if not math.isfinite(scale) or scale == 0.0:
        if out is None:
            return weight.copy()
        if out is not weight:
            weight.copyto(out)
        return out
    return invoke("_adamw_update", [weight, grad, mean, var],
                  dict(kwargs, lr=lr, eta=eta, beta1=beta1, beta2=beta2, epsilon=epsilon, wd=wd,
                       clip_gradient=clip_gradient, rescale_grad=scale), out=out)


def mp_adamw_update(weight, grad, mean, var, weight32, rescale_grad, lr, eta, beta1=0.9, beta2=0.999,
                    epsilon=1e-8, wd=0, clip_gradient=-1, out=None, name=None, **kwargs):
    """`_mp_adamw_update` with `rescale_grad` a number or an NDArray."""
    return invoke("_mp_adamw_update", [weight, grad, mean, var, weight32, _scale_array(rescale_grad, weight)],
                  dict(kwargs, lr=lr, eta=eta, beta1=beta1, beta2=beta2, epsilon=epsilon, wd=wd,
                       clip_gradient=clip_gradient), out=out)


def multi_adamw_update(weights, grads, mean, var, rescale_grad, lrs, wds, etas, out=None, name=None, size=0,
                       **kwargs):
    """`_multi_adamw_update` over lists of weights, grads, means and vars."""
    size = size or len(weights)
    return invoke("_multi_adamw_update",
                  _interleave(weights, grads, mean, var) + [_scale_array(rescale_grad, weights[0])],
                  dict(kwargs, lrs=lrs, wds=wds, etas=etas, num_weights=size), out=out)


def multi_mp_adamw_update(weights, grads, mean, var, weights32, rescale_grad, lrs, wds, etas, out=None,
                          name=None, size=0, **kwargs):
    """`_multi_mp_adamw_update` over lists (float32 means, vars and master weights)."""
    size = size or len(weights)
    return invoke("_multi_mp_adamw_update",
                  _interleave(weights, grads, mean, var, weights32) + [_scale_array(rescale_grad, weights[0])],
                  dict(kwargs, lrs=lrs, wds=wds, etas=etas, num_weights=size), out=out)


def multi_lamb_update(weights, grads, mean, var, step_count, lrs, wds, out=None, num_tensors=0, **kwargs):
    """`_multi_lamb_update` over lists; `lrs` are its learning_rates."""
    return invoke("_multi_lamb_update", _interleave(weights, grads, mean, var),
                  dict(kwargs, step_count=step_count, learning_rates=lrs, wds=wds,
                       num_tensors=num_tensors or len(weights)), out=out)


def multi_mp_lamb_update(weights, grads, mean, var, weights32, step_count, lrs, wds, out=None, num_tensors=0,
                         **kwargs):
    """`_multi_mp_lamb_update` over lists (float32 means, vars and master weights)."""
    return invoke("_multi_mp_lamb_update", _interleave(weights, grads, mean, var, weights32),
                  dict(kwargs, step_count=step_count, learning_rates=lrs, wds=wds,
                       num_tensors=num_tensors or len(weights)), out=out)
