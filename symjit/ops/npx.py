"""Operators of MXNet's NumPy extension (`mx.npx`) that have no legacy counterpart.

`_npx_reshape` (npx.reshape with its own special codes), `_npx_nonzero` (the indices of the
non-zero entries, one row per entry), `_npx_constraint_check` (a boolean check raising
ValueError with a message), and `_npx_relu` / `_npx_sigmoid` (the legacy activations under the
names MXNet's np mode writes; their gradients come from the output, as relu's and sigmoid's in
symjit/ops/elemwise.py). Every other npx function writes a legacy operator, as MXNet 1.9.1.
"""
from __future__ import annotations

import math

import numpy as np

from ..base import MXNetError, MXNetValueError
from . import scalar as S
from .attrs import Bool, Enum, Param, Shape, Str
from .elemwise import Elementwise, relu_expr
from .registry import Op, register


def _err(msg: str) -> MXNetError:
    return MXNetError(f"_npx_reshape: {msg}")


def npx_reshape_shape(codes, dshape, reverse: bool = False, partial: bool = False) -> tuple:
    """The output shape of npx.reshape(newshape=codes) for an input of shape `dshape`.

    Codes: d >= 0 a literal dim; -1 inferred from the remaining size (at most one); -2 copy
    this input dim; -3 skip this input dim (which must be 1); -4 copy all remaining input dims;
    -5 the product of the next two input dims; -6 split this input dim into the next two codes
    (one may be -1). Every code but -4 consumes input dims left to right (right to left with
    `reverse`). With `partial`, 0 dims of `dshape` are unknown and output dims that depend on
    them come back as 0. Malformed codes and size mismatches raise MXNetError.
    """
    d = [(-1 if partial and int(x) == 0 else int(x)) for x in dshape]
    p = [int(c) for c in codes]
    if reverse:
        d.reverse()
        p.reverse()
    out: list[int] = []
    src = 0
    inferred = -1
    i = 0

    def need(n: int, code: int) -> None:
        if src + n > len(d):
            raise _err(f"code {code} needs {n} more input dimension(s), input {tuple(dshape)} has "
                       f"{len(d)} (newshape={tuple(codes)})")

    while i < len(p):
        c = p[i]
        if c < -6:
            raise _err(f"Dimension size must be greater than or equal to -6, got {c}")
        if c >= 0:
            out.append(c)
            src += 1
        elif c == -1:
            if inferred >= 0:
                raise _err(f"Can only specify one unknown dimension, got newshape={tuple(codes)}")
            inferred = len(out)
            out.append(-1)
            src += 1
        elif c == -2:
            need(1, c)
            out.append(d[src])
            src += 1
        elif c == -3:
            need(1, c)
            if d[src] not in (1, -1):
                raise _err(f"-3 index should only be used to skip dimension size 1, input dim {src} "
                           f"of {tuple(dshape)} is {d[src]}")
            src += 1
        elif c == -4:
            out.extend(d[src:])
            src = len(d)
        elif c == -5:
            need(2, c)
            a, b = d[src], d[src + 1]
            out.append(-1 if a < 0 or b < 0 else a * b)
            src += 2
        else:   # -6
            need(1, c)
            if i + 2 >= len(p):
                raise _err(f"-6 must be followed by two dimensions, got newshape={tuple(codes)}")
            whole, d1, d2 = d[src], p[i + 1], p[i + 2]
            if d1 == -1 and d2 == -1:
                raise _err("Split dims cannot both be -1")
            if d1 < -1 or d2 < -1:
                raise _err(f"the two dimensions after -6 must be >= 0 or -1, got ({d1}, {d2})")
            if whole >= 0:
                d1 = whole // d2 if d1 == -1 and d2 else d1
                d2 = whole // d1 if d2 == -1 and d1 else d2
                if d1 * d2 != whole:
                    raise _err(f"Split dims {d1}, {d2} do not divide original dim {whole}")
            out.extend([d1, d2])
            src += 1
            i += 2
        i += 1
    known = all(x >= 0 for x in d)
    if inferred >= 0:
        rest = math.prod(x for j, x in enumerate(out) if j != inferred)
        if known and rest == 0:
            raise _err(f"Cannot reshape array of shape {tuple(dshape)} into shape {tuple(codes)}: "
                       "the known dimensions have size 0")
        if known and all(x >= 0 for j, x in enumerate(out) if j != inferred):
            out[inferred] = math.prod(d) // rest
    if reverse:
        out.reverse()
    if known and all(x >= 0 for x in out) and math.prod(out) != math.prod(d):
        raise MXNetValueError(f"_npx_reshape: Cannot reshape array of shape {tuple(dshape)} into shape "
                              f"{tuple(codes)} (reverse={reverse}): {math.prod(d)} elements vs "
                              f"{math.prod(out)}")
    return tuple(0 if x < 0 else x for x in out)


