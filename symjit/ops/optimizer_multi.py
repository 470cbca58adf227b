"""Multi-tensor optimizer operators of MXNet 1.9.1: `multi_sgd_update` and its momentum,
mixed-precision and preloaded variants, `multi_sum_sq`, `multi_lars`, the mixed-precision LAMB
phases with `_multi_lamb_update` / `_multi_mp_lamb_update`, and the mixed-precision and
multi-tensor AdamW updates (`reset_arrays` lives with the value checks in `checks`).

A multi-tensor update applies one single-tensor update op (`optimizer_ops`) to each of
`num_weights` groups of inputs, interleaved as MXNet orders them (weight_0, grad_0[, mom_0]
[, weight32_0], weight_1, ...), each with its own learning rate and weight decay (`lrs`, `wds`
attributes, or for the `preloaded_*` ops the last two inputs, float32 arrays of shape
(num_weights,)). Outputs: the new weights; the states (mom, weight32, mean, var) are overwritten
in place (`state_targets`, MXNet's FMutateInputs), in group order. Invariant: the result of a
multi-tensor op equals applying the single op to each group in turn (`split`).
"""
from __future__ import annotations

import math
from typing import ClassVar, Mapping

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Count, Float, FloatTuple, Param, Shape
from .optimizer_ops import (AdamWUpdate, LambPhase1, LambPhase2, MPUpdate, lamb_trust_ratio,
                            mp_infer_type)
from .registry import Op, get_op, merge_shape, register

_MULTI_COMMON = {"rescale_grad": Param(Float, 1.0), "clip_gradient": Param(Float, -1.0),
                 "num_weights": Param(Count, 1)}
_LRS_WDS = {"lrs": Param(FloatTuple), "wds": Param(FloatTuple)}
_MOMENTUM = {"momentum": Param(Float, 0.0)}


def _check_len(op: str, what: str, values, n: int, key: str) -> None:
    if len(values) != n:
        raise MXNetError(f"{op}: the number of {what} ({len(values)}) does not match {key}: "
                         f"expected {n}, got {len(values)}")


class MultiTensorOp(Op):
    """Base of ops over `count` interleaved groups of `per_group` inputs, one output per group,
    whose trailing group inputs from `first_state` on are states updated in place."""
    differentiable = False
    per_group: ClassVar[tuple] = ()
    first_state: ClassVar[int] = 2
    #: trailing inputs per group that are float32 whatever the weight's dtype (mixed precision)
    n_fp32: ClassVar[int] = 0
    count_key: ClassVar[str] = "num_weights"
    #: names of the inputs after the groups (`lrs`, `wds` of the preloaded ops)
    trailing: ClassVar[tuple] = ()
    #: the trailing inputs are float32 (lrs, wds); False: any dtype
    trailing_fp32: ClassVar[bool] = True
    mutate_inputs = ("<per group>",)   # non-empty: the op writes inputs; `state_targets` names them

    def count(self, attrs: Mapping) -> int:
        return self.positive_count(attrs, self.count_key)

    def input_names(self, attrs):
        n = self.count(attrs)
        self.check_attrs(attrs, n)
        return [f"{p}_{i}" for i in range(n) for p in self.per_group] + list(self.trailing)

    def check_attrs(self, attrs: Mapping, n: int) -> None:
        """Raise MXNetError when per-group attributes do not have `n` entries."""

    def num_outputs(self, attrs):
        return self.count(attrs)

    def state_targets(self, attrs):
        return [f"{p}_{i}" for i in range(self.count(attrs)) for p in self.per_group[self.first_state:]]

    def validate(self, attrs: Mapping, inputs: list) -> None:
        """Shape and dtype checks of concrete inputs (MXNetError naming this op and the input)."""
        self.infer_shape(attrs, [x.shape for x in inputs])
        self.infer_type(attrs, [x.dtype.name for x in inputs])

    def groups(self, attrs: Mapping, items: list) -> list[list]:
        """`items` (one per input) cut into the per-group lists."""
        k = len(self.per_group)
        return [items[i * k:(i + 1) * k] for i in range(self.count(attrs))]

    def infer_shape(self, attrs, in_shapes):
        n, k = self.count(attrs), len(self.per_group)
        ins, outs = [], []
        for i, group in enumerate(self.groups(attrs, in_shapes)):
            merged = None
            for p, s in zip(self.per_group, group):
                merged = merge_shape(self.name, f"input '{p}_{i}'", merged, s)
            ins += [merged] * k
            outs.append(merged)
        for name, s in zip(self.trailing, in_shapes[n * k:]):
            ins.append(merge_shape(self.name, f"input {name!r}", (n,), s))
        return ins, outs

    def infer_type(self, attrs, in_types):
        n, k = self.count(attrs), len(self.per_group)
        ins, outs = [], []
        for i, group in enumerate(self.groups(attrs, in_types)):
            names = [f"{p}_{i}" for p in self.per_group]
            gi, go = mp_infer_type(self.name, names, group, k - self.n_fp32, 1)
            ins += gi
            outs += go
        trailing = list(in_types[n * k:])
        ins += mp_infer_type(self.name, list(self.trailing), trailing, 0, 0)[0] if self.trailing_fp32 \
            else trailing
        return ins, outs


