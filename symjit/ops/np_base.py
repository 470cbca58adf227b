"""Base of the NumPy-semantics operators (`mx.np`'s `_np_*` / `_npi_*` ops).

A `NumpyOp` is defined by a numpy function (`forward`) over numpy arrays with NumPy's shape
rules (zero-dim arrays, broadcasting of any ranks) and, when differentiable, by its
vector-Jacobian product (`vjp`, numpy too). Registering one with `register_numpy` also
registers its gradient op `_backward<name>`, whose inputs are the output gradients, the forward
inputs and the forward outputs, and whose outputs are the input gradients; the forward op's
`grad` applies it through the Emitter, so eager autograd and graph autodiff share it.

Invariants: `compute` never returns arrays sharing memory with its inputs; shape inference runs
`forward` on zero-stride arrays of the given shapes (no input memory is allocated); gradient
results have the dtype and shape of the input they differentiate (zeros for inputs that are not
differentiable, such as integer arrays or indices).
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Callable, ClassVar, Mapping, Sequence

import numpy as np

from ..base import MXNetError
from .attrs import abbreviate, parse_literal
from .registry import Elementwise, Op, forward_shapes, merge_shape, register

__all__ = ["NumpyOp", "NumpyElementwise", "register_numpy",
           "Literal", "Axis", "promote_mixed", "promote_divide", "quiet_numpy",
           "FLOAT_KINDS", "unbroadcast", "normalize_axis", "fresh_array"]

#: numpy dtype kinds that carry gradients
FLOAT_KINDS = ("f",)


def Literal(v):
    """A Python literal attribute (int, float, None, tuple, string): strings are parsed as
    MXNet writes them ('(0, 1)', 'None', '2'); lists become tuples."""
    if isinstance(v, str):
        s = v.strip()
        try:
            v = parse_literal(s)
        except ValueError:
            return s
    if isinstance(v, list):
        return tuple(Literal(x) for x in v)
    if isinstance(v, tuple):
        return tuple(Literal(x) for x in v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def Axis(v):
    """An axis attribute: None, an int, or a tuple of ints."""
    v = Literal(v)
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        raise ValueError(f"expected an axis (int, tuple of ints or None), got {abbreviate(v)}")
    if isinstance(v, int):
        return v
    if isinstance(v, tuple) and all(isinstance(a, int) and not isinstance(a, bool) for a in v):
        return v
    raise ValueError(f"expected an axis (int, tuple of ints or None), got {abbreviate(v)}")


def normalize_axis(op: str, axis: int, ndim: int) -> int:
    """`axis` in [0, ndim), or MXNetError naming the op."""
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise MXNetError(f"{op}: axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % max(ndim, 1)


def _int_promote(a: np.dtype, b: np.dtype) -> np.dtype:
    t = np.promote_types(a, b)
    return np.dtype(np.int32) if t == np.int16 else t    # MXNet has no int16: u8 with i8 gives i32


def promote_mixed(a, b) -> np.dtype:
    """MXNet np's result dtype of a mixed-precision binary op (add, subtract, multiply, mod,
    power): bool gives way to anything; a float wins over an integer; two floats or two
    integers promote as numpy (int16 becoming int32)."""
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    if a.kind == "b":
        return b
    if b.kind == "b":
        return a
    fa, fb = a.kind == "f", b.kind == "f"
    if fa and not fb:
        return a
    if fb and not fa:
        return b
    return np.promote_types(a, b) if fa else _int_promote(a, b)


def promote_divide(a, b) -> np.dtype:
    """MXNet np's true_divide result dtype: the float operand's (wider of two floats), float32
    for two integer or boolean operands."""
    a, b = np.dtype(a), np.dtype(b)
    if a.kind != "f" and b.kind != "f":
        return np.dtype(np.float32)
    return promote_mixed(a, b)


def unbroadcast(g: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum gradient `g` (of a broadcast result) down to `shape`."""
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead > 0 else g
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def fresh_array(out, inputs: Sequence[np.ndarray]) -> np.ndarray:
    """`out` as a C-contiguous array (zero-dim kept) sharing no memory with `inputs`."""
    out = np.asarray(out)
    if not out.flags.c_contiguous or any(np.may_share_memory(out, x) for x in inputs):
        out = np.array(out, order="C", copy=True)
    return out


