"""The functions of `mx.np`: each applies a registered `_np_*` / `_npi_*` op (so autograd records
it and a graph can hold it) and returns `ndarray`s; see `symjit.ops.np_*` for the semantics."""
from __future__ import annotations

import numpy as _np

from ..base import MXNetError, canonical_dtype
from ..ndarray.ndarray import NDArray
from ..ops.np_math import BINARY, COMPARISONS, UNARY, UNARY_BOOL
from .multiarray import (_axis, _reduce_attrs, array, default_float, invoke, is_scalar, ndarray, to_np,
                         ufunc_call)

__all__: list = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _unary_function(op_suffix: str, name: str):
    def fn(x, out=None, **kwargs):
        if is_scalar(x):
            return invoke(f"_npi_{op_suffix}", [array(x)], out=out)
        return invoke(f"_npi_{op_suffix}", [to_np(x)], out=out)
    fn.__name__ = name
    fn.__doc__ = f"numpy.{name}, elementwise (the result keeps x's dtype, as MXNet)."
    return fn


_UNARY_NAMES = {s: [s] for s in list(UNARY) + list(UNARY_BOOL)}
_UNARY_NAMES["absolute"] += ["abs", "fabs"]
_UNARY_NAMES["degrees"] += ["rad2deg"]
_UNARY_NAMES["radians"] += ["deg2rad"]
for _suffix, _names in _UNARY_NAMES.items():
    for _name in _names:
        globals()[_name] = _export(_unary_function(_suffix, _name))
bitwise_not = _export(_unary_function("bitwise_not", "bitwise_not"))
invert = _export(_unary_function("bitwise_not", "invert"))


def _binary_function(op_suffix: str, name: str):
    def fn(x1, x2, out=None, **kwargs):
        return ufunc_call(op_suffix, x1, x2, out=out)
    fn.__name__ = name
    fn.__doc__ = f"numpy.{name} with broadcasting and MXNet np's dtype rules."
    return fn


_BINARY_NAMES = {s: [s] for s in list(BINARY) + list(COMPARISONS)}
_BINARY_NAMES["true_divide"] += ["divide"]
_BINARY_NAMES["mod"] += ["remainder"]
for _suffix, _names in _BINARY_NAMES.items():
    for _name in _names:
        globals()[_name] = _export(_binary_function(_suffix, _name))


@_export
def positive(x, out=None):
    """+x (a copy)."""
    return invoke("_np_copy", [to_np(x)], out=out)


@_export
def around(x, decimals=0, out=None):
    """numpy.around."""
    return invoke("_npi_around", [to_np(x)], {"decimals": decimals}, out=out)


round = around  # noqa: A001 - numpy's name
round_ = around
__all__ += ["round", "round_"]


@_export
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """numpy.nan_to_num (in place into x when copy=False)."""
    x = to_np(x)
    r = invoke("_npi_nan_to_num", [x], {"copy": copy, "nan": nan, "posinf": posinf, "neginf": neginf})
    if not copy:
        x[...] = r
        return x
    return r


@_export
def floor_divide(x1, x2, out=None):
    """numpy.floor_divide (in the dtype of x1, as MXNet's `//`)."""
    q = invoke("_npi_floor", [ufunc_call("true_divide", x1, x2)])
    return q.astype(to_np(x1).dtype if not is_scalar(x1) else default_float)


# ---- reductions -----------------------------------------------------------------------------------

def _reduction(op: str, name: str, has_dtype=True, has_initial=False):
    def fn(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, **kwargs):
        return invoke(op, [to_np(a)], _reduce_attrs(axis, dtype if has_dtype else None, keepdims,
                                                     initial if has_initial else None), out=out)
    fn.__name__ = name
    fn.__doc__ = f"numpy.{name} over `axis` (all axes for None: a zero-dim result)."
    return fn


sum = _export(_reduction("_np_sum", "sum", has_initial=True))  # noqa: A001
prod = _export(_reduction("_np_prod", "prod", has_initial=True))
product = prod
mean = _export(_reduction("_npi_mean", "mean"))
__all__.append("product")


