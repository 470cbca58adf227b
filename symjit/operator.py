"""symjit.operator (`mx.operator`): operators written in Python, as MXNet 1.x's.

    @mx.operator.register("sqr")
    class SqrProp(mx.operator.CustomOpProp):
        def list_arguments(self): return ["data"]
        def infer_shape(self, in_shape): return in_shape, [in_shape[0]], []
        def create_operator(self, ctx, shapes, dtypes): return Sqr()     # a CustomOp

    y = mx.nd.Custom(x, op_type="sqr")             # eager, recorded by autograd
    s = mx.sym.Custom(data, op_type="sqr")         # in Symbol graphs, executors, hybridized blocks

`register` adapts the prop class to the ops layer's `CustomKernel` protocol (`ops/custom.py`), so
`Custom` is one registered op: compiled graphs call back into Python for its node, and its
gradient is the `CustomOp.backward` the user wrote. Inside `forward`/`backward` the arrays are
NDArrays sharing the node's buffers' values, autograd recording is paused (MXNet runs custom
operators outside the recorded graph), and `req` is 'write' for every output and gradient.
`NumpyOp` / `NDArrayOp` are MXNet's older `PythonOp` interface, built on the same op.
"""
from __future__ import annotations

import ctypes
import itertools
import threading
from collections import namedtuple
from typing import Callable

import numpy as np

from .base import MXNetError, NDArrayHandle, py_str
from .ndarray import NDArray
from .ops.attrs import REQUIRED, format_attr
from .ops.custom import register_custom, registered_custom_ops
from .ops.registry import get_op, list_ops

__all__ = ["CustomOp", "CustomOpProp", "register", "get_all_registered_operators", "get_operator_arguments",
           "OperatorArguments", "PythonOp", "NumpyOp", "NDArrayOp",
           # what MXNet's module-level imports make `from mxnet.operator import *` give too
           "ctypes", "NDArrayHandle", "NDArray", "py_str"]


class CustomOp:
    """Base class of a Python operator's computation: override `forward` and `backward`."""

    def __init__(self):
        pass

    def forward(self, is_train, req, in_data, out_data, aux):
        """Compute `out_data` from `in_data` (lists of NDArrays); write with `self.assign`."""
        raise MXNetError(f"{type(self).__name__}: CustomOp.forward is not overridden")

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        """Compute `in_grad` from `out_grad`, `in_data` and `out_data`; write with `self.assign`."""
        raise MXNetError(f"{type(self).__name__}: CustomOp.backward is not overridden")

    def assign(self, dst, req, src):
        """Write `src` into `dst` as `req` says ('null': nothing, 'write'/'inplace', 'add')."""
        if req == "null":
            return
        if req in ("write", "inplace"):
            dst[:] = src
        elif req == "add":
            dst[:] = dst + src
        else:
            raise MXNetError(f"CustomOp.assign: unknown req {req!r} (expected null, write, inplace, add)")


class CustomOpProp:
    """Base class of a Python operator's properties: its arguments, outputs, aux states, shape and
    dtype inference, and `create_operator`. `need_top_grad=False` marks a loss (its backward
    does not read the output gradients)."""

    def __init__(self, need_top_grad: bool = True):
        self.need_top_grad_ = need_top_grad

    def infer_shape(self, in_shape):
        return in_shape, (in_shape[0],) * len(self.list_outputs()), ()

    def infer_type(self, in_type):
        t = in_type[0] if in_type else np.float32
        return in_type, [t] * len(self.list_outputs()), [t] * len(self.list_auxiliary_states())

    def infer_storage_type(self, in_stype):
        return in_stype, ["default"] * len(self.list_outputs()), ["default"] * len(self.list_auxiliary_states())

    def infer_storage_type_backward(self, ograd_stype, in_stype, out_stype, igrad_stype, aux_stype):
        return (ograd_stype, in_stype, out_stype, ["default"] * len(in_stype),
                ["default"] * len(aux_stype))

    def list_outputs(self):
        return ["output"]

    def list_arguments(self):
        return ["data"]

    def list_auxiliary_states(self):
        return []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        deps = []
        if self.need_top_grad_:
            deps.extend(out_grad)
        deps.extend(in_data)
        deps.extend(out_data)
        return deps

    def create_operator(self, ctx, in_shapes, in_dtypes):
        return CustomOp()


