"""Shape-generic elementwise loop nests (elementwise.generic_nest): one compiled nest per
expression, dtypes, rank and innermost-stride pattern, extents and strides read from a table.

Differential: random shapes and broadcast patterns against numpy (exact for exact primitives),
against the shape-specialised kernel bit for bit, over sub-ranges [begin, end); and the module
of several shapes holds one generic nest that serves them all.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import symjit as mx
from symjit.codegen.llvm import ElementwiseSpec, compile_ir, elementwise
from symjit.codegen.llvm.elementwise import (ModuleBuilder, emit_elementwise, generic_kernel_name, generic_nest,
                                             simplify_index_space)
from symjit.codegen.llvm.jit import ElementwiseKernel
from symjit.ops import scalar as S

A, B, C = S.Input(0), S.Input(1), S.Input(2)


def _spec(exprs, arrays, compute, out_shape, out_dtypes=None):
    return ElementwiseSpec(tuple(exprs), tuple(a.dtype.name for a in arrays), tuple(a.shape for a in arrays),
                           compute, tuple(out_dtypes or [compute] * len(exprs)), tuple(out_shape))


def _kernel(spec, names=("k",)):
    """A kernel compiled from a module of its own (fresh symbol names: no process cache)."""
    mb = ModuleBuilder()
    name = emit_elementwise(mb, spec, f"sj_test_{names[0]}")
    code = compile_ir(mb.render(), [name])
    return code, ElementwiseKernel(code.addresses[name], spec.in_dtypes, spec.in_shapes, spec.out_dtypes,
                                   spec.out_shape, name=name)


def _random_case(rng):
    """A random output shape of rank 2-5 with a long or short innermost dim, and two inputs
    broadcast along random dims (possibly with fewer dims)."""
    rank = int(rng.integers(2, 6))
    shape = [int(rng.integers(1, 5)) for _ in range(rank)]
    shape[-1] = int(rng.choice([1, 3, 7, 8, 9, 31, 33, 64, 100, 257]))
    shape[int(rng.integers(0, rank))] = int(rng.integers(2, 9))
    ins = []
    for _ in range(2):
        s = [d if rng.random() < 0.6 else 1 for d in shape]
        drop = int(rng.integers(0, rank))
        ins.append(tuple(s[drop:]) if all(x == 1 for x in s[:drop]) else tuple(s))
    return tuple(shape), ins


@pytest.mark.parametrize("seed", range(40))
def test_random_shapes_match_numpy_and_the_specialised_kernel(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    shape, (sa, sb) = _random_case(rng)
    dtype = ["float32", "float64"][seed % 2]
    a = rng.standard_normal(sa).astype(dtype)
    b = rng.standard_normal(sb).astype(dtype)
    c = rng.standard_normal(shape).astype(dtype)
    exprs = (S.maximum(A * B + C, 0.0), S.call("exp", B) - C * A)
    spec = _spec(exprs, [a, b, c], dtype, shape)
    code, k = _kernel(spec, ("gen",))  # noqa: F841 - keeps the machine code alive
    got = k(a, b, c)
    np.testing.assert_array_equal(got[0], np.broadcast_to(np.maximum(a * b + c, np.asarray(0, dtype)), shape))
    monkeypatch.setattr(elementwise, "GENERIC_MIN_ROW", 1 << 60)    # the shape-specialised nest
    code_spec, k_spec = _kernel(spec, ("spec",))  # noqa: F841
    ref = k_spec(a, b, c)
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)
    # exp within a few ulp; the difference may cancel, so the slack is relative to the terms
    eps = np.finfo(dtype).eps
    want1 = np.broadcast_to(np.exp(b) - c * a, shape)
    scale = np.broadcast_to(np.exp(b) + np.abs(c * a), shape)
    assert np.all(np.abs(got[1] - want1) <= 8 * eps * scale)


@pytest.mark.parametrize("seed", range(6))
def test_sub_ranges_write_exactly_their_elements(seed):
    rng = np.random.default_rng(100 + seed)
    n_img, ch, plane = int(rng.integers(1, 4)), int(rng.integers(2, 20)), int(rng.integers(32, 300))
    x = rng.standard_normal((n_img, ch, plane)).astype(np.float32)
    s = rng.standard_normal((1, ch, 1)).astype(np.float32)
    spec = _spec((A * B + 1.5,), [x, s], "float32", x.shape)
    assert generic_nest(simplify_index_space(spec.out_shape, spec.in_shapes)[0])
    code, k = _kernel(spec)  # noqa: F841 - code holds the machine code alive
    want = (x * s + np.float32(1.5)).ravel()
    n = want.size
    for _ in range(12):
        begin = int(rng.integers(0, n))
        end = int(rng.integers(begin, n + 1))
        out = np.full(x.shape, 7.0, np.float32)
        k.call_range(begin, end, k.pack_args([x, s], [out]))
        flat = out.ravel()
        np.testing.assert_array_equal(flat[begin:end], want[begin:end])
        assert np.all(flat[:begin] == 7.0) and np.all(flat[end:] == 7.0)


def test_integer_and_mixed_dtypes():
    rng = np.random.default_rng(3)
    a = rng.integers(-100, 100, (3, 5, 40)).astype(np.int32)
    b = rng.integers(-100, 100, (5, 1)).astype(np.int64)
    spec = _spec((A * B - A,), [a, b], "int64", a.shape)
    code, k = _kernel(spec)  # noqa: F841 - code holds the machine code alive
    np.testing.assert_array_equal(k(a, b), a.astype(np.int64) * b - a)


def test_shapes_of_one_pattern_share_one_generic_nest():
    """Per-channel scale-shift-relu at several channel counts and plane sizes: one nest in the
    module, one small caller per shape, each computing its own shape."""
    rng = np.random.default_rng(5)
    mb = ModuleBuilder()
    cases, names = [], []
    expr = (S.maximum(A * B + C, 0.0),)
    for i, (ch, plane) in enumerate([(64, 3136), (96, 3136), (128, 784), (160, 196), (32, 49)]):
        x = rng.standard_normal((1, ch, plane)).astype(np.float32)
        s = rng.standard_normal((1, ch, 1)).astype(np.float32)
        t = rng.standard_normal((1, ch, 1)).astype(np.float32)
        spec = _spec(expr, [x, s, t], "float32", x.shape)
        names.append(emit_elementwise(mb, spec, f"sj_test_share{i}"))
        cases.append((spec, x, s, t))
    text = mb.render()
    generic = {generic_kernel_name(spec, simplify_index_space(spec.out_shape, spec.in_shapes)[1])
               for spec, *_ in cases}
    assert len(generic) == 1
    assert len(re.findall(r"^define internal void @sj_ewg_", text, re.M)) == 1
    code = compile_ir(text, names)
    for name, (spec, x, s, t) in zip(names, cases):
        k = ElementwiseKernel(code.addresses[name], spec.in_dtypes, spec.in_shapes, spec.out_dtypes,
                              spec.out_shape, name=name)
        np.testing.assert_array_equal(k(x, s, t), np.maximum(x * s + t, np.float32(0)))


def test_short_rows_keep_the_specialised_nest():
    assert not generic_nest([64, elementwise.GENERIC_MIN_ROW - 1])
    assert generic_nest([64, elementwise.GENERIC_MIN_ROW])
    assert not generic_nest([4096])


def test_graph_with_batchnorm_relu_of_several_widths_matches_numpy():
    """A compiled graph whose BatchNorm+relu layers have different channel counts computes what
    numpy computes; its module holds at most one elementwise nest (the layers' shared one, when
    they are not all fused into the convolutions) and no per-shape kernel."""
    rng = np.random.default_rng(11)
    data = mx.sym.Variable("data")
    h, params, ref = data, {}, None
    x = rng.standard_normal((2, 3, 12, 12)).astype(np.float32)
    ref = x
    for i, ch in enumerate([8, 16, 24]):
        w = (rng.standard_normal((ch, ref.shape[1], 1, 1)) * 0.3).astype(np.float32)
        h = mx.sym.Convolution(h, kernel=(1, 1), num_filter=ch, no_bias=True, name=f"c{i}")
        h = mx.sym.BatchNorm(h, fix_gamma=False, eps=1e-5, name=f"bn{i}")
        h = mx.sym.Activation(h, act_type="relu")
        g, be = rng.random(ch).astype(np.float32) + 0.5, rng.standard_normal(ch).astype(np.float32)
        mu, var = rng.standard_normal(ch).astype(np.float32), rng.random(ch).astype(np.float32) + 0.5
        params.update({f"c{i}_weight": mx.nd.array(w), f"bn{i}_gamma": mx.nd.array(g), f"bn{i}_beta": mx.nd.array(be),
                       f"bn{i}_moving_mean": mx.nd.array(mu), f"bn{i}_moving_var": mx.nd.array(var)})
        y = np.einsum("oi,nihw->nohw", w[:, :, 0, 0], ref)
        y = (y - mu[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5) * g[:, None, None] + be[:, None, None]
        ref = np.maximum(y, 0)
    model = mx.compile(h, {"data": x.shape}, params=params)
    ir = model.compiled.module.ir
    nests = re.findall(r"^define internal void @(sj_ewg_\w+)", ir, re.M)
    assert len(nests) <= 1 and not re.findall(r"^define void @sj_ew_", ir, re.M)
    out, = model(data=x)
    np.testing.assert_allclose(out, ref, rtol=2e-4, atol=2e-4)


def test_graph_of_per_channel_ops_of_several_shapes_shares_one_nest():
    """relu(x * s + b) on three inputs of different channel counts and row lengths, with
    per-channel s and b: three parallel calls of ONE nest, each with its own table."""
    rng = np.random.default_rng(12)
    shapes = [(2, 8, 40), (4, 24, 33), (3, 5, 100)]     # one rank (3) after simplification
    outs, feeds, want = [], {}, []
    for i, shp in enumerate(shapes):
        x = mx.sym.Variable(f"x{i}")
        s, b = mx.sym.Variable(f"s{i}"), mx.sym.Variable(f"b{i}")
        outs.append(mx.sym.relu(mx.sym.broadcast_add(mx.sym.broadcast_mul(x, s), b)))
        xv = rng.standard_normal(shp).astype(np.float32)
        sv = rng.standard_normal((1, shp[1], 1)).astype(np.float32)
        bv = rng.standard_normal((1, shp[1], 1)).astype(np.float32)
        feeds.update({f"x{i}": xv, f"s{i}": sv, f"b{i}": bv})
        want.append(np.maximum(xv * sv + bv, 0))
    model = mx.compile(mx.sym.Group(outs), {k: v.shape for k, v in feeds.items()})
    ir = model.compiled.module.ir
    assert len(re.findall(r"^define internal void @sj_ewg_", ir, re.M)) == 1
    assert len(re.findall(r"^@sj_dims_\w+ = private", ir, re.M)) == 3
    assert not re.findall(r"^define void @sj_ew_", ir, re.M)
    got = model(**feeds)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
