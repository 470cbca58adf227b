"""numpy functions `mx.np` runs through numpy itself (MXNet's `mx.np.fallback` list): arguments
that are `mx.np.ndarray`s are read as numpy arrays, numpy array results come back as
`mx.np.ndarray`s of the same dtype; other results (scalars, dtypes, bools) are returned as numpy
gives them. These functions are not recorded by autograd (as in MXNet).

numpy 2 dropped a few of the names MXNet 1.9.1 lists (alltrue, sometrue, msort, trapz, in1d and
the financial functions npv, pv, mirr, ppmt, rate); they are defined here with numpy's documented
semantics."""
from __future__ import annotations

import functools
from typing import Callable

import numpy as _np

from ..base import MXNetError
from ..ndarray.ndarray import NDArray
from .multiarray import ndarray

__all__ = ["numpy_fallback", "FALLBACK_NAMES"]


def _to_numpy(x):
    if isinstance(x, NDArray):
        return x.asnumpy()
    if isinstance(x, (list, tuple)):
        return type(x)(_to_numpy(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_numpy(v) for k, v in x.items()}
    return x


def _from_numpy(x, ctx):
    if isinstance(x, _np.ndarray):
        if x.dtype.kind == "c":
            raise MXNetError("the result is complex, which MXNet arrays cannot hold")
        return ndarray(_np.require(x, requirements="C"), ctx)
    if isinstance(x, tuple) and hasattr(x, "_fields"):       # namedtuple results (lstsq, qr ...)
        return type(x)(*[_from_numpy(v, ctx) for v in x])
    if isinstance(x, (list, tuple)):
        return type(x)(_from_numpy(v, ctx) for v in x)
    return x


def _context(args, kwargs):
    for v in list(args) + list(kwargs.values()):
        if isinstance(v, NDArray):
            return v.context
        if isinstance(v, (list, tuple)):
            for w in v:
                if isinstance(w, NDArray):
                    return w.context
    return None


def numpy_fallback(fn: Callable, name: str) -> Callable:
    """`fn` (a numpy function) over mx.np arrays."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        kwargs.pop("ctx", None)
        ctx = _context(args, kwargs)
        try:
            result = fn(*_to_numpy(args), **_to_numpy(kwargs))
        except (ValueError, TypeError, IndexError, _np.linalg.LinAlgError) as e:
            raise MXNetError(f"{name}: {e}") from None
        return _from_numpy(result, ctx)
    wrapper.__name__ = name
    return wrapper


# ---- names numpy 2 no longer has -----------------------------------------------------------------

def alltrue(a, axis=None, out=None, keepdims=False):
    """numpy.all (numpy's old name)."""
    return _np.all(a, axis=axis, keepdims=keepdims)


def sometrue(a, axis=None, out=None, keepdims=False):
    """numpy.any (numpy's old name)."""
    return _np.any(a, axis=axis, keepdims=keepdims)


def msort(a):
    """A copy of `a` sorted along its first axis."""
    return _np.sort(a, axis=0)


def trapz(y, x=None, dx=1.0, axis=-1):
    """The trapezoidal-rule integral of y (numpy's old name of trapezoid)."""
    return _np.trapezoid(y, x=x, dx=dx, axis=axis)


def in1d(ar1, ar2, assume_unique=False, invert=False):
    """Whether each element of flattened ar1 is in ar2."""
    return _np.isin(_np.ravel(ar1), ar2, assume_unique=assume_unique, invert=invert)


_WHEN = {"end": 0, "begin": 1, 0: 0, 1: 1}


def _when(when):
    try:
        return _WHEN[when]
    except (KeyError, TypeError):
        raise ValueError(f"when must be 'begin' or 'end' (1 or 0), got {when!r}") from None


def npv(rate, values):
    """Net present value of cash flows `values` (the first at time 0) at discount `rate`."""
    values = _np.asarray(values, _np.float64)
    return float((values / (1 + rate) ** _np.arange(values.shape[-1])).sum(axis=-1))


def _annuity_factor(rate, nper, when):
    rate = _np.asarray(rate, _np.float64)
    growth = (1 + rate) ** nper
    safe = _np.where(rate == 0, 1, rate)
    return growth, _np.where(rate == 0, nper, (1 + rate * when) * (growth - 1) / safe)


def pv(rate, nper, pmt, fv=0, when="end"):
    """Present value of a series of payments `pmt` over `nper` periods with future value fv."""
    growth, factor = _annuity_factor(rate, nper, _when(when))
    return -(fv + pmt * factor) / growth


def _fv(rate, nper, pmt, pv_, when):
    growth, factor = _annuity_factor(rate, nper, when)
    return -(pv_ * growth + pmt * factor)


def _pmt(rate, nper, pv_, fv, when):
    growth, factor = _annuity_factor(rate, nper, when)
    return -(fv + pv_ * growth) / factor


def ppmt(rate, per, nper, pv, fv=0, when="end"):  # noqa: A002 - numpy's argument names
    """The principal part of payment number `per` (1-based)."""
    w = _when(when)
    total = _pmt(rate, nper, pv, fv, w)
    interest = _fv(rate, _np.asarray(per) - 1, total, pv, w) * rate
    if w == 1:
        interest = _np.where(_np.asarray(per) == 1, 0, interest / (1 + rate))
    return total - interest


def mirr(values, finance_rate, reinvest_rate):
    """Modified internal rate of return of cash flows `values`."""
    values = _np.asarray(values, _np.float64)
    n = values.size
    pos, neg = values > 0, values < 0
    if not (pos.any() and neg.any()):
        return _np.nan
    numer = abs(npv(reinvest_rate, values * pos))
    denom = abs(npv(finance_rate, values * neg))
    return (numer / denom) ** (1 / (n - 1)) * (1 + reinvest_rate) - 1


def rate(nper, pmt, pv, fv, when="end", guess=None, tol=None, maxiter=100):  # noqa: A002
    """The interest rate per period solving the annuity equation (Newton's method); nan when it
    does not converge within `maxiter` steps."""
    w = _when(when)
    r = 0.1 if guess is None else guess
    tol = 1e-6 if tol is None else tol

    def residual(x):
        return _fv(x, nper, pmt, pv, w) - fv

    for _ in range(maxiter):
        h = 1e-7 * max(abs(r), 1.0)
        slope = (residual(r + h) - residual(r - h)) / (2 * h)
        if slope == 0:
            break
        step = residual(r) / slope
        r = r - step
        if abs(step) < tol:
            return float(r)
    return _np.nan


_REPLACEMENTS = {"alltrue": alltrue, "sometrue": sometrue, "msort": msort, "trapz": trapz, "in1d": in1d,
                 "npv": npv, "pv": pv, "ppmt": ppmt, "mirr": mirr, "rate": rate}

#: MXNet 1.9.1's mx.np fallback functions
FALLBACK_NAMES = (
    "allclose", "alltrue", "apply_along_axis", "apply_over_axes", "argpartition", "argwhere", "array_equal",
    "array_equiv", "choose", "compress", "corrcoef", "correlate", "count_nonzero", "cov", "digitize", "divmod",
    "extract", "flatnonzero", "float_power", "frexp", "heaviside", "histogram2d", "histogram_bin_edges",
    "histogramdd", "i0", "in1d", "interp", "intersect1d", "isclose", "isin", "ix_", "lexsort",
    "min_scalar_type", "mirr", "modf", "msort", "nanargmax", "nanargmin", "nancumprod", "nancumsum", "nanmax",
    "nanmedian", "nanmin", "nanpercentile", "nanprod", "nanquantile", "npv", "partition", "piecewise",
    "packbits", "poly", "polyadd", "polydiv", "polyfit", "polyint", "polymul", "polysub", "ppmt",
    "promote_types", "ptp", "pv", "rate", "real", "result_type", "rollaxis", "roots", "searchsorted", "select",
    "setdiff1d", "setxor1d", "signbit", "sometrue", "spacing", "take_along_axis", "trapz", "tril_indices_from",
    "trim_zeros", "triu_indices_from", "union1d", "unpackbits", "unwrap", "vander")

for _name in FALLBACK_NAMES:
    globals()[_name] = numpy_fallback(_REPLACEMENTS.get(_name) or getattr(_np, _name), _name)
__all__ += list(FALLBACK_NAMES)
