"""Automatic mixed precision casts: `amp_cast` and `amp_multicast` (MXNet 1.9.1's AMP graph ops).

`amp_cast` converts floating-point data to `dtype` and leaves other dtypes unchanged; its gradient
is cast back to the input's dtype. `amp_multicast` casts `num_outputs` inputs to one common float
dtype: the widest of their float dtypes (the narrowest with `cast_narrow`); non-float inputs keep
their dtype. Both are elementwise, so fusion and codegen see plain casts.
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from . import scalar as S
from .attrs import Bool, Count, Dtype, Param
from .registry import Elementwise, Op, register

_FLOATS = ("float16", "float32", "float64")


def _is_float(dtype) -> bool:
    return dtype is not None and np.dtype(dtype).name in _FLOATS


@register("amp_cast")
class AmpCast(Elementwise):
    """Float data converted to `dtype`; non-float data unchanged."""
    params = {"dtype": Param(Dtype)}

    def out_dtype(self, attrs, in_dtype):
        return attrs["dtype"] if _is_float(in_dtype) else in_dtype

    def expr(self, attrs, x):
        return S.cast(x, attrs["dtype"])

    def infer_type(self, attrs, in_types):
        t = in_types[0]
        return list(in_types), [None if t is None else self.out_dtype(attrs, t)]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        if not _is_float(x.dtype):
            return [np.array(x, copy=True)]
        return [np.ascontiguousarray(S.evaluate(S.cast(S.Input(0), attrs["dtype"]), [x], x.dtype))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.amp_cast(ograds[0], dtype=np.dtype(inputs[0].dtype).name)]


@register("amp_multicast")
class AmpMulticast(Op):
    """`num_outputs` inputs cast to their widest (or, with `cast_narrow`, narrowest) float dtype."""
    params = {"num_outputs": Param(Count), "cast_narrow": Param(Bool, False)}

    def input_names(self, attrs):
        return [f"data_{i}" for i in range(self.positive_count(attrs, "num_outputs"))]

    def num_outputs(self, attrs):
        return attrs["num_outputs"]

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), list(in_shapes)

    def _target(self, attrs, dtypes) -> str | None:
        floats = [np.dtype(t) for t in dtypes if _is_float(t)]
        if not floats:
            return None
        pick = min if attrs["cast_narrow"] else max
        return pick(floats, key=lambda d: d.itemsize).name

    def infer_type(self, attrs, in_types):
        if any(t is None for t in in_types):
            return list(in_types), [None] * len(in_types)
        target = self._target(attrs, in_types)
        return list(in_types), [target if _is_float(t) else t for t in in_types]

    def compute(self, attrs, inputs, ctx):
        if len(inputs) != attrs["num_outputs"]:
            raise MXNetError(f"{self.name}: expected {attrs['num_outputs']} inputs, got {len(inputs)}")
        target = self._target(attrs, [x.dtype for x in inputs])
        return [np.array(x, dtype=target if _is_float(x.dtype) else x.dtype, copy=True) for x in inputs]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.amp_cast(g, dtype=np.dtype(x.dtype).name) for g, x in zip(ograds, inputs)]
