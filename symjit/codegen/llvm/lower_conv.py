"""Convolution-family lowerings: Convolution, Deconvolution and their backward ops (and
`_backward_bias`), as calls into runtime/nnkernels.c (see lower_gemm for the mechanism).

Methods (measured in benchmarks/bench_gemm_choices.py). On AVX-512 hosts the kernel library
runs its own register tiles (lower_gemm); elsewhere GEMMs go to the BLAS:
  * plain/grouped 2-D convolution, AVX-512: implicit GEMM -- the input split once into
    zero-padded stride phase planes, the output computed a few columns wide so that every row
    of the GEMM operand is a shifted plane (no im2col, any stride and dilation); 1x1 stride-1
    convolutions read the input as the matrix; with constant weights and few output positions
    (7x7 / 14x14 maps at batch 1) the tiles run along the filters over weights packed at
    compile time (`pack_weights`);
  * otherwise (3-D, portable path): im2col of one column block into a per-thread buffer, then
    a GEMM of that block (weights x columns), bias and epilogue applied to the block in cache;
  * 3x3 stride-1 convolutions with enough channels and output positions: Winograd F(2x2, 3x3)
    (2.25x fewer multiplications). AVX-512: fused per block of tile rows (input transform, 16
    tile GEMMs, output transform while in L2), the transformed weights U packed at compile time
    when constant; portable: transforms in C, the 16 products through sgemm;
  * depthwise (one input channel per group), AVX-512: 3x3 on planes with output rows of 16 and
    more by row kernels straight from the input plane (stride 1: masked column loads per input
    row; stride 2: even/odd column split), smaller planes 16 channels per vector (wide rows of
    the padded plane), other kernels by column vectors with edge masks; portable: per plane over
    its padded phase planes, the output computed a few columns wide so each tap is one long
    vector multiply-add;
  * Deconvolution / backward data: GEMM (weights^T x input) into columns, then col2im; AVX-512,
    2-D stride 1, one group, 16+ channels: a forward convolution of dy with the weights
    transposed and flipped (the implicit GEMM above);
  * backward weight: im2col per image and GEMM accumulation per channel block; AVX-512, 2-D: an
    implicit GEMM per image (rows: the phase planes through a tap table; columns: dy transposed
    into wide rows), images in per-thread chunks summed at the end.
Layouts stay NCW/NCHW/NCDHW (the frontends' layout; channel-last convolutions run their
reference), except where passes/blocked_layout.py moves chains of convolutions (with the poolings
and channel concatenations between them) into NCHW16c (`_conv_blocked`, `_pool_blocked`, lowered
in lower_blocked.py). Geometry follows
symjit.ops.nn_conv exactly (`conv_geometry`, `deconv_pad_adj`).
"""
from __future__ import annotations

import ctypes

import numpy as np

from ...ops import nn_conv as C
from ...ops.conv_method import IM2COL, forward_conv_method
from ...ops.registry import get_op
from .lower_gemm import (I64, PLANS, NativeCall, add_param, const_value, desc_words,
                         library_packing, lower_planned, native_kernels_available, packing_job,
                         run_packing, shape_of)
from .graph import register_lowering
from .lower_pool import PoolDesc, pool_struct


def _pad3(t, fill) -> tuple:
    t = tuple(int(x) for x in t)
    return (fill,) * (3 - len(t)) + t


#: forward convolution methods (runtime/nnkernels.h enum symjit_conv_method: ConvDesc.method)

class ConvDesc(ctypes.Structure):
    """runtime/nnkernels.h `symjit_conv_desc`, the geometry of the convolution family's kernels
    (always 3 spatial dims: 1-D and 2-D ones lead with size 1, padding 0). Field names, order
    and types match the header (tests/runtime/test_kernel_header.py); every field is int64, so
    the struct's memory image is its `desc_words`."""
    _fields_ = [("n", I64), ("channels", I64), ("groups", I64), ("filters", I64),
                ("in_size", I64 * 3), ("kernel", I64 * 3), ("out_size", I64 * 3),
                ("stride", I64 * 3), ("dilate", I64 * 3), ("pad", I64 * 3), ("method", I64)]


class ConvPoolDesc(ctypes.Structure):
    """runtime/nnkernels.h `symjit_conv_pool_desc`: the convolution, the max pooling over its
    output and whether relu comes between."""
    _fields_ = [("conv", ConvDesc), ("pool", PoolDesc), ("relu", I64)]


def conv_method(n, c, g, f, kernel, stride, dilate, out_sp) -> int:
    """Forward convolution method for a geometry on the target being lowered for
    (ops/conv_method.py's measured choices; the AVX-512 tiles' ones when its kernel library has them)."""
    return forward_conv_method(n, c, g, f, kernel, stride, dilate, out_sp, tiles=native_kernels_available())


