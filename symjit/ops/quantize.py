"""Quantization: `_contrib_quantize`, `_contrib_quantize_v2`, `_contrib_dequantize` and
`_contrib_requantize` (MXNet 1.9.1's contrib ops as its released CPU build runs them: quantize_v2,
dequantize and requantize go through its oneDNN kernels there), in MXNet's float32 arithmetic.

quantize (its own CPU kernel): a zero-centred type T (int8: q = 127) represents [-r, r] with
r = max(|min_range|, |max_range|): sign(x) * trunc(min(|x| * (q / r) + 0.5, q)), range returned
as (-r, r); uint8 represents [min, max] affinely: floor((x - min) * s + 0.5) with the float32
s = 255 / (max - min), clipped to [0, 255], range returned as given.

quantize_v2 (oneDNN): over [lo, hi] = [min_calib_range, max_calib_range] when both are given,
else the data's own [min, max], with r = max(|lo|, |hi|): int8 is
clip(rint(x * (127.5 / r)), -128, 127) with range (-r, r); uint8 ('auto' with a non-negative
calibrated range) is clip(rint(x * (255.5 / r)), 0, 255) with range (lo, hi). int8 / uint8 input
is returned as is, with the calibrated range or the type's full range (-127, 127) / (0, 255).

dequantize (oneDNN): int8 or uint8 data (int32 is refused, as MXNet does) times
max(|min_range|, |max_range|) / 127.5 (int8) or / 255.5 (uint8).

requantize maps int32 data of range (min_range, max_range) to int8: the real values
x * (r_in / 2147483647) are quantized as sign(v) * floor(|v| + 0.5), v = real * (127 / r),
clipped to [-128, 127], r = max(|min_calib_range|, |max_calib_range|) when both are given, else
the largest magnitude among the real values of the data's minimum and maximum. uint8 output
(out_type 'uint8', or 'auto' with a non-negative calibrated range) is refused. None of these
ops has a gradient.
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Enum, Float, Optional, Param
from .registry import Op, register

_F32 = np.float32
#: min(|max|, |min|) of each zero-centred quantized type, as the float32 MXNet computes
_Q_RANGE = {"int8": _F32(127), "int32": _F32(2147483647)}


def _range(op: str, lo: np.ndarray, hi: np.ndarray) -> tuple[float, float]:
    if lo.size != 1 or hi.size != 1:
        raise MXNetError(f"{op}: min_range and max_range must hold one value each, got shapes {lo.shape}, {hi.shape}")
    return _F32(lo.reshape(-1)[0]), _F32(hi.reshape(-1)[0])


def _max_abs(a, b) -> np.float32:
    return max(abs(_F32(a)), abs(_F32(b)))


def to_zero_centered(x: np.ndarray, real_range: np.float32, q: np.float32) -> np.ndarray:
    """sign(x) * trunc(min(|x| * (q / r) + 0.5, q)) in float32 (0 where r is 0)."""
    xf = x.astype(_F32)
    if real_range == 0:
        return np.zeros(x.shape, _F32)
    scaled = np.minimum(np.abs(xf) * _F32(q / real_range) + _F32(0.5), q)
    return np.sign(xf) * np.floor(scaled)


#: oneDNN's quantized ranges (MXNet's kInt8Range / kUint8Range)
_ONEDNN_RANGE = {"int8": _F32(127.5), "uint8": _F32(255.5)}
_LIMITS = {"int8": (-128, 127), "uint8": (0, 255)}


def to_onednn(x: np.ndarray, real_range: np.float32, kind: str) -> np.ndarray:
    """clip(rint(x * (R / r)), type limits) with R = 127.5 (int8) or 255.5 (uint8), in the type
    `kind` (zeros where r is 0): oneDNN's quantization in MXNet's released build."""
    if real_range == 0:
        return np.zeros(x.shape, kind)
    scaled = x.astype(_F32) * _F32(_ONEDNN_RANGE[kind] / _F32(real_range))
    return np.clip(np.rint(scaled), *_LIMITS[kind]).astype(kind)


def to_unsigned(x: np.ndarray, lo: np.float32, hi: np.float32) -> np.ndarray:
    """uint8 of x over [lo, hi]: floor((x - lo) * s + 0.5), s = float32(255 / (hi - lo)), clipped
    to [0, 255] (zeros for an empty range)."""
    span = _F32(hi - lo)
    if not span > 0:
        return np.zeros(x.shape, dtype=np.uint8)
    shifted = (x.astype(_F32) - lo) * _F32(255.0 / np.float64(span))
    return np.clip(np.floor(shifted.astype(np.float64) + 0.5), 0, 255).astype(np.uint8)


def _calibrated(attrs) -> bool:
    return attrs["min_calib_range"] is not None and attrs["max_calib_range"] is not None


def output_type(attrs) -> str:
    """The out_type of quantize_v2 / requantize: 'auto' is uint8 for a calibrated range that is
    non-negative, else int8."""
    kind = attrs["out_type"]
    if kind == "auto":
        kind = "uint8" if _calibrated(attrs) and attrs["min_calib_range"] >= 0 else "int8"
    return kind


_CALIB_PARAMS = {
    "min_calib_range": Param(Optional(Float), None, "calibrated minimum of the real values"),
    "max_calib_range": Param(Optional(Float), None, "calibrated maximum of the real values"),
}


def _range_outputs(lo, hi) -> list:
    return [np.array([lo], _F32), np.array([hi], _F32)]


class _RangeOp(Op):
    inputs = ("data", "min_range", "max_range")
    differentiable = False

    def infer_shape(self, attrs, in_shapes):
        d = in_shapes[0]
        return [d, (1,), (1,)], [d, (1,), (1,)]


@register("_contrib_quantize")
class Quantize(_RangeOp):
    """(quantized data, min range, max range) of float data given its (min, max) range."""
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
        if attrs["out_type"] == "int8":
            r = _max_abs(lo, hi)
            return [to_zero_centered(x, r, _Q_RANGE["int8"]).astype(np.int8)] + _range_outputs(-r, r)
        return [to_unsigned(x, lo, hi)] + _range_outputs(lo, hi)


@register("_contrib_dequantize")
class Dequantize(_RangeOp):
    """Float values of quantized data given the (min, max) range it was quantized with."""
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
        if q.dtype.name not in _ONEDNN_RANGE:
            raise MXNetError(f"{self.name}: data must be int8 or uint8, got {q.dtype.name}")
        return [q.astype(_F32) * _F32(_max_abs(lo, hi) / _ONEDNN_RANGE[q.dtype.name])]


@register("_contrib_requantize")
class Requantize(_RangeOp):
    """int8 data (with its range) from int32 data and its range, over the calibrated range if
    given, else over the data's own range."""
    outputs = ("output", "min_output", "max_output")
    params = {
        "out_type": Param(Enum("auto", "int8", "uint8"), "int8", "output type ('auto': from the calibrated range)"),
        **_CALIB_PARAMS,
    }

    def _out_type(self, attrs) -> str:
        kind = output_type(attrs)
        if kind == "uint8":
            raise MXNetError(f"{self.name}: uint8 output is only supported by MXNet's MKL-DNN backend; "
                             "use out_type='int8'")
        return kind

    def infer_type(self, attrs, in_types):
        t = in_types[0]
        if t is not None and t != "int32":
            raise MXNetError(f"{self.name}: data must be int32, got {t}")
        return ["int32", "float32", "float32"], [self._out_type(attrs), "float32", "float32"]

    def compute(self, attrs, inputs, ctx):
        self._out_type(attrs)
        x, lo_a, hi_a = inputs
        if x.dtype != np.int32:
            raise MXNetError(f"{self.name}: data must be int32, got {x.dtype.name}")
        lo, hi = _range(self.name, lo_a, hi_a)
        in_scale = _F32(_max_abs(lo, hi) / _Q_RANGE["int32"])
        real = x.astype(_F32) * in_scale
        if _calibrated(attrs):
            r = _max_abs(attrs["min_calib_range"], attrs["max_calib_range"])
        elif x.size:
            r = _max_abs(_F32(x.min()) * in_scale, _F32(x.max()) * in_scale)
        else:
            r = _F32(0)
        if r == 0:
            return [np.zeros(x.shape, np.int8)] + _range_outputs(-r, r)
        v = real * _F32(_Q_RANGE["int8"] / r)
        q = np.clip(np.sign(v) * np.floor(np.abs(v) + _F32(0.5)), -128, 127)
        return [q.astype(np.int8)] + _range_outputs(-r, r)


