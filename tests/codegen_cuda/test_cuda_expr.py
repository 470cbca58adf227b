"""The CUDA lowering of every scalar primitive (codegen/cuda/expr.py, prelude.py), per compute
dtype, against the numpy reference (`scalar.evaluate`).

Each test compiles ONE kernel whose outputs are all the primitives applied to the same inputs
(special values included: +-0, +-inf, NaN, extremes of integer types), runs it through the
host emulation of the generated source and compares element by element.

Tolerances (stated): float32 results within rtol 1e-5, float64 within rtol 1e-12 (the
emulation uses the host C library; CUDA's own math functions are within their documented
ulp bounds, which this test cannot check without a GPU); NaN positions and infinities exact;
integer results exact. Known, deliberate differences from numpy's quirks are excluded and
handled where the cases are built (`_TRANSCENDENTAL`, INT_MIN divisors, int64 rounding
beyond 2**53). float32 and int32 run by default, the other dtypes are `slow`.
"""
from __future__ import annotations

import numpy as np
import pytest

from cuda_util import emulate_spec, needs_cxx
from symjit.codegen.cuda.expr import convert, literal
from symjit.codegen.llvm.elementwise import ElementwiseSpec
from symjit.ops import scalar as S

_F_SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 3.0, 1e-30, 1e30, -7.25, 100.0]

#: functions computed through float64 (numpy: float16 for int8/uint8 data; a transcendental
#: result truncated to an integer also amplifies a last-ulp difference between libraries)
_TRANSCENDENTAL = {"exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "cbrt", "sin", "cos", "tan", "asin",
                   "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfinv", "lgamma",
                   "tgamma", "digamma", "hypot", "atan2"}


def _values(dt: str, seed: int, n: int = 64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dt).kind == "f":
        return np.concatenate([_F_SPECIAL, rng.uniform(-4, 4, n - len(_F_SPECIAL))]).astype(dt)
    info = np.iinfo(dt)
    special = [x for x in (0, 1, -1, 2, -2, 3, 7, -7, info.max, info.max - 1, info.min + 1)
               if info.min <= x <= info.max]
    rest = rng.integers(max(info.min + 1, -100), min(info.max, 100), n - len(special))
    return np.concatenate([np.array(special, dtype=np.int64), rest]).astype(dt)


def _cases(dt: str):
    """(name, expression) of every primitive for compute dtype dt, over Input(0..2)."""
    x, y, small = S.Input(0), S.Input(1), S.Input(2)
    is_int = np.dtype(dt).kind != "f"
    out = []
    for op in S.UNARY:
        if is_int and op in _TRANSCENDENTAL and dt in ("int8", "uint8"):
            continue
        out.append((op, S.Expr(op, (x,))))
    for op in S.BINARY:
        if is_int and op in _TRANSCENDENTAL and dt in ("int8", "uint8"):
            continue
        out.append((op, S.Expr(op, (x, small if op == "pow" and is_int else y))))
    out.append(("select", S.select(x > y, x, y * 2.0)))
    out.append(("nested", S.call("max", x * y - 1.0, S.Const(0.5)) + S.select(S.logical_not(x), y, x)))
    for to in ("float32", "float64", "int32", "int64", "int8", "uint8", "bool"):
        out.append((f"cast_{to}", S.cast(x, to)))
        out.append((f"cast_{to}_back", S.cast(S.cast(x, to), dt) + y))
    return out


@needs_cxx
@pytest.mark.parametrize("dt", ["float32", "int32", *(pytest.param(d, marks=pytest.mark.slow)
                                                      for d in ("float64", "int64", "int8", "uint8"))])
def test_every_primitive_matches_the_reference(dt, tmp_path):
    a, b = _values(dt, 1), _values(dt, 2)[::-1].copy()
    c = (np.arange(a.size) % 9).astype(dt)          # small non-negative exponents for integer pow
    if np.dtype(dt).kind != "f":                     # numpy's reference divides INT_MIN wrongly (abs overflow)
        b[b == np.iinfo(dt).min] = 5
    cases = _cases(dt)
    with np.errstate(all="ignore"):
        want = [S.evaluate(e, [a, b, c], dt) for _, e in cases]
    spec = ElementwiseSpec(tuple(e for _, e in cases), (dt,) * 3, (a.shape,) * 3, dt,
                           tuple(w.dtype.name for w in want), a.shape)
    got = emulate_spec(spec, [a, b, c], tmp_path, f"prim_{dt}")
    rtol = 1e-5 if dt == "float32" else 1e-12
    for (name, _), g, w in zip(cases, got, want):
        assert g.dtype == w.dtype, name
        if np.dtype(dt).kind != "f" and name in ("rint", "round") and dt == "int64":
            keep = np.abs(a.astype(np.float64)) < 2 ** 53   # numpy rounds int64 through float64
            g, w = g[keep], w[keep]
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-30 if w.dtype == np.float32 else 1e-300,
                                       equal_nan=True, err_msg=f"{dt} {name}")
            assert np.array_equal(np.isinf(g), np.isinf(w)), f"{dt} {name}: infinities differ"
        elif name in _TRANSCENDENTAL:
            assert np.abs(g.astype(np.int64) - w.astype(np.int64)).max() <= 1, f"{dt} {name}"
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{dt} {name}")


@needs_cxx
def test_broadcast_index_spaces_and_multiple_outputs(tmp_path):
    """Inputs broadcast along different dims (stride-0 reads, unravelled offsets) and a scalar."""
    shapes = [(2, 3, 4, 5), (1, 3, 1, 5), (2, 1, 4, 1), (1,), (4, 1)]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    x = [S.Input(i) for i in range(5)]
    exprs = (x[0] * x[1] + x[2], S.call("tanh", x[1] - x[3]) * x[4], S.select(x[0] > x[2], x[3], x[4]))
    spec = ElementwiseSpec(exprs, ("float32",) * 5, tuple(shapes), "float32", ("float32",) * 3, (2, 3, 4, 5))
    got = emulate_spec(spec, arrays, tmp_path, "bcast")
    for g, e in zip(got, exprs):
        want = np.broadcast_to(S.evaluate(e, arrays, "float32"), (2, 3, 4, 5))
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-7)


def test_literals_round_trip_and_conversions():
    for v in (0.1, 1.0, -2.5, 3.4028234663852886e38, 1e-45, 123456789.0):
        text = literal(v, "float32")
        assert text.endswith("f") and np.float32(float(text[:-1])) == np.float32(v), text
        assert float(literal(v, "float64")) == v
    assert literal(float("nan"), "float32") == "NAN" and "INFINITY" in literal(float("-inf"), "float64")
    assert literal(-(2 ** 63), "int64") == "((int64_t)(-9223372036854775807LL - 1))"
    assert literal(2.7, "int32") == "((int32_t)2)"           # numpy astype truncates
    assert convert("x", "float32", "int64", c_cast=True) == "((int64_t)sj_f2i64_c((double)(x)))"
    assert convert("x", "int32", "bool") == "((uint8_t)((x) != 0))"
    assert convert("x", "float32", "float32") == "x"
