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
from .attrs import Any_, Bool, Count, Float, Int, Param, Str
from .np_base import Axis, Literal, NumpyOp, normalize_axis, register_numpy

__all__ = ["SelectOp", "select_op"]


class SelectOp(NumpyOp):
    """An op whose outputs only select (copy) elements of its first `tracked` inputs.

    `moves_elements` (a lowering trait, codegen/lowering.py): with one input, code generators
    compile the op as strided copies whose affine map they derive from `forward` (and verify)."""
    moves_elements = True

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


def _opt_tuple(v):
    """A tuple attribute (None: empty; a single value: a 1-tuple)."""
    v = Literal(v)
    if v is None:
        return ()
    return tuple(v) if isinstance(v, tuple) else (v,)


@register_numpy("_np_reshape")
class NpReshape(SelectOp):
    """numpy.reshape (one -1 allowed); `order` 'C'."""
    reshape_only = True
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
        if axes is not None and sorted(x % max(a.ndim, 1) for x in axes) != list(range(a.ndim)):
            raise MXNetError(f"{self.name}: axes {axes} do not match array of dimension {a.ndim}")
        return np.transpose(a, axes)


@register_numpy("_npi_swapaxes")
class NpSwapaxes(SelectOp):
    """numpy.swapaxes."""
    params = {"dim1": Param(Int, 0), "dim2": Param(Int, 0)}

    def forward(self, attrs, a):
        return np.swapaxes(a, normalize_axis(self.name, attrs["dim1"], a.ndim),
                           normalize_axis(self.name, attrs["dim2"], a.ndim))


def select_op(name: str, fn, params: dict, doc: str, reshape_only: bool = False) -> None:
    """Register a selection op computing fn(a, *attribute values in `params` order)
    (`reshape_only`: the result is the input's elements in order, in another shape)."""
    keys = tuple(params)

    def forward(self, attrs, a):
        return fn(a, *[attrs[k] for k in keys])
    register_numpy(name)(type(f"Np{name}", (SelectOp,), {"params": params, "forward": forward, "__doc__": doc,
                                                         "reshape_only": reshape_only}))


select_op("_np_moveaxis", np.moveaxis, {"source": Param(Axis), "destination": Param(Axis)}, "numpy.moveaxis.")
select_op("_npi_expand_dims", np.expand_dims, {"axis": Param(Axis)}, "numpy.expand_dims.", reshape_only=True)
select_op("_np_squeeze", np.squeeze, {"axis": Param(Axis, None)}, "numpy.squeeze (all size-1 axes for None).",
          reshape_only=True)
select_op("_npi_broadcast_to", np.broadcast_to, {"shape": Param(_shape_attr)}, "numpy.broadcast_to (a copy).")
select_op("_npi_flip", np.flip, {"axis": Param(Axis, None)}, "numpy.flip.")
select_op("_np_roll", np.roll, {"shift": Param(Axis, None), "axis": Param(Axis, None)}, "numpy.roll.")
select_op("_npi_rot90", np.rot90, {"k": Param(Int, 1), "axes": Param(Axis, (0, 1))}, "numpy.rot90.")
select_op("_npi_tile", np.tile, {"reps": Param(_shape_attr)}, "numpy.tile.")
select_op("_np_repeat", np.repeat, {"repeats": Param(Axis), "axis": Param(Axis, None)},
          "numpy.repeat (of the flattened array for axis None).")
select_op("_np_diagflat", np.diagflat, {"k": Param(Int, 0)}, "numpy.diagflat.")


@register_numpy("_np_diag")
class NpDiag(SelectOp):
    """numpy.diag: the k-th diagonal of a 2-D array, or a 2-D array with a 1-D one on it."""
    params = {"k": Param(Int, 0)}

    def forward(self, attrs, a):
        if a.ndim not in (1, 2):
            raise MXNetError(f"{self.name}: input must be 1-D or 2-D, got shape {a.shape}")
        return np.diag(a, attrs["k"])


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
    """numpy.pad with mode constant (value `constant_value`), edge, reflect, symmetric, wrap."""
    params = {"pad_width": Param(Literal), "mode": Param(Str, "constant"),
              "constant_value": Param(Literal, 0), "reflect_type": Param(Str, "even")}

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
        return self._pad(attrs, a, attrs["constant_value"])

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
    """An op joining `num_args` arrays along an axis (`dim` for the ops MXNet names it so)."""
    params = {"num_args": Param(Count, 1), "axis": Param(Literal, 0)}
    axis_key: str = "axis"

    def input_names(self, attrs):
        return [f"arg{i}" for i in range(self.positive_count(attrs, "num_args"))]

    def out_types(self, attrs, in_types):
        t = in_types[0]
        for u in in_types[1:]:
            t = np.promote_types(t, u)
        return [t]

    def join_axis(self, attrs, ndim: int) -> tuple[int, bool] | None:
        """(axis of the output, whether it is a new axis) along which the inputs (of `ndim`
        dims) are laid one after the other, or None if the op is not such a join (a lowering
        trait: code generators copy each input into its slab)."""
        return None


