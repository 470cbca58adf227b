"""Channel-blocked layout lowerings (ops/blocked.py, passes/blocked_layout.py): calls into
runtime/nnkernels.c (`symjit_nn_to_blocked`, `symjit_nn_from_blocked`,
`symjit_nn_conv_blocked`; see lower_gemm for the mechanism).

`_conv_blocked` needs its weights at compile time: they are packed here for the kernel
(pointwise and direct: panels [F / 16V][C][KH][KW][16V], V filter vectors per tile; general:
[F / 16V][C/16][KH][KW][16][16V]; depthwise: [C/16][9][16]), and the kernel's descriptor carries V (nnkernels.c documents the layouts)."""
from __future__ import annotations

import ctypes

import numpy as np

from ...ops.blocked import BLOCK
from ...ops.nn_conv import conv_geometry
from .graph import register_lowering
from .lower_gemm import I64, PLANS, NativeCall, add_param, const_value, desc_words, lower_planned, shape_of
from .lower_pool import pool_struct

#: kinds of symjit_nn_conv_blocked (runtime/nnkernels.h enum symjit_blocked_kind)
POINTWISE, DEPTHWISE, DIRECT, GENERAL = 0, 1, 2, 3


class ReorderDesc(ctypes.Structure):
    """runtime/nnkernels.h `symjit_reorder_desc` (symjit_nn_to_blocked / _from_blocked)."""
    _fields_ = [("n", I64), ("channels", I64), ("positions", I64)]


class ConvBlockedDesc(ctypes.Structure):
    """runtime/nnkernels.h `symjit_conv_blocked_desc` (field names, order and types checked
    against the header by tests/runtime/test_kernel_header.py)."""
    _fields_ = [("kind", I64), ("n", I64), ("channels", I64), ("filters", I64), ("height", I64), ("width", I64),
                ("out_height", I64), ("out_width", I64), ("stride", I64), ("relu", I64), ("vectors", I64),
                ("kernel_h", I64), ("kernel_w", I64), ("pad_h", I64), ("pad_w", I64)]


#: pointwise planes with at least this many pixels take tiles of 12 pixels x 2 filter vectors
#: (when the filter blocks are even), smaller ones 6-7 x 4. Measured in mobilenet1.0, one
#: thread, in graph, both variants in one process (12 x 2 / 6 x 4 time): 0.91 at 112x112
#: (K = 32: the 6 x 4 tile's 24 stores weigh on 32 steps), 0.95-1.03 at 56x56 and 28x28,
#: 0.96-1.00 at 14x14 and 0.95-0.98 at 7x7 (run-to-run noise of +-5%; 49 pixels pad to 60 in
#: 12-pixel tiles against 49 in 7-pixel ones).
WIDE_PLANE_PIXELS = 12544


