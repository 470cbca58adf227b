"""`_contrib_hawkesll` (MXNet 1.9.1): log likelihood of K independent univariate Hawkes processes
with exponential kernels, observed as ragged sequences.

Conditional intensity of process k: lambda_k(t) = mu_k + alpha_k * beta_k * sum over its past
points t_i of exp(-beta_k (t - t_i)). Inputs: lda = mu (N, K), alpha (K,), beta (K,), state
(N, K) (each process's decayed sum of past points at time 0), lags (N, T) (inter-arrival times
of the points of all processes), marks (N, T) int32 (the process of each point), valid_length
(N,) (points per sequence), max_time (N,) (end of the observation window). Outputs: the log
likelihood (N,) and the state at max_time (N, K).

Per sequence, as MXNet's kernel: t accumulates the lags; at a point of process k, with d the time
since k's previous point (or 0) and e = exp(-beta_k d), the log likelihood gains
log(mu_k + alpha_k beta_k s_k e) - mu_k d - alpha_k s_k (1 - e) and s_k becomes 1 + s_k e; at the
end every process adds its remaining compensator up to max_time and decays its state.

Gradients: the exact derivatives (tracked forward along each sequence) of both outputs with
respect to lda, alpha, beta and state; lags, marks, valid_length and max_time get none (zeros).
With no gradient flowing into out_state (the usual case: a loss of the log likelihood) the
lda / alpha / beta gradients are MXNet's; MXNet 1.9.1 itself ignores out_state's gradient and
leaves state's gradient unwritten. Computed in float64, rounded to the input dtype.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..base import MXNetError
from .registry import Op, merge_shape, register

_INPUTS = ("lda", "alpha", "beta", "state", "lags", "marks", "valid_length", "max_time")


def _err(op: str, msg: str) -> MXNetError:
    return MXNetError(f"{op}: {msg}")


@dataclass
class HawkesResult:
    """Log likelihood (N,), final state (N, K) and their derivatives (each (N, K)): of the log
    likelihood w.r.t. mu, alpha, beta, state; of the final state w.r.t. beta and state."""
    loglik: np.ndarray
    state: np.ndarray
    dll_mu: np.ndarray
    dll_alpha: np.ndarray
    dll_beta: np.ndarray
    dll_state: np.ndarray
    dst_beta: np.ndarray
    dst_state: np.ndarray


def _check(op: str, lda, marks, valid_length, lags) -> None:
    k, t = lda.shape[1], lags.shape[1]
    lengths = valid_length.astype(np.int64)
    if (lengths < 0).any() or (lengths > t).any():
        raise _err(op, f"valid_length must lie in [0, {t}], got {valid_length.tolist()}")
    for n, m in enumerate(lengths):
        bad = (marks[n, :m] < 0) | (marks[n, :m] >= k)
        if bad.any():
            raise _err(op, f"mark {int(marks[n, :m][bad][0])} is out of range [0, {k})")


def hawkes_loglik(lda, alpha, beta, state, lags, marks, valid_length, max_time) -> HawkesResult:
    """MXNet's hawkesll forward pass with forward-mode derivatives, in float64."""
    mu = lda.astype(np.float64)
    a, b = alpha.astype(np.float64), beta.astype(np.float64)
    s = state.astype(np.float64).copy()
    n_seq, k = mu.shape
    zeros = lambda: np.zeros((n_seq, k))
    ll, d_mu, d_a, d_b, d_s0 = np.zeros(n_seq), zeros(), zeros(), zeros(), zeros()
    s_b, s_0, last = zeros(), np.ones((n_seq, k)), zeros()
    for n in range(n_seq):
        t = 0.0
        for j in range(int(valid_length[n])):
            c = int(marks[n, j])
            t += float(lags[n, j])
            d = t - last[n, c]
            e = np.exp(-b[c] * d)
            sc, sb, s0 = s[n, c], s_b[n, c], s_0[n, c]
            lam = mu[n, c] + a[c] * b[c] * sc * e
            ll[n] += np.log(lam) - (mu[n, c] * d + a[c] * sc * (1 - e))
            d_mu[n, c] += 1 / lam - d
            d_a[n, c] += b[c] * sc * e / lam - sc * (1 - e)
            d_b[n, c] += a[c] * e * (sc + b[c] * sb - b[c] * d * sc) / lam - a[c] * (sb * (1 - e) + sc * d * e)
            d_s0[n, c] += a[c] * b[c] * e * s0 / lam - a[c] * (1 - e) * s0
            s[n, c], s_b[n, c], s_0[n, c] = 1 + sc * e, e * (sb - d * sc), e * s0
            last[n, c] = t
    d = max_time.astype(np.float64)[:, None] - last
    e = np.exp(-b[None, :] * d)
    ll -= (mu * d + a * s * (1 - e)).sum(axis=1)
    d_mu -= d
    d_a -= s * (1 - e)
    d_b -= a * (s_b * (1 - e) + s * d * e)
    d_s0 -= a * (1 - e) * s_0
    return HawkesResult(ll, e * s, d_mu, d_a, d_b, d_s0, e * (s_b - d * s), e * s_0)


