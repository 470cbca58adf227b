"""Random sampling operators: MXNet's `_random_*`, `_sample_*`, `_random_*_like`,
`_sample_multinomial` and `_shuffle`.

Three families share one set of distributions (`_DISTRIBUTIONS`):
  * `_random_<d>(p1, p2, shape, ctx, dtype)`   — no inputs; scalar parameters; the output
    shape is the `shape` attribute;
  * `_sample_<d>(P1, P2, shape, dtype)`        — per-element parameters as input arrays of one
    shape [s]; the output has shape [s] + shape, row i drawn with the parameters at i;
  * `_random_<d>_like(data, p1, p2)`           — scalar parameters; shape and dtype of `data`.

Parameterisations are MXNet's: uniform on [low, high); normal(loc, scale = std-dev);
gamma(alpha = shape, beta = scale); exponential(lam = rate); poisson(lam);
negative_binomial(k, p) = Poisson(Gamma(k, (1-p)/p)) (mean k(1-p)/p; MXNet's docs call p the
failure probability, its sampler computes this);
generalized_negative_binomial(mu, alpha) = Poisson(Gamma(1/alpha, alpha*mu)) (Poisson(mu) at
alpha = 0); randint on [low, high). Count-valued samplers still return floats (float32 by
default), as MXNet does.

Every sampler draws from `ctx.random()` (the global generator of `symjit.random` unless the
ComputeContext carries its own), so `symjit.random.seed(n)` makes draws reproducible. Values
differ from MXNet's generator; shapes, dtypes and distributions match. Samplers have no
gradient with respect to their parameters (MXNet's zero gradients); `_shuffle` is not
differentiable; `_sample_multinomial(get_prob=True)` differentiates its log-probability output.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Dtype, Float, Int, Param, Shape, Str
from .registry import ComputeContext, Op, merge_shape, register

_FLOAT_DTYPES = ("float32", "float64", "float16")


def _dtype_choice(*choices: str) -> Callable:
    """Attribute parser: None/'None' or one of `choices` (any dtype spelling)."""
    def parse(v):
        if v is None or (isinstance(v, str) and v.strip().strip("'\"") == "None"):
            return None
        name = Dtype(v)
        if name not in choices:
            raise ValueError(f"expected one of {['None', *choices]}, got {name!r}")
        return name
    parse.__name__ = f"DtypeChoice{list(choices)}"
    return parse


# ------------------------------------------------------------------------------------------
# Distributions: checks and draws shared by the three families
# ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Check:
    """One parameter condition: `ok(value) -> bool array/scalar` and the message when it fails."""
    param: str
    ok: Callable
    requirement: str


def _positive(name: str) -> _Check:
    return _Check(name, lambda v: v > 0, "must be positive")


def _non_negative(name: str) -> _Check:
    return _Check(name, lambda v: v >= 0, "must be non-negative")


@dataclass(frozen=True)
class _Distribution:
    """Parameter names and defaults, validity checks and the numpy draw (float64 or int64)."""
    params: tuple                      # ((name, Param), ...) in MXNet's order
    checks: tuple                      # checks of the scalar `_random_*` form (MXNet's CHECKs)
    array_checks: tuple                # checks of the per-element `_sample_*` form
    draw: Callable                     # draw(gen, *params, size) -> ndarray
    pair_check: Callable | None = None  # (p1, p2) -> bool (e.g. low <= high)
    pair_requirement: str = ""


def _draw_uniform(gen, low, high, size):
    return low + (np.asarray(high, np.float64) - low) * gen.random(size)


def _draw_exponential(gen, lam, size):
    return gen.exponential(1.0, size) / lam


def _draw_negative_binomial(gen, k, p, size):
    k = np.asarray(k, np.float64)
    p = np.asarray(p, np.float64)
    return gen.poisson(gen.gamma(k, (1.0 - p) / p, size)).astype(np.float64)


def _draw_generalized_negative_binomial(gen, mu, alpha, size):
    mu = np.asarray(mu, np.float64)
    alpha = np.asarray(alpha, np.float64)
    poisson_only = alpha == 0
    safe_alpha = np.where(poisson_only, 1.0, alpha)
    lam = gen.gamma(1.0 / safe_alpha, safe_alpha * mu, size)
    lam = np.where(poisson_only, mu, lam)
    return gen.poisson(lam).astype(np.float64)


_P_RANGE = _Check("p", lambda v: (v > 0) & (v <= 1), "must be in (0, 1]")

_DISTRIBUTIONS: dict[str, _Distribution] = {
    "uniform": _Distribution(
        params=(("low", Param(Float, 0.0, "Lower bound of the distribution.")),
                ("high", Param(Float, 1.0, "Upper bound of the distribution."))),
        checks=(), array_checks=(), draw=_draw_uniform,
        pair_check=lambda low, high: low <= high,
        pair_requirement="low must be less or equal to high in uniform distribution"),
    "normal": _Distribution(
        params=(("loc", Param(Float, 0.0, "Mean of the distribution.")),
                ("scale", Param(Float, 1.0, "Standard deviation of the distribution."))),
        checks=(_positive("scale"),), array_checks=(_non_negative("sigma"),),
        draw=lambda gen, loc, scale, size: gen.normal(loc, scale, size)),
    "gamma": _Distribution(
        params=(("alpha", Param(Float, 1.0, "Alpha parameter (shape) of the gamma distribution.")),
                ("beta", Param(Float, 1.0, "Beta parameter (scale) of the gamma distribution."))),
        checks=(_positive("alpha"), _positive("beta")),
        array_checks=(_non_negative("alpha"), _non_negative("beta")),
        draw=lambda gen, alpha, beta, size: gen.gamma(alpha, beta, size)),
    "exponential": _Distribution(
        params=(("lam", Param(Float, 1.0, "Lambda parameter (rate) of the exponential distribution.")),),
        checks=(_positive("lam"),), array_checks=(_positive("lam"),), draw=_draw_exponential),
    "poisson": _Distribution(
        params=(("lam", Param(Float, 1.0, "Lambda parameter (rate) of the Poisson distribution.")),),
        checks=(_non_negative("lam"),), array_checks=(_non_negative("lam"),),
        draw=lambda gen, lam, size: gen.poisson(lam, size).astype(np.float64)),
    "negative_binomial": _Distribution(
        params=(("k", Param(Int, 1, "Limit of unsuccessful experiments.")),
                ("p", Param(Float, 1.0, "Failure probability in each experiment."))),
        checks=(_non_negative("k"), _P_RANGE), array_checks=(_non_negative("k"), _P_RANGE),
        draw=_draw_negative_binomial),
    "generalized_negative_binomial": _Distribution(
        params=(("mu", Param(Float, 1.0, "Mean of the negative binomial distribution.")),
                ("alpha", Param(Float, 1.0, "Alpha (dispersion) parameter of the negative "
                                            "binomial distribution."))),
        checks=(_non_negative("mu"), _non_negative("alpha")),
        array_checks=(_non_negative("mu"), _non_negative("alpha")),
        draw=_draw_generalized_negative_binomial),
}

#: input names of the per-element `_sample_*` forms (MXNet's, which differ for normal)
_SAMPLE_INPUTS = {
    "uniform": ("low", "high"), "normal": ("mu", "sigma"), "gamma": ("alpha", "beta"),
    "exponential": ("lam",), "poisson": ("lam",), "negative_binomial": ("k", "p"),
    "generalized_negative_binomial": ("mu", "alpha"),
}


def _validate(op: str, dist: _Distribution, checks: tuple, names: tuple, values: list) -> None:
    """Raise MXNetError naming the op and parameter when a parameter is invalid (NaN included)."""
    by_name = dict(zip(names, values))
    for c in checks:
        v = by_name[c.param]
        if not np.all(c.ok(np.asarray(v))):
            shown = v if np.ndim(v) == 0 else f"an array containing {_first_bad(c.ok, v)}"
            raise MXNetError(f"{op}: parameter {c.param!r} {c.requirement}, got {shown}")
    if dist.pair_check is not None and not np.all(dist.pair_check(np.asarray(values[0]),
                                                                  np.asarray(values[1]))):
        raise MXNetError(f"{op}: {dist.pair_requirement}; got {names[0]}={_show(values[0])}, "
                         f"{names[1]}={_show(values[1])}")


def _first_bad(ok: Callable, v) -> float:
    arr = np.asarray(v)
    return arr[~np.asarray(ok(arr), dtype=bool)].reshape(-1)[0].item()


def _show(v):
    return v if np.ndim(v) == 0 else f"array of shape {np.shape(v)}"


def _sample_shape(op: str, shape: tuple, what: str = "shape") -> tuple:
    """A requested sample shape: every dim positive (MXNet 1.x treats 0 as unknown)."""
    for d in shape:
        if d <= 0:
            raise MXNetError(f"{op}: {what} must have positive dimensions, got {tuple(shape)}")
    return tuple(shape)


def _draw(op: str, fn: Callable) -> np.ndarray:
    """Run a numpy draw, turning numpy's errors into MXNetError naming the op."""
    try:
        return fn()
    except MemoryError:
        raise MXNetError(f"{op}: not enough memory for the requested sample") from None
    except (ValueError, OverflowError) as e:
        raise MXNetError(f"{op}: invalid sampling parameters: {e}") from None


