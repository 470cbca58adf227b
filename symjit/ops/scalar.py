"""The scalar expression language of elementwise operators.

An elementwise op defines its value at one element as an `Expr` over its inputs
(`Input(i)`), constants and a fixed set of primitive functions. That one
definition is used by:
  * the numpy reference (`evaluate`, vectorised over whole arrays),
  * elementwise fusion (expressions compose by `substitute`),
  * the code generators (each primitive below has an LLVM and a CUDA lowering).

Invariants
  * Expressions are immutable and hash-consed: structurally equal means identical, so
    `==` and `hash` are O(1) (CSE and caches key on them).
  * Arithmetic is done in one compute dtype per expression; constants take that dtype.
  * Comparisons and logical ops yield 1 or 0 in the compute dtype (MXNet semantics),
    and `select(c, a, b)` tests `c != 0`.
"""
from __future__ import annotations

import functools
import struct
import threading
import weakref
from typing import Callable, Mapping, Sequence

import numpy as np

__all__ = ["Expr", "Input", "Const", "UNARY", "BINARY", "evaluate", "substitute", "inputs_of",
           "select", "cast", "call", "maximum", "minimum", "eq", "ne", "logical_and", "logical_or",
           "logical_xor", "logical_not", "pow_", "to_text", "diff"]


#: live expressions by (op, args, value key); an entry goes when its expression is collected
_INTERNED: "weakref.WeakValueDictionary[tuple, Expr]" = weakref.WeakValueDictionary()
_INTERN_LOCK = threading.Lock()


def _value_key(v) -> tuple:
    """The interning key of a leaf/cast value: floats by their bits, so 0.0 and -0.0 (equal as
    numbers) stay distinct constants and NaN constants are shared."""
    if isinstance(v, float):
        return (float, struct.pack("<d", v))
    return (type(v), v)


class Expr:
    """A node of a scalar expression: `op` applied to `args`; `value` for leaves and casts.

    Expressions are hash-consed: constructing an expression equal in structure to a live
    one returns that same object (children are interned first, so the intern key holds
    the children themselves and compares them by identity). Hence structural equality is
    identity, `==` and `hash` are O(1) on any DAG, and memos keyed by expressions never walk
    trees. Expressions are immutable; fusion shares subexpressions, so every operation on
    them works per distinct node, never per path.
    """
    __slots__ = ("op", "args", "value", "_hash", "__weakref__")

    def __new__(cls, op: str, args: tuple = (), value: object = None):
        args = tuple(args)
        for a in args:
            if type(a) is not Expr:
                raise TypeError(f"scalar expression {op!r}: arguments must be Expr, got {type(a).__name__}")
        key = (op, args, _value_key(value))
        with _INTERN_LOCK:
            e = _INTERNED.get(key)
            if e is None:
                e = object.__new__(cls)
                object.__setattr__(e, "op", op)
                object.__setattr__(e, "args", args)
                object.__setattr__(e, "value", value)
                object.__setattr__(e, "_hash", hash(key))
                _INTERNED[key] = e
        return e

    def __setattr__(self, name, value):
        raise AttributeError(f"scalar expressions are immutable (cannot set {name!r})")

    def __delattr__(self, name):
        raise AttributeError(f"scalar expressions are immutable (cannot delete {name!r})")

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return self is other

    def __ne__(self, other) -> bool:
        return self is not other

    def __repr__(self) -> str:  # the let-bound text: linear in distinct nodes, as to_text
        return f"Expr<{to_text(self)}>"

    def __reduce__(self):  # hashes and identities are per process: rebuild (and intern) on load
        return (Expr, (self.op, self.args, self.value))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    # arithmetic builds larger expressions (comparisons too: `==` is identity, see above)
    def __add__(self, o): return Expr("add", (self, _e(o)))
    def __radd__(self, o): return Expr("add", (_e(o), self))
    def __sub__(self, o): return Expr("sub", (self, _e(o)))
    def __rsub__(self, o): return Expr("sub", (_e(o), self))
    def __mul__(self, o): return Expr("mul", (self, _e(o)))
    def __rmul__(self, o): return Expr("mul", (_e(o), self))
    def __truediv__(self, o): return Expr("div", (self, _e(o)))
    def __rtruediv__(self, o): return Expr("div", (_e(o), self))
    def __pow__(self, o): return Expr("pow", (self, _e(o)))
    def __rpow__(self, o): return Expr("pow", (_e(o), self))
    def __neg__(self): return Expr("neg", (self,))
    def __lt__(self, o): return Expr("lt", (self, _e(o)))
    def __le__(self, o): return Expr("le", (self, _e(o)))
    def __gt__(self, o): return Expr("gt", (self, _e(o)))
    def __ge__(self, o): return Expr("ge", (self, _e(o)))


