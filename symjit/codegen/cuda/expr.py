"""CUDA C lowering of scalar expressions (`symjit.ops.scalar.Expr`).

`ExprEmitter` turns an expression DAG into a list of C statements, one `const T tN = ...;`
per distinct node (shared subexpressions are computed once), inside a kernel body. Every
node has a dtype (the compute dtype, or a cast's target) and a C type:

    float32 float | float64 double | int32 int32_t | int64 int64_t | int8 int8_t
    uint8 uint8_t | bool uint8_t holding 0/1

Semantics are those of `scalar.evaluate` (the numpy reference) and of the LLVM generator
(`codegen/llvm/elementwise.py`), primitive by primitive:
  * input conversions to the compute dtype follow numpy's `astype` on x86 (a float out of an
    integer's range, or NaN, becomes the integer's minimum through int32/int64);
  * `cast` has C semantics with NaN/inf -> 0 and floats -> small ints through int64;
  * comparisons and logical ops yield 1/0 in the node's dtype; `select` tests `!= 0`;
  * integer arithmetic wraps (computed in the unsigned type of the same width), integer
    division truncates with x/0 == 0, `mod` takes the sign of the divisor with x%0 == 0,
    integer `pow` is square-and-multiply (negative exponents as numpy's truncation);
  * max/min propagate NaN; transcendental functions of integers run in float64 and convert
    back; a binary op on two dtypes promotes like numpy and the result takes arg 0's dtype.

The math functions are CUDA's (`expf`, `erfinvf`, ...; float32 within CUDA's documented ulp
bounds) plus the device helpers of `prelude.PRELUDE` (`sj_mod`, `sj_digamma`, `sj_ipow`,
conversions). Nothing here depends on the GPU: the same C compiles for the host with
`runtime/cuda_host_emu.h` (see `emulate.py`).
"""
from __future__ import annotations

import math

import numpy as np

from ...base import MXNetError
from ...ops import scalar as S

__all__ = ["CTYPES", "ctype", "kind", "convert", "literal", "result_dtype", "ExprEmitter", "check_dtype"]

#: dtype name -> (C type, kind): f float, s signed, u unsigned, b bool (uint8_t holding 0/1)
CTYPES: dict[str, tuple[str, str]] = {
    "float32": ("float", "f"), "float64": ("double", "f"), "int32": ("int32_t", "s"), "int64": ("int64_t", "s"),
    "int8": ("int8_t", "s"), "uint8": ("uint8_t", "u"), "bool": ("uint8_t", "b"),
}

#: unsigned C type of the same width (wrapping arithmetic)
_UNSIGNED = {"int32_t": "uint32_t", "int64_t": "uint64_t", "int8_t": "uint8_t", "uint8_t": "uint8_t"}

_BITS = {"float": 32, "double": 64, "int32_t": 32, "int64_t": 64, "int8_t": 8, "uint8_t": 8}


def check_dtype(dtype, what: str = "value") -> str:
    """The canonical dtype name, or MXNetError when the CUDA generator cannot handle it."""
    name = np.dtype(dtype).name
    if name not in CTYPES:
        raise MXNetError(f"cuda codegen: {what} has dtype {name}, which the CUDA backend does not support "
                         f"(supported: {', '.join(CTYPES)})")
    return name


def ctype(dtype: str) -> str:
    return CTYPES[dtype][0]


def kind(dtype: str) -> str:
    return CTYPES[dtype][1]


def result_dtype(a: str, b: str) -> str:
    """numpy's promotion of two dtypes, mapped into the supported set (as the LLVM generator)."""
    r = np.result_type(np.dtype(a), np.dtype(b)).name
    return {"int16": "int32", "uint16": "int32", "uint32": "int64", "uint64": "float64",
            "float16": "float32"}.get(r, r)


# --------------------------------------------------------------------------------------
# Literals and conversions (C expression text)
# --------------------------------------------------------------------------------------

def _float_text(v: float, dtype: str) -> str:
    if math.isnan(v):
        return "NAN" if dtype == "float32" else "((double)NAN)"
    if math.isinf(v):
        inf = "INFINITY" if dtype == "float32" else "((double)INFINITY)"
        return inf if v > 0 else f"(-{inf})"
    if dtype == "float32":
        t = repr(float(np.float32(v)))      # the float32 value's exact double text: rounds back to it
        if not any(c in t for c in ".e"):
            t += ".0"
        return f"{t}f"
    t = repr(float(v))
    if not any(c in t for c in ".e"):
        t += ".0"
    return t


