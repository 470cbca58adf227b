"""NumPy-semantics samplers with array parameters: `_npi_uniform` and `_npi_normal` (MXNet's
names). A parameter is an attribute (a number) or, when `<name>` is None (the default, as
MXNet's frontend always sets the numbers it has), an input array broadcast with the others and
`size`. Gradients flow to array parameters by
reparameterization (normal: y = loc + scale * z; uniform: y = low + (high - low) * u)."""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Dtype, Float, Int, Optional, Param
from .np_base import Literal, NumpyOp, quiet_numpy, register_numpy

__all__ = []


def _size(v):
    v = Literal(v)
    if v is None or isinstance(v, tuple):
        return v
    if isinstance(v, int):
        return (v,)
    raise ValueError(f"expected a size (None, an int or a tuple of ints), got {v!r}")


def _stand_in(shape, dtype) -> np.ndarray:
    """A zero-stride array of `shape` (what shape inference reads; no memory behind it)."""
    return np.broadcast_to(np.zeros((), dtype), tuple(shape))


class _Sampler(NumpyOp):
    """y ~ distribution(p1, p2) of shape `size` (or the parameters' broadcast shape)."""
    is_random = True
    names: ClassVar[tuple] = ()
    #: `size` is prepended to the parameters' broadcast shape (the `_n` samplers)
    size_prefix: ClassVar[bool] = False

    def input_names(self, attrs):
        return [n for n in self.names if attrs[n] is None]

    def out_types(self, attrs, in_types):
        return [np.dtype(attrs["dtype"] or "float32")]

    def _params(self, attrs, arrays):
        it = iter(arrays)
        values = [np.asarray(attrs[n]) if attrs[n] is not None else next(it).astype(np.float64) for n in self.names]
        shape = attrs["size"]
        if shape is None:
            shape = np.broadcast_shapes(*[v.shape for v in values])
        elif self.size_prefix:
            shape = tuple(shape) + np.broadcast_shapes(*[v.shape for v in values])
        try:
            values = [np.broadcast_to(v, shape) for v in values]
        except ValueError:
            raise MXNetError(f"{self.name}: parameters of shapes {[v.shape for v in values]} do not "
                             f"broadcast to size {shape}") from None
        return values, tuple(shape)

    def compute(self, attrs, inputs, ctx):
        values, shape = self._params(attrs, inputs)
        out = self.draw(ctx.random(), *values, shape)
        with quiet_numpy():
            return [np.asarray(out).astype(attrs["dtype"] or "float32")]

    def forward(self, attrs, *xs):      # shape inference: a stand-in of the result's shape
        _, shape = self._params(attrs, xs)
        return _stand_in(shape, attrs["dtype"] or "float32")

    def vjp(self, attrs, xs, ys, dys):
        values, _ = self._params(attrs, xs)
        grads = self.param_grads(values, ys[0].astype(np.float64), dys[0])
        return [g for n, g in zip(self.names, grads) if attrs[n] is None]


@register_numpy("_npi_normal")
class NpNormal(_Sampler):
    """Normal samples with mean `loc` and standard deviation `scale`."""
    names = ("loc", "scale")
    params = {"loc": Param(Optional(Float), None), "scale": Param(Optional(Float), None),
              "size": Param(_size, None), "dtype": Param(Optional(Dtype), None)}

    @staticmethod
    def draw(g, loc, scale, shape):
        if np.any(scale < 0):
            raise MXNetError("_npi_normal: scale must be non-negative")
        return g.normal(loc, scale, shape)

    @staticmethod
    def param_grads(values, y, dy):
        loc, scale = values
        z = (y - loc) / np.where(scale == 0, 1, scale)
        return [dy, dy * z]


@register_numpy("_npi_uniform")
class NpUniform(_Sampler):
    """Uniform samples on [low, high)."""
    names = ("low", "high")
    params = {"low": Param(Optional(Float), None), "high": Param(Optional(Float), None),
              "size": Param(_size, None), "dtype": Param(Optional(Dtype), None)}

    @staticmethod
    def draw(g, low, high, shape):
        return g.uniform(low, high, shape)

    @staticmethod
    def param_grads(values, y, dy):
        low, high = values
        u = (y - low) / np.where(high == low, 1, high - low)
        return [dy * (1 - u), dy * u]


