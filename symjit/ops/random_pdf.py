"""Densities of MXNet's distributions at given samples: `_random_pdf_<dist>` (MXNet 1.9.1's
`random_pdf_*`, `mx.nd.random.pdf_*` style ops): uniform(low, high), normal(mu, sigma),
gamma(alpha, beta; beta is the scale), exponential(lam), poisson(lam),
negative_binomial(k, p), generalized_negative_binomial(mu, alpha) and dirichlet(alpha).

`sample` has the parameters' shape P followed by any sample dims T (dirichlet: P + T + (K,) with
alpha of shape P + (K,)); the output has shape P + T: the density of each sample under the
parameters of its leading index (the log density with `is_log`). Gradients flow to the sample
and to every parameter, from d log pdf (times the pdf unless `is_log`); the discrete
distributions' samples get no gradient.
"""
from __future__ import annotations

import numpy as np
from scipy import special as sp

from ..base import MXNetError
from .attrs import Bool, Param
from .registry import Op, register


def _log_pdf_and_grads(dist: str, x: np.ndarray, params: list[np.ndarray]) -> tuple[np.ndarray, list]:
    """(log density, [d/dx, d/dparam...]) elementwise (dirichlet: over the last axis)."""
    if dist == "uniform":
        lo, hi = params
        inside = (x >= lo) & (x <= hi)
        w = hi - lo
        logp = np.where(inside, -np.log(w), -np.inf)
        return logp, [np.zeros_like(x), np.where(inside, 1.0 / w, 0.0), np.where(inside, -1.0 / w, 0.0)]
    if dist == "normal":
        mu, s = params
        z = (x - mu) / s
        logp = -0.5 * z * z - np.log(s) - 0.5 * np.log(2 * np.pi)
        return logp, [-z / s, z / s, (z * z - 1.0) / s]
    if dist == "gamma":
        a, b = params
        logp = (a - 1) * np.log(x) - x / b - sp.gammaln(a) - a * np.log(b)
        return logp, [(a - 1) / x - 1.0 / b, np.log(x) - sp.digamma(a) - np.log(b), x / (b * b) - a / b]
    if dist == "exponential":
        (lam,) = params
        return np.log(lam) - lam * x, [-lam + 0 * x, 1.0 / lam - x]
    if dist == "poisson":
        (lam,) = params
        logp = x * np.log(lam) - lam - sp.gammaln(x + 1)
        return logp, [np.zeros_like(x), x / lam - 1.0]
    if dist == "negative_binomial":
        k, p = params
        logp = sp.gammaln(x + k) - sp.gammaln(x + 1) - sp.gammaln(k) + k * np.log(p) + x * np.log1p(-p)
        return logp, [np.zeros_like(x), sp.digamma(x + k) - sp.digamma(k) + np.log(p), k / p - x / (1 - p)]
    if dist == "generalized_negative_binomial":
        mu, alpha = params
        k, p = 1.0 / alpha, 1.0 / (1.0 + alpha * mu)
        logp, (_, dk, dp) = _log_pdf_and_grads("negative_binomial", x, [k, p])
        dp_dmu = -alpha * p * p
        dk_dalpha, dp_dalpha = -k * k, -mu * p * p
        return logp, [np.zeros_like(x), dp * dp_dmu, dk * dk_dalpha + dp * dp_dalpha]
    if dist == "dirichlet":
        (a,) = params
        logp = sp.gammaln(a.sum(-1)) - sp.gammaln(a).sum(-1) + ((a - 1) * np.log(x)).sum(-1)
        return logp, [(a - 1) / x, sp.digamma(a.sum(-1, keepdims=True)) - sp.digamma(a) + np.log(x)]
    raise MXNetError(f"random_pdf: unknown distribution {dist!r}")


_DISTS = {"uniform": ("low", "high"), "normal": ("mu", "sigma"), "gamma": ("alpha", "beta"),
          "exponential": ("lam",), "poisson": ("lam",), "negative_binomial": ("k", "p"),
          "generalized_negative_binomial": ("mu", "alpha"), "dirichlet": ("alpha",)}


