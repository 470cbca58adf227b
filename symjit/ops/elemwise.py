"""Elementwise operators: unary math, binary (same shape and broadcasting), scalar forms.

Each op is its scalar expression (`symjit.ops.scalar`). Gradients need no per-op
rule: `Elementwise.grad` differentiates the expression symbolically and emits one
`_elemwise_expr` node per input (summed back over broadcast axes with
`_broadcast_backward`), so backward graphs are elementwise too and fuse like the
forward ones, and second-order gradients come for free.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..base import MXNetError
from . import scalar as S
from .attrs import Any_, Bool, Count, Dtype, Enum, Float, Param
from .registry import Elementwise, Op, broadcast_shapes, merge_shape, register, shape_known


def _expr_grad(op: Elementwise, F, attrs, inputs, outputs, ograds, expr: S.Expr | None = None):
    """Gradient of an elementwise op from its scalar expression (see module docstring), or,
    for activations with a derivative in terms of their output (`_grad_from_output`), from
    the output: as MXNet's backward kernels, and the input then need not be kept."""
    dydx = _grad_from_output(op, attrs) if expr is None else None
    if dydx is not None:
        g = F.apply("_elemwise_expr", [outputs[0], ograds[0]], expr=S.Input(1) * dydx, num_args=2)[0]
        return [g]
    expr = op.full_expr(attrs) if expr is None else expr
    n = len(inputs)
    dy = S.Input(n)
    grads = []
    for i, x in enumerate(inputs):
        d = S.diff(expr, i)
        if d.op == "const" and d.value == 0.0:
            grads.append(F.zeros_like(x))
            continue
        g_expr = dy * d if not (d.op == "const" and d.value == 1.0) else dy
        used = sorted(S.inputs_of(g_expr))
        remap = {old: S.Input(new) for new, old in enumerate(used)}
        args = [inputs[j] if j < n else ograds[0] for j in used]
        if g_expr == dy:
            g = ograds[0]
        else:
            g = F.apply("_elemwise_expr", args, expr=S.substitute(g_expr, remap), num_args=len(args))[0]
        if op.broadcast and not _same_known_shape(outputs[0], x):
            g = F._broadcast_backward(g, x)
        grads.append(g)
    return grads


#: dy/dx of activations as expressions of their output y = Input(0) (MXNet's relu_grad,
#: sigmoid_grad, tanh_grad); equal to the derivative of the forward expression, with no
#: overflow (the sigmoid's exp(-x)/(1+exp(-x))**2 is nan for x < -88 in float32)
_OUTPUT_GRADS = {
    # MXNet 1.9's relu_grad: NaN where the value is NaN (it propagates), else the step
    "relu": lambda y: S.select(S.ne(y, y), y, S.select(y > 0.0, 1.0, 0.0)),
    "sigmoid": lambda y: y * (1.0 - y),
    "tanh": lambda y: 1.0 - y * y,
}
_OUTPUT_GRADS.update({"_npx_relu": _OUTPUT_GRADS["relu"], "_npx_sigmoid": _OUTPUT_GRADS["sigmoid"]})


def _grad_from_output(op, attrs):
    """dy/dx in terms of the output for the unary activations of `_OUTPUT_GRADS`, else None."""
    kind = attrs.get("act_type") if op.name == "Activation" else op.name
    fn = _OUTPUT_GRADS.get(kind)
    return fn(S.Input(0)) if fn is not None else None


def _same_known_shape(a, b) -> bool:
    """True when both values have the same fully known shape (no reduction needed)."""
    sa, sb = getattr(a, "shape", None), getattr(b, "shape", None)
    return sa is not None and sb is not None and tuple(sa) == tuple(sb) and all(d > 0 for d in sa)


Elementwise.grad = _expr_grad  # every Elementwise op differentiates through its expression


# --------------------------------------------------------------------------------------
# The generic expression op (fusion groups and gradients) and broadcast reduction
# --------------------------------------------------------------------------------------