def _location_scale_grads(values, y, dy):
    loc, scale = values
    return [dy, dy * (y - loc) / np.where(scale == 0, 1, scale)]


def _scale_grads(values, y, dy):
    (scale,) = values
    return [dy * y / np.where(scale == 0, 1, scale)]


def _sampler_op(name: str, names: tuple, draw, grads=None, doc: str = "",
                size_prefix: bool = False) -> None:
    params = {n: Param(Optional(Float), None) for n in names}     # None: an input array
    params["size"] = Param(_size, None)
    params["dtype"] = Param(Optional(Dtype), None)
    body = {"names": names, "params": params, "draw": staticmethod(draw), "__doc__": doc,
            "size_prefix": size_prefix}
    if grads is None:
        body["no_gradient"] = True
    else:
        body["param_grads"] = staticmethod(grads)
    register_numpy(name)(type(f"Np{name}", (_Sampler,), body))


def _checked(name, fn):
    """`fn` refusing negative parameters (numpy's samplers raise ValueError deep inside)."""
    def draw(g, *args):
        if any(np.any(v < 0) for v in args[:-1]):
            raise MXNetError(f"{name}: parameters must be non-negative")
        return fn(g, *args)
    return draw


_sampler_op("_npi_gamma", ("shape", "scale"),
            _checked("_npi_gamma", lambda g, k, th, s: g.gamma(k, th, s)), doc="Gamma samples.")
_sampler_op("_npi_exponential", ("scale",),
            _checked("_npi_exponential", lambda g, sc, s: g.exponential(sc, s)), _scale_grads,
            "Exponential samples with mean `scale`.")
_sampler_op("_npi_rayleigh", ("scale",),
            _checked("_npi_rayleigh", lambda g, sc, s: g.rayleigh(sc, s)), _scale_grads, "Rayleigh samples.")
_sampler_op("_npi_gumbel", ("loc", "scale"), lambda g, m, b, s: g.gumbel(m, b, s),
            _location_scale_grads, "Gumbel samples.")
_sampler_op("_npi_logistic", ("loc", "scale"), lambda g, m, b, s: g.logistic(m, b, s),
            _location_scale_grads, "Logistic samples.")
_sampler_op("_npi_pareto", ("a",), _checked("_npi_pareto", lambda g, a, s: g.pareto(a, s)),
            doc="Pareto II (Lomax) samples, as numpy.random.pareto.")
_sampler_op("_npi_powerd", ("a",), _checked("_npi_powerd", lambda g, a, s: g.power(a, s)),
            doc="Power-distribution samples, as numpy.random.power.")
_sampler_op("_npi_weibull", ("a",), _checked("_npi_weibull", lambda g, a, s: g.weibull(a, s)),
            doc="Weibull samples, as numpy.random.weibull.")
_sampler_op("_npi_normal_n", ("loc", "scale"), NpNormal.draw, NpNormal.param_grads,
            "Normal samples of shape size + the parameters' broadcast shape.", size_prefix=True)
_sampler_op("_npi_uniform_n", ("low", "high"), NpUniform.draw, NpUniform.param_grads,
            "Uniform samples of shape size + the parameters' broadcast shape.", size_prefix=True)


@register_numpy("_npi_bernoulli")
class NpBernoulli(_Sampler):
    """Bernoulli samples with probability `prob` (or `logit` when is_logit); float32 by default."""
    names = ("prob",)
    params = {"prob": Param(Optional(Float), None), "logit": Param(Optional(Float), None),
              "size": Param(_size, None), "dtype": Param(Optional(Dtype), None), "is_logit": Param(Bool, False)}
    no_gradient = True

    def input_names(self, attrs):
        given = attrs["logit"] if attrs["is_logit"] else attrs["prob"]
        return [] if given is not None else ["input1"]

    def _params(self, attrs, arrays):
        key = "logit" if attrs["is_logit"] else "prob"
        return super()._params({"prob": attrs[key], "size": attrs["size"]}, arrays)

    def compute(self, attrs, inputs, ctx):
        (p,), shape = self._params(attrs, inputs)
        if attrs["is_logit"]:
            p = 1.0 / (1.0 + np.exp(-p))
        if np.any((p < 0) | (p > 1)):
            raise MXNetError(f"{self.name}: probabilities must be within [0, 1]")
        return [(ctx.random().random(shape) < p).astype(attrs["dtype"] or "float32")]