def _extreme(op: str, name: str):
    def fn(a, axis=None, out=None, keepdims=False, **kwargs):
        return invoke(op, [to_np(a)], _reduce_attrs(axis, None, keepdims, None), out=out)
    fn.__name__ = name
    fn.__doc__ = f"numpy.{name}."
    return fn


max = _export(_extreme("_np_max", "max"))  # noqa: A001
min = _export(_extreme("_np_min", "min"))  # noqa: A001
amax = _export(_extreme("_np_max", "amax"))
amin = _export(_extreme("_np_min", "amin"))


@_export
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """The standard deviation along `axis` with `ddof` delta degrees of freedom."""
    return to_np(a).std(axis, dtype, out, ddof, keepdims)


@_export
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """The variance along `axis` with `ddof` delta degrees of freedom."""
    return to_np(a).var(axis, dtype, out, ddof, keepdims)


@_export
def argmax(a, axis=None, out=None):
    """Indices of the maxima along `axis` (of the flattened array for None), int64."""
    return invoke("_npi_argmax", [to_np(a)], {"axis": axis}, out=out)


@_export
def argmin(a, axis=None, out=None):
    """Indices of the minima along `axis` (of the flattened array for None), int64."""
    return invoke("_npi_argmin", [to_np(a)], {"axis": axis}, out=out)


@_export
def all(a, axis=None, out=None, keepdims=False):  # noqa: A001
    """Whether every element (along `axis`) is true (bool)."""
    return invoke("_np_all", [to_np(a)], {"axis": _axis(axis), "keepdims": keepdims}, out=out)


@_export
def any(a, axis=None, out=None, keepdims=False):  # noqa: A001
    """Whether any element (along `axis`) is true (bool)."""
    return invoke("_np_any", [to_np(a)], {"axis": _axis(axis), "keepdims": keepdims}, out=out)


@_export
def cumsum(a, axis=None, dtype=None, out=None):
    """Inclusive prefix sums (of the flattened array for axis None)."""
    a = to_np(a)
    dt = None if dtype is None else _np.dtype(canonical_dtype(dtype)).name
    if dt is None and a.dtype == _np.bool_:
        dt = "int64"
    return invoke("_np_cumsum", [a], {"axis": axis, "dtype": dt}, out=out)


# ---- shape manipulation -------------------------------------------------------------------------

@_export
def reshape(a, newshape, order="C"):
    """`a` with shape `newshape` (one -1 allowed)."""
    return to_np(a).reshape(newshape, order=order)


@_export
def transpose(a, axes=None):
    """`a` with its axes permuted (reversed for None)."""
    return invoke("_np_transpose", [to_np(a)], {"axes": None if axes is None else tuple(axes)})


@_export
def swapaxes(a, axis1, axis2):
    """`a` with axes axis1 and axis2 interchanged."""
    return to_np(a).swapaxes(axis1, axis2)


@_export
def moveaxis(a, source, destination):
    """`a` with the axes `source` moved to `destination`."""
    return invoke("_np_moveaxis", [to_np(a)], {"source": _axis(source), "destination": _axis(destination)})


@_export
def expand_dims(a, axis):
    """`a` with a new size-1 axis at `axis`."""
    return invoke("_npi_expand_dims", [to_np(a)], {"axis": _axis(axis)})


@_export
def squeeze(a, axis=None):
    """`a` without its size-1 axes (those in `axis` when given)."""
    return invoke("_np_squeeze", [to_np(a)], {"axis": _axis(axis)})


@_export
def ravel(a, order="C"):
    """`a` flattened (a view when not recorded by autograd)."""
    return to_np(a).reshape(-1)


@_export
def broadcast_to(array, shape):  # noqa: A002 - numpy's argument name
    """`array` broadcast to `shape` (a copy recorded by autograd)."""
    return invoke("_npi_broadcast_to", [to_np(array)], {"shape": (shape,) if isinstance(shape, int) else tuple(shape)})


def _joined(op: str, arrays, axis) -> ndarray:
    arrays = [to_np(a) for a in arrays]
    if not arrays:
        raise MXNetError(f"{op}: need at least one array")
    return arrays, {"num_args": len(arrays), "axis": axis}


