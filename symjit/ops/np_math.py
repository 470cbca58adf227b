"""NumPy-semantics elementwise operators: MXNet's `_npi_<ufunc>` (unary and binary with
broadcasting) and `_npi_<ufunc>_scalar` / `_npi_r<ufunc>_scalar` (an array and a Python number).

Dtype rules are MXNet 1.9.1's (not numpy's): unary math keeps the input dtype (an int32 `exp`
is int32); add, subtract, multiply, mod and power mix dtypes by `promote_mixed`; true_divide by
`promote_divide`; the other binary ops need equal dtypes; comparisons and logical ops give bool.
A scalar operand keeps the array's dtype (a bool array becomes int64; true_divide of an integer
array gives float32).

The ops with a scalar expression are also `NumpyElementwise`: fusion and the code generators
compute them like the legacy ops. Where the value is the legacy op's, the expression is that
op's (`legacy_expr`); `compute_dtype` states, per instance, the dtype in which the expression
gives exactly `forward`'s result (None: the instance keeps its numpy step).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..base import MXNetError
from . import scalar as S
from .attrs import Bool, Dtype, Float, Int, Param
from .np_base import NumpyElementwise, NumpyOp, promote_divide, promote_mixed, register_numpy
from .registry import get_op

__all__ = ["UNARY", "BINARY", "COMPARISONS"]


# ---- unary -----------------------------------------------------------------------------------

def _d(f: Callable) -> Callable:
    """A derivative given as f(x, y) -> dy/dx."""
    return f


#: MXNet op suffix -> (numpy function, derivative dy/dx as f(x, y), or None: not differentiable)
UNARY: dict[str, tuple] = {
    "absolute": (np.abs, _d(lambda x, y: np.sign(x))),
    "negative": (np.negative, _d(lambda x, y: -np.ones_like(x))),
    "reciprocal": (np.reciprocal, _d(lambda x, y: -y * y)),
    "sign": (np.sign, _d(lambda x, y: np.zeros_like(x))),
    "rint": (np.rint, _d(lambda x, y: np.zeros_like(x))),
    "ceil": (np.ceil, _d(lambda x, y: np.zeros_like(x))),
    "floor": (np.floor, _d(lambda x, y: np.zeros_like(x))),
    "trunc": (np.trunc, _d(lambda x, y: np.zeros_like(x))),
    "fix": (np.fix, _d(lambda x, y: np.zeros_like(x))),
    "square": (np.square, _d(lambda x, y: 2 * x)),
    "sqrt": (np.sqrt, _d(lambda x, y: 0.5 / y)),
    "cbrt": (np.cbrt, _d(lambda x, y: 1.0 / (3 * y * y))),
    "exp": (np.exp, _d(lambda x, y: y)),
    "expm1": (np.expm1, _d(lambda x, y: y + 1)),
    "log": (np.log, _d(lambda x, y: 1.0 / x)),
    "log10": (np.log10, _d(lambda x, y: 1.0 / (x * np.log(10.0)))),
    "log2": (np.log2, _d(lambda x, y: 1.0 / (x * np.log(2.0)))),
    "log1p": (np.log1p, _d(lambda x, y: 1.0 / (1 + x))),
    "sin": (np.sin, _d(lambda x, y: np.cos(x))),
    "cos": (np.cos, _d(lambda x, y: -np.sin(x))),
    "tan": (np.tan, _d(lambda x, y: 1 + y * y)),
    "arcsin": (np.arcsin, _d(lambda x, y: 1.0 / np.sqrt(1 - x * x))),
    "arccos": (np.arccos, _d(lambda x, y: -1.0 / np.sqrt(1 - x * x))),
    "arctan": (np.arctan, _d(lambda x, y: 1.0 / (1 + x * x))),
    "sinh": (np.sinh, _d(lambda x, y: np.cosh(x))),
    "cosh": (np.cosh, _d(lambda x, y: np.sinh(x))),
    "tanh": (np.tanh, _d(lambda x, y: 1 - y * y)),
    "arcsinh": (np.arcsinh, _d(lambda x, y: 1.0 / np.sqrt(x * x + 1))),
    "arccosh": (np.arccosh, _d(lambda x, y: 1.0 / np.sqrt(x * x - 1))),
    "arctanh": (np.arctanh, _d(lambda x, y: 1.0 / (1 - x * x))),
    "degrees": (np.degrees, _d(lambda x, y: np.full_like(x, 180.0 / np.pi))),
    "radians": (np.radians, _d(lambda x, y: np.full_like(x, np.pi / 180.0))),
}

#: unary ops with a bool result (no gradient)
UNARY_BOOL: dict[str, Callable] = {
    "logical_not": np.logical_not,
    "isnan": np.isnan,
    "isinf": np.isinf,
    "isfinite": np.isfinite,
    "isposinf": np.isposinf,
    "isneginf": np.isneginf,
}


def _as_dtype(y: np.ndarray, dtype) -> np.ndarray:
    """`y` cast to `dtype` as MXNet's kernels store results (no error on nan/inf to int)."""
    y = np.asarray(y)
    return y if y.dtype == dtype else y.astype(dtype)