class _PropKernel:
    """A `CustomOpProp` instance seen through the ops layer's `CustomKernel` protocol."""

    def __init__(self, op_type: str, prop: CustomOpProp):
        self.op_type = op_type
        self.prop = prop
        self._args = list(prop.list_arguments())
        self._outs = list(prop.list_outputs())
        self._aux = list(prop.list_auxiliary_states())
        self._operators: dict = {}
        self._lock = threading.RLock()     # one call at a time into the user's operator

    def arguments(self):
        return self._args

    def outputs(self):
        return self._outs

    def aux_states(self):
        return self._aux

    def need_top_grad(self):
        return bool(getattr(self.prop, "need_top_grad_", True))

    def infer_shape(self, in_shapes):
        return self.prop.infer_shape([list(s) for s in in_shapes])

    def infer_type(self, in_types):
        res = self.prop.infer_type([np.dtype(t).type for t in in_types])
        return tuple([np.dtype(t).name if t is not None else None for t in part] for part in res)

    def _operator(self, shapes: list, dtypes: list):
        from .context import current_context
        key = (tuple(map(tuple, shapes)), tuple(dtypes))
        op = self._operators.get(key)
        if op is None:
            op = self._call("create_operator", self.prop.create_operator, current_context(),
                            [list(s) for s in shapes], [np.dtype(t).type for t in dtypes])
            self._operators[key] = op
        return op

    def _call(self, what: str, fn: Callable, *args):
        try:
            return fn(*args)
        except MXNetError as e:
            raise MXNetError(f"Custom[{self.op_type}]: {what}: {e}") from e
        except Exception as e:  # noqa: BLE001 - user code: reported as the op's error
            raise MXNetError(f"Custom[{self.op_type}]: {what} failed: {type(e).__name__}: {e}") from e

    def forward(self, is_train, args, aux, out_specs):
        from . import autograd
        from .ndarray import NDArray
        with self._lock:
            op = self._operator([a.shape for a in args], [a.dtype for a in args])
            in_data = [NDArray(np.array(a, copy=True)) for a in args]
            aux_data = [NDArray(np.array(a, copy=True)) for a in aux]
            out_data = [NDArray(np.zeros(s, dtype=t)) for s, t in out_specs]
            with autograd.pause(train_mode=is_train):
                self._call("forward", op.forward, is_train, ["write"] * len(out_data), in_data, out_data,
                           aux_data)
            return [o._data for o in out_data], [a._data for a in aux_data]

    def backward(self, ograds, args, outputs, aux):
        from . import autograd
        from .ndarray import NDArray
        with self._lock:
            op = self._operator([a.shape for a in args], [a.dtype for a in args])
            wrap = lambda xs: [NDArray(np.array(x, copy=True)) for x in xs]  # noqa: E731
            in_grad = [NDArray(np.zeros(a.shape, dtype=a.dtype)) for a in args]
            with autograd.pause():
                self._call("backward", op.backward, ["write"] * len(in_grad), wrap(ograds), wrap(args),
                           wrap(outputs), in_grad, wrap(aux))
            return [g._data for g in in_grad]


def register(reg_name: str):
    """Class decorator: register a `CustomOpProp` subclass as `Custom(op_type=reg_name)`. The
    node's other attributes are passed to the prop's constructor as strings."""
    def deco(prop_cls):
        if not (isinstance(prop_cls, type) and issubclass(prop_cls, CustomOpProp)):
            raise MXNetError(f"operator.register({reg_name!r}): expected a CustomOpProp subclass, got {prop_cls!r}")

        def factory(**kwargs):
            return _PropKernel(reg_name, prop_cls(**kwargs))
        register_custom(reg_name, factory)
        return prop_cls
    return deco


def get_all_registered_operators():
    """Names of every registered operator (aliases included), as MXNet's."""
    return list_ops()


def get_all_custom_operators():
    """Names of the Python operators registered with `register`."""
    return registered_custom_ops()


OperatorArguments = namedtuple("OperatorArguments", ["narg", "names", "types"])

