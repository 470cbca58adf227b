"""symjit.random: the global random state shared by NDArray samplers, initializers and Dropout.

`seed(n)` makes every later draw reproducible within symjit (values differ from
MXNet's own generator; shapes, dtypes and distributions match).
"""
from __future__ import annotations

import threading

import numpy as np

__all__ = ["seed", "generator", "uniform", "normal", "randn", "randint", "exponential", "gamma",
           "poisson", "negative_binomial", "generalized_negative_binomial", "multinomial", "shuffle"]


class _RNGState(threading.local):
    def __init__(self):
        self.gen = np.random.default_rng()


_STATE = _RNGState()


def seed(seed_state: int, ctx="all") -> None:
    """Seed the global generator (`ctx` is accepted for MXNet compatibility; one stream serves all)."""
    _STATE.gen = np.random.default_rng(int(seed_state))


def generator() -> np.random.Generator:
    """The generator every sampler draws from."""
    return _STATE.gen


def __getattr__(name):
    # mx.random.uniform(...) etc. are the NDArray samplers, as in MXNet
    if name in __all__:
        from .ndarray import random as _ndr
        return getattr(_ndr, name)
    raise AttributeError(f"module 'symjit.random' has no attribute {name!r}")