def legacy_expr(op_name: str, *xs: S.Expr) -> S.Expr:
    """The scalar expression of legacy elementwise op `op_name` applied to `xs` (one definition
    of the value for both operator families)."""
    return get_op(op_name).expr({}, *xs)


def _float_or(dtype, allowed_kinds: str = "") -> str | None:
    """`dtype`'s name when it is a float, or its kind is in `allowed_kinds`; else None."""
    t = np.dtype(dtype)
    return t.name if t.kind == "f" or t.kind in allowed_kinds else None


#: unary ops -> their scalar expression (default: the legacy op of the same name's)
UNARY_EXPRS: dict[str, Callable] = {
    "absolute": lambda x: legacy_expr("abs", x),
    "rint": lambda x: S.call("rint", x),      # numpy rounds halves to even (legacy rint: toward -inf)
}
#: unary ops a kernel computes exactly in an integer dtype (the others, as `forward`, go through
#: float64 for integer input and keep their numpy step)
UNARY_INT_EXACT = frozenset({"absolute", "negative", "square"})


class _Unary(NumpyElementwise):
    """y = f(x), elementwise, in x's dtype. Its gradient op g = dy * f'(x, y) is differentiable in
    turn (second-order gradients): d g / d dy is the gradient op itself, d g / d x and d g / d y
    come from the partial derivatives of f' (`deriv2`)."""
    inputs = ("x",)
    fn: Callable
    suffix: str
    deriv: Callable
    deriv2: Callable

    def backward_grad(self, F, attrs, inputs, ograds):
        """Gradients of `_backward<name>(dy, x, y)` for its output gradient ograds[0]."""
        dy, x, y = inputs
        g_dy = F.apply(f"_backward{self.name}", [ograds[0], x, y])[0]
        g_x, g_y = F.apply(f"_backward2{self.name}", [ograds[0], dy, x, y])
        return [g_dy, g_x, g_y]

    def expr(self, attrs, x):
        make = UNARY_EXPRS.get(self.suffix)
        return make(x) if make is not None else legacy_expr(self.suffix, x)

    def compute_dtype(self, attrs, in_dtypes):
        return _float_or(in_dtypes[0], "iu" if self.suffix in UNARY_INT_EXACT else "")

    def forward(self, attrs, x):
        src = x.astype(np.int8) if x.dtype.kind == "b" else x     # numpy refuses some bool math
        return _as_dtype(type(self).fn(src), x.dtype)

    def vjp(self, attrs, xs, ys, dys):
        return [dys[0] * type(self).deriv(xs[0], ys[0])]


#: bool-valued unary tests -> (scalar expression, input dtype kinds a kernel computes exactly)
UNARY_BOOL_EXPRS: dict[str, tuple[Callable, str]] = {
    "logical_not": (S.logical_not, "fiub"),
    "isnan": (lambda x: S.ne(x, x), "f"),
    "isinf": (lambda x: S.eq(S.call("abs", x), float("inf")), "f"),
    "isfinite": (lambda x: S.call("abs", x) < float("inf"), "f"),
    "isposinf": (lambda x: S.eq(x, float("inf")), "f"),
    "isneginf": (lambda x: S.eq(x, float("-inf")), "f"),
}


