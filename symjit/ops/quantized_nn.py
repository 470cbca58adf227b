"""Quantized layers of MXNet 1.9.1 (`contrib.quantized_*`), as its released CPU build runs them
(oneDNN kernels). Every op takes int8 / uint8 data with its real range given as one-element
float32 arrays (min, max) and returns (output, min_output, max_output); none has a gradient.

Ranges: r(x) = max(|min|, |max|) is the real value of the largest code (127 for int8, 255 for
uint8, 2147483647 for int32 outputs).
  * quantized_flatten, quantized_act (relu, int8), quantized_pooling (max / avg, codes kept in
    the input type, averages rounded to nearest even), quantized_embedding (rows of an int8
    weight, indices truncated and clipped as Embedding): the range passes through.
  * quantized_concat: range (min of the mins, max of the maxes); an input whose r differs from
    the output's is rescaled: rint(q * r(in) / r(out)).
  * quantized_fully_connected: the int32 product of the codes plus the int8 bias brought to
    the product's scale, trunc(b * f32(f32(Sd * Sw) / Sb)) with S = 127.5 / r for int8 operands
    and 255.5 / r for uint8 data; range +-(r(data) / Qd) * (r(weight) / 127) * 2147483647,
    Qd = 127 (int8) or 255 (uint8).
  * quantized_conv (uint8 data only, as oneDNN): the int32 convolution of the codes plus the
    bias codes as they are; range as fully_connected's with Qd = 127.
  * quantized_elemwise_add (int8 operands): the sum of the real values x * r / 127.5; without a
    calibrated range an int32 result over +-(r(lhs) + r(rhs)) (x * 2147483647 / range); with one,
    int8 rint(real * 127.5 / r(calib)) clipped to [-128, 127], range the calibrated (min, max).
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Count, Enum, Float, Int, Optional, Param, Str
from .nn_conv import _CONV_PARAMS, _FC_PARAMS, _POOL_PARAMS
from .registry import Op, get_op, register

_F32 = np.float32
_INT32_MAX = _F32(2147483647)
#: the real value of the largest code of each data type (MXNet's float ranges of a quantized type)
_CODE_MAX = {"int8": _F32(127), "uint8": _F32(255)}
#: oneDNN's scale numerators (MXNet's kInt8Range / kUint8Range)
_ONEDNN = {"int8": _F32(127.5), "uint8": _F32(255.5)}


def _range(op: str, what: str, lo: np.ndarray, hi: np.ndarray) -> tuple:
    if lo.size != 1 or hi.size != 1:
        raise MXNetError(f"{op}: {what} range must be one value each (min, max), got shapes {lo.shape}, {hi.shape}")
    return _F32(lo.reshape(-1)[0]), _F32(hi.reshape(-1)[0])


def _max_abs(lo, hi) -> np.float32:
    return max(abs(_F32(lo)), abs(_F32(hi)))


def _ranges(lo, hi) -> list:
    return [np.array([lo], _F32), np.array([hi], _F32)]


def _check_dtype(op: str, what: str, dtype, allowed: tuple) -> None:
    if dtype is not None and np.dtype(dtype).name not in allowed:
        raise MXNetError(f"{op}: {what} must be {' or '.join(allowed)}, got {np.dtype(dtype).name}")


class _Quantized(Op):
    """(output, min_output, max_output) from quantized data and its ranges; no gradient."""
    outputs = ("output", "min_output", "max_output")
    differentiable = False


class _PassRange(_Quantized):
    """Ops on one quantized input (data, min_data, max_data) whose range passes through."""
    inputs = ("data", "min_data", "max_data")
    data_types = ("int8", "uint8")

    def out_shape(self, attrs, shape):
        return shape

    def infer_shape(self, attrs, in_shapes):
        d = in_shapes[0]
        return [d, (1,), (1,)], [None if d is None else self.out_shape(attrs, tuple(d)), (1,), (1,)]

    def infer_type(self, attrs, in_types):
        _check_dtype(self.name, "data", in_types[0], self.data_types)
        return [in_types[0], "float32", "float32"], [in_types[0], "float32", "float32"]

    def values(self, attrs, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def compute(self, attrs, inputs, ctx):
        x, lo_a, hi_a = inputs
        self.infer_type(attrs, [x.dtype.name, None, None])
        lo, hi = _range(self.name, "data", lo_a, hi_a)
        return [np.ascontiguousarray(self.values(attrs, x))] + _ranges(lo, hi)


@register("_contrib_quantized_flatten")
class QuantizedFlatten(_PassRange):
    """data reshaped to (batch, prod(rest))."""

    def out_shape(self, attrs, shape):
        return (shape[0], int(np.prod(shape[1:], dtype=np.int64))) if shape else shape

    def values(self, attrs, x):
        return x.reshape(self.out_shape(attrs, x.shape))


@register("_contrib_quantized_act")
class QuantizedAct(_PassRange):
    """relu of int8 codes (MXNet's oneDNN kernel has no other activation; uint8 is refused)."""
    params = {"act_type": Param(Enum("relu", "sigmoid", "tanh", "softrelu", "softsign"))}
    data_types = ("int8",)

    def values(self, attrs, x):
        if attrs["act_type"] != "relu":
            raise MXNetError(f"{self.name}: only act_type='relu' is supported, got {attrs['act_type']!r}")
        return np.maximum(x, 0).astype(x.dtype)


@register("_contrib_quantized_pooling")
class QuantizedPooling(_PassRange):
    """Max or average pooling (Pooling's geometry) of the codes; averages (over the kernel's
    area, padding and cells past the edge included) rounded to nearest even in the codes' type."""
    params = _POOL_PARAMS

    def _pooling(self, attrs):
        if attrs["pool_type"] not in ("max", "avg"):
            raise MXNetError(f"{self.name}: pool_type must be 'max' or 'avg', got {attrs['pool_type']!r}")
        return get_op("Pooling")

    def out_shape(self, attrs, shape):
        return self._pooling(attrs).infer_shape(attrs, [shape])[1][0]

    def values(self, attrs, x):
        pooling = self._pooling(attrs)
        if attrs["pool_type"] == "avg" and attrs["count_include_pad"] is not False:
            # oneDNN divides every window by the kernel's area, windows past the edge included
            y = pooling.compute(dict(attrs, pool_type="sum"), [x.astype(np.float64)], None)[0]
            area = np.prod(x.shape[2:]) if attrs["global_pool"] else np.prod(attrs["kernel"])
            y = y / float(area)
        else:
            y = pooling.compute(attrs, [x.astype(np.float64)], None)[0]
        return np.rint(y).astype(x.dtype)


@register("_contrib_quantized_embedding")
class QuantizedEmbedding(_Quantized):
    """Rows of an int8 weight picked by `data` (indices truncated, clipped to [0, input_dim));
    the weight's range passes through."""
    inputs = ("data", "weight", "min_weight", "max_weight")
    params = {"input_dim": Param(Int), "output_dim": Param(Int), "dtype": Param(Optional(Str), None),
              "sparse_grad": Param(Optional(Str), None)}

    def infer_shape(self, attrs, in_shapes):
        d = in_shapes[0]
        w = (attrs["input_dim"], attrs["output_dim"])
        return [d, w, (1,), (1,)], [None if d is None else tuple(d) + (w[1],), (1,), (1,)]

    def infer_type(self, attrs, in_types):
        _check_dtype(self.name, "weight", in_types[1], ("int8",))
        return [in_types[0], "int8", "float32", "float32"], ["int8", "float32", "float32"]

    def compute(self, attrs, inputs, ctx):
        data, weight, lo_a, hi_a = inputs
        self.infer_type(attrs, [None, weight.dtype.name])
        if weight.shape != (attrs["input_dim"], attrs["output_dim"]):
            raise MXNetError(f"{self.name}: weight must have shape {(attrs['input_dim'], attrs['output_dim'])}, "
                             f"got {weight.shape}")
        rows = np.clip(data.astype(np.int64), 0, attrs["input_dim"] - 1)
        return [np.ascontiguousarray(weight[rows])] + _ranges(*_range(self.name, "weight", lo_a, hi_a))


@register("_contrib_quantized_concat")
class QuantizedConcat(_Quantized):
    """Concatenation along `dim` of `num_args` quantized arrays, rescaled to a common range."""
    params = {"num_args": Param(Count), "dim": Param(Int, 1)}

    def input_names(self, attrs):
        n = self.positive_count(attrs, "num_args")
        return [f"arg{i}" for i in range(n)] + [f"arg{i}_{m}" for i in range(n) for m in ("min", "max")]

    def infer_shape(self, attrs, in_shapes):
        n = attrs["num_args"]
        data = in_shapes[:n]
        if any(s is None for s in data):
            return list(in_shapes), [None, (1,), (1,)]
        axis = attrs["dim"] % len(data[0])
        rest = {tuple(s[:axis]) + tuple(s[axis + 1:]) for s in data}
        if len(rest) != 1 or len({len(s) for s in data}) != 1:
            raise MXNetError(f"{self.name}: inputs differ outside dim {attrs['dim']}: {[tuple(s) for s in data]}")
        out = list(data[0])
        out[axis] = sum(s[axis] for s in data)
        return [tuple(s) for s in data] + [(1,)] * (2 * n), [tuple(out), (1,), (1,)]

    def infer_type(self, attrs, in_types):
        n = attrs["num_args"]
        known = {t for t in in_types[:n] if t is not None}
        for t in known:
            _check_dtype(self.name, "data", t, ("int8", "uint8"))
        if len(known) > 1:
            raise MXNetError(f"{self.name}: inputs must share one type, got {sorted(known)}")
        t = next(iter(known), None)
        return [t] * n + ["float32"] * (2 * n), [t, "float32", "float32"]

    def compute(self, attrs, inputs, ctx):
        n = attrs["num_args"]
        data = inputs[:n]
        self.infer_type(attrs, [x.dtype.name for x in data] + [None] * (2 * n))
        ranges = [_range(self.name, f"arg{i}", inputs[n + 2 * i], inputs[n + 2 * i + 1]) for i in range(n)]
        lo, hi = min(r[0] for r in ranges), max(r[1] for r in ranges)
        r_out = _max_abs(lo, hi)
        parts = []
        for x, (a, b) in zip(data, ranges):
            r_in = _max_abs(a, b)
            parts.append(x if r_in == r_out else np.rint(x.astype(_F32) * _F32(r_in / r_out)).astype(x.dtype))
        return [np.concatenate(parts, axis=attrs["dim"] % data[0].ndim)] + _ranges(lo, hi)


_CALIB = {"min_calib_range": Param(Optional(Float), None), "max_calib_range": Param(Optional(Float), None)}


def _calibrated(attrs) -> bool:
    return attrs["min_calib_range"] is not None and attrs["max_calib_range"] is not None


@register("_contrib_quantized_elemwise_add")
class QuantizedElemwiseAdd(_Quantized):
    """lhs + rhs of two int8 arrays of one shape (see the module docstring for the result)."""
    inputs = ("lhs", "rhs", "lhs_min", "lhs_max", "rhs_min", "rhs_max")
    params = dict(_CALIB)

    def infer_shape(self, attrs, in_shapes):
        a, b = in_shapes[0], in_shapes[1]
        if a is not None and b is not None and tuple(a) != tuple(b):
            raise MXNetError(f"{self.name}: lhs and rhs shapes differ: {tuple(a)} vs {tuple(b)}")
        s = a if a is not None else b
        return [s, s, (1,), (1,), (1,), (1,)], [s, (1,), (1,)]

    def infer_type(self, attrs, in_types):
        for what, t in zip(("lhs", "rhs"), in_types[:2]):
            _check_dtype(self.name, what, t, ("int8",))
        out = "int8" if _calibrated(attrs) else "int32"
        return ["int8", "int8"] + ["float32"] * 4, [out, "float32", "float32"]

    def compute(self, attrs, inputs, ctx):
        a, b = inputs[:2]
        self.infer_type(attrs, [a.dtype.name, b.dtype.name])
        self.infer_shape(attrs, [a.shape, b.shape])
        ra = _max_abs(*_range(self.name, "lhs", inputs[2], inputs[3]))
        rb = _max_abs(*_range(self.name, "rhs", inputs[4], inputs[5]))
        real = a.astype(np.float64) * (ra / 127.5) + b.astype(np.float64) * (rb / 127.5)
        if not _calibrated(attrs):
            r = _F32(ra + rb)
            out = np.rint(real * (2147483647.0 / float(r))) if r > 0 else np.zeros(a.shape)
            return [np.clip(out, -2147483647, 2147483647).astype(np.int32)] + _ranges(-r, r)
        lo, hi = _F32(attrs["min_calib_range"]), _F32(attrs["max_calib_range"])
        r = _max_abs(lo, hi)
        q = np.rint(real * (127.5 / float(r))) if r > 0 else np.zeros(a.shape)
        return [np.clip(q, -128, 127).astype(np.int8)] + _ranges(lo, hi)


class _QuantizedProduct(_Quantized):
    """quantized_fully_connected / quantized_conv: int32 products of the codes plus the
    rescaled int8 bias (module docstring). Subclasses name the float op computing the product."""
    float_op = ""
    data_types = ("int8", "uint8")

    def bias_codes(self, bias: np.ndarray, dtype: str, rd, rw, rb) -> np.ndarray:
        """The int8 bias at the int32 product's scale: trunc(b * f32(f32(Sd * Sw) / Sb))."""
        sd, sw, sb = _ONEDNN[dtype] / _F32(rd), _ONEDNN["int8"] / _F32(rw), _ONEDNN["int8"] / _F32(rb)
        return np.trunc(bias.astype(_F32) * _F32(_F32(sd * sw) / sb)).astype(np.int64)

    def data_code_max(self, dtype: str) -> np.float32:
        """The code of the data's largest real value in the output range's formula."""
        return _CODE_MAX[dtype]

    def broadcast_bias(self, bias: np.ndarray, ndim: int) -> np.ndarray:
        """The bias shaped to broadcast over the product (channels on axis 1)."""
        return bias.reshape((1, -1) + (1,) * (ndim - 2))

    def input_names(self, attrs):
        if attrs["no_bias"]:
            return ["data", "weight", "min_data", "max_data", "min_weight", "max_weight"]
        return ["data", "weight", "bias", "min_data", "max_data", "min_weight", "max_weight", "min_bias",
                "max_bias"]

    def infer_shape(self, attrs, in_shapes):
        k = 2 if attrs["no_bias"] else 3
        ins, (out,) = get_op(self.float_op).infer_shape(dict(attrs), list(in_shapes[:k]))
        return list(ins) + [(1,)] * (len(in_shapes) - k), [out, (1,), (1,)]

    def infer_type(self, attrs, in_types):
        k = 2 if attrs["no_bias"] else 3
        _check_dtype(self.name, "data", in_types[0], self.data_types)
        _check_dtype(self.name, "weight", in_types[1], ("int8",))
        if k == 3:
            _check_dtype(self.name, "bias", in_types[2], ("int8",))
        ins = [in_types[0]] + ["int8"] * (k - 1) + ["float32"] * (len(in_types) - k)
        return ins, ["int32", "float32", "float32"]

    def compute(self, attrs, inputs, ctx):
        k = 2 if attrs["no_bias"] else 3
        data, weight = inputs[0], inputs[1]
        self.infer_type(attrs, [x.dtype.name for x in inputs])
        ranges = inputs[k:]
        rd = _max_abs(*_range(self.name, "data", ranges[0], ranges[1]))
        rw = _max_abs(*_range(self.name, "weight", ranges[2], ranges[3]))
        float_attrs = dict(attrs, no_bias=True)
        acc = get_op(self.float_op).compute(float_attrs, [data.astype(np.float64), weight.astype(np.float64)],
                                            ctx)[0]
        out = acc.astype(np.int64)
        dtype = data.dtype.name
        if k == 3:
            rb = _max_abs(*_range(self.name, "bias", ranges[4], ranges[5]))
            out = out + self.broadcast_bias(self.bias_codes(inputs[2], dtype, rd, rw, rb), out.ndim)
        r = _F32(_F32(rd / self.data_code_max(dtype)) * _F32(rw / _CODE_MAX["int8"])) * _INT32_MAX
        return [np.clip(out, -2 ** 31, 2 ** 31 - 1).astype(np.int32)] + _ranges(-r, r)


@register("_contrib_quantized_fully_connected")
class QuantizedFullyConnected(_QuantizedProduct):
    """FullyConnected of int8 / uint8 data with int8 weights (and bias), to int32."""
    params = _FC_PARAMS
    float_op = "FullyConnected"

    def broadcast_bias(self, bias, ndim):
        return bias   # on the last axis


@register("_contrib_quantized_conv")
class QuantizedConv(_QuantizedProduct):
    """Convolution of uint8 data with int8 weights (and int8 bias codes), to int32 (oneDNN takes
    no int8 data)."""
    params = _CONV_PARAMS
    float_op = "Convolution"
    data_types = ("uint8",)

    def bias_codes(self, bias, dtype, rd, rw, rb):
        return bias.astype(np.int64)   # MXNet adds the bias codes as they are

    def data_code_max(self, dtype):
        return _CODE_MAX["int8"]   # the output range counts uint8 data as 127 codes
