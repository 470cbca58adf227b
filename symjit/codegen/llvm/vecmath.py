"""Vectorizable math for generated kernels, emitted as textual LLVM IR.

Every scalar primitive of `symjit.ops.scalar` that is not a plain LLVM instruction or a
vectorizable intrinsic gets an implementation here, written with a tiny IR builder
(`FnBuilder`/`Val`) as *branch-free scalar code*: range reduction, polynomials (Taylor
series on small reduced ranges, Chebyshev series where a function has no good reduction)
and `select` for special cases. The functions are emitted as `internal alwaysinline`
LLVM functions (`@sjm_<name>_<f32|f64>`); once inlined into a kernel loop, the loop
vectorizer widens them (no calls to libm remain, so loops of exp/tanh vectorize).

Design choices (and why):
  * Only integer operations that AVX2 has for 64-bit lanes are used (add, sub, and, or,
    shl, lshr); float <-> integer conversions of exponents use the 2**52 "magic number"
    trick, so double code vectorizes without AVX-512.
  * float32 versions of exp, expm1, log, log2, log10, log1p, tanh, sinh, cosh, erf, round and
    rint are native float code (fast, 8 lanes per AVX2 register); the other float32 functions
    evaluate the float64 algorithm and round once (accurate to ~0.5 ulp, half the vector
    width). They are rare in models; the hot activations (sigmoid, tanh, GELU) are native.
  * Special values follow C99/numpy: exp(-large) = 0, exp(large) = inf, log(0) = -inf,
    log(negative) = nan, tanh(+-large) = +-1, nan propagates.

Accuracy (checked by tests/codegen/test_vecmath.py against numpy/scipy):
  float32: within 4 ulp of the correctly rounded result on the tested ranges (measured: <= 2.7
  ulp for the native functions, <= 0.5 ulp for those evaluated in float64);
  float64: relative error <= 1e-14 (measured: <= 7e-16 for all but tgamma, <= 2e-15).
  Exceptions: sin/cos/tan use a three-part Cody-Waite reduction, accurate for |x| < 2**20*pi/2
  (beyond, results stay bounded but lose accuracy); digamma next to its zero at 1.4616 and
  lgamma next to its zeros at negative arguments are accurate in absolute terms (<= ~1e-15);
  mod is exact while |a/b| < 2**52.
"""
from __future__ import annotations

import struct
from fractions import Fraction
from math import factorial
from typing import Callable

__all__ = ["FnBuilder", "Val", "TypeInfo", "FLOAT", "DOUBLE", "MATH_UNARY", "MATH_BINARY",
           "math_function_name", "emit_math_function", "float_literal", "is_math_primitive",
           "INTRINSIC_DECLS"]


# --------------------------------------------------------------------------------------
# A minimal SSA builder over textual LLVM IR
# --------------------------------------------------------------------------------------

def float_literal(value: float, ty: str) -> str:
    """An LLVM literal of `value` for type `ty` ('float' values are rounded to float32)."""
    v = float(value)
    if ty == "float":
        v = struct.unpack("<f", struct.pack("<f", v))[0]
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", v))[0]


class TypeInfo:
    """Bit layout of an IEEE float type and its same-width integer type."""

    def __init__(self, ty: str, ity: str, bits: int, mant: int, bias: int, suffix: str):
        self.ty, self.ity, self.bits, self.mant, self.bias, self.suffix = ty, ity, bits, mant, bias, suffix
        self.sign_mask = 1 << (bits - 1)
        self.exp_mask = ((1 << (bits - mant - 1)) - 1) << mant
        self.mant_mask = (1 << mant) - 1
        self.one_bits = bias << mant
        self.min_normal = 2.0 ** (1 - bias)


FLOAT = TypeInfo("float", "i32", 32, 23, 127, "f32")
DOUBLE = TypeInfo("double", "i64", 64, 52, 1023, "f64")
TINFO = {"float": FLOAT, "double": DOUBLE}

#: declarations of the intrinsics the builder may call (name -> declaration line)
INTRINSIC_DECLS: dict[str, str] = {}


def declare_intrinsic(name: str, ret: str, args: list[str]) -> str:
    """Record the declaration of LLVM intrinsic `name` (emitted by modules that use it); returns `name`."""
    INTRINSIC_DECLS.setdefault(name, f"declare {ret} @{name}({', '.join(args)})")
    return name


class FnBuilder:
    """Collects the instructions of one function body; hands out SSA names.

    `used_intrinsics` records the intrinsics referenced, so a module declares only those.
    """

    def __init__(self, prefix: str = "v", features: frozenset = frozenset()):
        self.lines: list[str] = []
        self._n = 0
        self._prefix = prefix
        self.used_intrinsics: set[str] = set()
        #: target features ("+avx512f", ...) the code may rely on beyond the generic ones
        self.features = features

    def fresh(self, hint: str = "") -> str:
        self._n += 1
        return f"%{self._prefix}{self._n}{hint}"

    def ins(self, ty: str, text: str) -> "Val":
        name = self.fresh()
        self.lines.append(f"  {name} = {text}")
        return Val(self, ty, name)

    def raw(self, line: str) -> None:
        self.lines.append(line)

    def const(self, value, ty: str) -> "Val":
        if ty in ("float", "double"):
            return Val(self, ty, float_literal(value, ty))
        if ty == "i1":
            return Val(self, ty, "true" if value else "false")
        return Val(self, ty, str(int(value)))

    def call_intr(self, base: str, ret: str, *args: "Val") -> "Val":
        if base in _CONV_INTRINSICS:
            suffix = f"{_sfx(ret)}.{_sfx(args[0].ty)}"
        elif base in _TWO_TYPE_INTRINSICS:
            suffix = f"{_sfx(args[0].ty)}.{_sfx(args[1].ty)}"
        else:
            suffix = _sfx(args[0].ty)
        name = declare_intrinsic(f"{base}.{suffix}", ret, [a.ty for a in args])
        self.used_intrinsics.add(name)
        return self.ins(ret, f"call {ret} @{name}(" + ", ".join(f"{a.ty} {a.ref}" for a in args) + ")")


_CONV_INTRINSICS = {"llvm.fptosi.sat", "llvm.fptoui.sat", "llvm.lrint"}
_TWO_TYPE_INTRINSICS = {"llvm.ldexp"}


def _sfx(ty: str) -> str:
    return {"float": "f32", "double": "f64"}.get(ty, ty)


def _is_float(ty: str) -> bool:
    return ty in ("float", "double")


