"""symjit.random: the global random state shared by NDArray samplers, initializers and Dropout.

`seed(n)` makes every later draw reproducible within symjit (values differ from
MXNet's own generator; shapes, dtypes and distributions match).
"""
from __future__ import annotations

from .ops.rng import generator, seed  # noqa: F401  (the state lives in the core)

__all__ = ["seed", "generator", "uniform", "normal", "randn", "randint", "exponential", "gamma",
           "poisson", "negative_binomial", "generalized_negative_binomial", "multinomial", "shuffle"]


def __getattr__(name):
    # mx.random.uniform(...) etc. are the NDArray samplers, as in MXNet
    if name in __all__:
        from .ndarray import random as _ndr
        return getattr(_ndr, name)
    raise AttributeError(f"module 'symjit.random' has no attribute {name!r}")
