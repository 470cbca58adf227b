"""NumPy-semantics sorting, statistics, polynomial and set operators: `_npi_sort`,
`_npi_argsort`, `_npi_unique`, `_npi_percentile`, `_npi_average`, `_npi_bincount`, `_npi_diff`,
`_npi_ediff1d`, `_npi_polyval`, `_npi_delete`, `_npi_insert`, `_np_resize`, `_npi_histogram`,
`_npi_unravel_index`, `_npi_cumprod`."""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Float, Int, Optional, Param, Str
from .np_base import Axis, Literal, NumpyOp, normalize_axis, register_numpy
from .np_reduce import expand_reduced, reduce_axes
from .np_shape import SelectOp, select_op

__all__ = []


@register_numpy("_npi_sort")
class NpSort(NumpyOp):
    """numpy.sort along `axis` (flattened for None), ascending; stable."""
    params = {"axis": Param(Optional(Int), -1), "is_ascend": Param(Bool, True)}

    def _order(self, attrs, a):
        src = a.reshape(-1) if attrs["axis"] is None else a
        axis = 0 if attrs["axis"] is None else normalize_axis(self.name, attrs["axis"], a.ndim)
        order = np.argsort(src if attrs["is_ascend"] else -src, axis=axis, kind="stable")
        return src, axis, order

    def forward(self, attrs, a):
        src, axis, order = self._order(attrs, a)
        return np.take_along_axis(src, order, axis)

    def vjp(self, attrs, xs, ys, dys):
        src, axis, order = self._order(attrs, xs[0])
        g = np.zeros(src.shape, np.float64)
        np.put_along_axis(g, order, dys[0], axis)
        return [g.reshape(xs[0].shape)]


@register_numpy("_npi_argsort")
class NpArgsort(NumpyOp):
    """numpy.argsort (int64), stable."""
    params = {"axis": Param(Optional(Int), -1), "is_ascend": Param(Bool, True), "dtype": Param(Str, "int64")}
    no_gradient = True

    def out_types(self, attrs, in_types):
        return [np.dtype(attrs["dtype"])]

    def forward(self, attrs, a):
        src = a.reshape(-1) if attrs["axis"] is None else a
        axis = 0 if attrs["axis"] is None else normalize_axis(self.name, attrs["axis"], a.ndim)
        return np.argsort(src if attrs["is_ascend"] else -src, axis=axis, kind="stable").astype(attrs["dtype"])


@register_numpy("_npi_unique")
class NpUnique(NumpyOp):
    """numpy.unique: the sorted unique values, then (as requested) first indices, the inverse
    and counts (int64)."""
    params = {"return_index": Param(Bool, False), "return_inverse": Param(Bool, False),
              "return_counts": Param(Bool, False), "axis": Param(Optional(Int), None)}
    no_gradient = True

    def num_outputs(self, attrs):
        return 1 + attrs["return_index"] + attrs["return_inverse"] + attrs["return_counts"]

    def out_types(self, attrs, in_types):
        return [in_types[0]] + [np.dtype(np.int64)] * (self.num_outputs(attrs) - 1)

    def forward(self, attrs, a):
        res = np.unique(a, return_index=attrs["return_index"], return_inverse=attrs["return_inverse"],
                        return_counts=attrs["return_counts"], axis=attrs["axis"])
        if not isinstance(res, tuple):
            return res
        out = [res[0]] + [np.asarray(r, np.int64) for r in res[1:]]
        if attrs["return_inverse"] and attrs["axis"] is None:
            k = 1 + attrs["return_index"]
            out[k] = out[k].reshape(-1)
        return tuple(out)


@register_numpy("_npi_percentile")
class NpPercentile(NumpyOp):
    """numpy.percentile of `a` at `q` (a float attribute list or an array input) with numpy's
    interpolation methods."""
    params = {"q_scalar": Param(Literal, None), "axis": Param(Axis, None),
              "interpolation": Param(Str, "linear"), "keepdims": Param(Bool, False), "quantile": Param(Bool, False)}
    no_gradient = True

    def input_names(self, attrs):
        return ["a"] if attrs["q_scalar"] is not None else ["a", "q"]

    def out_types(self, attrs, in_types):
        t = np.dtype(in_types[0])
        return [t if t.kind == "f" else np.dtype(np.float64)]

    def forward(self, attrs, a, q=None):
        qv = np.asarray(attrs["q_scalar"] if q is None else q, np.float64)
        fn = np.quantile if attrs["quantile"] else np.percentile
        lo, hi = (0, 1) if attrs["quantile"] else (0, 100)
        if np.any(qv < lo) or np.any(qv > hi):
            raise MXNetError(f"{self.name}: q must be within [{lo}, {hi}], got {qv.tolist()}")
        axis = attrs["axis"]
        res = fn(a, qv, axis=axis, method=attrs["interpolation"], keepdims=attrs["keepdims"])
        return np.asarray(res).astype(a.dtype if a.dtype.kind == "f" else np.float64, copy=False)