@register("_contrib_quantize_v2")
class QuantizeV2(Op):
    """(quantized data, min range, max range) of float data over the calibrated range, or over
    the data's own (min, max) when no calibration is given; int8 or uint8 data passes through
    with the calibrated range (else the type's full range)."""
    outputs = ("output", "min_output", "max_output")
    params = {
        "out_type": Param(Enum("auto", "int8", "uint8"), "int8", "output type ('auto': from the calibrated range)"),
        **_CALIB_PARAMS,
    }
    differentiable = False

    def infer_shape(self, attrs, in_shapes):
        return [in_shapes[0]], [in_shapes[0], (1,), (1,)]

    def infer_type(self, attrs, in_types):
        t = in_types[0]
        if t in ("int8", "uint8"):
            return [t], [t, "float32", "float32"]
        if t is not None and np.dtype(t).kind != "f":
            raise MXNetError(f"{self.name}: data must be floating point, int8 or uint8, got {t}")
        return [t], [output_type(attrs), "float32", "float32"]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        if x.dtype in (np.int8, np.uint8):
            if _calibrated(attrs):
                lo, hi = attrs["min_calib_range"], attrs["max_calib_range"]
            else:
                lo, hi = (0, 255) if x.dtype == np.uint8 else (-127, 127)
            return [x.copy()] + _range_outputs(lo, hi)
        self.infer_type(attrs, [x.dtype.name])
        if _calibrated(attrs):
            lo, hi = _F32(attrs["min_calib_range"]), _F32(attrs["max_calib_range"])
        elif x.size:
            lo, hi = _F32(x.min()), _F32(x.max())
        else:
            lo = hi = _F32(0)
        r = _max_abs(lo, hi)
        if output_type(attrs) == "uint8":
            return [to_onednn(x, r, "uint8")] + _range_outputs(lo, hi)
        return [to_onednn(x, r, "int8")] + _range_outputs(-r, r)
