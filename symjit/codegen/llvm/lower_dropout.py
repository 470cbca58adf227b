"""Native Dropout: identity in inference, a counter-based random mask in training.

Random numbers. The mask element with flat index i (in the mask's shape, which has size 1
along the shared `axes`) draws u = mix(seed + (i + 1) * GAMMA) >> 11 scaled to [0, 1): the
SplitMix64 generator evaluated at position i, so every element is independent of the thread
and chunk that computes it, the kernel vectorizes, and forward and backward agree because
the mask is an output (the gradient multiplies by it). The seed is a parameter refreshed on
every call (`LoweringContext.random_seed`, drawn from the call's generator or `symjit.random`),
so masks differ between calls and follow `symjit.random.seed`; they are not the same draws
as the reference's numpy generator (compiled and interpreted training runs agree in
distribution, not element by element).

Semantics follow `nn_norm.Dropout`: with keep = 1 - p, mask = (u < keep) / keep in the data
dtype (NaN for p = 1: 0 * 1/0), out = x * mask; in inference (mode 'training' and not
training) or with p == 0, out = x and mask = 1. A graph compiled without a fixed mode keeps the Python step.
"""
from __future__ import annotations

import numpy as np

from .graph import LoweringContext, MemcpyCall, ParallelCall, register_lowering
from .lower_loops import GRAIN, KernelWriter, row_strides
from .lower_shape import fill_call
from .vecmath import select

__all__ = ["GAMMA", "splitmix64_uniform", "mask_call"]

#: SplitMix64's increment (2**64 / golden ratio)
GAMMA = 0x9E3779B97F4A7C15
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _signed(c: int) -> int:
    """A uint64 constant as LLVM's signed i64 literal."""
    return c - (1 << 64) if c >= 1 << 63 else c


def splitmix64_uniform(seed: int, index: np.ndarray) -> np.ndarray:
    """The uniform [0, 1) numbers the kernel draws at `index` for `seed` (numpy, for tests)."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (index.astype(np.uint64) + np.uint64(1)) * np.uint64(GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_M1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_M2)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def _uniform(kw: KernelWriter, seed, i):
    """u in [0, 1) as a double (see the module docstring)."""
    z = seed + (i + 1) * _signed(GAMMA)
    z = (z ^ z.lshr(30)) * _signed(_M1)
    z = (z ^ z.lshr(27)) * _signed(_M2)
    z = z ^ z.lshr(31)
    return z.lshr(11).conv("uitofp", "double") * 2.0 ** -53


def mask_call(ctx: LoweringContext, mask, keep: float) -> ParallelCall:
    """A call drawing a dropout mask alone: mask[i] = (u_i < keep) / keep in mask's dtype
    (float32 or float64), u_i as the Dropout kernel draws it for element i (a fresh seed per
    call). For ops that keep their masks as an output, such as the RNN's between its layers."""
    dt = np.dtype(mask.type.dtype).name
    ty = "float" if dt == "float32" else "double"
    scale = float(np.asarray(1.0 / keep).astype(dt)) if keep else 0.0
    name = ctx.unique("sj_dropout_mask", f"mask|{dt}|{keep!r}")
    if name not in ctx.mb.symbols:
        kw = KernelWriter(ctx.mb, name, 2)
        seedp, mp = kw.args
        seed = kw.load("i64", seedp)
        with kw.loop(kw.begin, kw.end) as i:
            m = select(_uniform(kw, seed, i) < keep, kw.b.const(scale, ty), kw.b.const(0.0, ty))
            kw.store(ty, m, mp, i)
        kw.finish()
    return ParallelCall(name, int(np.prod(mask.type.shape, dtype=np.int64)), GRAIN, [ctx.random_seed(), mask])


@register_lowering("Dropout")
def lower_dropout(node, ctx: LoweringContext):
    x = node.inputs[0]
    out, mask = node.outputs
    dt = np.dtype(x.type.dtype).name
    if not (x.type.known and out.type.known) or dt not in ("float32", "float64"):
        return None
    shape = tuple(x.type.shape)
    n = int(np.prod(shape, dtype=np.int64))
    p = float(node.attrs["p"])
    active = node.attrs["mode"] == "always" or ctx.is_train
    if node.attrs["mode"] != "always" and ctx.is_train is None and p != 0.0:
        return None
    if n == 0:
        return []
    if not active or p == 0.0:
        ones = fill_call(ctx, mask, 1.0)
        return [MemcpyCall(out, x, n * np.dtype(dt).itemsize), ones]
    keep = 1.0 - p
    axes = sorted({a % len(shape) for a in node.attrs["axes"]})
    mshape = [1 if d in axes else s for d, s in enumerate(shape)]
    mstrides = [0 if d in axes else st for d, st in enumerate(row_strides(mshape))]
    scale = float(np.asarray(1.0 / keep).astype(dt)) if keep else float("inf")
    dropped = 0.0 if keep else float("nan")   # 0 * scale: NaN when every element is dropped
    name = ctx.unique("sj_dropout", f"dropout|{dt}|{shape}|{axes}|{keep!r}")
    if name not in ctx.mb.symbols:
        ty = "float" if dt == "float32" else "double"
        kw = KernelWriter(ctx.mb, name, 4)
        xp, seedp, op, mp = kw.args
        seed = kw.load("i64", seedp)
        with kw.loop(kw.begin, kw.end) as i:
            mi = kw.offset(kw.unravel(i, shape), mstrides) if axes else i
            hit = _uniform(kw, seed, mi) < keep
            m = select(hit, kw.b.const(scale, ty), kw.b.const(dropped, ty))
            kw.store(ty, m, mp, i)
            kw.store(ty, kw.load(ty, xp, i) * m, op, i)
        kw.finish()
    return [ParallelCall(name, n, GRAIN, [x, ctx.random_seed(), out, mask])]