@_export
def concatenate(seq, axis=0, out=None):
    """The arrays joined along an existing axis (flattened first for axis None)."""
    arrays, attrs = _joined("concatenate", seq, axis)
    if axis is None:                         # numpy: the flattened arrays joined
        arrays, axis = [a.reshape(-1) for a in arrays], 0
    return invoke("_npi_concatenate", arrays, {"num_args": attrs["num_args"], "dim": axis}, out=out)


@_export
def append(arr, values, axis=None):
    """`values` appended to `arr` (both flattened when axis is None)."""
    return concatenate([arr, values], axis=axis)


@_export
def stack(arrays, axis=0, out=None):
    """The arrays joined along a new axis."""
    arrays, attrs = _joined("stack", arrays, axis)
    return invoke("_npi_stack", arrays, attrs, out=out)


def _stacker(name: str):
    def fn(tup, out=None):
        arrays, attrs = _joined(name, tup, 0)
        return invoke(f"_npi_{name}", arrays, {"num_args": attrs["num_args"]}, out=out)
    fn.__name__ = name
    fn.__doc__ = f"numpy.{name}."
    return fn


vstack = _export(_stacker("vstack"))
row_stack = vstack
hstack = _export(_stacker("hstack"))
dstack = _export(_stacker("dstack"))
column_stack = _export(_stacker("column_stack"))
__all__.append("row_stack")


def _split(ary, indices_or_sections, axis, even: bool):
    a = to_np(ary)
    if isinstance(indices_or_sections, (int, _np.integer)):
        attrs = {"sections": int(indices_or_sections), "axis": axis, "even": even}
    else:
        attrs = {"indices": (0,) + tuple(int(i) for i in indices_or_sections), "axis": axis}
    out = invoke("_npi_split", [a], attrs)
    return list(out) if isinstance(out, (list, tuple)) else [out]


@_export
def split(ary, indices_or_sections, axis=0):
    """`ary` split into equal `sections` or at `indices` along `axis`."""
    return _split(ary, indices_or_sections, axis, True)


@_export
def array_split(ary, indices_or_sections, axis=0):
    """`ary` split into `indices_or_sections` parts along `axis` (parts may differ in size)."""
    return _split(ary, indices_or_sections, axis, False)


@_export
def hsplit(ary, indices_or_sections):
    """`ary` split horizontally (axis 1; axis 0 for 1-D arrays)."""
    a = to_np(ary)
    return split(a, indices_or_sections, 1 if a.ndim > 1 else 0)


@_export
def vsplit(ary, indices_or_sections):
    """`ary` split vertically (axis 0)."""
    return split(ary, indices_or_sections, 0)


@_export
def dsplit(ary, indices_or_sections):
    """`ary` split along its third axis."""
    return split(ary, indices_or_sections, 2)


@_export
def flip(m, axis=None, out=None):
    """`m` with the order of elements reversed along `axis` (all axes for None)."""
    return invoke("_npi_flip", [to_np(m)], {"axis": _axis(axis)}, out=out)


@_export
def fliplr(m):
    """`m` flipped left-right (axis 1)."""
    return flip(m, 1)


@_export
def flipud(m):
    """`m` flipped up-down (axis 0)."""
    return flip(m, 0)


@_export
def roll(a, shift, axis=None):
    """`a` rolled by `shift` along `axis` (flattened for None)."""
    return invoke("_np_roll", [to_np(a)], {"shift": _axis(shift), "axis": _axis(axis)})


@_export
def rot90(m, k=1, axes=(0, 1)):
    """`m` rotated by 90 degrees k times in the plane `axes`."""
    return invoke("_npi_rot90", [to_np(m)], {"k": k, "axes": tuple(axes)})


@_export
def tile(A, reps):
    """`A` repeated `reps` times per axis."""
    return invoke("_npi_tile", [to_np(A)], {"reps": (reps,) if isinstance(reps, int) else tuple(reps)})


@_export
def repeat(a, repeats, axis=None):
    """Each element of `a` repeated `repeats` times along `axis` (flattened for None)."""
    return invoke("_np_repeat", [to_np(a)], {"repeats": _axis(repeats), "axis": axis})


