"""MXNet 1.9.1's mixed-precision and multi-tensor optimizer kernels (`mp_*`, `multi_*`,
`preloaded_multi_*`, `multi_sum_sq`, `multi_lars`, LAMB phases, AdamW, `reset_arrays`) against
numpy references of MXNet's documented formulas (float64 references; tolerances: float32 results
rtol 1e-5 / atol 1e-6, float16 weights rtol 1e-3 / atol 1e-3, i.e. one fp16 ulp at |w| ~ 1)."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit import nd
from symjit.base import MXNetError
from symjit.ops.registry import get_op

RNG = np.random.default_rng(7)
F32 = dict(rtol=1e-5, atol=1e-6)
F16 = dict(rtol=1e-3, atol=1e-3)


def _rand(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _clip(g, c):
    return np.clip(g, -c, c) if c >= 0 else g


def ref_sgd(w, g, lr, wd, rescale=1.0, clip=-1.0):
    return (1 - lr * wd) * w - lr * _clip(rescale * g, clip)


def ref_sgd_mom(w, g, mom, lr, wd, momentum, rescale=1.0, clip=-1.0):
    mom = momentum * mom - lr * wd * w - lr * _clip(rescale * g, clip)
    return w + mom, mom


def ref_mp_nag(w32, g, mom, lr, wd, momentum, rescale=1.0, clip=-1.0):
    """MXNet 1.9.1's MP_NAGMomKernel (the decay of the momentum step reads the updated master)."""
    gc = _clip(rescale * g, clip)
    m = momentum * mom
    w_new = w32 - m + (momentum + 1) * (m - lr * (gc + wd * w32))
    return w_new, m - lr * (gc + wd * w_new)


def _f64(*xs):
    return [np.asarray(x, np.float64) for x in xs]


# ------------------------------------------------------------------------------------------
# mp_* single-tensor kernels
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("clip", [-1.0, 0.3])
def test_mp_sgd_update_fp16(clip):
    w32 = _rand((4, 5))
    g = _rand((4, 5)).astype(np.float16)
    weight, master = nd.array(w32.astype(np.float16), dtype=np.float16), nd.array(w32)
    out = nd.mp_sgd_update(weight, nd.array(g, dtype=np.float16), master, lr=0.1, wd=0.01, rescale_grad=0.5,
                           clip_gradient=clip, out=weight)
    assert out is weight and weight.dtype == np.float16 and master.dtype == np.float32
    want = ref_sgd(*_f64(w32, g), 0.1, 0.01, 0.5, clip)
    np.testing.assert_allclose(master.asnumpy(), want, **F32)
    np.testing.assert_array_equal(weight.asnumpy(), master.asnumpy().astype(np.float16))


def test_mp_sgd_mom_update_fp16_states_in_place():
    w32, mom0 = _rand(7), _rand(7)
    g = _rand(7).astype(np.float16)
    weight, master, mom = nd.array(w32, dtype=np.float16), nd.array(w32), nd.array(mom0)
    nd.mp_sgd_mom_update(weight, nd.array(g, dtype=np.float16), mom, master, lr=0.05, momentum=0.9, wd=0.1,
                         out=weight)
    want_w, want_m = ref_sgd_mom(*_f64(w32, g, mom0), 0.05, 0.1, 0.9)
    np.testing.assert_allclose(mom.asnumpy(), want_m, **F32)
    np.testing.assert_allclose(master.asnumpy(), want_w, **F32)
    np.testing.assert_allclose(weight.asnumpy(), want_w, **F16)


