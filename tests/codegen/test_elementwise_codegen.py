"""Fused elementwise kernels (symjit/codegen/llvm/elementwise.py) against the numpy reference.

Every primitive and dtype is compared with `scalar.evaluate`; exactly computed operations
must match bit for bit (up to -0 == 0), transcendental ones within float tolerances (their
ulp accuracy is tested in test_vecmath.py). Broadcast patterns, sub-ranges [begin, end)
(as the runtime's parallel-for calls kernels), multi-output groups, in-place outputs and
the object-code cache path are covered too.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

from symjit.base import MXNetError
from symjit.codegen.llvm import (ElementwiseSpec, compile_elementwise, compile_to_object, elementwise_module,
                                 load_object, target_description)
from symjit.codegen.llvm.elementwise import simplify_index_space
from symjit.codegen.llvm.jit import ElementwiseKernel
from symjit.ops import scalar as S

FLOATS = ["float32", "float64"]
INTS = ["int32", "int64", "int8", "uint8"]
A, B, C = S.Input(0), S.Input(1), S.Input(2)

#: primitives computed exactly (bitwise comparison) in float dtypes
EXACT_FLOAT = {"neg", "abs", "sign", "sqrt", "floor", "ceil", "rint", "round", "trunc", "not", "add", "sub",
               "mul", "div", "max", "min", "lt", "le", "gt", "ge", "eq", "ne", "and", "or", "xor"}
#: unary primitives whose domain is restricted (sample inside it)
DOMAIN = {"acosh": (1.0, 50.0), "asin": (-1.0, 1.0), "acos": (-1.0, 1.0), "atanh": (-0.99, 0.99),
          "erfinv": (-0.99, 0.99), "log": (0.01, 50.0), "log2": (0.01, 50.0), "log10": (0.01, 50.0),
          "log1p": (-0.9, 50.0), "sqrt": (0.0, 50.0), "lgamma": (0.1, 30.0), "tgamma": (0.1, 20.0),
          "digamma": (0.1, 30.0), "exp": (-50.0, 50.0), "expm1": (-50.0, 50.0), "sinh": (-50.0, 50.0),
          "cosh": (-50.0, 50.0)}


def _compile(exprs, in_arrays, compute, out_dtypes=None, out_shape=None):
    exprs = exprs if isinstance(exprs, (list, tuple)) else [exprs]
    out_shape = out_shape if out_shape is not None else np.broadcast_shapes(*[a.shape for a in in_arrays])
    out_dtypes = out_dtypes or [_ref_dtype(e, compute, in_arrays) for e in exprs]
    spec = ElementwiseSpec(tuple(exprs), tuple(a.dtype.name for a in in_arrays),
                           tuple(a.shape for a in in_arrays), compute, tuple(out_dtypes), out_shape)
    return compile_elementwise(spec)


def _ref_dtype(e, compute, arrays):
    """The dtype the reference produces for `e` (the compute dtype, a cast's target, ...)."""
    probe = [a.reshape(-1)[:1] for a in arrays]
    return S.evaluate(e, probe, compute).dtype.name


def _check(expr, arrays, compute, exact=True, rtol=None):
    k = _compile(expr, arrays, compute)
    got = k(*arrays)
    want = np.broadcast_to(S.evaluate(expr, arrays, compute), got.shape)
    assert got.dtype == want.dtype
    if exact:
        np.testing.assert_array_equal(got, want, err_msg=S.to_text(expr))
    else:
        # absolute slack of a few ulp of 1 for values next to a function's zero (digamma, lgamma)
        atol = 4 * np.finfo(got.dtype).eps if got.dtype.kind == "f" else 0
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=S.to_text(expr))
    return got


def _float_inputs(rng, dtype, n, lo=-5.0, hi=5.0):
    x = rng.uniform(lo, hi, n)
    x[:4] = [0.0, -0.0, lo, hi]
    return x.astype(dtype)


