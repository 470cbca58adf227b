"""`Custom`: an operator whose forward and backward are Python code registered at run time
(MXNet's `mx.operator.CustomOp` / `CustomOpProp`, `mx.nd.Custom`, `mx.sym.Custom`).

The ops layer knows custom operators only through the `CustomKernel` protocol below; the frontend
(`symjit.operator`) adapts a user's `CustomOpProp` to it and registers a factory per `op_type`
with `register_custom`. Everything else is an ordinary op: `Custom` has its inputs (the prop's
arguments, then its auxiliary states), outputs, shape and dtype inference (the prop's
`infer_shape` / `infer_type`), a reference implementation (calls the kernel's forward) and a
gradient rule (one hidden `_backward_Custom` node that calls the kernel's backward). Codegen
never lowers it, so a compiled graph runs it as a host step between its native segments
(`codegen/llvm/graph.py`: `Step(node=...)`), with the buffers of the planned graph.

Invariants: attributes other than `op_type` are kept as strings (the prop's constructor gets
them as MXNet passes them); the aux states' new values are hidden outputs after the visible ones
(the backward node reads them, as MXNet's backward sees the aux states its forward wrote) and
again the results after all outputs (`state_targets`), written back by every executor; a kernel instance serializes its calls (one
lock per instance), so compiled graphs run from several threads call it one at a time; the op is
never merged by CSE nor constant-folded (user code may have side effects).
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Mapping, Protocol

import numpy as np

from ..base import MXNetError
from .attrs import Param, Str
from .registry import FRONTEND_ATTRS, ComputeContext, Op, register

__all__ = ["CustomKernel", "register_custom", "custom_kernel", "registered_custom_ops"]


class CustomKernel(Protocol):
    """What the `Custom` op needs of a user-defined operator (one per attribute set)."""

    def arguments(self) -> list[str]: ...
    def outputs(self) -> list[str]: ...
    def aux_states(self) -> list[str]: ...
    def need_top_grad(self) -> bool: ...

    def infer_shape(self, in_shapes: list) -> tuple[list, list, list]:
        """(argument shapes, output shapes, aux shapes) from the argument shapes."""

    def infer_type(self, in_types: list) -> tuple[list, list, list]:
        """(argument dtypes, output dtypes, aux dtypes) as numpy dtype names."""

    def forward(self, is_train: bool, args: list, aux: list, out_specs: list) -> tuple[list, list]:
        """(outputs, new aux values) as numpy arrays; `out_specs`: (shape, dtype) per output."""

    def backward(self, ograds: list, args: list, outputs: list, aux: list) -> list:
        """Gradients of the arguments as numpy arrays (in the arguments' shapes)."""


#: op_type -> factory(**string attributes) -> CustomKernel
_FACTORIES: dict[str, Callable[..., CustomKernel]] = {}
#: (op_type, factory, attribute items) -> kernel; one kernel per node configuration
_KERNELS: dict[tuple, CustomKernel] = {}
_LOCK = threading.Lock()


def register_custom(op_type: str, factory: Callable[..., CustomKernel]) -> None:
    """Make `Custom(op_type=op_type, **attrs)` build its kernel with `factory(**attrs)`.
    Registering a name again replaces the previous operator (as MXNet's `operator.register`)."""
    if not isinstance(op_type, str) or not op_type:
        raise MXNetError(f"Custom: op_type must be a non-empty string, got {op_type!r}")
    with _LOCK:
        _FACTORIES[op_type] = factory
        for key in [k for k in _KERNELS if k[0] == op_type]:
            del _KERNELS[key]


def registered_custom_ops() -> list[str]:
    return sorted(_FACTORIES)


def custom_kernel(attrs: Mapping[str, Any]) -> CustomKernel:
    """The kernel of a `Custom` node with these (parsed) attributes."""
    op_type = attrs["op_type"]
    factory = _FACTORIES.get(op_type)
    if factory is None:
        raise MXNetError(f"Custom: no custom operator registered as op_type={op_type!r} "
                         f"(registered: {registered_custom_ops()}); use mx.operator.register")
    kwargs = {k: v for k, v in attrs.items() if k != "op_type"}
    key = (op_type, id(factory), tuple(sorted(kwargs.items())))
    with _LOCK:
        kernel = _KERNELS.get(key)
    if kernel is None:
        try:
            kernel = factory(**kwargs)
        except MXNetError:
            raise
        except Exception as e:  # noqa: BLE001 - user code: report as the op's error
            raise MXNetError(f"Custom[{op_type}]: creating the operator failed: {type(e).__name__}: {e}") from e
        with _LOCK:
            kernel = _KERNELS.setdefault(key, kernel)
    return kernel


def _user_call(op_type: str, what: str, fn, *args):
    try:
        return fn(*args)
    except MXNetError:
        raise
    except Exception as e:  # noqa: BLE001 - user code: report as the op's error
        raise MXNetError(f"Custom[{op_type}]: {what} failed: {type(e).__name__}: {e}") from e


def _as_shape(s) -> tuple | None:
    if s is None:
        return None
    return tuple(int(d) for d in s)


class _CustomBase(Op):
    is_random = True   # user code: never merged by CSE nor constant-folded
    #: the declared attribute; any others are the prop's constructor arguments (see `parse`)
    params = {"op_type": Param(Str, doc="the name given to mx.operator.register")}

    def parse(self, raw):
        """`op_type` plus any other attributes, kept as MXNet strings."""
        out = {}
        for k, v in raw.items():
            if k in FRONTEND_ATTRS or (k.startswith("__") and k.endswith("__")):
                continue
            if v is None:
                continue
            out[k] = v if isinstance(v, str) else _attr_str(v)
        if "op_type" not in out:
            raise MXNetError(f"{self.name}: required attribute 'op_type' is missing")
        return out


def _attr_str(v) -> str:
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(_attr_str(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, (np.integer, np.floating, np.bool_)):
        v = v.item()
    return str(v)


@register("Custom")
class Custom(_CustomBase):
    """Apply the Python operator registered as `op_type` (mx.operator.register)."""
    inputs = ()

    def input_names(self, attrs):
        k = custom_kernel(attrs)
        return list(k.arguments()) + list(k.aux_states())

    def aux_input_names(self, attrs):
        return list(custom_kernel(attrs).aux_states())

    def state_targets(self, attrs):
        return self.aux_input_names(attrs)

    def num_outputs(self, attrs):
        k = custom_kernel(attrs)
        return len(k.outputs()) + len(k.aux_states())

    def num_visible_outputs(self, attrs):
        return len(custom_kernel(attrs).outputs())

    def output_names(self, attrs):
        k = custom_kernel(attrs)
        return list(k.outputs()) + [f"{a}_state" for a in k.aux_states()]

    def infer_shape(self, attrs, in_shapes):
        k = custom_kernel(attrs)
        n_arg, n_aux, n_out = len(k.arguments()), len(k.aux_states()), len(k.outputs())
        args = list(in_shapes[:n_arg])
        if any(s is None or not all(s) for s in args):
            return list(in_shapes), [None] * (n_out + n_aux)
        res = _user_call(attrs["op_type"], "infer_shape", k.infer_shape, [list(s) for s in args])
        ins, outs, aux = _split3(attrs["op_type"], "infer_shape", res, n_arg, n_out, n_aux)
        aux = [_as_shape(s) for s in aux]
        return [_as_shape(s) for s in ins] + aux, [_as_shape(s) for s in outs] + aux

    def infer_type(self, attrs, in_types):
        k = custom_kernel(attrs)
        n_arg, n_aux, n_out = len(k.arguments()), len(k.aux_states()), len(k.outputs())
        args = list(in_types[:n_arg])
        if any(t is None for t in args):
            return list(in_types), [None] * (n_out + n_aux)
        res = _user_call(attrs["op_type"], "infer_type", k.infer_type, args)
        ins, outs, aux = _split3(attrs["op_type"], "infer_type", res, n_arg, n_out, n_aux)
        name = lambda t: None if t is None else np.dtype(t).name  # noqa: E731
        aux = [name(t) for t in aux]
        return [name(t) for t in ins] + aux, [name(t) for t in outs] + aux

    def compute(self, attrs, inputs, ctx: ComputeContext):
        k = custom_kernel(attrs)
        n_arg = len(k.arguments())
        if len(inputs) != n_arg + len(k.aux_states()):
            raise MXNetError(f"Custom[{attrs['op_type']}]: expected {n_arg + len(k.aux_states())} inputs, "
                             f"got {len(inputs)}")
        args, aux = list(inputs[:n_arg]), list(inputs[n_arg:])
        _, out_shapes = self.infer_shape(attrs, [x.shape for x in inputs])
        _, out_types = self.infer_type(attrs, [x.dtype.name for x in inputs])
        n_out = len(k.outputs())
        specs = [(s, t) for s, t in zip(out_shapes[:n_out], out_types[:n_out])]
        if any(s is None or t is None for s, t in specs):
            raise MXNetError(f"Custom[{attrs['op_type']}]: cannot infer the output shapes/dtypes")
        outs, new_aux = k.forward(bool(ctx.is_train), args, aux, specs)
        new_aux = [np.ascontiguousarray(a) for a in new_aux]
        # the aux states' new values: hidden outputs (what the backward node reads, as MXNet's
        # in-place aux), then again as the state updates executors write back
        return [np.ascontiguousarray(o) for o in outs] + new_aux + [a.copy() for a in new_aux]

    def grad(self, F, attrs, inputs, outputs, ograds):
        k = custom_kernel(attrs)
        n_out, n_arg, n_aux = len(k.outputs()), len(k.arguments()), len(k.aux_states())
        new_aux = list(outputs[n_out:n_out + n_aux])
        return F.apply("_backward_Custom", [*ograds[:n_out], *inputs[:n_arg], *new_aux, *outputs[:n_out]],
                       **attrs)


@register("_backward_Custom")
class BackwardCustom(_CustomBase):
    """Gradients of a `Custom` node's inputs from (output gradients, inputs, outputs); aux states
    get zero gradients."""
    inputs = ()
    hidden = True

    def input_names(self, attrs):
        k = custom_kernel(attrs)
        return ([f"ograd_{o}" for o in k.outputs()] + list(k.arguments()) + list(k.aux_states())
                + [f"out_{o}" for o in k.outputs()])

    def num_outputs(self, attrs):
        k = custom_kernel(attrs)
        return len(k.arguments()) + len(k.aux_states())

    def _inputs_slice(self, attrs, seq):
        k = custom_kernel(attrs)
        n_out, n_in = len(k.outputs()), len(k.arguments()) + len(k.aux_states())
        return list(seq[n_out:n_out + n_in])

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), self._inputs_slice(attrs, in_shapes)

    def infer_type(self, attrs, in_types):
        return list(in_types), self._inputs_slice(attrs, in_types)

    def compute(self, attrs, inputs, ctx):
        k = custom_kernel(attrs)
        n_out, n_arg, n_aux = len(k.outputs()), len(k.arguments()), len(k.aux_states())
        ograds = list(inputs[:n_out])
        args = list(inputs[n_out:n_out + n_arg])
        aux = list(inputs[n_out + n_arg:n_out + n_arg + n_aux])
        outs = list(inputs[n_out + n_arg + n_aux:])
        grads = k.backward(ograds, args, outs, aux)
        return ([np.ascontiguousarray(g) for g in grads]
                + [np.zeros_like(a) for a in aux])


def _split3(op_type: str, what: str, res, n_arg: int, n_out: int, n_aux: int) -> tuple[list, list, list]:
    """(ins, outs, aux) of a prop's inference result, checked against the declared counts."""
    if not isinstance(res, (tuple, list)) or len(res) not in (2, 3):
        raise MXNetError(f"Custom[{op_type}]: {what} must return (inputs, outputs[, aux]), got {res!r}")
    ins, outs = list(res[0]), list(res[1])
    aux = list(res[2]) if len(res) == 3 else []
    for label, got, want in (("inputs", ins, n_arg), ("outputs", outs, n_out), ("aux states", aux, n_aux)):
        if len(got) != want:
            raise MXNetError(f"Custom[{op_type}]: {what} returned {len(got)} {label}, expected {want}")
    return ins, outs, aux