def Input(i: int) -> Expr:
    """The i-th input of the op (or of the fused group)."""
    return Expr("input", (), int(i))


def Const(v) -> Expr:
    """A constant; it takes the expression's compute dtype."""
    return Expr("const", (), float(v))


def _e(x) -> Expr:
    return x if isinstance(x, Expr) else Const(x)


def _with_errstate(fn):
    def wrapped(*a):
        with np.errstate(all="ignore"):
            return fn(*a)
    return wrapped


def _special(name):
    def fn(x):
        import scipy.special as sp  # scipy.special: accurate erf/gamma/lgamma/erfinv for the reference
        return getattr(sp, name)(x)
    return fn


def _round_half_away(x):
    return np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5)).astype(x.dtype, copy=False)


def _int_div(a, b):
    """C-style integer division (truncates toward zero); division by zero gives 0."""
    safe = np.where(b == 0, 1, b)
    q = np.abs(a) // np.abs(safe) * np.sign(a) * np.sign(safe)
    return np.where(b == 0, 0, q)


def _mod(a, b):
    """Python-style modulo (result takes the sign of b), 0 where b == 0 (MXNet's `mod`)."""
    safe = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, np.mod(a, safe))


#: primitive unary functions: name -> numpy implementation.
UNARY: dict[str, Callable] = {
    "neg": np.negative, "abs": np.abs, "sign": np.sign, "exp": np.exp, "expm1": np.expm1,
    "log": np.log, "log1p": np.log1p, "log2": np.log2, "log10": np.log10, "sqrt": np.sqrt,
    "cbrt": np.cbrt, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
    "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "floor": np.floor,
    "ceil": np.ceil, "rint": np.rint, "round": _round_half_away, "trunc": np.trunc,
    "erf": _special("erf"), "erfinv": _special("erfinv"), "lgamma": _special("gammaln"),
    "tgamma": _special("gamma"), "digamma": _special("digamma"), "not": lambda x: (x == 0),
}

#: unary primitives numpy computes exactly in any float dtype (others go through float64)
_EXACT_UNARY = frozenset({"neg", "abs", "sign", "floor", "ceil", "rint", "round", "trunc", "not", "sqrt"})

#: primitive binary functions: name -> numpy implementation (on same-dtype operands).
BINARY: dict[str, Callable] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "pow": np.power, "max": np.maximum, "min": np.minimum, "mod": _mod, "hypot": np.hypot,
    "atan2": np.arctan2, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal,
    "and": lambda a, b: np.logical_and(a != 0, b != 0),
    "or": lambda a, b: np.logical_or(a != 0, b != 0),
    "xor": lambda a, b: np.logical_xor(a != 0, b != 0),
}


def call(fn: str, *args) -> Expr:
    """Apply a primitive function by name (see UNARY and BINARY)."""
    if fn in UNARY and len(args) == 1 or fn in BINARY and len(args) == 2:
        return Expr(fn, tuple(_e(a) for a in args))
    raise ValueError(f"unknown scalar primitive {fn!r} with {len(args)} arguments")


def select(cond, a, b) -> Expr:
    return Expr("select", (_e(cond), _e(a), _e(b)))


def cast(x, dtype: str) -> Expr:
    """Convert to `dtype` (an MXNet dtype name), with C conversion semantics."""
    return Expr("cast", (_e(x),), str(dtype))


def maximum(a, b) -> Expr: return call("max", a, b)
def minimum(a, b) -> Expr: return call("min", a, b)
def eq(a, b) -> Expr: return call("eq", a, b)
def ne(a, b) -> Expr: return call("ne", a, b)
def logical_and(a, b) -> Expr: return call("and", a, b)
def logical_or(a, b) -> Expr: return call("or", a, b)
def logical_xor(a, b) -> Expr: return call("xor", a, b)
def logical_not(a) -> Expr: return call("not", a)
def pow_(a, b) -> Expr: return call("pow", a, b)


def inputs_of(expr: Expr) -> set[int]:
    """Indices of the inputs an expression reads (iterative: deep expressions are fine)."""
    out: set[int] = set()
    seen: set[int] = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if e.op == "input":
            out.add(e.value)
        stack.extend(e.args)
    return out


def substitute(expr: Expr, mapping: Mapping[int, Expr]) -> Expr:
    """Replace `Input(i)` by `mapping[i]` (inputs not in the mapping stay)."""
    memo: dict[Expr, Expr] = {}

    def go(e: Expr) -> Expr:
        if e in memo:
            return memo[e]
        if e.op == "input":
            r = mapping.get(e.value, e)
        elif not e.args:
            r = e
        else:
            r = Expr(e.op, tuple(go(a) for a in e.args), e.value)
        memo[e] = r
        return r
    return go(expr)


