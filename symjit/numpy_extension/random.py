"""`mx.npx.random`: MXNet 1.9.1's extra samplers (bernoulli, normal_n, uniform_n) and `seed`,
built from the registered sampling and broadcast operators (draws come from symjit's global
generator, so `seed` makes them reproducible; the streams differ from MXNet's)."""
from __future__ import annotations

import numbers

import numpy as np

from ..base import MXNetError, MXNetValueError
from ..context import current_context
from ..ndarray import NDArray, invoke
from ..random import seed as _seed
from ..numpy.multiarray import ndarray as np_ndarray
from ._op import as_np

__all__ = ["bernoulli", "normal_n", "uniform_n", "seed"]


def seed(seed, ctx="all"):  # noqa: A002 - MXNet's argument name
    """Seed the generators (`ctx` is accepted as MXNet's; symjit has one generator)."""
    _seed(seed, ctx=ctx)


def _size(size) -> tuple:
    if size is None:
        return ()
    return (int(size),) if isinstance(size, (int, np.integer)) else tuple(int(s) for s in size)


def _shape_of(x) -> tuple:
    return tuple(x.shape) if isinstance(x, NDArray) else ()


def _standard(kind: str, shape: tuple, ctx):
    """Standard draws ('uniform' on [0, 1) or 'normal') of `shape`, float32."""
    op = "_random_uniform" if kind == "uniform" else "_random_normal"
    return invoke(op, [], {"shape": shape, "dtype": "float32"}, ctx=ctx or current_context())


def _affine(z, offset, scale):
    """offset + scale * z with numbers or arrays broadcast against z."""
    out = invoke("broadcast_mul", [z, scale], {}) if isinstance(scale, NDArray) else \
        invoke("_mul_scalar", [z], {"scalar": float(scale)})
    if isinstance(offset, NDArray):
        return invoke("broadcast_add", [out, offset], {})
    return invoke("_plus_scalar", [out], {"scalar": float(offset)})


def _difference(b, a):
    """b - a for numbers or arrays (broadcast)."""
    if isinstance(b, NDArray) and isinstance(a, NDArray):
        return invoke("broadcast_sub", [b, a], {})
    if isinstance(b, NDArray):
        return invoke("_minus_scalar", [b], {"scalar": float(a)})
    if isinstance(a, NDArray):
        return invoke("_rminus_scalar", [a], {"scalar": float(b)})
    return b - a


def _ctx_of(*params):
    return next((p.context for p in params if isinstance(p, NDArray)), None)


def _reject_legacy(op_name: str, params: dict) -> None:
    """MXNet's error for a legacy NDArray parameter: not an np array, so read as an attribute."""
    for key, value in params.items():
        if isinstance(value, NDArray) and not isinstance(value, np_ndarray):
            raise MXNetError(f"Invalid Parameter format for {key} expect float or None but value='{value}', "
                             f"in operator {op_name}")


def _sample_n(kind: str, a, b, batch_shape, dtype, ctx):
    """Draws of shape batch_shape + broadcast(a, b) as `a + b * standard` (loc/scale or
    low/(high - low))."""
    names = ("loc", "scale") if kind == "normal" else ("low", "high")
    _reject_legacy(f"_npi_{kind}_n", dict(zip(names, (a, b))))
    for p in (a, b):
        if not isinstance(p, (numbers.Number, np.generic, NDArray)):
            raise TypeError(f"npx.random.{kind}_n: parameters must be numbers or arrays, got "
                            f"{type(p).__name__}")
    shape = _size(batch_shape) + tuple(np.broadcast_shapes(_shape_of(a), _shape_of(b)))
    z = _standard(kind, shape, ctx or _ctx_of(a, b))
    if kind == "uniform":   # the width high - low
        b = _difference(b, a)
    out = _affine(z, a, b)
    if dtype is not None:
        out = invoke("Cast", [out], {"dtype": dtype})
    return as_np(out)


def normal_n(loc=0.0, scale=1.0, batch_shape=None, dtype=None, ctx=None):
    """Normal draws of shape batch_shape + broadcast(loc, scale).shape."""
    return _sample_n("normal", loc, scale, batch_shape, dtype, ctx)


def uniform_n(low=0.0, high=1.0, batch_shape=None, dtype=None, ctx=None):
    """Uniform draws on [low, high) of shape batch_shape + broadcast(low, high).shape."""
    return _sample_n("uniform", low, high, batch_shape, dtype, ctx)


def bernoulli(prob=None, logit=None, size=None, dtype=None, ctx=None, out=None):
    """0/1 draws that are 1 with probability `prob` (or sigmoid(`logit`)); exactly one of
    them is given, a number or an array; the shape is `size` or the parameter's shape."""
    if (prob is None) == (logit is None):
        raise MXNetValueError("npx.random.bernoulli: Either `prob` or `logit` must be specified, but not both. "
                              f"Received prob={prob}, logit={logit}")
    _reject_legacy("_npi_bernoulli", {"prob": prob, "logit": logit})
    p = prob
    if logit is not None:
        p = invoke("sigmoid", [logit], {}) if isinstance(logit, NDArray) else float(1.0 / (1.0 + np.exp(-logit)))
    shape = _size(size) if size is not None else _shape_of(p)
    u = _standard("uniform", shape, ctx or _ctx_of(p))
    if isinstance(p, NDArray):
        hit = invoke("broadcast_lesser", [u, p], {})
    else:
        if not 0.0 <= float(p) <= 1.0:
            raise MXNetValueError(f"npx.random.bernoulli: prob must be in [0, 1], got {p}")
        hit = invoke("_lesser_scalar", [u], {"scalar": float(p)})
    result = invoke("Cast", [hit], {"dtype": dtype or "float32"})
    if out is not None:
        out[:] = result
        return out
    return as_np(result)