@register("_npx_reshape")
class NpxReshape(Op):
    """npx.reshape: `a` in the shape `newshape` with npx's special codes (npx_reshape_shape);
    the result is a copy."""
    inputs = ("a",)
    params = {"newshape": Param(Shape), "reverse": Param(Bool, False), "order": Param(Enum("C"), "C")}
    reshape_only = True
    kernel = "shape"
    inplace = {0: 0}

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        return [tuple(d)], [npx_reshape_shape(attrs["newshape"], d, attrs["reverse"], partial=True)]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        shape = npx_reshape_shape(attrs["newshape"], x.shape, attrs["reverse"])
        return [np.array(x.reshape(shape), copy=True, order="C")]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.reshape_like(ograds[0], inputs[0])]


@register("_npx_nonzero")
class NpxNonzero(Op):
    """npx.nonzero: an int64 array (N, ndim) holding the index of each of the N non-zero
    entries of `x`, in C order (a 0-d `x` counts as 1-d). Its shape depends on the values:
    inference leaves N unknown."""
    inputs = ("x",)
    differentiable = False

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        return [tuple(d)], [(0, max(len(d), 1))]

    def infer_type(self, attrs, in_types):
        return list(in_types), ["int64"]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        idx = np.argwhere(x.reshape(1) if x.ndim == 0 else x)
        return [np.ascontiguousarray(idx, dtype=np.int64)]


@register("_npx_constraint_check")
class NpxConstraintCheck(Op):
    """npx.constraint_check: True (a 0-d bool array) when every entry of the boolean input
    is true; otherwise ValueError carrying `msg`."""
    inputs = ("input",)
    params = {"msg": Param(Str, "Constraint violated.")}
    differentiable = False

    def infer_shape(self, attrs, in_shapes):
        return [in_shapes[0]], [()]

    def infer_type(self, attrs, in_types):
        if in_types[0] is not None and in_types[0] != "bool":
            raise MXNetError(f"{self.name}: input must be a bool array, got {in_types[0]}")
        return ["bool"], ["bool"]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        if x.dtype != np.bool_:
            raise MXNetError(f"{self.name}: input must be a bool array, got {x.dtype}")
        if not bool(np.all(x)):
            raise MXNetValueError(attrs["msg"])
        return [np.array(True)]


@register("_npx_relu")
class NpxRelu(Elementwise):
    """npx.relu: max(x, 0), NaN propagating (the legacy relu under the name MXNet's np mode
    writes to symbol files)."""
    lists_input_names = False

    def expr(self, attrs, x):
        return relu_expr(x)


@register("_npx_sigmoid")
class NpxSigmoid(Elementwise):
    """npx.sigmoid: 1 / (1 + exp(-x)) (the legacy sigmoid under MXNet's np-mode name)."""
    lists_input_names = False

    def expr(self, attrs, x):
        return 1.0 / (1.0 + S.call("exp", -x))