@pytest.mark.parametrize("size", [9, 1 << 17])   # the numpy reference and the compiled kernel
def test_mp_nag_mom_update(size):
    w32, mom0, g = _rand(size), _rand(size), _rand(size)
    weight, master, mom = nd.array(w32), nd.array(w32), nd.array(mom0)
    nd.mp_nag_mom_update(weight, nd.array(g), mom, master, lr=0.1, momentum=0.9, wd=0.05, rescale_grad=0.7,
                         clip_gradient=0.5, out=weight)
    want_w, want_m = ref_mp_nag(*_f64(w32, g, mom0), 0.1, 0.05, 0.9, 0.7, 0.5)
    np.testing.assert_allclose(master.asnumpy(), want_w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mom.asnumpy(), want_m, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(weight.asnumpy(), master.asnumpy())


def test_mp_ops_fp32_weights_match_plain_ops():
    """With float32 weights the mp ops equal the plain ones (the master is the weight)."""
    w0, g, m0 = _rand(300), _rand(300), _rand(300)
    a, ma = nd.array(w0), nd.array(m0)
    nd.sgd_mom_update(a, nd.array(g), ma, lr=0.1, momentum=0.8, wd=0.01, out=a)
    b, mb, b32 = nd.array(w0), nd.array(m0), nd.array(w0)
    nd.mp_sgd_mom_update(b, nd.array(g), mb, b32, lr=0.1, momentum=0.8, wd=0.01, out=b)
    np.testing.assert_allclose(b.asnumpy(), a.asnumpy(), **F32)
    np.testing.assert_allclose(mb.asnumpy(), ma.asnumpy(), **F32)


def test_mp_type_inference_and_errors():
    s = mx.sym.mp_sgd_mom_update(mx.sym.var("w"), mx.sym.var("g"), mx.sym.var("m"), mx.sym.var("w32"), lr=0.1)
    args, outs, _ = s.infer_type(w="float16")
    assert [np.dtype(t).name for t in args] == ["float16", "float16", "float32", "float32"]
    assert np.dtype(outs[0]).name == "float16"
    with pytest.raises(MXNetError, match=r"'w32'.*float32 vs float16"):
        s.infer_type(w="float16", w32="float16")
    op = get_op("mp_sgd_mom_update")
    with pytest.raises(MXNetError, match=r"mp_sgd_mom_update: input 'weight32' must be float32, got float16"):
        op.infer_type(op.parse({"lr": 0.1}), ["float16", None, None, "float16"])
    with pytest.raises(MXNetError, match=r"mp_sgd_mom_update: dtype mismatch for input 'grad': expected "
                                         r"float16, got float32"):
        op.infer_type(op.parse({"lr": 0.1}), ["float16", "float32", None, None])
    w = nd.zeros(3, dtype=np.float16)
    with pytest.raises(MXNetError, match=r"mp_sgd_update.*shape mismatch.*'weight32'.*\(3,\).*\(4,\)"):
        nd.mp_sgd_update(w, w, nd.zeros(4), lr=0.1)
    with pytest.raises(MXNetError, match="mp_sgd_update.*lr"):
        nd.mp_sgd_update(w, w, nd.zeros(3))


# ------------------------------------------------------------------------------------------
# multi_* and preloaded_multi_*: equal to the single op per weight
# ------------------------------------------------------------------------------------------

SHAPES = [(3, 4), (5,), (2, 2, 3)]
LRS, WDS = [0.1, 0.05, 0.2], [0.0, 0.01, 0.03]


def _groups(momentum: bool, mp: bool):
    """Per weight: numpy (w, g, mom or None, w32 or None)."""
    out = []
    for s in SHAPES:
        w32 = _rand(s)
        w = w32.astype(np.float16) if mp else w32
        out.append((w, _rand(s).astype(w.dtype), _rand(s) if momentum else None, w32 if mp else None))
    return out


def _nd(x):
    return None if x is None else nd.array(x, dtype=x.dtype)


def _interleave(groups):
    return [a for grp in groups for a in grp if a is not None]


@pytest.mark.parametrize("momentum", [False, True])
@pytest.mark.parametrize("mp", [False, True])
@pytest.mark.parametrize("preloaded", [False, True])
def test_multi_sgd_family_equals_single_ops(momentum, mp, preloaded):
    data = _groups(momentum, mp)
    single = ("mp_" if mp else "") + ("sgd_mom_update" if momentum else "sgd_update")
    name = ("preloaded_" if preloaded else "") + "multi_" + ("mp_" if mp else "") + \
        ("sgd_mom_update" if momentum else "sgd_update")
    kw = dict(rescale_grad=0.9, clip_gradient=0.6, **({"momentum": 0.9} if momentum else {}))
    multi = [[_nd(x) for x in grp] for grp in data]
    weights = [grp[0] for grp in multi]
    inputs = _interleave(multi)
    if preloaded:
        inputs += [nd.array(LRS), nd.array(WDS)]
        res = getattr(nd, name)(*inputs, num_weights=3, out=weights, **kw)
    else:
        res = getattr(nd, name)(*inputs, num_weights=3, lrs=LRS, wds=WDS, out=weights, **kw)
    assert [r is w for r, w in zip(res, weights)] == [True] * 3
    for grp, lr, wd, got in zip(data, LRS, WDS, multi):
        one = [_nd(x) for x in grp]
        getattr(nd, single)(*[a for a in one if a is not None], lr=lr, wd=wd, out=one[0], **kw)
        for a, b in zip(got, one):
            if a is not None:
                np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
        w, g, mom, w32 = _f64(*[x if x is not None else 0 for x in grp])
        base = w32 if mp else w
        want = ref_sgd_mom(base, g, mom, lr, wd, 0.9, 0.9, 0.6)[0] if momentum else \
            ref_sgd(base, g, lr, wd, 0.9, 0.6)
        np.testing.assert_allclose(got[0].asnumpy(), want, **(F16 if mp else F32))


def test_multi_sgd_errors_and_inference():
    w, g = nd.zeros(3), nd.zeros(3)
    with pytest.raises(MXNetError, match=r"multi_sgd_update: the number of learning rates lrs \(1\) does not "
                                         r"match num_weights: expected 2, got 1"):
        nd.multi_sgd_update(w, g, w, g, lrs=[0.1], wds=[0, 0], num_weights=2)
    with pytest.raises(MXNetError, match=r"multi_sgd_update: missing input .grad_1."):
        nd.multi_sgd_update(w, g, w, lrs=[0.1, 0.1], wds=[0, 0], num_weights=2)
    with pytest.raises(MXNetError, match=r"preloaded_multi_sgd_update: shape mismatch for input 'lrs': "
                                         r"expected \(2,\), got \(3,\)"):
        nd.preloaded_multi_sgd_update(w, g, w, g, nd.zeros(3), nd.zeros(2), num_weights=2)
    with pytest.raises(MXNetError, match=r"multi_sgd_update.*shape mismatch.*'grad_1'"):
        nd.multi_sgd_update(w, g, w, nd.zeros(4), lrs=[0.1, 0.1], wds=[0, 0], num_weights=2)
    v = [mx.sym.var(n) for n in ("w0", "g0", "m0", "w320", "w1", "g1", "m1", "w321", "lrs", "wds")]
    s = mx.sym.preloaded_multi_mp_sgd_mom_update(*v, num_weights=2, momentum=0.9)
    assert s.list_arguments()[-2:] == ["lrs", "wds"]
    arg_shapes, out_shapes, _ = s.infer_shape(w0=(2, 3), g1=(4,))
    assert out_shapes == [(2, 3), (4,)] and arg_shapes[-2:] == [(2,), (2,)]
    arg_types, out_types, _ = s.infer_type(w0="float16", w1="float16")
    assert [np.dtype(t).name for t in arg_types] == ["float16", "float16", "float32", "float32"] * 2 + \
        ["float32", "float32"]
    assert [np.dtype(t).name for t in out_types] == ["float16", "float16"]


def test_multi_sgd_in_a_symbol_graph():
    names = ["w0", "g0", "m0", "w1", "g1", "m1"]
    s = mx.sym.multi_sgd_mom_update(*[mx.sym.var(n) for n in names], lrs=(0.1, 0.2), wds=(0.0, 0.1),
                                    momentum=0.9, num_weights=2)
    vals = {n: _rand((2, 3)) for n in names}
    ex = s.bind(mx.cpu(), {n: nd.array(v) for n, v in vals.items()})
    outs = ex.forward()
    for i, (lr, wd) in enumerate([(0.1, 0.0), (0.2, 0.1)]):
        want, _ = ref_sgd_mom(*_f64(vals[f"w{i}"], vals[f"g{i}"], vals[f"m{i}"]), lr, wd, 0.9)
        np.testing.assert_allclose(outs[i].asnumpy(), want, **F32)


# ------------------------------------------------------------------------------------------
# multi_sum_sq, multi_lars, reset_arrays
# ------------------------------------------------------------------------------------------

def test_multi_sum_sq():
    arrays = [_rand(s) for s in SHAPES] + [_rand(4).astype(np.float16)]
    got = nd.multi_sum_sq(*[_nd(a) for a in arrays], num_arrays=len(arrays))
    assert got.dtype == np.float32 and got.shape == (len(arrays),)
    np.testing.assert_allclose(got.asnumpy(), [np.sum(a.astype(np.float64) ** 2) for a in arrays], rtol=1e-6)
    assert mx.sym.multi_sum_sq(mx.sym.var("a"), mx.sym.var("b"), num_arrays=2).infer_shape(
        a=(2, 3), b=(4,))[1] == [(2,)]


def test_multi_lars():
    lrs = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    w2 = np.array([4.0, 0.0, 9.0, 1.0], np.float32)
    g2 = np.array([1.0, 1.0, 0.0, 16.0], np.float32)
    wds = np.array([0.01, 0.0, 0.1, 0.5], np.float32)
    out = nd.zeros(4)
    nd.multi_lars(nd.array(lrs), nd.array(w2), nd.array(g2), nd.array(wds), eta=0.01, eps=1e-3,
                  rescale_grad=0.5, out=out)
    wn, gn = np.sqrt(w2.astype(np.float64)), np.sqrt(g2.astype(np.float64))
    want = np.where((wn > 0) & (gn > 0), lrs * 0.01 * wn / (gn * 0.5 + wds * wn + 1e-3), lrs)
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-6)
    with pytest.raises(MXNetError, match="multi_lars.*eta"):
        nd.multi_lars(nd.array(lrs), nd.array(w2), nd.array(g2), nd.array(wds), eps=0.0)
    with pytest.raises(MXNetError, match=r"multi_lars: input 'wds' must be float32, got float64"):
        nd.multi_lars(nd.array(lrs), nd.array(w2), nd.array(g2), nd.array(wds, dtype=np.float64), eta=1, eps=0)