@register_numpy("_npi_average")
class NpAverage(NumpyOp):
    """numpy.average over `axis` with optional `weights` (second input); `returned` adds the sum
    of the weights as a second output."""
    params = {"axis": Param(Axis, None), "weighted": Param(Bool, False), "returned": Param(Bool, False)}

    def input_names(self, attrs):
        return ["a", "weights"] if attrs["weighted"] else ["a"]

    def num_outputs(self, attrs):
        return 2 if attrs["returned"] else 1

    def out_types(self, attrs, in_types):
        t = np.dtype(in_types[0])
        return [t if t.kind == "f" else np.dtype(np.float32)] * self.num_outputs(attrs)

    def _weights(self, attrs, a, w):
        axes = reduce_axes(self.name, attrs["axis"], a.ndim)
        if w is None:
            w = np.ones_like(a)
        elif w.shape != a.shape:
            if w.ndim != 1 or not isinstance(attrs["axis"], int) or w.shape[0] != a.shape[axes[0]]:
                raise MXNetError(f"{self.name}: weights of shape {w.shape} do not fit a of shape {a.shape} "
                                 f"and axis {attrs['axis']}")
            shape = [1] * a.ndim
            shape[axes[0]] = w.shape[0]
            w = w.reshape(shape)
        return axes, np.broadcast_to(w, a.shape)

    def forward(self, attrs, a, w=None):
        axes, wb = self._weights(attrs, a, w)
        dt = a.dtype if a.dtype.kind == "f" else np.float32
        scl = wb.sum(axis=axes)
        if np.any(scl == 0):
            raise MXNetError(f"{self.name}: weights sum to zero, can't be normalized")
        avg = (a * wb).sum(axis=axes) / scl
        outs = (np.asarray(avg, dt),)
        if attrs["returned"]:
            outs += (np.asarray(np.broadcast_to(scl, avg.shape), dt),)
        return outs if attrs["returned"] else outs[0]

    def vjp(self, attrs, xs, ys, dys):
        a = xs[0]
        w = xs[1] if len(xs) > 1 else None
        axes, wb = self._weights(attrs, a, w)
        scl = expand_reduced(wb.sum(axis=axes), axes, a.shape, False)
        g = expand_reduced(dys[0], axes, a.shape, False)
        avg = expand_reduced(ys[0], axes, a.shape, False)
        ga = g * wb / scl
        if w is None:
            return [ga]
        gw = g * (a - avg) / scl
        if attrs["returned"]:
            gw = gw + expand_reduced(dys[1], axes, a.shape, False)
        if w.shape != a.shape:
            gw = gw.sum(axis=tuple(d for d in range(a.ndim) if d != axes[0]))
        return [ga, gw]


@register_numpy("_npi_bincount")
class NpBincount(NumpyOp):
    """numpy.bincount of non-negative integers: counts in the input's dtype, or sums of the
    weights in their dtype."""
    params = {"minlength": Param(Int, 0), "has_weights": Param(Bool, False)}
    no_gradient = True

    def input_names(self, attrs):
        return ["data", "weights"] if attrs["has_weights"] else ["data"]

    def out_types(self, attrs, in_types):
        return [in_types[1] if attrs["has_weights"] else in_types[0]]

    def forward(self, attrs, x, w=None):
        if x.dtype.kind not in "iub":
            raise MXNetError(f"{self.name}: input must be an integer array, got {x.dtype.name}")
        if x.ndim != 1:
            raise MXNetError(f"{self.name}: input must be 1-D, got shape {x.shape}")
        if x.size and x.min() < 0:
            raise MXNetError(f"{self.name}: input must be non-negative")
        res = np.bincount(x, weights=w, minlength=attrs["minlength"])
        return res.astype(w.dtype if w is not None else x.dtype)


