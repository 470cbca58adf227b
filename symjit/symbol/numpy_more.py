"""The rest of `mx.sym.np`'s names (split helpers, set and statistics functions, windows,
tensor products, insert/delete, ...) and the `mx.sym.np.linalg` / `mx.sym.np.random`
namespaces. Each builds the registered operator MXNet 1.9.1 writes into its JSON for the same
call (`_split_v2`, `_npi_tensordot_int_axes`, `_histogram`, ...), so a `hybrid_forward` using
`F.np.<name>` traces, compiles and exports like MXNet's. Shapes of symbols are unknown at
build time: arguments that depend on them (e.g. an int `axes` of tensordot) go to the operator
as attributes, as MXNet passes them."""
from __future__ import annotations

import types

import numpy as _onp

from ..numpy._op import position_attrs
from .symbol import Symbol
from .numpy import _Symbol, _axis_attr, _check_symbol, _is_number, _op, _shape, reshape

__all__ = ["append", "array_split", "atleast_1d", "atleast_2d", "atleast_3d", "average", "bincount", "blackman",
           "delete", "diag_indices_from", "diff", "dsplit", "ediff1d", "hamming", "hanning", "histogram", "hsplit",
           "indices", "inner", "insert", "invert", "logspace", "may_share_memory", "outer", "percentile",
           "polyval", "quantile", "resize", "shares_memory", "tensordot", "unique", "unravel_index", "vdot",
           "vsplit", "linalg", "random"]


def _dtype(dtype, default="float32") -> str:
    return _onp.dtype(dtype or default).name


def _outputs(sym: _Symbol) -> list:
    """The outputs of a multi-output symbol as a list of single-output symbols."""
    return list(sym)


# ---- joining, splitting -----------------------------------------------------------------------
def append(arr, values, axis=None) -> _Symbol:
    """`values` appended to `arr` along `axis` (both flattened when None)."""
    axis = "None" if axis is None else int(axis)    # MXNet's spelling of "the flattened arrays"
    return _op("_npi_concatenate", [arr, values], {"axis": axis, "num_args": 2}, hint="append")


def _split_attrs(indices_or_sections) -> dict:
    if isinstance(indices_or_sections, (int, _onp.integer)):
        return {"indices": (), "sections": int(indices_or_sections)}
    return {"indices": (0,) + tuple(int(i) for i in indices_or_sections), "sections": 0}


def array_split(ary, indices_or_sections, axis=0) -> list:
    """`ary` cut into `indices_or_sections` parts along `axis` (operator `_split_v2`)."""
    attrs = dict(_split_attrs(indices_or_sections), axis=int(axis), squeeze_axis=False)
    return _outputs(_op("_split_v2", [ary], attrs, hint="array_split"))


def vsplit(ary, indices_or_sections) -> list:
    """array_split along axis 0."""
    return array_split(ary, indices_or_sections, 0)


def hsplit(ary, indices_or_sections) -> list:
    """Split along axis 1 (axis 0 of a vector), operator `_npi_hsplit`."""
    attrs = dict(_split_attrs(indices_or_sections), axis=1, squeeze_axis=False)
    return _outputs(_op("_npi_hsplit", [ary], attrs, hint="hsplit"))


def dsplit(ary, indices_or_sections) -> list:
    """Split along axis 2, operator `_npi_dsplit`."""
    attrs = dict(_split_attrs(indices_or_sections), axis=2, squeeze_axis=False)
    return _outputs(_op("_npi_dsplit", [ary], attrs, hint="dsplit"))


def _atleast(n: int):
    def fn(*arys):
        out = _op(f"_np_atleast_{n}d", list(arys), {"num_args": len(arys)}, hint=f"atleast_{n}d")
        return out if len(arys) == 1 else _outputs(out)
    fn.__name__ = f"atleast_{n}d"
    fn.__doc__ = f"Each input viewed with at least {n} dimensions (a list for several inputs)."
    return fn


atleast_1d, atleast_2d, atleast_3d = _atleast(1), _atleast(2), _atleast(3)


