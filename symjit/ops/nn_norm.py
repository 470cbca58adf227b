"""Normalization, activation, dropout and loss-head operators (MXNet 1.x semantics).

Forward passes:
  * BatchNorm, LayerNorm, InstanceNorm, GroupNorm, L2Normalization — normalizations with
    MXNet's parameter names, input names (`gamma`, `beta`, `moving_mean`, `moving_var`),
    extra outputs (`mean`, `var`/`std`, `norm`) and shape inference that fills parameter shapes;
  * LeakyReLU (leaky, prelu, rrelu, elu, selu, gelu) and Dropout (random, with its mask as a
    hidden second output so that the gradient reuses the forward's mask);
  * the loss heads SoftmaxOutput, Linear/Logistic/MAERegressionOutput, MakeLoss and the
    deprecated parameterless make_loss, whose backward ignores the head gradient (MXNet's
    "output layer" semantics), plus smooth_l1 and softmax_cross_entropy.

Gradients are written with registered ops only. Reductions that have no elementwise form live
in hidden `_backward_*` ops with their own numpy reference (as in MXNet), so autodiff output is
ordinary IR. Elementwise activations differentiate through their scalar expressions.

BatchNorm follows MXNet 1.9.1's CPU kernels exactly:
  * training (is_train and not use_global_stats): batch mean and *biased* batch variance
    normalize the data; output `var` holds the inverse standard deviation 1/sqrt(var + eps);
    the moving statistics become moving*momentum + batch*(1 - momentum), with the biased
    variance (returned after the outputs, `updates_aux`, written in place by the frontend);
  * inference: the moving statistics normalize; `mean` = moving_mean, `var` = 1/sqrt(moving_var + eps);
  * fix_gamma=True treats gamma as 1 and gives it a zero gradient;
  * gradients of the `mean`/`var` outputs are blocked; the data gradient uses the batch-statistics
    formula when the backward runs in training mode (MXNet decides by the backward's is_train).

Invariant of every `compute` here: inputs are never mutated, outputs are fresh contiguous arrays
in the dtype `infer_type` promises.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..base import MXNetError
from . import scalar as S
from .attrs import Bool, Enum, Float, Int, Optional, Param, Shape as ShapeAttr, Str
from .registry import Elementwise, Op, get_op, merge_shape, register, shape_known

# --------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------


def _acc_dtype(dtype) -> np.dtype:
    """The dtype statistics are accumulated in: float32 for float16 data, else the data's own."""
    dt = np.dtype(dtype)
    return np.dtype(np.float32) if dt == np.float16 else dt


def _require_float(op: str, name: str, x: np.ndarray) -> None:
    """Normalizations are defined on floating-point arrays only (MXNet's REAL_TYPE_SWITCH)."""
    if not np.issubdtype(x.dtype, np.floating):
        raise MXNetError(f"{op}: input {name!r} must be a floating-point array, got {x.dtype.name}")


def _norm_axis(op: str, axis: int, ndim: int) -> int:
    """Resolve a possibly negative axis; raises MXNetError naming the op when out of range."""
    if not -ndim <= axis < ndim:
        raise MXNetError(f"{op}: axis {axis} is out of range for data with {ndim} dimensions")
    return axis % ndim


