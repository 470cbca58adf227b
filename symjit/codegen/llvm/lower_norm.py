"""Native lowerings of normalizations along axes and of the loss heads: the softmax family
(softmax, log_softmax, softmin, SoftmaxActivation and their gradients, SoftmaxOutput and its backward),
LayerNorm, InstanceNorm, BatchNorm (inference and training, with the moving-average update
written to state outputs, see `LoweringContext.state_output`), the backward ops of the
three norms, the regression heads (Linear/Logistic/MAE and their backward ops) and MakeLoss.

Layouts. An op normalizing along one axis views its input as (outer, n, inner) and
processes *columns*: column q = (o, i) holds the n elements at o*n*inner + i + k*inner.
Columns are independent, so the runtime's parallel-for splits them over threads; with
inner == 1 (the last axis, the common case) each column is contiguous and its loops
vectorize (the exponential is the inlined vectorizable `vecmath` exp). BatchNorm
normalizes per channel over every other axis: it views data as (A, C, B) and processes
channels, each a loop over A of contiguous runs of B.

Numerics: softmax sums are accumulated in float64 (as MXNet's native kernel), LayerNorm
and InstanceNorm moments in float64 (more accurately than the float32 reference),
BatchNorm forward and backward in the data's float type with the reference's formulas
(training graphs with tiny batches are ill-conditioned, and there the compiled result should
track the reference's rounding); exponentials are taken in the input's float type, results
are rounded once to the output dtype. The float32 oneDNN softmax of MXNet (a different exp polynomial and sum order) is
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
            # NaN-propagating max: a row holding NaN is all NaN either way (its exp sum is NaN)
            m.set(kw.b.call_intr("llvm.maximum", cty, m.get(), value(k)))
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


@register_lowering("_backward_softmax", "_backward_log_softmax")
def lower_softmax_backward(node, ctx: LoweringContext):
    """The softmax family's gradient per column (module docstring): one pass accumulating the
    column's sum in float64 (sum(dy) for log_softmax, sum(dy * y) for softmax), one pass
    writing dy - exp(y) * s, resp. y * (dy - s), rounded once to the output dtype."""
    dy, y = node.inputs
    res = node.outputs[0]
    if not _known(dy, y, res) or not _float(dy, y, res):
        return None
    shape = tuple(dy.type.shape)
    if tuple(y.type.shape) != shape or not -len(shape) <= node.attrs["axis"] < len(shape):
        return None
    outer, n, inner = axis_view(shape, node.attrs["axis"] % len(shape))
    if outer * n * inner == 0:
        return []
    log = node.op.name == "_backward_log_softmax"
    dts = (_dt(dy), _dt(y), _dt(res))
    name = ctx.unique("sj_softmax_bwd", f"smbwd|{n}|{inner}|{dts}|{log}")
    if name not in ctx.mb.symbols:
        _emit_softmax_backward(ctx, name, n, inner, dts, log)
    return [_columns_call(ctx, name, outer * inner, n, [dy, y, res])]


def _emit_softmax_backward(ctx, name: str, n: int, inner: int, dts: tuple, log: bool) -> None:
    t_dy, t_y, t_res = dts
    kw = KernelWriter(ctx.mb, name, 3)
    dy, y, res = kw.args
    with kw.loop(kw.begin, kw.end) as q:
        col = _Columns(kw, n, inner, q)

        def load(ptr, dt, k):
            return kw.load(_lty(dt), ptr, col.at(k))
        if log:
            s = col.sum(lambda k: _to_d(load(dy, t_dy, k), t_dy))
        else:
            s = col.sum(lambda k: _to_d(load(dy, t_dy, k), t_dy) * _to_d(load(y, t_y, k), t_y))
        with kw.loop(0, n) as k:
            g, v = _to_d(load(dy, t_dy, k), t_dy), load(y, t_y, k)
            if log:
                out = g - _to_d(_call_math(kw, "exp", v), t_y) * s
            else:
                out = _to_d(v, t_y) * (g - s)
            kw.store(_lty(t_res), convert(out, "float64", t_res), res, col.at(k))
    kw.finish()


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
    from ...ops.nn_norm import check_softmax_label
    try:
        check_softmax_label(node.attrs, np.empty(src.type.shape, np.uint8), np.empty(label.type.shape, np.uint8))
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
        return self.sums(1, lambda off: (term(off),))[0]

    def sums(self, n: int, terms) -> list[Val]:
        """`n` sums in one pass over the channel: `terms(off)` gives one term per sum."""
        accs = [self.kw.var(_lty(self.ct), 0.0) for _ in range(n)]

        def body(off):
            for acc, v in zip(accs, terms(off)):
                acc.set(self.kw.fadd(acc.get(), v))
        self.each(body)
        return [acc.get() for acc in accs]


def _relu_val(v: Val) -> Val:
    """The registry's relu (ops/elemwise.py relu_expr): v where v > 0 or v is NaN, else 0."""
    return select((v > 0.0) | v.ne(v), v, 0.0)