@contextlib.contextmanager
def quiet_numpy():
    """numpy's floating-point errors and runtime warnings silenced: results carry inf/nan as
    MXNet's kernels give them."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _probe(shape) -> np.ndarray:
    """A zero-stride float32 array of `shape` (no memory behind it)."""
    return np.broadcast_to(np.zeros((), np.float32), tuple(shape))


def _regular_probe(shape) -> np.ndarray:
    """A float32 array of `shape` whose values no shape rule refuses: ones, plus the identity
    over the last two axes when they are square (so every matrix is symmetric positive
    definite and weights never sum to zero). For ops that check values, after `_probe` failed."""
    out = np.ones(tuple(shape), np.float32)
    if len(shape) >= 2 and shape[-1] == shape[-2]:
        out += np.eye(shape[-1], dtype=np.float32)
    return out


class NumpyOp(Op):
    """An op defined by a numpy function with NumPy shape semantics (see the module doc)."""
    inputs: ClassVar[tuple] = ("a",)
    #: number of outputs (single-output ops return one array from `forward`)
    n_outputs: ClassVar[int] = 1
    #: the op's outputs do not depend differentiably on any input (comparisons, argmax, ...)
    no_gradient: ClassVar[bool] = False

    def forward(self, attrs: Mapping, *xs: np.ndarray):
        raise MXNetError(f"{self.name}: no numpy function defined")

    def vjp(self, attrs: Mapping, xs: Sequence[np.ndarray], ys: Sequence[np.ndarray],
            dys: Sequence[np.ndarray]) -> list:
        """Gradients of the inputs (numpy; None for no gradient) from the output gradients."""
        raise MXNetError(f"{self.name}: operator is not differentiable")

    def num_outputs(self, attrs):
        return self.n_outputs

    def out_types(self, attrs: Mapping, in_types: list) -> list:
        """Output dtypes from input dtypes (default: the first input's dtype)."""
        return [in_types[0]] * self.num_outputs(attrs)

    def _outputs(self, attrs, arrays) -> list:
        with quiet_numpy():
            out = self.forward(attrs, *arrays)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def compute(self, attrs, inputs, ctx):
        try:
            outs = self._outputs(attrs, inputs)
        except MXNetError:
            raise
        except (ValueError, TypeError, IndexError, np.linalg.LinAlgError, MemoryError) as e:
            raise MXNetError(f"{self.name}: {type(e).__name__}: {e}") from None
        return [fresh_array(np.asarray(o), inputs) for o in outs]

    def infer_shape(self, attrs, in_shapes):
        n = self.num_outputs(attrs)
        if any(s is None for s in in_shapes):
            return list(in_shapes), [None] * n
        try:
            outs = self._probe_outputs(attrs, in_shapes)
        except MXNetError:
            raise
        except MemoryError:
            raise MXNetError(f"{self.name}: the result of input shapes {[tuple(s) for s in in_shapes]} "
                             "does not fit in memory") from None
        except (ValueError, TypeError, IndexError, np.linalg.LinAlgError) as e:
            raise MXNetError(f"{self.name}: invalid input shapes {[tuple(s) for s in in_shapes]}: {e}") from None
        return list(in_shapes), [tuple(np.shape(o)) for o in outs]

    def _probe_outputs(self, attrs, in_shapes) -> list:
        """The op's outputs on probe inputs of `in_shapes` (shape inference sees no values or
        dtypes): zero-stride float32 zeros; when the op refuses those (a singular matrix, zero
        weights, a float input to an integer op), `_regular_probe` arrays, then int64 zeros."""
        try:
            return self._outputs(attrs, [_probe(s) for s in in_shapes])
        except (MXNetError, ValueError, TypeError, np.linalg.LinAlgError) as err:
            first = err
        if any(0 in tuple(s) for s in in_shapes) or int(sum(np.prod(s) for s in in_shapes)) > 1 << 22:
            raise first
        for make in (_regular_probe, lambda s: np.zeros(tuple(s), np.int64)):
            try:
                return self._outputs(attrs, [make(s) for s in in_shapes])
            except (MXNetError, ValueError, TypeError, np.linalg.LinAlgError):
                continue
        raise first

    def infer_type(self, attrs, in_types):
        if any(t is None for t in in_types):
            return list(in_types), [None] * self.num_outputs(attrs)
        outs = self.out_types(attrs, [np.dtype(t) for t in in_types])
        return list(in_types), [np.dtype(t).name for t in outs]

    @property
    def differentiable(self) -> bool:     # type: ignore[override]
        return not self.no_gradient

    def grad(self, F, attrs, inputs, outputs, ograds):
        if self.no_gradient:
            return [None] * len(inputs)
        return list(F.apply(f"_backward{self.name}", [*ograds, *inputs, *outputs], **attrs))


class NumpyElementwise(NumpyOp, Elementwise):
    """A `NumpyOp` that is also a scalar expression (`Elementwise`), so that fusion and the code
    generators compute it like the legacy elementwise ops.

    The numpy `forward` stays the reference (the interpreter, shape and dtype inference) and
    `vjp` the gradient; `expr` is the same value at one element, evaluated in `compute_dtype`
    (None where no kernel matches `forward` exactly: that instance runs its reference) and
    stored in the output dtype that `out_types` gives (MXNet np's promotion rules). Inputs
    broadcast with numpy's rules.
    """
    broadcast = True

    def out_dtype(self, attrs, in_dtype):
        n = len(self.input_names(attrs))
        return np.dtype(self.out_types(attrs, [np.dtype(in_dtype)] * n)[0]).name

    def compute_dtype(self, attrs, in_dtypes):
        """Default: the output dtype (inputs convert to it, as `forward` converts them)."""
        try:
            return np.dtype(self.out_types(attrs, [np.dtype(t) for t in in_dtypes])[0]).name
        except MXNetError:
            return None

    def grad(self, F, attrs, inputs, outputs, ograds):
        """Where every operand has one float dtype, the expression's derivative (elementwise
        gradient nodes that fuse and compile like the forward; its piecewise rules are the
        `vjp`'s); otherwise the gradient op of `vjp`."""
        dtypes = {getattr(v, "dtype", None) for v in [*inputs, *outputs]}
        if self.no_gradient or len(dtypes) != 1 or None in dtypes or np.dtype(dtypes.pop()).kind != "f":
            return NumpyOp.grad(self, F, attrs, inputs, outputs, ograds)
        return Elementwise.grad(self, F, attrs, inputs, outputs, ograds)


class NumpyBackward(Op):
    """The gradient op of a `NumpyOp`: (output gradients, inputs, outputs) -> input gradients."""
    hidden = True
    fwd: ClassVar[NumpyOp]

    def _counts(self, attrs) -> tuple[int, int]:
        return len(self.fwd.input_names(attrs)), self.fwd.num_outputs(attrs)

    def input_names(self, attrs):
        n_in, n_out = self._counts(attrs)
        return ([f"ograd{i}" for i in range(n_out)] + list(self.fwd.input_names(attrs))
                + [f"out{i}" for i in range(n_out)])

    def num_outputs(self, attrs):
        return self._counts(attrs)[0]

    def infer_shape(self, attrs, in_shapes):
        """The forward inputs' shapes, checked against the forward op: the output gradients and
        the outputs must have the shapes the forward op gives those inputs (MXNetError naming
        this op otherwise, never a broadcast gradient written into a smaller input)."""
        n_in, n_out = self._counts(attrs)
        ograds = {k: in_shapes[k] for k in range(n_out)}
        xs, merged = forward_shapes(self.name, self.fwd.name, attrs, in_shapes[n_out:n_out + n_in], ograds)
        outs = [merge_shape(self.name, f"input 'out{k}'", in_shapes[n_out + n_in + k], merged[k])
                for k in range(n_out)]
        return [merged[k] for k in range(n_out)] + list(xs) + outs, list(xs)

    def infer_type(self, attrs, in_types):
        n_in, n_out = self._counts(attrs)
        return list(in_types), list(in_types[n_out:n_out + n_in])

    def compute(self, attrs, inputs, ctx):
        n_in, n_out = self._counts(attrs)
        dys, xs, ys = inputs[:n_out], inputs[n_out:n_out + n_in], inputs[n_out + n_in:]
        try:
            with quiet_numpy():
                grads = self.fwd.vjp(attrs, xs, ys, dys)
        except MXNetError:
            raise
        except (ValueError, TypeError, IndexError, np.linalg.LinAlgError, MemoryError) as e:
            raise MXNetError(f"{self.name}: {type(e).__name__}: {e}") from None
        with quiet_numpy():
            out = [self._like_input(x, g) for x, g in zip(xs, grads)]
        return [fresh_array(o, inputs) for o in out]

    @staticmethod
    def _like_input(x: np.ndarray, g) -> np.ndarray:
        """Gradient `g` in x's shape and dtype (summed over broadcast axes; zeros for None or
        for inputs that are not floating point)."""
        if g is None or x.dtype.kind not in FLOAT_KINDS:
            return np.zeros(x.shape, x.dtype)
        g = np.asarray(g)
        if g.shape != x.shape:
            g = unbroadcast(g, x.shape).reshape(x.shape)
        return np.asarray(g, dtype=x.dtype)

    @property
    def differentiable(self) -> bool:     # type: ignore[override]
        """Only where the forward op defines the gradient of its gradient (`backward_grad`)."""
        return hasattr(self.fwd, "backward_grad")

    def grad(self, F, attrs, inputs, outputs, ograds):
        if not self.differentiable:
            raise MXNetError(f"{self.name}: second-order gradients of {self.fwd.name} are not supported")
        return self.fwd.backward_grad(F, attrs, inputs, ograds)


def register_numpy(name: str, aliases: Sequence[str] = ()) -> Callable[[type], type]:
    """Register a `NumpyOp` subclass under `name` (and `aliases`), and its gradient op
    `_backward<name>` unless the op has `no_gradient`."""
    def deco(cls: type) -> type:
        register(name, aliases)(cls)
        if not cls.no_gradient:
            from .registry import OPS
            back = type(f"Backward{cls.__name__}", (NumpyBackward,),
                        {"fwd": OPS[name], "params": cls.params, "__doc__": f"Gradient of {name}."})
            register(f"_backward{name}")(back)
        return cls
    return deco