def test_reset_arrays():
    arrays = [nd.array(_rand(s)) for s in SHAPES]
    nd.reset_arrays(*arrays, num_arrays=3)
    assert all(not a.asnumpy().any() for a in arrays)


# ------------------------------------------------------------------------------------------
# LAMB
# ------------------------------------------------------------------------------------------

def ref_lamb(w, g, m, v, t, lr, wd, b1=0.9, b2=0.999, eps=1e-6, rescale=1.0, clip=-1.0, bias=True,
             lower=-1.0, upper=-1.0):
    """MXNet's LAMB (phase 1 then phase 2): (new weight, mean, var)."""
    gc = _clip(rescale * g, clip)
    m = b1 * m + (1 - b1) * gc
    v = b2 * v + (1 - b2) * gc * gc
    mh, vh = (m / (1 - b1 ** t), v / (1 - b2 ** t)) if bias else (m, v)
    d = mh / (np.sqrt(vh) + eps) + wd * w
    r1, r2 = np.linalg.norm(w), np.linalg.norm(d)
    if lower >= 0:
        r1 = max(r1, lower)
    if upper >= 0:
        r1 = min(r1, upper)
    ratio = 1.0 if r1 == 0 or r2 == 0 else r1 / r2
    return w - lr * ratio * d, m, v


