"""NumPy-semantics shape and selection operators (reshape, transpose, indexing, concatenation,
splitting, flips, tiling, padding, triangles, diagonals, ...).

Each is a `SelectOp`: every output element is a copy of one input element or a constant. Their
gradient is generic: the op is run once more on arrays holding each input element's position
(1-based, 0 for "no source"), and the output gradient is summed back into those positions, so a
new selection op needs only its numpy function.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..base import MXNetError
from .attrs import Any_, Bool, Int, Param, Str
from .np_base import Axis, Literal, NumpyOp, normalize_axis, register_numpy

__all__ = ["SelectOp"]


class SelectOp(NumpyOp):
    """An op whose outputs only select (copy) elements of its first `tracked` inputs."""

    def tracked(self, attrs, n_inputs: int) -> int:
        """How many leading inputs carry values (the rest are indices, no gradient)."""
        return n_inputs

    def select(self, attrs, *xs):
        """The forward function applied to position arrays (default: `forward`)."""
        return self.forward(attrs, *xs)

    def out_types(self, attrs, in_types):
        return [in_types[0]] * self.num_outputs(attrs)

    def vjp(self, attrs, xs, ys, dys):
        k = self.tracked(attrs, len(xs))
        sizes = [x.size for x in xs[:k]]
        offsets = np.cumsum([0] + sizes)
        positions = [np.arange(o + 1, o + s + 1, dtype=np.int64).reshape(x.shape)
                     for o, s, x in zip(offsets, sizes, xs[:k])]
        out = self.select(attrs, *positions, *xs[k:])
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        idx = np.concatenate([np.asarray(o, np.int64).reshape(-1) for o in outs])
        g = np.concatenate([np.asarray(d, np.float64).reshape(-1) for d in dys])
        total = np.bincount(idx, weights=g, minlength=int(offsets[-1]) + 1)[1:]
        grads = [total[offsets[i]:offsets[i + 1]].reshape(x.shape) for i, x in enumerate(xs[:k])]
        return grads + [None] * (len(xs) - k)


def _shape_attr(v):
    v = Literal(v)
    if isinstance(v, int):
        return (v,)
    if isinstance(v, tuple) and all(isinstance(d, int) for d in v):
        return v
    raise ValueError(f"expected a shape (int or tuple of ints), got {v!r}")


@register_numpy("_np_reshape")
class NpReshape(SelectOp):
    """numpy.reshape (one -1 allowed); `order` 'C'."""
    params = {"newshape": Param(_shape_attr), "order": Param(Str, "C")}

    def forward(self, attrs, a):
        if attrs["order"] != "C":
            raise MXNetError(f"{self.name}: only order='C' is supported, got {attrs['order']!r}")
        try:
            return a.reshape(attrs["newshape"])
        except ValueError as e:
            raise MXNetError(f"{self.name}: cannot reshape array of shape {a.shape} into shape "
                             f"{attrs['newshape']}: {e}") from None


@register_numpy("_np_transpose")
class NpTranspose(SelectOp):
    """numpy.transpose (axes None reverses them)."""
    params = {"axes": Param(Axis, None)}

    def forward(self, attrs, a):
        axes = attrs["axes"]
        if isinstance(axes, int):
            axes = (axes,)
        if axes is not None and (len(axes) != a.ndim or sorted(x % max(a.ndim, 1) for x in axes) != list(range(a.ndim))):
            raise MXNetError(f"{self.name}: axes {axes} do not match array of dimension {a.ndim}")
        return np.transpose(a, axes)


@register_numpy("_npi_swapaxes")
class NpSwapaxes(SelectOp):
    """numpy.swapaxes."""
    params = {"dim1": Param(Int, 0), "dim2": Param(Int, 0)}

    def forward(self, attrs, a):
        return np.swapaxes(a, normalize_axis(self.name, attrs["dim1"], a.ndim),
                           normalize_axis(self.name, attrs["dim2"], a.ndim))


@register_numpy("_np_moveaxis")
class NpMoveaxis(SelectOp):
    """numpy.moveaxis."""
    params = {"source": Param(Axis), "destination": Param(Axis)}

    def forward(self, attrs, a):
        return np.moveaxis(a, attrs["source"], attrs["destination"])


@register_numpy("_npi_expand_dims")
class NpExpandDims(SelectOp):
    """numpy.expand_dims."""
    params = {"axis": Param(Axis)}

    def forward(self, attrs, a):
        return np.expand_dims(a, attrs["axis"])


@register_numpy("_np_squeeze")
class NpSqueeze(SelectOp):
    """numpy.squeeze (size-1 axes; all of them for None)."""
    params = {"axis": Param(Axis, None)}

    def forward(self, attrs, a):
        return np.squeeze(a, attrs["axis"])


@register_numpy("_npi_broadcast_to")
class NpBroadcastTo(SelectOp):
    """numpy.broadcast_to (a copy)."""
    params = {"shape": Param(_shape_attr)}

    def forward(self, attrs, a):
        return np.broadcast_to(a, attrs["shape"])


@register_numpy("_npi_flip")
class NpFlip(SelectOp):
    """numpy.flip."""
    params = {"axis": Param(Axis, None)}

    def forward(self, attrs, a):
        return np.flip(a, attrs["axis"])


@register_numpy("_np_roll")
class NpRoll(SelectOp):
    """numpy.roll."""
    params = {"shift": Param(Axis, None), "axis": Param(Axis, None)}

    def forward(self, attrs, a):
        return np.roll(a, attrs["shift"], attrs["axis"])


@register_numpy("_npi_rot90")
class NpRot90(SelectOp):
    """numpy.rot90."""
    params = {"k": Param(Int, 1), "axes": Param(Axis, (0, 1))}

    def forward(self, attrs, a):
        return np.rot90(a, attrs["k"], attrs["axes"])


@register_numpy("_npi_tile")
class NpTile(SelectOp):
    """numpy.tile."""
    params = {"reps": Param(_shape_attr)}

    def forward(self, attrs, a):
        return np.tile(a, attrs["reps"])


@register_numpy("_np_repeat")
class NpRepeat(SelectOp):
    """numpy.repeat (of the flattened array for axis None)."""
    params = {"repeats": Param(Axis), "axis": Param(Axis, None)}

    def forward(self, attrs, a):
        return np.repeat(a, attrs["repeats"], attrs["axis"])


@register_numpy("_np_diag")
class NpDiag(SelectOp):
    """numpy.diag: the k-th diagonal of a 2-D array, or a 2-D array with a 1-D one on it."""
    params = {"k": Param(Int, 0)}

    def forward(self, attrs, a):
        if a.ndim not in (1, 2):
            raise MXNetError(f"{self.name}: input must be 1-D or 2-D, got shape {a.shape}")
        return np.diag(a, attrs["k"])


@register_numpy("_np_diagflat")
class NpDiagflat(SelectOp):
    """numpy.diagflat."""
    params = {"k": Param(Int, 0)}

    def forward(self, attrs, a):
        return np.diagflat(a, attrs["k"])


@register_numpy("_np_diagonal")
class NpDiagonal(SelectOp):
    """numpy.diagonal."""
    params = {"offset": Param(Int, 0), "axis1": Param(Int, 0), "axis2": Param(Int, 1)}

    def forward(self, attrs, a):
        return np.diagonal(a, attrs["offset"], attrs["axis1"], attrs["axis2"]).copy()


class _Triangle(SelectOp):
    params = {"k": Param(Int, 0)}
    lower = True

    def forward(self, attrs, a):
        if a.ndim < 1:
            raise MXNetError(f"{self.name}: input must be at least 1-D, got a zero-dim array")
        return (np.tril if self.lower else np.triu)(a, attrs["k"])


register_numpy("_npi_tril")(type("NpTril", (_Triangle,), {"__doc__": "numpy.tril."}))
register_numpy("_npi_triu")(type("NpTriu", (_Triangle,), {"lower": False, "__doc__": "numpy.triu."}))


@register_numpy("_npi_pad")
class NpPad(SelectOp):
    """numpy.pad with mode constant (value `constant_values`), edge, reflect, symmetric, wrap."""
    params = {"pad_width": Param(Literal), "mode": Param(Str, "constant"),
              "constant_values": Param(Literal, 0), "reflect_type": Param(Str, "even")}

    def _pad(self, attrs, a, value):
        mode = attrs["mode"]
        if mode == "constant":
            return np.pad(a, attrs["pad_width"], mode, constant_values=value)
        if mode in ("edge", "wrap"):
            return np.pad(a, attrs["pad_width"], mode)
        if mode in ("reflect", "symmetric"):
            return np.pad(a, attrs["pad_width"], mode, reflect_type=attrs["reflect_type"])
        raise MXNetError(f"{self.name}: mode {mode!r} is not supported (constant, edge, reflect, symmetric, wrap)")

    def forward(self, attrs, a):
        return self._pad(attrs, a, attrs["constant_values"])

    def select(self, attrs, a):
        return self._pad(attrs, a, 0)


def _key_arrays(key, arrays: Sequence[np.ndarray]):
    """The index `key` with its array placeholders (('array', i)) replaced by `arrays[i]`."""
    def one(k):
        if isinstance(k, tuple) and len(k) == 2 and k[0] == "array":
            return arrays[k[1]]
        return k
    return tuple(one(k) for k in key)


@register_numpy("_npi_getitem")
class NpGetitem(SelectOp):
    """x[key]: basic (ints, slices, None, Ellipsis), advanced (integer arrays, given as extra
    inputs) and boolean-mask indexing, with numpy's result shapes."""
    params = {"key": Param(Any_), "num_index": Param(Int, 0)}

    def input_names(self, attrs):
        return ["data"] + [f"index{i}" for i in range(attrs["num_index"])]

    def tracked(self, attrs, n_inputs):
        return 1

    def forward(self, attrs, a, *index):
        key = _key_arrays(attrs["key"], index)
        try:
            out = a[key]
        except IndexError as e:
            raise MXNetError(f"{self.name}: index {key!r} is invalid for array of shape {a.shape}: {e}") from None
        return np.array(out, copy=True)