class MultiUpdate(MultiTensorOp):
    """`single` (an `optimizer_ops.Update`) applied to each group with lrs[i] and wds[i], in
    order: a parameter given twice gets both updates, the second reading the first's result
    (as MXNet's kernel, which updates each element group after group)."""
    single: ClassVar[str] = ""
    #: attributes passed on to the single op unchanged
    shared: ClassVar[tuple] = ("rescale_grad", "clip_gradient")

    def check_attrs(self, attrs, n):
        if not self.trailing:
            _check_len(self.name, "learning rates lrs", attrs["lrs"], n, self.count_key)
            _check_len(self.name, "weight decays wds", attrs["wds"], n, self.count_key)

    def rates(self, attrs: Mapping, inputs: list) -> tuple[list, list]:
        """(lrs, wds): from the attributes, or from the two trailing inputs (preloaded ops)."""
        if not self.trailing:
            return list(attrs["lrs"]), list(attrs["wds"])
        n = self.count(attrs)
        lrs, wds = (np.asarray(a, np.float64).reshape(-1) for a in inputs[-2:])
        _check_len(self.name, "learning rates in input 'lrs'", lrs, n, self.count_key)
        _check_len(self.name, "weight decays in input 'wds'", wds, n, self.count_key)
        return [float(x) for x in lrs], [float(x) for x in wds]

    def split(self, attrs: Mapping, lrs: list, wds: list) -> list[dict]:
        """The single op's raw attributes for each group."""
        shared = {k: attrs[k] for k in self.shared}
        return [dict(shared, lr=lr, wd=wd) for lr, wd in zip(lrs, wds)]

    def compute(self, attrs, inputs, ctx):
        self.validate(attrs, inputs)
        single = get_op(self.single)
        lrs, wds = self.rates(attrs, inputs)
        outs, states = [], []
        latest: dict = {}   # id of an input array -> its updated value (a repeated parameter)
        for raw, group in zip(self.split(attrs, lrs, wds), self.groups(attrs, list(inputs))):
            current = [latest.get(id(x), x) for x in group]
            res = single.compute(single.parse(raw), current, ctx)
            for x, new in zip(group[:1] + group[self.first_state:], res):
                latest[id(x)] = new
            outs.append(res[0])
            states += res[1:]
        return outs + states


def _multi_sgd(name: str, single: str, per_group: tuple, n_fp32: int, momentum: bool, preloaded: bool):
    """Register one member of the multi-SGD family."""
    params = dict(_MULTI_COMMON, **(_MOMENTUM if momentum else {}), **({} if preloaded else _LRS_WDS))
    mom_doc = " with momentum" if momentum else ""
    mp_doc = " on float32 master copies (mixed precision)" if n_fp32 else ""
    rates_doc = "inputs 'lrs' and 'wds'" if preloaded else "attributes lrs and wds"
    cls = type(name, (MultiUpdate,), {
        "__doc__": f"`{single}` (SGD{mom_doc}{mp_doc}) over num_weights groups "
                   f"{per_group}, learning rates and weight decays from the {rates_doc}.",
        "single": single, "per_group": per_group, "n_fp32": n_fp32, "params": params,
        "trailing": ("lrs", "wds") if preloaded else (),
        "shared": ("rescale_grad", "clip_gradient") + (("momentum",) if momentum else ()),
    })
    register(name)(cls)


for _prefix, _pre in (("", False), ("preloaded_", True)):
    _multi_sgd(f"{_prefix}multi_sgd_update", "sgd_update", ("weight", "grad"), 0, False, _pre)
    _multi_sgd(f"{_prefix}multi_sgd_mom_update", "sgd_mom_update", ("weight", "grad", "mom"), 0, True, _pre)
    _multi_sgd(f"{_prefix}multi_mp_sgd_update", "mp_sgd_update", ("weight", "grad", "weight32"), 1, False,
               _pre)
    _multi_sgd(f"{_prefix}multi_mp_sgd_mom_update", "mp_sgd_mom_update", ("weight", "grad", "mom", "weight32"),
               2, True, _pre)