# ---- statistics -------------------------------------------------------------------------------
def average(a, axis=None, weights=None, returned=False, out=None):
    """The (weighted) average along `axis`; with `returned`, also the sum of the weights."""
    inputs = [a] if weights is None else [a, weights]
    res = _op("_npi_average", inputs, {"axis": _axis_attr(axis), "weighted": weights is not None,
                                       "returned": bool(returned)}, hint="average")
    return tuple(_outputs(res)) if returned else res


def bincount(x, weights=None, minlength=0) -> _Symbol:
    """Occurrences of each non-negative integer in `x` (or the sums of `weights`)."""
    inputs = [x] if weights is None else [x, weights]
    return _op("_npi_bincount", inputs, {"minlength": int(minlength), "has_weights": weights is not None},
               hint="bincount")


def _percentile(name: str, a, q, axis, interpolation, keepdims, scale: float) -> _Symbol:
    attrs = {"axis": _axis_attr(axis), "interpolation": interpolation, "keepdims": bool(keepdims)}
    if isinstance(q, Symbol):
        q = q * scale if scale != 1.0 else q
        return _op("_npi_percentile", [a, q], dict(attrs, q_scalar=None), hint=name)
    return _op("_npi_percentile", [a], dict(attrs, q_scalar=float(q) * scale), hint=name)


def percentile(a, q, axis=None, out=None, overwrite_input=None, interpolation="linear", keepdims=False):
    """The q-th percentiles of `a` along `axis` (q a number or a symbol)."""
    return _percentile("percentile", a, q, axis, interpolation, keepdims, 1.0)


def quantile(a, q, axis=None, out=None, overwrite_input=None, interpolation="linear", keepdims=False):
    """The q-th quantiles of `a` along `axis` (percentile of 100 q, as MXNet builds it)."""
    return _percentile("quantile", a, q, axis, interpolation, keepdims, 100.0)


def histogram(a, bins=10, range=None, normed=None, weights=None, density=None):  # noqa: A002
    """[counts, bin edges] of `a`: `bins` equal bins over `range`, or the bin edges symbol `bins`."""
    if weights is not None or density or normed:
        raise NotImplementedError("histogram: weights and density are not supported (as in MXNet)")
    if isinstance(bins, Symbol):
        return _outputs(_op("_histogram", [a, bins], {"bin_cnt": None, "range": None}, hint="histogram"))
    if range is None:
        raise ValueError("histogram: a symbol needs `range` with an int `bins` (its data range is unknown)")
    return _outputs(_op("_histogram", [a], {"bin_cnt": int(bins), "range": tuple(range)}, hint="histogram"))


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None):
    """The sorted unique elements, and as asked the first indices, the inverse and the counts."""
    res = _op("_npi_unique", [ar], {"return_index": return_index, "return_inverse": return_inverse,
                                    "return_counts": return_counts, "axis": axis}, hint="unique")
    return tuple(_outputs(res)) if (return_index or return_inverse or return_counts) else res


# ---- differences, polynomials -----------------------------------------------------------------
def diff(a, n=1, axis=-1, prepend=None, append=None) -> _Symbol:
    """The n-th discrete difference along `axis` (prepend / append are not supported on symbols)."""
    if prepend is not None or append is not None:
        raise NotImplementedError("diff: prepend and append are not supported on symbols (as in MXNet)")
    return _op("_npi_diff", [a], {"n": int(n), "axis": int(axis)}, hint="diff")


def ediff1d(ary, to_end=None, to_begin=None) -> _Symbol:
    """Differences of the flattened array, with `to_begin` / `to_end` (numbers or symbols) around."""
    inputs, attrs = [ary], {}
    for key, value in (("to_begin", to_begin), ("to_end", to_end)):
        given = isinstance(value, Symbol)
        attrs[f"{key}_arr_given"] = given
        attrs[f"{key}_scalar"] = float(value) if value is not None and not given else None
        if given:
            inputs.append(value)
    return _op("_npi_ediff1d", inputs, attrs, hint="ediff1d")


def polyval(p, x) -> _Symbol:
    """The polynomial with coefficients `p` (highest power first) at `x` (both symbols)."""
    return _op("_npi_polyval", [p, x], hint="polyval")