def _infer_shapes(op: str, in_shapes):
    lda, alpha, beta, state, lags, marks, vlen, tmax = in_shapes
    lda = merge_shape(op, "input 'state'", lda, state)
    if lda is not None and len(lda) != 2:
        raise _err(op, f"lda must have shape (N, K), got {tuple(lda)}")
    lags = merge_shape(op, "input 'marks'", lags, marks)
    if lags is not None and len(lags) != 2:
        raise _err(op, f"lags must have shape (N, T), got {tuple(lags)}")
    n = (lda[0] if lda else 0) or (lags[0] if lags else 0)
    k = lda[1] if lda else 0
    t = lags[1] if lags else 0
    params = merge_shape(op, "input 'beta'", merge_shape(op, "input 'alpha'", (k,), alpha), beta)
    lda = merge_shape(op, "input 'lda'", (n, params[0]), lda)
    lags = merge_shape(op, "input 'lags'", (n, t), lags)
    vec = merge_shape(op, "input 'max_time'", merge_shape(op, "input 'valid_length'", (n,), vlen), tmax)
    return [lda, params, params, lda, lags, lags, vec, vec]


def _infer_types(op: str, in_types) -> list:
    t = next((x for i, x in enumerate(in_types) if x is not None and i != 5), None)
    if t is not None and np.dtype(t).kind != "f":
        raise _err(op, f"inputs must be floating point, got {t}")
    for name, x in zip(_INPUTS, in_types):
        if name != "marks" and x is not None and x != t:
            raise _err(op, f"dtype mismatch for input {name!r}: expected {t}, got {x}")
    return [t] * 5 + ["int32"] + [t, t]


@register("_contrib_hawkesll")
class HawkesLL(Op):
    """Log likelihood (N,) and final state (N, K) of Hawkes process sequences."""
    inputs = _INPUTS
    outputs = ("output", "out_state")
    kernel = "scan"

    def infer_shape(self, attrs, in_shapes):
        ins = _infer_shapes(self.name, in_shapes)
        n, k = ins[0] if ins[0] is not None else (0, 0)
        return ins, [(n,), (n, k)]

    def infer_type(self, attrs, in_types):
        ins = _infer_types(self.name, in_types)
        return ins, [ins[0], ins[0]]

    def compute(self, attrs, inputs, ctx):
        self.infer_shape(attrs, [x.shape for x in inputs])
        _check(self.name, inputs[0], inputs[5], inputs[6], inputs[4])
        r = hawkes_loglik(*inputs)
        dt = inputs[0].dtype
        return [r.loglik.astype(dt), r.state.astype(dt)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return F.apply("_backward_contrib_hawkesll", [ograds[0], ograds[1], *inputs])


@register("_backward_contrib_hawkesll")
class BackwardHawkesLL(Op):
    """Gradients of hawkesll's inputs from (d output, d out_state, the forward inputs)."""
    inputs = ("ograd", "ograd_state") + _INPUTS
    outputs = tuple(f"d_{n}" for n in _INPUTS)
    hidden = True
    differentiable = False

    def infer_shape(self, attrs, in_shapes):
        ins = _infer_shapes(self.name, in_shapes[2:])
        n, k = ins[0] if ins[0] is not None else (0, 0)
        g = merge_shape(self.name, "input 'ograd'", (n,), in_shapes[0])
        gs = merge_shape(self.name, "input 'ograd_state'", (n, k), in_shapes[1])
        return [g, gs] + ins, ins

    def infer_type(self, attrs, in_types):
        ins = _infer_types(self.name, in_types[2:])
        return [ins[0], ins[0]] + ins, ins

    def compute(self, attrs, inputs, ctx):
        g, gs, *fwd = inputs
        _check(self.name, fwd[0], fwd[5], fwd[6], fwd[4])
        r = hawkes_loglik(*fwd)
        g = g.astype(np.float64)[:, None]
        gs = gs.astype(np.float64)
        grads = [g * r.dll_mu, (g * r.dll_alpha).sum(axis=0),
                 (g * r.dll_beta + gs * r.dst_beta).sum(axis=0), g * r.dll_state + gs * r.dst_state]
        out = [x.astype(fwd[i].dtype) for i, x in enumerate(grads)]
        return out + [np.zeros_like(x) for x in fwd[4:]]
