"""symjit.model (`mx.model`): checkpoint helpers of MXNet 1.x."""
from .module.module import load_checkpoint, save_checkpoint  # noqa: F401

__all__ = ["save_checkpoint", "load_checkpoint"]
