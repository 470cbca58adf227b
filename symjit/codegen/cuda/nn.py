"""CUDA lowerings of neural-network layers that are neither GEMMs nor reductions: Pooling,
BatchNorm (inference) and LeakyReLU.

  * Pooling (max / avg / sum / lp, global, every pooling convention, count_include_pad):
    one thread per output element, a loop over its window clipped to the input, as
    `symjit.ops.nn_conv.pool_forward` (max ignores padding and NaN like numpy's fmax, starting
    from the lowest finite value; avg divides by the window clipped to [start, min(start+k,
    in+pad)), or to the input without count_include_pad). Channel-first, 1 to 3 spatial dims.
  * BatchNorm: the CUDA target compiles inference graphs, so BatchNorm normalizes with the
    moving statistics (the pass pipeline usually folds it into the convolution before; this
    lowering handles the ones that stay, e.g. on the data). In the data's float type, with
    the reference's formula: out = (x - mean) * (inv_std * gamma) + beta, inv_std =
    1 / sqrt(var + eps); the hidden outputs receive mean and inv_std.
  * LeakyReLU (leaky, elu, selu, gelu, prelu; rrelu uses its inference slope): the op's own
    scalar expression (`nn_norm.leaky_expr`) as an elementwise kernel.
  * The loss heads' forward (LinearRegressionOutput, MAERegressionOutput, MakeLoss: the data;
    LogisticRegressionOutput: its sigmoid), as elementwise kernels; labels matter only backward.
"""
from __future__ import annotations

import numpy as np

from ...base import MXNetError
from ...ops import nn_conv as C
from ...ops import scalar as S
from ..llvm.elementwise import ElementwiseSpec
from .elementwise import elementwise_launch, grid_for, grid_stride_loop
from .expr import check_dtype, ctype, literal
from .graph import register_lowering
from .plan import LoweringContext
from .prelude import THREADS
from .shape import fill_launch


def _shape(v) -> tuple:
    return tuple(int(d) for d in v.type.shape)


def _float(node, *values) -> str:
    dts = {check_dtype(v.type.dtype, f"node {node.name!r} value {v.name!r}") for v in values}
    if len(dts) != 1 or next(iter(dts)) not in ("float32", "float64"):
        raise MXNetError(f"cuda codegen: {node.op.name} needs float32 or float64 values of one dtype, "
                         f"got {sorted(dts)}")
    return dts.pop()


def _pad3(t, fill) -> tuple:
    t = tuple(int(x) for x in t)
    return (fill,) * (3 - len(t)) + t


@register_lowering("Pooling")
def lower_pooling(node, ctx: LoweringContext) -> list:
    x, y = node.inputs[0], node.outputs[0]
    attrs = node.attrs
    if attrs["layout"] not in (None, "NCW", "NCHW", "NCDHW"):
        raise MXNetError(f"cuda codegen: Pooling with layout {attrs['layout']} has no CUDA lowering "
                         "(channel-first only)")
    dt = _float(node, x, y)
    T = ctype(dt)
    xs, ys = _shape(x), _shape(y)
    geo = C.pool_geometry(attrs, xs)
    ptype = attrs["pool_type"]
    p = C.lp_pool_power(attrs) if ptype == "lp" else 1
    cip = True if attrs["count_include_pad"] is None else bool(attrs["count_include_pad"])
    D, H, W = _pad3(xs[2:], 1)
    OD, OH, OW = _pad3(ys[2:], 1)
    (KD, KH, KW), (SD, SH, SW), (PD, PH, PW) = _pad3(geo["kernel"], 1), _pad3(geo["stride"], 1), _pad3(geo["pad"], 0)
    total = int(np.prod(ys, dtype=np.int64))
    if total == 0:
        return []
    lowest = "-FLT_MAX" if dt == "float32" else "-DBL_MAX"
    if ptype == "max":
        update = "acc = v > acc ? v : acc;"
    elif ptype == "lp" and p != 1:
        power = {2: "v * v", 3: "v * v * v"}.get(p, f"pow{'f' if dt == 'float32' else ''}(v, ({T}){p})")
        update = f"acc += {power};"
    else:
        update = "acc += v;"
    lines = [grid_stride_loop("o", total) + " {",
             f"    const int64_t ow = o % {OW}, oh = o / {OW} % {OH}, od = o / {OW * OH} % {OD}, "
             f"plane = o / {OW * OH * OD};",
             f"    const int64_t d0 = od * {SD} - {PD}, h0 = oh * {SH} - {PH}, w0 = ow * {SW} - {PW};",
             f"    const {T} *xp = X + plane * {D * H * W};",
             f"    {T} acc = {lowest if ptype == 'max' else f'({T})0'};",
             f"    for (int64_t id = d0 < 0 ? 0 : d0; id < d0 + {KD} && id < {D}; ++id)",
             f"    for (int64_t ih = h0 < 0 ? 0 : h0; ih < h0 + {KH} && ih < {H}; ++ih)",
             f"    for (int64_t iw = w0 < 0 ? 0 : w0; iw < w0 + {KW} && iw < {W}; ++iw) {{",
             f"        const {T} v = xp[(id * {H} + ih) * {W} + iw];",
             f"        {update}",
             "    }"]
    if ptype == "avg":
        def size(s, k, n, pad):
            end = f"({s} + {k} < {n + pad} ? {s} + {k} : {n + pad})"
            if cip:
                return f"({end} - {s})"
            return f"(({end} < {n} ? {end} : {n}) - ({s} < 0 ? 0 : {s}))"
        lines.append(f"    acc = acc / ({T})({size('d0', KD, D, PD)} * {size('h0', KH, H, PH)} * "
                     f"{size('w0', KW, W, PW)});")
    elif ptype == "lp" and p != 1:
        f = "f" if dt == "float32" else ""
        root = {2: f"sqrt{f}(acc)", 3: f"cbrt{f}(acc)"}.get(p, f"pow{f}(acc, ({T})1 / ({T}){p})")
        lines.append(f"    acc = {root};")
    lines += ["    Y[o] = acc;", "}"]
    kernel = ctx.kernel("sj_pool", [(f"const {T} *", "X"), (f"{T} *", "Y")], "\n".join("    " + s for s in lines),
                        THREADS)
    return [ctx.launch(kernel, grid_for(total), [x, y])]