class _UnaryBool(NumpyElementwise):
    """A bool-valued test of each element."""
    inputs = ("x",)
    no_gradient = True
    fn: Callable
    suffix: str

    def expr(self, attrs, x):
        return UNARY_BOOL_EXPRS[self.suffix][0](x)

    def compute_dtype(self, attrs, in_dtypes):
        t = np.dtype(in_dtypes[0])
        return t.name if t.kind in UNARY_BOOL_EXPRS[self.suffix][1] else None

    def forward(self, attrs, x):
        return type(self).fn(x)

    def out_types(self, attrs, in_types):
        return [np.dtype(bool)]


def _zero(x, y):
    return np.zeros_like(x), np.zeros_like(y)


#: partial derivatives (d f'/d x, d f'/d y) of each unary op's derivative f'(x, y)
UNARY_DERIV2: dict[str, Callable] = {
    "reciprocal": lambda x, y: (np.zeros_like(x), -2 * y),
    "square": lambda x, y: (np.full_like(x, 2.0), np.zeros_like(y)),
    "sqrt": lambda x, y: (np.zeros_like(x), -0.5 / (y * y)),
    "cbrt": lambda x, y: (np.zeros_like(x), -2.0 / (3 * y ** 3)),
    "exp": lambda x, y: (np.zeros_like(x), np.ones_like(y)),
    "expm1": lambda x, y: (np.zeros_like(x), np.ones_like(y)),
    "log": lambda x, y: (-1.0 / (x * x), np.zeros_like(y)),
    "log10": lambda x, y: (-1.0 / (x * x * np.log(10.0)), np.zeros_like(y)),
    "log2": lambda x, y: (-1.0 / (x * x * np.log(2.0)), np.zeros_like(y)),
    "log1p": lambda x, y: (-1.0 / ((1 + x) * (1 + x)), np.zeros_like(y)),
    "sin": lambda x, y: (-np.sin(x), np.zeros_like(y)),
    "cos": lambda x, y: (-np.cos(x), np.zeros_like(y)),
    "tan": lambda x, y: (np.zeros_like(x), 2 * y),
    "arcsin": lambda x, y: (x * (1 - x * x) ** -1.5, np.zeros_like(y)),
    "arccos": lambda x, y: (-x * (1 - x * x) ** -1.5, np.zeros_like(y)),
    "arctan": lambda x, y: (-2 * x / (1 + x * x) ** 2, np.zeros_like(y)),
    "sinh": lambda x, y: (np.sinh(x), np.zeros_like(y)),
    "cosh": lambda x, y: (np.cosh(x), np.zeros_like(y)),
    "tanh": lambda x, y: (np.zeros_like(x), -2 * y),
    "arcsinh": lambda x, y: (-x * (x * x + 1) ** -1.5, np.zeros_like(y)),
    "arccosh": lambda x, y: (-x * (x * x - 1) ** -1.5, np.zeros_like(y)),
    "arctanh": lambda x, y: (2 * x / (1 - x * x) ** 2, np.zeros_like(y)),
}


class _UnaryGradGrad(NumpyOp):
    """(d/dx, d/dy) of g = dy * f'(x, y) weighted by g's gradient `ograd`: ograd * dy * d f'."""
    inputs = ("ograd", "dy", "x", "y")
    n_outputs = 2
    no_gradient = True
    hidden = True
    deriv2: Callable

    def out_types(self, attrs, in_types):
        return [in_types[2], in_types[3]]

    def forward(self, attrs, ograd, dy, x, y):
        dx, dyy = type(self).deriv2(x, y)
        w = ograd * dy
        return (w * dx).astype(x.dtype, copy=False), (w * dyy).astype(y.dtype, copy=False)