def _to_dtype(samples: np.ndarray, dtype: str, dist_name: str, params: list) -> np.ndarray:
    """Cast float64 samples; for uniform keep the half-open interval [low, high) after rounding."""
    out = np.ascontiguousarray(samples.astype(dtype))
    if dist_name == "uniform":
        low = np.broadcast_to(np.asarray(params[0]).astype(dtype), out.shape)
        high = np.broadcast_to(np.asarray(params[1]).astype(dtype), out.shape)
        bad = (out >= high) & (high > low)
        if np.any(bad):
            out[bad] = np.nextafter(high[bad], low[bad])
    return out


# ------------------------------------------------------------------------------------------
# _random_<d>: scalar parameters, no inputs
# ------------------------------------------------------------------------------------------

class _RandomOp(Op):
    """`_random_<d>`: samples of shape `shape` drawn with scalar parameters."""
    inputs = ()
    kernel = "random"
    is_random = True
    dist_name: str = ""
    default_dtype = "float32"

    @property
    def dist(self) -> _Distribution:
        return _DISTRIBUTIONS[self.dist_name]

    def param_names(self) -> tuple:
        return tuple(n for n, _ in self.dist.params)

    def infer_shape(self, attrs, in_shapes):
        shape = tuple(attrs["shape"])
        if any(d < 0 for d in shape):
            raise MXNetError(f"{self.name}: shape must have positive dimensions, got {shape}")
        return [], [shape if shape else None]

    def infer_type(self, attrs, in_types):
        return [], [attrs["dtype"] or self.default_dtype]

    def output_shape(self, attrs) -> tuple:
        shape = tuple(attrs["shape"])
        if not shape:
            raise MXNetError(f"{self.name}: the output shape is unknown: give shape=(...) "
                             "(mx.nd.random.* functions default it to (1,))")
        return _sample_shape(self.name, shape)

    def compute(self, attrs, inputs, ctx: ComputeContext):
        shape = self.output_shape(attrs)
        names = self.param_names()
        values = [attrs[n] for n in names]
        _validate(self.name, self.dist, self.dist.checks, names, values)
        gen = ctx.random()
        samples = _draw(self.name, lambda: self.dist.draw(gen, *values, shape))
        dtype = self.infer_type(attrs, [])[1][0]
        return [_to_dtype(np.asarray(samples, np.float64), dtype, self.dist_name, values)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return []


def _random_params(dist_name: str, dtypes: tuple = _FLOAT_DTYPES) -> dict:
    params = dict(_DISTRIBUTIONS[dist_name].params)
    params.update({
        "shape": Param(Shape, (), "Shape of the output."),
        "ctx": Param(Str, "", "Context of output, in format [cpu|gpu|cpu_pinned](n). "
                              "Only used for imperative calls."),
        "dtype": Param(_dtype_choice(*dtypes), None,
                       f"DType of the output; defaults to {dtypes[0]} if not defined (dtype=None)."),
    })
    return params


def _register_random(dist_name: str, aliases: tuple) -> None:
    cls = type(f"Random_{dist_name}", (_RandomOp,), {
        "dist_name": dist_name, "params": _random_params(dist_name),
        "doc": f"Draw samples of shape `shape` from a {dist_name.replace('_', ' ')} distribution "
               "with scalar parameters " + ", ".join(n for n, _ in _DISTRIBUTIONS[dist_name].params)
               + "."})
    register(f"_random_{dist_name}", aliases)(cls)


_RANDOM_ALIASES = {
    "uniform": ("random_uniform", "uniform"),
    "normal": ("random_normal", "normal"),
    "gamma": ("random_gamma",),
    "exponential": ("random_exponential",),
    "poisson": ("random_poisson",),
    "negative_binomial": ("random_negative_binomial",),
    "generalized_negative_binomial": ("random_generalized_negative_binomial",),
}
for _name, _aliases in _RANDOM_ALIASES.items():
    _register_random(_name, _aliases)


@register("_random_randint", aliases=("random_randint",))
class RandomRandint(_RandomOp):
    """Draw integers uniformly from [low, high) (int32 unless dtype='int64')."""
    params = {
        "low": Param(Int, doc="Lower bound of the distribution."),
        "high": Param(Int, doc="Upper bound of the distribution."),
        "shape": Param(Shape, (), "Shape of the output."),
        "ctx": Param(Str, "", "Context of output. Only used for imperative calls."),
        "dtype": Param(_dtype_choice("int32", "int64"), None,
                       "DType of the output; defaults to int32 if not defined (dtype=None)."),
    }
    default_dtype = "int32"

    def param_names(self):
        return ("low", "high")

    def compute(self, attrs, inputs, ctx):
        shape = self.output_shape(attrs)
        low, high = attrs["low"], attrs["high"]
        if not low < high:
            raise MXNetError(f"{self.name}: low must be less than high (the range [low, high) "
                             f"must not be empty); got low={low}, high={high}")
        dtype = self.infer_type(attrs, [])[1][0]
        info = np.iinfo(dtype)
        if low < info.min or high - 1 > info.max:
            raise MXNetError(f"{self.name}: the range [{low}, {high}) does not fit dtype {dtype}")
        gen = ctx.random()
        samples = _draw(self.name, lambda: gen.integers(low, high, shape, dtype=np.int64))
        return [np.ascontiguousarray(samples.astype(dtype))]


# ------------------------------------------------------------------------------------------
# _sample_<d>: per-element parameters as inputs
# ------------------------------------------------------------------------------------------

class _SampleOp(Op):
    """`_sample_<d>`: for parameter arrays of shape [s], samples of shape [s] + shape."""
    kernel = "random"
    is_random = True
    dist_name: str = ""
    params = {
        "shape": Param(Shape, (), "Shape to be sampled from each random distribution."),
        "dtype": Param(_dtype_choice("float16", "float32", "float64"), None,
                       "DType of the output; defaults to float32 if not defined (dtype=None)."),
    }

    @property
    def dist(self) -> _Distribution:
        return _DISTRIBUTIONS[self.dist_name]

    def infer_shape(self, attrs, in_shapes):
        sshape = _sample_shape(self.name, tuple(attrs["shape"]))
        merged = None
        for name, s in zip(self.inputs, in_shapes):
            merged = merge_shape(self.name, f"input {name!r}", merged, s)
        out = None if merged is None else tuple(merged) + sshape
        return [merged] * len(in_shapes), [out]

    def infer_type(self, attrs, in_types):
        ins, _ = super().infer_type(attrs, in_types)
        return ins, [attrs["dtype"] or "float32"]

    def compute(self, attrs, inputs, ctx):
        sshape = _sample_shape(self.name, tuple(attrs["shape"]))
        pshape = inputs[0].shape
        for name, x in zip(self.inputs, inputs):
            if x.shape != pshape:
                raise MXNetError(f"{self.name}: shape mismatch for input {name!r}: expected "
                                 f"{pshape}, got {x.shape}")
        if inputs[0].size == 0:
            raise MXNetError(f"{self.name}: parameter arrays must not be empty, got shape {pshape}")
        values = [np.asarray(x, np.float64).reshape(pshape + (1,) * len(sshape)) for x in inputs]
        _validate(self.name, self.dist, self.dist.array_checks, self.inputs, values)
        gen = ctx.random()
        out_shape = pshape + sshape
        samples = _draw(self.name, lambda: self.dist.draw(gen, *values, out_shape))
        dtype = attrs["dtype"] or "float32"
        return [_to_dtype(np.asarray(samples, np.float64), dtype, self.dist_name, values)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.zeros_like(x) for x in inputs]


for _name, _inputs in _SAMPLE_INPUTS.items():
    register(f"_sample_{_name}", aliases=(f"sample_{_name}",))(type(f"Sample_{_name}", (_SampleOp,), {
        "dist_name": _name, "inputs": _inputs,
        "doc": f"Concurrent sampling from multiple {_name.replace('_', ' ')} distributions with "
               f"parameters given per element by {', '.join(_inputs)}; output shape is the "
               "parameters' shape followed by `shape`."}))


# ------------------------------------------------------------------------------------------
# _random_<d>_like: scalar parameters, shape and dtype of an input
# ------------------------------------------------------------------------------------------

class _RandomLikeOp(Op):
    """`_random_<d>_like(data)`: samples with the shape and dtype of `data`."""
    inputs = ("data",)
    kernel = "random"
    is_random = True
    dist_name: str = ""

    @property
    def dist(self) -> _Distribution:
        return _DISTRIBUTIONS[self.dist_name]

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), [in_shapes[0]]

    def infer_type(self, attrs, in_types):
        t = in_types[0]
        if t is not None and t not in _FLOAT_DTYPES:
            raise MXNetError(f"{self.name}: input 'data' must be float16, float32 or float64, got {t}")
        return list(in_types), [t]

    def compute(self, attrs, inputs, ctx):
        data = inputs[0]
        self.infer_type(attrs, [data.dtype.name])
        names = tuple(n for n, _ in self.dist.params)
        values = [attrs[n] for n in names]
        _validate(self.name, self.dist, self.dist.checks, names, values)
        gen = ctx.random()
        samples = _draw(self.name, lambda: self.dist.draw(gen, *values, data.shape))
        return [_to_dtype(np.asarray(samples, np.float64), data.dtype.name, self.dist_name, values)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.zeros_like(inputs[0])]