# --------------------------------------------------------------------------------------
# Every primitive, every dtype
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", sorted(S.UNARY))
def test_unary_primitive_float(op, dtype):
    rng = np.random.default_rng(abs(hash((op, dtype))) % 2**32)
    lo, hi = DOMAIN.get(op, (-5.0, 5.0))
    x = _float_inputs(rng, dtype, 1000, lo, hi)
    if op in ("round", "rint"):
        x[4:12] = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -3.5], dtype)
    exact = op in EXACT_FLOAT
    _check(S.call(op, A), [x], dtype, exact=exact, rtol=None if exact else (2e-6 if dtype == "float32" else 1e-13))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", sorted(S.BINARY))
def test_binary_primitive_float(op, dtype):
    rng = np.random.default_rng(abs(hash((op, dtype))) % 2**32)
    a = _float_inputs(rng, dtype, 1000)
    b = _float_inputs(rng, dtype, 1000)
    b[10:20] = a[10:20]                     # equal operands for the comparisons
    b[20:25] = 0.0                          # division / modulo by zero
    a[30:35] = np.nan
    if op == "pow":
        a = np.abs(a)
    exact = op in EXACT_FLOAT
    _check(S.call(op, A, B), [a, b], dtype, exact=exact,
           rtol=None if exact else (2e-6 if dtype == "float32" else 1e-13))


INT_UNARY = ["neg", "abs", "sign", "floor", "ceil", "rint", "round", "trunc", "not"]
INT_BINARY = ["add", "sub", "mul", "div", "mod", "max", "min", "lt", "le", "gt", "ge", "eq", "ne", "and", "or",
              "xor", "pow"]


def _int_inputs(rng, dtype, n):
    info = np.iinfo(dtype)
    x = rng.integers(max(info.min, -1000), min(info.max, 1000), n, endpoint=True).astype(dtype)
    x[:4] = [0, 1, info.max, info.min]
    return x


def _check_group(exprs, arrays, compute):
    """Compile all expressions as one multi-output kernel; each output equals the reference."""
    k = _compile(exprs, arrays, compute)
    outs = k(*arrays)
    outs = outs if isinstance(outs, list) else [outs]
    for got, e in zip(outs, exprs):
        want = np.broadcast_to(S.evaluate(e, arrays, compute), got.shape)
        assert got.dtype == want.dtype, S.to_text(e)
        np.testing.assert_array_equal(got, want, err_msg=S.to_text(e))


@pytest.mark.parametrize("dtype", INTS)
def test_unary_primitives_int(dtype):
    rng = np.random.default_rng(3)
    x = _int_inputs(rng, dtype, 500)
    if dtype == "int64":
        x[2:4] = [2**53, -2**53]   # rounding ops are the identity; numpy's float64 round trip is exact to 2**53
    _check_group([S.call(op, A) for op in INT_UNARY], [x], dtype)


