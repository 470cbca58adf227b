"""symjit.symbol.random (`mx.sym.random`): MXNet 1.x symbolic sampling functions.

As MXNet's `symbol.random`: distribution parameters given as numbers select the
`_random_<d>` op (output shape = `shape`); parameters given as Symbols select the per-element
`_sample_<d>` op (output shape = parameter shape + `shape`); mixing the two is an error.
Nodes are named after the op (`_random_uniform0`, `_sample_normal0`, `_shuffle0`), as MXNet's
functions call `_internal._random_*`. Every draw happens when the graph runs (each
`eval`/`forward` samples anew).
"""
from __future__ import annotations

import numbers

import numpy as np

from ..base import MXNetError
from . import op_function
from .symbol import Symbol

__all__ = ["uniform", "normal", "randn", "poisson", "exponential", "gamma", "negative_binomial",
           "generalized_negative_binomial", "multinomial", "shuffle", "randint"]


class DistributionParameterError(MXNetError, ValueError):
    """Distribution parameters of the wrong kind (MXNet raises ValueError / AssertionError)."""


def _is_number(x) -> bool:
    return isinstance(x, (numbers.Number, np.generic)) and not isinstance(x, bool | np.bool_)


def _random_helper(dist: str, params: list, shape, dtype, kwargs: dict, sampler: bool = True) -> Symbol:
    """`_sample_<dist>` for Symbol parameters, `_random_<dist>` for numbers."""
    if isinstance(params[0], Symbol):
        if not sampler:
            raise DistributionParameterError(f"{dist}: parameters must be numbers, got a Symbol")
        for p in params[1:]:
            if not isinstance(p, Symbol):
                raise DistributionParameterError(
                    "Distribution parameters must all have the same type, but got both "
                    f"{type(params[0])} and {type(p)}.")
        return op_function(f"_sample_{dist}")(*params, shape=shape, dtype=dtype, **kwargs)
    if _is_number(params[0]):
        for p in params[1:]:
            if not _is_number(p):
                raise DistributionParameterError(
                    "Distribution parameters must all have the same type, but got both "
                    f"{type(params[0])} and {type(p)}.")
        return op_function(f"_random_{dist}")(*params, shape=shape, dtype=dtype, **kwargs)
    raise DistributionParameterError("Distribution parameters must be either Symbol or numbers, "
                                     f"but got {type(params[0])}.")


def uniform(low=0, high=1, shape=None, dtype=None, **kwargs) -> Symbol:
    """Samples from the uniform distribution on [low, high)."""
    return _random_helper("uniform", [low, high], shape, dtype, kwargs)


def normal(loc=0, scale=1, shape=None, dtype=None, **kwargs) -> Symbol:
    """Samples from the normal distribution (mean `loc`, standard deviation `scale`)."""
    return _random_helper("normal", [loc, scale], shape, dtype, kwargs)


def randn(*shape, **kwargs) -> Symbol:
    """Normal samples of shape `shape` (separate ints); `loc`, `scale`, `dtype` as keywords."""
    loc = kwargs.pop("loc", 0)
    scale = kwargs.pop("scale", 1)
    dtype = kwargs.pop("dtype", None)
    return _random_helper("normal", [loc, scale], tuple(shape) or None, dtype, kwargs)


def poisson(lam=1, shape=None, dtype=None, **kwargs) -> Symbol:
    """Samples from the Poisson distribution with rate `lam`."""
    return _random_helper("poisson", [lam], shape, dtype, kwargs)


def exponential(scale=1, shape=None, dtype=None, **kwargs) -> Symbol:
    """Samples from the exponential distribution with scale `scale` (rate 1/scale)."""
    return _random_helper("exponential", [1.0 / scale], shape, dtype, kwargs)


def gamma(alpha=1, beta=1, shape=None, dtype=None, **kwargs) -> Symbol:
    """Samples from the gamma distribution (shape `alpha`, scale `beta`)."""
    return _random_helper("gamma", [alpha, beta], shape, dtype, kwargs)


def negative_binomial(k=1, p=1, shape=None, dtype=None, **kwargs) -> Symbol:
    """Samples from the negative binomial distribution with parameters `k` and `p`."""
    return _random_helper("negative_binomial", [k, p], shape, dtype, kwargs)


def generalized_negative_binomial(mu=1, alpha=1, shape=None, dtype=None, **kwargs) -> Symbol:
    """Samples from the generalized negative binomial distribution (mean `mu`, dispersion `alpha`)."""
    return _random_helper("generalized_negative_binomial", [mu, alpha], shape, dtype, kwargs)


def randint(low, high, shape=None, dtype=None, **kwargs) -> Symbol:
    """Integers drawn uniformly from [low, high) (numbers only, as MXNet)."""
    return _random_helper("randint", [low, high], shape, dtype, kwargs, sampler=False)


def multinomial(data, shape=None, get_prob=True, dtype="int32", **kwargs) -> Symbol:
    """Category indices drawn from the distributions along the last axis of `data`; with
    `get_prob` (MXNet's symbolic default) also their log-probabilities."""
    if not isinstance(data, Symbol):
        raise DistributionParameterError(f"multinomial: data must be a Symbol, got {type(data).__name__}")
    return op_function("_sample_multinomial")(data, shape=shape, get_prob=get_prob, dtype=dtype, **kwargs)


def shuffle(data, **kwargs) -> Symbol:
    """`data` with its first axis randomly permuted (anew at every run)."""
    if not isinstance(data, Symbol):
        raise DistributionParameterError(f"shuffle: data must be a Symbol, got {type(data).__name__}")
    return op_function("_shuffle")(data, **kwargs)
