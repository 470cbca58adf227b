"""Compiled kernels for large eager elementwise ops.

An eager NDArray elementwise op over at least `MIN_ELEMENTS` elements runs the same LLVM
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

from ..ops.registry import Elementwise, broadcast_shapes

__all__ = ["try_compiled_elementwise", "MIN_ELEMENTS"]

MIN_ELEMENTS = 1 << 16
GRAIN = 1 << 15
_ENABLED = os.environ.get("SYMJIT_EAGER_JIT", "1") != "0"
_SUPPORTED = {"float32", "float64", "int32", "int64", "uint8", "int8"}


def try_compiled_elementwise(op, attrs, arrays: list) -> list | None:
    """The op's outputs computed by a compiled kernel, or None to use the reference."""
    if not _ENABLED or not isinstance(op, Elementwise) or not arrays:
        return None
    if max(a.size for a in arrays) < MIN_ELEMENTS:
        return None
    dtype = arrays[0].dtype
    if dtype.name not in _SUPPORTED or any(a.dtype != dtype for a in arrays):
        return None
    try:
        out_shape = broadcast_shapes(op.name, [a.shape for a in arrays]) if op.broadcast else arrays[0].shape
    except Exception:  # noqa: BLE001 - shape errors are reported by the reference path
        return None
    if not op.broadcast and any(a.shape != out_shape for a in arrays):
        return None
    out_dtype = np.dtype(op.out_dtype(attrs, dtype.name))
    if out_dtype.name not in _SUPPORTED:
        return None
    try:
        from .. import runtime
        from ..codegen.llvm import ElementwiseSpec, compile_elementwise
    except ImportError:
        return None
    arrays = [np.ascontiguousarray(a) for a in arrays]
    spec = ElementwiseSpec((op.full_expr(attrs),), tuple(a.dtype.name for a in arrays),
                           tuple(a.shape for a in arrays), dtype.name, (out_dtype.name,), tuple(out_shape))
    kernel = compile_elementwise(spec)
    out = np.empty(out_shape, out_dtype)
    runtime.parallel_for(kernel.address, out.size, GRAIN, arrays + [out])
    return [out]