class Val:
    """An SSA value (or literal) of LLVM type `ty`; Python operators emit instructions.

    Float values: + - * / and unary -, ordered comparisons < <= > >= give i1 values.
    Integer values: + - * & | ^ << and signed comparisons; `lshr` for logical shift.
    Python numbers on either side become constants of this value's type.
    """
    __slots__ = ("b", "ty", "ref")

    def __init__(self, b: FnBuilder, ty: str, ref: str):
        self.b, self.ty, self.ref = b, ty, ref

    def _c(self, o) -> "Val":
        return o if isinstance(o, Val) else self.b.const(o, self.ty)

    def _bin(self, fop: str, iop: str, o, rev: bool = False) -> "Val":
        o = self._c(o)
        a, c = (o, self) if rev else (self, o)
        op = fop if _is_float(self.ty) else iop
        return self.b.ins(self.ty, f"{op} {self.ty} {a.ref}, {c.ref}")

    def __add__(self, o): return self._bin("fadd", "add", o)
    def __radd__(self, o): return self._bin("fadd", "add", o, True)
    def __sub__(self, o): return self._bin("fsub", "sub", o)
    def __rsub__(self, o): return self._bin("fsub", "sub", o, True)
    def __mul__(self, o): return self._bin("fmul", "mul", o)
    def __rmul__(self, o): return self._bin("fmul", "mul", o, True)
    def __truediv__(self, o): return self._bin("fdiv", "sdiv", o)
    def __rtruediv__(self, o): return self._bin("fdiv", "sdiv", o, True)
    def __and__(self, o): return self._bin("and", "and", o)
    def __or__(self, o): return self._bin("or", "or", o)
    def __xor__(self, o): return self._bin("xor", "xor", o)
    def __lshift__(self, o): return self._bin("shl", "shl", o)

    def lshr(self, o) -> "Val":
        return self._bin("lshr", "lshr", o)

    def __neg__(self):
        if _is_float(self.ty):
            return self.b.ins(self.ty, f"fneg {self.ty} {self.ref}")
        return self.b.ins(self.ty, f"sub {self.ty} 0, {self.ref}")

    def __invert__(self):
        return self.b.ins(self.ty, f"xor {self.ty} {self.ref}, -1" if self.ty != "i1"
                          else f"xor i1 {self.ref}, true")

    def cmp(self, pred: str, o) -> "Val":
        o = self._c(o)
        kind = "fcmp" if _is_float(self.ty) else "icmp"
        return self.b.ins("i1", f"{kind} {pred} {self.ty} {self.ref}, {o.ref}")

    def __lt__(self, o): return self.cmp("olt" if _is_float(self.ty) else "slt", o)
    def __le__(self, o): return self.cmp("ole" if _is_float(self.ty) else "sle", o)
    def __gt__(self, o): return self.cmp("ogt" if _is_float(self.ty) else "sgt", o)
    def __ge__(self, o): return self.cmp("oge" if _is_float(self.ty) else "sge", o)
    def eq(self, o): return self.cmp("oeq" if _is_float(self.ty) else "eq", o)
    def ne(self, o): return self.cmp("une" if _is_float(self.ty) else "ne", o)

    def bitcast(self, ty: str) -> "Val":
        return self.b.ins(ty, f"bitcast {self.ty} {self.ref} to {ty}")

    def conv(self, op: str, ty: str) -> "Val":
        return self.b.ins(ty, f"{op} {self.ty} {self.ref} to {ty}")


# --------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------

def select(c: Val, a, b, ty: str | None = None) -> Val:
    """`c ? a : b`; a or b may be Python numbers (of the other's type, or of `ty` if both are)."""
    if ty is not None:
        a, b = (v if isinstance(v, Val) else c.b.const(v, ty) for v in (a, b))
    if not isinstance(a, Val):
        a = b._c(a)
    if not isinstance(b, Val):
        b = a._c(b)
    return c.b.ins(a.ty, f"select i1 {c.ref}, {a.ty} {a.ref}, {b.ty} {b.ref}")


def fma(a: Val, b, c) -> Val:
    """a*b + c, fused where the target has FMA (llvm.fmuladd)."""
    return a.b.call_intr("llvm.fmuladd", a.ty, a, a._c(b), a._c(c))


def fma_exact(a: Val, b, c) -> Val:
    """a*b + c with one rounding (llvm.fma): for exact product error terms (a*b - round(a*b))."""
    return a.b.call_intr("llvm.fma", a.ty, a, a._c(b), a._c(c))


def _u(name: str) -> Callable[[Val], Val]:
    return lambda x: x.b.call_intr(f"llvm.{name}", x.ty, x)


fabs, floor, ceil, trunc, rint, sqrt = (_u(n) for n in ("fabs", "floor", "ceil", "trunc", "rint", "sqrt"))


def copysign(mag: Val, sgn: Val) -> Val:
    return mag.b.call_intr("llvm.copysign", mag.ty, mag, sgn)


def minnum(a: Val, b) -> Val:
    """Minimum; a nan operand yields the other one (used for clamping before conversions)."""
    return a.b.call_intr("llvm.minnum", a.ty, a, a._c(b))


def maxnum(a: Val, b) -> Val:
    return a.b.call_intr("llvm.maxnum", a.ty, a, a._c(b))


def clamp(x: Val, lo: float, hi: float) -> Val:
    """Clamp to [lo, hi] with compare+select (one vmaxps/vminps each); nan stays nan, which the
    callers tolerate because they only use bit operations (no fptosi) on the clamped value."""
    x = select(x < lo, lo, x)
    return select(x > hi, hi, x)


def isnan(x: Val) -> Val:
    return x.cmp("uno", x)


def isinf(x: Val) -> Val:
    return fabs(x).eq(float("inf"))


def signbit(x: Val) -> Val:
    t = TINFO[x.ty]
    return x.bitcast(t.ity) < 0


def _horner(x: Val, coeffs: list[float]) -> Val:
    acc = x.b.const(coeffs[-1], x.ty)
    for c in reversed(coeffs[:-1]):
        acc = fma(acc, x, c)
    return acc


