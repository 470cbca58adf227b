"""Shape operators: reshaping, transposing, broadcasting, joining, splitting, slicing, gathering.

MXNet 1.x names, aliases, parameters and semantics (src/operator/tensor/matrix_op*,
indexing_op*, broadcast_reduce_op*, nn/concat, slice_channel, swapaxis, pad, diag_op).

Conventions shared by every op here:
  * Partial shape inference follows MXNet 1.x: `None` is an unknown shape, a 0 dim an unknown
    dim; outputs get 0 where a dim cannot be deduced, and `Reshape` also deduces one unknown
    input dim from a fully known output (MXNet's ReverseReshapeInferShape).
  * `compute` works on real shapes (a 0 dim there is a real empty dim), validates its input
    and raises MXNetError naming the op, never returns a view of an input.
  * Gradients are written with registered ops only. Data movement ops differentiate into
    each other (transpose <-> transpose, slice -> _slice_assign, tile/repeat/broadcast_* ->
    Reshape + _broadcast_backward). Index-driven ops (take, pick, gather_nd, Pad, diag) use
    hidden scatter-add ops registered here (`_backward_take`, `_backward_pick`,
    `_backward_gather_nd`, `_backward_Pad`, `_backward_diag`), whose own gradients are the
    forward gathers, so higher-order gradients work.
  * Gradient rules that need a concrete shape (the data shape of a scatter-add, the split
    points of Concat) read it from the value handles; autodiff runs after shape inference, and a
    still unknown dim raises MXNetError rather than guessing.

Deviations from MXNet, each a strict extension that accepts more programs and never changes a
result MXNet computes: negative axes are accepted everywhere (transpose axes, reverse axis);
`broadcast_like` without axes aligns a lower-rank `lhs` to the right, numpy style (needed by the
second-order gradient of broadcasting arithmetic); `Reshape`'s -1 is placed at its output
position even after -2/-3/-4 (MXNet indexes it by parameter position, which is only meaningful
when no earlier code changes the count).
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from ..base import MXNetError, MXNetIndexError, MXNetValueError
from .attrs import Bool, Count, Dtype, Enum, Float, Int, Optional, Param, Shape, parse_literal
from .registry import Op, forward_shapes, merge_shape, register, shape_known

__all__ = ["OptIntTuple", "infer_reshape"]


# --------------------------------------------------------------------------------------
# Attribute parser and small helpers
# --------------------------------------------------------------------------------------

def OptIntTuple(v) -> tuple:
    """A tuple of ints or None (slice begin/end/step): '(None, 1)', '(0,2)', (1, None), 3, '()'."""
    if isinstance(v, str):
        s = v.strip()
        v = parse_literal(s) if s else ()
    if v is None:
        return (None,)
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v),)
    if isinstance(v, (tuple, list)):
        return tuple(None if x is None or (isinstance(x, str) and x.strip() == "None") else Int(x)
                     for x in v)
    raise ValueError(f"expected a tuple of integers or None, got {v!r}")


def _err(op: str, msg: str) -> MXNetError:
    return MXNetError(f"{op}: {msg}")


def _axis(op: str, axis: int, ndim: int, what: str = "axis") -> int:
    """Normalise a possibly negative axis into [0, ndim); out of range raises MXNetError."""
    a = axis + ndim if axis < 0 else axis
    if not 0 <= a < ndim:
        raise _err(op, f"{what} {axis} is out of bounds for array of dimension {ndim} "
                       f"(expected in [{-ndim}, {ndim - 1}])")
    return a


def _prod(dims) -> int:
    return int(math.prod(int(d) for d in dims))


def _fresh(a: np.ndarray) -> np.ndarray:
    """A new C-contiguous array (never a view of an op's input)."""
    return np.array(a, copy=True, order="C")


def _as_index(op: str, idx: np.ndarray) -> np.ndarray:
    """Index values as int64, truncating floats toward zero (MXNet's static_cast)."""
    if idx.dtype.kind == "f":
        if not np.isfinite(idx).all():
            raise _err(op, "indices must be finite")
        return idx.astype(np.int64)   # the C cast truncates finite values toward zero
    return idx.astype(np.int64)


def _concrete_shape(op: str, x, what: str) -> tuple:
    """The shape of a value that a gradient rule needs as an attribute.

    Eager values (numpy arrays, NDArrays) always have real shapes; IR values must have been
    through shape inference (no unknown dim left)."""
    shape = getattr(x, "shape", None)
    eager = isinstance(x, np.ndarray) or hasattr(x, "asnumpy")
    if shape is None or not (eager or shape_known(shape)):
        raise _err(op, f"the gradient needs the fully known shape of {what}, got {shape}")
    return tuple(int(d) for d in shape)


def _ndim_of(op: str, x, what: str) -> int:
    shape = getattr(x, "shape", None)
    if shape is None:
        raise _err(op, f"the gradient needs the rank of {what}, which is unknown")
    return len(shape)


class _ShapeOp(Op):
    """Base of the ops in this module: library kernel family 'shape'."""
    kernel = "shape"


def _first_input_type(in_types, fill: Mapping[int, str] | None = None):
    """Output dtype = dtype of input 0; other inputs (indices, shape sources) keep theirs,
    unknown ones taking the defaults in `fill`."""
    ins = list(in_types)
    for i, t in (fill or {}).items():
        if ins[i] is None:
            ins[i] = t
    return ins, [ins[0]]


# --------------------------------------------------------------------------------------
# Reshape family
# --------------------------------------------------------------------------------------

def infer_reshape(op: str, codes: Sequence[int], dshape: Sequence[int], reverse: bool = False,
                  partial: bool = True) -> tuple:
    """MXNet's InferReshapeShape: the output shape of Reshape(shape=codes) for input `dshape`.

    Codes: d > 0 literal; 0 copy the input dim; -1 infer from the remaining size (at most
    one); -2 copy all remaining input dims; -3 merge two input dims; -4 split one input dim
    into the next two codes (one may be -1). `reverse` matches the codes right to left.
    With `partial`, 0 dims of `dshape` are unknown and unknown output dims come back as 0;
    otherwise every dim is real. Size mismatches and malformed codes raise MXNetError.
    """
    d = [(-1 if partial and int(x) == 0 else int(x)) for x in dshape]
    known = all(x >= 0 for x in d)
    p = [int(c) for c in codes]
    if reverse:
        d.reverse()
        p.reverse()
    tmp: list[int] = []
    src = 0
    inf = -1
    i = 0
    while i < len(p):
        c = p[i]
        if c == 0:
            if src >= len(d):
                raise _err(op, f"shape code 0 at position {i} copies input dimension {src}, but the "
                               f"input {tuple(dshape)} has only {len(d)} dimensions")
            tmp.append(d[src])
            src += 1
        elif c == -1:
            if inf >= 0:
                raise _err(op, f"One and only one dim can be inferred, got shape {tuple(codes)}")
            inf = len(tmp)
            tmp.append(1)
            src += 1
        elif c == -2:
            tmp.extend(d[src:])
            src = len(d)
        elif c == -3:
            if src + 1 >= len(d):
                raise _err(op, f"shape code -3 at position {i} merges input dimensions {src} and "
                               f"{src + 1}, but the input {tuple(dshape)} has only {len(d)}")
            d1, d2 = d[src], d[src + 1]
            src += 2
            tmp.append(-1 if d1 < 0 or d2 < 0 else d1 * d2)
        elif c == -4:
            if i + 2 >= len(p):
                raise _err(op, f"shape code -4 at position {i} must be followed by two dimensions, "
                               f"got shape {tuple(codes)}")
            if src >= len(d):
                raise _err(op, f"shape code -4 at position {i} splits input dimension {src}, but the "
                               f"input {tuple(dshape)} has only {len(d)} dimensions")
            d0 = d[src]
            src += 1
            d1, d2 = p[i + 1], p[i + 2]
            i += 2
            if d1 == -1 and d2 == -1:
                raise _err(op, "Split dims cannot both be -1.")
            if d1 < -1 or d2 < -1 or d1 == 0 or d2 == 0:
                raise _err(op, f"the two dimensions after -4 must be positive or -1, got ({d1}, {d2})")
            if d1 == -1 and d0 >= 0:
                d1 = d0 // d2
            if d2 == -1 and d0 >= 0:
                d2 = d0 // d1
            if d0 >= 0 and d1 * d2 != d0:
                raise _err(op, f"Split dims {d1}, {d2} do not divide original dim {d0}")
            tmp.extend([d1, d2])
        elif c > 0:
            tmp.append(c)
            src += 1
        else:
            raise _err(op, f"invalid shape code {c} in shape {tuple(codes)}; codes are > 0, 0, -1, "
                           "-2, -3, -4")
        i += 1
    if inf >= 0:
        if known:
            rest = _prod(tmp)
            if rest == 0:
                raise _err(op, f"cannot infer the -1 dimension of shape {tuple(codes)} for input "
                               f"{tuple(dshape)}: the other dimensions have size 0")
            tmp[inf] = _prod(d) // rest
        else:
            tmp[inf] = -1
    if reverse:
        tmp.reverse()
    out = tuple(tmp)
    if known and all(x >= 0 for x in out) and _prod(out) != _prod(d):
        raise MXNetValueError(f"{op}: Target shape size is different to source. Target: {out}, Source: "
                       f"{tuple(dshape)} (shape={tuple(codes)}, reverse={reverse})")
    return tuple(0 if x < 0 else x for x in out) if partial else out


def _legacy_target_shape(op: str, attrs, dshape, partial: bool) -> tuple:
    """The deprecated `target_shape`/`keep_highest` form: one 0 dim is inferred."""
    o = list(attrs["target_shape"])
    known = all(int(x) > 0 for x in dshape) if partial else True
    start = 1 if attrs["keep_highest"] else 0
    if attrs["keep_highest"]:
        o[0] = int(dshape[0])
    zeros = [i for i in range(start, len(o)) if o[i] == 0]
    if len(zeros) == 1:
        k = zeros[0]
        o[k] = 1
        o[k] = _prod(dshape) // _prod(o) if known and _prod(o) else 0
    out = tuple(o)
    if known and shape_known(out) and _prod(out) != _prod(dshape):
        raise _err(op, f"Target shape size is different to source. Target: {out}, Source: {tuple(dshape)}")
    return out


def _reshape_output(op: str, attrs, dshape, partial: bool):
    if attrs["shape"]:
        return infer_reshape(op, attrs["shape"], dshape, attrs["reverse"], partial)
    if attrs["target_shape"]:
        return _legacy_target_shape(op, attrs, dshape, partial)
    if partial:
        return None
    raise _err(op, "the target shape is not given (set `shape`)")


def _reverse_reshape_infer(dshape: tuple, oshape: tuple) -> tuple:
    """Fill the single unknown input dim from a fully known output (MXNet's
    ReverseReshapeInferShape); otherwise return `dshape` unchanged."""
    unknown = [i for i, x in enumerate(dshape) if x == 0]
    if len(unknown) != 1 or not shape_known(oshape):
        return tuple(dshape)
    rest = _prod(x for x in dshape if x != 0)
    out = list(dshape)
    out[unknown[0]] = _prod(oshape) // rest
    return tuple(out)


@register("Reshape", aliases=("reshape",))
class Reshape(_ShapeOp):
    """Reshape `data` to `shape`, with MXNet's special codes 0 (copy), -1 (infer), -2 (copy the
    rest), -3 (merge two dims), -4 (split a dim in two); `reverse` matches codes right to left.
    `target_shape`/`keep_highest` are MXNet's deprecated form (one 0 dim is inferred)."""
    reshape_only = True
    params = {"shape": Param(Shape, ()), "reverse": Param(Bool, False),
              "target_shape": Param(Shape, ()), "keep_highest": Param(Bool, False)}
    inplace = {0: 0}

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        out = _reshape_output(self.name, attrs, tuple(d), partial=True)
        if out is None:
            return [tuple(d)], [None]
        return [_reverse_reshape_infer(tuple(d), out)], [out]

    def infer_shape_backward(self, attrs, in_shapes, out_shapes):
        """One unknown input dim follows from an output known only downstream."""
        (d,), (out,) = in_shapes, out_shapes
        if d is None or out is None:
            return list(in_shapes)
        return [_reverse_reshape_infer(tuple(d), tuple(out))]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        out = _reshape_output(self.name, attrs, x.shape, partial=False)
        return [_fresh(x.reshape(out))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.reshape_like(ograds[0], inputs[0])]


def _reshape_like_range(op: str, side: str, ndim: int, begin, end) -> tuple[int, int]:
    b = 0 if begin is None else begin + ndim if begin < 0 else begin
    e = ndim if end is None else end + ndim if end < 0 else end
    if not (0 <= b <= ndim and 0 <= e <= ndim and b <= e):
        raise _err(op, f"invalid {side} range [{begin}, {end}) for an input of {ndim} dimensions")
    return b, e


def _reshape_like_shape(op: str, attrs, lhs: tuple, rhs: tuple) -> tuple:
    lb, le = _reshape_like_range(op, "lhs", len(lhs), attrs["lhs_begin"], attrs["lhs_end"])
    rb, re_ = _reshape_like_range(op, "rhs", len(rhs), attrs["rhs_begin"], attrs["rhs_end"])
    return tuple(lhs[:lb]) + tuple(rhs[rb:re_]) + tuple(lhs[le:])


@register("reshape_like")
class ReshapeLike(_ShapeOp):
    """Reshape `lhs` to the shape of `rhs` (or replace lhs dims [lhs_begin, lhs_end) by rhs dims
    [rhs_begin, rhs_end)); the sizes must agree."""
    reshape_only = True
    inputs = ("lhs", "rhs")
    params = {"lhs_begin": Param(Optional(Int), None), "lhs_end": Param(Optional(Int), None),
              "rhs_begin": Param(Optional(Int), None), "rhs_end": Param(Optional(Int), None)}
    inplace = {0: 0}

    def infer_shape(self, attrs, in_shapes):
        lhs, rhs = in_shapes
        if lhs is None or rhs is None:
            return list(in_shapes), [None]
        out = _reshape_like_shape(self.name, attrs, tuple(lhs), tuple(rhs))
        if shape_known(lhs) and shape_known(out) and _prod(lhs) != _prod(out):
            raise _err(self.name, f"Cannot reshape lhs with shape {tuple(lhs)} to new shape {out} "
                                  "because they have different size")
        return [_reverse_reshape_infer(tuple(lhs), out), tuple(rhs)], [out]

    def compute(self, attrs, inputs, ctx):
        lhs, rhs = inputs
        out = _reshape_like_shape(self.name, attrs, lhs.shape, rhs.shape)
        if _prod(out) != lhs.size:
            raise _err(self.name, f"Cannot reshape lhs with shape {lhs.shape} to new shape {out} "
                                  "because they have different size")
        return [_fresh(lhs.reshape(out))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.reshape_like(ograds[0], inputs[0]), F.zeros_like(inputs[1])]


@register("_identity_with_attr_like_rhs")
class IdentityWithAttrLikeRhs(_ShapeOp):
    """out = lhs, declaring that lhs has rhs's shape: a shape constraint that lets inference
    carry rhs's shape to lhs and back (MXNet uses it to tie a computed weight to its variable)."""
    inputs = ("lhs", "rhs")
    inplace = {0: 0}

    def infer_shape(self, attrs, in_shapes):
        lhs, rhs = in_shapes
        shape = merge_shape(self.name, "input 'lhs' (like 'rhs')", lhs, rhs)
        return [shape, shape], [shape]

    def infer_shape_backward(self, attrs, in_shapes, out_shapes):
        return [merge_shape(self.name, "the output", s, out_shapes[0]) for s in in_shapes]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[0]]

    def compute(self, attrs, inputs, ctx):
        lhs, rhs = inputs
        if lhs.shape != rhs.shape:
            raise _err(self.name, f"lhs has shape {lhs.shape}, rhs {rhs.shape}; they must agree")
        return [_fresh(lhs.copy())]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [ograds[0], F.zeros_like(inputs[1])]


