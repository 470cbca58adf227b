"""Locating pretrained parameter files offline (MXNet's `model_zoo.model_store`)."""
from __future__ import annotations

import glob
import os

from ...base import MXNetError

__all__ = ["get_model_file", "default_root"]


def default_root() -> str:
    """MXNet's default cache directory of pretrained models ($MXNET_HOME/models)."""
    return os.path.join(os.environ.get("MXNET_HOME", os.path.join("~", ".mxnet")), "models")


def get_model_file(name: str, root: str | None = None) -> str:
    """The path of the pretrained parameters of model `name` in `root`: `NAME-*.params` (MXNet's
    cached file, name followed by the short hash) or `NAME.params`. Nothing is downloaded."""
    root = os.path.expanduser(root or default_root())
    candidates = sorted(glob.glob(os.path.join(root, f"{name}-*.params")))
    plain = os.path.join(root, f"{name}.params")
    if os.path.isfile(plain):
        candidates.insert(0, plain)
    if not candidates:
        raise MXNetError(f"pretrained parameters of model '{name}' not found in {root!r} (looked for "
                         f"{name}.params and {name}-<hash>.params); symjit does not download them: copy "
                         "MXNet's file there or load your own with load_parameters()")
    return candidates[0]