# ------------------------------------------------------------------------------------------
# Norms and LARS
# ------------------------------------------------------------------------------------------

@register("multi_sum_sq")
class MultiSumSq(Op):
    """The sum of squares of each of `num_arrays` arrays, as a float32 array of shape
    (num_arrays,) (accumulated in float64 here; MXNet accumulates in float32)."""
    params = {"num_arrays": Param(Count)}
    differentiable = False

    def input_names(self, attrs):
        return [f"array_{i}" for i in range(self.positive_count(attrs, "num_arrays"))]

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), [(attrs["num_arrays"],)]

    def infer_type(self, attrs, in_types):
        return list(in_types), ["float32"]

    def compute(self, attrs, inputs, ctx):
        _check_len(self.name, "arrays", inputs, attrs["num_arrays"], "num_arrays")
        return [np.array([sum_sq(x) for x in inputs], np.float32)]


def sum_sq(x: np.ndarray) -> float:
    """The sum of the squares of x's elements, accumulated in float64."""
    v = np.asarray(x, np.float64).reshape(-1)
    return float(np.dot(v, v))


@register("multi_lars")
class MultiLARS(Op):
    """Per-layer LARS learning rates: lrs[i] * eta * ||w_i|| / (||g_i|| * rescale_grad
    + wds[i] * ||w_i|| + eps) where both norms are positive, else lrs[i]; the norms come as sums
    of squares (`multi_sum_sq`). All inputs and the output are float32 of one shape (N,)."""
    inputs = ("lrs", "weights_sum_sq", "grads_sum_sq", "wds")
    params = {"eta": Param(Float), "eps": Param(Float), "rescale_grad": Param(Float, 1.0)}
    differentiable = False

    def infer_shape(self, attrs, in_shapes):
        merged = None
        for name, s in zip(self.inputs, in_shapes):
            merged = merge_shape(self.name, f"input {name!r}", merged, s)
        if merged is not None and len(merged) != 1:
            raise MXNetError(f"{self.name}: inputs must be 1-D, got shape {merged}")
        return [merged] * 4, [merged]

    def infer_type(self, attrs, in_types):
        return mp_infer_type(self.name, list(self.inputs), in_types, 0, 0)[0], ["float32"]

    def compute(self, attrs, inputs, ctx):
        self.infer_shape(attrs, [x.shape for x in inputs])
        self.infer_type(attrs, [x.dtype.name for x in inputs])
        lrs, w2, g2, wds = (np.asarray(x, np.float32) for x in inputs)
        w_norm = np.sqrt(w2)
        valid = (w_norm > 0) & (g2 > 0)
        with np.errstate(all="ignore"):
            lars = lrs * attrs["eta"] * w_norm / (np.sqrt(g2) * attrs["rescale_grad"] + wds * w_norm + attrs["eps"])
        return [np.where(valid, lars, lrs).astype(np.float32)]


# ------------------------------------------------------------------------------------------
# LAMB
# ------------------------------------------------------------------------------------------

@register("mp_lamb_update_phase1")
class MPLambPhase1(MPUpdate):
    """lamb_update_phase1 in float32 with the master weight `weight32` in the decay term; the
    output (the LAMB direction g) is float32. mean and var are updated in place."""
    inputs = ("weight", "grad", "mean", "var", "weight32")
    mutate_inputs = ("mean", "var")
    params = dict(LambPhase1.params)
    output_like_weight = False

    def infer_type(self, attrs, in_types):
        ins, _ = mp_infer_type(self.name, self.input_names(attrs), in_types, 2, 1)
        return ins, ["float32"]

    def exprs(self, attrs, w, g, m, v, w32):
        return get_op("lamb_update_phase1").exprs(attrs, w32, g, m, v)


@register("mp_lamb_update_phase2")
class MPLambPhase2(Op):
    """lamb_update_phase2 on the master weight: w32 -= lr * ratio * g (ratio from r1, r2 as
    lamb_update_phase2); weight32 is updated in place and the output is it cast to the weight's
    dtype."""
    inputs = ("weight", "g", "r1", "r2", "weight32")
    params = dict(LambPhase2.params)
    mutate_inputs = ("weight32",)
    differentiable = False

    def infer_shape(self, attrs, in_shapes):
        w = None
        for i in (0, 1, 4):
            w = merge_shape(self.name, f"input {self.inputs[i]!r}", w, in_shapes[i])
        return [w, w, (1,), (1,), w], [w]

    def infer_type(self, attrs, in_types):
        return mp_infer_type(self.name, list(self.inputs), in_types, 1, 1)

    def compute(self, attrs, inputs, ctx):
        w, g, r1, r2, w32 = inputs
        self.infer_shape(attrs, [x.shape for x in inputs])
        ratio = lamb_trust_ratio(attrs, float(r1.reshape(-1)[0]), float(r2.reshape(-1)[0]))
        new = (w32 - np.float32(attrs["lr"] * ratio) * g.astype(np.float32)).astype(np.float32)
        return [new.astype(w.dtype), new]