def _along(vec: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """View a 1-D per-channel vector as broadcastable along `axis` of an ndim array."""
    shape = [1] * ndim
    shape[axis] = vec.shape[0]
    return vec.reshape(shape)


def _check_shape(op: str, name: str, x: np.ndarray, expected: tuple) -> None:
    if tuple(x.shape) != tuple(expected):
        raise MXNetError(f"{op}: shape mismatch for input {name!r}: expected {tuple(expected)}, "
                         f"got {tuple(x.shape)}")


def _out(x: np.ndarray, dtype) -> np.ndarray:
    """A fresh contiguous array of `dtype` (never a view of an input)."""
    return np.array(x, dtype=dtype, copy=True, order="C")


def _fill_vector(op: str, names: Sequence[str], shapes: list, size: int | None) -> tuple[list, int | None]:
    """Unify 1-D parameter shapes (gamma, beta, ...) with a channel count, in either direction.

    Returns the filled shapes and the channel count learnt from them (None if still unknown).
    """
    known = size if size else None
    for name, s in zip(names, shapes):
        if s is not None and len(s) != 1:
            raise MXNetError(f"{op}: shape mismatch for input {name!r}: expected "
                             f"({known if known else 0},), got {tuple(s)}")
        if s is not None and s[0]:
            if known and s[0] != known:
                raise MXNetError(f"{op}: shape mismatch for input {name!r}: expected ({known},), "
                                 f"got {tuple(s)}")
            known = s[0]
    filled = [(known,) if known else (None if s is None else tuple(s)) for s in shapes]
    return filled, known


def _standardize(x: np.ndarray, axes: tuple, eps: float):
    """(x - mean) / sqrt(var + eps) over `axes` with the biased variance; returns xhat, mean, var."""
    mean = x.mean(axis=axes, keepdims=True)
    xc = x - mean
    var = (xc * xc).mean(axis=axes, keepdims=True)
    return xc / np.sqrt(var + eps), mean, var


def _standardized_backward(dy_scaled: np.ndarray, xhat: np.ndarray, inv_std: np.ndarray, axes: tuple):
    """d(loss)/dx for y = xhat(x) where xhat standardizes over `axes` with the batch's own moments.

    `dy_scaled` is the gradient w.r.t. xhat (head gradient times gamma). The exact formula
    dx = inv_std * (g - mean(g) - xhat * mean(g * xhat)) with means over `axes`.
    """
    g = dy_scaled
    return inv_std * (g - g.mean(axis=axes, keepdims=True)
                      - xhat * (g * xhat).mean(axis=axes, keepdims=True))


# --------------------------------------------------------------------------------------
# BatchNorm
# --------------------------------------------------------------------------------------

_BN_PARAMS = {
    "eps": Param(Float, 1e-3, "added to the variance to avoid division by zero"),
    "momentum": Param(Float, 0.9, "moving = moving * momentum + batch * (1 - momentum)"),
    "fix_gamma": Param(Bool, True, "treat gamma as 1 (and give it a zero gradient)"),
    "use_global_stats": Param(Bool, False, "normalize with the moving statistics even in training"),
    "output_mean_var": Param(Bool, False, "also output the mean and the inverse std"),
    "axis": Param(Int, 1, "the channel axis"),
    "cudnn_off": Param(Bool, False, "accepted for compatibility; no effect"),
    "min_calib_range": Param(Optional(Float), None, "quantization calibration (ignored)"),
    "max_calib_range": Param(Optional(Float), None, "quantization calibration (ignored)"),
}


def _bn_param_dtype(data_dtype: str) -> str:
    """MXNet keeps BatchNorm parameters and statistics in float32 for float16 data."""
    return "float32" if data_dtype == "float16" else data_dtype


@register("BatchNorm", aliases=("BatchNorm_v1",))
class BatchNorm(Op):
    """Batch normalization over every axis but `axis`, with moving statistics as aux states.

    out = (data - mean) / sqrt(var + eps) * gamma + beta; see the module docstring for which
    statistics are used in training and inference and what the `mean`/`var` outputs hold.
    """
    params = _BN_PARAMS
    inputs = ("data", "gamma", "beta", "moving_mean", "moving_var")
    aux_names = ("moving_mean", "moving_var")
    outputs = ("output", "mean", "var")
    kernel = "norm"
    updates_aux = True

    def num_visible_outputs(self, attrs):
        return 3 if attrs["output_mean_var"] else 1

    def infer_shape(self, attrs, in_shapes):
        data, *vecs = in_shapes
        c = None
        if data is not None:
            axis = _norm_axis(self.name, attrs["axis"], len(data))
            c = data[axis] or None
        vecs, c = _fill_vector(self.name, self.inputs[1:], list(vecs), c)
        if data is not None and not data[axis] and c:
            data = tuple(c if i == axis else d for i, d in enumerate(data))
        vec = (c,) if c else None
        return [None if data is None else tuple(data), *vecs], [None if data is None else tuple(data), vec, vec]

    def infer_type(self, attrs, in_types):
        t = in_types[0]
        if t is None:
            return list(in_types), [None, None, None]
        p = _bn_param_dtype(t)
        for name, pt in zip(self.inputs[1:], in_types[1:]):
            if pt is not None and pt != p:
                raise MXNetError(f"BatchNorm: dtype mismatch for input {name!r}: expected {p}, got {pt}")
        return [t, p, p, p, p], [t, p, p]

    def compute(self, attrs, inputs, ctx):
        x, gamma, beta, mmean, mvar = inputs
        _require_float(self.name, "data", x)
        axis = _norm_axis(self.name, attrs["axis"], x.ndim)
        c = x.shape[axis]
        for name, v in zip(self.inputs[1:], inputs[1:]):
            _check_shape(self.name, name, v, (c,))
        acc = _acc_dtype(x.dtype)
        xs = x.astype(acc)
        red = tuple(i for i in range(x.ndim) if i != axis)
        eps = attrs["eps"]
        training = ctx.is_train and not attrs["use_global_stats"]
        if training:
            mean = xs.mean(axis=red)
            xc = xs - _along(mean, x.ndim, axis)
            var = (xc * xc).mean(axis=red)
            with np.errstate(divide="ignore"):
                inv_std = np.where(var + eps == 0, 0.0, 1.0 / np.sqrt(var + eps)).astype(acc)
        else:
            mean = mmean.astype(acc)
            var = mvar.astype(acc)
            xc = xs - _along(mean, x.ndim, axis)
            inv_std = (1.0 / np.sqrt(var + eps)).astype(acc)
        g = np.ones(c, acc) if attrs["fix_gamma"] else gamma.astype(acc)
        out = xc * _along(inv_std * g, x.ndim, axis) + _along(beta.astype(acc), x.ndim, axis)
        results = [_out(out, x.dtype), _out(mean, gamma.dtype), _out(inv_std, gamma.dtype)]
        if training:
            m = attrs["momentum"]
            results.append(_out(mmean.astype(acc) * m + mean * (1 - m), mmean.dtype))
            results.append(_out(mvar.astype(acc) * m + var * (1 - m), mvar.dtype))
        return results

    def grad(self, F, attrs, inputs, outputs, ograds):
        x, gamma, _beta, mmean, mvar = inputs
        dx, dgamma, dbeta = F.apply("_backward_BatchNorm", [ograds[0], outputs[1], outputs[2], x, gamma],
                                    **attrs)
        return [dx, dgamma, dbeta, F.zeros_like(mmean), F.zeros_like(mvar)]


@register("_backward_BatchNorm")
class BatchNormBackward(Op):
    """Gradients of BatchNorm w.r.t. data, gamma and beta from the saved mean and inverse std.

    Training mode (is_train and not use_global_stats) differentiates through the batch
    statistics; otherwise the statistics are constants (MXNet's BatchNormBackwardImpl).
    """
    params = _BN_PARAMS
    inputs = ("ograd", "mean", "invstd", "data", "gamma")
    outputs = ("data_grad", "gamma_grad", "beta_grad")
    kernel = "norm"
    hidden = True
    forward_op = "BatchNorm"
    forward_inputs = {"data": "data", "gamma": "gamma"}
    forward_outputs = {"ograd": 0, "mean": 1, "invstd": 2}

    def infer_shape(self, attrs, in_shapes):
        dy, mean, invstd, data, gamma = in_shapes
        data = merge_shape(self.name, "input 'data'", data, dy)
        vecs, c = _fill_vector(self.name, ("mean", "invstd", "gamma"), [mean, invstd, gamma], None)
        vec = (c,) if c else None
        return [data, *vecs[:2], data, vecs[2]], [data, vec, vec]

    def infer_type(self, attrs, in_types):
        t, p = in_types[0] or in_types[3], in_types[4] or in_types[1]
        return list(in_types), [t, p, p]

    def compute(self, attrs, inputs, ctx):
        dy, mean, inv_std, x, gamma = inputs
        axis = _norm_axis(self.name, attrs["axis"], x.ndim)
        c = x.shape[axis]
        _check_shape(self.name, "ograd", dy, x.shape)
        for name, v in (("mean", mean), ("invstd", inv_std), ("gamma", gamma)):
            _check_shape(self.name, name, v, (c,))
        acc = _acc_dtype(x.dtype)
        red = tuple(i for i in range(x.ndim) if i != axis)
        dys = dy.astype(acc)
        inv_b = _along(inv_std.astype(acc), x.ndim, axis)
        xhat = (x.astype(acc) - _along(mean.astype(acc), x.ndim, axis)) * inv_b
        w = np.ones(c, acc) if attrs["fix_gamma"] else gamma.astype(acc)
        w_b = _along(w, x.ndim, axis)
        if ctx.is_train and not attrs["use_global_stats"]:
            dx = _standardized_backward(dys * w_b, xhat, inv_b, red)
        else:
            dx = dys * w_b * inv_b
        dgamma = np.zeros(c, acc) if attrs["fix_gamma"] else (dys * xhat).sum(axis=red)
        dbeta = dys.sum(axis=red)
        return [_out(dx, x.dtype), _out(dgamma, gamma.dtype), _out(dbeta, gamma.dtype)]


# --------------------------------------------------------------------------------------
# SyncBatchNorm (contrib)
# --------------------------------------------------------------------------------------

_SYNC_BN_PARAMS = {
    **{k: _BN_PARAMS[k] for k in ("eps", "momentum", "fix_gamma", "use_global_stats")},
    "output_mean_var": Param(Bool, False, "also output the mean and the variance"),
    "ndev": Param(Int, 1, "devices whose batches share statistics (one process: their union)"),
    "key": Param(Str, "", "synchronization key of the layer"),
}


def _sync_bn_as_batch_norm(attrs) -> dict:
    """The BatchNorm attributes SyncBatchNorm computes with (channel axis 1)."""
    return {k: attrs[k] for k in ("eps", "momentum", "fix_gamma", "use_global_stats", "output_mean_var")}


@register("_contrib_SyncBatchNorm")
class SyncBatchNorm(BatchNorm):
    """MXNet's cross-device BatchNorm (channel axis 1). Every device of one process computes on
    its own batch here, so the statistics are the batch's, exactly BatchNorm's; the difference
    is the third output, which holds the biased batch variance (not its inverse square root).
    In inference (or with use_global_stats) `mean` and `var` are the moving statistics."""
    params = _SYNC_BN_PARAMS

    def infer_shape(self, attrs, in_shapes):
        if attrs["ndev"] < 1:
            raise MXNetError(f"{self.name}: ndev must be positive, got {attrs['ndev']}")
        return super().infer_shape(dict(attrs, axis=1), in_shapes)

    def compute(self, attrs, inputs, ctx):
        bn = get_op("BatchNorm")
        out, mean, inv_std, *aux = bn.compute(bn.parse(_sync_bn_as_batch_norm(attrs)), inputs, ctx)
        if ctx.is_train and not attrs["use_global_stats"]:
            inv = inv_std.astype(np.float64)
            with np.errstate(divide="ignore"):
                var = np.where(inv > 0, 1.0 / (inv * inv) - attrs["eps"], 0.0)
        else:
            mean, var = inputs[3], inputs[4]
        return [out, _out(mean, inputs[1].dtype), _out(var, inputs[1].dtype), *aux]

    def grad(self, F, attrs, inputs, outputs, ograds):
        x, gamma, _beta, mmean, mvar = inputs
        inv_std = F.rsqrt(F._plus_scalar(outputs[2], scalar=attrs["eps"]))
        dx, dgamma, dbeta = F.apply("_backward_BatchNorm", [ograds[0], outputs[1], inv_std, x, gamma],
                                    **_sync_bn_as_batch_norm(attrs))
        return [dx, dgamma, dbeta, F.zeros_like(mmean), F.zeros_like(mvar)]


# --------------------------------------------------------------------------------------
# LayerNorm, InstanceNorm, GroupNorm
# --------------------------------------------------------------------------------------

@register("LayerNorm")
class LayerNorm(Op):
    """out = (data - mean) / std * gamma + beta, moments over `axis`; std = sqrt(var + eps).

    Outputs `mean` and `std` keep `axis` with size 1; gamma and beta have shape (data.shape[axis],).
    """
    params = {
        "axis": Param(Int, -1, "the axis normalized over"),
        "eps": Param(Float, 1e-5, "added to the variance"),
        "output_mean_var": Param(Bool, False, "also output mean and std"),
    }
    inputs = ("data", "gamma", "beta")
    outputs = ("output", "mean", "std")
    kernel = "norm"

    def num_visible_outputs(self, attrs):
        return 3 if attrs["output_mean_var"] else 1

    def infer_shape(self, attrs, in_shapes):
        data, gamma, beta = in_shapes
        c = None
        if data is not None:
            axis = _norm_axis(self.name, attrs["axis"], len(data))
            c = data[axis] or None
        (gamma, beta), c = _fill_vector(self.name, ("gamma", "beta"), [gamma, beta], c)
        if data is None:
            return [None, gamma, beta], [None, None, None]
        data = tuple(c if (i == axis and not d and c) else d for i, d in enumerate(data))
        moments = tuple(1 if i == axis else d for i, d in enumerate(data))
        return [data, gamma, beta], [data, moments, moments]

    def compute(self, attrs, inputs, ctx):
        x, gamma, beta = inputs
        _require_float(self.name, "data", x)
        axis = _norm_axis(self.name, attrs["axis"], x.ndim)
        _check_shape(self.name, "gamma", gamma, (x.shape[axis],))
        _check_shape(self.name, "beta", beta, (x.shape[axis],))
        acc = _acc_dtype(x.dtype)
        xhat, mean, var = _standardize(x.astype(acc), (axis,), attrs["eps"])
        out = xhat * _along(gamma.astype(acc), x.ndim, axis) + _along(beta.astype(acc), x.ndim, axis)
        std = np.sqrt(var + attrs["eps"])
        return [_out(out, x.dtype), _out(mean, x.dtype), _out(std, x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        x, gamma, _ = inputs
        return F.apply("_backward_LayerNorm", [ograds[0], x, gamma, outputs[1], outputs[2]], **attrs)


@register("_backward_LayerNorm")
class LayerNormBackward(Op):
    """Gradients of LayerNorm w.r.t. data, gamma, beta from the saved mean and std."""
    params = LayerNorm.params
    inputs = ("ograd", "data", "gamma", "mean", "std")
    outputs = ("data_grad", "gamma_grad", "beta_grad")
    kernel = "norm"
    hidden = True
    forward_op = "LayerNorm"
    forward_inputs = {"data": "data", "gamma": "gamma"}
    forward_outputs = {"ograd": 0, "mean": 1, "std": 2}

    def infer_shape(self, attrs, in_shapes):
        dy, data, gamma, mean, std = in_shapes
        data = merge_shape(self.name, "input 'data'", data, dy)
        return [data, data, gamma, mean, std], [data, gamma, gamma]

    def infer_type(self, attrs, in_types):
        t = in_types[0] or in_types[1]
        return list(in_types), [t, in_types[2] or t, in_types[2] or t]

    def compute(self, attrs, inputs, ctx):
        dy, x, gamma, mean, std = inputs
        axis = _norm_axis(self.name, attrs["axis"], x.ndim)
        _check_shape(self.name, "ograd", dy, x.shape)
        moments = tuple(1 if i == axis else d for i, d in enumerate(x.shape))
        _check_shape(self.name, "mean", mean, moments)
        _check_shape(self.name, "std", std, moments)
        acc = _acc_dtype(x.dtype)
        inv = 1.0 / std.astype(acc)
        xhat = (x.astype(acc) - mean.astype(acc)) * inv
        dys = dy.astype(acc)
        others = tuple(i for i in range(x.ndim) if i != axis)
        dx = _standardized_backward(dys * _along(gamma.astype(acc), x.ndim, axis), xhat, inv, (axis,))
        return [_out(dx, x.dtype), _out((dys * xhat).sum(axis=others), gamma.dtype),
                _out(dys.sum(axis=others), gamma.dtype)]


def _grouped(x: np.ndarray, groups: int) -> np.ndarray:
    """View (N, C, *spatial) as (N, groups, C // groups * prod(spatial))."""
    return x.reshape(x.shape[0], groups, -1)


def _check_rank3(op: str, ndim: int) -> None:
    if ndim < 3:
        raise MXNetError(f"{op}: data must have at least 3 dimensions (batch, channel, spatial...), "
                         f"got {ndim}")


@register("InstanceNorm")
class InstanceNorm(Op):
    """Normalize each (sample, channel) over the spatial axes; gamma and beta per channel.

    Outputs `mean` and `var` (biased variance) have shape (N, C) and are hidden.
    """
    params = {"eps": Param(Float, 1e-3, "added to the variance")}
    inputs = ("data", "gamma", "beta")
    outputs = ("output", "mean", "var")
    kernel = "norm"

    def num_visible_outputs(self, attrs):
        return 1

    def infer_shape(self, attrs, in_shapes):
        data, gamma, beta = in_shapes
        c = None
        if data is not None:
            _check_rank3(self.name, len(data))
            c = data[1] or None
        (gamma, beta), c = _fill_vector(self.name, ("gamma", "beta"), [gamma, beta], c)
        if data is None:
            return [None, gamma, beta], [None, None, None]
        data = tuple(c if (i == 1 and not d and c) else d for i, d in enumerate(data))
        return [data, gamma, beta], [data, (data[0], data[1]), (data[0], data[1])]

    def compute(self, attrs, inputs, ctx):
        x, gamma, beta = inputs
        _require_float(self.name, "data", x)
        _check_rank3(self.name, x.ndim)
        n, c = x.shape[:2]
        _check_shape(self.name, "gamma", gamma, (c,))
        _check_shape(self.name, "beta", beta, (c,))
        acc = _acc_dtype(x.dtype)
        xhat, mean, var = _standardize(_grouped(x.astype(acc), c), (2,), attrs["eps"])
        out = xhat * gamma.astype(acc).reshape(1, c, 1) + beta.astype(acc).reshape(1, c, 1)
        return [_out(out.reshape(x.shape), x.dtype), _out(mean.reshape(n, c), x.dtype),
                _out(var.reshape(n, c), x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        x, gamma, _ = inputs
        return F.apply("_backward_InstanceNorm", [ograds[0], x, gamma, outputs[1], outputs[2]], **attrs)


@register("_backward_InstanceNorm")
class InstanceNormBackward(Op):
    """Gradients of InstanceNorm w.r.t. data, gamma, beta from the saved mean and variance."""
    params = InstanceNorm.params
    inputs = ("ograd", "data", "gamma", "mean", "var")
    outputs = ("data_grad", "gamma_grad", "beta_grad")
    kernel = "norm"
    hidden = True
    forward_op = "InstanceNorm"
    forward_inputs = {"data": "data", "gamma": "gamma"}
    forward_outputs = {"ograd": 0, "mean": 1, "var": 2}

    def infer_shape(self, attrs, in_shapes):
        dy, data, gamma, mean, var = in_shapes
        data = merge_shape(self.name, "input 'data'", data, dy)
        return [data, data, gamma, mean, var], [data, gamma, gamma]

    def infer_type(self, attrs, in_types):
        t = in_types[0] or in_types[1]
        return list(in_types), [t, in_types[2] or t, in_types[2] or t]

    def compute(self, attrs, inputs, ctx):
        dy, x, gamma, mean, var = inputs
        _check_rank3(self.name, x.ndim)
        n, c = x.shape[:2]
        _check_shape(self.name, "ograd", dy, x.shape)
        for name, v in (("mean", mean), ("var", var)):
            _check_shape(self.name, name, v, (n, c))
        acc = _acc_dtype(x.dtype)
        inv = 1.0 / np.sqrt(var.astype(acc).reshape(n, c, 1) + attrs["eps"])
        xhat = (_grouped(x.astype(acc), c) - mean.astype(acc).reshape(n, c, 1)) * inv
        dys = _grouped(dy.astype(acc), c)
        dx = _standardized_backward(dys * gamma.astype(acc).reshape(1, c, 1), xhat, inv, (2,))
        return [_out(dx.reshape(x.shape), x.dtype), _out((dys * xhat).sum(axis=(0, 2)), gamma.dtype),
                _out(dys.sum(axis=(0, 2)), gamma.dtype)]


@register("GroupNorm")
class GroupNorm(Op):
    """Split channels into `num_groups` groups and normalize each (sample, group).

    As in MXNet 1.x, gamma and beta have one value per group (shape (num_groups,)); outputs
    `mean` and `std` (= sqrt(var + eps)) have shape (N, num_groups).
    """
    params = {
        "num_groups": Param(Int, 1, "number of channel groups"),
        "eps": Param(Float, 1e-5, "added to the variance"),
        "output_mean_var": Param(Bool, False, "also output mean and std"),
    }
    inputs = ("data", "gamma", "beta")
    outputs = ("output", "mean", "std")
    kernel = "norm"

    def num_visible_outputs(self, attrs):
        return 3 if attrs["output_mean_var"] else 1

    def _check_groups(self, attrs, channels: int) -> int:
        g = attrs["num_groups"]
        if g <= 0:
            raise MXNetError(f"GroupNorm: num_groups must be positive, got {g}")
        if channels and channels % g:
            raise MXNetError(f"GroupNorm: the number of channels ({channels}) must be divisible by "
                             f"num_groups ({g})")
        return g

    def infer_shape(self, attrs, in_shapes):
        data, gamma, beta = in_shapes
        g = self._check_groups(attrs, 0)
        (gamma, beta), _ = _fill_vector(self.name, ("gamma", "beta"), [gamma, beta], g)
        if data is None:
            return [None, gamma, beta], [None, None, None]
        _check_rank3(self.name, len(data))
        self._check_groups(attrs, data[1])
        moments = (data[0], g)
        return [tuple(data), gamma, beta], [tuple(data), moments, moments]

    def compute(self, attrs, inputs, ctx):
        x, gamma, beta = inputs
        _require_float(self.name, "data", x)
        _check_rank3(self.name, x.ndim)
        g = self._check_groups(attrs, x.shape[1])
        _check_shape(self.name, "gamma", gamma, (g,))
        _check_shape(self.name, "beta", beta, (g,))
        acc = _acc_dtype(x.dtype)
        n = x.shape[0]
        xhat, mean, var = _standardize(_grouped(x.astype(acc), g), (2,), attrs["eps"])
        out = xhat * gamma.astype(acc).reshape(1, g, 1) + beta.astype(acc).reshape(1, g, 1)
        std = np.sqrt(var + attrs["eps"])
        return [_out(out.reshape(x.shape), x.dtype), _out(mean.reshape(n, g), x.dtype),
                _out(std.reshape(n, g), x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        x, gamma, _ = inputs
        return F.apply("_backward_GroupNorm", [ograds[0], x, gamma, outputs[1], outputs[2]], **attrs)


@register("_backward_GroupNorm")
class GroupNormBackward(Op):
    """Gradients of GroupNorm w.r.t. data, gamma, beta from the saved mean and std."""
    params = GroupNorm.params
    inputs = ("ograd", "data", "gamma", "mean", "std")
    outputs = ("data_grad", "gamma_grad", "beta_grad")
    kernel = "norm"
    hidden = True
    forward_op = "GroupNorm"
    forward_inputs = {"data": "data", "gamma": "gamma"}
    forward_outputs = {"ograd": 0, "mean": 1, "std": 2}

    def infer_shape(self, attrs, in_shapes):
        dy, data, gamma, mean, std = in_shapes
        data = merge_shape(self.name, "input 'data'", data, dy)
        return [data, data, gamma, mean, std], [data, gamma, gamma]

    def infer_type(self, attrs, in_types):
        t = in_types[0] or in_types[1]
        return list(in_types), [t, in_types[2] or t, in_types[2] or t]

    def compute(self, attrs, inputs, ctx):
        dy, x, gamma, mean, std = inputs
        _check_rank3(self.name, x.ndim)
        g = attrs["num_groups"]
        n = x.shape[0]
        if g <= 0 or x.shape[1] % g:
            raise MXNetError(f"{self.name}: channels ({x.shape[1]}) not divisible by num_groups ({g})")
        _check_shape(self.name, "ograd", dy, x.shape)
        _check_shape(self.name, "gamma", gamma, (g,))
        for name, v in (("mean", mean), ("std", std)):
            _check_shape(self.name, name, v, (n, g))
        acc = _acc_dtype(x.dtype)
        inv = 1.0 / std.astype(acc).reshape(n, g, 1)
        xhat = (_grouped(x.astype(acc), g) - mean.astype(acc).reshape(n, g, 1)) * inv
        dys = _grouped(dy.astype(acc), g)
        dx = _standardized_backward(dys * gamma.astype(acc).reshape(1, g, 1), xhat, inv, (2,))
        return [_out(dx.reshape(x.shape), x.dtype), _out((dys * xhat).sum(axis=(0, 2)), gamma.dtype),
                _out(dys.sum(axis=(0, 2)), gamma.dtype)]


# --------------------------------------------------------------------------------------
# L2Normalization
# --------------------------------------------------------------------------------------

def _l2_layout(op: str, mode: str, shape: tuple) -> tuple[tuple, int, tuple]:
    """(3-D view shape, reduced axis of the view, norm output shape) for an L2Normalization mode."""
    if mode == "instance":
        return (shape[0], 1, int(np.prod(shape[1:], dtype=np.int64))), 2, (shape[0],)
    if len(shape) < 3:
        raise MXNetError(f"{op}: at least 3 dimensions are required in {mode} mode, got shape "
                         f"{tuple(shape)}")
    view = (shape[0], shape[1], int(np.prod(shape[2:], dtype=np.int64)))
    if mode == "channel":
        return view, 1, (shape[0], 1) + tuple(shape[2:])
    return view, 2, (shape[0], shape[1])


@register("L2Normalization")
class L2Normalization(Op):
    """out = data / sqrt(sum(data**2) + eps) over all non-batch axes (instance), the channel axis
    (channel) or the spatial axes (spatial). The `norm` output is hidden."""
    params = {
        "eps": Param(Float, 1e-10, "added to the sum of squares"),
        "mode": Param(Enum("instance", "spatial", "channel"), "instance", "which axes to normalize"),
    }
    outputs = ("output", "norm")
    kernel = "norm"

    def num_visible_outputs(self, attrs):
        return 1

    def infer_shape(self, attrs, in_shapes):
        (data,) = in_shapes
        if data is None:
            return [None], [None, None]
        if attrs["mode"] == "instance":
            return [tuple(data)], [tuple(data), (data[0],)]
        if len(data) < 3:
            raise MXNetError(f"{self.name}: at least 3 dimensions are required in {attrs['mode']} mode, "
                             f"got shape {tuple(data)}")
        norm = (data[0], 1) + tuple(data[2:]) if attrs["mode"] == "channel" else (data[0], data[1])
        return [tuple(data)], [tuple(data), norm]

    def compute(self, attrs, inputs, ctx):
        (x,) = inputs
        _require_float(self.name, "data", x)
        view, red, norm_shape = _l2_layout(self.name, attrs["mode"], x.shape)
        acc = _acc_dtype(x.dtype)
        xv = x.astype(acc).reshape(view)
        norm = np.sqrt((xv * xv).sum(axis=red, keepdims=True) + attrs["eps"])
        return [_out((xv / norm).reshape(x.shape), x.dtype), _out(norm.reshape(norm_shape), x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.apply("_backward_L2Normalization", [ograds[0], outputs[0], outputs[1]], **attrs)[0]]


@register("_backward_L2Normalization")
class L2NormalizationBackward(Op):
    """d/d data of L2Normalization: (g - y * sum(g * y)) / norm over the normalized axes."""
    params = L2Normalization.params
    inputs = ("ograd", "output", "norm")
    outputs = ("data_grad",)
    kernel = "norm"
    hidden = True
    forward_op = "L2Normalization"
    forward_inputs = {"output": "data"}   # the normalized output has the data's shape
    forward_outputs = {"ograd": 0, "output": 0, "norm": 1}

    def infer_shape(self, attrs, in_shapes):
        dy, y, norm = in_shapes
        y = merge_shape(self.name, "input 'output'", y, dy)
        return [y, y, norm], [y]

    def compute(self, attrs, inputs, ctx):
        dy, y, norm = inputs
        _check_shape(self.name, "ograd", dy, y.shape)
        view, red, norm_shape = _l2_layout(self.name, attrs["mode"], y.shape)
        _check_shape(self.name, "norm", norm, norm_shape)
        acc = _acc_dtype(y.dtype)
        yv, gv = y.astype(acc).reshape(view), dy.astype(acc).reshape(view)
        nv = norm.astype(acc).reshape([v if i != red else 1 for i, v in enumerate(view)])
        dx = (gv - yv * (gv * yv).sum(axis=red, keepdims=True)) / nv
        return [_out(dx.reshape(y.shape), y.dtype)]


# --------------------------------------------------------------------------------------
# LeakyReLU family
# --------------------------------------------------------------------------------------

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_LAMBDA = 1.0507009873554804934193349852946


def _leaky_expr(attrs, x: S.Expr, slope: S.Expr | float) -> S.Expr:
    """The activation's scalar expression (all types but prelu)."""
    kind = attrs["act_type"]
    if kind in ("leaky", "rrelu"):
        return S.select(x > 0.0, x, x * slope)
    if kind == "elu":
        return S.select(x > 0.0, x, attrs["slope"] * S.call("expm1", x))
    if kind == "selu":
        return _SELU_LAMBDA * S.select(x > 0.0, x, _SELU_ALPHA * S.call("expm1", x))
    if kind == "gelu":
        return 0.5 * x * (1.0 + S.call("erf", x * float(1.0 / math.sqrt(2.0))))
    raise MXNetError(f"LeakyReLU: act_type {kind!r} has no scalar expression")


def prelu_gamma_shape(op: str, gshape: tuple, dshape: tuple) -> tuple:
    """The shape gamma broadcasts as against data (MXNet's `expand_shape`): gamma's dims, from
    its last, match data's axes 1 and 0 (equal, or 1 in gamma); every other axis is 1. So (C,)
    is per channel, (1,) everywhere, (N, C) per sample and channel."""
    out = [1] * len(dshape)
    s = len(gshape) - 1
    for i in range(len(dshape) - 1, -1, -1):
        if s >= 0 and i <= 1 and (gshape[s] == dshape[i] or gshape[s] == 1):
            out[i] = gshape[s]
            s -= 1
    if s != -1:
        raise MXNetError(f"{op}: shape mismatch for input 'gamma': cannot broadcast {tuple(gshape)} against "
                         f"data axes 0 and 1 of {tuple(dshape)}")
    return tuple(out)


def _prelu_gamma(op: str, gamma: np.ndarray, x: np.ndarray) -> np.ndarray:
    """gamma reshaped to broadcast against data (see `prelu_gamma_shape`)."""
    return gamma.reshape(prelu_gamma_shape(op, gamma.shape, x.shape))


@register("LeakyReLU")
class LeakyReLU(Op):
    """Leaky rectifiers: leaky (x > 0 ? x : slope * x), prelu (learnt slope `gamma` per channel),
    rrelu (slope uniform in [lower_bound, upper_bound) while training, their mean in inference;
    the slopes are a hidden `mask` output), elu (slope * (exp(x) - 1) for x <= 0), selu, and
    gelu (0.5 * x * (1 + erf(x / sqrt(2))))."""
    params = {
        "act_type": Param(Enum("rrelu", "leaky", "prelu", "elu", "selu", "gelu"), "leaky",
                          "the activation"),
        "slope": Param(Float, 0.25, "slope for leaky, elu"),
        "lower_bound": Param(Float, 0.125, "lower bound of the random slope (rrelu)"),
        "upper_bound": Param(Float, 0.334, "upper bound of the random slope (rrelu)"),
    }
    outputs = ("output", "mask")
    input_init = {"gamma": '["Constant", {"value": 0.25}]'}
    kernel = "elementwise"
    is_random = True  # rrelu samples its slopes while training: never CSE'd or constant-folded

    def input_names(self, attrs):
        return ["data", "gamma"] if attrs["act_type"] == "prelu" else ["data"]

    def num_outputs(self, attrs):
        return 2 if attrs["act_type"] == "rrelu" else 1

    def num_visible_outputs(self, attrs):
        return 1

    def infer_shape(self, attrs, in_shapes):
        data = None if in_shapes[0] is None else tuple(in_shapes[0])
        outs = [data] * self.num_outputs(attrs)
        if attrs["act_type"] != "prelu":
            return [data], outs
        gamma = in_shapes[1]
        if data is not None and len(data) >= 2:
            if gamma is None:
                gamma = (data[1],) if data[1] else None
            elif all(gamma) and all(data):
                prelu_gamma_shape(self.name, tuple(gamma), data)
        return [data, None if gamma is None else tuple(gamma)], outs

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        _require_float(self.name, "data", x)
        kind = attrs["act_type"]
        if kind == "prelu":
            g = _prelu_gamma(self.name, inputs[1], x).astype(x.dtype)
            return [_out(np.where(x > 0, x, x * g), x.dtype)]
        if kind == "rrelu":
            lo, hi = attrs["lower_bound"], attrs["upper_bound"]
            if ctx.is_train:
                mask = ctx.random().uniform(lo, hi, size=x.shape).astype(x.dtype)
            else:
                mask = np.full(x.shape, (lo + hi) / 2.0, dtype=x.dtype)
            out = S.evaluate(_leaky_expr(attrs, S.Input(0), S.Input(1)), [x, mask], x.dtype)
            return [_out(out, x.dtype), _out(mask, x.dtype)]
        out = S.evaluate(_leaky_expr(attrs, S.Input(0), attrs["slope"]), [x], x.dtype)
        return [_out(out, x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        kind = attrs["act_type"]
        dy = ograds[0]
        if kind == "prelu":
            return F.apply("_backward_LeakyReLU", [dy, inputs[0], inputs[1]], **attrs)
        if kind == "rrelu":
            expr, args = _leaky_expr(attrs, S.Input(0), S.Input(1)), [inputs[0], outputs[1]]
        else:
            expr, args = _leaky_expr(attrs, S.Input(0), attrs["slope"]), [inputs[0]]
        g = S.Input(len(args)) * S.diff(expr, 0)
        return [F.apply("_elemwise_expr", args + [dy], expr=g, num_args=len(args) + 1)[0]]


@register("_backward_LeakyReLU")
class LeakyReLUBackward(Op):
    """Gradients of prelu w.r.t. data (dy where x > 0, else dy * gamma) and gamma
    (sum of dy * x over x <= 0, over the axes gamma is broadcast along)."""
    params = LeakyReLU.params
    inputs = ("ograd", "data", "gamma")
    outputs = ("data_grad", "gamma_grad")
    kernel = "reduce"
    hidden = True
    forward_op = "LeakyReLU"
    forward_inputs = {"data": "data", "gamma": "gamma"}
    forward_outputs = {"ograd": 0}

    def infer_shape(self, attrs, in_shapes):
        dy, data, gamma = in_shapes
        data = merge_shape(self.name, "input 'data'", data, dy)
        return [data, data, gamma], [data, gamma]

    def compute(self, attrs, inputs, ctx):
        dy, x, gamma = inputs
        _check_shape(self.name, "ograd", dy, x.shape)
        g = _prelu_gamma(self.name, gamma, x)
        dx = np.where(x > 0, dy, dy * g)
        contrib = np.where(x > 0, 0, dy * x)
        summed = tuple(i for i in range(x.ndim) if g.shape[i] == 1 and x.shape[i] != 1)
        dgamma = contrib.sum(axis=summed, keepdims=True).reshape(gamma.shape)
        return [_out(dx, x.dtype), _out(dgamma, gamma.dtype)]


# --------------------------------------------------------------------------------------
# Dropout
# --------------------------------------------------------------------------------------

@register("Dropout")
class Dropout(Op):
    """In training (or always with mode='always'), zero each element with probability p and
    scale the rest by 1/(1-p); `axes` share one mask value along those axes. Identity otherwise.
    With p = 1 the mask is 0 * (1/0), NaN, as MXNet's (the output is NaN, not zero).

    The scaled mask is a hidden second output; the gradient is head gradient * mask, so forward
    and backward use the same random draw.
    """
    params = {
        "p": Param(Float, 0.5, "fraction of the input that gets dropped out"),
        "mode": Param(Enum("training", "always"), "training", "when dropout applies"),
        "axes": Param(ShapeAttr, (), "axes along which the mask is shared"),
        "cudnn_off": Param(Optional(Bool), False, "accepted for compatibility; no effect"),
    }
    outputs = ("output", "mask")
    kernel = "random"
    is_random = True

    def inference_rewrite(self, F, attrs, inputs, in_shapes):
        return None if attrs["mode"] == "always" else [inputs[0]]

    def parse(self, raw):
        attrs = super().parse(raw)
        if not 0.0 <= attrs["p"] <= 1.0:
            raise MXNetError(f"Dropout: p must be in [0, 1], got {attrs['p']}")
        return attrs

    def num_visible_outputs(self, attrs):
        return 1

    def infer_shape(self, attrs, in_shapes):
        data = None if in_shapes[0] is None else tuple(in_shapes[0])
        if data is not None:
            for a in attrs["axes"]:
                _norm_axis(self.name, a, len(data))
        return [data], [data, data]

    def compute(self, attrs, inputs, ctx):
        (x,) = inputs
        _require_float(self.name, "data", x)
        p = attrs["p"]
        if not (ctx.is_train or attrs["mode"] == "always") or p == 0.0:
            return [_out(x, x.dtype), np.ones(x.shape, x.dtype)]
        mshape = list(x.shape)
        for a in attrs["axes"]:
            mshape[_norm_axis(self.name, a, x.ndim)] = 1
        keep = 1.0 - p
        if keep == 0.0:   # MXNet's mask is (u < keep) * (1 / keep) = 0 * inf: NaN everywhere
            mask = np.full(mshape, np.nan, x.dtype)
        else:
            mask = ((ctx.random().random(size=mshape) < keep) * (1.0 / keep)).astype(x.dtype)
        mask = np.broadcast_to(mask, x.shape)
        return [_out(x * mask, x.dtype), _out(mask, x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.elemwise_mul(ograds[0], outputs[1])]


# --------------------------------------------------------------------------------------
# SoftmaxOutput
# --------------------------------------------------------------------------------------

def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    """Numerically stable softmax along `axis` (reference implementation)."""
    z = x - x.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def _label_ids(label: np.ndarray) -> np.ndarray:
    """Class indices as MXNet reads them: C-style truncation of the float labels."""
    return np.trunc(label).astype(np.int64)


def _softmax_label_grad(p: np.ndarray, label: np.ndarray, attrs) -> np.ndarray:
    """Rows of p (R, K) minus the (optionally smoothed) one-hot of label (R,); ignored rows zero."""
    k = p.shape[1]
    ids = _label_ids(label)
    onehot = np.arange(k)[None, :] == ids[:, None]
    alpha = attrs["smooth_alpha"]
    if alpha == 0.0:
        g = p - onehot
    else:
        with np.errstate(divide="ignore"):
            off = np.float64(alpha) / np.float64(k - 1)
        g = p - np.where(onehot, 1.0 - alpha, off)
    if attrs["use_ignore"]:
        g = np.where((ids == int(attrs["ignore_label"]))[:, None], 0.0, g)
    return g


def _softmax_label_shapes(attrs, d: tuple) -> list[tuple]:
    """Label shapes SoftmaxOutput accepts for a fully known data shape `d` (the first is the
    default that shape inference fills in); a label of the data's own shape is also accepted."""
    if attrs["multi_output"]:
        n, rest = d[0], tuple(d[2:])
        return [(n, int(np.prod(rest, dtype=np.int64)) if rest else 1), (n,) + rest, (n, 1) + rest]
    return [tuple(d[:-1])]


def _check_softmax_label(attrs, x: np.ndarray, label: np.ndarray) -> None:
    if x.ndim < 2:
        raise MXNetError(f"SoftmaxOutput: data must have at least 2 dimensions, got shape {x.shape}")
    if label.shape == x.shape:
        return
    accepted = _softmax_label_shapes(attrs, x.shape)
    if label.shape not in accepted:
        raise MXNetError(f"SoftmaxOutput: shape mismatch for input 'label': expected "
                         f"{' or '.join(str(a) for a in accepted)}, got {label.shape}")


@register("SoftmaxOutput", aliases=("Softmax",))
class SoftmaxOutput(Op):
    """Softmax forward; backward is the cross-entropy gradient (softmax - one_hot(label)) scaled
    by grad_scale and normalized (null/batch/valid), ignoring the head gradient unless out_grad.

    Softmax runs over the flattened non-batch axes (default), the last axis (preserve_shape)
    or axis 1 (multi_output, labels of shape (N, d2*...), (N, d2, ...) or (N, 1, d2, ...)).
    A label of the data's own shape is a probability target: gradient (softmax - label) * grad_scale.
    """
    params = {
        "grad_scale": Param(Float, 1.0, "scales the gradient"),
        "ignore_label": Param(Float, -1.0, "label ignored in backward when use_ignore"),
        "multi_output": Param(Bool, False, "softmax along axis 1"),
        "use_ignore": Param(Bool, False, "ignore labels equal to ignore_label"),
        "preserve_shape": Param(Bool, False, "softmax along the last axis"),
        "normalization": Param(Enum("null", "batch", "valid"), "null", "gradient normalization"),
        "out_grad": Param(Bool, False, "multiply the gradient by the head gradient"),
        "smooth_alpha": Param(Float, 0.0, "label smoothing"),
    }
    inputs = ("data", "label")
    kernel = "softmax"
    inplace = {0: 0}

    def inference_rewrite(self, F, attrs, inputs, in_shapes):
        """softmax over MXNet's axis: 1 with multi_output, else the last axis of the input
        flattened to 2-D (unless preserve_shape)."""
        x = inputs[0]
        nd = len(in_shapes[0]) if in_shapes[0] is not None else 2
        if attrs.get("multi_output"):
            return [F.softmax(x, axis=1)]
        if attrs.get("preserve_shape") or nd <= 2:
            return [F.softmax(x, axis=-1)]
        flat = F.softmax(F.Reshape(x, shape=(0, -1)), axis=-1)
        return [F.Reshape(flat, shape=tuple(in_shapes[0]))]

    def infer_shape(self, attrs, in_shapes):
        ignore = attrs["ignore_label"]
        if not (math.isfinite(ignore) and -2 ** 31 <= ignore < 2 ** 31):
            raise MXNetError(f"SoftmaxOutput: ignore_label must be a class index (a finite number "
                             f"within int32), got {ignore}")
        data, label = in_shapes
        if data is None:
            return [None, label], [None]
        data = tuple(data)
        if len(data) < 2:
            raise MXNetError(f"SoftmaxOutput: data must have at least 2 dimensions, got shape {data}")
        if label is not None and tuple(label) == data:
            return [data, data], [data]
        if attrs["multi_output"]:
            if not shape_known(data):
                return [data, label], [data]
            accepted = _softmax_label_shapes(attrs, data)
            if label is None:
                label = accepted[0]
            elif tuple(label) not in accepted:
                raise MXNetError(f"SoftmaxOutput: shape mismatch for input 'label': expected "
                                 f"{' or '.join(str(a) for a in accepted)}, got {tuple(label)}")
        else:
            label = merge_shape(self.name, "input 'label'", label, data[:-1])
        return [data, tuple(label)], [data]

    def compute(self, attrs, inputs, ctx):
        x, label = inputs
        _require_float(self.name, "data", x)
        _check_softmax_label(attrs, x, label)
        acc = _acc_dtype(x.dtype)
        xs = x.astype(acc)
        if attrs["multi_output"]:
            out = _softmax(xs.reshape(x.shape[0], x.shape[1], -1), 1)
        elif attrs["preserve_shape"]:
            out = _softmax(xs, -1)
        else:
            out = _softmax(xs.reshape(x.shape[0], -1), 1)
        return [_out(out.reshape(x.shape), x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        d = F.apply("_backward_SoftmaxOutput", [ograds[0], outputs[0], inputs[1]], **attrs)[0]
        return [d, F.zeros_like(inputs[1])]


@register("_backward_SoftmaxOutput")
class SoftmaxOutputBackward(Op):
    """The data gradient of SoftmaxOutput from its output and label (MXNet's exact rules)."""
    params = SoftmaxOutput.params
    inputs = ("ograd", "output", "label")
    kernel = "softmax"
    hidden = True
    forward_op = "SoftmaxOutput"
    forward_inputs = {"output": "data", "label": "label"}   # the output has the data's shape
    forward_outputs = {"ograd": 0, "output": 0}

    def infer_shape(self, attrs, in_shapes):
        dy, out, label = in_shapes
        out = merge_shape(self.name, "input 'output'", out, dy)
        return [out, out, label], [out]

    def infer_type(self, attrs, in_types):
        t = in_types[1] or in_types[0]
        return list(in_types), [t]

    def compute(self, attrs, inputs, ctx):
        dy, out, label = inputs
        _check_shape(self.name, "ograd", dy, out.shape)
        _check_softmax_label(attrs, out, label)
        acc = _acc_dtype(out.dtype)
        p = out.astype(acc)
        scale = attrs["grad_scale"]
        if label.shape == out.shape:
            g = (p - label.astype(acc)) * scale
        elif attrs["multi_output"]:
            n, k = out.shape[:2]
            p3 = p.reshape(n, k, -1)
            r = p3.shape[2]
            lab = label.reshape(n, r)
            rows = _softmax_label_grad(p3.transpose(0, 2, 1).reshape(-1, k), lab.reshape(-1), attrs)
            g = rows.reshape(n, r, k).transpose(0, 2, 1)
            norm = attrs["normalization"]
            if norm == "batch":
                valid = n
            elif norm == "valid":
                valid = max(1, int(np.sum(_label_ids(lab) != int(attrs["ignore_label"]))))
            else:
                valid = 1
            g = g * (scale / (1 if norm == "valid" else r) / valid)
        else:
            p2 = p.reshape(-1, p.shape[-1]) if attrs["preserve_shape"] else p.reshape(out.shape[0], -1)
            lab = label.reshape(-1)
            g = _softmax_label_grad(p2, lab[:p2.shape[0]], attrs)
            norm = attrs["normalization"]
            if norm == "batch":
                valid = lab.size
            elif norm == "valid":
                valid = max(1, int(np.sum(_label_ids(lab) != int(attrs["ignore_label"]))))
            else:
                valid = 1
            g = g * (scale / valid)
        g = g.reshape(out.shape)
        if attrs["out_grad"]:
            g = g * dy.astype(acc)
        return [_out(g, out.dtype)]


# --------------------------------------------------------------------------------------
# Regression outputs
# --------------------------------------------------------------------------------------

def _regression_label_shape(op: str, data, label):
    """MXNet's RegressionOpShape: default label (N,) for (N, 1) data, else the data's shape; a
    given label must have the data's first dimension and size."""
    if data is None:
        return label
    data = tuple(data)
    if label is None:
        return (data[0],) if len(data) == 2 and data[1] == 1 else data
    label = tuple(label)
    size_known = shape_known(data) and shape_known(label)
    if (label[0] and data[0] and label[0] != data[0]) or (
            size_known and int(np.prod(label)) != int(np.prod(data))):
        raise MXNetError(f"{op}: shape mismatch for input 'label': expected {data} "
                         f"(or the same batch size and number of elements), got {label}")
    return label


class _RegressionOutput(Op):
    """Base of the regression heads: forward `_forward(data)`, backward
    `_diff(out, label) * grad_scale / (label.size / label.shape[0])`, head gradient ignored."""
    params = {"grad_scale": Param(Float, 1.0, "scales the gradient")}
    inputs = ("data", "label")
    kernel = "elementwise"
    inplace = {0: 0}
    backward_op = ""

    def inference_rewrite(self, F, attrs, inputs, in_shapes):
        return [inputs[0]]            # the identity forward; LogisticRegressionOutput overrides

    def _forward(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def infer_shape(self, attrs, in_shapes):
        data, label = in_shapes
        label = _regression_label_shape(self.name, data, label)
        data = None if data is None else tuple(data)
        return [data, label], [data]

    def compute(self, attrs, inputs, ctx):
        x, label = inputs
        _require_float(self.name, "data", x)
        _regression_label_shape(self.name, x.shape, label.shape)
        with np.errstate(over="ignore"):
            return [_out(self._forward(x), x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        d = F.apply(self.backward_op, [inputs[1], outputs[0]], **attrs)[0]
        return [d, F.zeros_like(inputs[1])]


class _RegressionBackward(Op):
    """The data gradient of a regression head from (label, output)."""
    params = {"grad_scale": Param(Float, 1.0, "scales the gradient")}
    inputs = ("label", "output")
    kernel = "elementwise"
    hidden = True

    def _diff(self, out: np.ndarray, label: np.ndarray) -> np.ndarray:
        return out - label

    def infer_shape(self, attrs, in_shapes):
        label, out = in_shapes
        if shape_known(label) and shape_known(out):
            _regression_label_shape(self.name, tuple(out), tuple(label))
        return [label, out], [out]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[1] or in_types[0]]

    def compute(self, attrs, inputs, ctx):
        label, out = inputs
        _regression_label_shape(self.name, out.shape, label.shape)
        num_output = label.size / label.shape[0] if label.shape[0] else 1.0
        acc = _acc_dtype(out.dtype)
        g = self._diff(out.astype(acc), label.astype(acc).reshape(out.shape))
        return [_out(g * (attrs["grad_scale"] / num_output), out.dtype)]


@register("LinearRegressionOutput")
class LinearRegressionOutput(_RegressionOutput):
    """Identity forward; gradient (out - label) * grad_scale / outputs per sample."""
    backward_op = "_backward_linear_reg_out"

    def _forward(self, x):
        return x


@register("LogisticRegressionOutput")
class LogisticRegressionOutput(_RegressionOutput):
    """Sigmoid forward; gradient (sigmoid(x) - label) * grad_scale / outputs per sample."""
    backward_op = "_backward_logistic_reg_out"

    def inference_rewrite(self, F, attrs, inputs, in_shapes):
        return [F.sigmoid(inputs[0])]

    def _forward(self, x):
        return 1.0 / (1.0 + np.exp(-x))


@register("MAERegressionOutput")
class MAERegressionOutput(_RegressionOutput):
    """Identity forward; gradient sign(out - label) * grad_scale / outputs per sample."""
    backward_op = "_backward_mae_reg_out"

    def _forward(self, x):
        return x


@register("_backward_linear_reg_out")
class LinearRegressionBackward(_RegressionBackward):
    """(out - label) * grad_scale / num_output."""


@register("_backward_logistic_reg_out")
class LogisticRegressionBackward(_RegressionBackward):
    """(out - label) * grad_scale / num_output, with out = sigmoid(data)."""


@register("_backward_mae_reg_out")
class MAERegressionBackward(_RegressionBackward):
    """sign(out - label) * grad_scale / num_output."""

    def _diff(self, out, label):
        return np.sign(out - label)


# --------------------------------------------------------------------------------------
# MakeLoss
# --------------------------------------------------------------------------------------

_MAKE_LOSS_PARAMS = {
    "grad_scale": Param(Float, 1.0, "the gradient value"),
    "valid_thresh": Param(Float, 0.0, "elements above it count as valid (normalization='valid')"),
    "normalization": Param(Enum("null", "batch", "valid"), "null", "gradient normalization"),
}


@register("MakeLoss")
class MakeLoss(Op):
    """Identity forward marking a loss; its gradient is grad_scale everywhere (the head gradient
    is ignored), divided by the batch size (batch) or by the number of elements greater than
    valid_thresh, at least 1 (valid)."""
    params = _MAKE_LOSS_PARAMS
    kernel = "elementwise"
    inplace = {0: 0}

    def inference_rewrite(self, F, attrs, inputs, in_shapes):
        return [inputs[0]]

    def infer_shape(self, attrs, in_shapes):
        data = None if in_shapes[0] is None else tuple(in_shapes[0])
        return [data], [data]

    def compute(self, attrs, inputs, ctx):
        return [_out(inputs[0], inputs[0].dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.apply("_backward_MakeLoss", [inputs[0]], **attrs)[0]]


@register("make_loss")
class MakeLossUnary(Elementwise):
    """The deprecated parameterless `make_loss`: identity forward (output named `loss`) whose
    gradient is ones, whatever the head gradient (MXNet's ones_like backward)."""
    outputs = ("loss",)

    def expr(self, attrs, x):
        return x

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.ones_like(inputs[0])]


@register("_backward_MakeLoss")
class MakeLossBackward(Op):
    """The constant (normalized) gradient of MakeLoss, shaped like its input."""
    params = _MAKE_LOSS_PARAMS
    hidden = True
    kernel = "reduce"

    def infer_shape(self, attrs, in_shapes):
        data = None if in_shapes[0] is None else tuple(in_shapes[0])
        return [data], [data]

    def compute(self, attrs, inputs, ctx):
        (x,) = inputs
        scale = attrs["grad_scale"]
        if attrs["normalization"] == "batch":
            scale = scale / x.shape[0] if x.ndim and x.shape[0] else scale
        elif attrs["normalization"] == "valid":
            scale = scale / max(1.0, float(np.sum(x > attrs["valid_thresh"])))
        return [np.full(x.shape, scale, dtype=x.dtype)]


# --------------------------------------------------------------------------------------
# smooth_l1 and softmax_cross_entropy
# --------------------------------------------------------------------------------------

@register("smooth_l1")
class SmoothL1(Elementwise):
    """Smooth L1 with sigma = scalar: 0.5 * (sigma * x)**2 where |x| < 1/sigma**2,
    else |x| - 0.5/sigma**2."""
    params = {"scalar": Param(Float, 1.0, "sigma"), "is_int": Param(Bool, True, "scalar was an int")}

    def expr(self, attrs, x):
        s2 = attrs["scalar"] * attrs["scalar"]
        inv = float("inf") if s2 == 0 else 1.0 / s2
        return S.select(x > inv, x - 0.5 * inv,
                        S.select(x < -inv, -x - 0.5 * inv, 0.5 * s2 * x * x))


def _cross_entropy_ids(x: np.ndarray, label: np.ndarray) -> np.ndarray:
    """Validate softmax_cross_entropy's inputs; return the class indices."""
    if x.ndim != 2:
        raise MXNetError(f"softmax_cross_entropy: data must be 2-D (batch, classes), got {x.shape}")
    _check_shape("softmax_cross_entropy", "label", label, (x.shape[0],))
    ids = _label_ids(label)
    if ids.size and (ids.min() < 0 or ids.max() >= x.shape[1]):
        raise MXNetError(f"softmax_cross_entropy: labels must be in [0, {x.shape[1]}), got "
                         f"values in [{ids.min()}, {ids.max()}]")
    return ids


@register("softmax_cross_entropy")
class SoftmaxCrossEntropy(Op):
    """sum over the batch of -log(softmax(data)[label]); data (N, K), label (N,), output (1,)."""
    inputs = ("data", "label")
    kernel = "softmax"

    def infer_shape(self, attrs, in_shapes):
        data, label = in_shapes
        if data is not None:
            if len(data) != 2:
                raise MXNetError(f"softmax_cross_entropy: data must be 2-D (batch, classes), got {tuple(data)}")
            label = merge_shape(self.name, "input 'label'", label, (data[0],))
        return [None if data is None else tuple(data), label], [(1,)]

    def infer_type(self, attrs, in_types):
        t = in_types[0]
        return [t, in_types[1] or t], [t]

    def compute(self, attrs, inputs, ctx):
        x, label = inputs
        _require_float(self.name, "data", x)
        ids = _cross_entropy_ids(x, label)
        xs = x.astype(_acc_dtype(x.dtype))
        z = xs - xs.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        loss = -logp[np.arange(x.shape[0]), ids].sum()
        return [np.array([loss], dtype=x.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        d = F.apply("_backward_softmax_cross_entropy", [ograds[0], inputs[0], inputs[1]])[0]
        return [d, F.zeros_like(inputs[1])]


@register("_backward_softmax_cross_entropy")
class SoftmaxCrossEntropyBackward(Op):
    """(softmax(data) - one_hot(label)) * head gradient (a (1,) array)."""
    inputs = ("ograd", "data", "label")
    kernel = "softmax"
    hidden = True
    forward_op = "softmax_cross_entropy"
    forward_inputs = {"data": "data", "label": "label"}
    forward_outputs = {"ograd": 0}

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), [in_shapes[1]]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[1]]

    def compute(self, attrs, inputs, ctx):
        dy, x, label = inputs
        ids = _cross_entropy_ids(x, label)
        _check_shape(self.name, "ograd", dy, (1,))
        acc = _acc_dtype(x.dtype)
        p = _softmax(x.astype(acc), 1)
        p[np.arange(x.shape[0]), ids] -= 1.0
        return [_out(p * dy.astype(acc)[0], x.dtype)]


# The helpers code generators share with the ops above (public names; the ops' own code keeps
# the short private ones).
l2_norm_layout = _l2_layout
leaky_expr = _leaky_expr
check_softmax_label = _check_softmax_label