def test_mp_lamb_phases_fp16():
    w32, m0, v0 = _rand(10), _rand(10), np.abs(_rand(10))
    g = _rand(10).astype(np.float16)
    weight, master = nd.array(w32, dtype=np.float16), nd.array(w32)
    mean, var = nd.array(m0), nd.array(v0)
    d = nd.mp_lamb_update_phase1(weight, nd.array(g, dtype=np.float16), mean, var, master, t=3, wd=0.01,
                                 rescale_grad=0.5, clip_gradient=0.4)
    assert d.dtype == np.float32
    r1, r2 = nd.norm(master).reshape((1,)), nd.norm(d).reshape((1,))
    nd.mp_lamb_update_phase2(weight, d, r1, r2, master, lr=0.01, lower_bound=0.1, upper_bound=5.0, out=weight)
    want_w, want_m, want_v = ref_lamb(*_f64(w32, g, m0, v0), 3, 0.01, 0.01, rescale=0.5, clip=0.4,
                                      lower=0.1, upper=5.0)
    np.testing.assert_allclose(mean.asnumpy(), want_m, **F32)
    np.testing.assert_allclose(var.asnumpy(), want_v, **F32)
    np.testing.assert_allclose(master.asnumpy(), want_w, **F32)
    np.testing.assert_array_equal(weight.asnumpy(), master.asnumpy().astype(np.float16))