_MULTI_LAMB = {"learning_rates": Param(FloatTuple), "wds": Param(FloatTuple),
               "beta1": Param(Float, 0.9), "beta2": Param(Float, 0.999), "epsilon": Param(Float, 1e-6),
               "rescale_grad": Param(Float, 1.0), "lower_bound": Param(Float, -1.0),
               "upper_bound": Param(Float, -1.0), "clip_gradient": Param(Float, -1.0),
               "bias_correction": Param(Bool, True), "step_count": Param(Shape),
               "num_tensors": Param(Count, 1)}


class MultiLamb(MultiTensorOp):
    """LAMB over num_tensors groups: for tensor i, phase 1 at step step_count[i] with wds[i]
    (mean and var updated in place), r1 = ||w_i|| (the master copy's with mixed precision),
    r2 = ||g_i||, then phase 2 with learning_rates[i]."""
    params = _MULTI_LAMB
    count_key = "num_tensors"
    phases: ClassVar[tuple] = ("lamb_update_phase1", "lamb_update_phase2")

    def check_attrs(self, attrs, n):
        for key in ("learning_rates", "wds", "step_count"):
            _check_len(self.name, key, attrs[key], n, self.count_key)

    def compute(self, attrs, inputs, ctx):
        self.validate(attrs, inputs)
        one, two = (get_op(p) for p in self.phases)
        shared1 = {k: attrs[k] for k in ("beta1", "beta2", "epsilon", "rescale_grad", "clip_gradient",
                                          "bias_correction")}
        shared2 = {k: attrs[k] for k in ("lower_bound", "upper_bound")}
        outs, states = [], []
        for i, group in enumerate(self.groups(attrs, list(inputs))):
            w, grad, mean, var = group[:4]
            extra = group[4:]   # the master weight (mixed precision)
            p1 = one.parse(dict(shared1, t=attrs["step_count"][i], wd=attrs["wds"][i]))
            g, mean2, var2 = one.compute(p1, [w, grad, mean, var, *extra], ctx)
            master = extra[0] if extra else w
            r1 = np.array([math.sqrt(sum_sq(master))], np.float32)
            r2 = np.array([math.sqrt(sum_sq(g))], np.float32)
            p2 = two.parse(dict(shared2, lr=attrs["learning_rates"][i]))
            res = two.compute(p2, [w, g, r1, r2, *extra], ctx)
            outs.append(res[0])
            states += [mean2, var2, *res[1:]]
        return outs + states


def _register_pair(base: type, name: str, mp_name: str, **mp_attrs) -> None:
    """Register `base` over groups (weight, grad, mean, var) as `name`, and over groups with a
    float32 master copy (weight32; mean, var and weight32 float32) as `mp_name`."""
    register(name)(type(name, (base,), {"__doc__": base.__doc__, "per_group": ("weight", "grad", "mean", "var")}))
    register(mp_name)(type(mp_name, (base,), {"__doc__": base.__doc__ + " Mixed precision.",
                                              "per_group": ("weight", "grad", "mean", "var", "weight32"),
                                              "n_fp32": 3, **mp_attrs}))


_register_pair(MultiLamb, "_multi_lamb_update", "_multi_mp_lamb_update",
               phases=("mp_lamb_update_phase1", "mp_lamb_update_phase2"))


# ------------------------------------------------------------------------------------------
# AdamW with the gradient scale as an input
# ------------------------------------------------------------------------------------------

def _scale_of(op: str, arr: np.ndarray) -> float | None:
    """The rescale_grad input's value, or None when the update is to be skipped (NaN, Inf, 0)."""
    if arr.size != 1:
        raise MXNetError(f"{op}: input 'rescale_grad' must hold one element, got shape {arr.shape}")
    v = float(np.asarray(arr, np.float64).reshape(-1)[0])
    return v if math.isfinite(v) and v != 0.0 else None


_ADAMW = {"lr": Param(Float), "beta1": Param(Float, 0.9), "beta2": Param(Float, 0.999),
          "epsilon": Param(Float, 1e-8), "wd": Param(Float, 0.0), "eta": Param(Float),
          "clip_gradient": Param(Float, -1.0)}