def literal(value, dtype: str) -> str:
    """A C literal of `value` converted like numpy's `astype(dtype)`."""
    with np.errstate(all="ignore"):
        c = np.asarray(value).astype(dtype)
    if kind(dtype) == "f":
        return _float_text(float(c), dtype)
    i = int(c)
    if dtype == "int64":
        if i == -(2 ** 63):
            return "((int64_t)(-9223372036854775807LL - 1))"
        return f"((int64_t){i}LL)"
    if dtype == "int32" and i == -(2 ** 31):
        return "((int32_t)(-2147483647 - 1))"
    return f"(({ctype(dtype)}){i})"


def convert(x: str, src: str, dst: str, c_cast: bool = False) -> str:
    """C text converting expression `x` of dtype `src` to `dst`: numpy `astype` semantics on
    x86, or with `c_cast` those of `scalar._c_cast` (NaN/inf -> 0, floats to ints through int64)."""
    if src == dst:
        return x
    sk, dk, dty = kind(src), kind(dst), ctype(dst)
    if dk == "b":
        return f"((uint8_t)(({x}) != 0))"
    if sk == "f":
        if dk == "f":
            return f"(({dty})({x}))"
        if c_cast:
            return f"(({dty})sj_f2i64_c((double)({x})))"
        fn = "sj_f2i64" if dst == "int64" else "sj_f2i32"
        return f"(({dty}){fn}((double)({x})))"
    return f"(({dty})({x}))"


# --------------------------------------------------------------------------------------
# Expression DAG -> statements
# --------------------------------------------------------------------------------------

_FLOAT_FN = {op: op for op in ("exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "cbrt", "sin", "cos",
                               "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
                               "floor", "ceil", "rint", "round", "trunc", "erf", "erfinv", "lgamma", "tgamma")}
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_ROUNDING = {"floor", "ceil", "rint", "round", "trunc"}