@pytest.mark.parametrize("mp", [False, True])
def test_multi_lamb_equals_reference(mp):
    data = [(_rand(s), _rand(s), _rand(s), np.abs(_rand(s))) for s in SHAPES]
    steps, lrs, wds = (1, 4, 2), [0.01, 0.02, 0.03], [0.0, 0.1, 0.01]
    arrays = []
    for w, g, m, v in data:
        low = np.float16 if mp else np.float32
        arrays.append([nd.array(w, dtype=low), nd.array(g, dtype=low), nd.array(m), nd.array(v)]
                      + ([nd.array(w)] if mp else []))
    weights = [a[0] for a in arrays]
    op = nd._internal._multi_mp_lamb_update if mp else nd._internal._multi_lamb_update
    op(*[x for a in arrays for x in a], out=weights, num_tensors=3, step_count=steps, learning_rates=lrs,
       wds=wds, rescale_grad=0.8, clip_gradient=0.5, bias_correction=True)
    for (w, g, m, v), arr, t, lr, wd in zip(data, arrays, steps, lrs, wds):
        g = g.astype(np.float16) if mp else g
        want_w, want_m, want_v = ref_lamb(*_f64(w, g, m, v), t, lr, wd, rescale=0.8, clip=0.5)
        np.testing.assert_allclose(arr[2].asnumpy(), want_m, **F32)
        np.testing.assert_allclose(arr[3].asnumpy(), want_v, **F32)
        np.testing.assert_allclose(arr[0].asnumpy(), want_w, **(F16 if mp else F32))
        if mp:
            np.testing.assert_allclose(arr[4].asnumpy(), want_w, **F32)


# ------------------------------------------------------------------------------------------
# AdamW (rescale_grad as an input)
# ------------------------------------------------------------------------------------------

def ref_adamw(w, g, m, v, lr, wd, eta, rescale, b1=0.9, b2=0.999, eps=1e-8, clip=-1.0):
    gc = _clip(rescale * g, clip)
    m = b1 * m + (1 - b1) * gc
    v = b2 * v + (1 - b2) * gc * gc
    return w - eta * (lr * m / (np.sqrt(v) + eps) + wd * w), m, v


def test_mp_adamw_update_and_skip():
    w32, m0, v0, g = _rand(6), _rand(6), np.abs(_rand(6)), _rand(6).astype(np.float16)
    weight, master, mean, var = nd.array(w32, dtype=np.float16), nd.array(w32), nd.array(m0), nd.array(v0)
    nd.mp_adamw_update(weight, nd.array(g, dtype=np.float16), mean, var, master, nd.array([0.5]), lr=0.01,
                       wd=0.1, eta=0.9, clip_gradient=0.3, out=weight)
    want = ref_adamw(*_f64(w32, g, m0, v0), 0.01, 0.1, 0.9, 0.5, clip=0.3)
    for got, exp in zip((master, mean, var), want):
        np.testing.assert_allclose(got.asnumpy(), exp, **F32)
    np.testing.assert_array_equal(weight.asnumpy(), master.asnumpy().astype(np.float16))
    before = [a.asnumpy().copy() for a in (weight, master, mean, var)]
    for bad in (np.nan, np.inf, 0.0):   # MXNet skips the update
        nd.mp_adamw_update(weight, nd.array(g, dtype=np.float16), mean, var, master, nd.array([bad]), lr=0.01,
                           eta=1.0, out=weight)
        for a, b in zip((weight, master, mean, var), before):
            np.testing.assert_array_equal(a.asnumpy(), b)


