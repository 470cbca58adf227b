"""`mx.np.random`: samplers with NumPy's argument names (`size=` is the output shape), drawing
from the global generator that `mx.random.seed` seeds. Results are float32 unless `dtype` says
otherwise (integers: int64); a `size` of None gives a zero-dim array for scalar parameters and
the broadcast shape of array parameters. Values differ from MXNet's generator; distributions,
shapes and dtypes match."""
from __future__ import annotations

import numpy as _np

from ..base import MXNetError
from ..ndarray.ndarray import NDArray, _check_ctx
from ..ops.rng import generator
from .multiarray import _dtype, invoke, is_scalar, ndarray, to_np

__all__ = ["uniform", "normal", "randn", "rand", "randint", "choice", "shuffle", "multinomial", "gamma",
           "beta", "exponential", "chisquare", "gumbel", "logistic", "lognormal", "pareto", "power",
           "rayleigh", "weibull", "multivariate_normal"]


def _param(v):
    return v.asnumpy() if isinstance(v, NDArray) else v


def _ctx_of(*params, ctx=None):
    for p in params:
        if isinstance(p, NDArray):
            return p.context
    return _check_ctx(ctx)


def _size(size):
    if size is None:
        return None
    return (int(size),) if isinstance(size, (int, _np.integer)) else tuple(int(d) for d in size)


def _result(data, dtype, ctx, out=None, default=_np.float32) -> ndarray:
    arr = _np.asarray(data).astype(_dtype(dtype, default))
    if out is not None:
        out[...] = ndarray(arr)
        return out
    return ndarray(_np.require(arr, requirements="C"), ctx)


def _op_sampler(name: str, op: str, params: tuple, defaults: tuple):
    """A sampler through registered op `op`: array parameters are inputs (gradients flow)."""
    def fn(*args, size=None, dtype=None, ctx=None, out=None, **kwargs):
        values = dict(zip(params, defaults))
        for k, a in enumerate(args):
            if k < len(params):
                values[params[k]] = a
            elif k == len(params) and size is None:
                size = a
            else:
                raise TypeError(f"{name}: too many positional arguments")
        for k in list(kwargs):
            if k in params:
                values[k] = kwargs.pop(k)
        if kwargs:
            raise TypeError(f"{name}: unexpected arguments {sorted(kwargs)}")
        attrs = {"size": _size(size), "dtype": None if dtype is None else _dtype(dtype).name}
        inputs = []
        for p in params:
            v = values[p]
            if isinstance(v, NDArray) or isinstance(v, (list, tuple, _np.ndarray)):
                inputs.append(to_np(v))
                attrs[p] = None
            else:
                attrs[p] = float(v)
        c = _ctx_of(*inputs, ctx=ctx)
        return invoke(op, inputs, attrs, out=out, ctx=c)
    fn.__name__ = name
    fn.__doc__ = (f"Samples of numpy.random.{name} with parameters {params} (numbers or arrays; gradients "
                  "flow to array parameters); `size` is the output shape.")
    return fn


uniform = _op_sampler("uniform", "_npi_uniform", ("low", "high"), (0.0, 1.0))
normal = _op_sampler("normal", "_npi_normal", ("loc", "scale"), (0.0, 1.0))
gamma = _op_sampler("gamma", "_npi_gamma", ("shape", "scale"), (1.0, 1.0))
exponential = _op_sampler("exponential", "_npi_exponential", ("scale",), (1.0,))
gumbel = _op_sampler("gumbel", "_npi_gumbel", ("loc", "scale"), (0.0, 1.0))
logistic = _op_sampler("logistic", "_npi_logistic", ("loc", "scale"), (0.0, 1.0))
pareto = _op_sampler("pareto", "_npi_pareto", ("a",), (1.0,))
power = _op_sampler("power", "_npi_powerd", ("a",), (1.0,))
rayleigh = _op_sampler("rayleigh", "_npi_rayleigh", ("scale",), (1.0,))
weibull = _op_sampler("weibull", "_npi_weibull", ("a",), (1.0,))


