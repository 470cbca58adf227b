"""Testing helpers (MXNet's `mx.test_utils`): numeric gradient checks and close-comparisons.

`check_op_gradient` compares an operator's gradient rule (run through the numpy
emitter, i.e. the registered ops' reference implementations) with central finite
differences of its reference forward, in float64.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from .base import MXNetError
from .ops.registry import ComputeContext, apply_numpy, get_op, numpy_emitter

__all__ = ["assert_almost_equal", "almost_equal", "numeric_grad", "check_op_gradient", "rand_ndarray",
           "default_context", "same"]


def default_context():
    from .context import cpu
    return cpu()


def same(a, b) -> bool:
    return np.array_equal(np.asarray(_np(a)), np.asarray(_np(b)))


def _np(x):
    return x.asnumpy() if hasattr(x, "asnumpy") else np.asarray(x)


def almost_equal(a, b, rtol=1e-5, atol=1e-20, equal_nan=False) -> bool:
    return bool(np.allclose(_np(a), _np(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


def assert_almost_equal(a, b, rtol=1e-5, atol=1e-20, names=("a", "b"), equal_nan=False):
    a, b = _np(a), _np(b)
    if a.shape != b.shape:
        raise AssertionError(f"shape mismatch: {names[0]} {a.shape} vs {names[1]} {b.shape}")
    if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan):
        err = np.abs(a.astype(np.float64) - b.astype(np.float64))
        idx = np.unravel_index(np.nanargmax(err), err.shape) if err.size else ()
        raise AssertionError(f"{names[0]} and {names[1]} differ: max abs error {np.nanmax(err)} at "
                             f"{idx} ({a[idx]} vs {b[idx]}), rtol={rtol}, atol={atol}")


def rand_ndarray(shape, dtype="float32", low=-1.0, high=1.0, rng=None):
    from . import ndarray as nd
    rng = rng or np.random.default_rng()
    return nd.array(rng.uniform(low, high, size=shape), dtype=dtype)


def numeric_grad(f, x: np.ndarray, eps: float = 1e-4) -> np.ndarray:
    """Central finite differences of scalar function f at x (float64)."""
    g = np.zeros_like(x, dtype=np.float64)
    flat = x.reshape(-1)
    gf = g.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        fp = f()
        flat[i] = old - eps
        fm = f()
        flat[i] = old
        gf[i] = (fp - fm) / (2 * eps)
    return g


def check_op_gradient(op_name: str, inputs: Sequence[np.ndarray], attrs: Mapping | None = None,
                      wrt: Sequence[int] | None = None, eps: float = 1e-4, rtol: float = 1e-3,
                      atol: float = 1e-5, is_train: bool = False, seed: int = 0) -> None:
    """Assert that `op_name`'s gradient rule matches finite differences.

    Inputs are promoted to float64 (integer inputs such as indices are kept). The
    loss is sum_k <out_k, head_k> over the visible outputs with random heads, so
    every output's gradient path is exercised. `wrt` selects which inputs to check
    (default: every floating-point input).
    """
    attrs = dict(attrs or {})
    op = get_op(op_name)
    parsed = op.parse(attrs)
    xs = [np.array(x, dtype=np.float64, order="C") if np.issubdtype(np.asarray(x).dtype, np.floating)
          else np.array(x, order="C") for x in inputs]
    ctx = ComputeContext(is_train=is_train)
    nvis = op.num_visible_outputs(parsed)
    outs = apply_numpy(op_name, xs, attrs, ctx)[:nvis]
    rng = np.random.default_rng(seed)
    heads = [rng.uniform(-1, 1, size=o.shape).astype(o.dtype) for o in outs]

    def loss():
        ys = apply_numpy(op_name, xs, attrs, ComputeContext(is_train=is_train))[:nvis]
        return float(sum(np.sum(y.astype(np.float64) * h) for y, h in zip(ys, heads)))

    all_outs = apply_numpy(op_name, xs, attrs, ctx)
    grads = op.grad(numpy_emitter(ctx), parsed, xs, all_outs, heads + [
        np.zeros_like(o) for o in all_outs[nvis:]])
    if len(grads) != len(xs):
        raise MXNetError(f"{op_name}: gradient rule returned {len(grads)} gradients for {len(xs)} inputs")
    if wrt is None:
        wrt = [i for i, x in enumerate(xs) if np.issubdtype(x.dtype, np.floating)]
    for i in wrt:
        expected = numeric_grad(loss, xs[i], eps)
        got = np.asarray(grads[i], dtype=np.float64)
        assert_almost_equal(got, expected, rtol=rtol, atol=atol,
                            names=(f"{op_name} analytic d/d{op.input_names(parsed)[i]}", "numeric"))