def conv_struct(n, c, g, f, in_sp, kernel, out_sp, stride, dilate, pad, method=IM2COL) -> ConvDesc:
    """The ConvDesc of a convolution (spatial tuples of 1 to 3 dims)."""
    return ConvDesc(n=int(n), channels=int(c), groups=int(g), filters=int(f), in_size=_pad3(in_sp, 1),
                    kernel=_pad3(kernel, 1), out_size=_pad3(out_sp, 1), stride=_pad3(stride, 1),
                    dilate=_pad3(dilate, 1), pad=_pad3(pad, 0), method=int(method))


def conv_desc(n, c, g, f, in_sp, kernel, out_sp, stride, dilate, pad, method=IM2COL) -> tuple:
    """The descriptor words (desc_words) of conv_struct's ConvDesc, as calls carry it."""
    return desc_words(conv_struct(n, c, g, f, in_sp, kernel, out_sp, stride, dilate, pad, method))


def _channel_first(layout) -> bool:
    return layout is None or layout in ("NCW", "NCHW", "NCDHW")


def plan_convolution(attrs, ins, outs, ctx=None):
    geo = C.conv_geometry("Convolution", attrs)
    if not _channel_first(geo["layout"]):
        return None
    x, w = ins[0], ins[1]
    xs, ys = shape_of(x), shape_of(outs[0])
    g = geo["num_group"]
    n, c, f = xs[0], xs[1], ys[1]
    method = conv_method(n, c, g, f, geo["kernel"], geo["stride"], geo["dilate"], ys[2:])
    desc = conv_desc(n, c, g, f, xs[2:], geo["kernel"], ys[2:], geo["stride"], geo["dilate"], geo["pad"],
                     method)
    bias = None if attrs["no_bias"] else ins[2]
    tail = [("v", bias) if bias is not None else ("null",), ("v", outs[0]), ("epi",), ("epi_args",)]
    wp = packed_param(ctx, desc, w)
    if wp is not None:
        return [NativeCall("symjit_nn_conv_packed", desc, [("desc",), ("v", x), ("v", w), ("v", wp)] + tail)]
    return [NativeCall("symjit_nn_conv", desc, [("desc",), ("v", x), ("v", w)] + tail)]


plan_convolution.uses_context = True


def pack_weights(desc, w) -> np.ndarray | None:
    """The weights packed for the kernel library's AVX-512 path (nnkernels.c
    `symjit_nn_conv_pack`: e.g. transposed into panels for convolutions with few output
    positions) when `w` is a compile-time constant and the library wants them packed, else None
    (`library_packing`)."""
    return library_packing("symjit_nn_conv_pack", desc, w)


def packed_param(ctx, desc, w):
    """A new param holding constant weights `w` packed for descriptor `desc` (pack_weights),
    or None when `w` is not constant or the kernel library wants no packing. The placement
    records how it was made (Placement.packings), so AOT libraries can pack at load time.
    The packing itself is deferred (`LoweringContext.defer`): it may overlap code generation."""
    job = packing_job("symjit_nn_conv_pack", desc, const_value(ctx, w))
    if job is None:
        return None
    packed = np.empty(job[3], np.float32)
    ctx.defer(lambda: run_packing(job, packed))
    wp = add_param(ctx, "conv_packed", packed)
    source = ctx.placement.where.get(w)
    if source is not None and source[0] == "param":
        ctx.placement.packings[ctx.placement.where[wp][1]] = (source[1], tuple(int(d) for d in desc))
    return wp


def plan_deconvolution(attrs, ins, outs):
    x, w = ins[0], ins[1]
    xs, ys = shape_of(x), shape_of(outs[0])
    geo = C.conv_geometry("Deconvolution", attrs)
    if not _channel_first(geo["layout"]):
        return None
    pad, _adj = C.deconv_pad_adj(attrs, xs[2:])
    g = geo["num_group"]
    # the adjoint of a convolution from y (N, nf, out) to x (N, C, in) with weight (C, nf/g, k)
    desc = conv_desc(xs[0], ys[1], g, xs[1], ys[2:], geo["kernel"], xs[2:], geo["stride"], geo["dilate"], pad)
    bias = None if attrs["no_bias"] else ins[2]
    return [NativeCall("symjit_nn_conv_bwd_data", desc, [("desc",), ("v", x), ("v", w),
                                                          ("v", bias) if bias is not None else ("null",),
                                                          ("v", outs[0]), ("epi",), ("epi_args",)])]


