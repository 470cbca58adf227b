"""Native lowerings of normalizations along axes: the softmax family (softmax, log_softmax,
softmin, SoftmaxActivation, SoftmaxOutput forward), LayerNorm, InstanceNorm, BatchNorm
(inference and training, with the moving-average update) and the backward ops
`_backward_LayerNorm` and `_backward_BatchNorm`.

Layouts. An op normalizing along one axis views its input as (outer, n, inner) and
processes *columns*: column q = (o, i) holds the n elements at o*n*inner + i + k*inner.
Columns are independent, so the runtime's parallel-for splits them over threads; with
inner == 1 (the last axis, the common case) each column is contiguous and its loops
vectorize (the exponential is the inlined vectorizable `vecmath` exp). BatchNorm
normalizes per channel over every other axis: it views data as (A, C, B) and processes
channels, each a loop over A of contiguous runs of B.

Numerics: statistics and sums are accumulated in float64 (the softmax sum as MXNet's
native kernel; LayerNorm/BatchNorm moments more accurately than the float32 reference),
exponentials are taken in the input's float type, results are rounded once to the output
dtype. The float32 oneDNN softmax of MXNet (a different exp polynomial and sum order) is
matched within float32 rounding, not bit for bit. Cases the reference handles by
validation errors or masks (`use_length`, float16, integer data for norms) keep their
Python step.
"""
from __future__ import annotations

import numpy as np

from .elementwise import SUPPORTED_DTYPES, convert
from .graph import LoweringContext, ParallelCall, register_lowering
from .lower_loops import GRAIN, KernelWriter
from .vecmath import Val, select, sqrt

__all__ = ["axis_view", "softmax_call", "SoftmaxSpec"]


def axis_view(shape, axis: int) -> tuple[int, int, int]:
    """(outer, n, inner) of `shape` around `axis`."""
    shape = tuple(int(d) for d in shape)
    return (int(np.prod(shape[:axis], dtype=np.int64)), shape[axis],
            int(np.prod(shape[axis + 1:], dtype=np.int64)))


def _lty(dt: str) -> str:
    return SUPPORTED_DTYPES[dt][0]


def _dt(v) -> str:
    return np.dtype(v.type.dtype).name


def _known(*values) -> bool:
    return all(v.type.known for v in values)


def _float(*values) -> bool:
    return all(_dt(v) in ("float32", "float64") for v in values)


def _call_math(kw: KernelWriter, op: str, x: Val) -> Val:
    fn = kw.mb.math_function(op, x.ty)
    return kw.b.ins(x.ty, f"call {x.ty} @{fn}({x.ty} {x.ref})")


def _to_d(x: Val, dt: str) -> Val:
    return convert(x, dt, "float64")


class _Columns:
    """Helpers for a kernel over columns of an (outer, n, inner) view (module docstring)."""

    def __init__(self, kw: KernelWriter, n: int, inner: int, q: Val):
        self.kw, self.n, self.inner, self.q = kw, n, inner, q
        if inner == 1:
            self.base = q * n
        else:
            o = kw.b.ins("i64", f"udiv i64 {q.ref}, {inner}")
            i = kw.b.ins("i64", f"urem i64 {q.ref}, {inner}")
            self.base = o * (n * inner) + i

    def at(self, k: Val) -> Val:
        return self.base + (k if self.inner == 1 else k * self.inner)

    def sum(self, term) -> Val:
        """sum_k term(k) in float64 (reassociable, so a contiguous column vectorizes)."""
        acc = self.kw.var("double", 0.0)
        with self.kw.loop(0, self.n) as k:
            acc.set(self.kw.fadd(acc.get(), term(k)))
        return acc.get()