@pytest.mark.parametrize("mp", [False, True])
def test_multi_adamw(mp):
    data = [(_rand(s), _rand(s), _rand(s), np.abs(_rand(s))) for s in SHAPES]
    lrs, wds, etas = [0.01, 0.02, 0.03], [0.0, 0.1, 0.01], [1.0, 0.5, 2.0]
    low = np.float16 if mp else np.float32
    arrays = [[nd.array(w, dtype=low), nd.array(g, dtype=low), nd.array(m), nd.array(v)]
              + ([nd.array(w)] if mp else []) for w, g, m, v in data]
    weights = [a[0] for a in arrays]
    op = nd._internal._multi_mp_adamw_update if mp else nd._internal._multi_adamw_update
    op(*[x for a in arrays for x in a], nd.array([0.7]), out=weights, num_weights=3, lrs=lrs, wds=wds,
       etas=etas)
    for (w, g, m, v), arr, lr, wd, eta in zip(data, arrays, lrs, wds, etas):
        g = g.astype(low)
        want = ref_adamw(*_f64(w, g, m, v), lr, wd, eta, 0.7)
        np.testing.assert_allclose(arr[2].asnumpy(), want[1], **F32)
        np.testing.assert_allclose(arr[3].asnumpy(), want[2], **F32)
        np.testing.assert_allclose(arr[0].asnumpy(), want[0], **(F16 if mp else F32))


# ------------------------------------------------------------------------------------------
# mx.nd.contrib wrappers (lists in, a number or an array as rescale_grad)
# ------------------------------------------------------------------------------------------

def test_contrib_wrappers_equal_the_ops():
    data = [(_rand(s), _rand(s), _rand(s), np.abs(_rand(s))) for s in SHAPES[:2]]

    def arrays():
        return [[nd.array(x) for x in grp] for grp in data]
    a, b = arrays(), arrays()
    lists = [list(x) for x in zip(*a)]
    nd.contrib.multi_adamw_update(*lists, 0.5, lrs=[0.1, 0.2], wds=[0.0, 0.1], etas=[1.0, 1.0], out=lists[0])
    for grp, lr, wd in zip(b, [0.1, 0.2], [0.0, 0.1]):
        nd.contrib.adamw_update(*grp, nd.array([0.5]), lr=lr, eta=1.0, wd=wd, out=grp[0])
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            np.testing.assert_allclose(u.asnumpy(), v.asnumpy(), **F32)
    w0 = b[0][0].asnumpy().copy()
    kept = nd.contrib.adamw_update(*b[0], float("nan"), lr=0.1, eta=1.0)
    np.testing.assert_array_equal(kept.asnumpy(), w0)
    c = arrays()
    cl = [list(x) for x in zip(*c)]
    nd.contrib.multi_lamb_update(*cl, step_count=[1, 1], lrs=[0.1, 0.2], wds=[0.0, 0.1], out=cl[0])
    for (w, g, m, v), got, lr, wd in zip(data, cl[0], [0.1, 0.2], [0.0, 0.1]):
        np.testing.assert_allclose(got.asnumpy(), ref_lamb(*_f64(w, g, m, v), 1, lr, wd)[0], **F32)
    with pytest.raises(MXNetError, match="one entry per weight"):
        nd.contrib.multi_lamb_update(cl[0], cl[1][:1], cl[2], cl[3], step_count=[1, 1], lrs=[0.1, 0.2],
                                     wds=[0.0, 0.1])


