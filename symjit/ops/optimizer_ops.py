"""Optimizer update operators (MXNet's `sgd_update`, `sgd_mom_update`, `adam_update`, ...).

Each update is a set of elementwise scalar expressions over (weight, grad, states):
one expression for the new weight (the op's output) and one per state, whose new
values overwrite the state inputs in place (`mutate_inputs`, MXNet's
FMutateInputs). Being expressions, the updates compile into one fused kernel per
parameter like any elementwise group. Gradient clipping follows MXNet: a negative
`clip_gradient` means no clipping. Update ops are not differentiable.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..base import MXNetError
from . import scalar as S
from .attrs import Bool, Float, Int, Param
from .registry import Op, merge_shape, register

_COMMON = {"lr": Param(Float), "wd": Param(Float, 0.0), "rescale_grad": Param(Float, 1.0),
           "clip_gradient": Param(Float, -1.0)}


def _clip_to(x: S.Expr, c) -> S.Expr:
    """x clipped to [-c, c]; a negative `c` means no clipping."""
    return S.minimum(S.maximum(x, -c), c) if c >= 0 else x


def _clipped(grad: S.Expr, attrs: Mapping) -> S.Expr:
    g = grad * attrs["rescale_grad"] if attrs["rescale_grad"] != 1.0 else grad
    return _clip_to(g, attrs["clip_gradient"])


class Update(Op):
    """Base of update ops: `exprs(attrs, *inputs)` gives [new weight, new state...]."""
    differentiable = False
    kernel = "elementwise"
    outputs = ("output",)

    @property
    def mutate_inputs(self) -> tuple:  # every input after weight and grad is a state
        return tuple(self.inputs[2:])

    def exprs(self, attrs: Mapping, *xs: S.Expr) -> list[S.Expr]:
        raise MXNetError(f"{self.name} defines no update expressions")

    def infer_shape(self, attrs, in_shapes):
        merged = None
        names = self.input_names(attrs)
        for name, s in zip(names, in_shapes):
            merged = merge_shape(self.name, f"input {name!r}", merged, s)
        return [merged] * len(in_shapes), [merged]

    #: the output (the new weight) has the weight's dtype
    output_like_weight = True

    def compute_dtype(self, inputs) -> np.dtype:
        """The dtype the expressions are evaluated in (the weight's; float32 for mixed precision)."""
        return inputs[0].dtype

    def compute(self, attrs, inputs, ctx):
        xs = [S.Input(i) for i in range(len(inputs))]
        for name, x in zip(self.input_names(attrs), inputs):
            if x.shape != inputs[0].shape:
                raise MXNetError(f"{self.name}: shape mismatch for input {name!r}: expected "
                                 f"{inputs[0].shape}, got {x.shape}")
        dtype = self.compute_dtype(inputs)
        outs = [np.ascontiguousarray(S.evaluate(e, inputs, dtype)) for e in self.exprs(attrs, *xs)]
        if self.output_like_weight and outs[0].dtype != inputs[0].dtype:   # the weight's dtype
            outs[0] = outs[0].astype(inputs[0].dtype)
        return outs


@register("sgd_update")
class SGDUpdate(Update):
    """weight - lr * (clip(rescale * grad) + wd * weight)."""
    inputs = ("weight", "grad")
    params = {**_COMMON, "lazy_update": Param(Bool, True)}

    def exprs(self, attrs, w, g):
        return [w - attrs["lr"] * (_clipped(g, attrs) + attrs["wd"] * w)]


@register("sgd_mom_update")
class SGDMomUpdate(Update):
    """mom = momentum * mom - lr * (g + wd * w); w += mom."""
    inputs = ("weight", "grad", "mom")
    params = {**_COMMON, "momentum": Param(Float, 0.0), "lazy_update": Param(Bool, True)}

    def exprs(self, attrs, w, g, mom):
        new_mom = attrs["momentum"] * mom - attrs["lr"] * (_clipped(g, attrs) + attrs["wd"] * w)
        return [w + new_mom, new_mom]


@register("nag_mom_update")
class NAGMomUpdate(Update):
    """Nesterov momentum, MXNet 1.9.1's formula: with gw = g + wd * w,
    mom = momentum * mom - lr * gw; w += momentum * mom - lr * gw (the new mom)."""
    inputs = ("weight", "grad", "mom")
    params = {**_COMMON, "momentum": Param(Float, 0.0)}

    def exprs(self, attrs, w, g, mom):
        step = attrs["lr"] * (_clipped(g, attrs) + attrs["wd"] * w)
        new_mom = attrs["momentum"] * mom - step
        return [w + attrs["momentum"] * new_mom - step, new_mom]


class MPUpdate(Update):
    """Mixed-precision update (MXNet's `mp_*` ops): `weight` and `grad` share any float dtype
    (float16 in practice); the states and the master weight `weight32` (the last input) are
    float32. The update runs in float32 on the master weight; `weight32` and the states are
    overwritten in place and the output is the new master cast to the weight's dtype.
    `exprs` returns [new master, new states..., new master]."""
    #: inputs of the weight's dtype (the rest are float32)
    n_low = 2

    def compute_dtype(self, inputs) -> np.dtype:
        return np.dtype(np.float32)

    def compute(self, attrs, inputs, ctx):
        self.infer_type(attrs, [x.dtype.name for x in inputs])
        return super().compute(attrs, inputs, ctx)

    def infer_type(self, attrs, in_types):
        return mp_infer_type(self.name, self.input_names(attrs), in_types, self.n_low, 1)


def mp_infer_type(op: str, names: list, in_types: list, n_low: int, n_out: int) -> tuple[list, list]:
    """Types of a mixed-precision op: the first `n_low` inputs share one dtype (the outputs'),
    the others are float32. Mismatches raise MXNetError naming the op and the input."""
    known = next((t for t in in_types[:n_low] if t is not None), None)
    for name, t in zip(names[:n_low], in_types[:n_low]):
        if t is not None and t != known:
            raise MXNetError(f"{op}: dtype mismatch for input {name!r}: expected {known}, got {t}")
    for name, t in zip(names[n_low:], in_types[n_low:]):
        if t is not None and np.dtype(t) != np.float32:
            raise MXNetError(f"{op}: input {name!r} must be float32, got {t}")
    return [known] * n_low + ["float32"] * (len(in_types) - n_low), [known] * n_out


def _sgd_step(attrs: Mapping, w: S.Expr, g: S.Expr) -> S.Expr:
    """lr * (clip(rescale_grad * grad) + wd * w): the plain SGD step."""
    return attrs["lr"] * (_clipped(g, attrs) + attrs["wd"] * w)


@register("mp_sgd_update")
class MPSGDUpdate(MPUpdate):
    """sgd_update on the float32 master copy: w32 -= lr * (clip(g) + wd * w32); weight = w32."""
    inputs = ("weight", "grad", "weight32")
    params = {**_COMMON, "lazy_update": Param(Bool, True)}

    def exprs(self, attrs, w, g, w32):
        new = w32 - _sgd_step(attrs, w32, g)
        return [new, new]


@register("mp_sgd_mom_update")
class MPSGDMomUpdate(MPUpdate):
    """sgd_mom_update on the float32 master copy: mom = momentum * mom - lr * (clip(g) + wd * w32);
    w32 += mom; weight = w32."""
    inputs = ("weight", "grad", "mom", "weight32")
    params = {**_COMMON, "momentum": Param(Float, 0.0), "lazy_update": Param(Bool, True)}

    def exprs(self, attrs, w, g, mom, w32):
        new_mom = attrs["momentum"] * mom - _sgd_step(attrs, w32, g)
        new = w32 + new_mom
        return [new, new_mom, new]


@register("mp_nag_mom_update")
class MPNAGMomUpdate(MPUpdate):
    """nag_mom_update on the float32 master copy, MXNet 1.9.1's kernel: with m = momentum * mom,
    w32' = w32 - m + (momentum + 1) * (m - lr * (clip(g) + wd * w32)), then
    mom = m - lr * (clip(g) + wd * w32') (the decay term reads the updated master, as MXNet's)."""
    inputs = ("weight", "grad", "mom", "weight32")
    params = {**_COMMON, "momentum": Param(Float, 0.0)}

    def exprs(self, attrs, w, g, mom, w32):
        mu = attrs["momentum"]
        m = mu * mom
        new = w32 - m + (mu + 1.0) * (m - _sgd_step(attrs, w32, g))
        return [new, m - _sgd_step(attrs, new, g), new]


@register("adam_update")
class AdamUpdate(Update):
    """Adam with MXNet's placement of weight decay (added to the gradient); `lr` is bias-corrected
    by the caller."""
    inputs = ("weight", "grad", "mean", "var")
    params = {**_COMMON, "beta1": Param(Float, 0.9), "beta2": Param(Float, 0.999),
              "epsilon": Param(Float, 1e-8), "lazy_update": Param(Bool, True)}

    def exprs(self, attrs, w, g, m, v):
        # MXNet's AdamUpdate clips rescale_grad * grad + wd * weight (the decay is clipped too)
        gw = _clip_to(g * attrs["rescale_grad"] + attrs["wd"] * w, attrs["clip_gradient"])
        b1, b2 = attrs["beta1"], attrs["beta2"]
        m2 = b1 * m + (1.0 - b1) * gw
        v2 = b2 * v + (1.0 - b2) * gw * gw
        return [w - attrs["lr"] * m2 / (S.call("sqrt", v2) + attrs["epsilon"]), m2, v2]


@register("ftml_update")
class FTMLUpdate(Update):
    """FTML (Follow The Moving Leader, Zheng & Kwok 2017) as MXNet's ftml_update: with
    g = clip(rescale_grad * grad, clip_grad) + wd * w at step t,
    v = beta2 v + (1 - beta2) g^2;  d_t = (1 - beta1^t) / lr * (sqrt(v / (1 - beta2^t)) + eps);
    z = beta1 z + (1 - beta1) g - (d_t - beta1 d) w;  d = d_t;  w = -z / d_t."""
    inputs = ("weight", "grad", "d", "v", "z")
    params = {"lr": Param(Float), "beta1": Param(Float, 0.6), "beta2": Param(Float, 0.999),
              "epsilon": Param(Float, 1e-8), "t": Param(Int), "wd": Param(Float, 0.0),
              "rescale_grad": Param(Float, 1.0), "clip_grad": Param(Float, -1.0)}

    def exprs(self, attrs, w, g, d, v, z):
        gw = _clipped(g, {"rescale_grad": attrs["rescale_grad"], "clip_gradient": attrs["clip_grad"]}) \
            + attrs["wd"] * w
        b1, b2, t = attrs["beta1"], attrs["beta2"], attrs["t"]
        if t < 1:
            raise MXNetError(f"ftml_update: t (the step number) must be at least 1, got {t}")
        v2 = b2 * v + (1.0 - b2) * gw * gw
        d2 = (1.0 - b1 ** t) / attrs["lr"] * (S.call("sqrt", v2 / (1.0 - b2 ** t)) + attrs["epsilon"])
        z2 = b1 * z + (1.0 - b1) * gw - (d2 - b1 * d) * w
        return [-z2 / d2, d2, v2, z2]


@register("_adamw_update", aliases=("adamw_update",))
class AdamWUpdate(Update):
    """AdamW: decoupled weight decay, w -= eta * (lr * m / (sqrt(v) + eps) + wd * w)."""
    inputs = ("weight", "grad", "mean", "var")
    params = {**_COMMON, "beta1": Param(Float, 0.9), "beta2": Param(Float, 0.999),
              "epsilon": Param(Float, 1e-8), "eta": Param(Float, 1.0)}

    def exprs(self, attrs, w, g, m, v):
        gc = _clipped(g, attrs)
        b1, b2 = attrs["beta1"], attrs["beta2"]
        m2 = b1 * m + (1.0 - b1) * gc
        v2 = b2 * v + (1.0 - b2) * gc * gc
        step = attrs["lr"] * m2 / (S.call("sqrt", v2) + attrs["epsilon"]) + attrs["wd"] * w
        return [w - attrs["eta"] * step, m2, v2]


@register("rmsprop_update")
class RMSPropUpdate(Update):
    """n = (1 - gamma1) * g^2 + gamma1 * n; w -= lr * g / sqrt(n + eps) (optionally clipped)."""
    inputs = ("weight", "grad", "n")
    params = {**_COMMON, "gamma1": Param(Float, 0.95), "epsilon": Param(Float, 1e-8),
              "clip_weights": Param(Float, -1.0)}

    def exprs(self, attrs, w, g, n):
        gw = _clipped(g, attrs) + attrs["wd"] * w
        g1 = attrs["gamma1"]
        n2 = (1.0 - g1) * gw * gw + g1 * n
        w2 = w - attrs["lr"] * gw / S.call("sqrt", n2 + attrs["epsilon"])
        cw = attrs["clip_weights"]
        return [S.minimum(S.maximum(w2, -cw), cw) if cw >= 0 else w2, n2]


@register("rmspropalex_update")
class RMSPropAlexUpdate(Update):
    """Centered RMSProp (Graves 2013)."""
    inputs = ("weight", "grad", "n", "g", "delta")
    params = {**_COMMON, "gamma1": Param(Float, 0.95), "gamma2": Param(Float, 0.9),
              "epsilon": Param(Float, 1e-8), "clip_weights": Param(Float, -1.0)}

    def exprs(self, attrs, w, grad, n, g, delta):
        gw = _clipped(grad, attrs) + attrs["wd"] * w
        g1, g2 = attrs["gamma1"], attrs["gamma2"]
        n2 = (1.0 - g1) * gw * gw + g1 * n
        gm = (1.0 - g1) * gw + g1 * g
        d2 = g2 * delta - attrs["lr"] * gw / S.call("sqrt", n2 - gm * gm + attrs["epsilon"])
        w2 = w + d2
        cw = attrs["clip_weights"]
        return [S.minimum(S.maximum(w2, -cw), cw) if cw >= 0 else w2, n2, gm, d2]


@register("_adagrad_update")
class AdaGradUpdate(Update):
    """history += g^2; w -= lr * (g / sqrt(history + eps) + wd * w)."""
    inputs = ("weight", "grad", "history")
    params = {**_COMMON, "epsilon": Param(Float, 1e-7)}

    def exprs(self, attrs, w, g, h):
        gc = _clipped(g, attrs)
        h2 = h + gc * gc
        return [w - attrs["lr"] * (gc / S.call("sqrt", h2 + attrs["epsilon"]) + attrs["wd"] * w), h2]


@register("_sparse_adagrad_update")
class SparseAdaGradUpdate(AdaGradUpdate):
    """MXNet's `nd.sparse.adagrad_update`: AdaGrad without weight decay (MXNet refuses a non-zero
    `wd`), lazy on a row_sparse gradient (only its rows and their history change)."""

    def parse(self, raw):
        attrs = super().parse(raw)
        if attrs["wd"] != 0.0:
            raise MXNetError(f"{self.name}: weight decay is not supported (wd must be 0), got {attrs['wd']}")
        return attrs


@register("_adadelta_update")
class AdaDeltaUpdate(Update):
    """AdaDelta (Zeiler 2012) with weight decay added to the step."""
    inputs = ("weight", "grad", "acc_g", "acc_delta")
    params = {"wd": Param(Float, 0.0), "rescale_grad": Param(Float, 1.0),
              "clip_gradient": Param(Float, -1.0), "rho": Param(Float, 0.9), "epsilon": Param(Float, 1e-5)}

    def exprs(self, attrs, w, g, acc_g, acc_d):
        gc = _clipped(g, attrs)
        rho, eps = attrs["rho"], attrs["epsilon"]
        ag = rho * acc_g + (1.0 - rho) * gc * gc
        delta = S.call("sqrt", acc_d + eps) / S.call("sqrt", ag + eps) * gc
        ad = rho * acc_d + (1.0 - rho) * delta * delta
        return [w - (delta + attrs["wd"] * w), ag, ad]


@register("ftrl_update")
class FtrlUpdate(Update):
    """FTRL-proximal (McMahan et al. 2013), MXNet's parameterisation."""
    inputs = ("weight", "grad", "z", "n")
    params = {**_COMMON, "lamda1": Param(Float, 0.01), "beta": Param(Float, 1.0)}

    def exprs(self, attrs, w, g, z, n):
        gc = _clipped(g, attrs)
        lr = attrs["lr"]
        z2 = z + gc - (S.call("sqrt", n + gc * gc) - S.call("sqrt", n)) * w / lr
        n2 = n + gc * gc
        l1 = attrs["lamda1"]
        w2 = (S.call("sign", z2) * l1 - z2) / ((attrs["beta"] + S.call("sqrt", n2)) / lr + attrs["wd"]) \
            * (S.call("abs", z2) > l1)
        return [w2, z2, n2]


@register("signum_update")
class SignumUpdate(Update):
    """mom = momentum * mom - (1 - momentum) * (g + wd * w); w = (1 - lr * wd_lh) * w + lr * sign(mom)."""
    inputs = ("weight", "grad", "mom")
    params = {**_COMMON, "momentum": Param(Float, 0.0), "wd_lh": Param(Float, 0.0)}

    def exprs(self, attrs, w, g, mom):
        mu = attrs["momentum"]
        m2 = mu * mom - (1.0 - mu) * (_clipped(g, attrs) + attrs["wd"] * w)
        return [(1.0 - attrs["lr"] * attrs["wd_lh"]) * w + attrs["lr"] * S.call("sign", m2), m2]


@register("signsgd_update")
class SignSGDUpdate(Update):
    """w = (1 - lr * wd) * w - lr * sign(g)."""
    inputs = ("weight", "grad")
    params = dict(_COMMON)

    def exprs(self, attrs, w, g):
        return [(1.0 - attrs["lr"] * attrs["wd"]) * w - attrs["lr"] * S.call("sign", _clipped(g, attrs))]


@register("lamb_update_phase1")
class LambPhase1(Update):
    """LAMB direction: Adam moments (optionally bias-corrected at step t) plus wd * w."""
    inputs = ("weight", "grad", "mean", "var")
    params = {"beta1": Param(Float, 0.9), "beta2": Param(Float, 0.999), "epsilon": Param(Float, 1e-6),
              "t": Param(Float), "bias_correction": Param(Bool, True), "wd": Param(Float),
              "rescale_grad": Param(Float, 1.0), "clip_gradient": Param(Float, -1.0)}

    def exprs(self, attrs, w, g, m, v):
        gc = _clipped(g, attrs)
        b1, b2 = attrs["beta1"], attrs["beta2"]
        m2 = b1 * m + (1.0 - b1) * gc
        v2 = b2 * v + (1.0 - b2) * gc * gc
        mh, vh = m2, v2
        if attrs["bias_correction"]:
            mh = m2 / (1.0 - b1 ** attrs["t"])
            vh = v2 / (1.0 - b2 ** attrs["t"])
        return [mh / (S.call("sqrt", vh) + attrs["epsilon"]) + attrs["wd"] * w, m2, v2]


@register("lamb_update_phase2")
class LambPhase2(Op):
    """w -= lr * ratio * g with ratio = r1 / r2 (norms of w and g, clipped to the bounds;
    1 where either norm is 0). r1 and r2 have shape (1,)."""
    inputs = ("weight", "g", "r1", "r2")
    params = {"lr": Param(Float), "lower_bound": Param(Float, -1.0), "upper_bound": Param(Float, -1.0)}
    differentiable = False
    kernel = "elementwise"

    def infer_shape(self, attrs, in_shapes):
        w = merge_shape(self.name, "input 'g'", in_shapes[0], in_shapes[1])
        return [w, w, (1,), (1,)], [w]

    def compute(self, attrs, inputs, ctx):
        w, g, r1, r2 = inputs
        ratio = lamb_trust_ratio(attrs, float(r1.reshape(-1)[0]), float(r2.reshape(-1)[0]))
        return [(w - attrs["lr"] * ratio * g).astype(w.dtype)]


def lamb_trust_ratio(attrs: Mapping, r1: float, r2: float) -> float:
    """LAMB's trust ratio r1 / r2 with r1 clipped to [lower_bound, upper_bound] (a negative bound
    is no bound); 1 when either norm is 0."""
    if attrs["lower_bound"] >= 0:
        r1 = max(r1, attrs["lower_bound"])
    if attrs["upper_bound"] >= 0:
        r1 = min(r1, attrs["upper_bound"])
    return 1.0 if r1 == 0 or r2 == 0 else r1 / r2