@register_numpy("_npi_random_randint")
class NpRandint(_Sampler):
    """Integers in [low, high) of `shape` (int64 unless `dtype`)."""
    inputs = ()
    params = {"low": Param(Int, 0), "high": Param(Int, 1), "shape": Param(_size, ()),
              "dtype": Param(Optional(Dtype), None)}
    no_gradient = True

    def input_names(self, attrs):
        return []

    def out_types(self, attrs, in_types):
        return [np.dtype(attrs["dtype"] or "int64")]

    def compute(self, attrs, inputs, ctx):
        if attrs["high"] <= attrs["low"]:
            raise MXNetError(f"{self.name}: low ({attrs['low']}) must be less than high ({attrs['high']})")
        out = ctx.random().integers(attrs["low"], attrs["high"], attrs["shape"] or ())
        return [np.asarray(out).astype(attrs["dtype"] or "int64")]

    def forward(self, attrs):
        return _stand_in(attrs["shape"] or (), attrs["dtype"] or "int64")


@register_numpy("_npi_shuffle")
class NpShuffle(_Sampler):
    """The data with its first axis randomly permuted."""
    inputs = ("data",)
    params = {}
    no_gradient = True

    def input_names(self, attrs):
        return ["data"]

    def out_types(self, attrs, in_types):
        return [in_types[0]]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        return [x[ctx.random().permutation(x.shape[0])] if x.ndim else x.copy()]

    def forward(self, attrs, x):
        return x


@register_numpy("_npi_choice")
class NpChoice(_Sampler):
    """Samples from arange(a) (or the 1-D input `input1` when a is None), with probabilities
    `input2` when weighted, with or without replacement; int64 for arange."""
    params = {"a": Param(Optional(Int), None), "size": Param(_size, None), "replace": Param(Bool, True),
              "weighted": Param(Bool, False)}
    no_gradient = True

    def input_names(self, attrs):
        return (["input1"] if attrs["a"] is None else []) + (["input2"] if attrs["weighted"] else [])

    def out_types(self, attrs, in_types):
        return [np.dtype(np.int64) if attrs["a"] is not None else in_types[0]]

    def _args(self, attrs, inputs):
        it = iter(inputs)
        src = attrs["a"] if attrs["a"] is not None else next(it)
        p = next(it).astype(np.float64) if attrs["weighted"] else None
        if p is not None and abs(p.sum() - 1) < 1e-5:      # float32 probabilities: renormalize
            p = p / p.sum()
        return src, p

    def compute(self, attrs, inputs, ctx):
        src, p = self._args(attrs, inputs)
        try:
            out = ctx.random().choice(src, attrs["size"], replace=attrs["replace"], p=p)
        except ValueError as e:
            raise MXNetError(f"{self.name}: {e}") from None
        return [np.asarray(out, np.int64 if attrs["a"] is not None else src.dtype)]

    def forward(self, attrs, *xs):
        src, _ = self._args(attrs, xs)
        return _stand_in(attrs["size"] or (), np.int64 if attrs["a"] is not None else src.dtype)


@register_numpy("_npi_multinomial")
class NpMultinomial(_Sampler):
    """Counts of `n` draws over outcomes with probabilities `pvals` (or the input `a`), int64."""
    params = {"n": Param(Int, 1), "pvals": Param(Literal, None), "size": Param(_size, None)}
    no_gradient = True

    def input_names(self, attrs):
        return ["a"] if attrs["pvals"] is None else []

    def out_types(self, attrs, in_types):
        return [np.dtype(np.int64)]

    def _pvals(self, attrs, inputs):
        p = np.asarray(attrs["pvals"] if attrs["pvals"] is not None else inputs[0], np.float64)
        if p.ndim != 1 or np.any(p < 0) or p[:-1].sum() > 1 + 1e-12:
            raise MXNetError(f"{self.name}: pvals must be a 1-D probability vector, got {p.tolist()}")
        return p

    def compute(self, attrs, inputs, ctx):
        p = self._pvals(attrs, inputs)
        return [np.asarray(ctx.random().multinomial(attrs["n"], p, attrs["size"]), np.int64)]

    def forward(self, attrs, *xs):
        p = self._pvals(attrs, xs)
        return _stand_in(tuple(attrs["size"] or ()) + p.shape, np.int64)