def _adamw_group(attrs: Mapping, group: list, ctx, scale: float | None, mp: bool) -> list:
    """[new weight, mean, var(, weight32)] of one AdamW update (`_adamw_update`'s arithmetic on
    the master copy with `mp`); unchanged copies when `scale` is None (a skipped update)."""
    if scale is None:
        return [np.array(x, copy=True) for x in group[:1] + group[2:]]
    single = _MP_ADAMW_CORE if mp else get_op("_adamw_update")
    raw = {k: attrs[k] for k in ("lr", "beta1", "beta2", "epsilon", "wd", "eta", "clip_gradient")}
    return single.compute(single.parse(dict(raw, rescale_grad=scale)), group, ctx)


class MPAdamWCore(MPUpdate):
    """`_adamw_update`'s arithmetic in float32 on the master weight: the core of
    `_mp_adamw_update`, with rescale_grad as an attribute (not registered: MXNet has no such op;
    its callers check their inputs first)."""
    name = "_mp_adamw_update/core"
    inputs = ("weight", "grad", "mean", "var", "weight32")
    params = dict(AdamWUpdate.params)

    def exprs(self, attrs, w, g, m, v, w32):
        new, m2, v2 = AdamWUpdate.exprs(self, attrs, w32, g, m, v)
        return [new, m2, v2, new]


_MP_ADAMW_CORE = MPAdamWCore()


@register("_mp_adamw_update", aliases=("mp_adamw_update",))
class MPAdamWUpdate(Op):
    """Mixed-precision AdamW: m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
    w32 -= eta * (lr * m / (sqrt(v) + epsilon) + wd * w32); weight = w32, with
    g = clip(rescale_grad * grad). `rescale_grad` is an input (one element); when it is NaN, Inf
    or 0 the update is skipped. mean, var and weight32 are updated in place."""
    inputs = ("weight", "grad", "mean", "var", "weight32", "rescale_grad")
    params = _ADAMW
    mutate_inputs = ("mean", "var", "weight32")
    differentiable = False

    def infer_shape(self, attrs, in_shapes):
        w = None
        for name, s in zip(self.inputs[:5], in_shapes):
            w = merge_shape(self.name, f"input {name!r}", w, s)
        return [w] * 5 + [merge_shape(self.name, "input 'rescale_grad'", (1,), in_shapes[5])], [w]

    def infer_type(self, attrs, in_types):
        return mp_infer_type(self.name, list(self.inputs), in_types, 2, 1)

    def compute(self, attrs, inputs, ctx):
        self.infer_shape(attrs, [x.shape for x in inputs])
        self.infer_type(attrs, [x.dtype.name for x in inputs])
        return _adamw_group(attrs, list(inputs[:5]), ctx, _scale_of(self.name, inputs[5]), True)


class MultiAdamW(MultiTensorOp):
    """AdamW over num_weights groups with lrs[i], wds[i], etas[i] and one rescale_grad input
    (the last; NaN, Inf or 0 skips every update)."""
    params = {"lrs": Param(FloatTuple), "wds": Param(FloatTuple), "etas": Param(FloatTuple),
              "beta1": Param(Float, 0.9), "beta2": Param(Float, 0.999), "epsilon": Param(Float, 1e-8),
              "clip_gradient": Param(Float, -1.0), "num_weights": Param(Count, 1)}
    trailing = ("rescale_grad",)
    trailing_fp32 = False

    def check_attrs(self, attrs, n):
        for key in ("lrs", "wds", "etas"):
            _check_len(self.name, key, attrs[key], n, self.count_key)

    def infer_shape(self, attrs, in_shapes):
        ins, outs = super().infer_shape(attrs, list(in_shapes[:-1]) + [None])
        ins[-1] = merge_shape(self.name, "input 'rescale_grad'", (1,), in_shapes[-1])
        return ins, outs

    def compute(self, attrs, inputs, ctx):
        self.validate(attrs, inputs)
        scale = _scale_of(self.name, inputs[-1])
        mp = bool(self.n_fp32)
        outs, states = [], []
        for i, group in enumerate(self.groups(attrs, list(inputs[:-1]))):
            one = dict(attrs, lr=attrs["lrs"][i], wd=attrs["wds"][i], eta=attrs["etas"][i])
            res = _adamw_group(one, group, ctx, scale, mp)
            outs.append(res[0])
            states += res[1:]
        return outs + states


_register_pair(MultiAdamW, "_multi_adamw_update", "_multi_mp_adamw_update")