@register_lowering("BatchNorm")
def lower_batch_norm(node, ctx: LoweringContext) -> list:
    """Inference BatchNorm (see the module docstring)."""
    x, gamma, beta, mm, mv = node.inputs
    out, mean_o, var_o = node.outputs[:3]
    xt = _float(node, x, out)
    pt = _float(node, gamma, beta, mm, mv, mean_o, var_o)
    shape = _shape(x)
    axis = node.attrs["axis"]
    if not -len(shape) <= axis < len(shape):
        raise MXNetError(f"cuda codegen: BatchNorm axis {axis} out of range for shape {shape}")
    axis %= len(shape)
    c = shape[axis]
    b = int(np.prod(shape[axis + 1:], dtype=np.int64))
    total = int(np.prod(shape, dtype=np.int64))
    if any(_shape(v) != (c,) for v in (gamma, beta, mm, mv)):
        raise MXNetError(f"cuda codegen: BatchNorm parameters must have shape ({c},)")
    T, P = ctype(xt), ctype(pt)
    f = "f" if xt == "float32" else ""
    gamma_v = f"({T})1" if node.attrs["fix_gamma"] else f"({T})gamma[ch]"   # as the reference
    eps = literal(float(node.attrs["eps"]), xt)
    lines = [grid_stride_loop("i", max(total, c)) + " {",
             f"    if (i < {total}) {{",
             f"        const int64_t ch = i / {b} % {c};",
             f"        const {T} inv_std = ({T})1 / sqrt{f}(({T})mv[ch] + {eps});",
             f"        out[i] = (X[i] - ({T})mm[ch]) * (inv_std * {gamma_v}) + ({T})beta[ch];",
             "    }",
             f"    if (i < {c}) {{      /* the hidden outputs: mean and inv_std per channel */",
             f"        mean_o[i] = ({P})({T})mm[i];",
             f"        var_o[i] = ({P})(({T})1 / sqrt{f}(({T})mv[i] + {eps}));",
             "    }",
             "}"]
    params = [(f"const {T} *", "X"), (f"const {P} *", "gamma"), (f"const {P} *", "beta"), (f"const {P} *", "mm"),
              (f"const {P} *", "mv"), (f"{T} *", "out"), (f"{P} *", "mean_o"), (f"{P} *", "var_o")]
    kernel = ctx.kernel("sj_batchnorm", params, "\n".join("    " + s for s in lines), THREADS)
    return [ctx.launch(kernel, grid_for(max(total, c)), [x, gamma, beta, mm, mv, out, mean_o, var_o])]


@register_lowering("LeakyReLU")
def lower_leaky_relu(node, ctx: LoweringContext) -> list:
    from ...ops.nn_norm import leaky_expr, prelu_gamma_shape
    x, out = node.inputs[0], node.outputs[0]
    dt = _float(node, *node.inputs, out)
    kind = node.attrs["act_type"]
    shape = _shape(x)
    if kind == "rrelu":   # inference: the mean slope, as the reference's inference branch
        slope = (float(node.attrs["lower_bound"]) + float(node.attrs["upper_bound"])) / 2.0
        expr = S.select(S.Input(0) > S.Const(0), S.Input(0), S.Input(0) * S.Const(slope))
        steps = elementwise_launch(ctx, ElementwiseSpec((expr,), (dt,), (shape,), dt, (dt,), shape), [x, out])
        if len(node.outputs) > 1:      # the hidden mask output: the slope everywhere
            steps += fill_launch(ctx, node.outputs[1], slope)
        return steps
    if kind != "prelu":
        expr = leaky_expr(node.attrs, S.Input(0), node.attrs["slope"])
        return elementwise_launch(ctx, ElementwiseSpec((expr,), (dt,), (shape,), dt, (dt,), shape), [x, out])
    gamma = node.inputs[1]
    bshape = prelu_gamma_shape("cuda codegen: prelu", _shape(gamma), shape)
    expr = S.select(S.Input(0) > S.Const(0), S.Input(0), S.Input(0) * S.Input(1))
    return elementwise_launch(ctx, ElementwiseSpec((expr,), (dt, dt), (shape, bshape), dt, (dt,), shape),
                              [x, gamma, out])


@register_lowering("LinearRegressionOutput", "MAERegressionOutput", "LogisticRegressionOutput", "MakeLoss")
def lower_regression_forward(node, ctx: LoweringContext) -> list:
    x, out = node.inputs[0], node.outputs[0]
    dt = _float(node, x, out)
    expr = S.Input(0)
    if node.op.name == "LogisticRegressionOutput":
        expr = S.Const(1.0) / (S.Const(1.0) + S.call("exp", -S.Input(0)))
    shape = _shape(x)
    return elementwise_launch(ctx, ElementwiseSpec((expr,), (dt,), (shape,), dt, (dt,), shape), [x, out])