def _relu_grad_val(kw: KernelWriter, dy: Val, y: Val, ty: str) -> Val:
    """relu's gradient from its output (ops/elemwise.py _OUTPUT_GRADS): dy * (y if y is NaN
    else (1 if y > 0 else 0)), the same operations as the fused elementwise kernel."""
    return dy * select(y.ne(y), y, select(y > 0.0, kw.b.const(1.0, ty), kw.b.const(0.0, ty)))


@register_lowering("BatchNorm")
@register_lowering("_batch_norm_relu")
def lower_batch_norm(node, ctx: LoweringContext):
    """BatchNorm, and `_batch_norm_relu` (relu applied to each rounded output element)."""
    relu = node.op.name == "_batch_norm_relu"
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
           f"{attrs['fix_gamma']}|{relu}")
    name = ctx.unique("sj_batchnorm", key)
    if name not in ctx.mb.symbols:
        _emit_batch_norm(ctx, name, a, c, b, xt, pt, _dt(out), training, float(attrs["eps"]),
                         float(attrs["momentum"]), bool(attrs["fix_gamma"]), relu)
    args = [x, gamma, beta, mm, mv, out, mean_o, var_o]
    if training:
        args += [ctx.state_output(mm), ctx.state_output(mv)]
    return [ParallelCall(name, c, max(1, GRAIN // max(a * b, 1)), args)]


def _emit_batch_norm(ctx, name, a, c, b, xt, pt, ot, training, eps, momentum, fix_gamma, relu=False) -> None:
    """Per channel, in the reference's order and compute dtype (the data's float type):
    mean = sum(x)/M, xc = x - mean, var = sum(xc*xc)/M, inv_std = 1/sqrt(var + eps) (0 where
    var + eps == 0), out = xc * (inv_std * gamma) + beta (with `relu`, relu of out rounded to
    the output dtype); training also writes the moving averages. Training graphs are often ill-conditioned (tiny batches), so the compiled
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
        def result(off):
            v = convert((xv(off) - mean) * scale + bb, ct, ot)
            return _relu_val(v) if relu else v
        chan.each(lambda off: kw.store(_lty(ot), result(off), out, off))
        kw.store(P, convert(mean, ct, pt), mean_o, ch)
        kw.store(P, convert(inv_std, ct, pt), var_o, ch)
        if training:
            new_mm, new_mv = kw.args[8:]
            kw.store(P, convert(mmv * momentum + mean * (1.0 - momentum), ct, pt), new_mm, ch)
            kw.store(P, convert(mvv * momentum + var * (1.0 - momentum), ct, pt), new_mv, ch)
    kw.finish()


@register_lowering("_backward_BatchNorm")
@register_lowering("_backward_batch_norm_relu")
def lower_batch_norm_backward(node, ctx: LoweringContext):
    """_backward_BatchNorm, and `_backward_batch_norm_relu` (the incoming gradient masked by
    relu's gradient at the relu output, an extra input, wherever it is read)."""
    masked = node.op.name == "_backward_batch_norm_relu"
    relu_out = node.inputs[1] if masked else None
    dy, mean, invstd, x, gamma = [v for v in node.inputs if v is not relu_out] if masked else node.inputs
    dx, dgamma, dbeta = node.outputs
    training = _bn_training(node, ctx)
    if training is None or not _known(*node.inputs, *node.outputs) or not _float(*node.inputs, *node.outputs):
        return None
    shape = tuple(x.type.shape)
    axis = node.attrs["axis"]
    if not -len(shape) <= axis < len(shape) or tuple(dy.type.shape) != shape:
        return None
    if masked and (tuple(relu_out.type.shape) != shape or _dt(relu_out) != _dt(dy)):
        return None
    a, c, b = axis_view(shape, axis % len(shape))
    if any(tuple(v.type.shape) != (c,) for v in (mean, invstd, gamma, dgamma, dbeta)) or c == 0:
        return None
    if a * b == 0:
        return None
    dts = [_dt(v) for v in (dy, mean, invstd, x, gamma, dx, dgamma, dbeta)]
    key = f"bnback|{a}|{c}|{b}|{dts}|{training}|{node.attrs['fix_gamma']}|{masked}"
    name = ctx.unique("sj_bnback", key)
    if name not in ctx.mb.symbols:
        _emit_batch_norm_backward(ctx, name, a, c, b, dts, training, bool(node.attrs["fix_gamma"]), masked)
    args = [dy, mean, invstd, x, gamma, dx, dgamma, dbeta] + ([relu_out] if masked else [])
    return [ParallelCall(name, c, max(1, GRAIN // max(a * b, 1)), args)]


def _emit_batch_norm_backward(ctx, name, a, c, b, dts, training, fix_gamma, masked=False) -> None:
    """With g = dy * gamma and xhat = (x - mean) * inv_std, in the data's float type:
    training dx = inv_std * (g - mean(g) - xhat * mean(g * xhat)), else g * inv_std;
    dgamma = sum(dy * xhat) (0 with fix_gamma), dbeta = sum(dy). Two passes over each channel:
    one for both sums (mean(g) = gamma sum(dy) / M and mean(g xhat) = gamma sum(dy xhat) / M,
    gamma being a per-channel constant), one writing dx. With `masked`, dy is relu's gradient
    of the incoming gradient at the relu output (a ninth argument), computed where it is read."""
    kw = KernelWriter(ctx.mb, name, 9 if masked else 8)
    dy, mean, invstd, x, gamma, dx, dgamma, dbeta = kw.args[:8]
    t_dy, t_mean, t_inv, t_x, t_g, t_dx, t_dg, t_db = dts
    ct = t_x
    with kw.loop(kw.begin, kw.end) as ch:
        chan = _Channel(kw, a, c, b, ch, ct)
        mu = convert(kw.load(_lty(t_mean), mean, ch), t_mean, ct)
        inv = convert(kw.load(_lty(t_inv), invstd, ch), t_inv, ct)
        w = kw.b.const(1.0, _lty(ct)) if fix_gamma else convert(kw.load(_lty(t_g), gamma, ch), t_g, ct)

        def dyv(off):
            d = kw.load(_lty(t_dy), dy, off)
            if masked:
                d = _relu_grad_val(kw, d, kw.load(_lty(t_dy), kw.args[8], off), _lty(t_dy))
            return convert(d, t_dy, ct)

        def xhat(off):
            return (convert(kw.load(_lty(t_x), x, off), t_x, ct) - mu) * inv
        def terms(off):
            d = dyv(off)
            return d, d * xhat(off)
        s_dy, s_dyx = chan.sums(2, terms)
        count = float(a * b)
        if training:
            m_g = w * s_dy / count
            m_gx = w * s_dyx / count
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
    from .elementwise import ElementwiseSpec
    from .lower_basic import elementwise_call
    dy, out, label = node.inputs
    res = node.outputs[0]
    expr = (S.Input(1) - S.Input(2)) * S.Const(scale)
    if node.attrs["out_grad"]:
        expr = expr * S.Input(0)
    shape = tuple(out.type.shape)
    spec = ElementwiseSpec((expr,), (_dt(dy), _dt(out), _dt(label)), (shape, shape, shape), _dt(out),
                           (_dt(res),), shape)
    return [elementwise_call(ctx, spec, [dy, out, label, res])]


# --------------------------------------------------------------------------------------
# Regression heads and MakeLoss (elementwise kernels)
# --------------------------------------------------------------------------------------

def _ew(ctx, expr, inputs, in_shapes, compute: str, out) -> list:
    from .elementwise import ElementwiseSpec
    from .lower_basic import elementwise_call
    shape = tuple(out.type.shape)
    spec = ElementwiseSpec((expr,), tuple(_dt(v) for v in inputs), tuple(in_shapes), compute, (_dt(out),), shape)
    return [elementwise_call(ctx, spec, list(inputs) + [out])]


@register_lowering("LinearRegressionOutput", "MAERegressionOutput", "LogisticRegressionOutput", "MakeLoss")
def lower_regression_forward(node, ctx: LoweringContext):
    """Identity (sigmoid for the logistic head) of the data; the label only matters backward."""
    from ...ops import scalar as S
    x, out = node.inputs[0], node.outputs[0]
    if not _known(x, out) or not _float(x, out) or int(np.prod(x.type.shape, dtype=np.int64)) == 0:
        return None
    expr = S.Input(0)
    if node.op.name == "LogisticRegressionOutput":
        expr = S.Const(1.0) / (S.Const(1.0) + S.call("exp", -S.Input(0)))
    return _ew(ctx, expr, [x], [tuple(x.type.shape)], _dt(x), out)


@register_lowering("_backward_linear_reg_out", "_backward_logistic_reg_out", "_backward_mae_reg_out")
def lower_regression_backward(node, ctx: LoweringContext):
    """(out - label) * grad_scale / (label.size / label.shape[0]); sign(...) for MAE. The label
    is read in the output's shape (same elements, as the reference's reshape)."""
    from ...ops import scalar as S
    label, out = node.inputs
    res = node.outputs[0]
    if not _known(label, out, res) or not _float(out, res) or _dt(label) not in SUPPORTED_DTYPES:
        return None
    lshape, shape = tuple(label.type.shape), tuple(out.type.shape)
    n = int(np.prod(shape, dtype=np.int64))
    if int(np.prod(lshape, dtype=np.int64)) != n or n == 0:
        return None
    num_output = int(np.prod(lshape, dtype=np.int64)) / lshape[0] if lshape and lshape[0] else 1.0
    diff = S.Input(1) - S.Input(0)
    if node.op.name == "_backward_mae_reg_out":
        diff = S.call("sign", diff)
    expr = diff * S.Const(node.attrs["grad_scale"] / num_output)
    return _ew(ctx, expr, [label, out], [shape, shape], _dt(out), res)


@register_lowering("_backward_MakeLoss")
def lower_make_loss_backward(node, ctx: LoweringContext):
    """A constant fill: grad_scale, divided by the batch size with normalization='batch'
    ('valid' counts elements at run time and keeps its Python step)."""
    from .lower_shape import fill_call
    x, out = node.inputs[0], node.outputs[0]
    if not _known(x, out) or node.attrs["normalization"] == "valid":
        return None
    shape = tuple(x.type.shape)
    if int(np.prod(shape, dtype=np.int64)) == 0:
        return []
    scale = node.attrs["grad_scale"]
    if node.attrs["normalization"] == "batch" and shape and shape[0]:
        scale = scale / shape[0]
    c = fill_call(ctx, out, scale)
    return None if c is None else [c]


# --------------------------------------------------------------------------------------
# _backward_InstanceNorm, GroupNorm and its backward
# --------------------------------------------------------------------------------------

@register_lowering("_backward_InstanceNorm")
def lower_instance_norm_backward(node, ctx: LoweringContext):
    """Rows r = (n, c) of S spatial elements: dx per row (parallel over rows), then dgamma and
    dbeta per channel summed over (n, s) (parallel over channels)."""
    dy, x, gamma, mean, var = node.inputs
    dx, dgamma, dbeta = node.outputs
    if not _known(*node.inputs, *node.outputs) or not _float(*node.inputs, *node.outputs):
        return None
    shape = tuple(x.type.shape)
    if len(shape) < 3 or tuple(dy.type.shape) != shape:
        return None
    N, C = shape[:2]
    S = int(np.prod(shape[2:], dtype=np.int64))
    if any(tuple(v.type.shape) != (C,) for v in (gamma, dgamma, dbeta)) or tuple(mean.type.shape) != (N, C) \
            or tuple(var.type.shape) != (N, C) or S == 0 or N * C == 0:
        return None
    return _rows_norm_backward(ctx, node, N, C, S, float(node.attrs["eps"]))


def _rows_norm_backward(ctx, node, N: int, C: int, S: int, eps: float | None) -> list:
    """Backward of a norm over rows r = (n, c) of S elements with gamma per c: dx per row,
    then dgamma and dbeta per c. The saved second moment is a variance (`eps` given) or a std."""
    dy, x, gamma, mean, sec = node.inputs
    dx, dgamma, dbeta = node.outputs
    dts = [_dt(v) for v in (dy, x, gamma, mean, sec, dx, dgamma, dbeta)]
    key = f"rowsback|{N}|{C}|{S}|{dts}|{eps!r}"
    name_dx, name_dg = ctx.unique("sj_rowsback_dx", key), ctx.unique("sj_rowsback_dg", key)
    if name_dx not in ctx.mb.symbols:
        _emit_rows_backward(ctx, name_dx, name_dg, N, C, S, dts, eps)
    return [_columns_call(ctx, name_dx, N * C, S, [dy, x, gamma, mean, sec, dx]),
            ParallelCall(name_dg, C, max(1, GRAIN // max(N * S, 1)), [dy, x, mean, sec, dgamma, dbeta])]


def _emit_rows_backward(ctx, name_dx, name_dg, N, C, S, dts, eps) -> None:
    t_dy, t_x, t_g, t_m, t_v, t_dx, t_dg, t_db = dts

    def inv_of(v):
        return 1.0 / (sqrt(v + eps) if eps is not None else v)
    kw = KernelWriter(ctx.mb, name_dx, 6)
    dy, x, gamma, mean, var, dx = kw.args
    with kw.loop(kw.begin, kw.end) as r:
        col = _Columns(kw, S, 1, r)
        c = kw.b.ins("i64", f"urem i64 {r.ref}, {C}")
        mu = _to_d(kw.load(_lty(t_m), mean, r), t_m)
        inv = inv_of(_to_d(kw.load(_lty(t_v), var, r), t_v))
        w = _to_d(kw.load(_lty(t_g), gamma, c), t_g)

        def g(k):
            return _to_d(kw.load(_lty(t_dy), dy, col.at(k)), t_dy) * w

        def xhat(k):
            return (_to_d(kw.load(_lty(t_x), x, col.at(k)), t_x) - mu) * inv
        m_g = col.sum(g) / float(S)
        m_gx = col.sum(lambda k: g(k) * xhat(k)) / float(S)
        with kw.loop(0, S) as k:
            kw.store(_lty(t_dx), convert(inv * (g(k) - m_g - xhat(k) * m_gx), "float64", t_dx), dx, col.at(k))
    kw.finish()
    kw = KernelWriter(ctx.mb, name_dg, 6)
    dy, x, mean, var, dgamma, dbeta = kw.args
    with kw.loop(kw.begin, kw.end) as c:
        s_dy, s_dyx = kw.var("double", 0.0), kw.var("double", 0.0)
        with kw.loop(0, N) as n:
            r = n * C + c
            mu = _to_d(kw.load(_lty(t_m), mean, r), t_m)
            inv = inv_of(_to_d(kw.load(_lty(t_v), var, r), t_v))
            with kw.loop(0, S) as s:
                off = r * S + s
                d = _to_d(kw.load(_lty(t_dy), dy, off), t_dy)
                xh = (_to_d(kw.load(_lty(t_x), x, off), t_x) - mu) * inv
                s_dy.set(kw.fadd(s_dy.get(), d))
                s_dyx.set(kw.fadd(s_dyx.get(), d * xh))
        kw.store(_lty(t_dg), convert(s_dyx.get(), "float64", t_dg), dgamma, c)
        kw.store(_lty(t_db), convert(s_dy.get(), "float64", t_db), dbeta, c)
    kw.finish()


# --------------------------------------------------------------------------------------
# LeakyReLU (leaky, elu, selu, gelu, prelu; rrelu samples and stays a Python step)
# --------------------------------------------------------------------------------------

@register_lowering("LeakyReLU")
def lower_leaky_relu(node, ctx: LoweringContext):
    """The activation's scalar expression (`nn_norm.leaky_expr`) as an elementwise kernel;
    prelu reads gamma broadcast as `nn_norm.prelu_gamma_shape` says."""
    from ...ops import scalar as S
    from ...base import MXNetError
    from ...ops.nn_norm import leaky_expr, prelu_gamma_shape
    x, out = node.inputs[0], node.outputs[0]
    kind = node.attrs["act_type"]
    if kind == "rrelu" or not _known(*node.inputs, out) or not _float(*node.inputs, out):
        return None
    shape = tuple(x.type.shape)
    if int(np.prod(shape, dtype=np.int64)) == 0:
        return None
    if kind != "prelu":
        return _ew(ctx, leaky_expr(node.attrs, S.Input(0), node.attrs["slope"]), [x], [shape], _dt(x), out)
    gamma = node.inputs[1]
    try:
        bshape = prelu_gamma_shape(node.op.name, tuple(gamma.type.shape), shape)
    except MXNetError:   # the reference raises the op's error
        return None
    expr = S.select(S.Input(0) > S.Const(0), S.Input(0), S.Input(0) * S.Input(1))
    return _ew(ctx, expr, [x, gamma], [shape, bshape], _dt(x), out)


def _group_view(node):
    """(N, G, L) of GroupNorm's data viewed as N x G rows of L = C/G * spatial elements."""
    x = node.inputs[1] if node.op.name == "_backward_GroupNorm" else node.inputs[0]
    shape = tuple(x.type.shape)
    g = node.attrs["num_groups"]
    if len(shape) < 3 or g <= 0 or shape[1] % g:
        return None
    return shape[0], g, int(np.prod(shape, dtype=np.int64)) // (shape[0] * g) if shape[0] else 0


@register_lowering("GroupNorm")
def lower_group_norm(node, ctx: LoweringContext):
    """InstanceNorm's kernel over the N x G group rows, with per-group gamma/beta and std."""
    x, gamma, beta = node.inputs
    out, mean, std = node.outputs
    if not _known(*node.inputs, *node.outputs) or not _float(*node.inputs, *node.outputs):
        return None
    view = _group_view(node)
    if view is None or view[0] * view[1] * view[2] == 0:
        return None
    n, g, length = view
    if tuple(gamma.type.shape) != (g,) or tuple(beta.type.shape) != (g,):
        return None
    dts = {"x": _dt(x), "gamma": _dt(gamma), "out": _dt(out), "mean": _dt(mean)}
    key = f"groupnorm|{length}|{g}|{dts}|{node.attrs['eps']!r}"
    name = ctx.unique("sj_groupnorm", key)
    if name not in ctx.mb.symbols:
        _emit_moments_norm(ctx, name, length, 1, dts, float(node.attrs["eps"]), g, "std")
    return [_columns_call(ctx, name, n * g, length, [x, gamma, beta, out, mean, std])]


@register_lowering("_backward_GroupNorm")
def lower_group_norm_backward(node, ctx: LoweringContext):
    dy, x, gamma, mean, std = node.inputs
    if not _known(*node.inputs, *node.outputs) or not _float(*node.inputs, *node.outputs):
        return None
    view = _group_view(node)
    if view is None or view[0] * view[1] * view[2] == 0 or tuple(dy.type.shape) != tuple(x.type.shape):
        return None
    n, g, length = view
    if tuple(gamma.type.shape) != (g,) or tuple(mean.type.shape) != (n, g) or tuple(std.type.shape) != (n, g):
        return None
    return _rows_norm_backward(ctx, node, n, g, length, None)


# --------------------------------------------------------------------------------------
# L2Normalization and its backward
# --------------------------------------------------------------------------------------

def _l2_columns(node, shape) -> tuple[int, int, int] | None:
    """(outer, n, inner) of the normalized axes for the op's mode (`nn_norm.l2_norm_layout`)."""
    from ...ops.nn_norm import l2_norm_layout
    try:
        view, red, _ = l2_norm_layout(node.op.name, node.attrs["mode"], shape)
    except Exception:  # noqa: BLE001 - an invalid layout keeps the reference step, which reports it
        return None
    a, b, c = view
    return (a * b, c, 1) if red == 2 else (a, b, c)


@register_lowering("L2Normalization")
def lower_l2_normalization(node, ctx: LoweringContext):
    """out = x / sqrt(sum(x*x) + eps) per column; the norm is the second output."""
    x = node.inputs[0]
    out, norm = node.outputs
    if not _known(x, out, norm) or not _float(x, out, norm):
        return None
    cols = _l2_columns(node, tuple(x.type.shape))
    if cols is None or cols[0] * cols[1] * cols[2] == 0:
        return None
    outer, n, inner = cols
    dts = [_dt(v) for v in (x, out, norm)]
    eps = float(node.attrs["eps"])
    name = ctx.unique("sj_l2norm", f"l2norm|{n}|{inner}|{dts}|{eps!r}")
    if name not in ctx.mb.symbols:
        kw = KernelWriter(ctx.mb, name, 3)
        xp, op, np_ = kw.args
        with kw.loop(kw.begin, kw.end) as q:
            col = _Columns(kw, n, inner, q)

            def xd(k):
                return _to_d(kw.load(_lty(dts[0]), xp, col.at(k)), dts[0])
            nv = sqrt(col.sum(lambda k: xd(k) * xd(k)) + eps)
            with kw.loop(0, n) as k:
                kw.store(_lty(dts[1]), convert(xd(k) / nv, "float64", dts[1]), op, col.at(k))
            kw.store(_lty(dts[2]), convert(nv, "float64", dts[2]), np_, q)
        kw.finish()
    return [_columns_call(ctx, name, outer * inner, n, [x, out, norm])]


@register_lowering("_backward_L2Normalization")
def lower_l2_normalization_backward(node, ctx: LoweringContext):
    """dx = (g - y * sum(g * y)) / norm per column."""
    dy, y, norm = node.inputs
    dx = node.outputs[0]
    if not _known(dy, y, norm, dx) or not _float(dy, y, norm, dx) or tuple(dy.type.shape) != tuple(y.type.shape):
        return None
    cols = _l2_columns(node, tuple(y.type.shape))
    if cols is None or cols[0] * cols[1] * cols[2] == 0:
        return None
    outer, n, inner = cols
    if int(np.prod(norm.type.shape, dtype=np.int64)) != outer * inner:
        return None
    dts = [_dt(v) for v in (dy, y, norm, dx)]
    name = ctx.unique("sj_l2back", f"l2back|{n}|{inner}|{dts}")
    if name not in ctx.mb.symbols:
        kw = KernelWriter(ctx.mb, name, 4)
        gp, yp, np_, dp = kw.args
        with kw.loop(kw.begin, kw.end) as q:
            col = _Columns(kw, n, inner, q)

            def gd(k):
                return _to_d(kw.load(_lty(dts[0]), gp, col.at(k)), dts[0])

            def yd(k):
                return _to_d(kw.load(_lty(dts[1]), yp, col.at(k)), dts[1])
            s = col.sum(lambda k: gd(k) * yd(k))
            nv = _to_d(kw.load(_lty(dts[2]), np_, q), dts[2])
            with kw.loop(0, n) as k:
                kw.store(_lty(dts[3]), convert((gd(k) - yd(k) * s) / nv, "float64", dts[3]), dp, col.at(k))
        kw.finish()
    return [_columns_call(ctx, name, outer * inner, n, [dy, y, norm, dx])]
