"""Mixed-precision training helpers (MXNet's `contrib.amp`): loss scaling around a gluon Trainer.

    amp.init_trainer(trainer)
    with amp.scale_loss(loss, trainer) as scaled:
        autograd.backward(scaled)
    trainer.step(batch_size)          # skipped (and the scale halved) on inf/NaN gradients
"""
from __future__ import annotations

from contextlib import contextmanager

from ...base import MXNetError
from .loss_scaler import LossScaler

__all__ = ["init_trainer", "scale_loss", "unscale"]


def init_trainer(optimizer_or_trainer):
    """Give a gluon Trainer a dynamic loss scaler (its steps then skip overflowing gradients)."""
    from ...gluon.trainer import Trainer
    if not isinstance(optimizer_or_trainer, Trainer):
        raise MXNetError(f"amp.init_trainer: expected a gluon.Trainer, got {type(optimizer_or_trainer).__name__}")
    trainer = optimizer_or_trainer
    trainer._amp_loss_scaler = LossScaler()
    trainer._amp_original_scale = trainer._scale


@contextmanager
def scale_loss(loss, optimizer_or_trainer):
    """Yield the loss (or list of losses) times the trainer's loss scale; the trainer's gradient
    rescaling divides it out again."""
    trainer = optimizer_or_trainer
    scaler = getattr(trainer, "_amp_loss_scaler", None)
    if scaler is None:
        raise MXNetError("amp.scale_loss: call amp.init_trainer(trainer) first")
    trainer._scale = trainer._amp_original_scale / scaler.loss_scale
    if isinstance(loss, (list, tuple)):
        yield [l * scaler.loss_scale for l in loss]
    else:
        yield scaler.loss_scale * loss


def unscale(optimizer_or_trainer):
    """Divide the gradients by the loss scale now (e.g. before clipping them)."""
    trainer = optimizer_or_trainer
    scaler = getattr(trainer, "_amp_loss_scaler", None)
    if scaler is None:
        raise MXNetError("amp.unscale: call amp.init_trainer(trainer) first")
    for param in trainer._params:
        if param.grad_req != "null":
            for g in param.list_grad():
                g[:] /= scaler.loss_scale
    trainer._scale = trainer._amp_original_scale