def _register_unary() -> None:
    for suffix, (fn, deriv) in UNARY.items():
        deriv2 = UNARY_DERIV2.get(suffix, _zero)
        cls = type(f"Np_{suffix}", (_Unary,), {"fn": staticmethod(fn), "deriv": staticmethod(deriv),
                                               "suffix": suffix,
                                               "deriv2": staticmethod(deriv2),
                                               "__doc__": f"numpy.{fn.__name__}, elementwise."})
        register_numpy(f"_npi_{suffix}", aliases=("_npi_abs",) if suffix == "absolute" else ())(cls)
        register_numpy(f"_backward2_npi_{suffix}")(type(f"Np_{suffix}_grad_grad", (_UnaryGradGrad,), {
            "deriv2": staticmethod(deriv2), "__doc__": f"Second-order gradient parts of _npi_{suffix}."}))
    for suffix, fn in UNARY_BOOL.items():
        cls = type(f"Np_{suffix}", (_UnaryBool,), {"fn": staticmethod(fn), "suffix": suffix,
                                                   "__doc__": f"numpy.{suffix}."})
        register_numpy(f"_npi_{suffix}")(cls)


_register_unary()


@register_numpy("_npi_bitwise_not")
class BitwiseNot(NumpyOp):
    """~x for integer and bool arrays."""
    inputs = ("x",)
    no_gradient = True

    def forward(self, attrs, x):
        if x.dtype.kind == "f":
            raise MXNetError(f"{self.name}: bitwise_not is not defined for {x.dtype.name}")
        return np.invert(x)


@register_numpy("_npi_around")
class Around(NumpyOp):
    """numpy.around to `decimals` (gradient zero, as MXNet)."""
    inputs = ("x",)
    params = {"decimals": Param(Int, 0)}

    def forward(self, attrs, x):
        return _as_dtype(np.around(x, attrs["decimals"]), x.dtype)

    def vjp(self, attrs, xs, ys, dys):
        return [np.zeros_like(xs[0])]


@register_numpy("_npi_nan_to_num")
class NanToNum(NumpyOp):
    """nan -> `nan`, +inf -> `posinf`, -inf -> `neginf` (dtype's extremes when None)."""
    inputs = ("x",)
    params = {"copy": Param(Bool, True), "nan": Param(Float, 0.0),
              "posinf": Param(lambda v: None if v in (None, "None") else Float(v), None),
              "neginf": Param(lambda v: None if v in (None, "None") else Float(v), None)}

    def forward(self, attrs, x):
        return np.nan_to_num(x, nan=attrs["nan"], posinf=attrs["posinf"], neginf=attrs["neginf"])

    def vjp(self, attrs, xs, ys, dys):
        return [dys[0] * np.isfinite(xs[0])]


# ---- binary ----------------------------------------------------------------------------------

#: MXNet op suffix -> (numpy function, vjp (x1, x2, y, dy) -> (d x1, d x2) or None, dtype rule)
#: dtype rule: "mixed" (promote_mixed), "divide" (promote_divide), "same" (equal dtypes needed)
BINARY: dict[str, tuple] = {
    "add": (np.add, lambda a, b, y, g: (g, g), "mixed"),
    "subtract": (np.subtract, lambda a, b, y, g: (g, -g), "mixed"),
    "multiply": (np.multiply, lambda a, b, y, g: (g * b, g * a), "mixed"),
    "true_divide": (np.true_divide, lambda a, b, y, g: (g / b, -g * a / (b * b)), "divide"),
    "mod": (np.mod, lambda a, b, y, g: (g, -g * np.floor_divide(a, b)), "mixed"),
    "power": (np.power, lambda a, b, y, g: (g * b * np.power(a, b - 1),
                                            g * y * np.log(np.where(a > 0, a, 1))), "mixed"),
    "maximum": (np.maximum, lambda a, b, y, g: (g * (a >= b), g * (a < b)), "same"),
    "minimum": (np.minimum, lambda a, b, y, g: (g * (a <= b), g * (a > b)), "same"),
    "fmax": (np.fmax, lambda a, b, y, g: (g * (a >= b), g * (a < b)), "same"),
    "fmin": (np.fmin, lambda a, b, y, g: (g * (a <= b), g * (a > b)), "same"),
    "fmod": (np.fmod, lambda a, b, y, g: (g, -g * np.trunc(a / b)), "same"),
    "hypot": (np.hypot, lambda a, b, y, g: (g * a / y, g * b / y), "same"),
    "arctan2": (np.arctan2, lambda a, b, y, g: (g * b / (a * a + b * b), -g * a / (a * a + b * b)), "same"),
    "copysign": (np.copysign, lambda a, b, y, g: (g * np.sign(a) * np.sign(y), np.zeros_like(b)), "same"),
    "ldexp": (lambda a, b: a * np.power(2.0, b), lambda a, b, y, g: (g * np.power(2.0, b), g * y * np.log(2.0)),
              "same"),
    "lcm": (np.lcm, None, "int"),
    "gcd": (np.gcd, None, "int"),
    "bitwise_and": (np.bitwise_and, None, "int"),
    "bitwise_or": (np.bitwise_or, None, "int"),
    "bitwise_xor": (np.bitwise_xor, None, "int"),
}