@register("Flatten", aliases=("flatten",))
class Flatten(_ShapeOp):
    """Collapse all dims after the first: (d0, d1, ..., dk) -> (d0, d1*...*dk); (n,) -> (n, 1)."""
    reshape_only = True
    inplace = {0: 0}

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        if len(d) == 0:
            raise _err(self.name, "input must have at least one dimension")
        rest = tuple(d[1:])
        return [tuple(d)], [(d[0], _prod(rest) if shape_known(rest) else 0)]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        return [_fresh(x.reshape(x.shape[0], _prod(x.shape[1:])))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.reshape_like(ograds[0], inputs[0])]


def _transpose_axes(op: str, axes: tuple, ndim: int) -> tuple:
    if not axes:
        return tuple(range(ndim - 1, -1, -1))
    if len(axes) != ndim:
        raise _err(op, f"axes {axes} must have one entry per input dimension ({ndim})")
    norm = tuple(_axis(op, a, ndim, "axes entry") for a in axes)
    if sorted(norm) != list(range(ndim)):
        raise _err(op, f"axes {axes} is not a permutation of the {ndim} input dimensions")
    return norm


@register("transpose")
class Transpose(_ShapeOp):
    """Permute the dims by `axes` (default: reverse them; a 1-D array is returned unchanged)."""
    params = {"axes": Param(Shape, ())}

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        perm = _transpose_axes(self.name, attrs["axes"], len(d))
        return [tuple(d)], [tuple(d[a] for a in perm)]

    def infer_shape_backward(self, attrs, in_shapes, out_shapes):
        """The input's dims are the output's, permuted back (input dim perm[i] is output dim i)."""
        (out,) = out_shapes
        if out is None:
            return list(in_shapes)
        perm = _transpose_axes(self.name, attrs["axes"], len(out))
        d = [0] * len(out)
        for i, a in enumerate(perm):
            d[a] = out[i]
        return [merge_shape(self.name, "the input deduced from the output", in_shapes[0], tuple(d))]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        return [_fresh(np.transpose(x, _transpose_axes(self.name, attrs["axes"], x.ndim)))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        if not attrs["axes"]:
            return [F.transpose(ograds[0])]
        perm = _transpose_axes(self.name, attrs["axes"], len(attrs["axes"]))
        inv = [0] * len(perm)
        for i, a in enumerate(perm):
            inv[a] = i
        return [F.transpose(ograds[0], axes=tuple(inv))]


@register("expand_dims")
class ExpandDims(_ShapeOp):
    """Insert a dim of size 1 at `axis` (in [-ndim-1, ndim])."""
    reshape_only = True
    params = {"axis": Param(Int)}
    inplace = {0: 0}

    def _pos(self, axis: int, ndim: int) -> int:
        a = axis + ndim + 1 if axis < 0 else axis
        if not 0 <= a <= ndim:
            raise _err(self.name, f"axis must be in the range [{-ndim - 1}, {ndim}] ({axis} provided)")
        return a

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        a = self._pos(attrs["axis"], len(d))
        return [tuple(d)], [tuple(d[:a]) + (1,) + tuple(d[a:])]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        return [_fresh(np.expand_dims(x, self._pos(attrs["axis"], x.ndim)))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.reshape_like(ograds[0], inputs[0])]


@register("squeeze")
class Squeeze(_ShapeOp):
    """Remove size-1 dims (all of them, or those in `axis`); at least one dim always remains."""
    reshape_only = True
    params = {"axis": Param(Optional(Shape), None)}
    inplace = {0: 0}

    def _out(self, attrs, d: tuple) -> tuple:
        nd = len(d)
        if attrs["axis"] is not None:
            drop = set()
            for ax in attrs["axis"]:
                a = _axis(self.name, ax, nd)
                if d[a] != 1 and d[a] != 0:
                    raise _err(self.name, f"cannot select an axis to squeeze out which has size="
                                          f"{d[a]} not equal to one (axis {ax}, shape {d})")
                if a in drop:
                    raise _err(self.name, f"duplicate value in axis {attrs['axis']}")
                drop.add(a)
            out = tuple(x for i, x in enumerate(d) if i not in drop)
        else:
            out = tuple(x for x in d if x != 1)
        return out or (1,)

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        if attrs["axis"] is None and not shape_known(d):
            return [tuple(d)], [None]  # which dims are 1 is not known yet
        return [tuple(d)], [self._out(attrs, tuple(d))]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        if attrs["axis"] is not None:
            for ax in attrs["axis"]:
                a = _axis(self.name, ax, x.ndim)
                if x.shape[a] != 1:
                    raise _err(self.name, f"cannot select an axis to squeeze out which has size="
                                          f"{x.shape[a]} not equal to one (axis {ax}, shape {x.shape})")
        return [_fresh(x.reshape(self._out(attrs, x.shape)))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.reshape_like(ograds[0], inputs[0])]


@register("SwapAxis", aliases=("swapaxes",))
class SwapAxis(_ShapeOp):
    """Interchange dims `dim1` and `dim2`."""
    params = {"dim1": Param(Int, 0), "dim2": Param(Int, 0)}

    def _perm(self, attrs, nd: int) -> list:
        a = _axis(self.name, attrs["dim1"], nd, "dim1")
        b = _axis(self.name, attrs["dim2"], nd, "dim2")
        perm = list(range(nd))
        perm[a], perm[b] = perm[b], perm[a]
        return perm

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        return [tuple(d)], [tuple(d[p] for p in self._perm(attrs, len(d)))]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        return [_fresh(np.transpose(x, self._perm(attrs, x.ndim)))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.SwapAxis(ograds[0], dim1=attrs["dim1"], dim2=attrs["dim2"])]


@register("reverse", aliases=("flip",))
class Reverse(_ShapeOp):
    """Reverse the order of elements along `axis` (an int or a tuple of ints)."""
    params = {"axis": Param(Shape)}

    def _axes(self, attrs, nd: int) -> tuple:
        return tuple(sorted({_axis(self.name, a, nd) for a in attrs["axis"]}))

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is not None:
            self._axes(attrs, len(d))
        return [d], [d]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        return [_fresh(np.flip(x, self._axes(attrs, x.ndim)))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.reverse(ograds[0], axis=attrs["axis"])]


# --------------------------------------------------------------------------------------
# Broadcasting, tile, repeat
# --------------------------------------------------------------------------------------

def _check_broadcast_dim(op: str, have: int, want: int, ishape, target) -> int:
    """Output dim for broadcasting a dim of size `have` to `want` (0 = unknown)."""
    if want == 0:
        return have
    if have not in (0, 1, want):
        raise _err(op, f"Array cannot be broadcasted from {tuple(ishape)} to {tuple(target)}")
    return want


@register("broadcast_to")
class BroadcastTo(_ShapeOp):
    """Broadcast size-1 dims to `shape`; a 0 in `shape` keeps the input dim."""
    broadcast_only = True
    params = {"shape": Param(Shape, ())}

    def _out(self, attrs, d: tuple) -> tuple:
        target = attrs["shape"]
        if len(target) != len(d):
            raise _err(self.name, f"Operand of shape {d} cannot be broadcasted to {target}")
        return tuple(_check_broadcast_dim(self.name, x, t, d, target) for x, t in zip(d, target))

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        return [tuple(d)], [self._out(attrs, tuple(d))]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        return [_fresh(np.broadcast_to(x, self._out(attrs, x.shape)))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F._broadcast_backward(ograds[0], inputs[0])]


@register("broadcast_axis", aliases=("broadcast_axes",))
class BroadcastAxis(_ShapeOp):
    """Broadcast the size-1 dims listed in `axis` to the matching `size`."""
    broadcast_only = True
    params = {"axis": Param(Shape, ()), "size": Param(Shape, ())}

    def _out(self, attrs, d: tuple) -> tuple:
        axes, sizes = attrs["axis"], attrs["size"]
        if len(axes) != len(sizes):
            raise _err(self.name, f"axis {axes} and size {sizes} must have the same length")
        out = list(d)
        for ax, sz in zip(axes, sizes):
            a = _axis(self.name, ax, len(d))
            if d[a] not in (0, 1):
                raise _err(self.name, f"Broadcasting axis {ax} must have size 1, received input "
                                      f"shape {d}")
            out[a] = sz
        return tuple(out)

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        return [tuple(d)], [self._out(attrs, tuple(d))]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        return [_fresh(np.broadcast_to(x, self._out(attrs, x.shape)))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F._broadcast_backward(ograds[0], inputs[0])]


@register("broadcast_like")
class BroadcastLike(_ShapeOp):
    """Broadcast `lhs` to the shape of `rhs`, or only its `lhs_axes` to the sizes of `rhs`'s
    `rhs_axes`."""
    broadcast_only = True
    inputs = ("lhs", "rhs")
    params = {"lhs_axes": Param(Optional(Shape), None), "rhs_axes": Param(Optional(Shape), None)}

    def _out(self, attrs, lhs: tuple, rhs: tuple) -> tuple:
        la, ra = attrs["lhs_axes"], attrs["rhs_axes"]
        if la is None and ra is None:
            if len(lhs) > len(rhs):
                raise _err(self.name, f"Operand of shape {lhs} cannot be broadcasted to {rhs}")
            padded = (1,) * (len(rhs) - len(lhs)) + tuple(lhs)
            return tuple(_check_broadcast_dim(self.name, x, t, lhs, rhs) if t else x
                         for x, t in zip(padded, rhs))
        if la is None or ra is None or len(la) != len(ra):
            raise _err(self.name, f"lhs_axes {la} and rhs_axes {ra} must both be given with the same length")
        if not la:
            raise _err(self.name, "Empty axes tuple is not allowed")
        out = list(lhs)
        for a, b in zip(la, ra):
            i = _axis(self.name, a, len(lhs), "lhs_axes entry")
            j = _axis(self.name, b, len(rhs), "rhs_axes entry")
            if lhs[i] not in (0, 1):
                raise _err(self.name, f"Input axis {a} of lhs {lhs} has size {lhs[i]}, not 1; it cannot "
                                      f"be broadcasted to {rhs[j]}")
            out[i] = rhs[j]
        return tuple(out)

    def infer_shape(self, attrs, in_shapes):
        lhs, rhs = in_shapes
        if lhs is None or rhs is None:
            return list(in_shapes), [None]
        return [tuple(lhs), tuple(rhs)], [self._out(attrs, tuple(lhs), tuple(rhs))]

    def compute(self, attrs, inputs, ctx):
        lhs, rhs = inputs
        out = self._out(attrs, lhs.shape, rhs.shape)
        src = lhs.reshape((1,) * (len(out) - lhs.ndim) + lhs.shape)
        return [_fresh(np.broadcast_to(src, out))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F._broadcast_backward(ograds[0], inputs[0]), F.zeros_like(inputs[1])]


@register("tile")
class Tile(_ShapeOp):
    """Repeat the whole array `reps` times per dim (numpy.tile: the shorter of input rank and
    reps is padded with leading 1s)."""
    params = {"reps": Param(Shape)}

    def _out(self, attrs, d: tuple) -> tuple:
        reps = attrs["reps"]
        if any(r < 0 for r in reps):
            raise _err(self.name, f"reps {reps} must be non-negative")
        if not reps:
            return tuple(d)
        m = max(len(d), len(reps))
        dd = (1,) * (m - len(d)) + tuple(d)
        rr = (1,) * (m - len(reps)) + tuple(reps)
        return tuple(x * r for x, r in zip(dd, rr))

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        return [tuple(d)], [self._out(attrs, tuple(d))]

    def compute(self, attrs, inputs, ctx):
        from ..util import is_np_shape
        x = inputs[0]
        self._out(attrs, x.shape)
        if 0 in attrs["reps"] and not is_np_shape():
            raise _err(self.name, f"reps {attrs['reps']} has a 0, which makes a zero-size output: "
                                  "allowed only under NumPy shape semantics (mx.np_shape())")
        return [_fresh(np.tile(x, attrs["reps"])) if attrs["reps"] else _fresh(x)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        x, dy = inputs[0], ograds[0]
        reps = attrs["reps"]
        if not reps:
            return [dy]
        nd = _ndim_of(self.name, x, "data")
        m = max(nd, len(reps))
        rr = (1,) * (m - len(reps)) + tuple(reps)
        if 0 in rr:
            return [F.zeros_like(x)]
        like = x
        for _ in range(m - nd):
            like = F.expand_dims(like, axis=0)
        like = F.Reshape(like, shape=sum(((-4, 1, -1) for _ in range(m)), ()))
        split = F.Reshape(dy, shape=sum(((-4, r, -1) for r in rr), ()))
        return [F.reshape_like(F._broadcast_backward(split, like), x)]


@register("repeat")
class Repeat(_ShapeOp):
    """Repeat each element `repeats` times along `axis` (flattened input when axis is None)."""
    params = {"repeats": Param(Int), "axis": Param(Optional(Int), None)}

    def _out(self, attrs, d: tuple) -> tuple:
        r = attrs["repeats"]
        if r < 0:
            raise _err(self.name, f"repeats cannot be a negative number, got {r}")
        if attrs["axis"] is None:
            if r == 0:
                return (0,)
            return (_prod(d) * r if shape_known(d) else 0,)
        a = _axis(self.name, attrs["axis"], len(d))
        if r == 0:
            return (0,)
        return tuple(x * r if i == a else x for i, x in enumerate(d))

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        return [tuple(d)], [self._out(attrs, tuple(d))]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        out_shape = self._out(attrs, x.shape)
        if attrs["repeats"] == 0:
            return [np.zeros(out_shape, x.dtype)]
        axis = attrs["axis"]
        out = np.repeat(x.reshape(-1), attrs["repeats"]) if axis is None else np.repeat(
            x, attrs["repeats"], axis=_axis(self.name, axis, x.ndim))
        return [_fresh(out)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        x, dy = inputs[0], ograds[0]
        r, axis = attrs["repeats"], attrs["axis"]
        if r == 0:
            return [F.zeros_like(x)]
        if axis is None:
            split = F.Reshape(dy, shape=(-1, r))
            like = F.Reshape(x, shape=(-1, 1))
        else:
            a = _axis(self.name, axis, _ndim_of(self.name, x, "data"))
            split = F.Reshape(dy, shape=(0,) * a + (-4, -1, r, -2))
            like = F.expand_dims(x, axis=a + 1)
        return [F.reshape_like(F._broadcast_backward(split, like), x)]


# --------------------------------------------------------------------------------------
# Joining and splitting
# --------------------------------------------------------------------------------------

def _variadic_names(n: int) -> list[str]:
    return [f"arg{i}" for i in range(n)]


@register("Concat", aliases=("concat",))
class Concat(_ShapeOp):
    """Join `num_args` arrays along `dim`; all other dims must agree."""
    params = {"num_args": Param(Count), "dim": Param(Int, 1)}

    def input_names(self, attrs):
        if attrs["num_args"] < 1:
            raise _err(self.name, f"num_args must be at least 1, got {attrs['num_args']}")
        return _variadic_names(attrs["num_args"])

    def infer_shape(self, attrs, in_shapes):
        known = [s for s in in_shapes if s is not None]
        if not known:
            return list(in_shapes), [None]
        nd = len(known[0])
        for i, s in enumerate(in_shapes):
            if s is not None and len(s) != nd:
                raise _err(self.name, f"all inputs must have the same rank: arg{i} has shape "
                                      f"{tuple(s)}, expected {nd} dimensions like {tuple(known[0])}")
        dim = _axis(self.name, attrs["dim"], nd, "dim")
        common = None
        for i, s in enumerate(in_shapes):
            if s is None:
                continue
            masked = tuple(0 if j == dim else x for j, x in enumerate(s))
            try:
                common = merge_shape(self.name, f"input 'arg{i}'", common, masked)
            except MXNetError:
                raise _err(self.name, f"shape mismatch for input 'arg{i}': got {tuple(s)}, expected "
                                      f"{tuple(common)} except on dim {dim}") from None
        ins = [tuple(common[:dim]) + (s[dim],) + tuple(common[dim + 1:]) if s is not None else None
               for s in in_shapes]
        total = sum(s[dim] for s in ins) if all(s is not None and s[dim] for s in ins) else 0
        out = tuple(common[:dim]) + (total,) + tuple(common[dim + 1:])
        return ins, [out]

    def infer_shape_backward(self, attrs, in_shapes, out_shapes):
        """Every input's other dims from the output; the one input whose size along `dim` is
        unknown gets what the output leaves for it."""
        out = out_shapes[0]
        if out is None:
            return list(in_shapes)
        dim = _axis(self.name, attrs["dim"], len(out), "dim")
        ins = [tuple(o if j != dim and not x else x for j, (x, o) in enumerate(zip(s, out)))
               if s is not None else None for s in in_shapes]
        unknown = [i for i, s in enumerate(ins) if s is None or not s[dim]]
        if len(unknown) == 1 and out[dim] and ins[unknown[0]] is not None:
            rest = sum(s[dim] for i, s in enumerate(ins) if i != unknown[0])
            s = ins[unknown[0]]
            ins[unknown[0]] = s[:dim] + (out[dim] - rest,) + s[dim + 1:]
        return ins

    def compute(self, attrs, inputs, ctx):
        self.infer_shape(attrs, [x.shape for x in inputs])
        dim = _axis(self.name, attrs["dim"], inputs[0].ndim, "dim")
        return [_fresh(np.concatenate(inputs, axis=dim))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        dy = ograds[0]
        dim = _axis(self.name, attrs["dim"], _ndim_of(self.name, dy, "the output"), "dim")
        grads, off = [], 0
        for i, x in enumerate(inputs):
            n = _concrete_shape(self.name, x, f"input 'arg{i}'")[dim]
            grads.append(F.slice_axis(dy, axis=dim, begin=off, end=off + n) if n else F.zeros_like(x))
            off += n
        return grads


@register("stack")
class Stack(_ShapeOp):
    """Join `num_args` same-shaped arrays along a new `axis`."""
    params = {"axis": Param(Int, 0), "num_args": Param(Count)}

    def input_names(self, attrs):
        if attrs["num_args"] < 1:
            raise _err(self.name, f"num_args must be at least 1, got {attrs['num_args']}")
        return _variadic_names(attrs["num_args"])

    def infer_shape(self, attrs, in_shapes):
        common = None
        for i, s in enumerate(in_shapes):
            common = merge_shape(self.name, f"input 'arg{i}'", common, s)
        if common is None:
            return list(in_shapes), [None]
        nd = len(common) + 1
        a = _axis(self.name, attrs["axis"], nd)
        return [common] * len(in_shapes), [tuple(common[:a]) + (attrs["num_args"],) + tuple(common[a:])]

    def compute(self, attrs, inputs, ctx):
        self.infer_shape(attrs, [x.shape for x in inputs])
        a = _axis(self.name, attrs["axis"], inputs[0].ndim + 1)
        return [_fresh(np.stack(inputs, axis=a))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        n = attrs["num_args"]
        return F.apply("SliceChannel", [ograds[0]], num_outputs=n, axis=attrs["axis"], squeeze_axis=True)


@register("SliceChannel", aliases=("split",))
class SliceChannel(_ShapeOp):
    """Split `data` into `num_outputs` equal parts along `axis`; `squeeze_axis` drops that axis
    (allowed only when its size equals num_outputs)."""
    params = {"num_outputs": Param(Count), "axis": Param(Int, 1), "squeeze_axis": Param(Bool, False)}

    def num_outputs(self, attrs):
        if attrs["num_outputs"] < 1:
            raise _err(self.name, f"num_outputs must be at least 1, got {attrs['num_outputs']}")
        return attrs["num_outputs"]

    def output_names(self, attrs):
        return [f"output{i}" for i in range(self.num_outputs(attrs))]

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        n = self.num_outputs(attrs)
        if d is None:
            return [None], [None] * n
        a = _axis(self.name, attrs["axis"], len(d))
        size = d[a]
        if size and size % n:
            raise _err(self.name, f"You are trying to split the {a}-th axis of input tensor with shape "
                                  f"{tuple(d)} into num_outputs={n} evenly sized chunks, but this is "
                                  f"not possible because {n} does not evenly divide {size}")
        if attrs["squeeze_axis"]:
            if size and size != n:
                raise _err(self.name, f"squeeze_axis=True requires the size of axis {a} ({size}) to "
                                      f"equal num_outputs ({n})")
            out = tuple(d[:a]) + tuple(d[a + 1:])
        else:
            out = tuple(d[:a]) + (size // n,) + tuple(d[a + 1:])
        return [tuple(d)], [out] * n

    def infer_shape_backward(self, attrs, in_shapes, out_shapes):
        """The input from any known output: its other dims, and the split axis (num_outputs
        times the part, or num_outputs itself with squeeze_axis)."""
        (d,), n = in_shapes, self.num_outputs(attrs)
        for out in out_shapes:
            if out is None:
                continue
            if attrs["squeeze_axis"]:
                a = _axis(self.name, attrs["axis"], len(out) + 1)
                full = tuple(out[:a]) + (n,) + tuple(out[a:])
            else:
                a = _axis(self.name, attrs["axis"], len(out))
                full = tuple(out[:a]) + (out[a] * n,) + tuple(out[a + 1:])
            d = merge_shape(self.name, "input 'data'", d, full)
        return [d]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        _, outs = self.infer_shape(attrs, [x.shape])
        a = _axis(self.name, attrs["axis"], x.ndim)
        parts = np.split(x, self.num_outputs(attrs), axis=a)
        return [_fresh(p.reshape(s)) for p, s in zip(parts, outs)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        n = self.num_outputs(attrs)
        if attrs["squeeze_axis"]:
            return [F.stack(*ograds, axis=attrs["axis"], num_args=n)]
        return [F.Concat(*ograds, dim=attrs["axis"], num_args=n)]


@register("_split_v2")
class SplitV2(_ShapeOp):
    """Split `data` along `axis` at `indices` (ascending, starting with 0; the last piece runs to
    the end) into len(indices) pieces — or into `sections` equal pieces when sections > 0.
    `squeeze_axis` drops the axis (every piece must then have size 1 along it)."""
    params = {"indices": Param(Shape), "axis": Param(Int, 1), "squeeze_axis": Param(Bool, False),
              "sections": Param(Int, 0)}

    def num_outputs(self, attrs):
        n = attrs["sections"] if attrs["sections"] > 0 else len(attrs["indices"])
        if n < 1:
            raise _err(self.name, "needs at least one section or index")
        return n

    output_names = SliceChannel.output_names

    def _bounds(self, attrs, size: int) -> list[tuple[int, int]]:
        n = self.num_outputs(attrs)
        if attrs["sections"] > 0:
            if size % n:
                raise _err(self.name, f"cannot split an axis of size {size} into {n} equal sections")
            starts = [i * (size // n) for i in range(n)]
        else:
            starts = list(attrs["indices"])
            if starts[0] != 0 or any(b < a for a, b in zip(starts, starts[1:])) or starts[-1] > size:
                raise _err(self.name, f"indices must start at 0, ascend and stay within the axis size "
                                      f"{size}, got {tuple(starts)}")
        bounds = list(zip(starts, starts[1:] + [size]))
        if attrs["squeeze_axis"] and any(e - b != 1 for b, e in bounds):
            raise _err(self.name, "squeeze_axis=True needs every piece to have size 1 along the axis")
        return bounds

    def infer_shape(self, attrs, in_shapes):
        d = None if in_shapes[0] is None else tuple(in_shapes[0])
        a = None if d is None else _axis(self.name, attrs["axis"], len(d))
        if a is None or not d[a]:   # the pieces need the split axis' size
            return [d], [None] * self.num_outputs(attrs)
        outs = []
        for b, e in self._bounds(attrs, d[a]):
            piece = tuple(d[:a]) + ((e - b,) if not attrs["squeeze_axis"] else ()) + tuple(d[a + 1:])
            outs.append(piece)
        return [tuple(d)], outs

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        a = _axis(self.name, attrs["axis"], x.ndim)
        outs = []
        for b, e in self._bounds(attrs, x.shape[a]):
            piece = np.take(x, np.arange(b, e), axis=a)
            outs.append(_fresh(np.squeeze(piece, axis=a) if attrs["squeeze_axis"] else piece))
        return outs

    def grad(self, F, attrs, inputs, outputs, ograds):
        parts = [F.expand_dims(g, axis=attrs["axis"]) for g in ograds] if attrs["squeeze_axis"] else list(ograds)
        return [F.Concat(*parts, dim=attrs["axis"], num_args=len(parts))]


# --------------------------------------------------------------------------------------
# Slicing
# --------------------------------------------------------------------------------------

_SLICE_PARAMS = {"begin": Param(OptIntTuple), "end": Param(OptIntTuple), "step": Param(OptIntTuple, ())}


def _slices(op: str, attrs, ndim: int) -> tuple:
    """Python slice objects for MXNet's begin/end/step tuples (missing trailing axes: full)."""
    begin, end, step = attrs["begin"], attrs["end"], attrs["step"]
    if len(begin) != len(end):
        raise _err(op, f"begin {begin} and end {end} must have the same length")
    if len(begin) > ndim:
        raise _err(op, f"Slicing axis exceeds data dimensions: begin {begin} has {len(begin)} entries "
                       f"for an input of {ndim} dimensions")
    if step and len(step) != len(begin):
        raise _err(op, f"step {step} and begin {begin} must have the same length")
    out = []
    for i in range(len(begin)):
        s = step[i] if step and step[i] is not None else 1
        if s == 0:
            raise _err(op, f"slice op step[{i}] cannot be 0")
        out.append(slice(begin[i], end[i], s))
    return tuple(out) + (slice(None),) * (ndim - len(begin))


def slice_region(op: str, attrs, shape: tuple) -> list[tuple[int, int, int]]:
    """(start, step, count) per axis of the region `slice`/`_slice_assign` attrs select in an
    array of `shape` (numpy's slice semantics: negative and out-of-range bounds clamped)."""
    out = []
    for s, n in zip(_slices(op, attrs, len(shape)), shape):
        start, stop, step = s.indices(n)
        out.append((start, step, len(range(start, stop, step))))
    return out


def _sliced_shape(op: str, attrs, d: tuple) -> tuple:
    sl = _slices(op, attrs, len(d))
    return tuple(len(range(*s.indices(x))) if x else 0 for s, x in zip(sl, d))


@register("slice", aliases=("crop",))
class Slice(_ShapeOp):
    """`data[begin:end:step]` per axis; entries may be None (Python slice defaults), and axes
    after len(begin) are taken whole."""
    params = dict(_SLICE_PARAMS)

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        if len(d) == 0:
            raise _err(self.name, "slice only works for ndim > 0")
        return [tuple(d)], [_sliced_shape(self.name, attrs, tuple(d))]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        return [_fresh(x[_slices(self.name, attrs, x.ndim)])]

    def grad(self, F, attrs, inputs, outputs, ograds):
        x = inputs[0]
        return [F._slice_assign(F.zeros_like(x), ograds[0], begin=attrs["begin"], end=attrs["end"],
                                step=attrs["step"])]


@register("_slice_assign", aliases=("_crop_assign",))
class SliceAssign(_ShapeOp):
    """A copy of `lhs` with the region lhs[begin:end:step] replaced by `rhs`."""
    inputs = ("lhs", "rhs")
    params = dict(_SLICE_PARAMS)
    inplace = {0: 0}

    def infer_shape(self, attrs, in_shapes):
        lhs, rhs = in_shapes
        if lhs is None:
            return list(in_shapes), [None]
        region = _sliced_shape(self.name, attrs, tuple(lhs))
        rhs = merge_shape(self.name, "input 'rhs' (the sliced region)", region, rhs)
        return [tuple(lhs), rhs], [tuple(lhs)]

    def compute(self, attrs, inputs, ctx):
        lhs, rhs = inputs
        sl = _slices(self.name, attrs, lhs.ndim)
        out = _fresh(lhs)
        if out[sl].shape != rhs.shape:
            raise _err(self.name, f"shape mismatch for input 'rhs': expected {out[sl].shape} (the "
                                  f"sliced region of lhs {lhs.shape}), got {rhs.shape}")
        out[sl] = rhs
        return [out]

    def grad(self, F, attrs, inputs, outputs, ograds):
        region = {"begin": attrs["begin"], "end": attrs["end"], "step": attrs["step"]}
        return [F._slice_assign_scalar(ograds[0], scalar=0.0, **region), F.slice(ograds[0], **region)]


@register("_slice_assign_scalar", aliases=("_crop_assign_scalar",))
class SliceAssignScalar(_ShapeOp):
    """A copy of `data` with the region data[begin:end:step] set to `scalar`."""
    params = {"scalar": Param(Float, 0.0), **_SLICE_PARAMS}
    inplace = {0: 0}

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is not None:
            _slices(self.name, attrs, len(d))
        return [d], [d]

    def compute(self, attrs, inputs, ctx):
        out = _fresh(inputs[0])
        out[_slices(self.name, attrs, out.ndim)] = attrs["scalar"]
        return [out]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F._slice_assign_scalar(ograds[0], scalar=0.0, begin=attrs["begin"], end=attrs["end"],
                                       step=attrs["step"])]


def _slice_axis_range(op: str, attrs, d: tuple) -> tuple[int, int, int]:
    """(axis, begin, end) normalised as MXNet's GetSliceAxisParams; begin < end is required."""
    a = _axis(op, attrs["axis"], len(d))
    size = d[a]
    b = attrs["begin"]
    e = attrs["end"]
    if b < 0:
        b += size
    if size > 0:
        e = size if e is None else e + size if e < 0 else e
        if e > size:
            raise _err(op, f"Invalid end for end={e} as axis_size is {size}")
        if not b < e:
            raise _err(op, f"Invalid begin, end, get begin={attrs['begin']}, end={attrs['end']} "
                           f"for axis {attrs['axis']} of size {size}")
    else:
        b, e = 0, 0
    if b < 0 or e < 0:
        raise _err(op, f"Invalid begin, end, get begin={attrs['begin']}, end={attrs['end']}")
    return a, b, e


@register("slice_axis")
class SliceAxis(_ShapeOp):
    """`data` restricted to [begin, end) along `axis` (negative indices count from the end;
    end=None means the axis size)."""
    params = {"axis": Param(Int), "begin": Param(Int), "end": Param(Optional(Int), None)}

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        d = tuple(d)
        a = _axis(self.name, attrs["axis"], len(d))
        if d[a] == 0:
            return [d], [d]
        _, b, e = _slice_axis_range(self.name, attrs, d)
        return [d], [tuple(e - b if i == a else x for i, x in enumerate(d))]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        a, b, e = _slice_axis_range(self.name, attrs, x.shape)
        return [_fresh(x[(slice(None),) * a + (slice(b, e),)])]

    def grad(self, F, attrs, inputs, outputs, ograds):
        x = inputs[0]
        a = _axis(self.name, attrs["axis"], _ndim_of(self.name, x, "data"))
        pad = (None,) * a
        return [F._slice_assign(F.zeros_like(x), ograds[0], begin=pad + (attrs["begin"],),
                                end=pad + (attrs["end"],), step=())]


@register("slice_like")
class SliceLike(_ShapeOp):
    """`data` sliced from 0 to the sizes of `shape_like` on `axes` (default: every axis)."""
    inputs = ("data", "shape_like")
    params = {"axes": Param(Shape, ())}

    def _out(self, attrs, d: tuple, like: tuple) -> tuple:
        axes = attrs["axes"]
        if not axes:
            if len(d) != len(like):
                raise _err(self.name, "By default slice_like performs slice on all axes, but ndim "
                                      f"mismatch for inputs: {len(d)} vs. {len(like)}")
            sel = range(len(d))
        else:
            sel = []
            for ax in axes:
                a = _axis(self.name, ax, len(d), "axes entry")
                if a >= len(like):
                    raise _err(self.name, f"Slice axis {a} exceeds second input's ndim {len(like)}")
                sel.append(a)
        out = list(d)
        for a in sel:
            if d[a] and like[a] and like[a] > d[a]:
                raise _err(self.name, f"Slice axis {a} with size {like[a]} exceeds limit of input "
                                      f"with size {d[a]}")
            out[a] = like[a]
        return tuple(out)

    def infer_shape(self, attrs, in_shapes):
        d, like = in_shapes
        if d is None or like is None:
            return list(in_shapes), [None]
        return [tuple(d), tuple(like)], [self._out(attrs, tuple(d), tuple(like))]

    def infer_type(self, attrs, in_types):
        return _first_input_type(in_types)

    def compute(self, attrs, inputs, ctx):
        x, like = inputs
        out = self._out(attrs, x.shape, like.shape)
        return [_fresh(x[tuple(slice(0, n) for n in out)])]

    def grad(self, F, attrs, inputs, outputs, ograds):
        x, like = inputs
        end = _concrete_shape(self.name, ograds[0], "the output gradient")
        return [F._slice_assign(F.zeros_like(x), ograds[0], begin=(0,) * len(end), end=end, step=()),
                F.zeros_like(like)]


# --------------------------------------------------------------------------------------
# Gathering and scattering by index
# --------------------------------------------------------------------------------------

_TAKE_MODES = ("clip", "wrap", "raise")


def _take_indices(op: str, idx: np.ndarray, n: int, mode: str) -> np.ndarray:
    """Map index values to valid positions in [0, n) per MXNet's take/pick modes."""
    j = _as_index(op, idx)
    if mode == "raise":
        bad = (j < 0) | (j >= n)
        if np.any(bad):
            raise _err(op, f"index {int(j[bad].flat[0])} is out of bounds for axis of size {n} "
                           "(mode='raise')")
        return j
    if n == 0:
        raise _err(op, "cannot index into an axis of size 0")
    if mode == "wrap":
        return np.mod(j, n)
    # np.clip(j, 0, n - 1) in place (j is a fresh int64 array), without its Python wrapper
    return np.maximum(np.minimum(j, n - 1, out=j), 0, out=j)


def _take_shape(op: str, attrs, a: tuple, idx: tuple) -> tuple:
    ax = _axis(op, attrs["axis"], len(a))
    return tuple(a[:ax]) + tuple(idx) + tuple(a[ax + 1:])


@register("take")
class Take(_ShapeOp):
    """Gather slices of `a` along `axis` at `indices`; output shape
    a.shape[:axis] + indices.shape + a.shape[axis+1:]. Out-of-range indices are clipped
    (mode='clip'), wrapped ('wrap') or an error ('raise')."""
    inputs = ("a", "indices")
    params = {"axis": Param(Int, 0), "mode": Param(Enum(*_TAKE_MODES), "clip")}
    kernel = "gather"

    def infer_shape(self, attrs, in_shapes):
        a, idx = in_shapes
        if a is None or idx is None:
            if a is not None:
                _axis(self.name, attrs["axis"], len(a))
            return list(in_shapes), [None]
        return [tuple(a), tuple(idx)], [_take_shape(self.name, attrs, tuple(a), tuple(idx))]

    def infer_type(self, attrs, in_types):
        return _first_input_type(in_types)   # indices keep their own dtype (float32 by default, as MXNet)

    def compute(self, attrs, inputs, ctx):
        a, idx = inputs
        ax = _axis(self.name, attrs["axis"], a.ndim)
        j = _take_indices(self.name, idx, a.shape[ax], attrs["mode"])
        return [_fresh(np.take(a, j, axis=ax))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        a, idx = inputs
        shape = _concrete_shape(self.name, a, "input 'a'")
        return [F._backward_take(ograds[0], idx, axis=attrs["axis"], mode=attrs["mode"], shape=shape),
                F.zeros_like(idx)]


@register("_backward_take")
class BackwardTake(_ShapeOp):
    """Scatter-add `ograd` (shaped like take's output) into zeros of `shape` along `axis` at
    `indices` (the gradient of `take` with respect to its data)."""
    inputs = ("ograd", "indices")
    params = {"axis": Param(Int, 0), "mode": Param(Enum(*_TAKE_MODES), "clip"), "shape": Param(Shape)}
    kernel = "gather"
    hidden = True

    def infer_shape(self, attrs, in_shapes):
        g, idx = in_shapes
        shape = attrs["shape"]
        if idx is not None:
            g = merge_shape(self.name, "input 'ograd'", _take_shape(self.name, attrs, shape, tuple(idx)), g)
        return [g, idx], [shape]

    def infer_type(self, attrs, in_types):
        return _first_input_type(in_types)

    def compute(self, attrs, inputs, ctx):
        g, idx = inputs
        shape = attrs["shape"]
        ax = _axis(self.name, attrs["axis"], len(shape))
        expect = _take_shape(self.name, attrs, shape, idx.shape)
        if g.shape != expect:
            raise _err(self.name, f"shape mismatch for input 'ograd': expected {expect}, got {g.shape}")
        j = _take_indices(self.name, idx, shape[ax], attrs["mode"]).reshape(-1)
        out = np.zeros(shape, dtype=g.dtype)
        moved = np.moveaxis(out, ax, 0)
        gm = g.reshape(shape[:ax] + (j.size,) + shape[ax + 1:])
        np.add.at(moved, j, np.moveaxis(gm, ax, 0))
        return [out]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.take(ograds[0], inputs[1], axis=attrs["axis"], mode=attrs["mode"]),
                F.zeros_like(inputs[1])]


_PICK_MODES = ("clip", "wrap")


def _pick_shapes(op: str, attrs, d: tuple) -> tuple[int, tuple, tuple]:
    """(axis, output shape, index shape without keepdims) for pick on data shape `d`."""
    if attrs["axis"] is None:
        raise _err(op, "axis=None is not supported by pick yet. Must specify an axis.")
    a = _axis(op, attrs["axis"], len(d))
    reduced = tuple(d[:a]) + tuple(d[a + 1:])
    kept = tuple(d[:a]) + (1,) + tuple(d[a + 1:])
    return a, kept if attrs["keepdims"] else reduced, reduced


def _pick_positions(op: str, attrs, d: tuple, index: np.ndarray) -> tuple[int, np.ndarray]:
    """The axis and the index array shaped like data with 1 at the axis, mapped per mode."""
    a, _, reduced = _pick_shapes(op, attrs, d)
    kept = tuple(d[:a]) + (1,) + tuple(d[a + 1:])
    if index.shape not in (reduced, kept):
        raise _err(op, f"shape mismatch for input 'index': expected {reduced} or {kept}, got {index.shape}")
    j = _take_indices(op, index, d[a], attrs["mode"])
    return a, j.reshape(kept)


@register("pick", aliases=("choose_element_0index",))
class Pick(_ShapeOp):
    """out[i..., k...] = data[i..., index[i..., k...], k...] along `axis` (keepdims keeps it as
    size 1); out-of-range indices are clipped or wrapped per `mode`."""
    inputs = ("data", "index")
    params = {"axis": Param(Optional(Int), -1), "keepdims": Param(Bool, False),
              "mode": Param(Enum(*_PICK_MODES), "clip")}
    kernel = "gather"

    def infer_shape(self, attrs, in_shapes):
        d, idx = in_shapes
        if d is None:
            return list(in_shapes), [None]
        a, out, reduced = _pick_shapes(self.name, attrs, tuple(d))
        if idx is not None and len(idx) == len(d):
            idx = merge_shape(self.name, "input 'index'", tuple(d[:a]) + (1,) + tuple(d[a + 1:]), idx)
        else:
            idx = merge_shape(self.name, "input 'index'", reduced, idx)
        return [tuple(d), idx], [out]

    def infer_type(self, attrs, in_types):
        return _first_input_type(in_types)

    def compute(self, attrs, inputs, ctx):
        x, index = inputs
        a, j = _pick_positions(self.name, attrs, x.shape, index)
        _, out_shape, _ = _pick_shapes(self.name, attrs, x.shape)
        return [_fresh(np.take_along_axis(x, j, axis=a).reshape(out_shape))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        x, index = inputs
        shape = _concrete_shape(self.name, x, "input 'data'")
        return [F._backward_pick(ograds[0], index, axis=attrs["axis"], keepdims=attrs["keepdims"],
                                 mode=attrs["mode"], shape=shape), F.zeros_like(index)]


@register("_backward_pick")
class BackwardPick(_ShapeOp):
    """Scatter-add `ograd` (pick's output shape) into zeros of `shape` at the picked positions
    (the gradient of `pick` with respect to its data)."""
    inputs = ("ograd", "index")
    params = {"axis": Param(Optional(Int), -1), "keepdims": Param(Bool, False),
              "mode": Param(Enum(*_PICK_MODES), "clip"), "shape": Param(Shape)}
    kernel = "gather"
    hidden = True

    def infer_shape(self, attrs, in_shapes):
        g, idx = in_shapes
        fwd = {k: v for k, v in attrs.items() if k != "shape"}
        (_, idx), ograd = forward_shapes(self.name, "pick", fwd, [attrs["shape"], idx], {0: g})
        return [ograd[0], idx], [attrs["shape"]]

    def infer_type(self, attrs, in_types):
        return _first_input_type(in_types)

    def compute(self, attrs, inputs, ctx):
        g, index = inputs
        shape = attrs["shape"]
        a, j = _pick_positions(self.name, attrs, shape, index)
        kept = j.shape
        if g.size != _prod(kept):
            raise _err(self.name, f"shape mismatch for input 'ograd': expected {kept}, got {g.shape}")
        out = np.zeros(shape, dtype=g.dtype)
        grids = list(np.indices(kept, sparse=True))
        grids[a] = j
        np.add.at(out, tuple(grids), g.reshape(kept))
        return [out]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.pick(ograds[0], inputs[1], axis=attrs["axis"], keepdims=attrs["keepdims"],
                       mode=attrs["mode"]), F.zeros_like(inputs[1])]


@register("one_hot")
class OneHot(_ShapeOp):
    """out[..., j] = on_value where indices[...] == j else off_value; shape indices.shape +
    (depth,). Indices outside [0, depth) give a row of off_value."""
    inputs = ("indices",)
    params = {"depth": Param(Int), "on_value": Param(Float, 1.0), "off_value": Param(Float, 0.0),
              "dtype": Param(Dtype, "float32")}

    def _check(self, attrs):
        if attrs["depth"] < 0:
            raise _err(self.name, "Dimension size, depth, must be a non-negative integer, "
                                  f"got {attrs['depth']}")

    def infer_shape(self, attrs, in_shapes):
        self._check(attrs)
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        return [tuple(d)], [tuple(d) + (attrs["depth"],)]

    def infer_type(self, attrs, in_types):
        return list(in_types), [attrs["dtype"]]

    def compute(self, attrs, inputs, ctx):
        self._check(attrs)
        j = _as_index(self.name, inputs[0])
        depth = attrs["depth"]
        hit = j[..., None] == np.arange(depth)
        out = np.where(hit, attrs["on_value"], attrs["off_value"])
        return [np.ascontiguousarray(out.astype(attrs["dtype"]))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.zeros_like(inputs[0])]


def _gather_nd_out(op: str, d: tuple, idx: tuple) -> tuple:
    if len(idx) < 2:
        raise _err(op, f"requires index tensor to have at least 2 dimensions, got indices shape {idx}")
    m = idx[0]
    if m > len(d):
        raise _err(op, f"Number of indices exceeds data dimension: indices.shape[0]={m} for data of "
                       f"shape {d}")
    if m > 10:
        raise _err(op, "supports indexing along at most 10 dimensions")
    return tuple(idx[1:]) + tuple(d[m:])


def _nd_positions(op: str, index: np.ndarray, shape: tuple) -> tuple:
    """Validated integer positions (one array per leading axis), negatives wrapped once."""
    j = _as_index(op, index)
    pos = []
    for axis in range(j.shape[0]):
        n = shape[axis]
        col = j[axis]
        bad = (col < -n) | (col >= n)
        if np.any(bad):
            raise MXNetIndexError(f"{op}: index {int(col[bad].flat[0])} is out of bounds for axis {axis} "
                                  f"with size {n}")
        pos.append(np.where(col < 0, col + n, col))
    return tuple(pos)


@register("gather_nd")
class GatherND(_ShapeOp):
    """out[y...] = data[indices[0, y...], ..., indices[M-1, y...], ...] (M = indices.shape[0])."""
    inputs = ("data", "indices")
    kernel = "gather"

    def infer_shape(self, attrs, in_shapes):
        d, idx = in_shapes
        if d is None or idx is None or (len(idx) and idx[0] == 0):
            return list(in_shapes), [None]
        return [tuple(d), tuple(idx)], [_gather_nd_out(self.name, tuple(d), tuple(idx))]

    def infer_type(self, attrs, in_types):
        return _first_input_type(in_types)

    def compute(self, attrs, inputs, ctx):
        x, index = inputs
        _gather_nd_out(self.name, x.shape, index.shape)
        return [_fresh(x[_nd_positions(self.name, index, x.shape)])]

    def grad(self, F, attrs, inputs, outputs, ograds):
        x, index = inputs
        shape = _concrete_shape(self.name, x, "input 'data'")
        return [F._backward_gather_nd(ograds[0], index, shape=shape), F.zeros_like(index)]


def _scatter_nd_check(op: str, d: tuple, idx: tuple, shape: tuple) -> None:
    if len(idx) < 2:
        raise _err(op, f"requires index tensor to have at least 2 dimensions, got indices shape {idx}")
    m = idx[0]
    if m > len(shape):
        raise _err(op, f"Number of indices exceeds output dimension: indices.shape[0]={m} for output "
                       f"shape {shape}")
    expect = tuple(idx[1:]) + tuple(shape[m:])
    try:
        merge_shape(op, "input 'data'", expect, d)
    except MXNetError:
        raise _err(op, f"Invalid data, indices, and output shape combination: {d}, {idx}, {shape} "
                       f"(data should have shape {expect})") from None


@register("scatter_nd")
class ScatterND(_ShapeOp):
    """Zeros of `shape` with out[indices[:, y...]...] = data[y...] (duplicates: one write wins)."""
    inputs = ("data", "indices")
    params = {"shape": Param(Shape)}
    kernel = "gather"

    def infer_shape(self, attrs, in_shapes):
        d, idx = in_shapes
        if d is not None and idx is not None and idx[0]:
            _scatter_nd_check(self.name, tuple(d), tuple(idx), attrs["shape"])
        return list(in_shapes), [attrs["shape"]]

    def infer_type(self, attrs, in_types):
        return _first_input_type(in_types)

    def compute(self, attrs, inputs, ctx):
        x, index = inputs
        shape = attrs["shape"]
        _scatter_nd_check(self.name, x.shape, index.shape, shape)
        out = np.zeros(shape, dtype=x.dtype)
        out[_nd_positions(self.name, index, shape)] = x
        return [out]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.gather_nd(ograds[0], inputs[1]), F.zeros_like(inputs[1])]


@register("_scatter_set_nd")
class ScatterSetND(_ShapeOp):
    """A copy of `lhs` with out[indices[:, y...]...] = rhs[y...] (MXNet's `x[idx] = v` on
    NDArrays; duplicates: one write wins)."""
    inputs = ("lhs", "rhs", "indices")
    params = {"shape": Param(Shape)}
    kernel = "gather"

    def infer_shape(self, attrs, in_shapes):
        lhs, rhs, idx = in_shapes
        shape = tuple(attrs["shape"])
        lhs = merge_shape(self.name, "input 'lhs'", lhs, shape)
        if rhs is not None and idx is not None and idx[0]:
            _scatter_nd_check(self.name, tuple(rhs), tuple(idx), shape)
        return [lhs, rhs, idx], [lhs]

    def infer_type(self, attrs, in_types):
        t = in_types[0] or in_types[1]
        return [t, t, in_types[2]], [t]

    def compute(self, attrs, inputs, ctx):
        lhs, rhs, index = inputs
        shape = tuple(attrs["shape"])
        if lhs.shape != shape:
            raise _err(self.name, f"shape mismatch for input 'lhs': expected {shape}, got {lhs.shape}")
        _scatter_nd_check(self.name, rhs.shape, index.shape, shape)
        out = np.array(lhs, copy=True)
        out[_nd_positions(self.name, index, shape)] = rhs
        return [out]

    def grad(self, F, attrs, inputs, outputs, ograds):
        lhs, rhs, index = inputs
        dy = ograds[0]
        kept = F._scatter_set_nd(dy, F.zeros_like(rhs), index, shape=attrs["shape"])
        return [kept, F.gather_nd(dy, index), F.zeros_like(index)]


@register("_backward_gather_nd")
class BackwardGatherND(_ShapeOp):
    """Zeros of `shape` with data scatter-added at `indices` (duplicates accumulate): the
    gradient of gather_nd."""
    inputs = ("data", "indices")
    params = {"shape": Param(Shape)}
    kernel = "gather"
    hidden = True

    def infer_shape(self, attrs, in_shapes):
        d, idx = in_shapes
        if d is not None and idx is not None and idx[0]:
            _scatter_nd_check(self.name, tuple(d), tuple(idx), attrs["shape"])
        return list(in_shapes), [attrs["shape"]]

    def infer_type(self, attrs, in_types):
        return _first_input_type(in_types)

    def compute(self, attrs, inputs, ctx):
        x, index = inputs
        shape = attrs["shape"]
        _scatter_nd_check(self.name, x.shape, index.shape, shape)
        out = np.zeros(shape, dtype=x.dtype)
        np.add.at(out, _nd_positions(self.name, index, shape), x)
        return [out]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.gather_nd(ograds[0], inputs[1]), F.zeros_like(inputs[1])]


# --------------------------------------------------------------------------------------
# Padding, diagonals, depth/space, shape queries
# --------------------------------------------------------------------------------------

_PAD_MODES = ("constant", "edge", "reflect")


def _pad_check(op: str, attrs, d: tuple) -> None:
    """MXNet's Pad restrictions: 4-D or 5-D input, no padding on the first two axes,
    2*ndim widths, reflect pads smaller than the padded dims."""
    pw = attrs["pad_width"]
    if len(d) not in (4, 5):
        raise _err(op, f"Current implementation only supports 4-D or 5-D input, got shape {d}")
    if len(pw) != 2 * len(d):
        raise _err(op, f"Input shape vs padding spec mismatch: pad_width {pw} needs {2 * len(d)} "
                       f"entries for input shape {d}")
    if any(pw[:4]):
        raise _err(op, f"Current implementation expects padding on the first two axes to be zero, "
                       f"got pad_width {pw}")
    if any(p < 0 for p in pw):
        raise _err(op, f"pad_width {pw} must be non-negative")
    if attrs["mode"] == "reflect":
        for ax in range(2, len(d)):
            if d[ax] and (pw[2 * ax] >= d[ax] or pw[2 * ax + 1] >= d[ax]):
                raise _err(op, "Current implementation of reflection padding only supports padding "
                               f"sizes smaller than the input size: pad_width {pw}, input shape {d}")


def _pad_source_index(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """For each padded position along one axis, the source position (-1: constant fill)."""
    if mode == "constant":
        return np.concatenate([np.full(before, -1), np.arange(n), np.full(after, -1)]).astype(np.int64)
    return np.pad(np.arange(n), (before, after), mode=mode).astype(np.int64)


@register("Pad", aliases=("pad",))
class Pad(_ShapeOp):
    """Pad a 4-D or 5-D array on its spatial axes: pad_width = (before_1, after_1, ...,
    before_N, after_N) with zeros on the first two axes; mode constant (constant_value),
    edge (repeat the border) or reflect (mirror without repeating the border)."""
    params = {"mode": Param(Enum(*_PAD_MODES)), "pad_width": Param(Shape),
              "constant_value": Param(Float, 0.0)}

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        d = tuple(d)
        _pad_check(self.name, attrs, d)
        pw = attrs["pad_width"]
        return [d], [tuple(x + pw[2 * i] + pw[2 * i + 1] if x else 0 for i, x in enumerate(d))]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        _pad_check(self.name, attrs, x.shape)
        pw = attrs["pad_width"]
        pairs = [(pw[2 * i], pw[2 * i + 1]) for i in range(x.ndim)]
        if attrs["mode"] == "constant":
            out = np.pad(x, pairs, mode="constant", constant_values=attrs["constant_value"])
        else:
            out = np.pad(x, pairs, mode=attrs["mode"])
        return [_fresh(out.astype(x.dtype, copy=False))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F._backward_Pad(ograds[0], mode=attrs["mode"], pad_width=attrs["pad_width"])]


@register("_backward_Pad")
class BackwardPad(_ShapeOp):
    """The gradient of Pad: each padded position's gradient added to its source position (the
    border for edge, the mirrored position for reflect, nothing for constant)."""
    inputs = ("ograd",)
    params = {"mode": Param(Enum(*_PAD_MODES)), "pad_width": Param(Shape),
              "constant_value": Param(Float, 0.0)}
    hidden = True

    def _in_shape(self, attrs, g: tuple) -> tuple:
        pw = attrs["pad_width"]
        if len(pw) != 2 * len(g):
            raise _err(self.name, f"pad_width {pw} needs {2 * len(g)} entries for ograd shape {g}")
        out = tuple(x - pw[2 * i] - pw[2 * i + 1] if x else 0 for i, x in enumerate(g))
        if any(x < 0 for x in out) or (shape_known(g) and not all(x > 0 for x in out)):
            raise _err(self.name, f"ograd shape {g} is smaller than the padding {pw}")
        return out

    def infer_shape(self, attrs, in_shapes):
        (g,) = in_shapes
        if g is None:
            return [None], [None]
        return [tuple(g)], [self._in_shape(attrs, tuple(g))]

    def compute(self, attrs, inputs, ctx):
        g = inputs[0]
        shape = self._in_shape(attrs, g.shape)
        pw = attrs["pad_width"]
        acc = g
        for ax, n in enumerate(shape):
            src = _pad_source_index(n, pw[2 * ax], pw[2 * ax + 1], attrs["mode"])
            keep = src >= 0
            moved = np.moveaxis(acc, ax, 0)
            red = np.zeros((n,) + moved.shape[1:], dtype=g.dtype)
            np.add.at(red, src[keep], moved[keep])
            acc = np.moveaxis(red, 0, ax)
        return [_fresh(acc)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.Pad(ograds[0], mode=attrs["mode"], pad_width=attrs["pad_width"], constant_value=0.0)]


def _diag_out(op: str, attrs, d: tuple) -> tuple:
    k = attrs["k"]
    if len(d) == 0:
        raise _err(op, "input must have at least one dimension")
    if len(d) == 1:
        s = d[0] + abs(k) if d[0] else 0
        return (s, s)
    a1 = _axis(op, attrs["axis1"], len(d), "axis1")
    a2 = _axis(op, attrs["axis2"], len(d), "axis2")
    if a1 == a2:
        raise _err(op, f"axis1 and axis2 cannot refer to the same axis {a1}")
    h, w = d[a1], d[a2]
    if h and w:
        if k > 0:
            w -= k
        elif k < 0:
            h += k
        s = min(h, w)
        if s <= 0:
            raise _err(op, f"k={k} selects no diagonal of the {d[a1]}x{d[a2]} matrices (axis1={a1}, "
                           f"axis2={a2})")
    else:
        s = 0
    return tuple(x for i, x in enumerate(d) if i not in (a1, a2)) + (s,)


def _diag_positions(k: int, s: int) -> tuple[np.ndarray, np.ndarray]:
    i = np.arange(s)
    return (i, i + k) if k >= 0 else (i - k, i)


@register("diag")
class Diag(_ShapeOp):
    """1-D input: the 2-D matrix with the input on its k-th diagonal. N-D input: the k-th
    diagonal over axes (axis1, axis2), appended as the last axis."""
    params = {"k": Param(Int, 0), "axis1": Param(Int, 0), "axis2": Param(Int, 1)}

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        return [tuple(d)], [_diag_out(self.name, attrs, tuple(d))]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        _diag_out(self.name, attrs, x.shape)
        if x.ndim == 1:
            return [_fresh(np.diag(x, attrs["k"]))]
        a1 = _axis(self.name, attrs["axis1"], x.ndim)
        a2 = _axis(self.name, attrs["axis2"], x.ndim)
        return [_fresh(np.diagonal(x, attrs["k"], a1, a2))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        x = inputs[0]
        if _ndim_of(self.name, x, "data") == 1:
            return [F.diag(ograds[0], k=attrs["k"])]
        return [F._backward_diag(ograds[0], k=attrs["k"], axis1=attrs["axis1"], axis2=attrs["axis2"],
                                 shape=_concrete_shape(self.name, x, "data"))]


@register("_backward_diag")
class BackwardDiag(_ShapeOp):
    """Zeros of `shape` (rank >= 2) with `ograd` written on the k-th diagonal over (axis1,
    axis2): the gradient of diag's extraction."""
    inputs = ("ograd",)
    params = {"k": Param(Int, 0), "axis1": Param(Int, 0), "axis2": Param(Int, 1), "shape": Param(Shape)}
    hidden = True

    def infer_shape(self, attrs, in_shapes):
        shape = attrs["shape"]
        if len(shape) < 2:
            raise _err(self.name, f"shape {shape} must have at least 2 dimensions")
        g = merge_shape(self.name, "input 'ograd'", _diag_out(self.name, attrs, shape), in_shapes[0])
        return [g], [shape]

    def compute(self, attrs, inputs, ctx):
        g = inputs[0]
        shape = attrs["shape"]
        (expect,), _ = self.infer_shape(attrs, [g.shape])
        out = np.zeros(shape, dtype=g.dtype)
        a1 = _axis(self.name, attrs["axis1"], len(shape))
        a2 = _axis(self.name, attrs["axis2"], len(shape))
        view = np.moveaxis(out, (a1, a2), (-2, -1))
        rows, cols = _diag_positions(attrs["k"], expect[-1])
        view[..., rows, cols] = g
        return [out]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.diag(ograds[0], k=attrs["k"], axis1=attrs["axis1"], axis2=attrs["axis2"])]


def _block(op: str, attrs) -> int:
    b = attrs["block_size"]
    if b <= 0:
        raise _err(op, f"block_size must be a positive integer value, got {b}")
    return b


def _nonzero_dims(op: str, shape) -> None:
    """MXNet's depth/space rearrangements refuse an input with a 0 dim (nothing to rearrange)."""
    if 0 in tuple(shape):
        raise _err(op, f"every dimension of the input must be non-zero, got shape {tuple(shape)}")


@register("depth_to_space")
class DepthToSpace(_ShapeOp):
    """(N, C, H, W) -> (N, C/b^2, H*b, W*b): out[n, c, h*b+i, w*b+j] = x[n, (i*b+j)*C/b^2 + c, h, w]."""
    params = {"block_size": Param(Int)}

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        b = _block(self.name, attrs)
        if len(d) != 4:
            raise _err(self.name, f"Operation Depth To Space requires exactly 4D tensor, "
                                  f"got shape {tuple(d)}")
        n, c, h, w = d
        if c and c % (b * b):
            raise _err(self.name, f"Cannot perform Depth To Space operation on the specified tensor. "
                                  f"Dimension:1(depth dimension) should be a multiple of 'block^2' "
                                  f"(shape {tuple(d)}, block_size {b})")
        return [tuple(d)], [(n, c // (b * b), h * b, w * b)]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        _nonzero_dims(self.name, x.shape)
        _, (out,) = self.infer_shape(attrs, [x.shape])
        b = attrs["block_size"]
        n, c, h, w = x.shape
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
        return [_fresh(y.reshape(out))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.space_to_depth(ograds[0], block_size=attrs["block_size"])]


@register("space_to_depth")
class SpaceToDepth(_ShapeOp):
    """(N, C, H, W) -> (N, C*b^2, H/b, W/b), the inverse of depth_to_space."""
    params = {"block_size": Param(Int)}

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        b = _block(self.name, attrs)
        if len(d) != 4:
            raise _err(self.name, f"Operation Space To Depth requires exactly 4D tensor, "
                                  f"got shape {tuple(d)}")
        n, c, h, w = d
        if (h and h % b) or (w and w % b):
            raise _err(self.name, f"Cannot perform Space To Depth operation on the specified tensor. "
                                  f"Dimensions 2 and 3 (space dimensions) should be multiples of 'block' "
                                  f"(shape {tuple(d)}, block_size {b})")
        return [tuple(d)], [(n, c * b * b, h // b, w // b)]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        _nonzero_dims(self.name, x.shape)
        _, (out,) = self.infer_shape(attrs, [x.shape])
        b = attrs["block_size"]
        n, c, h, w = x.shape
        y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
        return [_fresh(y.reshape(out))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.depth_to_space(ograds[0], block_size=attrs["block_size"])]


@register("shape_array")
class ShapeArray(_ShapeOp):
    """The input's shape as a 1-D int64 array."""

    shape_only = True

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        return [d], [None if d is None else (len(d),)]

    def infer_type(self, attrs, in_types):
        return list(in_types), ["int64"]

    def compute(self, attrs, inputs, ctx):
        return [np.array(inputs[0].shape, dtype=np.int64).reshape(inputs[0].ndim)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.zeros_like(inputs[0])]


@register("size_array")
class SizeArray(_ShapeOp):
    """The input's number of elements as a (1,) int64 array."""

    shape_only = True

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), [(1,)]

    def infer_type(self, attrs, in_types):
        return list(in_types), ["int64"]

    def compute(self, attrs, inputs, ctx):
        return [np.array([inputs[0].size], dtype=np.int64)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.zeros_like(inputs[0])]


# Shared with the code generators (public name; the ops above keep the private one).
transpose_axes = _transpose_axes