@register("_elemwise_expr")
class ElemwiseExpr(Elementwise):
    """out = expr(arg0, ..., argN-1), inputs broadcast together (fused elementwise kernel)."""
    params = {"expr": Param(Any_), "num_args": Param(Count)}
    broadcast = True
    hidden = True

    def input_names(self, attrs):
        return [f"arg{i}" for i in range(attrs["num_args"])]

    def expr(self, attrs, *xs):
        return S.substitute(attrs["expr"], {i: x for i, x in enumerate(xs)})


@register("_broadcast_backward")
class BroadcastBackward(Op):
    """Sum `data` over the axes along which `like` was broadcast, giving `like`'s shape."""
    inputs = ("data", "like")
    kernel = "reduce"
    hidden = True

    def infer_shape(self, attrs, in_shapes):
        data, like = in_shapes
        if shape_known(data) and shape_known(like):
            if len(like) > len(data) or broadcast_shapes(self.name, [data, like]) != tuple(data):
                raise MXNetError(f"{self.name}: data {tuple(data)} is not a broadcast of like {tuple(like)}")
        return list(in_shapes), [in_shapes[1]]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[0]]

    def compute(self, attrs, inputs, ctx):
        self.infer_shape(attrs, [a.shape for a in inputs])
        return [sum_to_shape(inputs[0], inputs[1].shape)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.broadcast_like(ograds[0], inputs[0]), F.zeros_like(inputs[1])]