def _join(fn):
    def forward(self, attrs, *xs):
        axis = attrs[self.axis_key]
        if self.axis_key == "dim":   # `dim` when given, else `axis` (None: the flattened arrays)
            axis = attrs["dim"] if attrs["dim"] is not None else attrs["axis"]
        try:
            return fn(xs, axis)
        except (ValueError, np.exceptions.AxisError) as e:
            raise MXNetError(f"{self.name}: {e}") from None
    return forward


#: MXNet's parameter is `dim`, which its graphs also spell `axis`
_DIM_PARAMS = {"num_args": Param(Count, 1), "dim": Param(Literal, None), "axis": Param(Literal, 0)}


def _concat_axis(self, attrs, ndim):
    axis = attrs["dim"] if attrs["dim"] is not None else attrs["axis"]   # None: flattened inputs
    return (normalize_axis(self.name, axis, ndim), False) if isinstance(axis, int) and ndim > 0 else None


def _stack_axis(self, attrs, ndim):
    axis = attrs["axis"]
    return (normalize_axis(self.name, axis, ndim + 1), True) if isinstance(axis, int) else None


register_numpy("_npi_concatenate", aliases=("_npi_rnn_param_concat",))(type("NpConcatenate", (_Joined,), {
    "forward": _join(np.concatenate), "params": _DIM_PARAMS, "axis_key": "dim", "join_axis": _concat_axis,
    "__doc__": "numpy.concatenate along `dim` (None joins the flattened arrays)."}))
register_numpy("_npi_stack")(type("NpStack", (_Joined,), {
    "forward": _join(np.stack), "join_axis": _stack_axis, "__doc__": "numpy.stack."}))


def _stacker(fn):
    def forward(self, attrs, *xs):
        try:
            return fn(xs)
        except ValueError as e:
            raise MXNetError(f"{self.name}: {e}") from None
    return forward


for _name, _fn in (("vstack", np.vstack), ("hstack", np.hstack), ("dstack", np.dstack),
                   ("column_stack", np.column_stack)):
    _params = _DIM_PARAMS if _name in ("hstack", "dstack") else {"num_args": Param(Count, 1)}
    register_numpy(f"_npi_{_name}")(type(f"Np_{_name}", (_Joined,), {
        "forward": _stacker(_fn), "params": _params, "__doc__": f"numpy.{_name}."}))


@register_numpy("_npi_split")
class NpSplit(SelectOp):
    """numpy.split / array_split: `sections` equal parts along `axis`, or one part per entry of
    `indices` (the starts of the parts, MXNet's form: numpy's split points after a leading 0);
    `squeeze_axis` drops the split axis (size 1 parts)."""
    params = {"indices": Param(_opt_tuple, ()), "sections": Param(Count, 0), "axis": Param(Int, 0),
              "squeeze_axis": Param(Bool, False), "even": Param(Bool, True)}

    def num_outputs(self, attrs):
        if attrs["sections"] > 0:
            return attrs["sections"]
        return max(len(attrs["indices"]), 1)

    def forward(self, attrs, a):
        axis = normalize_axis(self.name, attrs["axis"], a.ndim)
        if attrs["sections"] > 0:
            if attrs["even"] and a.shape[axis] % attrs["sections"]:
                raise MXNetError(f"{self.name}: array split does not result in an equal division: "
                                 f"{a.shape[axis]} into {attrs['sections']}")
            parts = np.array_split(a, attrs["sections"], axis)
        else:
            parts = np.split(a, list(attrs["indices"]) or [0], axis)[1:]
        if attrs["squeeze_axis"]:
            parts = [np.squeeze(p, axis) for p in parts]
        return tuple(parts)


@register_numpy("_np_copy", aliases=("_npi_copyto",))
class NpCopy(SelectOp):
    """A copy of the array."""

    def forward(self, attrs, a):
        return a.copy()


