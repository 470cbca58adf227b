"""symjit.ndarray.random (`mx.nd.random`, also `mx.random`): MXNet 1.x sampling functions.

Each distribution function takes its parameters either as numbers or as NDArrays, as
MXNet's `_random_helper` does:
  * numbers  -> the `_random_<d>` op; output shape `shape` (default (1,), or `out`'s shape),
               placed on `ctx` (default: the current context);
  * NDArrays -> the `_sample_<d>` op; output shape = parameter shape + `shape`, on the
               parameters' context (all parameters must then be NDArrays of one shape).
`dtype` defaults to float32 (int32 for randint) or to `out`'s dtype when `out` is given.
Draws come from the global generator of `symjit.random` (`mx.random.seed(n)` reproduces them).
"""
from __future__ import annotations

import numbers

import numpy as np

from ..base import MXNetError
from ..context import current_context
from .ndarray import NDArray, invoke

__all__ = ["uniform", "normal", "randn", "randint", "exponential", "gamma", "poisson",
           "negative_binomial", "generalized_negative_binomial", "multinomial", "shuffle"]

_FLOAT_DTYPES = ("float16", "float32", "float64")


class DistributionParameterError(MXNetError, ValueError):
    """Distribution parameters of the wrong kind (MXNet raises ValueError here)."""


def _is_number(x) -> bool:
    return isinstance(x, (numbers.Number, np.generic)) and not isinstance(x, NDArray)


def _out_dtype(out, allowed: tuple):
    """`out`'s dtype name when it is one the sampler can produce, else None (op default)."""
    if out is None:
        return None
    name = np.dtype(out.dtype).name
    return name if name in allowed else None


def _random_helper(dist: str, params: list, shape, dtype, ctx, out, kwargs: dict,
                   allowed: tuple = _FLOAT_DTYPES):
    """Dispatch scalar parameters to `_random_<dist>` and NDArray parameters to `_sample_<dist>`."""
    if dtype is None:
        dtype = _out_dtype(out, allowed)
    if isinstance(params[0], NDArray):
        for p in params[1:]:
            if not isinstance(p, NDArray):
                raise DistributionParameterError(
                    "Distribution parameters must all have the same type, but got both "
                    f"{type(params[0])} and {type(p)}.")
        if shape is None:
            shape = () if out is None else tuple(out.shape[params[0].ndim:])
        attrs = dict(kwargs, shape=shape, dtype=dtype)
        return invoke(f"_sample_{dist}", list(params), attrs, out=out)
    if _is_number(params[0]):
        for p in params[1:]:
            if not _is_number(p):
                raise DistributionParameterError(
                    "Distribution parameters must all have the same type, but got both "
                    f"{type(params[0])} and {type(p)}.")
        if shape is None:
            shape = 1 if out is None else out.shape
        op = f"_random_{dist}"
        attrs = dict(kwargs, shape=shape, dtype=dtype)
        attrs.update(zip(_param_names(op), params))
        return invoke(op, [], attrs, out=out, ctx=ctx if ctx is not None else current_context())
    raise DistributionParameterError("Distribution parameters must be either NDArray or numbers, "
                                     f"but got {type(params[0])}.")


def _param_names(op_name: str) -> list:
    """The distribution parameters of a `_random_*` op, in MXNet's order."""
    from ..ops.registry import get_op
    return [n for n in get_op(op_name).params if n not in ("shape", "ctx", "dtype")]


def uniform(low=0, high=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the uniform distribution on [low, high)."""
    return _random_helper("uniform", [low, high], shape, dtype, ctx, out, kwargs)


def normal(loc=0, scale=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the normal distribution with mean `loc` and standard deviation `scale`."""
    return _random_helper("normal", [loc, scale], shape, dtype, ctx, out, kwargs)


def randn(*shape, **kwargs):
    """Normal samples of shape `shape` (given as separate ints); `loc`, `scale`, `dtype`,
    `ctx`, `out` as keywords."""
    loc = kwargs.pop("loc", 0)
    scale = kwargs.pop("scale", 1)
    dtype = kwargs.pop("dtype", None)
    ctx = kwargs.pop("ctx", None)
    out = kwargs.pop("out", None)
    if not _is_number(loc) or not _is_number(scale):
        raise DistributionParameterError("randn: loc and scale must be numbers, got "
                                         f"{type(loc).__name__} and {type(scale).__name__}")
    return _random_helper("normal", [loc, scale], tuple(shape), dtype, ctx, out, kwargs)


def poisson(lam=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the Poisson distribution with rate `lam` (returned as floats)."""
    return _random_helper("poisson", [lam], shape, dtype, ctx, out, kwargs)


def exponential(scale=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the exponential distribution with scale `scale` (= 1 / rate)."""
    if _is_number(scale):
        if not scale > 0:
            raise MXNetError(f"exponential: scale must be positive, got {scale}")
        lam = 1.0 / scale
    elif isinstance(scale, NDArray):
        lam = 1.0 / scale
    else:
        lam = scale  # rejected with MXNet's message by the helper
    return _random_helper("exponential", [lam], shape, dtype, ctx, out, kwargs)


def gamma(alpha=1, beta=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the gamma distribution with shape `alpha` and scale `beta`."""
    return _random_helper("gamma", [alpha, beta], shape, dtype, ctx, out, kwargs)


def negative_binomial(k=1, p=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the negative binomial distribution with MXNet's parameters `k` and `p`:
    Poisson(Gamma(k, (1-p)/p)), i.e. mean k(1-p)/p (returned as floats)."""
    return _random_helper("negative_binomial", [k, p], shape, dtype, ctx, out, kwargs)


def generalized_negative_binomial(mu=1, alpha=1, shape=None, dtype=None, ctx=None, out=None,
                                  **kwargs):
    """Samples from the generalized negative binomial distribution with mean `mu` and
    dispersion `alpha` (returned as floats)."""
    return _random_helper("generalized_negative_binomial", [mu, alpha], shape, dtype, ctx, out,
                          kwargs)


def randint(low, high, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Integers drawn uniformly from [low, high) (int32 unless dtype='int64')."""
    for name, v in (("low", low), ("high", high)):
        if not isinstance(v, (numbers.Integral, np.integer)) or isinstance(v, (bool, np.bool_)):
            raise DistributionParameterError(f"randint: {name} must be an integer, got {v!r}")
    return _random_helper("randint", [int(low), int(high)], shape, dtype, ctx, out, kwargs,
                          allowed=("int32", "int64"))


def multinomial(data, shape=None, get_prob=False, out=None, dtype="int32", **kwargs):
    """Draw category indices from the distributions along the last axis of `data`.

    Returns the samples, or [samples, log-probabilities] when `get_prob` is true.
    """
    if not isinstance(data, NDArray):
        raise DistributionParameterError(f"multinomial: data must be an NDArray, got "
                                         f"{type(data).__name__}")
    attrs = dict(kwargs, shape=() if shape is None else shape, get_prob=get_prob, dtype=dtype)
    return invoke("_sample_multinomial", [data], attrs, out=out)


def shuffle(data, **kwargs):
    """A copy of `data` with its first axis randomly permuted."""
    out = kwargs.pop("out", None)
    if not isinstance(data, NDArray):
        raise DistributionParameterError(f"shuffle: data must be an NDArray, got {type(data).__name__}")
    return invoke("_shuffle", [data], kwargs, out=out)