def widest_panel(filters: int) -> int:
    """The most filter vectors (4 at most) that divide the filters into whole panels."""
    return next(v for v in (4, 3, 2, 1) if (filters // BLOCK) % v == 0)


def panel_vectors(filters: int, pixels: int) -> int:
    """Filter vectors per pointwise tile (nnkernels.c picks the tile height from it)."""
    if pixels >= WIDE_PLANE_PIXELS and (filters // BLOCK) % 2 == 0:
        return 2
    return widest_panel(filters)


def pack_panels(w: np.ndarray, v: int) -> np.ndarray:
    """(F, C, KH, KW) weights -> panels [F / 16v][C][KH][KW][16v] (pointwise: [F / 16v][C][16v]),
    as a strided view of `w` (`_conv_blocked_call` copies it into the packed parameter)."""
    f = w.shape[0]
    return w.reshape(f // (16 * v), 16 * v, -1).transpose(0, 2, 1)


def pack_general(w: np.ndarray, v: int) -> np.ndarray:
    """(F, C, KH, KW) weights -> panels [F / 16v][C/16][KH][KW][16][16v] (the general kind's),
    as a strided view of `w`."""
    f, c, kh, kw = w.shape
    w6 = w.reshape(f // (16 * v), 16 * v, c // BLOCK, BLOCK, kh, kw)
    return w6.transpose(0, 2, 4, 5, 3, 1)


def is_pointwise(geo) -> bool:
    """A 1x1, stride-1, unpadded convolution of one group (the pointwise kind)."""
    return (geo["num_group"] == 1 and tuple(geo["kernel"]) == (1, 1) and tuple(geo["stride"]) == (1, 1)
            and tuple(geo["pad"]) == (0, 0))


def pack_depthwise(w: np.ndarray) -> np.ndarray:
    """(C, 1, 3, 3) weights -> [C/16][9][16], as a strided view of `w`."""
    c = w.shape[0]
    return w.reshape(c // BLOCK, BLOCK, 9).transpose(0, 2, 1)


def plan_conv_blocked(attrs, ins, outs, ctx=None):
    w = const_value(ctx, ins[1])
    if w is None:
        return None
    geo = conv_geometry("Convolution", attrs["conv_attrs"])
    _, fb, oh, ow, _ = shape_of(outs[0])
    f = fb * BLOCK
    relu = int(attrs["relu"])   # the activation code (ops/fused.py ACT_*), as the kernels read it
    if not attrs.get("data_blocked", True):
        n, c, h, wd = shape_of(ins[0])
        v = widest_panel(f)
        (kh, kw), (ph, pw) = geo["kernel"], geo["pad"]
        desc = ConvBlockedDesc(kind=DIRECT, n=n, channels=c, filters=f, height=h, width=wd, out_height=oh,
                               out_width=ow, stride=geo["stride"][0], relu=relu, vectors=v, kernel_h=kh,
                               kernel_w=kw, pad_h=ph, pad_w=pw)
        packed = pack_panels(w, v)
        return _conv_blocked_call(ctx, attrs, desc, packed, ins, outs)
    n, cb, h, wd, _ = shape_of(ins[0])
    c = cb * BLOCK
    (kh, kw), (ph, pw) = geo["kernel"], geo["pad"]
    if is_pointwise(geo):
        v = panel_vectors(f, h * wd)
        kind, packed = POINTWISE, pack_panels(w, v)
    elif geo["num_group"] == 1:
        v = widest_panel(f)
        desc = ConvBlockedDesc(kind=GENERAL, n=n, channels=c, filters=f, height=h, width=wd, out_height=oh,
                               out_width=ow, stride=geo["stride"][0], relu=relu, vectors=v, kernel_h=kh,
                               kernel_w=kw, pad_h=ph, pad_w=pw)
        return _conv_blocked_call(ctx, attrs, desc, pack_general(w, v), ins, outs)
    else:
        v = 1
        kind, packed = DEPTHWISE, pack_depthwise(w)
    desc = ConvBlockedDesc(kind=kind, n=n, channels=c, filters=f, height=h, width=wd, out_height=oh,
                           out_width=ow, stride=geo["stride"][0], relu=relu, vectors=v)
    return _conv_blocked_call(ctx, attrs, desc, packed, ins, outs)


def _conv_blocked_call(ctx, attrs, desc, packed, ins, outs):
    """The kernel call; `packed` is a view of the constant weights in the kernel's order, copied
    into a new parameter by a deferred fill (`LoweringContext.defer`: numpy's copy releases
    the GIL, so it overlaps code generation)."""
    wp = add_param(ctx, "conv_blocked", _deferred_copy(ctx, packed))
    bias = ("null",) if attrs["conv_attrs"]["no_bias"] else ("v", ins[2])
    residual = ("v", ins[-1]) if attrs.get("residual") else ("null",)
    return [NativeCall("symjit_nn_conv_blocked", desc_words(desc),
                       [("desc",), ("v", ins[0]), ("v", wp), bias, residual, ("v", outs[0])])]


plan_conv_blocked.uses_context = True


def _deferred_copy(ctx, view: np.ndarray) -> np.ndarray:
    """A new C-contiguous float32 array that will hold `view` once the context's deferred
    fills have run (the copy goes through a writable alias: `add_param` freezes the array)."""
    out = np.empty(view.shape, np.float32)
    alias = out.view()
    ctx.defer(lambda: np.copyto(alias, view, casting="unsafe"))
    return out


def plan_pool_blocked(attrs, ins, outs):
    n, cb, h, w, _ = shape_of(ins[0])
    _, _, oh, ow, _ = shape_of(outs[0])
    desc = pool_struct(attrs["pool_attrs"], (n, cb * BLOCK, h, w), (n, cb * BLOCK, oh, ow))
    desc.planes = n * cb
    return [NativeCall("symjit_nn_pool_blocked", desc_words(desc), [("desc",), ("v", ins[0]), ("v", outs[0])])]


def plan_to_blocked(attrs, ins, outs):
    n, c, h, w = shape_of(ins[0])
    desc = desc_words(ReorderDesc(n=n, channels=c, positions=h * w))
    return [NativeCall("symjit_nn_to_blocked", desc, [("desc",), ("v", ins[0]), ("v", outs[0])])]


def plan_from_blocked(attrs, ins, outs):
    n, c, h, w = shape_of(outs[0])
    desc = desc_words(ReorderDesc(n=n, channels=c, positions=h * w))
    return [NativeCall("symjit_nn_from_blocked", desc, [("desc",), ("v", ins[0]), ("v", outs[0])])]


_BLOCKED_PLANS = {
    "_conv_blocked": plan_conv_blocked,
    "_pool_blocked": plan_pool_blocked,
    "_to_blocked": plan_to_blocked,
    "_from_blocked": plan_from_blocked,
}
PLANS.update(_BLOCKED_PLANS)
for _op in _BLOCKED_PLANS:
    register_lowering(_op)(lower_planned)