for _name in _DISTRIBUTIONS:
    register(f"_random_{_name}_like")(type(f"RandomLike_{_name}", (_RandomLikeOp,), {
        "dist_name": _name, "params": dict(_DISTRIBUTIONS[_name].params),
        "doc": f"Samples from a {_name.replace('_', ' ')} distribution with the shape and dtype "
               "of the input."}))


# ------------------------------------------------------------------------------------------
# _sample_multinomial and its backward
# ------------------------------------------------------------------------------------------

def _multinomial_out_shape(data_shape: tuple, shape: tuple) -> tuple:
    if len(data_shape) == 1:
        return tuple(shape) if shape else (1,)
    return tuple(data_shape[:-1]) + tuple(shape)


@register("_sample_multinomial", aliases=("sample_multinomial",))
class SampleMultinomial(Op):
    """Draw category indices from the distributions along the last axis of `data`.

    `data` of shape [s] + (k,) holds prod(s) distributions over k outcomes (non-negative,
    normally summing to 1); the output has shape [s] + shape (one draw each when `shape` is
    empty; (1,) or `shape` for 1-d data). With get_prob=True a second output holds the log
    probability of each drawn index (differentiable w.r.t. `data`).
    """
    inputs = ("data",)
    outputs = ("output", "prob")
    kernel = "random"
    is_random = True
    params = {
        "shape": Param(Shape, (), "Shape to be sampled from each random distribution."),
        "get_prob": Param(Bool, False, "Whether to also return the log probability of the "
                                       "sampled result."),
        "dtype": Param(_dtype_choice("int32", "uint8", "float16", "float32", "float64"), "int32",
                       "DType of the output in case this can't be inferred."),
    }

    def num_outputs(self, attrs):
        return 2 if attrs["get_prob"] else 1

    def infer_shape(self, attrs, in_shapes):
        data = in_shapes[0]
        shape = _sample_shape(self.name, tuple(attrs["shape"]))
        out = None if data is None else _multinomial_out_shape(tuple(data), shape)
        return list(in_shapes), [out] * self.num_outputs(attrs)

    def infer_type(self, attrs, in_types):
        t = in_types[0]
        outs = [attrs["dtype"] or "int32"]
        if attrs["get_prob"]:
            outs.append(t)
        return list(in_types), outs

    def compute(self, attrs, inputs, ctx):
        data = inputs[0]
        shape = _sample_shape(self.name, tuple(attrs["shape"]))
        if data.dtype.kind != "f":
            raise MXNetError(f"{self.name}: input 'data' must be a float array of probabilities, "
                             f"got dtype {data.dtype.name}")
        if data.ndim == 0 or data.shape[-1] == 0 or data.size == 0:
            raise MXNetError(f"{self.name}: input 'data' must have a non-empty last axis of "
                             f"outcomes, got shape {data.shape}")
        if not np.all(np.isfinite(data)) or np.any(data < 0):
            raise MXNetError(f"{self.name}: probabilities in 'data' must be finite and non-negative")
        k = data.shape[-1]
        probs = data.reshape(-1, k)
        n = probs.shape[0]
        m = int(np.prod(shape)) if shape else 1
        gen = ctx.random()
        u = _draw(self.name, lambda: gen.random((n, m), dtype=np.float32)).astype(np.float64)
        cdf = np.cumsum(probs.astype(np.float64), axis=1).astype(np.float32).astype(np.float64)
        # one sorted search over all rows: offset row r by 2r (each cdf row lies in [0, ~1])
        offset = 2.0 * np.arange(n, dtype=np.float64)[:, None]
        flat = np.searchsorted((cdf + offset).reshape(-1), (u + offset).reshape(-1), side="left")
        idx = flat.reshape(n, m) - k * np.arange(n)[:, None]
        idx = np.clip(idx, 0, k - 1)  # rows summing to < 1 can leave u above the last cdf value
        out_shape = _multinomial_out_shape(data.shape, shape)
        results = [np.ascontiguousarray(idx.astype(attrs["dtype"] or "int32").reshape(out_shape))]
        if attrs["get_prob"]:
            with np.errstate(divide="ignore"):
                logp = np.log(np.take_along_axis(probs, idx, axis=1))
            results.append(np.ascontiguousarray(logp.astype(data.dtype).reshape(out_shape)))
        return results

    def grad(self, F, attrs, inputs, outputs, ograds):
        if not attrs["get_prob"]:
            return [F.zeros_like(inputs[0])]
        return [F._backward_sample_multinomial(ograds[1], inputs[0], outputs[0])]