def _columns_call(ctx, name: str, n_columns: int, n: int, args) -> ParallelCall:
    return ParallelCall(name, n_columns, max(1, GRAIN // max(n, 1)), list(args))


# --------------------------------------------------------------------------------------
# softmax family
# --------------------------------------------------------------------------------------

class SoftmaxSpec:
    """softmax / log_softmax / softmin along the middle axis of (outer, n, inner)."""

    def __init__(self, outer, n, inner, in_dtype, out_dtype, negate=False, log=False, temperature=None):
        self.outer, self.n, self.inner = outer, n, inner
        self.in_dtype, self.out_dtype = in_dtype, out_dtype
        self.negate, self.log = negate, log
        self.temperature = None if temperature in (None, 1.0) else float(temperature)

    def key(self) -> str:
        return (f"softmax|{self.n}|{self.inner}|{self.in_dtype}|{self.out_dtype}|{self.negate}|{self.log}|"
                f"{self.temperature!r}")


def softmax_call(ctx: LoweringContext, sp: SoftmaxSpec, src, dst) -> list | None:
    """Calls computing softmax spec `sp` from `src` into `dst`."""
    if sp.in_dtype not in SUPPORTED_DTYPES or sp.in_dtype == "bool" or sp.out_dtype not in ("float32", "float64"):
        return None
    if sp.outer * sp.n * sp.inner == 0:
        return [] if sp.outer * sp.inner * sp.n == 0 and sp.n > 0 else None
    name = ctx.unique("sj_softmax", sp.key())
    if name not in ctx.mb.symbols:
        _emit_softmax(ctx, name, sp)
    return [_columns_call(ctx, name, sp.outer * sp.inner, sp.n, [src, dst])]


def _emit_softmax(ctx, name: str, sp: SoftmaxSpec) -> None:
    kw = KernelWriter(ctx.mb, name, 2)
    src, dst = kw.args
    ct = sp.in_dtype if sp.in_dtype in ("float32", "float64") else "float32"
    cty, ity, oty = _lty(ct), _lty(sp.in_dtype), _lty(sp.out_dtype)
    keep_e = not sp.log and sp.out_dtype == ct     # the output buffer can hold exp(z)
    with kw.loop(kw.begin, kw.end) as q:
        col = _Columns(kw, sp.n, sp.inner, q)

        def value(k):
            v = convert(kw.load(ity, src, col.at(k)), sp.in_dtype, ct)
            return -v if sp.negate else v
        m = kw.var(cty, float("-inf"))
        with kw.loop(0, sp.n) as k:
            v = value(k)
            m.set(select(v > m.get(), v, m.get()))
        mx = m.get()

        def z_of(k):
            z = value(k) - mx
            return z / sp.temperature if sp.temperature is not None else z

        def exp_term(k):
            e = _call_math(kw, "exp", z_of(k))
            if keep_e:
                kw.store(oty, e, dst, col.at(k))
            return _to_d(e, ct)
        s = col.sum(exp_term)
        if sp.log:
            ls = _call_math(kw, "log", s)
            with kw.loop(0, sp.n) as k:
                kw.store(oty, convert(_to_d(z_of(k), ct) - ls, "float64", sp.out_dtype), dst, col.at(k))
        else:
            with kw.loop(0, sp.n) as k:
                e = kw.load(oty, dst, col.at(k)) if keep_e else _call_math(kw, "exp", z_of(k))
                kw.store(oty, convert(_to_d(e, ct) / s, "float64", sp.out_dtype), dst, col.at(k))
    kw.finish()


@register_lowering("softmax", "log_softmax", "softmin")
def lower_softmax(node, ctx: LoweringContext):
    src, dst = node.inputs[0], node.outputs[0]
    if node.attrs["use_length"] or not _known(src, dst):
        return None
    shape = tuple(src.type.shape)
    axis = node.attrs["axis"]
    if not -len(shape) <= axis < len(shape):
        return None
    outer, n, inner = axis_view(shape, axis % len(shape))
    sp = SoftmaxSpec(outer, n, inner, _dt(src), _dt(dst), negate=node.op.name == "softmin",
                     log=node.op.name == "log_softmax", temperature=node.attrs["temperature"])
    return softmax_call(ctx, sp, src, dst)


@register_lowering("SoftmaxActivation")
def lower_softmax_activation(node, ctx: LoweringContext):
    src, dst = node.inputs[0], node.outputs[0]
    if not _known(src, dst) or not _float(src):
        return None
    shape = tuple(src.type.shape)
    if node.attrs["mode"] == "channel":
        if len(shape) < 3:
            return None
        view = axis_view(shape, 1)
    else:
        view = axis_view(shape, len(shape) - 1)
    return softmax_call(ctx, SoftmaxSpec(*view, _dt(src), _dt(dst)), src, dst)


def _softmax_output_view(attrs, shape) -> tuple[int, int, int]:
    if attrs["multi_output"]:
        return axis_view(shape, 1)
    if attrs["preserve_shape"]:
        return axis_view(shape, len(shape) - 1)
    return (shape[0], int(np.prod(shape[1:], dtype=np.int64)), 1)


@register_lowering("SoftmaxOutput", "Softmax")
def lower_softmax_output(node, ctx: LoweringContext):
    """The forward of SoftmaxOutput (the label only matters for the backward)."""
    src, label = node.inputs
    dst = node.outputs[0]
    if not _known(src, label, dst) or not _float(src) or len(src.type.shape) < 2:
        return None
    from ...ops.nn_norm import _check_softmax_label
    try:
        _check_softmax_label(node.attrs, np.empty(src.type.shape, np.uint8), np.empty(label.type.shape, np.uint8))
    except Exception:  # noqa: BLE001 - invalid labels keep the reference step, which reports them
        return None
    view = _softmax_output_view(node.attrs, tuple(src.type.shape))
    return softmax_call(ctx, SoftmaxSpec(*view, _dt(src), _dt(dst)), src, dst)


# --------------------------------------------------------------------------------------
# LayerNorm and InstanceNorm (moments per column)
# --------------------------------------------------------------------------------------

def _emit_moments_norm(ctx, name: str, n: int, inner: int, dts: dict, eps: float, channels: int | None,
                       second: str) -> None:
    """out = (x - mean) / sqrt(var + eps) * gamma + beta per column; writes mean and `second`
    ("std" or "var") per column. `channels`: gamma/beta indexed by column % channels
    (InstanceNorm) instead of by position k along the axis (LayerNorm)."""
    kw = KernelWriter(ctx.mb, name, 6)
    x, gamma, beta, out, mean_o, sec_o = kw.args
    xt, gt, ot, mt = dts["x"], dts["gamma"], dts["out"], dts["mean"]
    with kw.loop(kw.begin, kw.end) as q:
        col = _Columns(kw, n, inner, q)

        def xd(k):
            return _to_d(kw.load(_lty(xt), x, col.at(k)), xt)
        mean = col.sum(xd) / float(n)

        def sq(k):
            d = xd(k) - mean
            return d * d
        var = col.sum(sq) / float(n)
        std = sqrt(var + eps)
        inv = 1.0 / std
        if channels is not None:
            c = kw.b.ins("i64", f"urem i64 {q.ref}, {channels}")
            g_c = _to_d(kw.load(_lty(gt), gamma, c), gt)
            b_c = _to_d(kw.load(_lty(gt), beta, c), gt)
        with kw.loop(0, n) as k:
            g = g_c if channels is not None else _to_d(kw.load(_lty(gt), gamma, k), gt)
            bb = b_c if channels is not None else _to_d(kw.load(_lty(gt), beta, k), gt)
            y = (xd(k) - mean) * inv * g + bb
            kw.store(_lty(ot), convert(y, "float64", ot), out, col.at(k))
        kw.store(_lty(mt), convert(mean, "float64", mt), mean_o, q)
        kw.store(_lty(mt), convert(std if second == "std" else var, "float64", mt), sec_o, q)
    kw.finish()


@register_lowering("LayerNorm")
def lower_layer_norm(node, ctx: LoweringContext):
    x, gamma, beta = node.inputs
    out, mean, std = node.outputs
    if not _known(*node.inputs, *node.outputs) or not _float(*node.inputs, *node.outputs):
        return None
    shape = tuple(x.type.shape)
    axis = node.attrs["axis"]
    if not -len(shape) <= axis < len(shape):
        return None
    outer, n, inner = axis_view(shape, axis % len(shape))
    if tuple(gamma.type.shape) != (n,) or tuple(beta.type.shape) != (n,) or n == 0:
        return None
    if outer * inner == 0:
        return []
    dts = {"x": _dt(x), "gamma": _dt(gamma), "out": _dt(out), "mean": _dt(mean)}
    key = f"layernorm|{n}|{inner}|{dts}|{node.attrs['eps']!r}"
    name = ctx.unique("sj_layernorm", key)
    if name not in ctx.mb.symbols:
        _emit_moments_norm(ctx, name, n, inner, dts, float(node.attrs["eps"]), None, "std")
    return [_columns_call(ctx, name, outer * inner, n, [x, gamma, beta, out, mean, std])]


@register_lowering("InstanceNorm")
def lower_instance_norm(node, ctx: LoweringContext):
    x, gamma, beta = node.inputs
    out, mean, var = node.outputs
    if not _known(*node.inputs, *node.outputs) or not _float(*node.inputs, *node.outputs):
        return None
    shape = tuple(x.type.shape)
    if len(shape) < 3:
        return None
    c = shape[1]
    s = int(np.prod(shape[2:], dtype=np.int64))
    if tuple(gamma.type.shape) != (c,) or tuple(beta.type.shape) != (c,) or s == 0:
        return None
    if shape[0] * c == 0:
        return []
    dts = {"x": _dt(x), "gamma": _dt(gamma), "out": _dt(out), "mean": _dt(mean)}
    key = f"instnorm|{s}|{c}|{dts}|{node.attrs['eps']!r}"
    name = ctx.unique("sj_instnorm", key)
    if name not in ctx.mb.symbols:
        _emit_moments_norm(ctx, name, s, 1, dts, float(node.attrs["eps"]), c, "var")
    return [_columns_call(ctx, name, shape[0] * c, s, [x, gamma, beta, out, mean, var])]


# --------------------------------------------------------------------------------------
# BatchNorm (per channel over (A, C, B))
# --------------------------------------------------------------------------------------

def _bn_training(node, ctx) -> bool | None:
    """Whether BatchNorm normalizes with batch statistics; None when that depends on a mode
    only known per call."""
    if node.attrs["use_global_stats"]:
        return False
    return ctx.is_train


class _Channel:
    """Loops over the elements of one channel c of an (A, C, B) view; sums in `ct`."""

    def __init__(self, kw: KernelWriter, a: int, c: int, b: int, ch: Val, ct: str):
        self.kw, self.a, self.c, self.b, self.ch, self.ct = kw, a, c, b, ch, ct

    def each(self, body) -> None:
        with self.kw.loop(0, self.a) as i:
            row = (i * self.c + self.ch) * self.b
            with self.kw.loop(0, self.b) as j:
                body(row + j)

    def sum(self, term) -> Val:
        acc = self.kw.var(_lty(self.ct), 0.0)
        self.each(lambda off: acc.set(self.kw.fadd(acc.get(), term(off))))
        return acc.get()


@register_lowering("BatchNorm")
def lower_batch_norm(node, ctx: LoweringContext):
    x, gamma, beta, mm, mv = node.inputs
    out, mean_o, var_o = node.outputs
    training = _bn_training(node, ctx)
    if training is None or not _known(*node.inputs, *node.outputs) or not _float(*node.inputs, *node.outputs):
        return None
    shape = tuple(x.type.shape)
    axis = node.attrs["axis"]
    if not -len(shape) <= axis < len(shape):
        return None
    a, c, b = axis_view(shape, axis % len(shape))
    if any(tuple(v.type.shape) != (c,) for v in (gamma, beta, mm, mv)) or c == 0:
        return None
    if training and a * b == 0:
        return None
    xt, pt = _dt(x), _dt(gamma)
    if any(_dt(v) != pt for v in (beta, mm, mv, mean_o, var_o)):
        return None
    attrs = node.attrs
    key = (f"batchnorm|{a}|{c}|{b}|{xt}|{pt}|{_dt(out)}|{training}|{attrs['eps']!r}|{attrs['momentum']!r}|"
           f"{attrs['fix_gamma']}")
    name = ctx.unique("sj_batchnorm", key)
    if name not in ctx.mb.symbols:
        _emit_batch_norm(ctx, name, a, c, b, xt, pt, _dt(out), training, float(attrs["eps"]),
                         float(attrs["momentum"]), bool(attrs["fix_gamma"]))
    args = [x, gamma, beta, mm, mv, out, mean_o, var_o]
    if training:
        args += [ctx.state_output(mm), ctx.state_output(mv)]
    return [ParallelCall(name, c, max(1, GRAIN // max(a * b, 1)), args)]


def _emit_batch_norm(ctx, name, a, c, b, xt, pt, ot, training, eps, momentum, fix_gamma) -> None:
    """Per channel, in the reference's order and compute dtype (the data's float type):
    mean = sum(x)/M, xc = x - mean, var = sum(xc*xc)/M, inv_std = 1/sqrt(var + eps) (0 where
    var + eps == 0), out = xc * (inv_std * gamma) + beta; training also writes the moving
    averages. Training graphs are often ill-conditioned (tiny batches), so the compiled
    result tracks the reference's float32 rounding rather than a more accurate one."""
    kw = KernelWriter(ctx.mb, name, 10 if training else 8)
    x, gamma, beta, mm, mv, out, mean_o, var_o = kw.args[:8]
    ct = xt
    T, P = _lty(ct), _lty(pt)
    with kw.loop(kw.begin, kw.end) as ch:
        chan = _Channel(kw, a, c, b, ch, ct)

        def xv(off):
            return convert(kw.load(_lty(xt), x, off), xt, ct)
        mmv = convert(kw.load(P, mm, ch), pt, ct)
        mvv = convert(kw.load(P, mv, ch), pt, ct)
        if training:
            count = float(a * b)
            mean = chan.sum(xv) / count

            def sq(off):
                d = xv(off) - mean
                return d * d
            var = chan.sum(sq) / count
            ve = var + eps
            inv_std = select(ve.eq(0.0), 0.0, 1.0 / sqrt(ve))
        else:
            mean, var = mmv, mvv
            inv_std = 1.0 / sqrt(var + eps)
        g = kw.b.const(1.0, T) if fix_gamma else convert(kw.load(P, gamma, ch), pt, ct)
        scale = inv_std * g
        bb = convert(kw.load(P, beta, ch), pt, ct)
        chan.each(lambda off: kw.store(_lty(ot), convert((xv(off) - mean) * scale + bb, ct, ot), out, off))
        kw.store(P, convert(mean, ct, pt), mean_o, ch)
        kw.store(P, convert(inv_std, ct, pt), var_o, ch)
        if training:
            new_mm, new_mv = kw.args[8:]
            kw.store(P, convert(mmv * momentum + mean * (1.0 - momentum), ct, pt), new_mm, ch)
            kw.store(P, convert(mvv * momentum + var * (1.0 - momentum), ct, pt), new_mv, ch)
    kw.finish()


@register_lowering("_backward_BatchNorm")
def lower_batch_norm_backward(node, ctx: LoweringContext):
    dy, mean, invstd, x, gamma = node.inputs
    dx, dgamma, dbeta = node.outputs
    training = _bn_training(node, ctx)
    if training is None or not _known(*node.inputs, *node.outputs) or not _float(*node.inputs, *node.outputs):
        return None
    shape = tuple(x.type.shape)
    axis = node.attrs["axis"]
    if not -len(shape) <= axis < len(shape) or tuple(dy.type.shape) != shape:
        return None
    a, c, b = axis_view(shape, axis % len(shape))
    if any(tuple(v.type.shape) != (c,) for v in (mean, invstd, gamma, dgamma, dbeta)) or c == 0:
        return None
    if a * b == 0:
        return None
    dts = [_dt(v) for v in (dy, mean, invstd, x, gamma, dx, dgamma, dbeta)]
    key = f"bnback|{a}|{c}|{b}|{dts}|{training}|{node.attrs['fix_gamma']}"
    name = ctx.unique("sj_bnback", key)
    if name not in ctx.mb.symbols:
        _emit_batch_norm_backward(ctx, name, a, c, b, dts, training, bool(node.attrs["fix_gamma"]))
    return [ParallelCall(name, c, max(1, GRAIN // max(a * b, 1)), [dy, mean, invstd, x, gamma, dx, dgamma, dbeta])]


def _emit_batch_norm_backward(ctx, name, a, c, b, dts, training, fix_gamma) -> None:
    """With g = dy * gamma and xhat = (x - mean) * inv_std, in the data's float type:
    training dx = inv_std * (g - mean(g) - xhat * mean(g * xhat)), else g * inv_std;
    dgamma = sum(dy * xhat) (0 with fix_gamma), dbeta = sum(dy)."""
    kw = KernelWriter(ctx.mb, name, 8)
    dy, mean, invstd, x, gamma, dx, dgamma, dbeta = kw.args
    t_dy, t_mean, t_inv, t_x, t_g, t_dx, t_dg, t_db = dts
    ct = t_x
    with kw.loop(kw.begin, kw.end) as ch:
        chan = _Channel(kw, a, c, b, ch, ct)
        mu = convert(kw.load(_lty(t_mean), mean, ch), t_mean, ct)
        inv = convert(kw.load(_lty(t_inv), invstd, ch), t_inv, ct)
        w = kw.b.const(1.0, _lty(ct)) if fix_gamma else convert(kw.load(_lty(t_g), gamma, ch), t_g, ct)

        def dyv(off):
            return convert(kw.load(_lty(t_dy), dy, off), t_dy, ct)

        def xhat(off):
            return (convert(kw.load(_lty(t_x), x, off), t_x, ct) - mu) * inv
        s_dy = chan.sum(dyv)
        s_dyx = chan.sum(lambda off: dyv(off) * xhat(off))
        count = float(a * b)
        if training:
            m_g = chan.sum(lambda off: dyv(off) * w) / count
            m_gx = chan.sum(lambda off: dyv(off) * w * xhat(off)) / count
            chan.each(lambda off: kw.store(_lty(t_dx), convert(
                inv * ((dyv(off) * w - m_g) - xhat(off) * m_gx), ct, t_dx), dx, off))
        else:
            chan.each(lambda off: kw.store(_lty(t_dx), convert(dyv(off) * w * inv, ct, t_dx), dx, off))
        kw.store(_lty(t_dg), convert(kw.b.const(0.0, _lty(ct)) if fix_gamma else s_dyx, ct, t_dg), dgamma, ch)
        kw.store(_lty(t_db), convert(s_dy, ct, t_db), dbeta, ch)
    kw.finish()


# --------------------------------------------------------------------------------------
# _backward_LayerNorm
# --------------------------------------------------------------------------------------

@register_lowering("_backward_LayerNorm")
def lower_layer_norm_backward(node, ctx: LoweringContext):
    """Two kernels: dx per column (parallel over columns), dgamma/dbeta per position k along
    the axis (parallel over k, summing over the columns)."""
    dy, x, gamma, mean, std = node.inputs
    dx, dgamma, dbeta = node.outputs
    if not _known(*node.inputs, *node.outputs) or not _float(*node.inputs, *node.outputs):
        return None
    shape = tuple(x.type.shape)
    axis = node.attrs["axis"]
    if not -len(shape) <= axis < len(shape) or tuple(dy.type.shape) != shape:
        return None
    outer, n, inner = axis_view(shape, axis % len(shape))
    if any(tuple(v.type.shape) != (n,) for v in (gamma, dgamma, dbeta)) or n == 0 or outer * inner == 0:
        return None
    dts = [_dt(v) for v in (dy, x, gamma, mean, std, dx, dgamma, dbeta)]
    key = f"lnback|{outer}|{n}|{inner}|{dts}"
    name_dx, name_dg = ctx.unique("sj_lnback_dx", key), ctx.unique("sj_lnback_dg", key)
    if name_dx not in ctx.mb.symbols:
        _emit_ln_backward(ctx, name_dx, name_dg, outer, n, inner, dts)
    return [_columns_call(ctx, name_dx, outer * inner, n, [dy, x, gamma, mean, std, dx]),
            ParallelCall(name_dg, n, max(1, GRAIN // max(outer * inner, 1)), [dy, x, mean, std, dgamma, dbeta])]


def _emit_ln_backward(ctx, name_dx, name_dg, outer, n, inner, dts) -> None:
    t_dy, t_x, t_g, t_m, t_s, t_dx, t_dg, t_db = dts
    kw = KernelWriter(ctx.mb, name_dx, 6)
    dy, x, gamma, mean, std, dx = kw.args
    with kw.loop(kw.begin, kw.end) as q:
        col = _Columns(kw, n, inner, q)
        mu = _to_d(kw.load(_lty(t_m), mean, q), t_m)
        inv = 1.0 / _to_d(kw.load(_lty(t_s), std, q), t_s)

        def g(k):
            return _to_d(kw.load(_lty(t_dy), dy, col.at(k)), t_dy) * _to_d(kw.load(_lty(t_g), gamma, k), t_g)

        def xhat(k):
            return (_to_d(kw.load(_lty(t_x), x, col.at(k)), t_x) - mu) * inv
        m_g = col.sum(g) / float(n)
        m_gx = col.sum(lambda k: g(k) * xhat(k)) / float(n)
        with kw.loop(0, n) as k:
            kw.store(_lty(t_dx), convert(inv * (g(k) - m_g - xhat(k) * m_gx), "float64", t_dx), dx, col.at(k))
    kw.finish()
    kw = KernelWriter(ctx.mb, name_dg, 6)
    dy, x, mean, std, dgamma, dbeta = kw.args
    with kw.loop(kw.begin, kw.end) as k:
        s_dy, s_dyx = kw.var("double", 0.0), kw.var("double", 0.0)
        with kw.loop(0, outer) as o:
            with kw.loop(0, inner) as i:
                q = o * inner + i
                off = (o * n + k) * inner + i
                d = _to_d(kw.load(_lty(t_dy), dy, off), t_dy)
                mu = _to_d(kw.load(_lty(t_m), mean, q), t_m)
                sd = _to_d(kw.load(_lty(t_s), std, q), t_s)
                xh = (_to_d(kw.load(_lty(t_x), x, off), t_x) - mu) / sd
                s_dy.set(kw.fadd(s_dy.get(), d))
                s_dyx.set(kw.fadd(s_dyx.get(), d * xh))
        kw.store(_lty(t_dg), convert(s_dyx.get(), "float64", t_dg), dgamma, k)
        kw.store(_lty(t_db), convert(s_dy.get(), "float64", t_db), dbeta, k)
    kw.finish()



# --------------------------------------------------------------------------------------
# _backward_SoftmaxOutput
# --------------------------------------------------------------------------------------

@register_lowering("_backward_SoftmaxOutput")
def lower_softmax_output_backward(node, ctx: LoweringContext):
    """The cross-entropy gradient of SoftmaxOutput: with the output viewed as (P, K, Q) (K the
    class axis) and one label per (p, q): g = (p - target) * factor, where target is the
    (smoothed) one-hot of the truncated label, rows with an ignored label are 0, factor =
    grad_scale / normalization, times the head gradient with `out_grad`. A label of the
    output's own shape is a probability target (an elementwise kernel). The `valid`
    normalization (a data-dependent count) keeps its Python step."""
    dy, out, label = node.inputs
    res = node.outputs[0]
    attrs = node.attrs
    if not _known(dy, out, label, res) or not _float(dy, out, res) or len(out.type.shape) < 2:
        return None
    if np.dtype(label.type.dtype).name not in SUPPORTED_DTYPES or _dt(label) == "bool":
        return None
    shape, lshape = tuple(out.type.shape), tuple(label.type.shape)
    scale = float(attrs["grad_scale"])
    if lshape == shape:
        return _prob_target_grad(ctx, node, scale)
    if attrs["normalization"] == "valid":
        return None
    if attrs["multi_output"]:
        P, K, Q = shape[0], shape[1], int(np.prod(shape[2:], dtype=np.int64))
        factor = scale / Q / (P if attrs["normalization"] == "batch" else 1)
        if int(np.prod(lshape, dtype=np.int64)) != P * Q:
            return None
    else:
        K = shape[-1] if attrs["preserve_shape"] else int(np.prod(shape[1:], dtype=np.int64))
        P, Q = int(np.prod(shape, dtype=np.int64)) // max(K, 1), 1
        n_lab = int(np.prod(lshape, dtype=np.int64))
        if n_lab < P:
            return None
        factor = scale / (n_lab if attrs["normalization"] == "batch" else 1)
    if P * K * Q == 0:
        return []
    alpha = float(attrs["smooth_alpha"])
    dts = [_dt(v) for v in (dy, out, label, res)]
    key = (f"smoback|{P}|{K}|{Q}|{dts}|{factor!r}|{alpha!r}|{attrs['use_ignore']}|{attrs['ignore_label']!r}|"
           f"{attrs['out_grad']}")
    name = ctx.unique("sj_smoback", key)
    if name not in ctx.mb.symbols:
        _emit_softmax_output_backward(ctx, name, P, K, Q, dts, factor, alpha, bool(attrs["use_ignore"]),
                                      int(attrs["ignore_label"]), bool(attrs["out_grad"]))
    return [ParallelCall(name, P * Q, max(1, GRAIN // max(K, 1)), [dy, out, label, res])]


def _emit_softmax_output_backward(ctx, name, P, K, Q, dts, factor, alpha, use_ignore, ignore, out_grad) -> None:
    t_dy, t_out, t_lab, t_res = dts
    kw = KernelWriter(ctx.mb, name, 4)
    dy, out, label, res = kw.args
    off = alpha / (K - 1) if K > 1 else float("inf")
    with kw.loop(kw.begin, kw.end) as c:          # c = p * Q + q
        q = kw.b.ins("i64", f"urem i64 {c.ref}, {Q}")
        p = kw.b.ins("i64", f"udiv i64 {c.ref}, {Q}")
        ident = convert(kw.load(_lty(t_lab), label, c), t_lab, "int64")
        keep = kw.b.const(1.0, "double")
        if use_ignore:
            keep = select(ident.eq(ignore), 0.0, 1.0, "double")
        with kw.loop(0, K) as k:
            at = (p * K + k) * Q + q
            hit = k.eq(ident)
            target = select(hit, 1.0 - alpha, off, "double") if alpha != 0.0 else select(hit, 1.0, 0.0, "double")
            g = (_to_d(kw.load(_lty(t_out), out, at), t_out) - target) * keep * factor
            if out_grad:
                g = g * _to_d(kw.load(_lty(t_dy), dy, at), t_dy)
            kw.store(_lty(t_res), convert(g, "float64", t_res), res, at)
    kw.finish()


def _prob_target_grad(ctx, node, scale: float):
    """(p - label) * grad_scale [* dy]: an elementwise kernel."""
    from ...ops import scalar as S
    from .elementwise import ElementwiseSpec, emit_elementwise, kernel_name
    dy, out, label = node.inputs
    res = node.outputs[0]
    expr = (S.Input(1) - S.Input(2)) * S.Const(scale)
    if node.attrs["out_grad"]:
        expr = expr * S.Input(0)
    shape = tuple(out.type.shape)
    spec = ElementwiseSpec((expr,), (_dt(dy), _dt(out), _dt(label)), (shape, shape, shape), _dt(out),
                           (_dt(res),), shape)
    name = kernel_name(spec)
    if name not in ctx.mb.symbols:
        emit_elementwise(ctx.mb, spec, name)
    return [ParallelCall(name, int(np.prod(shape, dtype=np.int64)), GRAIN, [dy, out, label, res])]
