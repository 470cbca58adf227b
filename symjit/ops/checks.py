"""Value checks and small contrib functions: `all_finite`, `multi_all_finite`, `reset_arrays`,
`_contrib_allclose`, `_contrib_quadratic`, `_contrib_boolean_mask` (MXNet 1.9.1 semantics).

`reset_arrays` sets all `num_arrays` inputs to zero in place (what Gluon's `zero_grad` runs on
many gradients at once); like MXNet's it has no output, only mutated inputs.

`all_finite` / `multi_all_finite` give a float32 (1,) array: 1 when every element of every input is
finite (and `init_output` is true), else 0. `allclose` is numpy's |a - b| <= atol + rtol |b|
over all elements (NaNs equal with `equal_nan`), as an int32 0-d 0/1 flag. `quadratic` is
a x^2 + b x + c, elementwise (a scalar expression, so it fuses). `boolean_mask` keeps the slices
of `data` along `axis` whose `index` entry is non-zero; its output shape depends on the values,
so it runs eagerly (its gradient scatters back into the kept slices).
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Count, Float, Int, Param
from .registry import Elementwise, LikeInput, Op, register


class _Flag(Op):
    differentiable = False

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), [(1,)]


@register("all_finite")
class AllFinite(_Flag):
    """1 when every element of `data` is finite, else 0 (float32, shape (1,))."""
    params = {"init_output": Param(Bool, True)}

    def infer_type(self, attrs, in_types):
        return list(in_types), ["float32"]

    def compute(self, attrs, inputs, ctx):
        ok = attrs["init_output"] and bool(np.isfinite(inputs[0]).all())
        return [np.array([1.0 if ok else 0.0], np.float32)]


@register("multi_all_finite")
class MultiAllFinite(_Flag):
    """1 when every element of all `num_arrays` inputs is finite, else 0 (float32, shape (1,))."""
    params = {"num_arrays": Param(Count, 1), "init_output": Param(Bool, True)}

    def input_names(self, attrs):
        return [f"arg{i}" for i in range(self.positive_count(attrs, "num_arrays"))]

    def infer_type(self, attrs, in_types):
        return list(in_types), ["float32"]

    def compute(self, attrs, inputs, ctx):
        ok = attrs["init_output"] and all(bool(np.isfinite(x).all()) for x in inputs)
        return [np.array([1.0 if ok else 0.0], np.float32)]


@register("reset_arrays")
class ResetArrays(Op):
    """Every input overwritten with zeros (its shape and dtype kept); no output."""
    differentiable = False
    outputs = ()
    params = {"num_arrays": Param(Count)}

    def input_names(self, attrs):
        return [f"arg{i}" for i in range(self.positive_count(attrs, "num_arrays"))]

    def num_outputs(self, attrs):
        return 0

    def state_targets(self, attrs):
        return self.input_names(attrs)

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), []

    def infer_type(self, attrs, in_types):
        return list(in_types), []

    def compute(self, attrs, inputs, ctx):
        return [np.zeros_like(x) for x in inputs]


@register("_contrib_allclose")
class AllClose(_Flag):
    """1 when |a - b| <= atol + rtol * |b| everywhere (numpy's allclose), else 0 (an int32
    scalar, shape (), as MXNet's)."""
    inputs = ("a", "b")
    params = {"rtol": Param(Float, 1e-5), "atol": Param(Float, 1e-8), "equal_nan": Param(Bool, True)}

    def infer_shape(self, attrs, in_shapes):
        a, b = in_shapes
        if a is not None and b is not None and tuple(a) != tuple(b):
            raise MXNetError(f"{self.name}: shape mismatch between a {tuple(a)} and b {tuple(b)}")
        return [a or b, b or a], [()]

    def infer_type(self, attrs, in_types):
        return list(in_types), ["int32"]

    def compute(self, attrs, inputs, ctx):
        a, b = inputs
        self.infer_shape(attrs, [a.shape, b.shape])
        ok = np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=attrs["rtol"], atol=attrs["atol"],
                         equal_nan=attrs["equal_nan"])
        return [np.array(int(ok), np.int32)]


@register("_contrib_quadratic")
class Quadratic(Elementwise):
    """a * x^2 + b * x + c, elementwise."""
    params = {"a": Param(Float, 0.0), "b": Param(Float, 0.0), "c": Param(Float, 0.0)}

    def expr(self, attrs, x):
        return (x * attrs["a"] + attrs["b"]) * x + attrs["c"]


@register("_contrib_boolean_mask")
class BooleanMask(Op):
    """The slices of `data` along `axis` whose `index` entry is non-zero (axis 0 only, as MXNet)."""
    inputs = ("data", "index")
    params = {"axis": Param(Int, 0)}

    def _axis(self, attrs, ndim: int) -> int:
        a = attrs["axis"] + ndim if attrs["axis"] < 0 else attrs["axis"]
        if not 0 <= a < ndim:
            raise MXNetError(f"{self.name}: axis {attrs['axis']} is out of bounds for {ndim}-d data")
        if a != 0:
            raise MXNetError(f"{self.name}: only axis 0 is supported (MXNet 1.9.1), got axis {attrs['axis']}")
        return a

    def _keep(self, attrs, data: np.ndarray, index: np.ndarray) -> tuple[int, np.ndarray]:
        ax = self._axis(attrs, data.ndim)
        if index.ndim != 1 or index.shape[0] != data.shape[ax]:
            raise MXNetError(f"{self.name}: index must be 1-D with {data.shape[ax]} entries (data's axis "
                             f"{ax}), got shape {index.shape}")
        return ax, np.nonzero(index)[0]

    def infer_shape(self, attrs, in_shapes):
        d = in_shapes[0]
        if d is None:
            return list(in_shapes), [None]
        ax = self._axis(attrs, len(d))
        # the kept count depends on the index values: unknown until run
        return [d, (d[ax],)], [tuple(0 if i == ax else x for i, x in enumerate(d))]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[0]]

    def compute(self, attrs, inputs, ctx):
        ax, keep = self._keep(attrs, *inputs)
        return [np.ascontiguousarray(np.take(inputs[0], keep, axis=ax))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        d = F.apply("_backward_contrib_boolean_mask", [ograds[0], inputs[0], inputs[1]], **attrs)[0]
        return [d, F.zeros_like(inputs[1])]


@register("_backward_contrib_boolean_mask")
class BackwardBooleanMask(BooleanMask):
    """d data of boolean_mask: the output gradient scattered back to the kept slices."""
    inputs = ("ograd", "data", "index")
    hidden = True
    infer_shape = LikeInput.infer_shape
    infer_type = LikeInput.infer_type
    like = 1

    def compute(self, attrs, inputs, ctx):
        dy, data, index = inputs
        ax, keep = self._keep(attrs, data, index)
        out = np.zeros_like(data)
        idx = [slice(None)] * data.ndim
        idx[ax] = keep
        out[tuple(idx)] = dy
        return [out]
