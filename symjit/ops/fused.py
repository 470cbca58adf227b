"""Operators that optimization passes create: constants, fused elementwise groups and
library ops with fused elementwise epilogues.

These are ordinary registered ops (hidden from the MXNet namespace's documentation), so the
interpreter runs optimized graphs with the same `compute` path as any other, and the code
generators find everything they need in the attributes:
  * `_const`           — a compile-time constant (attr `value`: a read-only numpy array);
  * `_fused_elemwise`  — one kernel computing several outputs, each a scalar expression over
                         the group's inputs broadcast to one iteration shape;
  * `_with_epilogue`   — a library op (GEMM, convolution, pooling...) whose output is
                         immediately transformed by elementwise expressions, applied while the
                         result is in registers: `Input(0)` of each expression is the inner op's
                         output, `Input(k)` (k >= 1) the extra inputs after the inner op's inputs;
  * `_conv_pool`       — a convolution (optionally relu'd) whose output only a max pooling
                         reads: one op, so that the convolution's output never has to be stored
                         whole (passes/conv_pool.py).
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from . import scalar as S
from .attrs import Any_, Count, Dtype, Param
from .registry import ComputeContext, Op, broadcast_shapes, fresh_array, get_op, register

#: the ops above that stand for several nodes of the graph before the passes (attr `members`:
#: those nodes' names), as reports and plots show them
FUSED_OPS = ("_fused_elemwise", "_with_epilogue", "_conv_pool", "_conv_blocked")


@register("_const")
class Const(Op):
    """A constant array known at compile time."""
    inputs = ()
    params = {"value": Param(Any_)}
    hidden = True
    differentiable = False
    kernel = "const"

    def parse(self, raw):
        attrs = super().parse(raw)
        value = np.asarray(attrs["value"])
        if value.ndim == 0:
            value = value.reshape(1)
        value = np.ascontiguousarray(value)
        value.setflags(write=False)
        return {"value": value}

    def infer_shape(self, attrs, in_shapes):
        return [], [tuple(attrs["value"].shape)]

    def infer_type(self, attrs, in_types):
        return [], [attrs["value"].dtype.name]

    def compute(self, attrs, inputs, ctx):
        return [np.array(attrs["value"], copy=True)]


@register("_fused_elemwise")
class FusedElemwise(Op):
    """Several elementwise expressions over shared inputs, computed in one pass.

    Every output has the broadcast shape of the inputs (the iteration space) and dtype
    `dtype` (fusion groups are single-dtype)."""
    params = {"exprs": Param(Any_), "num_args": Param(Count), "dtype": Param(Dtype),
              "members": Param(Any_, ())}  # names of the nodes fused here (for reports only)
    hidden = True
    differentiable = False
    kernel = "elementwise"

    def input_names(self, attrs):
        return [f"arg{i}" for i in range(attrs["num_args"])]

    def num_outputs(self, attrs):
        return len(attrs["exprs"])

    def output_names(self, attrs):
        return [f"output{i}" for i in range(len(attrs["exprs"]))]

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), [broadcast_shapes(self.name, in_shapes)] * len(attrs["exprs"])

    def infer_type(self, attrs, in_types):
        return [attrs["dtype"]] * len(in_types), [attrs["dtype"]] * len(attrs["exprs"])

    def compute(self, attrs, inputs, ctx):
        shape = broadcast_shapes(self.name, [x.shape for x in inputs])
        outs = []
        for e in attrs["exprs"]:
            r = S.evaluate(e, inputs, attrs["dtype"])
            outs.append(fresh_array(np.broadcast_to(r, shape), inputs))
        return outs


def relu_of_result() -> S.Expr:
    """The epilogue the kernel library applies in its own stores: relu of the inner result
    (Input(0)), as the registry's relu defines it."""
    from .elemwise import relu_expr
    return relu_expr(S.Input(0))


#: activations the kernel library applies in its own stores (ConvolutionRelu's `relu` attr and
#: the blocked kernels' descriptor field `relu`): none, relu, relu6 (clip to [0, 6])
ACT_NONE, ACT_RELU, ACT_RELU6 = 0, 1, 2


def relu6_of(x: S.Expr) -> S.Expr:
    """clip(x, 0, 6) as the registry's clip defines it (MobileNetV2's ReLU6)."""
    return get_op("clip").expr({"a_min": 0.0, "a_max": 6.0}, x)


def activation_of(expr: S.Expr, x: S.Expr) -> int | None:
    """The activation code (ACT_*) when `expr` is exactly that activation of `x`, else None."""
    from .elemwise import relu_expr
    for act, make in ((ACT_NONE, lambda e: e), (ACT_RELU, relu_expr), (ACT_RELU6, relu6_of)):
        if expr == make(x):
            return act
    return None


def apply_activation(act: int, y: np.ndarray) -> np.ndarray:
    """y with the activation code `act` applied by the registry's expressions."""
    if act == ACT_NONE:
        return y
    expr = relu_of_result() if act == ACT_RELU else relu6_of(S.Input(0))
    return np.asarray(S.evaluate(expr, [y], y.dtype), dtype=y.dtype)


