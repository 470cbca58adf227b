"""Accuracy and special values of the generated vector math (symjit/codegen/llvm/vecmath.py).

References are numpy/scipy in float64 (glibc-quality, <= 1 ulp). float32 results are
measured in ulps of the float32-rounded reference (pass: <= 4 ulp); float64 results by
relative error (pass: <= 1e-14), with absolute tolerances next to the zeros of lgamma and
digamma, where their algorithms (like any shift-and-subtract scheme) are accurate in
absolute terms only.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest
import scipy.special as sp

from symjit.codegen.llvm import ElementwiseSpec, compile_elementwise, jit
from symjit.codegen.llvm.elementwise import elementwise_module
from symjit.ops import scalar as S

N = 20000

#: op -> (numpy/scipy reference, sampling range (lo, hi, "log" for log-uniform magnitude))
UNARY_CASES = {
    "exp": (np.exp, (-100.0, 100.0)),
    "expm1": (np.expm1, (-10.0, 10.0)),
    "log": (np.log, (1e-30, 1e30, "log")),
    "log1p": (np.log1p, (-0.999, 50.0)),
    "log2": (np.log2, (1e-30, 1e30, "log")),
    "log10": (np.log10, (1e-30, 1e30, "log")),
    "sin": (np.sin, (-200.0, 200.0)),
    "cos": (np.cos, (-200.0, 200.0)),
    "tan": (np.tan, (-10.0, 10.0)),
    "asin": (np.arcsin, (-1.0, 1.0)),
    "acos": (np.arccos, (-1.0, 1.0)),
    "atan": (np.arctan, (-100.0, 100.0)),
    "sinh": (np.sinh, (-80.0, 80.0)),
    "cosh": (np.cosh, (-80.0, 80.0)),
    "tanh": (np.tanh, (-12.0, 12.0)),
    "asinh": (np.arcsinh, (-1e6, 1e6)),
    "acosh": (np.arccosh, (1.0, 1e6)),
    "atanh": (np.arctanh, (-1.0, 1.0)),
    "erf": (sp.erf, (-7.0, 7.0)),
    "erfinv": (sp.erfinv, (-1.0, 1.0)),
    "lgamma": (sp.gammaln, (-30.0, 60.0)),
    "tgamma": (sp.gamma, (-30.0, 35.0)),
    "digamma": (sp.digamma, (-30.0, 60.0)),
    "cbrt": (np.cbrt, (-1e12, 1e12)),
}

#: absolute tolerance (float64) for functions with zeros inside the sampled range
ABS_TOL64 = {"lgamma": 1e-14, "digamma": 2e-14, "sin": 1e-15, "cos": 1e-15, "tan": 1e-15, "erfinv": 0.0}


def _kernel(op: str, dtype: str, n: int, arity: int = 1):
    e = S.call(op, *[S.Input(i) for i in range(arity)])
    return compile_elementwise(ElementwiseSpec((e,), (dtype,) * arity, ((n,),) * arity, dtype, (dtype,), (n,)))


def _sample(rng, spec, n):
    lo, hi, *mode = spec
    if mode:
        return np.exp(rng.uniform(np.log(lo), np.log(hi), n)) * rng.choice([1.0], n)
    return rng.uniform(lo, hi, n)


def _ulps32(y32: np.ndarray, ref64: np.ndarray) -> np.ndarray:
    """Error of float32 results in ulps of the float32-rounded reference (finite refs only)."""
    r32 = ref64.astype(np.float32)
    ulp = np.spacing(np.abs(r32)).astype(np.float64)
    return np.abs(y32.astype(np.float64) - ref64) / ulp


def _seed(op: str) -> int:
    """A per-op seed that is the same in every process (str hashes are salted per process)."""
    return zlib.crc32(op.encode())


def test_sinh_cosh_float32_large_arguments_within_4_ulp():
    """Past |x| = 10 sinh/cosh are e**|x|/2; squaring a float32 e**(|x|/2) doubled its error
    (4.08 ulp at 75.544075), so float32 evaluates that branch in double."""
    x = np.concatenate([np.linspace(10.0, 89.4, 400_001), [75.544075]]).astype(np.float32)
    x = np.concatenate([x, -x])
    for op, ref_fn in (("sinh", np.sinh), ("cosh", np.cosh)):
        ref = ref_fn(x.astype(np.float64))
        ok = np.abs(ref) < 3.4e38
        err = _ulps32(_kernel(op, "float32", len(x))(x)[ok], ref[ok])
        assert err.max() <= 4.0, f"{op}: {err.max():.2f} ulp at x={x[ok][int(np.argmax(err))]!r}"


@pytest.mark.parametrize("op", sorted(UNARY_CASES))
def test_unary_float32_within_4_ulp(op):
    ref_fn, rng_spec = UNARY_CASES[op]
    rng = np.random.default_rng(_seed(op))
    x = _sample(rng, rng_spec, N).astype(np.float32)
    with np.errstate(all="ignore"):
        ref = ref_fn(x.astype(np.float64))
    y = _kernel(op, "float32", N)(x)
    ok = np.isfinite(ref) & (np.abs(ref) < 3.4e38) & (np.abs(ref) > 1.2e-38)
    assert ok.sum() > N // 2
    err = _ulps32(y[ok], ref[ok])
    worst = int(np.argmax(err))
    assert err.max() <= 4.0, f"{op}: {err.max():.2f} ulp at x={x[ok][worst]!r}"


@pytest.mark.parametrize("op", sorted(UNARY_CASES))
def test_unary_float64_relative_error(op):
    ref_fn, rng_spec = UNARY_CASES[op]
    rng = np.random.default_rng(_seed(op) + 1)
    x = _sample(rng, rng_spec, N)
    with np.errstate(all="ignore"):
        ref = ref_fn(x)
    y = _kernel(op, "float64", N)(x)
    ok = np.isfinite(ref)
    if op == "digamma":   # scipy itself loses accuracy next to the poles (see the mpmath test below)
        ok &= (x > 0) | (np.abs(x - np.round(x)) > 0.02)
    err = np.abs(y[ok] - ref[ok])
    tol = 1e-14 * np.abs(ref[ok]) + ABS_TOL64.get(op, 0.0)
    bad = err > tol
    assert not bad.any(), f"{op}: x={x[ok][bad][:3]!r} got {y[ok][bad][:3]!r} want {ref[ok][bad][:3]!r}"


def test_digamma_next_to_poles_against_mpmath():
    # reference values computed with mpmath.digamma at 40 digits
    x = np.array([-29.99303278, -9.99301957, -2.0001, -0.5000001, -1e-07])
    ref = np.array([-140.08880492988905, -140.8835968196054, 10000.922494819815, 0.03648908049835279,
                    9999999.42278417])
    y = _kernel("digamma", "float64", len(x))(x)
    np.testing.assert_allclose(y, ref, rtol=1e-13)


EDGE = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-300, -1e-300,
        1e-20, 1e-8, 0.5, 1.0, -1.0, 2.0, -2.0, 3.0, -3.5, 10.0, 88.0, 89.0, 100.0, 700.0, 709.7, 710.0, 745.0,
        746.0, -700.0, -745.0, -746.0, -1e5, 1e5, 1e300, -1e300, 1.7976931348623157e308]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(UNARY_CASES))
def test_unary_special_values_match_numpy(op, dtype):
    ref_fn, _ = UNARY_CASES[op]
    with np.errstate(all="ignore"):
        x = np.array(EDGE, dtype=dtype)
        ref = np.asarray(ref_fn(x.astype(np.float64))).astype(dtype)
    y = _kernel(op, dtype, len(x))(x)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref), err_msg=f"{op} nan pattern, x={x}")
    inf = np.isinf(ref)
    np.testing.assert_array_equal(y[inf], ref[inf], err_msg=f"{op} infinities")
    fin = np.isfinite(ref)
    tol = (1e-5 if dtype == "float32" else 1e-13) * np.abs(ref[fin]) + 1e-300
    if op in ("sin", "cos", "tan"):     # arguments beyond 2**20*pi/2 lose accuracy (see vecmath)
        fin &= np.abs(x) < 1e6
        tol = (1e-5 if dtype == "float32" else 1e-13) * np.abs(ref[fin]) + 1e-300
    assert np.all(np.abs(y[fin] - ref[fin]) <= tol), f"{op}: x={x[fin]}, got {y[fin]}, want {ref[fin]}"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_exp_log_tanh_saturation(dtype):
    x = np.array([-1e4, -800.0, 1e4, 800.0, np.nan, -np.inf, np.inf], dtype=dtype)
    e = _kernel("exp", dtype, len(x))(x)
    np.testing.assert_array_equal(e[:4], [0.0, 0.0, np.inf, np.inf])
    assert np.isnan(e[4]) and e[5] == 0.0 and e[6] == np.inf
    t = _kernel("tanh", dtype, len(x))(x)
    np.testing.assert_array_equal(t[[0, 1, 2, 3, 5, 6]], [-1, -1, 1, 1, -1, 1])
    lg = _kernel("log", dtype, 4)(np.array([0.0, -0.0, -1.0, np.inf], dtype=dtype))
    assert lg[0] == -np.inf and lg[1] == -np.inf and np.isnan(lg[2]) and lg[3] == np.inf
    # exp of very negative arguments is denormal, not flushed to zero
    tiny = _kernel("exp", dtype, 1)(np.array([-740.0 if dtype == "float64" else -100.0], dtype=dtype))
    assert 0 < tiny[0] < np.finfo(dtype).tiny


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sigmoid_has_no_nan_at_the_tails(dtype):
    x = S.Input(0)
    e = 1.0 / (1.0 + S.call("exp", -x))
    a = np.array([-1e30, -1000.0, -90.0, 0.0, 90.0, 1000.0, 1e30, np.inf, -np.inf], dtype=dtype)
    k = compile_elementwise(ElementwiseSpec((e,), (dtype,), (a.shape,), dtype, (dtype,), a.shape))
    with np.errstate(over="ignore"):   # float32: exp(90) overflows to inf, so sigmoid(-90) is exactly 0
        left = 1 / (1 + np.exp(np.array(90.0, dtype)))
    np.testing.assert_array_equal(k(a), np.array([0, 0, left, 0.5, 1, 1, 1, 1, 0], dtype))


BINARY_CASES = {
    "pow": (np.power, (0.0, 20.0), (-30.0, 30.0)),
    "atan2": (np.arctan2, (-10.0, 10.0), (-10.0, 10.0)),
    "hypot": (np.hypot, (-1e3, 1e3), (-1e3, 1e3)),
    "mod": (np.mod, (-100.0, 100.0), (-7.0, 7.0)),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(BINARY_CASES))
def test_binary_math(op, dtype):
    ref_fn, ra, rb = BINARY_CASES[op]
    rng = np.random.default_rng(7)
    a = rng.uniform(*ra, N)
    b = rng.uniform(*rb, N)
    if op == "pow":                       # include negative bases with integer exponents
        a[: N // 4] = -a[: N // 4]
        b[: N // 4] = np.round(b[: N // 4])
    a, b = a.astype(dtype), b.astype(dtype)
    with np.errstate(all="ignore"):
        ref = ref_fn(a.astype(np.float64), b.astype(np.float64))
    y = _kernel(op, dtype, N, 2)(a, b)
    ok = np.isfinite(ref) & (np.abs(ref) < (3e38 if dtype == "float32" else 1e308)) & \
        (np.abs(ref) > (1.2e-38 if dtype == "float32" else 1e-300))
    if dtype == "float32":
        err = _ulps32(y[ok], ref[ok])
        assert err.max() <= 4.0, f"{op}: {err.max()} ulp at {a[ok][np.argmax(err)]}, {b[ok][np.argmax(err)]}"
    else:
        rel = np.abs(y[ok] - ref[ok]) / np.abs(ref[ok])
        assert rel.max() <= 1e-14, f"{op}: rel {rel.max()}"


POW_EDGE = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, np.inf, -np.inf, np.nan, 3.0, -3.0, 1e300, 1e-300]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pow_special_cases_match_c99(dtype):
    with np.errstate(over="ignore"):   # 1e300 becomes inf in float32
        a, b = np.meshgrid(np.array(POW_EDGE, dtype=dtype), np.array(POW_EDGE, dtype=dtype))
    a, b = a.ravel(), b.ravel()
    with np.errstate(all="ignore"):
        ref = np.power(a, b)
    y = _kernel("pow", dtype, len(a), 2)(a, b)
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=0, equal_nan=True,
                               err_msg="pow special cases")
    np.testing.assert_array_equal(np.signbit(y[ref == 0]), np.signbit(ref[ref == 0]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_atan2_hypot_mod_special_cases(dtype):
    vals = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.5], dtype=dtype)
    a, b = (v.ravel() for v in np.meshgrid(vals, vals))
    with np.errstate(all="ignore"):
        refs = {"atan2": np.arctan2(a, b), "hypot": np.hypot(a, b),
                "mod": np.where(b == 0, 0, np.mod(a, np.where(b == 0, 1, b)))}
    for op, ref in refs.items():
        y = _kernel(op, dtype, len(a), 2)(a, b)
        np.testing.assert_allclose(y, ref.astype(dtype), rtol=1e-6, equal_nan=True,
                                   err_msg=f"{op}({a}, {b})")
        if op == "atan2":
            np.testing.assert_array_equal(np.signbit(y), np.signbit(ref))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_round_half_away_and_rint(dtype):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49, -0.49, 2.51, 1e20, -1e20, 0.0, 3.0,
                  np.nextafter(np.array(0.5, dtype), np.array(0, dtype)).item(), np.inf, -np.inf], dtype=dtype)
    r = _kernel("round", dtype, len(x))(x)
    expect = np.sign(x) * np.floor(np.abs(x.astype(np.float64)) + 0.5)
    expect[13] = 0.0                       # largest float below 1/2 rounds to 0 (x + 0.5 would round up)
    np.testing.assert_array_equal(r, expect.astype(dtype))
    np.testing.assert_array_equal(_kernel("rint", dtype, len(x))(x), np.rint(x))
    n = np.array([np.nan], dtype=dtype)
    assert np.isnan(_kernel("round", dtype, 1)(n)[0])


@pytest.mark.parametrize("op", ["exp", "tanh", "erf"])
def test_float32_loop_is_vectorized_without_libm_calls(op):
    n = 1024
    spec = ElementwiseSpec((S.call(op, S.Input(0)),), ("float32",), ((n,),), "float32", ("float32",), (n,))
    ir, name = elementwise_module(spec)
    opt = jit.optimized_ir(ir)
    assert "x float>" in opt, "no vector float operations in the optimised kernel"
    calls = [ln for ln in opt.splitlines() if " call " in ln and "@llvm." not in ln]
    assert not calls, f"non-intrinsic calls remain: {calls[:3]}"
    for libm in ("@expf", "@tanhf", "@erff", "@exp(", "@tanh(", "@erf("):
        assert libm not in opt


def test_float64_math_loops_vectorize_too():
    n = 1024
    e = S.call("log", S.Input(0)) + S.call("erf", S.Input(0)) + S.call("sin", S.Input(0))
    spec = ElementwiseSpec((e,), ("float64",), ((n,),), "float64", ("float64",), (n,))
    opt = jit.optimized_ir(elementwise_module(spec)[0])
    assert "x double>" in opt
    assert not [ln for ln in opt.splitlines() if " call " in ln and "@llvm." not in ln]


@pytest.mark.parametrize("cpu,vec", [("znver3", "<8 x float>"), ("haswell", "<8 x float>")])
def test_avx2_targets_vectorize_float32_activations_8_wide(cpu, vec):
    """On AVX2-only CPUs (no AVX-512 integer ops) the math still vectorizes 8 lanes wide."""
    from symjit.codegen.llvm.target import make_target
    target = make_target(cpu)
    n = 1024
    x = S.Input(0)
    e = 1.0 / (1.0 + S.call("exp", -x)) * S.call("tanh", x) + S.call("log1p", x) + S.call("erf", x)
    spec = ElementwiseSpec((e,), ("float32",), ((n,),), "float32", ("float32",), (n,))
    opt = jit.optimized_ir(elementwise_module(spec, target=target)[0], target=target)
    assert vec in opt
    assert not [ln for ln in opt.splitlines() if " call " in ln and "@llvm." not in ln]
    assert "zmm" not in jit.assembly(elementwise_module(spec, target=target)[0], target=target)


def test_exp_scaling_uses_vscalef_only_on_avx512_targets():
    """exp's 2**k scaling is llvm.ldexp (one vscalefps per vector) where the target has
    AVX-512; on AVX2 targets (explicit feature strings without it) the generic exponent-field
    code is emitted, never an ldexp that would become a libm call per element."""
    from symjit.codegen.llvm.target import host_target, make_target, target_feature_set
    n = 1024
    x = S.Input(0)
    spec = ElementwiseSpec((1.0 / (1.0 + S.call("exp", -x)),), ("float32",), ((n,),), "float32", ("float32",), (n,))
    avx2 = make_target("haswell", "+avx,+avx2,+fma,+sse4.2,+popcnt,+f16c,+bmi,+bmi2")
    ir2 = elementwise_module(spec, target=avx2)[0]
    assert "llvm.ldexp" not in ir2
    assert "ldexp" not in jit.assembly(ir2, target=avx2)
    if "+avx512f" in target_feature_set(host_target()):
        ir = elementwise_module(spec)[0]
        assert "llvm.ldexp" in ir and "vscalefps" in jit.assembly(ir)