def _slice_key(attrs, ndim: int) -> tuple:
    begin, end = attrs["begin"], attrs["end"]
    step = attrs["step"] or (None,) * len(begin)
    if len(end) != len(begin) or len(step) != len(begin) or len(begin) > ndim:
        raise MXNetError(f"begin {begin}, end {end} and step {step} must have the same length, at most {ndim}")
    return tuple(slice(b, e, s) for b, e, s in zip(begin, end, step))


_SLICE_PARAMS = {"begin": Param(_opt_tuple, ()), "end": Param(_opt_tuple, ()), "step": Param(_opt_tuple, ())}


@register_numpy("_npi_slice")
class NpSlice(SelectOp):
    """data[begin:end:step] per axis (None entries as in Python slices)."""
    params = _SLICE_PARAMS

    def forward(self, attrs, a):
        try:
            return a[_slice_key(attrs, a.ndim)].copy()
        except (ValueError, MXNetError) as e:
            raise MXNetError(f"{self.name}: {e}") from None


@register_numpy("_npi_slice_assign")
class NpSliceAssign(SelectOp):
    """lhs with the region begin:end:step replaced by rhs (broadcast)."""
    inputs = ("lhs", "rhs")
    params = _SLICE_PARAMS

    def forward(self, attrs, lhs, rhs):
        out = lhs.copy()
        try:
            out[_slice_key(attrs, lhs.ndim)] = rhs
        except ValueError as e:
            raise MXNetError(f"{self.name}: {e}") from None
        return out


@register_numpy("_npi_slice_assign_scalar")
class NpSliceAssignScalar(SelectOp):
    """data with the region begin:end:step set to `scalar`."""
    params = dict(_SLICE_PARAMS, scalar=Param(Literal, 0.0))

    def forward(self, attrs, a):
        out = a.copy()
        out[_slice_key(attrs, a.ndim)] = attrs["scalar"]
        return out

    def select(self, attrs, a):
        return self.forward(dict(attrs, scalar=0), a)


@register_numpy("_npi_boolean_mask")
class NpBooleanMask(SelectOp):
    """The entries of data where the bool `index` is true, along `axis` (a data-dependent shape)."""
    inputs = ("data", "index")
    params = {"axis": Param(Int, 0)}

    def tracked(self, attrs, n_inputs):
        return 1

    def forward(self, attrs, a, mask):
        axis = normalize_axis(self.name, attrs["axis"], a.ndim)
        m = mask.astype(bool)
        if m.shape != a.shape[axis:axis + m.ndim]:
            raise MXNetError(f"{self.name}: mask of shape {m.shape} does not match data of shape {a.shape} "
                             f"at axis {axis}")
        return a[(slice(None),) * axis + (m,)]


class _MaskAssign(SelectOp):
    """data with the entries where `mask` is true (from `start_axis`) set to `value`."""
    params = {"value": Param(Float, 0.0), "start_axis": Param(Int, 0)}

    def tracked(self, attrs, n_inputs):
        return 1 if n_inputs == 2 else 3

    def _assign(self, attrs, a, mask, value):
        out = a.copy()
        axis = normalize_axis(self.name, attrs["start_axis"], a.ndim)
        try:
            out[(slice(None),) * axis + (mask.astype(bool),)] = value
        except (ValueError, IndexError) as e:
            raise MXNetError(f"{self.name}: {e}") from None
        return out


@register_numpy("_npi_boolean_mask_assign_scalar")
class NpMaskAssignScalar(_MaskAssign):
    inputs = ("data", "mask")
    __doc__ = _MaskAssign.__doc__

    def forward(self, attrs, a, mask):
        return self._assign(attrs, a, mask, attrs["value"])

    def select(self, attrs, a, mask):
        return self._assign(attrs, a, mask, 0)


@register_numpy("_npi_boolean_mask_assign_tensor")
class NpMaskAssignTensor(_MaskAssign):
    """data with the entries where `mask` is true set to the array `value`."""
    inputs = ("data", "mask", "value")
    params = {"start_axis": Param(Int, 0)}

    def tracked(self, attrs, n_inputs):
        return 1

    def forward(self, attrs, a, mask, value):
        return self._assign(attrs, a, mask, value)

    def vjp(self, attrs, xs, ys, dys):
        a, mask, value = xs
        axis = normalize_axis(self.name, attrs["start_axis"], a.ndim)
        key = (slice(None),) * axis + (mask.astype(bool),)
        ga = np.array(dys[0], copy=True)
        gv_full = ga[key]
        ga[key] = 0
        from .np_base import unbroadcast
        return [ga, None, unbroadcast(gv_full, value.shape).reshape(value.shape)]