COMPARISONS: dict[str, Callable] = {
    "equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "less": np.less, "less_equal": np.less_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}


def _np_mod(a: S.Expr, b: S.Expr) -> S.Expr:
    """numpy.mod: the legacy (Python-style) mod, and b / b where b == 0 (nan for floats, 0 for
    integers, as numpy)."""
    return S.select(S.eq(b, 0.0), b / b, legacy_expr("broadcast_mod", a, b))


def _np_fmax(a: S.Expr, b: S.Expr, pick) -> S.Expr:
    """numpy.fmax / fmin: the other operand where one is nan."""
    return S.select(S.ne(a, a), b, S.select(S.ne(b, b), a, pick(a, b)))


def _legacy_binary(name: str) -> Callable:
    return lambda a, b: legacy_expr(name, a, b)


#: how a kernel computes a binary op: its scalar expression, whether integer dtypes compute
#: exactly in themselves (`int_exact`), and whether 32/64-bit integers go through float64 as
#: numpy's float functions do (`float_math`)
BINARY_EXPRS: dict[str, tuple[Callable, bool, bool]] = {
    "add": (_legacy_binary("broadcast_add"), True, False),
    "subtract": (_legacy_binary("broadcast_sub"), True, False),
    "multiply": (_legacy_binary("broadcast_mul"), True, False),
    "true_divide": (_legacy_binary("broadcast_div"), False, False),
    "mod": (_np_mod, True, False),
    "power": (_legacy_binary("broadcast_power"), False, False),
    "maximum": (_legacy_binary("broadcast_maximum"), True, False),
    "minimum": (_legacy_binary("broadcast_minimum"), True, False),
    "fmax": (lambda a, b: _np_fmax(a, b, S.maximum), True, False),
    "fmin": (lambda a, b: _np_fmax(a, b, S.minimum), True, False),
    "hypot": (_legacy_binary("broadcast_hypot"), False, True),
    "arctan2": (lambda a, b: S.call("atan2", a, b), False, True),
    "ldexp": (lambda a, b: a * S.pow_(2.0, b), False, False),
    "equal": (_legacy_binary("broadcast_equal"), True, False),
    "not_equal": (_legacy_binary("broadcast_not_equal"), True, False),
    "greater": (_legacy_binary("broadcast_greater"), True, False),
    "greater_equal": (_legacy_binary("broadcast_greater_equal"), True, False),
    "less": (_legacy_binary("broadcast_lesser"), True, False),
    "less_equal": (_legacy_binary("broadcast_lesser_equal"), True, False),
    "logical_and": (_legacy_binary("broadcast_logical_and"), True, False),
    "logical_or": (_legacy_binary("broadcast_logical_or"), True, False),
    "logical_xor": (_legacy_binary("broadcast_logical_xor"), True, False),
}


def binary_dtype(op: str, rule: str, a, b) -> np.dtype:
    """The result dtype of binary op `op` with dtype rule `rule` on dtypes a, b."""
    a, b = np.dtype(a), np.dtype(b)
    if rule == "mixed":
        return promote_mixed(a, b)
    if rule == "divide":
        return promote_divide(a, b)
    if rule == "bool":
        return np.dtype(bool)
    if rule == "compare":
        if a != b:
            raise MXNetError(f"{op}: operands must have the same dtype, got {a.name} and {b.name}")
        return np.dtype(bool)
    if rule == "int" and (a.kind == "f" or b.kind == "f"):
        raise MXNetError(f"{op}: defined for integer and bool arrays only, got {a.name} and {b.name}")
    if a != b:
        raise MXNetError(f"{op}: operands must have the same dtype, got {a.name} and {b.name}")
    return a


class _Binary(NumpyOp):
    """y = f(x1, x2) with numpy broadcasting."""
    inputs = ("x1", "x2")
    fn: Callable
    suffix: str
    rule: str = "same"
    vjp_fn: Callable | None = None

    def out_types(self, attrs, in_types):
        return [binary_dtype(self.name, self.rule, *in_types)]

    def forward(self, attrs, a, b):
        dt = binary_dtype(self.name, self.rule, a.dtype, b.dtype)
        if self.rule in ("mixed", "divide") and dt.kind == "f":
            a, b = a.astype(dt, copy=False), b.astype(dt, copy=False)
        elif dt.kind == "b" and self.rule in ("mixed", "same"):    # numpy refuses some bool math
            a, b = a.astype(np.int8), b.astype(np.int8)
        return _as_dtype(type(self).fn(a, b), dt)

    def vjp(self, attrs, xs, ys, dys):
        a, b = xs
        dt = ys[0].dtype
        if dt.kind != "f":
            return [None, None]
        return list(type(self).vjp_fn(a.astype(dt, copy=False), b.astype(dt, copy=False), ys[0], dys[0]))


class _BinaryExpr(_Binary, NumpyElementwise):
    """A binary op with a scalar expression (`BINARY_EXPRS`)."""

    def expr(self, attrs, a, b):
        return BINARY_EXPRS[self.suffix][0](a, b)

    def compute_dtype(self, attrs, in_dtypes):
        try:
            out = binary_dtype(self.name, self.rule, *in_dtypes)
        except MXNetError:
            return None
        _, int_exact, float_math = BINARY_EXPRS[self.suffix]
        if self.rule == "compare":
            return np.dtype(in_dtypes[0]).name
        if out.kind == "f":
            return out.name
        if out.kind in "iu" and int_exact:
            return out.name
        if out.kind in "iu" and float_math and out.itemsize >= 4:
            return "float64"
        return None


class _Scalar(NumpyOp):
    """y = f(x, scalar) (or f(scalar, x) for the reversed ops), in the array's dtype."""
    inputs = ("data",)
    params = {"scalar": Param(Float, 0.0), "is_int": Param(Bool, True)}
    fn: Callable
    rule: str = "same"
    reverse: bool = False
    vjp_fn: Callable | None = None

    def _scalar_dtype(self, x_dtype, attrs) -> np.dtype:
        x_dtype = np.dtype(x_dtype)
        if self.rule == "bool":
            return np.dtype(bool)
        if self.rule == "divide" and x_dtype.kind != "f":
            return np.dtype(np.float32)
        if x_dtype.kind == "b" and self.rule in ("mixed", "divide", "same"):
            return np.dtype(np.int64)
        return x_dtype

    def out_types(self, attrs, in_types):
        return [self._scalar_dtype(in_types[0], attrs)]

    def _operands(self, attrs, x):
        """(operands in order, result dtype): the scalar in the result's dtype, as MXNet's kernels
        cast it (an int32 array ** 2.5 is the array ** 2)."""
        dt = self._scalar_dtype(x.dtype, attrs)
        s = attrs["scalar"]
        if self.rule == "bool":
            s = np.asarray(int(s) if attrs["is_int"] and float(s).is_integer() else s)
        else:
            s = np.asarray(s).astype(dt) if np.isfinite(s) or dt.kind == "f" else np.asarray(0, dt)
            x = x.astype(dt, copy=False)
        return (s, x) if self.reverse else (x, s), dt

    def forward(self, attrs, x):
        (a, b), dt = self._operands(attrs, x)
        return _as_dtype(type(self).fn(a, b), dt)

    def vjp(self, attrs, xs, ys, dys):
        if ys[0].dtype.kind != "f" or type(self).vjp_fn is None:
            return [None]
        (a, b), dt = self._operands(attrs, xs[0])
        grads = type(self).vjp_fn(a, b, ys[0], dys[0])
        return [grads[1] if self.reverse else grads[0]]


class _ScalarExpr(_Scalar, NumpyElementwise):
    """An array-and-scalar op with a scalar expression (`BINARY_EXPRS`): the scalar is a constant
    of the compute dtype, converted as `forward` converts it."""

    def expr(self, attrs, x):
        c = S.Const(attrs["scalar"])
        fn = BINARY_EXPRS[self.suffix][0]
        return fn(c, x) if self.reverse else fn(x, c)

    def compute_dtype(self, attrs, in_dtypes):
        x, s = np.dtype(in_dtypes[0]), float(attrs["scalar"])
        if self.rule == "bool":     # compared as numpy compares an array with a Python number
            if x.kind == "f":
                return x.name
            return "int64" if s.is_integer() else "float64"
        dt = self._scalar_dtype(x, attrs)
        if dt.kind == "f":
            return dt.name
        int_exact = BINARY_EXPRS[self.suffix][1]
        if not int_exact and not (self.name == "_npi_power_scalar" and s >= 0):
            return None
        return dt.name if dt.kind in "iu" and np.isfinite(s) and s.is_integer() else None


def _register_binary() -> None:
    for suffix, (fn, vjp_fn, rule) in BINARY.items():
        attrs = {"fn": staticmethod(fn), "rule": rule, "suffix": suffix,
                 "__doc__": f"numpy.{suffix} with broadcasting."}
        if vjp_fn is None:
            attrs["no_gradient"] = True
        else:
            attrs["vjp_fn"] = staticmethod(vjp_fn)
        binary, scalar = (_BinaryExpr, _ScalarExpr) if suffix in BINARY_EXPRS else (_Binary, _Scalar)
        register_numpy(f"_npi_{suffix}")(type(f"Np_{suffix}", (binary,), attrs))
        sattrs = dict(attrs, __doc__=f"numpy.{suffix} of an array and a scalar.")
        register_numpy(f"_npi_{suffix}_scalar")(type(f"Np_{suffix}_scalar", (scalar,), sattrs))
        if suffix not in ("add", "multiply", "maximum", "minimum", "fmax", "fmin", "hypot", "lcm", "gcd",
                          "bitwise_and", "bitwise_or", "bitwise_xor"):
            rattrs = dict(sattrs, reverse=True, __doc__=f"numpy.{suffix} of a scalar and an array.")
            register_numpy(f"_npi_r{suffix}_scalar")(type(f"Np_r{suffix}_scalar", (scalar,), rattrs))
    for suffix, fn in COMPARISONS.items():
        attrs = {"fn": staticmethod(fn), "rule": "compare", "no_gradient": True, "suffix": suffix,
                 "__doc__": f"numpy.{suffix} with broadcasting (bool result; equal dtypes needed)."}
        register_numpy(f"_npi_{suffix}")(type(f"Np_{suffix}", (_BinaryExpr,), attrs))
        register_numpy(f"_npi_{suffix}_scalar")(type(f"Np_{suffix}_scalar", (_ScalarExpr,),
                                                     dict(attrs, rule="bool")))


_register_binary()


@register_numpy("_npi_cast")
class NpCast(NumpyElementwise):
    """x as `dtype` (the gradient is cast back to x's dtype)."""
    inputs = ("x",)
    params = {"dtype": Param(Dtype)}

    def expr(self, attrs, x):
        return S.cast(x, attrs["dtype"])

    def compute_dtype(self, attrs, in_dtypes):
        """In x's dtype, except float to unsigned (numpy's conversion of negative floats to
        unsigned integers is the platform's)."""
        t, to = np.dtype(in_dtypes[0]), np.dtype(attrs["dtype"])
        return None if t.kind == "f" and to.kind == "u" else t.name

    def out_types(self, attrs, in_types):
        return [np.dtype(attrs["dtype"])]

    def forward(self, attrs, x):
        return x.astype(attrs["dtype"])

    def vjp(self, attrs, xs, ys, dys):
        return [dys[0]]