def poly(x: Val, coeffs: list[float]) -> Val:
    """c0 + c1*x + ... + cn*x**n with fused multiply-adds.

    float64 (and short polynomials): Horner's rule. float32: the even and odd coefficients as
    two independent Horner chains in x**2, joined by one final FMA (E(x**2) + x*O(x**2)), which
    halves the dependency chain, so the vectorized loops evaluating exp/tanh/log are not bound
    by FMA latency (benchmarks/bench_ew.py), at the accuracy of Horner's rule."""
    if x.ty == "double" or len(coeffs) < 5:
        return _horner(x, coeffs)
    x2 = x * x
    even, odd = _horner(x2, coeffs[0::2]), _horner(x2, coeffs[1::2])
    return fma(odd, x, even)


def _small_int_to_float(i: Val, t: TypeInfo) -> Val:
    """Exact int -> float for 0 <= i < 2**mant, with integer ops AVX2 has for every width."""
    magic = 2.0 ** t.mant
    return (i | (t.bias + t.mant) << t.mant).bitcast(t.ty) - magic


def _float_to_small_int(k: Val, t: TypeInfo) -> Val:
    """Exact integral float -> int for |k| < 2**(mant-1): add 1.5 * 2**mant and subtract bits."""
    magic = 1.5 * 2.0 ** t.mant
    mb = struct.unpack("<Q", struct.pack("<d", magic))[0] if t.bits == 64 else \
        struct.unpack("<I", struct.pack("<f", magic))[0]
    return (k + magic).bitcast(t.ity) - mb


def _pow2(k: Val, t: TypeInfo) -> Val:
    """2**k for an integer-valued float k within the normal exponent range."""
    ki = _float_to_small_int(k, t)
    return ((ki + t.bias) << t.mant).bitcast(t.ty)


def _scale_pow2(p: Val, k: Val, t: TypeInfo) -> Val:
    """p * 2**k for an integer-valued float k with |k| < 2**(mant-1), overflowing to inf and
    underflowing to subnormals/0 as the exact product rounds (k may exceed the exponent range
    by up to 2**(bits-mant-2): the scaling is split so 2**k never overflows on its own).

    With AVX-512 this is `llvm.ldexp`, one vscalefps/vscalefpd per vector (with AVX2 the same
    intrinsic would be a libm call per element: there, two exponent-field multiplies)."""
    if "+avx512f" in p.b.features:
        return p.b.call_intr("llvm.ldexp", p.ty, p, _float_to_small_int(k, t).conv("trunc", "i32")
                             if t.bits == 64 else _float_to_small_int(k, t))
    k1 = floor(k * 0.5)
    return p * _pow2(k1, t) * _pow2(k - k1, t)


def _taylor(fn: Callable[[int], Fraction], n: int) -> list[float]:
    return [float(fn(i)) for i in range(n)]


# constants (double hi/lo splits have trailing zero bits so products with small ints are exact)
LN2_HI_D, LN2_LO_D = 0.6931471803691238, 1.9082149292705877e-10
LN2_HI_F, LN2_LO_F = 0.693359375, -2.1219444005469057e-4
LOG2E = 1.4426950408889634
LOG10E = 0.4342944819032518
LOG10_2_HI_D, LOG10_2_LO_D = 0.30102999566361177, 3.694239077158931e-13
LOG10_2_HI_F, LOG10_2_LO_F = 0.30078125, 2.487456639811952e-4
PI, PI_LO = 3.141592653589793, 1.2246467991473532e-16
PIO2, PIO2_LO = 1.5707963267948966, 6.123233995736766e-17
PIO2_1, PIO2_2, PIO2_3 = 1.5707963267341256, 6.077100506303966e-11, 2.0222662487111665e-21
TWO_OVER_PI = 0.6366197723675814
SQRTPI_2 = 0.886226925452758
TWO_SQRTPI = 1.1283791670955126
HALF_LOG_2PI = 0.9189385332046728


def _ln2(t: TypeInfo):
    return (LN2_HI_D, LN2_LO_D) if t.bits == 64 else (LN2_HI_F, LN2_LO_F)


# --------------------------------------------------------------------------------------
# exp family
# --------------------------------------------------------------------------------------

#: float32 e**r on |r| <= ln2/2: minimax (relative error 3.1e-9, 0.05 ulp) of degree 6 with
#: c0 = c1 = 1 (exact near 0); the Taylor series needs degree 7 for the same accuracy
EXP_F32 = [1.0, 1.0, 0.4999999403953552, 0.1666652113199234, 0.04166838899254799,
           0.008368710055947304, 0.001381461275741458]
#: float32 expm1(r)/r on |r| <= ln2/2: minimax (relative error 1.4e-8) of degree 5 with
#: c0 = 1, c1 = 1/2 (Taylor: degree 6)
EXPM1_F32 = [1.0, 0.5, 0.1666654497385025, 0.04166640341281891, 0.008366424590349197,
             0.00139405089430511]


def m_exp(x: Val) -> Val:
    """e**x: k = rint(x/ln2), r = x - k*ln2 (two-part), e**r by a polynomial on |r| <= ln2/2
    (float64: Taylor series; float32: minimax `EXP_F32`), scaled by 2**k (`_scale_pow2`)."""
    t = TINFO[x.ty]
    d = t.bits == 64
    lo, hi = (-750.0, 710.0) if d else (-104.0, 89.0)
    xc = clamp(x, lo, hi)
    scalef = "+avx512f" in x.b.features
    if scalef:   # k as an integer in one conversion (lrint: vcvtps2dq), shared with ldexp below
        ki = x.b.call_intr("llvm.lrint", "i32", xc * LOG2E)
        k = ki.conv("sitofp", x.ty)
    else:
        k = rint(xc * LOG2E)
    l_hi, l_lo = _ln2(t)
    r = fma(-k, l_hi, xc)
    r = fma(-k, l_lo, r)
    p = poly(r, _taylor(lambda i: Fraction(1, factorial(i)), 14) if d else EXP_F32)
    # a nan x stays nan: the clamp and every step propagate it (lrint(nan) is some integer,
    # and ldexp(nan, any) is nan)
    return p.b.call_intr("llvm.ldexp", p.ty, p, ki) if scalef else _scale_pow2(p, k, t)