def evaluate(expr: Expr, inputs: Sequence[np.ndarray], dtype) -> np.ndarray:
    """Evaluate an expression elementwise with numpy broadcasting, in compute dtype `dtype`.

    Inputs are converted to `dtype` first; the result has `dtype` unless the
    expression ends in a `cast`. Floating-point exceptions are silenced (inf/nan
    propagate as in compiled code).
    """
    dt = np.dtype(dtype)
    arrays = [np.asarray(a) for a in inputs]
    memo: dict[Expr, np.ndarray] = {}

    def go(e: Expr) -> np.ndarray:
        r = memo.get(e)
        if r is not None:
            return r
        if e.op == "input":
            r = arrays[e.value]
            if r.dtype != dt:
                r = r.astype(dt)
        elif e.op == "const":
            r = np.asarray(e.value).astype(dt)
        elif e.op == "cast":
            x = go(e.args[0])
            with np.errstate(all="ignore"):
                r = _c_cast(x, np.dtype(e.value))
        elif e.op == "select":
            c, a, b = (go(x) for x in e.args)
            r = np.where(c != 0, a, b)
        else:
            args = [go(a) for a in e.args]
            with np.errstate(all="ignore"):
                if e.op == "div" and not np.issubdtype(dt, np.floating):
                    r = _int_div(*args)
                elif e.op in UNARY:
                    x0 = args[0]
                    if e.op not in _EXACT_UNARY and x0.dtype in (np.float32, np.float16):
                        x0 = x0.astype(np.float64)  # correctly rounded, like libm's float functions
                    r = UNARY[e.op](x0)
                else:
                    r = BINARY[e.op](*args)
            r = np.asarray(r)
            target = args[0].dtype if e.op not in ("not",) else dt
            if r.dtype != target:
                r = r.astype(target)
        memo[e] = r
        return r
    return go(expr)


def _c_cast(x: np.ndarray, to: np.dtype) -> np.ndarray:
    """Cast with C semantics: floats to unsigned wrap through int64 as MXNet's CPU kernels do."""
    if np.issubdtype(x.dtype, np.floating) and np.issubdtype(to, np.integer):
        finite = np.where(np.isfinite(x), x, 0)
        return np.trunc(finite).astype(np.int64).astype(to)
    if to == np.bool_:
        return x != 0
    return x.astype(to)


def _postorder(expr: Expr) -> list[Expr]:
    """Distinct nodes of the DAG, children before parents (iterative)."""
    order: list[Expr] = []
    seen: set[Expr] = set()
    stack = [(expr, False)]
    while stack:
        e, done = stack.pop()
        if done:
            order.append(e)
            continue
        if e in seen:
            continue
        seen.add(e)
        stack.append((e, True))
        stack.extend((a, False) for a in reversed(e.args) if a not in seen)
    return order


def _leaf_text(e: Expr) -> str:
    if e.op == "input":
        return f"%{e.value}"
    v = e.value
    return repr(int(v)) if float(v).is_integer() and abs(v) < 1e15 else repr(v)


def to_text(expr: Expr) -> str:
    """A compact, stable textual form (used by the IR printer, tests and kernel names).

    Subexpressions used more than once are bound once (`let $0 = ...; in ...`), so the text
    grows with the number of distinct nodes, not with the number of paths in the DAG."""
    order = _postorder(expr)
    uses: dict[Expr, int] = {}
    for e in order:
        for a in e.args:
            uses[a] = uses.get(a, 0) + 1
    names: dict[Expr, str] = {}
    text: dict[Expr, str] = {}
    lets = []
    for e in order:
        if not e.args:
            t = _leaf_text(e)
        else:
            inner = ", ".join(names.get(a, text[a]) for a in e.args)
            t = f"cast<{e.value}>({inner})" if e.op == "cast" else f"{e.op}({inner})"
        text[e] = t
        if e.args and uses.get(e, 0) > 1:
            names[e] = f"${len(lets)}"
            lets.append(f"{names[e]} = {t}")
    return f"let {'; '.join(lets)}; in {text[expr]}" if lets else text[expr]


# --------------------------------------------------------------------------------------
# Symbolic differentiation: gradients of elementwise ops come from their expressions
# --------------------------------------------------------------------------------------

_ZERO = Const(0.0)
_ONE = Const(1.0)


def _is_const(e: Expr, v: float) -> bool:
    return e.op == "const" and e.value == v


def _mul(a: Expr, b: Expr) -> Expr:
    if _is_const(a, 0.0) or _is_const(b, 0.0):
        return _ZERO
    if _is_const(a, 1.0):
        return b
    if _is_const(b, 1.0):
        return a
    return Expr("mul", (a, b))