def lognormal(mean=0.0, sigma=1.0, size=None, dtype=None, ctx=None, out=None) -> ndarray:
    """exp of normal samples with mean `mean` and standard deviation `sigma`."""
    return invoke("_npi_exp", [normal(mean, sigma, size=size, dtype=dtype, ctx=ctx)], out=out)


def chisquare(df, size=None, dtype=None, ctx=None, out=None) -> ndarray:
    """Chi-square samples with `df` degrees of freedom (gamma(df / 2, 2))."""
    half = df / 2.0 if is_scalar(df) else to_np(df) / 2.0
    return gamma(half, 2.0, size=size, dtype=dtype, ctx=ctx, out=out)


def beta(a, b, size=None, dtype=None, ctx=None, out=None) -> ndarray:
    """Beta samples: x / (x + y) of gamma(a, 1) and gamma(b, 1) samples."""
    x = gamma(a, 1.0, size=size, dtype=dtype, ctx=ctx)
    y = gamma(b, 1.0, size=size, dtype=dtype, ctx=ctx)
    return invoke("_npi_true_divide", [x, invoke("_npi_add", [x, y])], out=out)


def rand(*size, **kwargs) -> ndarray:
    """Uniform samples in [0, 1) of shape `size`."""
    return uniform(0.0, 1.0, size=size or None, **kwargs)


def randn(*size, **kwargs) -> ndarray:
    """Standard normal samples of shape `size`."""
    return normal(0.0, 1.0, size=size or None, **kwargs)


def randint(low, high=None, size=None, dtype=None, ctx=None, out=None) -> ndarray:
    """Integers in [low, high) (in [0, low) without high), int64 unless `dtype`."""
    if high is None:
        low, high = 0, low
    if high <= low:
        raise MXNetError(f"randint: low ({low}) must be less than high ({high})")
    attrs = {"low": int(low), "high": int(high), "shape": _size(size) or (),
             "dtype": None if dtype is None else _dtype(dtype).name}
    return invoke("_npi_random_randint", [], attrs, out=out, ctx=_check_ctx(ctx))


def choice(a, size=None, replace=True, p=None, ctx=None, out=None) -> ndarray:
    """Samples from `a` (an int n: from arange(n), int64) with probabilities `p`."""
    from_range = isinstance(a, (int, _np.integer))
    inputs = ([] if from_range else [to_np(a)]) + ([] if p is None else [to_np(p)])
    attrs = {"a": int(a) if from_range else None, "size": _size(size), "replace": replace,
             "weighted": p is not None}
    return invoke("_npi_choice", inputs, attrs, out=out, ctx=_ctx_of(*inputs, ctx=ctx))


def shuffle(x) -> None:
    """Shuffle `x` in place along its first axis."""
    x = to_np(x)
    x[...] = invoke("_npi_shuffle", [x])


def multinomial(n, pvals, size=None) -> ndarray:
    """Counts of `n` draws over outcomes with probabilities `pvals` (int64)."""
    if isinstance(pvals, NDArray):
        return invoke("_npi_multinomial", [to_np(pvals)], {"n": int(n), "pvals": None, "size": _size(size)},
                      ctx=pvals.context)
    attrs = {"n": int(n), "pvals": tuple(float(v) for v in _np.ravel(pvals)), "size": _size(size)}
    return invoke("_npi_multinomial", [], attrs, ctx=_check_ctx(None))


def multivariate_normal(mean, cov, size=None, check_valid=None, tol=None, dtype=None, ctx=None) -> ndarray:
    """Samples of the multivariate normal with `mean` and covariance `cov`."""
    data = generator().multivariate_normal(_np.asarray(_param(mean)), _np.asarray(_param(cov)), _size(size))
    return _result(data, dtype, _ctx_of(mean, ctx=ctx))