def plan_conv_backward_data(attrs, ins, outs):
    dy, w, x = ins
    geo = C.conv_geometry("_backward_Convolution_data", attrs)
    if not _channel_first(geo["layout"]):
        return None
    xs, ds = shape_of(x), shape_of(dy)
    desc = conv_desc(xs[0], xs[1], geo["num_group"], ds[1], xs[2:], geo["kernel"], ds[2:], geo["stride"],
                     geo["dilate"], geo["pad"])
    return [NativeCall("symjit_nn_conv_bwd_data", desc, [("desc",), ("v", dy), ("v", w), ("null",),
                                                          ("v", outs[0]), ("epi",), ("epi_args",)])]


def plan_conv_backward_weight(attrs, ins, outs):
    dy, x = ins
    geo = C.conv_geometry("_backward_Convolution_weight", attrs)
    if not _channel_first(geo["layout"]):
        return None
    xs, ds = shape_of(x), shape_of(dy)
    desc = conv_desc(xs[0], xs[1], geo["num_group"], ds[1], xs[2:], geo["kernel"], ds[2:], geo["stride"],
                     geo["dilate"], geo["pad"])
    return [NativeCall("symjit_nn_conv_bwd_weight", desc, [("desc",), ("v", dy), ("v", x), ("v", outs[0])])]


def plan_deconv_backward_data(attrs, ins, outs):
    a, w, x = ins
    geo = C.conv_geometry("_backward_Deconvolution_data", attrs)
    if not _channel_first(geo["layout"]):
        return None
    as_, xs, ws = shape_of(a), shape_of(x), shape_of(w)
    g = geo["num_group"]
    method = conv_method(as_[0], as_[1], g, ws[0], geo["kernel"], geo["stride"], geo["dilate"], xs[2:])
    desc = conv_desc(as_[0], as_[1], g, ws[0], as_[2:], geo["kernel"], xs[2:], geo["stride"], geo["dilate"],
                     geo["pad"], method)
    return [NativeCall("symjit_nn_conv", desc, [("desc",), ("v", a), ("v", w), ("null",),
                                                 ("v", outs[0]), ("epi",), ("epi_args",)])]


def plan_backward_bias(attrs, ins, outs):
    dy, _b = ins
    ds = shape_of(dy)
    if not ds:
        return None
    ax = attrs["axis"] % len(ds)
    outer = 1
    for d in ds[:ax]:
        outer *= d
    inner = 1
    for d in ds[ax + 1:]:
        inner *= d
    return [NativeCall("symjit_nn_bias_bwd", (), [("i64", outer), ("i64", ds[ax]), ("i64", inner),
                                                   ("v", dy), ("v", outs[0])])]


def plan_conv_pool(attrs, ins, outs, ctx=None):
    """`_conv_pool` (passes/conv_pool.py): one symjit_nn_conv_pool call; its descriptor is the
    convolution's (the method chosen as for the convolution alone), the max pooling's over the
    convolution's output, and the relu flag."""
    conv_attrs = attrs["conv_attrs"]
    geo = C.conv_geometry("Convolution", conv_attrs)
    if not _channel_first(geo["layout"]):
        return None
    x, w = ins[0], ins[1]
    xs = shape_of(x)
    _, (ys,) = get_op("Convolution").infer_shape(conv_attrs, [shape_of(v) for v in ins])
    pdesc = pool_struct(attrs["pool_attrs"], tuple(ys), shape_of(outs[0]))
    if pdesc is None:
        return None
    n, c, f, g = xs[0], xs[1], ys[1], geo["num_group"]
    method = conv_method(n, c, g, f, geo["kernel"], geo["stride"], geo["dilate"], ys[2:])
    conv = conv_struct(n, c, g, f, xs[2:], geo["kernel"], ys[2:], geo["stride"], geo["dilate"], geo["pad"], method)
    desc = desc_words(ConvPoolDesc(conv=conv, pool=pdesc, relu=int(bool(attrs["relu"]))))
    packed = packed_param(ctx, desc_words(conv), w)
    wp = ("v", packed) if packed is not None else ("null",)
    bias = ("null",) if conv_attrs["no_bias"] else ("v", ins[2])
    return [NativeCall("symjit_nn_conv_pool", desc, [("desc",), ("v", x), ("v", w), wp, bias, ("v", outs[0])])]


plan_conv_pool.uses_context = True


_CONV_PLANS = {
    "Convolution": plan_convolution,
    "_conv_pool": plan_conv_pool,
    "Deconvolution": plan_deconvolution,
    "_backward_Convolution_data": plan_conv_backward_data,
    "_backward_Convolution_weight": plan_conv_backward_weight,
    "_backward_Deconvolution_data": plan_deconv_backward_data,
    "_backward_bias": plan_backward_bias,
}
PLANS.update(_CONV_PLANS)
for _op in _CONV_PLANS:
    register_lowering(_op)(lower_planned)