@register_numpy("_npi_gather_nd")
class NpGatherNd(SelectOp):
    """data[indices[0], indices[1], ...] (the first axis of `indices` indexes data's axes)."""
    inputs = ("data", "indices")

    def tracked(self, attrs, n_inputs):
        return 1

    def forward(self, attrs, a, idx):
        idx = idx.astype(np.int64)
        if idx.ndim == 0 or idx.shape[0] > a.ndim:
            raise MXNetError(f"{self.name}: indices of shape {idx.shape} for data of shape {a.shape}")
        try:
            return a[tuple(idx)]
        except IndexError as e:
            raise MXNetError(f"{self.name}: {e}") from None


@register_numpy("_npi_scatter_set_nd")
class NpScatterSetNd(SelectOp):
    """lhs with lhs[indices[0], indices[1], ...] = rhs."""
    inputs = ("lhs", "rhs", "indices")
    params = {"shape": Param(Axis, None)}

    def tracked(self, attrs, n_inputs):
        return 2

    def forward(self, attrs, lhs, rhs, idx):
        out = lhs.copy()
        try:
            out[tuple(idx.astype(np.int64))] = rhs
        except (IndexError, ValueError) as e:
            raise MXNetError(f"{self.name}: {e}") from None
        return out


@register_numpy("_npi_reshape")
class NpiReshape(NpReshape):
    """numpy.reshape with MXNet's `reverse` (special values counted from the right)."""
    params = {"newshape": Param(_shape_attr), "reverse": Param(Bool, False), "order": Param(Str, "C")}


def _atleast(n):
    def forward(self, attrs, *xs):
        fn = {1: np.atleast_1d, 2: np.atleast_2d, 3: np.atleast_3d}[n]
        out = [np.array(fn(x)) for x in xs]
        return tuple(out) if len(out) > 1 else out[0]
    return forward


for _n in (1, 2, 3):
    register_numpy(f"_np_atleast_{_n}d")(type(f"NpAtleast{_n}d", (_Joined,), {
        "params": {"num_args": Param(Count, 1)}, "forward": _atleast(_n),
        "out_types": lambda self, attrs, in_types: list(in_types),
        "num_outputs": lambda self, attrs: attrs["num_args"], "__doc__": f"numpy.atleast_{_n}d of each input."}))


class _SplitAxis(NpSplit):
    """numpy.hsplit / dsplit."""
    fixed_axis: int = 1

    def forward(self, attrs, a):
        axis = self.fixed_axis if not (self.fixed_axis == 1 and a.ndim == 1) else 0
        if a.ndim < (3 if self.fixed_axis == 2 else 1):
            raise MXNetError(f"{self.name}: array of dimension {a.ndim} is too small to split on axis {axis}")
        return NpSplit.forward(self, dict(attrs, axis=axis), a)


register_numpy("_npi_hsplit")(type("NpHsplit", (_SplitAxis,), {"__doc__": "numpy.hsplit."}))
register_numpy("_npi_dsplit")(type("NpDsplit", (_SplitAxis,), {"fixed_axis": 2, "__doc__": "numpy.dsplit."}))


@register_numpy("_npi_nonzero")
class NpNonzero(NumpyOp):
    """numpy.nonzero as one int64 array of shape (count, ndim) (MXNet's form; numpy's argwhere)."""
    inputs = ("x",)
    no_gradient = True

    def out_types(self, attrs, in_types):
        return [np.dtype(np.int64)]

    def forward(self, attrs, x):
        return np.argwhere(x).astype(np.int64)


@register_numpy("_npi_share_memory")
class NpShareMemory(NumpyOp):
    """Whether a and b may share memory (a zero-dim bool; separate op inputs never do)."""
    inputs = ("a", "b")
    no_gradient = True

    def out_types(self, attrs, in_types):
        return [np.dtype(bool)]

    def forward(self, attrs, a, b):
        return np.asarray(np.may_share_memory(a, b))


@register_numpy("_npi_diag_indices_from")
class NpDiagIndicesFrom(NumpyOp):
    """The indices of the main diagonal of a square array: shape (ndim, n), int64."""
    inputs = ("data",)
    no_gradient = True

    def out_types(self, attrs, in_types):
        return [np.dtype(np.int64)]

    def forward(self, attrs, a):
        if a.ndim < 2 or len(set(a.shape)) != 1:
            raise MXNetError(f"{self.name}: input must be at least 2-d with all dimensions equal, got {a.shape}")
        return np.stack(np.diag_indices_from(a)).astype(np.int64)