def _add(a: Expr, b: Expr) -> Expr:
    if _is_const(a, 0.0):
        return b
    if _is_const(b, 0.0):
        return a
    return Expr("add", (a, b))


def _sub(a: Expr, b: Expr) -> Expr:
    if _is_const(b, 0.0):
        return a
    return Expr("sub", (a, b))


#: primitives whose derivative is zero almost everywhere
PIECEWISE_CONSTANT = frozenset({"sign", "floor", "ceil", "rint", "round", "trunc", "not", "lt", "le",
                                "gt", "ge", "eq", "ne", "and", "or", "xor"})


def _local_derivatives(e: Expr) -> list[Expr]:
    """d e / d e.args[k] for each argument k, as expressions over the same leaves."""
    op, a = e.op, e.args
    x = a[0] if a else None
    if op in PIECEWISE_CONSTANT:
        return [_ZERO] * len(a)
    table = {
        "neg": lambda: [Const(-1.0)],
        "abs": lambda: [call("sign", x)],
        "exp": lambda: [e],
        "expm1": lambda: [call("exp", x)],
        "log": lambda: [1.0 / x],
        "log1p": lambda: [1.0 / (x + 1.0)],
        "log2": lambda: [1.0 / (x * float(np.log(2.0)))],
        "log10": lambda: [1.0 / (x * float(np.log(10.0)))],
        "sqrt": lambda: [0.5 / e],
        "cbrt": lambda: [1.0 / (3.0 * e * e)],
        "sin": lambda: [call("cos", x)],
        "cos": lambda: [-call("sin", x)],
        "tan": lambda: [1.0 + e * e],
        "asin": lambda: [1.0 / call("sqrt", 1.0 - x * x)],
        "acos": lambda: [-1.0 / call("sqrt", 1.0 - x * x)],
        "atan": lambda: [1.0 / (1.0 + x * x)],
        "sinh": lambda: [call("cosh", x)],
        "cosh": lambda: [call("sinh", x)],
        "tanh": lambda: [1.0 - e * e],
        "asinh": lambda: [1.0 / call("sqrt", x * x + 1.0)],
        "acosh": lambda: [1.0 / call("sqrt", x * x - 1.0)],
        "atanh": lambda: [1.0 / (1.0 - x * x)],
        "erf": lambda: [float(2.0 / np.sqrt(np.pi)) * call("exp", -(x * x))],
        "erfinv": lambda: [float(np.sqrt(np.pi) / 2.0) * call("exp", e * e)],
        "lgamma": lambda: [call("digamma", x)],
        "tgamma": lambda: [e * call("digamma", x)],
        "add": lambda: [_ONE, _ONE],
        "sub": lambda: [_ONE, Const(-1.0)],
        "mul": lambda: [a[1], a[0]],
        "div": lambda: [1.0 / a[1], -a[0] / (a[1] * a[1])],
        "pow": lambda: [a[1] * call("pow", a[0], a[1] - 1.0),
                        select(a[0] > 0.0, e * call("log", a[0]), _ZERO)],
        "max": lambda: [a[0] >= a[1], a[0] < a[1]],
        "min": lambda: [a[0] <= a[1], a[0] > a[1]],
        "mod": lambda: [_ONE, -call("floor", a[0] / a[1])],
        "hypot": lambda: [a[0] / e, a[1] / e],
        "atan2": lambda: [a[1] / (a[0] * a[0] + a[1] * a[1]), -a[0] / (a[0] * a[0] + a[1] * a[1])],
        "select": lambda: [_ZERO, select(a[0], _ONE, _ZERO), select(a[0], _ZERO, _ONE)],
        "cast": lambda: [_ONE],
    }
    if op not in table:
        raise ValueError(f"scalar primitive {op!r} has no derivative")
    return table[op]()


@functools.lru_cache(maxsize=4096)
def diff(expr: Expr, i: int) -> Expr:
    """d expr / d Input(i), by reverse accumulation over the expression DAG (shared nodes once).
    Memoized: expressions are immutable, and eager backward passes differentiate the same few
    expressions at every step."""
    order: list[Expr] = []
    seen: set[Expr] = set()

    def topo(e: Expr):
        if e in seen:
            return
        seen.add(e)
        for a in e.args:
            topo(a)
        order.append(e)
    topo(expr)
    adj: dict[Expr, Expr] = {expr: _ONE}
    for e in reversed(order):
        g = adj.get(e)
        if g is None or not e.args or _is_const(g, 0.0):
            continue
        for arg, d in zip(e.args, _local_derivatives(e)):
            adj[arg] = _add(adj.get(arg, _ZERO), _mul(g, d))
    return adj.get(Input(i), _ZERO)
