"""Pooling lowerings: Pooling (max / avg / sum / lp, global, valid / full / same conventions,
count_include_pad) and `_backward_Pooling`, as calls into runtime/nnkernels.c.

One task per (image, channel) plane over the runtime's thread pool; each output row is
accumulated from whole input rows (vectorised along the row), with windows clipped to the input
as in symjit.ops.nn_conv.pool_forward (max ignores padding and NaN like numpy's fmax; avg
divides by the clipped window, with or without the padding). Channel-first layouts only.
Stride-1 2-D avg / sum pooling takes a separable path (runtime/nn/pool.c pool_sum2d_s1_task:
row sums then column sums over a zero-padded copy of each plane, KH + KW adds per output;
benchmarks/bench_avg_pool.py measures it against the general loop).
"""
from __future__ import annotations

import ctypes

from ...ops import nn_conv as C
from .graph import register_lowering
from .lower_gemm import I64, PLANS, NativeCall, desc_words, lower_planned, shape_of

#: pooling types (runtime/nnkernels.h enum symjit_pool_type)
#: pooling types (runtime/nnkernels.h enum symjit_pool_type)
POOL_TYPES = {"max": 0, "avg": 1, "sum": 2, "lp": 3}


def _pad3(t, fill) -> tuple:
    t = tuple(int(x) for x in t)
    return (fill,) * (3 - len(t)) + t


class PoolDesc(ctypes.Structure):
    """runtime/nnkernels.h `symjit_pool_desc` (field names, order and types checked against the
    header by tests/runtime/test_kernel_header.py): a pooling over `planes` (N * C) planes, 3
    spatial dims (1-D and 2-D lead with size 1, padding 0)."""
    _fields_ = [("planes", I64), ("in_size", I64 * 3), ("out_size", I64 * 3), ("kernel", I64 * 3),
                ("stride", I64 * 3), ("pad", I64 * 3), ("type", I64), ("count_include_pad", I64), ("p", I64)]


def pool_desc(attrs, xs, ys) -> tuple | None:
    """The descriptor words (desc_words) of pool_struct's PoolDesc, as calls carry it."""
    desc = pool_struct(attrs, xs, ys)
    return None if desc is None else desc_words(desc)


def pool_struct(attrs, xs, ys) -> PoolDesc | None:
    """The PoolDesc of a pooling of data shape xs into output shape ys (None: a layout the
    kernels do not take)."""
    if attrs["layout"] not in (None, "NCW", "NCHW", "NCDHW"):
        return None
    geo = C.pool_geometry(attrs, xs)
    ptype = attrs["pool_type"]
    p = 1
    if ptype == "lp":
        p = C.lp_pool_power(attrs)
    cip = True if attrs["count_include_pad"] is None else bool(attrs["count_include_pad"])
    planes = xs[0] * xs[1]
    return PoolDesc(planes=int(planes), in_size=_pad3(xs[2:], 1), out_size=_pad3(ys[2:], 1),
                    kernel=_pad3(geo["kernel"], 1), stride=_pad3(geo["stride"], 1), pad=_pad3(geo["pad"], 0),
                    type=POOL_TYPES[ptype], count_include_pad=int(cip), p=int(p))


def plan_pooling(attrs, ins, outs):
    desc = pool_desc(attrs, shape_of(ins[0]), shape_of(outs[0]))
    if desc is None:
        return None
    return [NativeCall("symjit_nn_pool", desc, [("desc",), ("v", ins[0]), ("v", outs[0])])]


def plan_pooling_backward(attrs, ins, outs):
    dy, x, y = ins
    desc = pool_desc(attrs, shape_of(x), shape_of(dy))
    if desc is None:
        return None
    return [NativeCall("symjit_nn_pool_bwd", desc, [("desc",), ("v", dy), ("v", x), ("v", y), ("v", outs[0])])]


_POOL_PLANS = {"Pooling": plan_pooling, "_backward_Pooling": plan_pooling_backward}
PLANS.update(_POOL_PLANS)
for _op in _POOL_PLANS:
    register_lowering(_op)(lower_planned)