def _expm1_core(x: Val, t: TypeInfo, lo: float | None = None, hi: float | None = None):
    """expm1(x) without special values; `lo`/`hi`: a range the caller guarantees x is in
    (then no clamp is emitted), else x is clamped to where the result saturates."""
    d = t.bits == 64
    lo_c, hi_c = (-45.0, 710.0) if d else (-20.0, 89.0)
    known = lo is not None and hi is not None and lo >= lo_c and hi <= hi_c
    xc = x if known else clamp(x, lo_c, hi_c)
    y = xc * LOG2E
    k = rint(y)
    l_hi, l_lo = _ln2(t)
    r = fma(-k, l_hi, xc)
    r = fma(-k, l_lo, r)
    u = r * poly(r, _taylor(lambda i: Fraction(1, factorial(i + 1)), 13) if d else EXPM1_F32)
    if known and hi * LOG2E < t.bias - 1:       # 2**k is representable: 2**k * u + (2**k - 1)
        s = _pow2(k, t)
        big = fma(s, u, s - 1.0)
    else:                                       # 2**(k-1): representable even for k = 2**emax
        s = _pow2(k - 1.0, t)
        big = fma(s, u, s - 0.5) * 2.0
    k_is_zero = y <= 0.5 if known and lo >= 0.0 else k.eq(0.0)   # rint(0.5) = 0 (ties to even)
    return select(k_is_zero, u, big)


def m_expm1(x: Val) -> Val:
    """e**x - 1, accurate for small |x| (no cancellation): expm1(r) by Taylor series, then
    2**k*expm1(r) + (2**k - 1)."""
    t = TINFO[x.ty]
    res = _expm1_core(x, t)
    over = 709.782712893384 if t.bits == 64 else 88.72283935546875
    res = select(x > over, float("inf"), res)
    return select(isnan(x), x, res)


def m_tanh(x: Val) -> Val:
    """tanh(x) = u/(u+2), u = expm1(2|x|), with |x| first clamped to where tanh rounds to 1
    (20 for float64, 9.5 for float32: beyond it the formula gives exactly +-1). A nan x stays
    nan through every step (the clamp is a compare+select that keeps it)."""
    t = TINFO[x.ty]
    a = fabs(x)
    limit = 20.0 if t.bits == 64 else 9.5
    a = select(a > limit, limit, a)
    u = _expm1_core(a * 2.0, t, lo=0.0, hi=2.0 * limit)
    return copysign(u / (u + 2.0), x)


def _half_exp(a: Val, t: TypeInfo) -> Val:
    """e**a / 2 for a >= 0 up to where it overflows: float64 as (e**(a/2)/2)*e**(a/2) (e**a alone
    overflows first); float32 evaluated in double and rounded once (squaring a float32 e**(a/2)
    doubles its error: up to 4.08 ulp at a = 75.544075)."""
    if t.bits == 32:
        return (m_exp(a.conv("fpext", "double")) * 0.5).conv("fptrunc", "float")
    h = m_exp(a * 0.5)
    return (h * 0.5) * h


def m_sinh(x: Val) -> Val:
    """sinh(|x|) = (u + u/(u+1))/2 with u = expm1(|x|); for large |x|, e**|x|/2 (`_half_exp`)."""
    t = TINFO[x.ty]
    a = fabs(x)
    u = _expm1_core(a, t)
    small = (u + u / (u + 1.0)) * 0.5
    res = select(a > (20.0 if t.bits == 64 else 10.0), _half_exp(a, t), small)
    return select(isnan(x), x, copysign(res, x))


def m_cosh(x: Val) -> Val:
    """cosh(x) = (e + 1/e)/2, e = exp(|x|); for large |x|, e**|x|/2 (`_half_exp`)."""
    t = TINFO[x.ty]
    a = fabs(x)
    e = m_exp(a)
    small = (e + 1.0 / e) * 0.5
    return select(a > (20.0 if t.bits == 64 else 10.0), _half_exp(a, t), small)


# --------------------------------------------------------------------------------------
# log family
# --------------------------------------------------------------------------------------

def _log_parts(x: Val, t: TypeInfo):
    """Split x > 0 as 2**e * (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)) and return
    (e as float, f, hfsq, s*(hfsq + R)) so that log(1+f) = f - (hfsq - s*(hfsq+R)) (fdlibm)."""
    d = t.bits == 64
    scale_e = 54 if d else 25
    tiny = x < t.min_normal
    xs = select(tiny, x * 2.0 ** scale_e, x)
    sqrt_half = 0x3FE6A09E667F3BCD if d else 0x3F3504F3
    ix = xs.bitcast(t.ity) + (t.one_bits - sqrt_half)
    e_raw = _small_int_to_float(ix.lshr(t.mant), t)                 # biased exponent, exact
    e = e_raw - float(t.bias) - select(tiny, float(scale_e), 0.0, ty=t.ty)
    m = ((ix & t.mant_mask) + sqrt_half).bitcast(t.ty)
    f = m - 1.0
    s = f / (f + 2.0)
    z = s * s
    n = 11 if d else 5
    R = z * poly(z, [2.0 / (2 * i + 3) for i in range(n)])
    hfsq = f * f * 0.5
    return e, f, hfsq, s * (hfsq + R)


def _log_special(x: Val, res: Val) -> Val:
    res = select(x.eq(0.0), float("-inf"), res)
    res = select(x.eq(float("inf")), float("inf"), res)
    res = select(x < 0.0, float("nan"), res)
    return select(isnan(x), x, res)


def m_log(x: Val) -> Val:
    """Natural logarithm (fdlibm's reduction; the series of 2*atanh(s) in s**2)."""
    t = TINFO[x.ty]
    e, f, hfsq, sr = _log_parts(x, t)
    l_hi, l_lo = _ln2(t)
    res = e * l_hi - ((hfsq - (sr + e * l_lo)) - f)
    return _log_special(x, res)


def m_log2(x: Val) -> Val:
    t = TINFO[x.ty]
    e, f, hfsq, sr = _log_parts(x, t)
    logm = f - (hfsq - sr)
    return _log_special(x, fma(logm, LOG2E, e))


def m_log10(x: Val) -> Val:
    t = TINFO[x.ty]
    e, f, hfsq, sr = _log_parts(x, t)
    logm = f - (hfsq - sr)
    hi, lo = (LOG10_2_HI_D, LOG10_2_LO_D) if t.bits == 64 else (LOG10_2_HI_F, LOG10_2_LO_F)
    return _log_special(x, e * hi + fma(logm, LOG10E, e * lo))


def m_log1p(x: Val) -> Val:
    """log(1+x): log(u) for u = 1+x plus the rounding correction c/u (fdlibm)."""
    t = TINFO[x.ty]
    u = x + 1.0
    e, f, hfsq, sr = _log_parts(u, t)
    l_hi, l_lo = _ln2(t)
    logu = e * l_hi - ((hfsq - (sr + e * l_lo)) - f)
    c = select(e > 0.0, 1.0 - (u - x), x - (u - 1.0)) / u
    res = logu + c
    res = select(u.eq(0.0), float("-inf"), res)
    res = select(x.eq(float("inf")), float("inf"), res)
    res = select(x < -1.0, float("nan"), res)
    return select(isnan(x), x, res)