@register_numpy("_npi_take")
class NpTake(SelectOp):
    """numpy.take with mode 'raise', 'wrap' or 'clip'."""
    inputs = ("a", "indices")
    params = {"axis": Param(Literal, None), "mode": Param(Str, "raise")}

    def tracked(self, attrs, n_inputs):
        return 1

    def forward(self, attrs, a, indices):
        try:
            return np.take(a, indices.astype(np.int64), axis=attrs["axis"], mode=attrs["mode"])
        except IndexError as e:
            raise MXNetError(f"{self.name}: {e}") from None


class _Joined(SelectOp):
    """An op joining `num_args` arrays along an axis."""
    params = {"num_args": Param(Int, 1), "axis": Param(Literal, 0)}

    def input_names(self, attrs):
        return [f"arg{i}" for i in range(self.positive_count(attrs, "num_args"))]

    def out_types(self, attrs, in_types):
        t = in_types[0]
        for u in in_types[1:]:
            t = np.promote_types(t, u)
        return [t]


def _join(fn):
    def forward(self, attrs, *xs):
        try:
            return fn(xs, attrs["axis"]) if attrs["axis"] is not None or fn is np.concatenate \
                else fn(xs, None)
        except ValueError as e:
            raise MXNetError(f"{self.name}: {e}") from None
    return forward