def sum_to_shape(x: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum `x` down to `shape` (the reverse of numpy broadcasting)."""
    lead = x.ndim - len(shape)
    if lead < 0:
        raise MXNetError(f"_broadcast_backward: cannot reduce shape {x.shape} to {shape}")
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                      if d == 1 and x.shape[lead + i] != 1)
    out = x.sum(axis=axes, keepdims=True) if axes else x
    return np.ascontiguousarray(out.reshape(shape)).astype(x.dtype, copy=False)


# --------------------------------------------------------------------------------------
# Unary math
# --------------------------------------------------------------------------------------

def _unary(name: str, fn: Callable[[S.Expr], S.Expr], aliases=(), doc: str = "") -> None:
    cls = type(name.strip("_").capitalize() + "Op", (Elementwise,), {
        "expr": lambda self, attrs, x: fn(x), "doc": doc or f"y = {name}(x), elementwise.",
        "lists_input_names": False})
    register(name, aliases)(cls)


def relu_grad_expr(y: S.Expr) -> S.Expr:
    """relu's derivative as an expression of its output y (what its gradient multiplies by)."""
    return _OUTPUT_GRADS["relu"](y)


def relu_expr(x: S.Expr) -> S.Expr:
    """max(x, 0) that propagates NaN (MXNet 1.9's relu). The kernel library recognises an
    epilogue that is exactly this of the result and applies it in its stores."""
    return S.select(S.logical_or(x > 0.0, S.ne(x, x)), x, 0.0)


def rint_expr(x: S.Expr) -> S.Expr:
    """The nearest integer, halves toward -inf (MXNet's rint: 2.5 -> 2, -2.5 -> -3): floor(x)
    unless ceil(x) is strictly nearer. Built from floor/ceil so every backend rounds alike."""
    lo, hi = S.call("floor", x), S.call("ceil", x)
    return S.select((x - lo) <= (hi - x), lo, hi)


_UNARY_TABLE: dict[str, tuple[Callable[[S.Expr], S.Expr], tuple]] = {
    "abs": (lambda x: S.call("abs", x), ()),
    "sign": (lambda x: S.call("sign", x), ()),
    "exp": (lambda x: S.call("exp", x), ()),
    "expm1": (lambda x: S.call("expm1", x), ()),
    "log": (lambda x: S.call("log", x), ()),
    "log1p": (lambda x: S.call("log1p", x), ()),
    "log2": (lambda x: S.call("log2", x), ()),
    "log10": (lambda x: S.call("log10", x), ()),
    "sqrt": (lambda x: S.call("sqrt", x), ()),
    "rsqrt": (lambda x: 1.0 / S.call("sqrt", x), ()),
    "square": (lambda x: x * x, ()),
    "cbrt": (lambda x: S.call("cbrt", x), ()),
    "rcbrt": (lambda x: 1.0 / S.call("cbrt", x), ()),
    "reciprocal": (lambda x: 1.0 / x, ()),
    "sin": (lambda x: S.call("sin", x), ()),
    "cos": (lambda x: S.call("cos", x), ()),
    "tan": (lambda x: S.call("tan", x), ()),
    "arcsin": (lambda x: S.call("asin", x), ()),
    "arccos": (lambda x: S.call("acos", x), ()),
    "arctan": (lambda x: S.call("atan", x), ()),
    "sinh": (lambda x: S.call("sinh", x), ()),
    "cosh": (lambda x: S.call("cosh", x), ()),
    "tanh": (lambda x: S.call("tanh", x), ()),
    "arcsinh": (lambda x: S.call("asinh", x), ()),
    "arccosh": (lambda x: S.call("acosh", x), ()),
    "arctanh": (lambda x: S.call("atanh", x), ()),
    "degrees": (lambda x: x * float(180.0 / np.pi), ()),
    "radians": (lambda x: x * float(np.pi / 180.0), ()),
    "floor": (lambda x: S.call("floor", x), ()),
    "ceil": (lambda x: S.call("ceil", x), ()),
    "round": (lambda x: S.call("round", x), ()),
    "rint": (lambda x: rint_expr(x), ()),
    "trunc": (lambda x: S.call("trunc", x), ()),
    "fix": (lambda x: S.call("trunc", x), ()),
    "relu": (relu_expr, ()),
    "sigmoid": (lambda x: 1.0 / (1.0 + S.call("exp", -x)), ()),
    "softsign": (lambda x: x / (1.0 + S.call("abs", x)), ()),
    "erf": (lambda x: S.call("erf", x), ()),
    "erfinv": (lambda x: S.call("erfinv", x), ()),
    "gamma": (lambda x: S.call("tgamma", x), ()),
    "gammaln": (lambda x: S.call("lgamma", x), ()),
    "negative": (lambda x: -x, ()),
    "logical_not": (lambda x: S.logical_not(x), ()),
}

for _name, (_fn, _aliases) in _UNARY_TABLE.items():
    _unary(_name, _fn, _aliases)


@register("_copy", aliases=("identity",))
class Copy(Elementwise):
    """y = x, in a buffer of its own."""
    reshape_only = True

    def expr(self, attrs, x):
        return x


@register("BlockGrad", aliases=("stop_gradient",))
class BlockGrad(Elementwise):
    """Identity forward; no gradient flows to the input."""
    reshape_only = True
    gradient_barrier = True
    def expr(self, attrs, x):
        return x

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.zeros_like(inputs[0])]


@register("zeros_like")
class ZerosLike(Elementwise):
    """An array of zeros with the input's shape and dtype."""
    def expr(self, attrs, x):
        return S.Const(0.0)

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.zeros_like(inputs[0])]

    def compute(self, attrs, inputs, ctx):
        return [np.zeros_like(inputs[0])]


@register("ones_like")
class OnesLike(Elementwise):
    """An array of ones with the input's shape and dtype."""
    def expr(self, attrs, x):
        return S.Const(1.0)

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.zeros_like(inputs[0])]

    def compute(self, attrs, inputs, ctx):
        return [np.ones_like(inputs[0])]


@register("Cast", aliases=("cast",))
class Cast(Elementwise):
    """Convert to `dtype` with C conversion semantics (float -> uint8 wraps as MXNet's CPU)."""
    params = {"dtype": Param(Dtype)}

    def expr(self, attrs, x):
        return S.cast(x, attrs["dtype"])

    def out_dtype(self, attrs, in_dtype):
        return attrs["dtype"]

    def infer_type(self, attrs, in_types):
        return list(in_types), [attrs["dtype"]]

    def compute(self, attrs, inputs, ctx):
        return [np.ascontiguousarray(S.evaluate(S.cast(S.Input(0), attrs["dtype"]), inputs,
                                                inputs[0].dtype))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.Cast(ograds[0], dtype=np.dtype(inputs[0].dtype).name)]