# --------------------------------------------------------------------------------------
# Trigonometric functions (float64 algorithms)
# --------------------------------------------------------------------------------------

_SIN = [float(Fraction((-1) ** (i + 1), factorial(2 * i + 3))) for i in range(7)]   # z-series after r
_COS = [float(Fraction((-1) ** (i + 1), factorial(2 * i + 2))) for i in range(8)]


def _sincos_reduced(x: Val):
    """(sin r, cos r, q) with x = q*pi/2 + r, |r| <= pi/4, q in {0,1,2,3} (as float)."""
    finite = fabs(x) < float("inf")
    xs = select(finite, x, 0.0)
    k = rint(xs * TWO_OVER_PI)
    r = fma(-k, PIO2_1, xs)
    r = fma(-k, PIO2_2, r)
    r = fma(-k, PIO2_3, r)
    r = minnum(maxnum(r, -1.0), 1.0)      # keeps results bounded beyond the accurate range
    q = k - floor(k * 0.25) * 4.0
    z = r * r
    s = fma(r * z, poly(z, _SIN), r)
    c = fma(z, poly(z, _COS), 1.0)
    return s, c, q


def m_sin(x: Val) -> Val:
    s, c, q = _sincos_reduced(x)
    res = select(q.eq(1.0), c, select(q.eq(2.0), -s, select(q.eq(3.0), -c, s)))
    res = select(isinf(x), float("nan"), res)
    return select(isnan(x), x, res)


def m_cos(x: Val) -> Val:
    s, c, q = _sincos_reduced(x)
    res = select(q.eq(1.0), -s, select(q.eq(2.0), -c, select(q.eq(3.0), s, c)))
    res = select(isinf(x), float("nan"), res)
    return select(isnan(x), x, res)


def m_tan(x: Val) -> Val:
    s, c, q = _sincos_reduced(x)
    odd = q.eq(1.0) | q.eq(3.0)
    res = select(odd, -c / s, s / c)
    res = select(isinf(x), float("nan"), res)
    return select(isnan(x), x, res)


_ATAN = [float(Fraction((-1) ** i, 2 * i + 1)) for i in range(12)]


def _atan01(t: Val) -> Val:
    """atan(t) for t in [0, 1] (nan propagates): two argument halvings
    (atan t = 2 atan(t / (1 + sqrt(1 + t**2)))) to t <= tan(pi/16), then the Taylor series."""
    for _ in range(2):
        t = t / (sqrt(fma(t, t, 1.0)) + 1.0)
    z = t * t
    return fma(t * z, poly(z, _ATAN[1:]), t) * 4.0


def _pio2_minus(v: Val) -> Val:
    return (PIO2 - v) + PIO2_LO


def _atan2_abs(ay: Val, x: Val) -> Val:
    """atan2(ay, x) for ay >= 0 (or nan), any x; the quadrant comes from signbit(x)."""
    ax = fabs(x)
    swap = ay > ax
    num = select(swap, ax, ay)
    den = select(swap, ay, ax)
    ratio = num / den
    ratio = select(den.eq(0.0), 0.0, ratio)
    ratio = select(isinf(num), 1.0, ratio)          # both infinite: pi/4
    base = _atan01(ratio)
    base = select(swap, _pio2_minus(base), base)
    return select(signbit(x), (PI - base) + PI_LO, base)


def m_atan(x: Val) -> Val:
    a = fabs(x)
    big = a > 1.0
    v = _atan01(select(big, 1.0 / a, a))
    return copysign(select(big, _pio2_minus(v), v), x)


def m_atan2(y: Val, x: Val) -> Val:
    res = copysign(_atan2_abs(fabs(y), x), y)
    return select(isnan(x) | isnan(y), x + y, res)


def m_asin(x: Val) -> Val:
    a = fabs(x)
    c = sqrt((1.0 - a) * (a + 1.0))
    res = _atan2_abs(a, c)
    res = select(a > 1.0, float("nan"), res)
    return copysign(res, x)


def m_acos(x: Val) -> Val:
    c = sqrt((1.0 - x) * (x + 1.0))
    res = _atan2_abs(c, x)
    return select(fabs(x) > 1.0, float("nan"), select(isnan(x), x, res))