class ExprEmitter:
    """Emits C statements computing scalar expressions of one kernel body.

    `load_input(i)` returns C text of input i's value in its own dtype `in_dtypes[i]`
    (evaluated once, the emitter binds it to a temporary). `gen(expr)` returns (C variable,
    dtype); statements accumulate in `lines`. Temporaries are named `{prefix}N`."""

    def __init__(self, compute_dtype: str, in_dtypes, load_input, prefix: str = "t"):
        self.cd = compute_dtype
        self.in_dtypes = tuple(in_dtypes)
        self.load_input = load_input
        self.prefix = prefix
        self.lines: list[str] = []
        self.memo: dict = {}
        self.n = 0

    def bind(self, text: str, dtype: str) -> tuple[str, str]:
        name = f"{self.prefix}{self.n}"
        self.n += 1
        self.lines.append(f"const {ctype(dtype)} {name} = {text};")
        return name, dtype

    def gen(self, e: S.Expr) -> tuple[str, str]:
        # iterative post-order: deep fused expressions must not hit Python's recursion limit
        stack = [(e, False)]
        while stack:
            node, ready = stack.pop()
            if node in self.memo:
                continue
            if ready or not node.args:
                self.memo[node] = self._gen(node)
                continue
            stack.append((node, True))
            stack.extend((a, False) for a in reversed(node.args) if a not in self.memo)
        return self.memo[e]

    # ---- one node ---------------------------------------------------------------
    def _gen(self, e: S.Expr) -> tuple[str, str]:
        cd, op = self.cd, e.op
        if op == "input":
            i = e.value
            return self.bind(convert(self.load_input(i), self.in_dtypes[i], cd), cd)
        if op == "const":
            return literal(e.value, cd), cd
        args = [self.memo[a] for a in e.args]
        if op == "cast":
            (v, dt), to = args[0], check_dtype(e.value, "a cast")
            return self.bind(convert(v, dt, to, c_cast=True), to)
        if op == "select":
            (c, cdt), (a, adt), (b, bdt) = args
            rdt = result_dtype(adt, bdt)
            return self.bind(f"({self._nonzero(c, cdt)} ? {convert(a, adt, rdt)} : {convert(b, bdt, rdt)})", rdt)
        if op in S.UNARY and len(args) == 1:
            v, dt = args[0]
            if op == "not":
                return self.bind(f"(({v}) == 0 ? {literal(1, cd)} : {literal(0, cd)})", cd)
            return self.bind(self._unary(op, v, dt), dt)
        if op in S.BINARY and len(args) == 2:
            (a, adt), (b, bdt) = args
            if adt != bdt:          # numpy promotes, then the result takes arg 0's dtype
                rdt = result_dtype(adt, bdt)
                r = self._binary(op, convert(a, adt, rdt), convert(b, bdt, rdt), rdt)
                return self.bind(convert(r, rdt, adt), adt)
            return self.bind(self._binary(op, a, b, adt), adt)
        raise MXNetError(f"cuda codegen: scalar primitive {op!r} with {len(args)} arguments is not supported")

    @staticmethod
    def _nonzero(v: str, dt: str) -> str:
        return f"(({v}) != 0)"

    @staticmethod
    def _bool01(cond: str, dt: str) -> str:
        return f"(({cond}) ? {literal(1, dt)} : {literal(0, dt)})"

    # ---- unary -----------------------------------------------------------------
    def _unary(self, op: str, v: str, dt: str) -> str:
        k, T = kind(dt), ctype(dt)
        if k == "f":
            f = "f" if dt == "float32" else ""
            if op == "neg":
                return f"(-{v})"
            if op == "abs":
                return f"fabs{f}({v})"
            if op == "sign":
                return f"({v} > ({T})0 ? ({T})1 : ({v} < ({T})0 ? ({T})-1 : {v}))"
            if op == "digamma":
                return f"(({T})sj_digamma((double){v}))"
            if op == "lgamma":      # scipy's gammaln(-inf) is -inf; C's lgamma gives +inf
                return f"({v} == -({T})INFINITY ? {v} : lgamma{f}({v}))"
            if op in _FLOAT_FN:
                return f"{_FLOAT_FN[op]}{f}({v})"
            raise MXNetError(f"cuda codegen: unary primitive {op!r} is not supported")
        if op in _ROUNDING:
            return v
        if k == "b":
            if op in ("abs", "sign", "neg"):
                return v
            return convert(self._unary(op, convert(v, dt, "float64"), "float64"), "float64", dt)
        U = _UNSIGNED[T]
        if op == "neg":
            return f"(({T})(-({U}){v}))"
        if op == "abs":
            return v if k == "u" else f"({v} < 0 ? ({T})(-({U}){v}) : {v})"
        if op == "sign":
            return f"(({T})({v} != 0))" if k == "u" else f"(({T})(({v} > 0) - ({v} < 0)))"
        # transcendental functions of integers: numpy computes in float64 and converts back
        return convert(self._unary(op, convert(v, dt, "float64"), "float64"), "float64", dt)

    # ---- binary ----------------------------------------------------------------
    def _binary(self, op: str, a: str, b: str, dt: str) -> str:
        k, T = kind(dt), ctype(dt)
        if op in _CMP:
            return self._bool01(f"{a} {_CMP[op]} {b}", dt)
        if op in ("and", "or", "xor"):
            na, nb = f"({a} != 0)", f"({b} != 0)"
            c = {"and": f"{na} && {nb}", "or": f"{na} || {nb}", "xor": f"{na} != {nb}"}[op]
            return self._bool01(c, dt)
        if k == "f":
            f = "f" if dt == "float32" else ""
            if op in ("add", "sub", "mul", "div"):
                return f"({a} {dict(add='+', sub='-', mul='*', div='/')[op]} {b})"
            if op == "max":
                return f"(({a} > {b} || {a} != {a}) ? {a} : {b})"
            if op == "min":
                return f"(({a} < {b} || {a} != {a}) ? {a} : {b})"
            if op == "mod":
                return f"sj_mod({a}, {b})"
            if op in ("pow", "hypot", "atan2"):
                return f"{op}{f}({a}, {b})"
            raise MXNetError(f"cuda codegen: binary primitive {op!r} is not supported")
        if k == "b":   # computed as uint8, the result is 0/1
            r = self._binary(op, a, b, "uint8")
            return f"((uint8_t)(({r}) != 0))"
        U = _UNSIGNED[T]
        signed = k == "s"
        if op in ("add", "sub", "mul"):
            return f"(({T})(({U}){a} {dict(add='+', sub='-', mul='*')[op]} ({U}){b}))"
        if op == "max":
            return f"({a} > {b} ? {a} : {b})"
        if op == "min":
            return f"({a} < {b} ? {a} : {b})"
        if op == "div":
            if signed:
                return f"({b} == 0 ? ({T})0 : ({b} == -1 ? ({T})(-({U}){a}) : ({T})({a} / {b})))"
            return f"({b} == 0 ? ({T})0 : ({T})({a} / {b}))"
        if op == "mod":
            return f"sj_imod_{'s' if signed else 'u'}<{T}>({a}, {b})"
        if op == "pow":
            return f"sj_ipow<{T}, {U}>({a}, {b})"
        if op in ("hypot", "atan2"):
            return convert(f"{op}({convert(a, dt, 'float64')}, {convert(b, dt, 'float64')})", "float64", dt)
        raise MXNetError(f"cuda codegen: binary primitive {op!r} is not supported for {dt}")