@register("clip")
class Clip(Elementwise):
    """y = min(max(x, a_min), a_max); the gradient passes where a_min <= x <= a_max."""
    params = {"a_min": Param(Float), "a_max": Param(Float)}

    def expr(self, attrs, x):
        return S.minimum(S.maximum(x, attrs["a_min"]), attrs["a_max"])


_ACT = {
    "relu": relu_expr,
    "sigmoid": lambda x: 1.0 / (1.0 + S.call("exp", -x)),
    "tanh": lambda x: S.call("tanh", x),
    "softrelu": lambda x: S.select(x > 20.0, x, S.call("log1p", S.call("exp", x))),
    "softsign": lambda x: x / (1.0 + S.call("abs", x)),
}


def activation_expr(act_type: str, x: S.Expr) -> S.Expr:
    """The expression of `Activation(act_type=act_type)` applied to x (relu, sigmoid, tanh,
    softrelu or softsign), as the registry defines it."""
    return _ACT[act_type](x)


@register("hard_sigmoid")
class HardSigmoid(Elementwise):
    """y = max(0, min(1, alpha * x + beta))."""
    params = {"alpha": Param(Float, 0.2), "beta": Param(Float, 0.5)}

    def expr(self, attrs, x):
        return S.minimum(S.maximum(x * attrs["alpha"] + attrs["beta"], 0.0), 1.0)


@register("_contrib_div_sqrt_dim")
class DivSqrtDim(Op):
    """x / sqrt(size of the last axis) (the scale depends on the shape, so not a scalar expression)."""

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), [in_shapes[0]]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        return [np.ascontiguousarray(x / x.dtype.type(np.sqrt(x.shape[-1])))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F._contrib_div_sqrt_dim(ograds[0])]


@register("add_n", aliases=("ElementWiseSum", "_sparse_add_n"))
class AddN(Elementwise):
    """The sum of `num_args` same-shaped arrays (one fused elementwise kernel)."""
    params = {"num_args": Param(Count)}

    def input_names(self, attrs):
        return [f"arg{i}" for i in range(self.positive_count(attrs, "num_args"))]

    def expr(self, attrs, *xs):
        out = xs[0]
        for x in xs[1:]:
            out = out + x
        return out


@register("Activation")
class Activation(Elementwise):
    """Activation function chosen by `act_type` (relu, sigmoid, tanh, softrelu, softsign)."""
    params = {"act_type": Param(Enum(*_ACT))}
    lists_input_names = False

    def expr(self, attrs, x):
        return _ACT[attrs["act_type"]](x)


# --------------------------------------------------------------------------------------
# Binary: same-shape (elemwise_*), broadcasting (broadcast_*) and with a scalar
# --------------------------------------------------------------------------------------

_BINARY: dict[str, Callable[[S.Expr, S.Expr], S.Expr]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "mod": lambda a, b: S.call("mod", a, b),
    "power": lambda a, b: S.pow_(a, b),
    "maximum": S.maximum,
    "minimum": S.minimum,
    "hypot": lambda a, b: S.call("hypot", a, b),
    "equal": S.eq,
    "not_equal": S.ne,
    "greater": lambda a, b: a > b,
    "greater_equal": lambda a, b: a >= b,
    "lesser": lambda a, b: a < b,
    "lesser_equal": lambda a, b: a <= b,
    "logical_and": S.logical_and,
    "logical_or": S.logical_or,
    "logical_xor": S.logical_xor,
}