# ---- insert, delete, resize -------------------------------------------------------------------
def _positions(obj, axis) -> tuple:
    """(attributes, extra inputs) for the positions `obj` (int, slice or symbol) of delete/insert."""
    attrs, is_array = position_attrs(obj, axis)
    if not is_array:
        return attrs, []
    if isinstance(obj, Symbol):
        return attrs, [obj]
    raise TypeError(f"positions must be an int, a slice or a symbol, got {type(obj).__name__}")


def delete(arr, obj, axis=None) -> _Symbol:
    """`arr` without the entries at `obj` along `axis`."""
    attrs, extra = _positions(obj, axis)
    return _op("_npi_delete", [arr, *extra], attrs, hint="delete")


def insert(arr, obj, values, axis=None) -> _Symbol:
    """`arr` with `values` (a number or a symbol) inserted before the positions `obj` along `axis`."""
    attrs, extra = _positions(obj, axis)
    op = "_npi_insert_tensor" if extra else "_npi_insert_slice" if attrs["step"] is not None else "_npi_insert_scalar"
    if _is_number(values):
        return _op(op, [arr, *extra], dict(attrs, val=float(values)), hint="insert")
    _check_symbol("insert", values)
    return _op(op, [arr, values, *extra], dict(attrs, val=None), hint="insert")


def resize(a, new_shape) -> _Symbol:
    """The elements of `a` repeated (or cut) to fill `new_shape`."""
    return _op("_np_resize", [a], {"new_shape": _shape(new_shape)}, hint="resize")


def invert(x, out=None) -> _Symbol:
    """Bitwise NOT (logical NOT of bools), operator `_npi_bitwise_not`."""
    _check_symbol("invert", x)
    return _op("_npi_bitwise_not", [x], hint="invert")


# ---- indices ----------------------------------------------------------------------------------
def indices(dimensions, dtype="int32", ctx=None) -> _Symbol:
    """The grid of indices of shape (len(dimensions), *dimensions)."""
    return _op("_npi_indices", [], {"dimensions": _shape(dimensions), "dtype": _dtype(dtype, "int32")},
               hint="indices")


def unravel_index(indices, shape, order="C") -> _Symbol:
    """The coordinates in `shape` of the flat `indices`: one symbol of shape (len(shape), ...)."""
    if order != "C":
        raise NotImplementedError("unravel_index: only order='C' is supported")
    return _op("_npi_unravel_index", [indices], {"shape": _shape(shape)}, hint="unravel_index")


def diag_indices_from(arr) -> _Symbol:
    """The indices of the main diagonal of a square array: one symbol of shape (ndim, n)."""
    return _op("_npi_diag_indices_from", [arr], hint="diag_indices_from")


def _share_memory(name: str):
    def fn(a, b, max_work=None) -> _Symbol:
        return _op("_npi_share_memory", [a, b], hint=name)
    fn.__name__ = name
    fn.__doc__ = "Whether a and b share memory: a zero-dim bool symbol (separate inputs never do)."
    return fn


shares_memory, may_share_memory = _share_memory("shares_memory"), _share_memory("may_share_memory")


# ---- creation ---------------------------------------------------------------------------------
def _window(kind: str):
    def fn(M, dtype="float32", ctx=None) -> _Symbol:
        return _op(f"_npi_{kind}", [], {"M": int(M), "dtype": _dtype(dtype)}, hint=kind)
    fn.__name__ = kind
    fn.__doc__ = f"numpy.{kind} window of length M (float32 by default)."
    return fn


hanning, hamming, blackman = _window("hanning"), _window("hamming"), _window("blackman")


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0, ctx=None) -> _Symbol:
    """`num` numbers spaced evenly on a log scale from base**start to base**stop."""
    if axis != 0:
        raise NotImplementedError("logspace: axis is not supported on symbols")
    return _op("_npi_logspace", [], {"start": float(start), "stop": float(stop), "num": int(num),
                                     "endpoint": bool(endpoint), "base": float(base), "dtype": _dtype(dtype)},
               hint="logspace")