def residual_epilogue(attrs) -> int | None:
    """The activation code when a `_with_epilogue` node's epilogue is act(result + extra) with
    exactly one extra input (a residual connection: ResNet's relu(conv + x), MobileNetV2's
    linear conv + x), else None."""
    if attrs["num_args"] != attrs["num_inner"] + 1 or len(attrs["exprs"]) != 1:
        return None
    for total in (S.Input(0) + S.Input(1), S.Input(1) + S.Input(0)):
        act = activation_of(attrs["exprs"][0], total)
        if act is not None:
            return act
    return None


def is_relu_epilogue(attrs) -> bool:
    """Whether a `_with_epilogue` node's epilogue is exactly relu of the inner result in place:
    one output, no inputs beyond the inner op's (passes and code generators ask this one
    question, so the kernel library's built-in relu is chosen the same way everywhere)."""
    return attrs["num_args"] == attrs["num_inner"] and tuple(attrs["exprs"]) == (relu_of_result(),)


@register("_with_epilogue")
class WithEpilogue(Op):
    """A library op followed by elementwise expressions of its output (see module docstring).

    attrs: `inner` (op name), `inner_attrs` (its parsed attributes), `exprs` (one per output),
    `num_inner` (inputs of the inner op), `num_args` (all inputs)."""
    params = {"inner": Param(Any_), "inner_attrs": Param(Any_), "exprs": Param(Any_),
              "num_inner": Param(Count), "num_args": Param(Count), "members": Param(Any_, ())}
    hidden = True
    differentiable = False
    kernel = "epilogue"  # the code generators dispatch on the inner op's own family

    def _inner(self, attrs) -> Op:
        return get_op(attrs["inner"])

    def input_names(self, attrs):
        inner = self._inner(attrs).input_names(attrs["inner_attrs"])
        return inner + [f"extra{i}" for i in range(attrs["num_args"] - attrs["num_inner"])]

    def num_outputs(self, attrs):
        return len(attrs["exprs"])

    def output_names(self, attrs):
        return [f"output{i}" for i in range(len(attrs["exprs"]))]

    def infer_shape(self, attrs, in_shapes):
        inner = self._inner(attrs)
        k = attrs["num_inner"]
        ins, outs = inner.infer_shape(attrs["inner_attrs"], list(in_shapes[:k]))
        shape = broadcast_shapes(self.name, [outs[0]] + list(in_shapes[k:]))
        return list(ins) + list(in_shapes[k:]), [shape] * len(attrs["exprs"])

    def infer_type(self, attrs, in_types):
        inner = self._inner(attrs)
        k = attrs["num_inner"]
        ins, outs = inner.infer_type(attrs["inner_attrs"], list(in_types[:k]))
        return list(ins) + [outs[0]] * (len(in_types) - k), [outs[0]] * len(attrs["exprs"])

    def compute(self, attrs, inputs, ctx: ComputeContext):
        inner = self._inner(attrs)
        k = attrs["num_inner"]
        y = inner.compute(attrs["inner_attrs"], list(inputs[:k]), ctx)[0]
        args = [y] + list(inputs[k:])
        shape = broadcast_shapes(self.name, [a.shape for a in args])
        if y.dtype.kind not in "fiub":
            raise MXNetError(f"{self.name}: unsupported dtype {y.dtype}")
        return [fresh_array(np.broadcast_to(S.evaluate(e, args, y.dtype), shape), args)
                for e in attrs["exprs"]]


class ConvolutionRelu(Op):
    """Base of ops that run a Convolution, optionally activated, then something more: attrs
    `conv_attrs` (the Convolution's parsed attributes), `relu` (an activation code ACT_*;
    False/True read as none/relu), `num_args` (the convolution's inputs: data, weight[, bias]),
    `members` (the names of the nodes it replaced)."""
    params = {"conv_attrs": Param(Any_), "relu": Param(Any_, False), "num_args": Param(Count),
              "members": Param(Any_, ())}
    hidden = True
    differentiable = False

    def input_names(self, attrs):
        return get_op("Convolution").input_names(attrs["conv_attrs"])

    def infer_type(self, attrs, in_types):
        return get_op("Convolution").infer_type(attrs["conv_attrs"], list(in_types))

    @staticmethod
    def convolution_relu(attrs, inputs, ctx: ComputeContext, residual=None) -> np.ndarray:
        """act(Convolution(inputs) [+ residual]) by the registered ops' reference
        implementations; `relu` is an activation code (ACT_*; False/True: none/relu)."""
        y = get_op("Convolution").compute(attrs["conv_attrs"], list(inputs), ctx)[0]
        if residual is not None:
            y = np.asarray(y + residual, dtype=y.dtype)
        return apply_activation(int(attrs["relu"]), y)


@register("_conv_pool")
class ConvPool(ConvolutionRelu):
    """Pooling(relu?(Convolution(inputs))): ConvolutionRelu's attrs and `pool_attrs` (the
    pooling's parsed attributes). Same values as the three ops in turn."""
    params = dict(ConvolutionRelu.params, pool_attrs=Param(Any_))
    kernel = "conv_pool"

    def infer_shape(self, attrs, in_shapes):
        ins, (y,) = get_op("Convolution").infer_shape(attrs["conv_attrs"], list(in_shapes))
        _, (out,) = get_op("Pooling").infer_shape(attrs["pool_attrs"], [y])
        return list(ins), [out]

    def compute(self, attrs, inputs, ctx: ComputeContext):
        return get_op("Pooling").compute(attrs["pool_attrs"], [self.convolution_relu(attrs, inputs, ctx)], ctx)