@pytest.mark.parametrize("size", [7, 1 << 17])
def test_eager_multi_update_in_place_equals_reference_compute(size):
    """`mx.nd.multi_sgd_mom_update(..., out=weights)` (the compiled in-place kernels) equals the
    op's numpy reference (out= other arrays), states included."""
    vals = [[_rand(size) for _ in range(3)] for _ in range(2)]
    fast = [[nd.array(v) for v in grp] for grp in vals]
    ref = [[nd.array(v) for v in grp] for grp in vals]
    kw = dict(lrs=[0.1, 0.2], wds=[0.01, 0.0], momentum=0.9, rescale_grad=0.5, clip_gradient=0.4, num_weights=2)
    res = nd.multi_sgd_mom_update(*[a for grp in fast for a in grp], out=[grp[0] for grp in fast], **kw)
    assert res[0] is fast[0][0] and res[1] is fast[1][0]
    outs = [nd.zeros(size), nd.zeros(size)]
    nd.multi_sgd_mom_update(*[a for grp in ref for a in grp], out=outs, **kw)
    for grp_f, grp_r, o in zip(fast, ref, outs):
        np.testing.assert_allclose(grp_f[0].asnumpy(), o.asnumpy(), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(grp_f[2].asnumpy(), grp_r[2].asnumpy(), rtol=1e-6, atol=1e-7)
    for grp, lr, wd, o in zip(vals, [0.1, 0.2], [0.01, 0.0], outs):
        want, _ = ref_sgd_mom(*_f64(*grp), lr, wd, 0.9, 0.5, 0.4)
        np.testing.assert_allclose(o.asnumpy(), want, **F32)


def test_mp_ops_and_multi_sum_sq_in_symbol_graphs():
    """A float16 mp_sgd_mom_update node and multi_sum_sq run in bound graphs with MXNet's types."""
    s = mx.sym.mp_sgd_mom_update(mx.sym.var("w"), mx.sym.var("g"), mx.sym.var("m"), mx.sym.var("w32"), lr=0.1,
                                 momentum=0.9, wd=0.01)
    w32, g = _rand(6), _rand(6).astype(np.float16)
    args = {"w": nd.array(w32, dtype=np.float16), "g": nd.array(g, dtype=np.float16), "m": nd.zeros(6),
            "w32": nd.array(w32)}
    out = s.bind(mx.cpu(), args).forward()[0]
    assert out.dtype == np.float16
    want, _ = ref_sgd_mom(*_f64(w32, g, np.zeros(6)), 0.1, 0.01, 0.9)
    np.testing.assert_allclose(out.asnumpy(), want, **F16)
    arrays = [_rand((2, 3)), _rand(4)]
    s2 = mx.sym.multi_sum_sq(mx.sym.var("a"), mx.sym.var("b"), num_arrays=2)
    got = s2.bind(mx.cpu(), {"a": nd.array(arrays[0]), "b": nd.array(arrays[1])}).forward()[0]
    np.testing.assert_allclose(got.asnumpy(), [np.sum(a.astype(np.float64) ** 2) for a in arrays], rtol=1e-6)


def test_mp_adamw_update_errors_name_the_op():
    w = nd.zeros(3, dtype=np.float16)
    with pytest.raises(MXNetError, match=r"_mp_adamw_update: shape mismatch for input 'var'"):
        nd.mp_adamw_update(w, w, nd.zeros(3), nd.zeros(4), nd.zeros(3), nd.array([1.0]), lr=0.1, eta=1.0)
    with pytest.raises(MXNetError, match=r"_mp_adamw_update: input 'mean' must be float32, got float16"):
        nd.mp_adamw_update(w, w, w, nd.zeros(3), nd.zeros(3), nd.array([1.0]), lr=0.1, eta=1.0)
    with pytest.raises(MXNetError, match=r"_mp_adamw_update.*rescale_grad"):
        nd.mp_adamw_update(w, w, nd.zeros(3), nd.zeros(3), nd.zeros(3), nd.zeros(2), lr=0.1, eta=1.0)
