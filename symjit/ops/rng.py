"""The global random state: one numpy Generator per thread, shared by the random ops' reference
implementations, compiled random kernels (their seeds), eager samplers and initializers.

It lives in the core (ops) so that ops and codegen reach it without importing a frontend;
`symjit.random` (the MXNet-facing module) re-exports `seed` and `generator`.
"""
from __future__ import annotations

import threading

import numpy as np

__all__ = ["seed", "generator"]


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
