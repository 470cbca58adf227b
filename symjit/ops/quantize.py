"""Quantization: `_contrib_quantize` and `_contrib_dequantize` (MXNet 1.9.1's contrib ops).

int8: values in [-r, r] with r = max(|min_range|, |max_range|) map to round-half-away(x * 127 / r),
clipped to [-127, 127]; the returned range is (-r, r). uint8: [min, max] maps to
floor((x - min) * 255 / (max - min) + 0.5), clipped to [0, 255]; the range is returned as given.
`dequantize` is the inverse scaling. Neither op has a gradient.
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Enum, Param
from .registry import Op, register


def _range(op: str, lo: np.ndarray, hi: np.ndarray) -> tuple[float, float]:
    if lo.size != 1 or hi.size != 1:
        raise MXNetError(f"{op}: min_range and max_range must hold one value each, got shapes {lo.shape}, {hi.shape}")
    return float(lo.reshape(-1)[0]), float(hi.reshape(-1)[0])


class _RangeOp(Op):
    differentiable = False

    def infer_shape(self, attrs, in_shapes):
        d = in_shapes[0]
        return [d, (1,), (1,)], [d, (1,), (1,)]


@register("_contrib_quantize")
class Quantize(_RangeOp):
    """(quantized data, min range, max range) of float data given its (min, max) range."""
    inputs = ("data", "min_range", "max_range")
    outputs = ("output", "min_output", "max_output")
    params = {"out_type": Param(Enum("int8", "uint8"), "uint8")}

    def infer_type(self, attrs, in_types):
        t = in_types[0]
        if t is not None and np.dtype(t).kind != "f":
            raise MXNetError(f"{self.name}: data must be floating point, got {t}")
        return [t, "float32", "float32"], [attrs["out_type"], "float32", "float32"]

    def compute(self, attrs, inputs, ctx):
        x, lo_a, hi_a = inputs
        lo, hi = _range(self.name, lo_a, hi_a)
        xf = x.astype(np.float64)
        if attrs["out_type"] == "int8":
            r = max(abs(lo), abs(hi))
            scaled = np.clip(np.abs(xf) * (127.0 / r) + 0.5, 0, 127) if r > 0 else np.zeros_like(xf)
            q = (np.sign(xf) * np.floor(scaled)).astype(np.int8)
            lo, hi = -r, r
        else:
            span = hi - lo
            q = np.clip(np.floor((xf - lo) * (255.0 / span) + 0.5), 0, 255).astype(np.uint8) if span > 0 \
                else np.zeros(x.shape, dtype=np.uint8)
        return [q, np.array([lo], np.float32), np.array([hi], np.float32)]


@register("_contrib_dequantize")
class Dequantize(_RangeOp):
    """Float values of quantized data given the (min, max) range it was quantized with."""
    inputs = ("data", "min_range", "max_range")
    params = {"out_type": Param(Enum("float32"), "float32")}

    def infer_shape(self, attrs, in_shapes):
        return [in_shapes[0], (1,), (1,)], [in_shapes[0]]

    def infer_type(self, attrs, in_types):
        t = in_types[0]
        if t is not None and t not in ("int8", "uint8"):
            raise MXNetError(f"{self.name}: data must be int8 or uint8, got {t}")
        return [t, "float32", "float32"], ["float32"]

    def compute(self, attrs, inputs, ctx):
        q, lo_a, hi_a = inputs
        lo, hi = _range(self.name, lo_a, hi_a)
        if q.dtype == np.int8:
            r = max(abs(lo), abs(hi))
            return [(q.astype(np.float64) * (r / 127.0)).astype(np.float32)]
        if q.dtype != np.uint8:
            raise MXNetError(f"{self.name}: data must be int8 or uint8, got {q.dtype.name}")
        return [(q.astype(np.float64) * ((hi - lo) / 255.0) + lo).astype(np.float32)]