class _PDF(Op):
    dist = ""
    params = {"is_log": Param(Bool, False, "the log density")}

    def _lead(self, pshape) -> int:
        """Rank of the leading (parameter) dims P."""
        return len(pshape) - 1 if self.dist == "dirichlet" else len(pshape)

    def _check(self, sshape, pshapes) -> None:
        p0 = pshapes[0]
        for name, s in zip(self.inputs[1:], pshapes):
            if tuple(s) != tuple(p0):
                raise MXNetError(f"{self.name}: parameter {name!r} has shape {tuple(s)}, expected {tuple(p0)}")
        lead = self._lead(p0)
        if tuple(sshape[:lead]) != tuple(p0[:lead]) or len(sshape) < len(p0) or \
                (self.dist == "dirichlet" and sshape[-1] != p0[-1]):
            raise MXNetError(f"{self.name}: sample shape {tuple(sshape)} must start with the parameters' "
                             f"shape {tuple(p0[:lead])}" + (" and end with K" if self.dist == "dirichlet" else ""))

    def infer_shape(self, attrs, in_shapes):
        s, ps = in_shapes[0], in_shapes[1:]
        if s is None or any(p is None for p in ps):
            return list(in_shapes), [None]
        self._check(s, ps)
        out = tuple(s[:-1]) if self.dist == "dirichlet" else tuple(s)
        return list(in_shapes), [out]

    def infer_type(self, attrs, in_types):
        ins, outs = super().infer_type(attrs, in_types)
        if outs[0] is not None and np.dtype(outs[0]).kind != "f":
            raise MXNetError(f"{self.name}: inputs must be floating point, got {outs[0]}")
        return ins, outs

    def _expand(self, sample: np.ndarray, p: np.ndarray) -> np.ndarray:
        """A parameter broadcast against the sample's trailing sample dims."""
        lead = self._lead(p.shape)
        extra = sample.ndim - p.ndim
        if self.dist == "dirichlet":
            return p.reshape(p.shape[:lead] + (1,) * extra + p.shape[lead:])
        return p.reshape(p.shape + (1,) * extra)

    def evaluate(self, inputs) -> tuple[np.ndarray, list]:
        x = inputs[0].astype(np.float64)
        self._check(x.shape, [p.shape for p in inputs[1:]])
        ps = [self._expand(x, p.astype(np.float64)) for p in inputs[1:]]
        with np.errstate(divide="ignore", invalid="ignore"):
            return _log_pdf_and_grads(self.dist, x, ps)

    def compute(self, attrs, inputs, ctx):
        logp, _ = self.evaluate(inputs)
        out = logp if attrs["is_log"] else np.exp(logp)
        return [np.ascontiguousarray(out.astype(inputs[0].dtype))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return F.apply(f"_backward_{self.name}", [ograds[0], *inputs], **attrs)


def _reduce_to(g: np.ndarray, shape: tuple, lead: int, dirichlet: bool) -> np.ndarray:
    """Sum a per-sample gradient over the trailing sample dims down to a parameter's shape."""
    if dirichlet:
        axes = tuple(range(lead, g.ndim - 1))
    else:
        axes = tuple(range(len(shape), g.ndim))
    return g.sum(axis=axes).reshape(shape) if axes else g.reshape(shape)


for _dist, _names in _DISTS.items():
    _cls = register(f"_random_pdf_{_dist}", aliases=(f"random_pdf_{_dist}",))(type(
        f"PDF_{_dist}", (_PDF,), {"dist": _dist, "inputs": ("sample",) + _names,
                                  "__doc__": f"Density of the {_dist} distribution at `sample`."}))

    def _backward_compute(self, attrs, inputs, ctx, _fwd=_cls()):
        dy, rest = inputs[0].astype(np.float64), inputs[1:]
        logp, grads = _fwd.evaluate(rest)
        scale = dy if attrs["is_log"] else dy * np.exp(logp)
        if _fwd.dist == "dirichlet":
            scale = scale[..., None]
        out = [np.nan_to_num(grads[0] * scale).astype(rest[0].dtype)]
        lead = _fwd._lead(rest[1].shape)
        for g, p in zip(grads[1:], rest[1:]):
            out.append(_reduce_to(np.nan_to_num(g * scale), p.shape, lead, _fwd.dist == "dirichlet").astype(p.dtype))
        return out

    register(f"_backward__random_pdf_{_dist}")(type(f"BackwardPDF_{_dist}", (Op,), {
        "params": _PDF.params, "hidden": True, "inputs": ("ograd", "sample") + _names,
        "outputs": tuple(f"{n}_grad" for n in ("sample",) + _names),
        "infer_shape": lambda self, attrs, s: (list(s), list(s[1:])),
        "infer_type": lambda self, attrs, t: (list(t), list(t[1:])),
        "compute": _backward_compute,
        "__doc__": f"Gradients of _random_pdf_{_dist} w.r.t. the sample and the parameters."}))