#: same-shape op names (MXNet registers these under several spellings)
_ELEMWISE_NAMES = {
    "add": ("elemwise_add", ("_plus", "_add", "_Plus")),
    "sub": ("elemwise_sub", ("_minus", "_sub", "_Minus")),
    "mul": ("elemwise_mul", ("_mul", "_Mul")),
    "div": ("elemwise_div", ("_div", "_Div", "_scatter_elemwise_div")),
    "mod": ("_mod", ("_Mod",)),
    "power": ("_power", ("_Power", "elemwise_pow")),
    "maximum": ("_maximum", ("_Maximum",)),
    "minimum": ("_minimum", ("_Minimum",)),
    "hypot": ("_hypot", ("_Hypot",)),
    "equal": ("_equal", ("_Equal",)),
    "not_equal": ("_not_equal", ("_Not_Equal",)),
    "greater": ("_greater", ("_Greater",)),
    "greater_equal": ("_greater_equal", ("_Greater_Equal",)),
    "lesser": ("_lesser", ("_Lesser",)),
    "lesser_equal": ("_lesser_equal", ("_Lesser_Equal",)),
    "logical_and": ("_logical_and", ("_Logical_And",)),
    "logical_or": ("_logical_or", ("_Logical_Or",)),
    "logical_xor": ("_logical_xor", ("_Logical_Xor",)),
}

_BROADCAST_ALIASES = {"add": ("broadcast_plus",), "sub": ("broadcast_minus",)}

#: scalar forms: (name, reversed?) — reversed means `scalar OP x`
_SCALAR_NAMES = {
    "add": [("_plus_scalar", False, ("_PlusScalar", "_scatter_plus_scalar"))],
    "sub": [("_minus_scalar", False, ("_MinusScalar", "_scatter_minus_scalar")), ("_rminus_scalar", True, ("_RMinusScalar",))],
    "mul": [("_mul_scalar", False, ("_MulScalar",))],
    "div": [("_div_scalar", False, ("_DivScalar",)), ("_rdiv_scalar", True, ("_RDivScalar",))],
    "mod": [("_mod_scalar", False, ("_ModScalar",)), ("_rmod_scalar", True, ("_RModScalar",))],
    "power": [("_power_scalar", False, ("_PowerScalar",)), ("_rpower_scalar", True, ("_RPowerScalar",))],
    "maximum": [("_maximum_scalar", False, ("_MaximumScalar",))],
    "minimum": [("_minimum_scalar", False, ("_MinimumScalar",))],
    "hypot": [("_hypot_scalar", False, ("_HypotScalar",))],
    "equal": [("_equal_scalar", False, ("_EqualScalar",))],
    "not_equal": [("_not_equal_scalar", False, ("_NotEqualScalar",))],
    "greater": [("_greater_scalar", False, ("_GreaterScalar",))],
    "greater_equal": [("_greater_equal_scalar", False, ("_GreaterEqualScalar",))],
    "lesser": [("_lesser_scalar", False, ("_LesserScalar",))],
    "lesser_equal": [("_lesser_equal_scalar", False, ("_LesserEqualScalar",))],
    "logical_and": [("_logical_and_scalar", False, ("_LogicalAndScalar",))],
    "logical_or": [("_logical_or_scalar", False, ("_LogicalOrScalar",))],
    "logical_xor": [("_logical_xor_scalar", False, ("_LogicalXorScalar",))],
}

_SCALAR_PARAMS = {"scalar": Param(Float), "is_int": Param(Bool, True)}


def _mod_grad(op, F, attrs, inputs, outputs, ograds):
    """MXNet's mod_grad / mod_rgrad are 0 for integer dtypes (x % y is piecewise constant
    there); floating dtypes differentiate the expression (1 and -floor(a / b))."""
    if np.dtype(inputs[0].dtype).kind in "iub":
        return [F.zeros_like(x) for x in inputs]
    return _expr_grad(op, F, attrs, inputs, outputs, ograds)


#: gradients that differ from the expression's derivative
_GRADS = {"mod": _mod_grad}