def _atleast(n: int):
    def fn(*arys):
        out = []
        for a in arys:
            a = to_np(a)
            if a.ndim < n:
                shape = {1: (1,), 2: (1, 1), 3: (1, 1, 1)}[n]
                if a.ndim == 1:
                    shape = (1, a.shape[0]) if n == 2 else (1, a.shape[0], 1)
                elif a.ndim == 2:
                    shape = a.shape + (1,)
                a = reshape(a, shape)
            out.append(a)
        return out[0] if len(out) == 1 else out
    fn.__name__ = f"atleast_{n}d"
    fn.__doc__ = f"The inputs viewed with at least {n} dimensions (one array, or a list for several)."
    return fn


atleast_1d = _export(_atleast(1))
atleast_2d = _export(_atleast(2))
atleast_3d = _export(_atleast(3))


@_export
def diag(v, k=0):
    """The k-th diagonal of a 2-D array, or a 2-D array with a 1-D array on its k-th diagonal."""
    return invoke("_np_diag", [to_np(v)], {"k": k})


@_export
def diagflat(v, k=0):
    """A 2-D array with the flattened input on its k-th diagonal."""
    return invoke("_np_diagflat", [to_np(v)], {"k": k})


@_export
def diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonal with `offset` of the (axis1, axis2) planes."""
    return invoke("_np_diagonal", [to_np(a)], {"offset": offset, "axis1": axis1, "axis2": axis2})


@_export
def trace(a, offset=0, axis1=0, axis2=1, out=None):
    """The sum along the diagonal with `offset` of the (axis1, axis2) planes."""
    return invoke("_np_trace", [to_np(a)], {"offset": offset, "axis1": axis1, "axis2": axis2}, out=out)


@_export
def tril(m, k=0):
    """The lower triangle of `m` (zeros above the k-th diagonal)."""
    return invoke("_npi_tril", [to_np(m)], {"k": k})


@_export
def triu(m, k=0):
    """The upper triangle of `m` (zeros below the k-th diagonal)."""
    return invoke("_npi_triu", [to_np(m)], {"k": k})


@_export
def take(a, indices, axis=None, mode="raise", out=None):
    """Elements of `a` at `indices` along `axis` (flattened for None); mode raise, wrap or clip."""
    idx = indices if isinstance(indices, NDArray) else array(_np.asarray(indices, _np.int64))
    return invoke("_npi_take", [to_np(a), to_np(idx)], {"axis": axis, "mode": mode}, out=out)


@_export
def pad(x, pad_width, mode="constant", **kwargs):
    """numpy.pad (modes constant, edge, reflect, symmetric, wrap)."""
    pw = _np.broadcast_to(_np.asarray(pad_width, _np.int64), (to_np(x).ndim, 2)) \
        if not isinstance(pad_width, int) else _np.full((to_np(x).ndim, 2), pad_width)
    pw = tuple(tuple(int(v) for v in row) for row in pw)
    attrs = {"pad_width": pw, "mode": mode, "constant_value": kwargs.get("constant_values", 0),
             "reflect_type": kwargs.get("reflect_type", "even")}
    return invoke("_npi_pad", [to_np(x)], attrs)


# ---- products ------------------------------------------------------------------------------------

def _pair(a, b):
    a = to_np(a)
    return a, to_np(b, a.context)


@_export
def dot(a, b, out=None):
    """numpy.dot: the product of scalars, vectors, matrices and N-d arrays."""
    return invoke("_np_dot", list(_pair(a, b)), out=out)


@_export
def matmul(a, b, out=None):
    """numpy.matmul: the matrix product, batched over broadcast leading axes."""
    return invoke("_npi_matmul", list(_pair(a, b)), out=out)


@_export
def tensordot(a, b, axes=2):
    """The sum of products over `axes` of a and b (an int: the last/first that many)."""
    a, b = _pair(a, b)
    if isinstance(axes, (int, _np.integer)):
        n = int(axes)
        sa, sb = tuple(range(a.ndim - n, a.ndim)), tuple(range(n))
    else:
        sa, sb = axes
        sa = (sa,) if isinstance(sa, int) else tuple(sa)
        sb = (sb,) if isinstance(sb, int) else tuple(sb)
    return invoke("_npi_tensordot", [a, b], {"a_axes_summed": sa, "b_axes_summed": sb})


@_export
def inner(a, b):
    """The inner product over the last axes of a and b."""
    a, b = _pair(a, b)
    if a.ndim == 0 or b.ndim == 0:
        return ufunc_call("multiply", a, b)
    return tensordot(a, b, ([a.ndim - 1], [b.ndim - 1]))


@_export
def outer(a, b):
    """The outer product of the flattened a and b."""
    a, b = _pair(a, b)
    return tensordot(a.reshape(-1), b.reshape(-1), 0)


@_export
def vdot(a, b):
    """The dot product of the flattened a and b."""
    a, b = _pair(a, b)
    return tensordot(a.reshape(-1), b.reshape(-1), 1)


@_export
def kron(a, b):
    """The Kronecker product of a and b."""
    return invoke("_np_kron", list(_pair(a, b)))


@_export
def einsum(subscripts, *operands, out=None, optimize=False):
    """The Einstein summation `subscripts` of the operands."""
    arrays = [to_np(o) for o in operands]
    return invoke("_npi_einsum", arrays, {"subscripts": subscripts, "num_args": len(arrays),
                                          "optimize": int(bool(optimize))}, out=out)


# ---- selection -------------------------------------------------------------------------------------

@_export
def where(condition, x=None, y=None):
    """numpy.where: elements of x or y by condition; with one argument, `nonzero(condition)`."""
    if x is None and y is None:
        return nonzero(condition)
    c = to_np(condition)
    xa = array(x, dtype=_scalar_dtype(x, y), ctx=c.context) if is_scalar(x) else to_np(x)
    ya = array(y, dtype=xa.dtype if is_scalar(y) else None, ctx=c.context) if is_scalar(y) else to_np(y)
    return invoke("_npi_where", [c, xa, ya])


def _scalar_dtype(x, other):
    if not is_scalar(other):
        return to_np(other).dtype
    return default_float


@_export
def clip(a, a_min, a_max, out=None):
    """`a` limited to [a_min, a_max] (either may be None)."""
    return invoke("_npi_clip", [to_np(a)], {"a_min": None if a_min is None else float(a_min),
                                            "a_max": None if a_max is None else float(a_max)}, out=out)


@_export
def nonzero(a):
    """Indices of the nonzero elements, one int64 array per axis (MXNet's `_npi_nonzero` gives
    them as the columns of one (count, ndim) array)."""
    a = to_np(a)
    if a.ndim == 0:
        raise MXNetError("nonzero: a zero-dim array has no axes to index; use atleast_1d first")
    rows = invoke("_npi_nonzero", [a])
    return tuple(invoke("_npi_slice", [rows], {"begin": (None, k), "end": (None, k + 1), "step": (None, 1)})
                 .reshape(-1) for k in range(a.ndim))


@_export
def shape(a):
    """The shape of `a`."""
    return to_np(a).shape


@_export
def ndim(a):
    """The number of dimensions of `a`."""
    return to_np(a).ndim


@_export
def size(a, axis=None):
    """The number of elements of `a` (along `axis` when given)."""
    a = to_np(a)
    return a.size if axis is None else a.shape[axis]


@_export
def copy(a):
    """A copy of `a`."""
    return to_np(a).copy()



# ---- sorting, statistics, polynomials, sets ---------------------------------------------------------

@_export
def sort(a, axis=-1, kind=None, order=None):
    """A sorted copy of `a` along `axis` (flattened for None), stable."""
    if order is not None:
        raise MXNetError("sort: the order argument is not supported")
    return invoke("_npi_sort", [to_np(a)], {"axis": axis, "is_ascend": True})


@_export
def argsort(a, axis=-1, kind=None, order=None):
    """Indices that sort `a` along `axis` (stable), int64."""
    if order is not None:
        raise MXNetError("argsort: the order argument is not supported")
    return invoke("_npi_argsort", [to_np(a)], {"axis": axis, "is_ascend": True})


@_export
def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None):
    """The sorted unique elements, and as asked the first indices, the inverse and the counts."""
    out = invoke("_npi_unique", [to_np(ar)], {"return_index": return_index, "return_inverse": return_inverse,
                                              "return_counts": return_counts, "axis": axis})
    return tuple(out) if isinstance(out, list) else out


def _percentile(a, q, axis, interpolation, keepdims, quantile, out):
    a = to_np(a)
    attrs = {"axis": _axis(axis), "interpolation": interpolation, "keepdims": keepdims, "quantile": quantile}
    if isinstance(q, NDArray):
        return invoke("_npi_percentile", [a, to_np(q)], dict(attrs, q_scalar=None), out=out)
    qv = _np.asarray(q, _np.float64)
    if qv.ndim == 0:
        attrs["q_scalar"] = float(qv)
        return invoke("_npi_percentile", [a], attrs, out=out)
    return invoke("_npi_percentile", [a, array(qv, dtype="float64", ctx=a.context)], dict(attrs, q_scalar=None),
                  out=out)


@_export
def percentile(a, q, axis=None, out=None, overwrite_input=None, interpolation="linear", keepdims=False):
    """The q-th percentiles of `a` along `axis` (numpy's interpolation methods)."""
    return _percentile(a, q, axis, interpolation, keepdims, False, out)


@_export
def quantile(a, q, axis=None, out=None, overwrite_input=None, interpolation="linear", keepdims=False):
    """The q-th quantiles of `a` along `axis` (numpy's interpolation methods)."""
    return _percentile(a, q, axis, interpolation, keepdims, True, out)


@_export
def median(a, axis=None, out=None, overwrite_input=None, keepdims=False):
    """The median along `axis`."""
    return _percentile(a, 50.0, axis, "linear", keepdims, False, out)


@_export
def average(a, axis=None, weights=None, returned=False, out=None):
    """The (weighted) average along `axis`; with `returned`, also the sum of the weights."""
    a = to_np(a)
    inputs = [a] if weights is None else [a, to_np(weights, a.context)]
    res = invoke("_npi_average", inputs, {"axis": _axis(axis), "weighted": weights is not None,
                                          "returned": returned}, out=out)
    return tuple(res) if returned else res


@_export
def bincount(x, weights=None, minlength=0):
    """Occurrences of each non-negative integer in `x` (or sums of `weights`)."""
    x = to_np(x)
    inputs = [x] if weights is None else [x, to_np(weights, x.context)]
    return invoke("_npi_bincount", inputs, {"minlength": minlength, "has_weights": weights is not None})


@_export
def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The n-th discrete difference along `axis` (after `prepend` / `append`)."""
    a = to_np(a)
    parts = [p for p in (prepend, a, append) if p is not None]
    if len(parts) > 1:
        shape = list(a.shape)
        shape[axis] = 1
        parts = [to_np(p) if not is_scalar(p) else array(_np.full(shape, p), dtype=a.dtype) for p in parts]
        a = concatenate(parts, axis=axis)
    return invoke("_npi_diff", [a], {"n": n, "axis": axis})


@_export
def ediff1d(ary, to_end=None, to_begin=None):
    """Differences of the flattened array, with `to_begin` / `to_end` (numbers or arrays) around."""
    a = to_np(ary)
    inputs, attrs = [a], {}
    for key, value in (("to_begin", to_begin), ("to_end", to_end)):
        given = value is not None and not is_scalar(value)
        attrs[f"{key}_arr_given"] = given
        attrs[f"{key}_scalar"] = float(value) if value is not None and not given else None
        if given:
            inputs.append(to_np(value, a.context))
    return invoke("_npi_ediff1d", inputs, attrs)


@_export
def polyval(p, x):
    """The polynomial with coefficients `p` (highest power first) at x."""
    p = to_np(p)
    xa = array(x, dtype=p.dtype) if is_scalar(x) else to_np(x)
    return invoke("_npi_polyval", [p, xa])


def position_attrs(obj, axis) -> tuple:
    """(attributes, whether `obj` is an array of positions) for the positions of delete/insert,
    as MXNet passes them: an int as `int_ind`, a slice as start/stop/step, else an extra input."""
    attrs = {"axis": axis, "int_ind": None, "start": None, "stop": None, "step": None}
    if isinstance(obj, slice):
        attrs.update(start=obj.start, stop=obj.stop, step=1 if obj.step is None else obj.step)
        return attrs, False
    if isinstance(obj, (int, _np.integer)):
        attrs["int_ind"] = int(obj)
        return attrs, False
    return attrs, True


def _positions(obj, axis, ctx):
    """(attributes, extra inputs) for the positions `obj` of delete/insert."""
    attrs, is_array = position_attrs(obj, axis)
    if not is_array:
        return attrs, []
    idx = obj if isinstance(obj, NDArray) else array(_np.asarray(obj, _np.int64), dtype="int64", ctx=ctx)
    return attrs, [to_np(idx)]


@_export
def delete(arr, obj, axis=None):
    """`arr` without the entries at `obj` (an int, a slice or indices) along `axis`."""
    arr = to_np(arr)
    attrs, extra = _positions(obj, axis, arr.context)
    return invoke("_npi_delete", [arr, *extra], attrs)


@_export
def insert(arr, obj, values, axis=None):
    """`arr` with `values` inserted before the positions `obj` along `axis`."""
    arr = to_np(arr)
    attrs, extra = _positions(obj, axis, arr.context)
    op = "_npi_insert_tensor" if extra else "_npi_insert_slice" if attrs["step"] is not None else "_npi_insert_scalar"
    if is_scalar(values):
        return invoke(op, [arr, *extra], dict(attrs, val=float(values)))
    vals = to_np(values) if isinstance(values, NDArray) else array(_np.asarray(values), dtype=arr.dtype)
    return invoke(op, [arr, vals, *extra], dict(attrs, val=None))


@_export
def resize(a, new_shape):
    """The elements of `a` repeated (or cut) to fill `new_shape`."""
    shape = (new_shape,) if isinstance(new_shape, int) else tuple(new_shape)
    return invoke("_np_resize", [to_np(a)], {"new_shape": shape})


@_export
def histogram(a, bins=10, range=None, normed=None, weights=None, density=None):  # noqa: A002
    """(counts, bin edges) of a over `bins` equal bins in `range` (the data's range when None), or
    over the bin edges `bins`."""
    if weights is not None or density or normed:
        raise MXNetError("histogram: weights and density are not supported (as in MXNet)")
    a = to_np(a)
    if isinstance(bins, (NDArray, list, tuple, _np.ndarray)):
        edges = to_np(bins) if isinstance(bins, NDArray) else array(_np.asarray(bins), dtype=a.dtype)
        return tuple(invoke("_npi_histogram", [a, edges], {"bin_cnt": None}))
    return tuple(invoke("_npi_histogram", [a], {"bin_cnt": int(bins), "range": range}))


@_export
def unravel_index(indices, shape, order="C"):
    """The coordinates in `shape` of flat `indices`, one int64 array per axis."""
    if order != "C":
        raise MXNetError("unravel_index: only order='C' is supported")
    idx = to_np(indices) if not is_scalar(indices) else array(indices, dtype="int64")
    res = invoke("_npi_unravel_index", [idx], {"shape": tuple(shape)})
    return tuple(res[i] for i in range(len(shape)))


@_export
def diag_indices_from(arr):
    """The indices of the main diagonal of a square array, one int64 array per axis."""
    a = to_np(arr)
    if a.ndim < 2 or len(set(a.shape)) != 1:
        raise MXNetError("diag_indices_from: input must be at least 2-d with all dimensions equal")
    idx = ndarray(_np.arange(a.shape[0], dtype=_np.int64), a.context)
    return tuple(idx.copy() for _ in range(a.ndim))


def _window(kind: str):
    def fn(M, dtype=_np.float32, ctx=None):
        return invoke(f"_npi_{kind}", [], {"M": int(M), "dtype": _np.dtype(canonical_dtype(dtype)).name},
                      ctx=ctx)
    fn.__name__ = kind
    fn.__doc__ = f"numpy.{kind} window of length M (float32 by default)."
    return fn


hanning = _export(_window("hanning"))
hamming = _export(_window("hamming"))
blackman = _export(_window("blackman"))


@_export
def may_share_memory(a, b, max_work=None):
    """Whether a and b might share memory."""
    return bool(_np.may_share_memory(to_np(a)._data, to_np(b)._data))


@_export
def shares_memory(a, b, max_work=None):
    """Whether a and b share memory."""
    return bool(_np.shares_memory(to_np(a)._data, to_np(b)._data))


__all__ = sorted(set(__all__))
