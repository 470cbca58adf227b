"""NumPy-semantics samplers with array parameters: `_npi_uniform` and `_npi_normal` (MXNet's
names). A parameter is an attribute (a number) or, when `<name>` is None, an input array
broadcast with the others and `size`. Gradients flow to array parameters by
reparameterization (normal: y = loc + scale * z; uniform: y = low + (high - low) * u)."""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..base import MXNetError
from .attrs import Dtype, Float, Optional, Param
from .np_base import Literal, NumpyOp, register_numpy

__all__ = []


def _size(v):
    v = Literal(v)
    if v is None or isinstance(v, tuple):
        return v
    if isinstance(v, int):
        return (v,)
    raise ValueError(f"expected a size (None, an int or a tuple of ints), got {v!r}")


class _Sampler(NumpyOp):
    """y ~ distribution(p1, p2) of shape `size` (or the parameters' broadcast shape)."""
    is_random = True
    names: ClassVar[tuple] = ()

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
        try:
            values = [np.broadcast_to(v, shape) for v in values]
        except ValueError:
            raise MXNetError(f"{self.name}: parameters of shapes {[v.shape for v in values]} do not "
                             f"broadcast to size {shape}") from None
        return values, tuple(shape)

    def compute(self, attrs, inputs, ctx):
        values, shape = self._params(attrs, inputs)
        out = self.draw(ctx.random(), *values, shape)
        return [np.asarray(out).astype(attrs["dtype"] or "float32")]

    def forward(self, attrs, *xs):      # shape inference: a zero array of the result's shape
        _, shape = self._params(attrs, xs)
        return np.zeros(shape, attrs["dtype"] or "float32")

    def vjp(self, attrs, xs, ys, dys):
        values, _ = self._params(attrs, xs)
        grads = self.param_grads(values, ys[0].astype(np.float64), dys[0])
        return [g for n, g in zip(self.names, grads) if attrs[n] is None]


@register_numpy("_npi_normal")
class NpNormal(_Sampler):
    """Normal samples with mean `loc` and standard deviation `scale`."""
    names = ("loc", "scale")
    params = {"loc": Param(Optional(Float), 0.0), "scale": Param(Optional(Float), 1.0),
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
    params = {"low": Param(Optional(Float), 0.0), "high": Param(Optional(Float), 1.0),
              "size": Param(_size, None), "dtype": Param(Optional(Dtype), None)}

    @staticmethod
    def draw(g, low, high, shape):
        return g.uniform(low, high, shape)

    @staticmethod
    def param_grads(values, y, dy):
        low, high = values
        u = (y - low) / np.where(high == low, 1, high - low)
        return [dy * (1 - u), dy * u]