# ---- tensor products --------------------------------------------------------------------------
def tensordot(a, b, axes=2) -> _Symbol:
    """Sum of products over `axes`: an int n (the last n of a with the first n of b) or a pair of
    axis lists."""
    if isinstance(axes, (int, _onp.integer)):
        return _op("_npi_tensordot_int_axes", [a, b], {"axes": int(axes)}, hint="tensordot")
    sa, sb = ((x,) if isinstance(x, (int, _onp.integer)) else tuple(int(i) for i in x) for x in axes)
    return _op("_npi_tensordot", [a, b], {"a_axes_summed": sa, "b_axes_summed": sb}, hint="tensordot")


def inner(a, b) -> _Symbol:
    """The inner product over the last axes of a and b."""
    return _op("_npi_tensordot", [a, b], {"a_axes_summed": (-1,), "b_axes_summed": (-1,)}, hint="inner")


def outer(a, b) -> _Symbol:
    """The outer product of the flattened a and b."""
    return tensordot(reshape(a, (-1,)), reshape(b, (-1,)), 0)


def vdot(a, b) -> _Symbol:
    """The dot product of the flattened a and b."""
    return tensordot(reshape(a, (-1,)), reshape(b, (-1,)), 1)


# ---- linalg -----------------------------------------------------------------------------------
def _norm(x, ord=None, axis=None, keepdims=False) -> _Symbol:  # noqa: A002 - numpy's name
    """numpy.linalg.norm, encoded for `_npi_norm` as MXNet's frontend encodes it (`flag`: -2 the
    flattened 2-norm, 1 the 2-norm / Frobenius norm over `axis`, -1 a vector `ord` norm, 0 a
    matrix 2 / -2 norm, 2 the nuclear norm)."""
    axes = (int(axis),) if isinstance(axis, (int, _onp.integer)) else None if axis is None else tuple(axis)
    attrs = {"axis": axes, "keepdims": bool(keepdims)}
    if axes is None and ord is None:
        return _op("_npi_norm", [x], dict(attrs, ord=2, flag=-2), hint="norm")
    if ord is None or ord in ("fro", "f"):
        return _op("_npi_norm", [x], dict(attrs, ord=2, flag=1), hint="norm")
    if axes is not None and len(axes) == 2 and ord in (2, -2):
        return _op("_npi_norm", [x], dict(attrs, ord=ord, flag=0), hint="norm")
    if ord == "nuc":
        return _op("_npi_norm", [x], dict(attrs, ord=2, flag=2), hint="norm")
    if isinstance(ord, str) or (axes is not None and len(axes) == 2) or _onp.isinf(ord):
        raise NotImplementedError(f"linalg.norm: ord={ord!r} over axis={axis!r} is not supported on symbols")
    return _op("_npi_norm", [x], dict(attrs, ord=ord, flag=-1), hint="norm")


def _linalg_fn(name: str, op_name: str, attr_names: tuple = (), defaults: tuple = (), n_in: int = 1,
               n_out: int = 1):
    def fn(*args, **kwargs):
        inputs, rest = list(args[:n_in]), list(args[n_in:])
        values = dict(zip(attr_names, defaults))
        values.update(zip(attr_names, rest))
        values.update(kwargs)
        res = _op(op_name, inputs, {k: values[k] for k in attr_names}, hint=name)
        return tuple(_outputs(res)) if n_out > 1 else res
    fn.__name__ = name
    fn.__doc__ = f"numpy.linalg.{name} on symbols (operator {op_name})."
    return fn


def _cholesky(a, upper=False) -> _Symbol:
    """The Cholesky factor of `a` (lower unless `upper`)."""
    return _op("_npi_cholesky", [a], {"lower": not upper}, hint="cholesky")


def _pinv(a, rcond=1e-15, hermitian=False) -> _Symbol:
    """The pseudo-inverse of `a` (rcond a number or a symbol)."""
    if isinstance(rcond, Symbol):
        return _op("_npi_pinv", [a, rcond], {"hermitian": hermitian}, hint="pinv")
    return _op("_npi_pinv_scalar_rcond", [a], {"rcond": float(rcond), "hermitian": hermitian}, hint="pinv")


def _tensorsolve(a, b, axes=None) -> _Symbol:
    return _op("_npi_tensorsolve", [a, b], {"a_axes": None if axes is None else tuple(axes)}, hint="tensorsolve")