def _binary_class(fn, broadcast: bool, doc: str, grad=None) -> type:
    body = {"inputs": ("lhs", "rhs"), "broadcast": broadcast, "doc": doc,
            "expr": lambda self, attrs, a, b: fn(a, b)}
    if grad is not None:
        body["grad"] = grad
    return type("BinaryOp", (Elementwise,), body)


#: the scalar s for which `x OP s` is x (the `neutral_scalar` trait of the scalar forms)
_NEUTRAL = {"add": 0.0, "sub": 0.0, "mul": 1.0, "div": 1.0, "power": 1.0}


def _scalar_class(fn, reverse: bool, doc: str, neutral: float | None, grad=None) -> type:
    def expr(self, attrs, x):
        c = S.Const(attrs["scalar"])
        return fn(c, x) if reverse else fn(x, c)
    body = {"params": _SCALAR_PARAMS, "expr": expr, "doc": doc,
            "neutral_scalar": None if reverse else neutral}
    if grad is not None:
        body["grad"] = grad
    return type("ScalarOp", (Elementwise,), body)


for _key, _fn in _BINARY.items():
    _ename, _ealiases = _ELEMWISE_NAMES[_key]
    register(_ename, _ealiases)(_binary_class(_fn, False, f"Elementwise {_key} of same-shaped arrays.",
                                              _GRADS.get(_key)))
    register(f"broadcast_{_key}", _BROADCAST_ALIASES.get(_key, ()))(
        _binary_class(_fn, True, f"Elementwise {_key} with MXNet broadcasting.", _GRADS.get(_key)))
    for _sname, _rev, _saliases in _SCALAR_NAMES[_key]:
        register(_sname, _saliases)(_scalar_class(_fn, _rev, f"Elementwise {_key} with a scalar.",
                                                   _NEUTRAL.get(_key), _GRADS.get(_key)))


@register("where")
class Where(Op):
    """out = x where condition != 0 else y. `condition` has x's shape, or shape (x.shape[0],)
    to pick whole rows (MXNet semantics)."""
    inputs = ("condition", "x", "y")

    def infer_shape(self, attrs, in_shapes):
        c, x, y = in_shapes
        if c is None or not all(c):   # MXNet needs the condition's shape fully known
            return list(in_shapes), [None]
        xy = merge_shape(self.name, "input 'y'", x, y)
        if c is not None and xy is not None and len(c) != 1 and len(c) != len(xy):
            raise MXNetError(f"where: condition shape {c} must equal x's shape {xy} or be "
                             f"({xy[0]},)")
        if c is not None and xy is not None and len(c) == 1 and len(xy) > 1 and xy[0] and c[0] != xy[0]:
            raise MXNetError(f"where: a 1-D condition picks rows: its shape {tuple(c)} must be ({xy[0]},)")
        if c is not None and xy is not None and len(c) == len(xy):
            c = merge_shape(self.name, "input 'condition'", c, xy)
            xy = merge_shape(self.name, "input 'x'", xy, c)
        return [c, xy, xy], [xy]

    def infer_type(self, attrs, in_types):
        c, x, y = in_types
        t = x or y
        return [c or t, t, t], [t]

    def compute(self, attrs, inputs, ctx):
        c, x, y = inputs
        if x.shape != y.shape:
            raise MXNetError(f"where: shape mismatch between x {x.shape} and y {y.shape}")
        if c.shape != x.shape:
            if c.ndim != 1 or c.shape[0] != x.shape[0]:
                raise MXNetError(f"where: condition shape {c.shape} must equal x's shape {x.shape} "
                                 f"or be ({x.shape[0]},)")
            c = c.reshape((-1,) + (1,) * (x.ndim - 1))
        return [np.ascontiguousarray(np.where(c != 0, x, y))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        c, x, y = inputs
        dy = ograds[0]
        zeros = F.zeros_like(dy)
        return [F.zeros_like(c), F.where(c, dy, zeros), F.where(c, zeros, dy)]

