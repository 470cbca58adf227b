"""Compiled kernels for large eager elementwise ops (and optimizer updates).

An eager NDArray elementwise op (or a fused optimizer update such as `sgd_mom_update`) over at
least `MIN_ELEMENTS` elements runs the same LLVM
kernel a compiled graph would (`codegen.llvm.compile_elementwise`, cached per dtype and
broadcast pattern, size-independent for flat kernels) on the runtime's thread pool, instead
of one numpy pass per primitive of its scalar expression. Small arrays keep the numpy
reference (compiling is not worth it, and printed results stay the reference's digits).
Results agree with the reference within a few ulp (vectorized transcendental functions).
`SYMJIT_EAGER_JIT=0` disables the fast path.
"""
from __future__ import annotations

import os

import numpy as np

from ..ops import scalar as S
from ..ops.registry import Elementwise, broadcast_shapes

__all__ = ["try_compiled_elementwise", "MIN_ELEMENTS"]

MIN_ELEMENTS = 1 << 16
GRAIN = 1 << 15
_ENABLED = os.environ.get("SYMJIT_EAGER_JIT", "1") != "0"
_SUPPORTED = {"float32", "float64", "int32", "int64", "uint8", "int8"}


def _expressions(op, attrs, arrays):
    """(expressions, output dtypes, broadcast?) of an elementwise op, or None.

    Elementwise ops have one expression; update ops (`optimizer_ops`: new weight and new
    states) one per output, all over same-shaped inputs."""
    dtype = arrays[0].dtype
    if isinstance(op, Elementwise):
        return (op.full_expr(attrs),), (np.dtype(op.out_dtype(attrs, dtype.name)),), op.broadcast
    if op.kernel == "elementwise" and hasattr(op, "exprs"):
        exprs = tuple(op.exprs(attrs, *[S.Input(i) for i in range(len(arrays))]))
        return exprs, (dtype,) * len(exprs), False
    return None


def try_compiled_elementwise(op, attrs, arrays: list, destinations: list | None = None) -> list | None:
    """The op's outputs computed by a compiled kernel, or None to use the reference.

    `destinations` (optional): arrays to write the outputs into, used when each has the output's
    shape and dtype and is C-contiguous (they may be inputs: kernels load every input of an
    element before storing)."""
    if not _ENABLED or not arrays or max(a.size for a in arrays) < MIN_ELEMENTS:
        return None
    dtype = arrays[0].dtype
    if dtype.name not in _SUPPORTED or any(a.dtype != dtype for a in arrays):
        return None
    found = _expressions(op, attrs, arrays)
    if found is None:
        return None
    exprs, out_dtypes, broadcast = found
    try:
        out_shape = broadcast_shapes(op.name, [a.shape for a in arrays]) if broadcast else arrays[0].shape
    except Exception:  # noqa: BLE001 - shape errors are reported by the reference path
        return None
    if not broadcast and any(a.shape != out_shape for a in arrays):
        return None
    if any(d.name not in _SUPPORTED for d in out_dtypes):
        return None
    try:
        from .. import runtime
        from ..codegen.llvm import ElementwiseSpec, compile_elementwise
    except ImportError:
        return None
    arrays = [np.ascontiguousarray(a) for a in arrays]
    spec = ElementwiseSpec(exprs, tuple(a.dtype.name for a in arrays), tuple(a.shape for a in arrays),
                           dtype.name, tuple(d.name for d in out_dtypes), tuple(out_shape))
    kernel = compile_elementwise(spec)
    outs = None
    if destinations is not None and len(destinations) == len(out_dtypes) and all(
            isinstance(d, np.ndarray) and d.shape == tuple(out_shape) and d.dtype == dt and d.flags.c_contiguous
            and d.flags.writeable for d, dt in zip(destinations, out_dtypes)):
        outs = list(destinations)
    if outs is None:
        outs = [np.empty(out_shape, d) for d in out_dtypes]
    runtime.parallel_for(kernel.address, outs[0].size, GRAIN, arrays + outs)
    return outs