linalg = types.ModuleType("symjit.symbol.numpy.linalg", "`mx.sym.np.linalg`: numpy.linalg on symbols.")
linalg.__dict__.update(
    norm=_norm, cholesky=_cholesky, pinv=_pinv, tensorsolve=_tensorsolve,
    svd=_linalg_fn("svd", "_npi_svd", n_out=3), inv=_linalg_fn("inv", "_linalg_inverse"),
    det=_linalg_fn("det", "_linalg_det"), slogdet=_linalg_fn("slogdet", "_linalg_slogdet", n_out=2),
    solve=_linalg_fn("solve", "_npi_solve", n_in=2), eig=_linalg_fn("eig", "_npi_eig", n_out=2),
    eigvals=_linalg_fn("eigvals", "_npi_eigvals"),
    eigh=_linalg_fn("eigh", "_npi_eigh", ("UPLO",), ("L",), n_out=2),
    eigvalsh=_linalg_fn("eigvalsh", "_npi_eigvalsh", ("UPLO",), ("L",)),
    tensorinv=_linalg_fn("tensorinv", "_npi_tensorinv", ("ind",), (2,)))
linalg.__all__ = sorted(k for k in linalg.__dict__ if not k.startswith("_"))


# ---- random -----------------------------------------------------------------------------------
def _sampler(name: str, op_name: str, params: tuple, defaults: tuple):
    """numpy.random.<name> on symbols: symbol parameters are inputs, numbers attributes; `size`
    is the output shape (None: the broadcast shape of the parameters)."""
    def fn(*args, size=None, dtype=None, ctx=None, out=None, **kwargs):
        values = dict(zip(params, defaults))
        values.update(zip(params, args))
        if len(args) > len(params):
            size = args[len(params)]
        values.update({k: kwargs.pop(k) for k in list(kwargs) if k in params})
        if kwargs:
            raise TypeError(f"random.{name}: unexpected arguments {sorted(kwargs)}")
        attrs = {"size": None if size is None else _shape(size), "dtype": _dtype(dtype)}
        inputs = []
        for p in params:
            if isinstance(values[p], Symbol):
                inputs.append(values[p])
                attrs[p] = None
            else:
                attrs[p] = float(values[p])
        return _op(op_name, inputs, attrs, hint=name)
    fn.__name__ = name
    fn.__doc__ = f"Samples of numpy.random.{name} with parameters {params} (numbers or symbols)."
    return fn


def _randint(low, high=None, size=None, dtype=None, ctx=None, out=None) -> _Symbol:
    """Integers in [low, high) (in [0, low) without high), int64 unless `dtype`."""
    if high is None:
        low, high = 0, low
    return _op("_random_randint", [], {"low": int(low), "high": int(high), "shape": _shape(size or ()),
                                          "dtype": _dtype(dtype, "int64")}, hint="randint")


random = types.ModuleType("symjit.symbol.numpy.random", "`mx.sym.np.random`: numpy.random on symbols.")
random.__dict__.update(
    uniform=_sampler("uniform", "_npi_uniform", ("low", "high"), (0.0, 1.0)),
    normal=_sampler("normal", "_npi_normal", ("loc", "scale"), (0.0, 1.0)),
    gamma=_sampler("gamma", "_npi_gamma", ("shape", "scale"), (1.0, 1.0)),
    exponential=_sampler("exponential", "_npi_exponential", ("scale",), (1.0,)),
    gumbel=_sampler("gumbel", "_npi_gumbel", ("loc", "scale"), (0.0, 1.0)),
    logistic=_sampler("logistic", "_npi_logistic", ("loc", "scale"), (0.0, 1.0)),
    pareto=_sampler("pareto", "_npi_pareto", ("a",), (1.0,)),
    power=_sampler("power", "_npi_powerd", ("a",), (1.0,)),
    rayleigh=_sampler("rayleigh", "_npi_rayleigh", ("scale",), (1.0,)),
    weibull=_sampler("weibull", "_npi_weibull", ("a",), (1.0,)),
    randint=_randint)
random.__all__ = sorted(k for k in random.__dict__ if not k.startswith("_"))