@register("_backward_sample_multinomial")
class BackwardSampleMultinomial(Op):
    """d(sum ograd * log p[sample]) / d data: ograd / p at each drawn index, summed per row."""
    inputs = ("ograd", "data", "sample")
    kernel = "random"
    hidden = True
    differentiable = False

    def infer_shape(self, attrs, in_shapes):
        ograd, data, sample = in_shapes
        sample = merge_shape(self.name, "input 'sample' (shaped like ograd)", ograd, sample)
        if data is not None and len(data) < 1:
            raise MXNetError(f"{self.name}: data must have at least 1 dimension, got {tuple(data)}")
        if data is not None and sample is not None:
            lead = tuple(data[:-1])
            if len(sample) < len(lead) or any(a and b and a != b for a, b in zip(sample, lead)):
                raise MXNetError(f"{self.name}: samples of shape {tuple(sample)} do not index "
                                 f"distributions of shape {tuple(data)}")
        return [sample, data, sample], [data]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[1]]

    def compute(self, attrs, inputs, ctx):
        ograd, data, sample = inputs
        k = data.shape[-1]
        probs = data.reshape(-1, k)
        n = probs.shape[0]
        idx = sample.reshape(n, -1).astype(np.int64)
        g = ograd.reshape(n, -1).astype(np.float64)
        if idx.shape != g.shape or np.any(idx < 0) or np.any(idx >= k):
            raise MXNetError(f"{self.name}: samples of shape {sample.shape} do not index "
                             f"distributions of shape {data.shape}")
        picked = np.take_along_axis(probs, idx, axis=1).astype(np.float64)
        out = np.zeros(probs.shape, np.float64)
        rows = np.broadcast_to(np.arange(n)[:, None], idx.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.add.at(out, (rows, idx), g / picked)
        return [np.ascontiguousarray(out.astype(data.dtype).reshape(data.shape))]


# ------------------------------------------------------------------------------------------
# _shuffle
# ------------------------------------------------------------------------------------------

@register("_shuffle", aliases=("shuffle",))
class Shuffle(Op):
    """Randomly permute `data` along its first axis (rows keep their contents)."""
    inputs = ("data",)
    kernel = "random"
    is_random = True
    inplace = {0: 0}
    differentiable = False

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), [in_shapes[0]]

    def compute(self, attrs, inputs, ctx):
        data = inputs[0]
        if data.ndim == 0:
            return [np.array(data, copy=True)]
        perm = ctx.random().permutation(data.shape[0])
        return [np.ascontiguousarray(data[perm])]

    def grad(self, F, attrs, inputs, outputs, ograds):
        raise MXNetError(f"{self.name}: shuffling is not differentiable")