@pytest.mark.parametrize("dtype", INTS)
def test_binary_primitives_int(dtype):
    rng = np.random.default_rng(4)
    a = _int_inputs(rng, dtype, 500)
    b = _int_inputs(rng, dtype, 500)
    b[5:10] = 0                             # x / 0 == 0 and x mod 0 == 0
    info = np.iinfo(dtype)
    if info.min < 0:
        # the reference's division takes abs(), which wraps at INT_MIN (abs(-128) == -128 in int8),
        # so INT_MIN is kept only as the dividend of INT_MIN / -1 (see the dedicated test below)
        b[b == info.min] = 3
        a[a == info.min] = -5
        b[10:15] = -1
        a[10] = info.min
    e = np.abs(b % 7).astype(dtype)         # numpy refuses negative integer exponents
    ops = [op for op in INT_BINARY if op != "pow"]
    _check_group([S.call(op, A, B) for op in ops] + [S.call("pow", A, C)], [a, b, e], dtype)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_integer_division_truncates_and_never_traps(dtype):
    info = np.iinfo(dtype)
    a = np.array([7, -7, 7, -7, info.min, info.min, 5, info.min, 11], dtype=dtype)
    b = np.array([2, 2, -2, -2, -1, 1, 0, 3, info.min], dtype=dtype)
    k = _compile(A / B, [a, b], dtype)
    expect = [3, -3, -3, 3, info.min, info.min, 0, -(-int(info.min) // 3), 0]
    np.testing.assert_array_equal(k(a, b), np.array(expect, dtype=dtype))
    m = _compile(S.call("mod", A, B), [a, b], dtype)(a, b)
    np.testing.assert_array_equal(m[:7], np.array([1, 1, -1, -1, 0, 0, 0], dtype=dtype))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("op", ["exp", "sqrt", "log1p", "sin", "tanh"])
def test_transcendental_of_integers_goes_through_float64(op, dtype):
    x = np.arange(0, 13, dtype=dtype)      # results stay away from integer boundaries (tanh(19) ~ 1)
    _check(S.call(op, A), [x], dtype)


def test_bool_compute_dtype_logic():
    a = np.array([0, 1, 1, 0], dtype=bool)
    b = np.array([0, 0, 1, 1], dtype=bool)
    for op in ("and", "or", "xor", "eq", "ne", "lt", "max", "min", "add", "mul"):
        _check(S.call(op, A, B), [a, b], "bool")
    _check(S.call("not", A), [a], "bool")
    _check(S.select(A, B, S.call("not", B)), [a, b], "bool")


# --------------------------------------------------------------------------------------
# Conversions and casts (C semantics as scalar._c_cast)
# --------------------------------------------------------------------------------------

CAST_VALUES = [0.0, -0.0, 1.5, -1.5, 2.7, -2.7, 255.9, 256.0, 300.2, -3.7, -129.0, 127.9, 1e10, -1e10,
               np.nan, np.inf, -np.inf, 3e9, -3e9]


CAST_TARGETS = ["uint8", "int8", "int32", "int64", "bool", "float32", "float64"]


@pytest.mark.parametrize("src", FLOATS)
def test_cast_from_float_has_c_semantics(src):
    with np.errstate(over="ignore"):
        x = np.array(CAST_VALUES, dtype=src)
    _check_group([S.cast(A, to) for to in CAST_TARGETS], [x], src)
    got = _compile(S.cast(A, "uint8"), [x], src)(x)
    assert list(got[[2, 6, 7, 8, 9, 14, 15]]) == [1, 255, 0, 44, 253, 0, 0]   # wraps through int64; nan, inf -> 0


@pytest.mark.parametrize("src", INTS + ["bool"])
def test_cast_between_integer_types(src):
    rng = np.random.default_rng(5)
    x = rng.integers(-300, 300, 64).astype(src) if src != "bool" else rng.integers(0, 2, 64).astype(bool)
    _check_group([S.cast(A, to) for to in CAST_TARGETS], [x], src if src != "bool" else "int32")


@pytest.mark.parametrize("in_dtype", ["int32", "uint8", "int8", "bool", "float64", "int64"])
def test_inputs_convert_to_the_compute_dtype(in_dtype):
    rng = np.random.default_rng(6)
    x = (rng.integers(0, 2, 100).astype(bool) if in_dtype == "bool"
         else rng.uniform(-100, 100, 100).astype(in_dtype))
    y = rng.uniform(-1, 1, 100).astype(np.float32)
    _check(A * B + 1.0, [x, y], "float32")


def test_float_input_to_int_compute_follows_numpy_astype():
    x = np.array([1.9, -1.9, 1e20, np.nan, 300.7, -3.7], dtype=np.float64)
    for compute in ("int32", "int64", "int8", "uint8"):
        with np.errstate(invalid="ignore"):     # the reference warns about nan -> int
            _check(A + 0.0, [x], compute)


def test_integer_constants_take_the_compute_dtype():
    x = np.arange(0, 256, dtype=np.uint8)
    _check(A + 200.0, [x], "uint8")                       # wraps modulo 256
    y = np.arange(-5, 5, dtype=np.int64)
    _check(A * 3000000000.0 - 1.5, [y], "int64")           # constants convert like numpy's astype


def test_mixed_dtype_binary_after_cast():
    x = np.linspace(-3, 3, 50).astype(np.float32)
    _check(S.cast(A, "int32") + A, [x], "float32")
    _check(S.select(A > 0.0, S.cast(A, "int32"), A), [x], "float32")


# --------------------------------------------------------------------------------------
# Index spaces: broadcasting, sub-ranges, multiple outputs, in-place
# --------------------------------------------------------------------------------------

BROADCASTS = [
    ((1000,), (1000,)),              # same shape: one flat loop
    ((7, 33), (1, 33)),              # row
    ((7, 33), (7, 1)),               # column
    ((7, 33), ()),                   # scalar
    ((5, 1, 9), (5, 4, 9)),          # 3-D middle axis
    ((2, 3, 4, 5), (3, 1, 5)),       # several broadcast dims, fewer dims
    ((6, 1), (1, 8)),                # outer product
    ((1, 1, 17), (4, 3, 1)),
    ((), ()),                        # scalar output
]


@pytest.mark.parametrize("sa,sb", BROADCASTS)
def test_broadcast_patterns(sa, sb):
    rng = np.random.default_rng(7)
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    _check(A * B + S.call("exp", B) - A, [a, b], "float32", exact=False, rtol=1e-6)
    _check(S.maximum(A, B) - B, [a, b], "float32")


def test_simplify_index_space_merges_and_drops_dims():
    assert simplify_index_space((4, 5, 6), [(4, 5, 6), (4, 5, 6)]) == ([120], [[1], [1]])
    assert simplify_index_space((4, 5, 6), [(4, 5, 6), (1, 1, 6)]) == ([20, 6], [[6, 1], [0, 1]])
    assert simplify_index_space((4, 1, 6), [(4, 1, 6), (4, 1, 1)]) == ([4, 6], [[6, 1], [1, 0]])
    assert simplify_index_space((), [()]) == ([], [[]])


@pytest.mark.parametrize("sa,sb", [((7, 33), (1, 33)), ((7, 33), (7, 1)), ((5, 1, 9), (5, 4, 9)), ((500,), (500,))])
def test_sub_ranges_write_exactly_their_elements(sa, sb):
    rng = np.random.default_rng(8)
    a = rng.standard_normal(sa).astype(np.float64)
    b = rng.standard_normal(sb).astype(np.float64)
    k = _compile(A - B * 2.0, [a, b], "float64")
    want = a - b * 2.0
    n = want.size
    for begin, end in [(0, n), (3, 40), (35, 36), (n - 5, n), (10, 10), (31, 100)]:
        end = min(end, n)
        out = np.full(want.shape, 12345.0)
        k.call_range(begin, end, k.pack_args([a, b], [out]))
        flat = out.ravel()
        np.testing.assert_array_equal(flat[begin:end], want.ravel()[begin:end])
        assert np.all(flat[:begin] == 12345.0) and np.all(flat[end:] == 12345.0)


def test_multi_output_group_shares_subexpressions():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((16, 40)).astype(np.float32)
    b = rng.standard_normal((1, 40)).astype(np.float32)
    t = S.call("tanh", A * B)
    exprs = [t, t * t + B, S.cast(A > B, "uint8")]
    k = _compile(exprs, [a, b], "float32", out_dtypes=["float32", "float64", "uint8"])
    o1, o2, o3 = k(a, b)
    assert (o1.dtype, o2.dtype, o3.dtype) == (np.float32, np.float64, np.uint8)
    for got, e in zip((o1, o2, o3), exprs):
        want = S.evaluate(e, [a, b], "float32")
        np.testing.assert_allclose(got, np.broadcast_to(want, got.shape).astype(got.dtype), rtol=2e-6, atol=1e-6)


def test_activation_expression_relu_sigmoid_tanh():
    rng = np.random.default_rng(10)
    a, b, c = (rng.standard_normal(10000).astype(np.float32) * 4 for _ in range(3))
    relu = S.select(A * B + C > 0.0, A * B + C, 0.0)
    sigmoid = 1.0 / (1.0 + S.call("exp", -A))
    e = relu * sigmoid - S.call("tanh", C)
    got = _compile(e, [a, b, c], "float32")(a, b, c)
    x64 = [v.astype(np.float64) for v in (a, b, c)]
    want = np.maximum(x64[0] * x64[1] + x64[2], 0) / (1 + np.exp(-x64[0])) - np.tanh(x64[2])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_in_place_output_aliasing_an_input():
    a = np.linspace(-4, 4, 1001).astype(np.float32)
    want = np.tanh(a.astype(np.float64)) * 2 + a
    k = _compile(S.call("tanh", A) * 2.0 + A, [a], "float32")
    k(a, out=a)                              # output buffer is the input buffer
    np.testing.assert_allclose(a, want, rtol=1e-6, atol=1e-7)


def test_two_threads_over_halves_match_one_call():
    rng = np.random.default_rng(11)
    a, b = (rng.standard_normal(1 << 18).astype(np.float32) for _ in range(2))
    k = _compile(S.call("exp", A) * B, [a, b], "float32")
    one = k(a, b)
    out = np.empty_like(a)
    args = k.pack_args([a, b], [out])
    half = a.size // 2
    ts = [threading.Thread(target=k.call_range, args=(lo, hi, args)) for lo, hi in ((0, half), (half, a.size))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    np.testing.assert_array_equal(out, one)


# --------------------------------------------------------------------------------------
# Object code: cacheable bytes, loading, names
# --------------------------------------------------------------------------------------

def test_object_bytes_round_trip_and_unique_names():
    x = np.linspace(0, 1, 100)
    spec = ElementwiseSpec((S.call("log1p", A) * 3.0,), ("float64",), ((100,),), "float64", ("float64",), (100,))
    other = ElementwiseSpec((S.call("log1p", A) * 4.0,), ("float64",), ((100,),), "float64", ("float64",), (100,))
    ir, name = elementwise_module(spec)
    assert name != elementwise_module(other)[1]
    obj = compile_to_object(ir)
    assert obj[:4] == b"\x7fELF"
    code = load_object(obj, [name])
    k = ElementwiseKernel(code.addresses[name], ["float64"], [(100,)], ["float64"], (100,))
    np.testing.assert_allclose(k(x), np.log1p(x) * 3.0, rtol=1e-15)
    assert load_object(obj, [name]).addresses[name] == code.addresses[name]   # loading twice reuses
    assert "znver" in target_description() or len(target_description()) > 10


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------

def test_errors_name_the_problem():
    with pytest.raises(MXNetError, match="float16"):
        ElementwiseSpec((A,), ("float16",), ((3,),), "float32", ("float32",), (3,))
    with pytest.raises(MXNetError, match="does not broadcast"):
        ElementwiseSpec((A,), ("float32",), ((4,),), "float32", ("float32",), (3,))
    with pytest.raises(MXNetError, match="reads input 1"):
        ElementwiseSpec((A + B,), ("float32",), ((3,),), "float32", ("float32",), (3,))
    k = _compile(A + 1.0, [np.zeros(3, np.float32)], "float32")
    with pytest.raises(MXNetError, match="expected dtype float32"):
        k(np.zeros(3, np.float64))
    with pytest.raises(MXNetError, match=r"expected shape \(3,\)"):
        k(np.zeros(4, np.float32))
    with pytest.raises(MXNetError, match="C-contiguous"):
        k(np.zeros(6, np.float32)[::2])
    with pytest.raises(MXNetError, match="expected 1 inputs"):
        k()