#: how MXNet describes an attribute's kind, by the parser's name
_KIND_NAMES = {"Int": "int", "Float": "float", "Bool": "boolean", "Str": "string", "Shape": "Shape(tuple)",
               "Dtype": "int", "FloatTuple": "tuple of <float>"}


def _describe(param) -> str:
    kind = getattr(param.kind, "__name__", "")
    if kind.startswith("Enum"):
        choices = sorted(param.kind.__name__[4:].strip("[]").replace("'", "").split(", "))
        text = "{" + ", ".join(f"'{c}'" for c in choices) + "}"
    else:
        text = _KIND_NAMES.get(kind, kind.lower() or "string")
    if param.default is REQUIRED:
        return f"{text}, required"
    return f"{text}, optional, default={format_attr(param.default)}"


def get_operator_arguments(op_name: str) -> OperatorArguments:
    """(number of arguments, their names, their type descriptions) of a registered operator:
    its inputs ('NDArray-or-Symbol') then its attributes, in MXNet's spelling."""
    op = get_op(op_name)
    inputs = [n for n in op.inputs]
    names = inputs + list(op.params)
    types = ["NDArray-or-Symbol"] * len(inputs) + [_describe(p) for p in op.params.values()]
    return OperatorArguments(len(names), names, types)


# ---- MXNet's older PythonOp interface --------------------------------------------------------

_PYTHON_OP_IDS = itertools.count()


class PythonOp:
    """Base class of MXNet's legacy Python operators: override `forward`, `backward`,
    `infer_shape`, `list_outputs`, `list_arguments`; `get_symbol(*args, **kwargs)` makes the
    node (a `Custom` op registered for this instance)."""

    def __init__(self, need_top_grad: bool = True):
        self.info_ = None
        self.need_top_grad_ = need_top_grad

    def __call__(self, *args, **kwargs):
        return self.get_symbol(*args, **kwargs)

    def get_symbol(self, *args, **kwargs):
        from . import symbol
        op_type = f"_python_op_{type(self).__name__}_{next(_PYTHON_OP_IDS)}"
        register(op_type)(self._prop_class())
        return symbol.Custom(*args, op_type=op_type, **kwargs)

    def forward(self, in_data, out_data):
        out_data[0][:] = in_data[0]

    def backward(self, out_grad, in_data, out_data, in_grad):
        in_grad[0][:] = out_grad[0]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]]

    def list_outputs(self):
        return ["output"]

    def list_arguments(self):
        return ["data"]

    def need_top_grad(self):
        return self.need_top_grad_

    def _convert_in(self, arrays: list) -> list:
        """The arrays the legacy methods see (NDArrays; numpy arrays for NumpyOp)."""
        return arrays

    def _prop_class(self):
        legacy = self

        class _Op(CustomOp):
            def forward(self, is_train, req, in_data, out_data, aux):
                outs = legacy._convert_in(out_data)
                legacy.forward(in_data=legacy._convert_in(in_data), out_data=outs)
                for dst, src in zip(out_data, outs):
                    if src is not dst:
                        dst[:] = src

            def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
                grads = legacy._convert_in(in_grad)
                legacy.backward(out_grad=legacy._convert_in(out_grad), in_data=legacy._convert_in(in_data),
                                out_data=legacy._convert_in(out_data), in_grad=grads)
                for dst, src in zip(in_grad, grads):
                    if src is not dst:
                        dst[:] = src

        class _Prop(CustomOpProp):
            def __init__(self):
                super().__init__(need_top_grad=legacy.need_top_grad_)

            def list_arguments(self):
                return legacy.list_arguments()

            def list_outputs(self):
                return legacy.list_outputs()

            def infer_shape(self, in_shape):
                res = legacy.infer_shape(in_shape)
                return (res[0], res[1], []) if len(res) == 2 else res

            def create_operator(self, ctx, in_shapes, in_dtypes):
                return _Op()
        return _Prop


class NDArrayOp(PythonOp):
    """A legacy Python operator whose methods get NDArrays."""


class NumpyOp(PythonOp):
    """A legacy Python operator whose methods get numpy arrays (written in place)."""

    def _convert_in(self, arrays):
        return [a._data for a in arrays]