def _two_sum(a: Val, b: Val):
    """Knuth's exact sum: a + b == s + err."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _log_dd(x: Val, t: TypeInfo):
    """log(x) for x > 0 as an unevaluated sum hi + lo (error ~1e-17 absolute)."""
    e, f, hfsq, sr = _log_parts(x, t)
    hfsq_lo = fma_exact(f * 0.5, f, -hfsq)                # 0.5*f*f - hfsq exactly
    tt = hfsq - sr
    hi1 = f - tt
    lo1 = ((f - hi1) - tt) - hfsq_lo
    a = e * LN2_HI_D
    s = a + hi1
    bb = s - a
    err = (a - (s - bb)) + (hi1 - bb)
    hi, lo = _two_sum(s, err + lo1 + e * LN2_LO_D)      # renormalise: |lo| <= ulp(hi)/2
    special = x.eq(0.0) | isinf(x) | isnan(x) | (x < 0.0)
    return _log_special(x, hi), select(special, 0.0, lo)


def m_pow(x: Val, y: Val) -> Val:
    """x**y (C99 pow special cases); exp(y*log|x|) with log|x| in double-double for float64."""
    t = TINFO[x.ty]
    ax = fabs(x)
    if t.bits == 64:
        hi, lo = _log_dd(ax, t)
        p = y * hi
        pl = fma_exact(y, hi, -p) + y * lo
        pl = select(fabs(p) < float("inf"), pl, 0.0)
        ep = m_exp(p)
        r = select(isinf(ep) | isnan(pl), ep, fma(ep, pl, ep))
    else:
        r = m_exp(y * m_log(ax))
    yint = trunc(y).eq(y)
    yodd = yint & trunc(y * 0.5).ne(y * 0.5)
    r = select(signbit(x) & yodd, -r, r)
    r = select((x < 0.0) & (ax < float("inf")) & ~yint & (fabs(y) < float("inf")), float("nan"), r)
    r = select(ax.eq(1.0) & isinf(y), 1.0, r)
    r = select(x.eq(1.0) | y.eq(0.0), 1.0, r)
    return r


def m_hypot(x: Val, y: Val) -> Val:
    a, b = fabs(x), fabs(y)
    big = select(a > b, a, b)
    small = select(a > b, b, a)
    r = small / big
    res = big * sqrt(fma(r, r, 1.0))
    res = select(big.eq(0.0), 0.0, res)
    res = select(isnan(x) | isnan(y), x + y, res)
    return select(isinf(x) | isinf(y), float("inf"), res)


def m_asinh(x: Val) -> Val:
    a = fabs(x)
    mid = m_log1p(a + a * a / (sqrt(fma(a, a, 1.0)) + 1.0))
    large = m_log(a) + LN2_HI_D + LN2_LO_D
    return copysign(select(a > 1e8, large, mid), x)


def m_acosh(x: Val) -> Val:
    tm = x - 1.0
    mid = m_log1p(tm + sqrt(fma(tm, tm, tm * 2.0)))
    large = m_log(x) + LN2_HI_D + LN2_LO_D
    res = select(x > 1e8, large, mid)
    return select(x < 1.0, float("nan"), res)


def m_atanh(x: Val) -> Val:
    a = fabs(x)
    res = m_log1p(a * 2.0 / (1.0 - a)) * 0.5
    res = select(a > 1.0, float("nan"), res)
    return copysign(res, x)


def m_cbrt(x: Val) -> Val:
    """Cube root: exponent/3 guess from the high word (fdlibm's bias), three Halley steps."""
    t = DOUBLE
    a = fabs(x)
    tiny = a < 2.0 ** -1000
    huge = a > 2.0 ** 1000                  # keeps 2*y**3 finite in the Halley steps
    s = select(tiny, a * 2.0 ** 54, select(huge, a * 2.0 ** -300, a))
    hw = s.bitcast("i64").lshr(32)
    hwf = _small_int_to_float(hw, t)
    g = floor(hwf * (1.0 / 3.0)) + 715094163.0
    y = (_float_to_small_int(g, t) << 32).bitcast("double")
    for _ in range(3):
        y3 = y * y * y
        y = y * (fma(s, 2.0, y3) / fma(y3, 2.0, s))
    y = select(tiny, y * 2.0 ** -18, select(huge, y * 2.0 ** 100, y))
    y = select(a.eq(0.0) | isinf(a) | isnan(a), a, y)
    return copysign(y, x)


# --------------------------------------------------------------------------------------
# Error function and its inverse (float64)
# --------------------------------------------------------------------------------------

_ERF_SMALL = [float(Fraction((-1) ** n, factorial(n) * (2 * n + 1))) for n in range(19)]
# Chebyshev coefficients of erfcx(x) = exp(x**2) erfc(x) on [1, 3] and [3, 6] (computed with mpmath)
_ERFCX_1_3 = [0.2785389365977923, -0.11964641832736307, 0.02392588774648554, -0.004503974067265867,
              0.0008045451692536015, -0.00013720361484011932, 2.244458275373349e-05,
              -3.535572865202117e-06, 5.380083091307861e-07, -7.92969488788695e-08,
              1.1346142347924916e-08, -1.579118251021591e-09, 2.1413966089607892e-10,
              -2.8336608279151733e-11, 3.663915449263408e-12, -4.634539763824069e-13,
              5.741110560982056e-14, -6.9716129047019005e-15, 8.306142860880832e-16,
              -9.715751694632603e-17, 1.1030425865558373e-17]
_ERFCX_3_6 = [0.12902689965474168, -0.0420426781395118, 0.006698487121092753, -0.0010450916791743758,
              0.00015985899884949414, -2.3998261587238652e-05, 3.53906410506357e-06,
              -5.131303200649095e-07, 7.320268611264974e-08, -1.0282193129248155e-08,
              1.4229088707596404e-09, -1.9411157958365732e-10, 2.611796346594898e-11,
              -3.467796223578144e-12, 4.545602957096705e-13, -5.884864531819084e-14,
              7.527649777662295e-15, -9.517437226684621e-16, 1.189780049298172e-16,
              -1.470795623027337e-17, 1.773504143240811e-18]


def _erf_small(a: Val) -> Val:
    """erf(a) for |a| <= 1 by its Taylor series."""
    return a * poly(a * a, _ERF_SMALL) * TWO_SQRTPI


def _erfcx_big(a: Val) -> Val:
    """exp(a**2) erfc(a) for a in [1, 6] (clamped): Clenshaw sum of two Chebyshev series."""
    ac = minnum(maxnum(a, 1.0), 6.0)
    low = ac < 3.0
    tt = select(low, (ac * 2.0 - 4.0) * 0.5, (ac * 2.0 - 9.0) * (1.0 / 3.0))
    b1 = a.b.const(0.0, a.ty)
    b2 = b1
    for c_lo, c_hi in zip(reversed(_ERFCX_1_3[1:]), reversed(_ERFCX_3_6[1:])):
        c = select(low, c_lo, c_hi, ty=a.ty)
        b1, b2 = fma(tt * 2.0, b1, c - b2), b1
    return fma(tt, b1, select(low, _ERFCX_1_3[0], _ERFCX_3_6[0], ty=a.ty) - b2)


def _exp_neg_sq(a: Val) -> Val:
    """exp(-a*a) with the rounding error of a*a corrected."""
    sq = a * a
    sq_lo = fma_exact(a, a, -sq)
    e = m_exp(-sq)
    return e - e * sq_lo


def _erfc_pos(a: Val) -> Val:
    """erfc(a) for a >= 0 with relative accuracy."""
    return select(a < 1.0, 1.0 - _erf_small(a), _exp_neg_sq(a) * _erfcx_big(a))


# float32: Chebyshev coefficients of erfcx on [1, 4] (degree 12, computed with mpmath)
_ERFCX_1_4_F = [0.24442575871944427, -0.1358986347913742, 0.03563511371612549, -0.008884098380804062,
                0.0021184240467846394, -0.00048539877752773464, 0.00010727375774877146,
                -2.2936634195502847e-05, 4.756874659506138e-06, -9.589933824827312e-07,
                1.8828336578735616e-07, -3.60243284092121e-08, 6.526287066321856e-09]


def _erfcx_big_f32(a: Val) -> Val:
    """exp(a**2) erfc(a) for a in [1, 4] (clamped), float32 Clenshaw sum."""
    tt = (clamp(a, 1.0, 4.0) * 2.0 - 5.0) * (1.0 / 3.0)
    b1 = a.b.const(0.0, a.ty)
    b2 = b1
    for c in reversed(_ERFCX_1_4_F[1:]):
        b1, b2 = fma(tt * 2.0, b1, c - b2), b1
    return fma(tt, b1, _ERFCX_1_4_F[0] - b2)


def m_erf(x: Val) -> Val:
    """erf: Taylor series for |x| < 1, 1 - exp(-x**2) erfcx(|x|) beyond (native float32 too,
    for GELU)."""
    a = fabs(x)
    if x.ty == "float":
        small = a * poly(a * a, _ERF_SMALL[:11]) * TWO_SQRTPI
        big = 1.0 - _exp_neg_sq(a) * _erfcx_big_f32(a)
        res = select(a < 1.0, small, select(a > 4.0, 1.0, big))
    else:
        big = 1.0 - _exp_neg_sq(a) * _erfcx_big(a)
        res = select(a < 1.0, _erf_small(select(a < 1.0, a, 0.0)), select(a > 6.0, 1.0, big))
    return select(isnan(x), x, copysign(res, x))


_GILES_C = [1.50140941, 0.246640727, -0.00417768164, -0.00125372503, 0.00021858087,
            -4.39150654e-06, -3.5233877e-06, 3.43273939e-07, 2.81022636e-08]
_GILES_T = [2.83297682, 1.00167406, 0.00943887047, -0.0076224613, 0.00573950773,
            -0.00367342844, 0.00134934322, 0.000100950558, -0.000200214257]


def m_erfinv(x: Val) -> Val:
    """Inverse error function: Giles' single-precision approximation as the initial guess,
    refined by three Halley steps on erf (|x| <= 1/2) or on erfc (the tails, q = 1 - |x| exact)."""
    a = fabs(x)
    q = 1.0 - a
    w = -m_log(q * (a + 1.0))
    central = poly(w - 2.5, _GILES_C)
    tail = poly(sqrt(w) - 3.0, _GILES_T)
    y = select(w < 5.0, central, tail) * a
    small = a <= 0.5
    for _ in range(3):
        y = minnum(maxnum(y, 0.0), 6.5)
        resid = select(small, _erf_small(minnum(y, 1.0)) - a, q - _erfc_pos(y))
        step = resid * SQRTPI_2 * m_exp(y * y)
        y = y - step / fma(y, step, 1.0)
    y = select(a.eq(1.0), float("inf"), y)
    y = select(a > 1.0, float("nan"), y)
    y = select(a.eq(0.0) | isnan(a), a, y)
    return copysign(y, x)


# --------------------------------------------------------------------------------------
# Gamma-related functions (float64)
# --------------------------------------------------------------------------------------

_SHIFT = 10   # arguments below this are shifted up by the recurrence before the asymptotic series
_STIRLING = [1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156, -3617 / 122400]
_DIGAMMA = [-1 / 12, 1 / 120, -1 / 252, 1 / 240, -1 / 132, 691 / 32760, -1 / 12]


def _shifted(x: Val):
    """(z, n) with z = x + n >= _SHIFT for x >= 1/2 (n = 0 when x >= _SHIFT)."""
    n = maxnum(ceil(_SHIFT - x), 0.0)
    return x + n, n


# lgamma(2 + t) = (1 - euler_gamma) t + sum_k (-1)**k (zeta(k) - 1) t**k / k  (|t| <= 1/2), from mpmath
_LG2 = [0.42278433509846713, 0.3224670334241132, -0.0673523010531981, 0.020580808427784546,
        -0.007385551028673986, 0.0028905103307415234, -0.001192753911703261, 0.0005096695247430425,
        -0.00022315475845357939, 9.945751278180853e-05, -4.492623673813314e-05, 2.050721277567069e-05,
        -9.439488275268397e-06, 4.374866789907488e-06, -2.039215753801366e-06, 9.55141213040742e-07,
        -4.492469198764566e-07, 2.1207184805554665e-07, -1.0043224823968099e-07, 4.7698101693639804e-08,
        -2.2711094608943164e-08, 1.0838659214896955e-08, -5.183475041970047e-09, 2.4836745438024785e-09,
        -1.1921401405860912e-09, 5.731367241678862e-10, -2.7595228851242334e-10, 1.330476437424449e-10,
        -6.4229645638381e-11]


def _shift_product(x: Val, n: Val) -> Val:
    """x (x+1) ... (x+n-1) for an integer-valued 0 <= n <= _SHIFT (1 when n = 0)."""
    prod = x.b.const(1.0, x.ty)
    for k in range(_SHIFT):
        prod = prod * select(n > float(k), x + float(k), 1.0)
    return prod


def _lgamma_pos(x: Val) -> Val:
    """log Gamma(x) for x >= 1/2 (including inf and large x). Next to the zeros at 1 and 2
    (x in [1/2, 5/2)) the Taylor series of lgamma around 2 keeps the relative accuracy."""
    z, n = _shifted(x)
    w = 1.0 / z
    series = w * poly(w * w, _STIRLING)
    lg = (z - 0.5) * m_log(z) - z + HALF_LOG_2PI + series
    far = lg - m_log(_shift_product(x, n))
    lo_side = x < 1.5
    t = select(lo_side, x - 1.0, x - 2.0)
    near = t * poly(t, _LG2) - select(lo_side, m_log(x), 0.0)
    return select(x < 2.5, near, far)


def m_lgamma(x: Val) -> Val:
    refl = x < 0.5
    z0 = select(refl, 1.0 - x, x)
    lp = _lgamma_pos(z0)
    res = select(refl, m_log(PI / fabs(_sinpi_full(x))) - lp, lp)
    res = select(x.eq(float("inf")), float("inf"), res)
    res = select(x.eq(float("-inf")), float("-inf"), res)
    return select(isnan(x), x, res)


def _sinpi_full(x: Val) -> Val:
    s, c, q = _sincos_reduced(_reduce_pi(x) * PI)
    return select(q.eq(1.0), c, select(q.eq(2.0), -s, select(q.eq(3.0), -c, s)))


def _reduce_pi(x: Val) -> Val:
    r = x - rint(x * 0.5) * 2.0
    return select(r > 0.5, 1.0 - r, select(r < -0.5, -1.0 - r, r))


def m_tgamma(x: Val) -> Val:
    """Gamma(x): shift to z >= 10, Stirling's series with log z in double-double and
    exp(hi) * (1 + lo), divided by the shift product; reflection for x < 1/2."""
    refl = x < 0.5
    z0 = select(refl, 1.0 - x, x)
    z, n = _shifted(z0)
    w = 1.0 / z
    lhi, llo = _log_dd(z, DOUBLE)
    zh = z - 0.5
    a = zh * lhi
    a_lo = fma_exact(zh, lhi, -a) + zh * llo
    s1, e1 = _two_sum(a, -z)
    s2, e2 = _two_sum(s1, w * poly(w * w, _STIRLING) + HALF_LOG_2PI)
    lo = a_lo + e1 + e2
    ep = m_exp(s2)
    gz = select(isinf(ep), ep, fma(ep, lo, ep))
    gpos = gz / _shift_product(z0, n)
    res = select(refl, PI / (_sinpi_full(x) * gpos), gpos)
    res = select(refl & x.eq(0.0), copysign(x.b.const(float("inf"), x.ty), x), res)
    res = select((x < 0.0) & floor(x).eq(x), float("nan"), res)
    res = select(x.eq(float("inf")), float("inf"), res)
    return select(isnan(x), x, res)


def m_digamma(x: Val) -> Val:
    refl = x < 0.5
    z0 = select(refl, 1.0 - x, x)
    z, n = _shifted(z0)
    acc = x.b.const(0.0, x.ty)
    for k in range(_SHIFT):   # psi(z0) = psi(z0 + n) - sum 1/(z0 + k)
        acc = acc + select(n > float(k), 1.0 / (z0 + float(k)), 0.0)
    w = 1.0 / z
    w2 = w * w
    psi = m_log(z) - w * 0.5 + w2 * poly(w2, _DIGAMMA) - acc
    r = x - rint(x)
    s, c, q = _sincos_reduced(r * PI)
    cot = select(q.eq(0.0), c / s, select(q.eq(1.0), -s / c, select(q.eq(3.0), s / -c, c / s)))
    res = select(refl, psi - cot * PI, psi)
    res = select(x.eq(0.0), select(signbit(x), float("inf"), float("-inf"), ty=x.ty), res)
    res = select((x < 0.0) & floor(x).eq(x), float("nan"), res)
    res = select(x.eq(float("inf")), float("inf"), res)
    return select(isnan(x), x, res)


# --------------------------------------------------------------------------------------
# Rounding and modulo
# --------------------------------------------------------------------------------------

def m_round(x: Val) -> Val:
    """Round half away from zero, exactly: trunc(x) + sign(x) when |x - trunc(x)| >= 1/2."""
    tr = trunc(x)
    up = fabs(x - tr) >= 0.5
    return select(up, tr + copysign(x.b.const(1.0, x.ty), x), tr)


def m_rint(x: Val) -> Val:
    return rint(x)


def m_mod(a: Val, b: Val) -> Val:
    """Python-style modulo (sign of b), 0 where b == 0: r = a - floor(a/b)*b, then corrected
    into [0, b) (or (b, 0]) in case the quotient was rounded across an integer."""
    q = floor(a / b)
    r = fma(-q, b, a)
    pos = b > 0.0
    neg = b < 0.0
    r = select(pos & (r < 0.0), r + b, r)
    r = select(pos & (r >= b), r - b, r)
    r = select(neg & (r > 0.0), r + b, r)
    r = select(neg & (r <= b), r - b, r)
    r = select(r.eq(0.0), copysign(a.b.const(0.0, a.ty), b), r)
    same = a.eq(0.0) | (signbit(a).cmp("eq", signbit(b)))
    r = select(isinf(b) & (fabs(a) < float("inf")), select(same, a, b), r)
    return select(b.eq(0.0), 0.0, r)


# --------------------------------------------------------------------------------------
# Registry: primitive name -> (implementation, native float32?)
# --------------------------------------------------------------------------------------

MATH_UNARY: dict[str, tuple[Callable[[Val], Val], bool]] = {
    "exp": (m_exp, True), "expm1": (m_expm1, True), "log": (m_log, True), "log1p": (m_log1p, True),
    "log2": (m_log2, True), "log10": (m_log10, True), "tanh": (m_tanh, True), "sinh": (m_sinh, True),
    "cosh": (m_cosh, True), "sin": (m_sin, False), "cos": (m_cos, False), "tan": (m_tan, False),
    "asin": (m_asin, False), "acos": (m_acos, False), "atan": (m_atan, False),
    "asinh": (m_asinh, False), "acosh": (m_acosh, False), "atanh": (m_atanh, False),
    "erf": (m_erf, True), "erfinv": (m_erfinv, False), "lgamma": (m_lgamma, False),
    "tgamma": (m_tgamma, False), "digamma": (m_digamma, False), "cbrt": (m_cbrt, False),
    "round": (m_round, True), "rint": (m_rint, True),
}

MATH_BINARY: dict[str, tuple[Callable[[Val, Val], Val], bool]] = {
    "pow": (m_pow, False), "atan2": (m_atan2, False), "hypot": (m_hypot, False), "mod": (m_mod, False),
}


def is_math_primitive(op: str) -> bool:
    return op in MATH_UNARY or op in MATH_BINARY


def math_function_name(op: str, ty: str) -> str:
    return f"sjm_{op}_{_sfx(ty)}"


def emit_math_function(op: str, ty: str, features: frozenset = frozenset()) -> tuple[str, set[str]]:
    """Text of `define internal <ty> @sjm_<op>_<sfx>(...) alwaysinline` and the intrinsics it uses,
    for a target with `features` (LLVM feature names such as "+avx512f"; the text may use
    instructions only those targets vectorize well).

    float32 functions without a native float algorithm extend to double, evaluate, and round.
    """
    impl, native = MATH_UNARY[op] if op in MATH_UNARY else MATH_BINARY[op]
    arity = 1 if op in MATH_UNARY else 2
    b = FnBuilder("m", frozenset(features))
    params = [Val(b, ty, f"%a{i}") for i in range(arity)]
    if ty == "float" and not native:
        args = [p.conv("fpext", "double") for p in params]
        res = impl(*args).conv("fptrunc", "float")
    else:
        res = impl(*params)
    plist = ", ".join(f"{ty} %a{i}" for i in range(arity))
    body = "\n".join(b.lines)
    text = (f"define internal {ty} @{math_function_name(op, ty)}({plist}) #0 {{\nentry:\n{body}\n"
            f"  ret {ty} {res.ref}\n}}\n")
    return text, set(b.used_intrinsics)