register_numpy("_npi_concatenate")(type("NpConcatenate", (_Joined,), {
    "forward": _join(np.concatenate), "__doc__": "numpy.concatenate (axis None joins flattened arrays)."}))
register_numpy("_npi_stack")(type("NpStack", (_Joined,), {
    "forward": _join(np.stack), "__doc__": "numpy.stack."}))


def _stacker(fn):
    def forward(self, attrs, *xs):
        try:
            return fn(xs)
        except ValueError as e:
            raise MXNetError(f"{self.name}: {e}") from None
    return forward


for _name, _fn in (("vstack", np.vstack), ("hstack", np.hstack), ("dstack", np.dstack),
                   ("column_stack", np.column_stack)):
    register_numpy(f"_npi_{_name}")(type(f"Np_{_name}", (_Joined,), {
        "forward": _stacker(_fn), "__doc__": f"numpy.{_name}."}))


@register_numpy("_npi_split")
class NpSplit(SelectOp):
    """numpy.split / array_split: `indices` (split points) or `sections` equal parts along `axis`;
    `squeeze_axis` drops the split axis (size 1 parts)."""
    params = {"indices": Param(Axis, ()), "sections": Param(Int, 0), "axis": Param(Int, 0),
              "squeeze_axis": Param(Bool, False), "even": Param(Bool, True)}

    def num_outputs(self, attrs):
        if attrs["sections"] > 0:
            return attrs["sections"]
        return len(attrs["indices"]) + 1

    def forward(self, attrs, a):
        axis = normalize_axis(self.name, attrs["axis"], a.ndim)
        if attrs["sections"] > 0:
            if attrs["even"] and a.shape[axis] % attrs["sections"]:
                raise MXNetError(f"{self.name}: array split does not result in an equal division: "
                                 f"{a.shape[axis]} into {attrs['sections']}")
            parts = np.array_split(a, attrs["sections"], axis)
        else:
            parts = np.split(a, list(attrs["indices"]), axis)
        if attrs["squeeze_axis"]:
            parts = [np.squeeze(p, axis) for p in parts]
        return tuple(parts)


@register_numpy("_np_copy")
class NpCopy(SelectOp):
    """A copy of the array."""

    def forward(self, attrs, a):
        return a.copy()