@register_numpy("_npi_diff")
class NpDiff(NumpyOp):
    """numpy.diff: the n-th discrete difference along `axis`."""
    params = {"n": Param(Int, 1), "axis": Param(Int, -1)}

    def forward(self, attrs, a):
        if attrs["n"] < 0:
            raise MXNetError(f"{self.name}: order must be non-negative, got {attrs['n']}")
        if a.ndim == 0:
            raise MXNetError(f"{self.name}: diff requires input that is at least one dimensional")
        return np.diff(a, attrs["n"], normalize_axis(self.name, attrs["axis"], a.ndim))

    def vjp(self, attrs, xs, ys, dys):
        axis = normalize_axis(self.name, attrs["axis"], xs[0].ndim)
        g = dys[0]
        for _ in range(attrs["n"]):       # the transpose of one difference
            pad_lo = [(0, 0)] * g.ndim
            pad_hi = [(0, 0)] * g.ndim
            pad_lo[axis] = (1, 0)
            pad_hi[axis] = (0, 1)
            g = np.pad(g, pad_lo) - np.pad(g, pad_hi)
        return [g]


@register_numpy("_npi_polyval")
class NpPolyval(NumpyOp):
    """numpy.polyval(p, x): the polynomial with coefficients p (highest power first) at x."""
    inputs = ("p", "x")

    def out_types(self, attrs, in_types):
        from .np_base import promote_mixed
        return [promote_mixed(*in_types)]

    def forward(self, attrs, p, x):
        if p.ndim != 1:
            raise MXNetError(f"{self.name}: p must be 1-D, got shape {p.shape}")
        from .np_base import promote_mixed
        return np.asarray(np.polyval(p, x)).astype(promote_mixed(p.dtype, x.dtype), copy=False)

    def vjp(self, attrs, xs, ys, dys):
        p, x = xs
        g = dys[0]
        n = p.shape[0]
        gp = np.array([np.sum(g * x ** (n - 1 - i)) for i in range(n)])
        gx = g * np.polyval(np.polyder(p), x) if n > 1 else np.zeros_like(x)
        return [gp, gx]


_OBJ_PARAMS = {"start": Param(Optional(Int), None), "stop": Param(Optional(Int), None),
               "step": Param(Optional(Int), None), "int_ind": Param(Optional(Int), None),
               "axis": Param(Optional(Int), None)}


def _obj(attrs, obj_input):
    """The positions of delete/insert: an int (`int_ind`), a slice (`step` set) or an index array."""
    if attrs["int_ind"] is not None:
        return attrs["int_ind"]
    if attrs["step"] is not None:
        return slice(attrs["start"], attrs["stop"], attrs["step"])
    if obj_input is None:
        raise MXNetError("the positions are not given: set int_ind, or start/stop/step, or pass obj")
    return obj_input.astype(np.int64)


@register_numpy("_npi_delete")
class NpDelete(SelectOp):
    """numpy.delete of the positions `int_ind`, start:stop:step, or an index array input."""
    params = _OBJ_PARAMS

    def input_names(self, attrs):
        return ["arr"] if attrs["int_ind"] is not None or attrs["step"] is not None else ["arr", "obj"]

    def tracked(self, attrs, n_inputs):
        return 1

    def forward(self, attrs, a, obj=None):
        try:
            return np.delete(a, _obj(attrs, obj), attrs["axis"])
        except IndexError as e:
            raise MXNetError(f"{self.name}: {e}") from None


class _Insert(SelectOp):
    """numpy.insert of `values` (an input, or the number `val`) before the positions."""
    params = dict(_OBJ_PARAMS, val=Param(Optional(Float), None))
    takes_obj = False

    def input_names(self, attrs):
        names = ["arr"] if attrs["val"] is not None else ["arr", "values"]
        return names + (["obj"] if self.takes_obj else [])

    def tracked(self, attrs, n_inputs):
        return 1 if attrs["val"] is not None else 2

    def _parts(self, attrs, xs):
        a, rest = xs[0], list(xs[1:])
        values = np.asarray(attrs["val"]) if attrs["val"] is not None else rest.pop(0)
        obj = rest.pop(0) if self.takes_obj else None
        return a, values, _obj(attrs, obj)

    def forward(self, attrs, *xs):
        a, values, obj = self._parts(attrs, xs)
        try:
            return np.insert(a, obj, values.astype(a.dtype, copy=False), attrs["axis"])
        except (IndexError, ValueError) as e:
            raise MXNetError(f"{self.name}: {e}") from None

    def select(self, attrs, *xs):
        a, values, obj = self._parts(attrs, xs)
        return np.insert(a, obj, values if attrs["val"] is None else 0, attrs["axis"])


register_numpy("_npi_insert_scalar")(type("NpInsertScalar", (_Insert,), {"__doc__": _Insert.__doc__}))
register_numpy("_npi_insert_slice")(type("NpInsertSlice", (_Insert,), {"__doc__": _Insert.__doc__}))
register_numpy("_npi_insert_tensor")(type("NpInsertTensor", (_Insert,), {"takes_obj": True,
                                                                         "__doc__": _Insert.__doc__}))


@register_numpy("_npi_histogram")
class NpHistogram(NumpyOp):
    """numpy.histogram: (counts as the input's float dtype or int64, bin edges) for `bin_cnt`
    equal bins over `range`, or the given bin edges (second input)."""
    params = {"bin_cnt": Param(Optional(Int), None), "range": Param(Literal, None)}
    n_outputs = 2
    no_gradient = True

    def input_names(self, attrs):
        return ["data"] if attrs["bin_cnt"] is not None else ["data", "bins"]

    def out_types(self, attrs, in_types):
        return [np.dtype(np.int64), in_types[0]]

    def forward(self, attrs, a, bins=None):
        edges = attrs["bin_cnt"] if bins is None else bins
        counts, edges = np.histogram(a, edges, attrs["range"])
        return counts.astype(np.int64), edges.astype(a.dtype if a.dtype.kind == "f" else np.float32)


@register_numpy("_npi_unravel_index")
class NpUnravelIndex(NumpyOp):
    """numpy.unravel_index of flat `indices` in `shape`: one int64 row per dimension."""
    params = {"shape": Param(Axis)}
    no_gradient = True

    def out_types(self, attrs, in_types):
        return [np.dtype(np.int64)]

    def forward(self, attrs, idx):
        shape = attrs["shape"]
        shape = (shape,) if isinstance(shape, int) else shape
        try:
            return np.stack(np.unravel_index(idx.astype(np.int64), shape)).astype(np.int64)
        except ValueError as e:
            raise MXNetError(f"{self.name}: {e}") from None


@register_numpy("_npi_cumprod")
class NpCumprod(NumpyOp):
    """numpy.cumprod along `axis` (of the flattened array for None)."""
    params = {"axis": Param(Optional(Int), None)}

    def forward(self, attrs, a):
        return np.cumprod(a, axis=attrs["axis"]).astype(a.dtype, copy=False)

    def vjp(self, attrs, xs, ys, dys):
        a, y, g = xs[0], ys[0], dys[0]
        axis = attrs["axis"]
        src = a.reshape(-1) if axis is None else a
        ax = 0 if axis is None else normalize_axis(self.name, axis, a.ndim)
        rev = np.flip(np.cumsum(np.flip(g * y, ax), ax), ax)
        return [(rev / src).reshape(a.shape)]


@register_numpy("_npi_ediff1d")
class NpEdiff1d(NumpyOp):
    """numpy.ediff1d: differences of the flattened input, with `to_begin` / `to_end` (arrays given
    as inputs when the *_arr_given flags say so, else the scalars, else nothing) around them."""
    params = {"to_begin_arr_given": Param(Bool, False), "to_end_arr_given": Param(Bool, False),
              "to_begin_scalar": Param(Optional(Float), None), "to_end_scalar": Param(Optional(Float), None)}

    def input_names(self, attrs):
        return (["input1"] + (["input2"] if attrs["to_begin_arr_given"] else [])
                + (["input3"] if attrs["to_end_arr_given"] else []))

    def _ends(self, attrs, rest):
        rest = list(rest)
        begin = rest.pop(0) if attrs["to_begin_arr_given"] else attrs["to_begin_scalar"]
        end = rest.pop(0) if attrs["to_end_arr_given"] else attrs["to_end_scalar"]
        return (None if begin is None else np.ravel(begin)), (None if end is None else np.ravel(end))

    def forward(self, attrs, a, *rest):
        begin, end = self._ends(attrs, rest)
        parts = [p for p in (begin, np.diff(a.reshape(-1)), end) if p is not None]
        return np.concatenate(parts).astype(a.dtype, copy=False)

    def vjp(self, attrs, xs, ys, dys):
        a = xs[0]
        begin, end = self._ends(attrs, xs[1:])
        g = dys[0]
        nb = 0 if begin is None else begin.size
        ne = 0 if end is None else end.size
        core = g[nb:g.size - ne]
        ga = (np.pad(core, (1, 0)) - np.pad(core, (0, 1))).reshape(a.shape) if a.size else np.zeros(a.shape)
        grads = [ga]
        if attrs["to_begin_arr_given"]:
            grads.append(g[:nb].reshape(xs[1].shape))
        if attrs["to_end_arr_given"]:
            grads.append(g[g.size - ne:].reshape(xs[-1].shape))
        return grads


select_op("_np_resize", np.resize, {"new_shape": Param(Axis)},
          "numpy.resize: the elements repeated (or cut) to fill `new_shape`.")
