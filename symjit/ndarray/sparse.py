"""symjit.ndarray.sparse (`mx.nd.sparse`): MXNet 1.x sparse storage — CSRNDArray and
RowSparseNDArray containers with conversion to and from dense.

Storage (as MXNet):
  * `csr` (2-D only): `data` (nnz,), `indices` (nnz,) int64 column numbers, `indptr` (rows+1,)
    int64 — row r holds `data[indptr[r]:indptr[r+1]]` at columns `indices[...]`;
  * `row_sparse` (n-D): `indices` (k,) int64 sorted distinct row numbers and `data`
    (k,) + shape[1:] holding those rows; every other row is zero.

Invariants: the arrays above are owned by the container, validated on construction
(`MXNetError` naming the function on malformed input), and never aliased by what the
accessors return. Operators run on dense arrays: convert explicitly with
`tostype('default')` (MXNet's sparse kernels are an optimisation, not a different semantics).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..base import MXNetError, canonical_dtype, mx_real_t
from ..context import Context, current_context
from .ndarray import NDArray, array as _dense_array

__all__ = ["BaseSparseNDArray", "CSRNDArray", "RowSparseNDArray", "zeros", "empty", "csr_matrix",
           "row_sparse_array", "array", "cast_storage", "retain", "STORAGE_TYPES"]

STORAGE_TYPES = ("default", "row_sparse", "csr")
_INDEX_DTYPE = np.int64


def _ctx(ctx) -> Context:
    if ctx is None:
        return current_context()
    if isinstance(ctx, str):
        return Context(ctx)
    if not isinstance(ctx, Context):
        raise MXNetError(f"expected a Context such as mx.cpu(), got {ctx!r}")
    return ctx


def _shape(what: str, shape) -> tuple:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        out = tuple(int(d) for d in shape)
    except TypeError:
        raise MXNetError(f"{what}: invalid shape {shape!r}") from None
    if any(d < 0 for d in out):
        raise MXNetError(f"{what}: invalid shape {shape!r}: dimensions must be >= 0")
    return out


def _numpy(x, dtype=None) -> np.ndarray:
    if isinstance(x, NDArray):
        x = x.asnumpy()
    elif isinstance(x, BaseSparseNDArray):
        x = x.asnumpy()
    a = np.asarray(x)
    return a if dtype is None else a.astype(dtype)


class BaseSparseNDArray(NDArray):
    """Common behaviour of the sparse containers: an NDArray (so operators, autograd and
    in-place writes see the dense values in `_data`) plus the set of explicitly stored
    positions `_stored` (a bool mask: rows for row_sparse, entries for csr). The compressed
    arrays (`data`, `indices`, `indptr`) are the stored positions together with every
    nonzero value, in row-major order."""
    __slots__ = ("_stored",)
    _stype = ""

    def __init__(self, shape: tuple, dtype, ctx: Context, arrays: dict):
        super().__init__(np.zeros(tuple(shape), dtype=np.dtype(dtype)), ctx)
        self._stored = np.zeros(self._mask_shape(), dtype=bool)
        self._arrays = arrays

    @property
    def _shape(self) -> tuple:
        return tuple(self._data.shape)

    @property
    def _dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def stype(self) -> str:
        return self._stype

    @property
    def data(self) -> NDArray:
        """The stored values (a copy)."""
        return NDArray(self._arrays["data"], self._ctx)

    @property
    def indices(self) -> NDArray:
        """Column (csr) or row (row_sparse) numbers of the stored values (a copy)."""
        return NDArray(self._arrays["indices"], self._ctx)

    def __repr__(self) -> str:
        shape_info = "x".join(str(d) for d in self._shape)
        return f"\n<{type(self).__name__} {shape_info} @{self._ctx}>"

    __str__ = __repr__

    def __bool__(self):
        raise ValueError("The truth value of a sparse NDArray is ambiguous; convert with tostype('default')")

    __hash__ = NDArray.__hash__

    def __reduce__(self):
        return (_rebuild_sparse, (self._stype, self.asnumpy(), self._stored.copy(), str(self._ctx)))

    # ---- conversion ----------------------------------------------------------------------
    def todense(self) -> NDArray:
        return self.tostype("default")

    def tostype(self, stype: str) -> Any:
        """This array in storage `stype` ('default', 'csr', 'row_sparse')."""
        if stype == self._stype:
            return self
        return cast_storage(self, stype)

    def astype(self, dtype, copy: bool = True):
        dt = np.dtype(canonical_dtype(dtype))
        if not copy and dt == self._dtype:
            return self
        return self._like(self._data.astype(dt))

    def _like(self, dense: np.ndarray, ctx=None) -> "BaseSparseNDArray":
        """An array of this storage type holding `dense`, with this array's stored positions."""
        out = type(self).__new__(type(self))
        NDArray.__init__(out, np.array(dense, copy=True), ctx if ctx is not None else self._ctx)
        out._stored = self._stored.copy()
        return out

    def copy(self):
        return self._like(self._data)

    def copyto(self, other):
        """A copy on context `other`, or the values written into `other` (an array of this
        shape: a dense NDArray receives the dense values)."""
        if isinstance(other, Context):
            return self._like(self._data, other)
        if isinstance(other, BaseSparseNDArray):
            if other.shape != self._shape:
                raise MXNetError(f"copyto: shape mismatch: source {self._shape}, target {other.shape}")
            conv = cast_storage(self, other.stype)
            other._data = conv._data.astype(other._dtype)
            other._stored = conv._stored
            return other
        if isinstance(other, NDArray):
            if other.shape != self._shape:
                raise MXNetError(f"copyto: shape mismatch: source {self._shape}, target {other.shape}")
            other[:] = self.asnumpy()
            return other
        raise MXNetError(f"copyto: expected an NDArray or a Context, got {type(other).__name__}")

    def attach_grad(self, grad_req: str = "write", stype=None) -> None:
        """Mark this array as an autograd variable; the gradient has storage `stype` (default:
        this array's)."""
        _attach_grad(self, grad_req, stype if stype is not None else self._stype)

    def detach(self):
        return self._like(self._data)

    # ---- scalar arithmetic (zeros stay zeros, so the storage pattern is kept) ----------------
    def _scaled(self, dense_op, scalar) -> Any:
        out = dense_op(self.tostype("default") if self._ag is None else self, scalar)
        if self._ag is not None:   # recorded for autograd: the dense result carries the graph
            return out
        return self._like(out._data)

    def __mul__(self, other):   # by an array: the operator's (dense) result
        if not isinstance(other, (int, float, np.number)):
            return NDArray.__mul__(self, other)
        return self._scaled(NDArray.__mul__, other)

    __rmul__ = __mul__

    def __truediv__(self, other):
        if not isinstance(other, (int, float, np.number)):
            return NDArray.__truediv__(self, other)
        return self._scaled(NDArray.__truediv__, other)

    def __neg__(self):
        return self._scaled(lambda x, _: NDArray.__neg__(x), None)

    def __add__(self, other):   # adding to every element fills the zeros: a dense result
        return NDArray.__add__(self, other)

    __radd__ = __add__


class CSRNDArray(BaseSparseNDArray):
    """A 2-D array in compressed sparse row format."""
    __slots__ = ()
    _stype = "csr"

    def _mask_shape(self) -> tuple:
        return self._shape

    def _live_mask(self) -> np.ndarray:
        return self._stored | (self._data != 0)

    @property
    def _arrays(self) -> dict:
        mask = self._live_mask()
        rows, cols = np.nonzero(mask)
        indptr = np.concatenate([[0], np.cumsum(mask.sum(axis=1))]).astype(_INDEX_DTYPE)
        return {"data": np.ascontiguousarray(self._data[rows, cols]), "indices": cols.astype(_INDEX_DTYPE),
                "indptr": indptr}

    @_arrays.setter
    def _arrays(self, arrays: dict) -> None:
        rows = np.repeat(np.arange(self._shape[0]), np.diff(arrays["indptr"]))
        dense = np.zeros(self._shape, self._dtype)
        dense[rows, arrays["indices"]] = arrays["data"]
        stored = np.zeros(self._shape, bool)
        stored[rows, arrays["indices"]] = True
        self._data, self._stored = dense, stored

    def __getitem__(self, key):
        """Rows `key` (a slice with step 1) as a CSRNDArray, as MXNet; other keys give the
        dense NDArray result."""
        if isinstance(key, slice) and key.step in (None, 1):
            start, stop, _ = key.indices(self._shape[0])
            out = type(self).__new__(type(self))
            NDArray.__init__(out, np.array(self._data[start:stop], copy=True), self._ctx)
            out._stored = self._stored[start:stop].copy()
            return out
        return NDArray.__getitem__(self, key)

    @property
    def indptr(self) -> NDArray:
        """Row pointers: row r's values are data[indptr[r]:indptr[r+1]] (a copy)."""
        return NDArray(self._arrays["indptr"], self._ctx)


class RowSparseNDArray(BaseSparseNDArray):
    """An array whose listed rows are stored and every other row is zero."""
    __slots__ = ()
    _stype = "row_sparse"

    def _mask_shape(self) -> tuple:
        return self._shape[:1]

    def _live_mask(self) -> np.ndarray:
        return self._stored | self._data.reshape(self._shape[0], -1).any(axis=1)

    @property
    def _arrays(self) -> dict:
        keep = np.nonzero(self._live_mask())[0].astype(_INDEX_DTYPE)
        return {"data": np.ascontiguousarray(self._data[keep]), "indices": keep}

    @_arrays.setter
    def _arrays(self, arrays: dict) -> None:
        dense = np.zeros(self._shape, self._dtype)
        dense[arrays["indices"]] = arrays["data"]
        stored = np.zeros(self._shape[:1], bool)
        stored[arrays["indices"]] = True
        self._data, self._stored = dense, stored


def _rebuild_sparse(stype: str, dense: np.ndarray, stored: np.ndarray, ctx: str):
    out = _dense_to("unpickle", dense, stype, Context(ctx))
    out._stored = stored
    return out


def _attach_grad(x: NDArray, grad_req: str, stype: str) -> None:
    """Mark `x` as an autograd variable with an all-zero gradient of storage `stype`."""
    from .. import autograd
    grad = zeros(stype, x.shape, x.context, x._data.dtype)
    autograd.mark_variables([x], [grad], grad_req)


# ------------------------------------------------------------------------------------------
# Construction and validation
# ------------------------------------------------------------------------------------------

def _make_csr(what: str, data, indices, indptr, shape, ctx, dtype) -> CSRNDArray:
    shape = _shape(what, shape)
    if len(shape) != 2:
        raise MXNetError(f"{what}: csr storage is 2-D only, got shape {shape}")
    data = np.ascontiguousarray(_numpy(data, dtype))
    indices = np.ascontiguousarray(_numpy(indices)).reshape(-1)
    indptr = np.ascontiguousarray(_numpy(indptr)).reshape(-1)
    for name, a in (("indices", indices), ("indptr", indptr)):
        if a.size and not (np.issubdtype(a.dtype, np.integer) or np.all(np.mod(a, 1) == 0)):
            raise MXNetError(f"{what}: {name} must hold integers")
    indices, indptr = indices.astype(_INDEX_DTYPE), indptr.astype(_INDEX_DTYPE)
    rows, cols = shape
    if data.ndim != 1 or data.shape[0] != indices.shape[0]:
        raise MXNetError(f"{what}: data must be 1-D with one value per index: data shape {data.shape}, "
                         f"{indices.shape[0]} indices")
    if indptr.shape[0] != rows + 1:
        raise MXNetError(f"{what}: indptr must have rows + 1 = {rows + 1} entries, got {indptr.shape[0]}")
    if indptr[0] != 0 or indptr[-1] != indices.shape[0] or np.any(np.diff(indptr) < 0):
        raise MXNetError(f"{what}: indptr must start at 0, never decrease and end at nnz = "
                         f"{indices.shape[0]}, got {indptr.tolist()}")
    if np.any((indices < 0) | (indices >= cols)):
        raise MXNetError(f"{what}: column indices must be in [0, {cols}), got {indices.tolist()}")
    for r in range(rows):
        seg = indices[indptr[r]:indptr[r + 1]]
        if np.any(np.diff(seg) <= 0):
            raise MXNetError(f"{what}: column indices of row {r} must be strictly increasing, got {seg.tolist()}")
    return CSRNDArray(shape, data.dtype, _ctx(ctx), {"data": data, "indices": indices, "indptr": indptr})


def _make_row_sparse(what: str, data, indices, shape, ctx, dtype) -> RowSparseNDArray:
    shape = _shape(what, shape)
    if not shape:
        raise MXNetError(f"{what}: row_sparse storage needs at least one dimension")
    data = np.ascontiguousarray(_numpy(data, dtype))
    indices = np.ascontiguousarray(_numpy(indices)).reshape(-1)
    if indices.size and not (np.issubdtype(indices.dtype, np.integer) or np.all(np.mod(indices, 1) == 0)):
        raise MXNetError(f"{what}: indices must hold integers")
    indices = indices.astype(_INDEX_DTYPE)
    expect = (indices.shape[0],) + shape[1:]
    if data.shape != expect:
        raise MXNetError(f"{what}: data must have shape {expect} (one row per index), got {data.shape}")
    if np.any((indices < 0) | (indices >= shape[0])):
        raise MXNetError(f"{what}: row indices must be in [0, {shape[0]}), got {indices.tolist()}")
    if np.any(np.diff(indices) <= 0):
        raise MXNetError(f"{what}: row indices must be strictly increasing, got {indices.tolist()}")
    return RowSparseNDArray(shape, data.dtype, _ctx(ctx), {"data": data, "indices": indices})


def _dense_to(what: str, dense: np.ndarray, stype: str, ctx) -> BaseSparseNDArray:
    """Compress a dense numpy array (only nonzero entries / rows are stored)."""
    if stype == "csr":
        if dense.ndim != 2:
            raise MXNetError(f"{what}: csr storage is 2-D only, got shape {dense.shape}")
        mask = dense != 0
        rows, cols = np.nonzero(mask)
        indptr = np.concatenate([[0], np.cumsum(mask.sum(axis=1))]).astype(_INDEX_DTYPE)
        return CSRNDArray(dense.shape, dense.dtype, _ctx(ctx),
                          {"data": np.ascontiguousarray(dense[rows, cols]),
                           "indices": cols.astype(_INDEX_DTYPE), "indptr": indptr})
    if stype == "row_sparse":
        if dense.ndim == 0:
            raise MXNetError(f"{what}: row_sparse storage needs at least one dimension")
        keep = np.nonzero(dense.reshape(dense.shape[0], -1).any(axis=1))[0].astype(_INDEX_DTYPE)
        return RowSparseNDArray(dense.shape, dense.dtype, _ctx(ctx),
                                {"data": np.ascontiguousarray(dense[keep]), "indices": keep})
    raise MXNetError(f"{what}: unknown storage type {stype!r}; expected one of {list(STORAGE_TYPES)}")


def cast_storage(data, stype: str):
    """`data` (dense or sparse) converted to storage `stype` (a new array)."""
    if stype not in STORAGE_TYPES:
        raise MXNetError(f"cast_storage: unknown storage type {stype!r}; expected one of {list(STORAGE_TYPES)}")
    if isinstance(data, BaseSparseNDArray):
        if stype == "default":
            return NDArray(data.asnumpy(), data.context)
        if stype == data.stype:
            return data.copy()
        return _dense_to("cast_storage", data.asnumpy(), stype, data.context)
    if isinstance(data, NDArray):
        if stype == "default":
            return data.copy()
        return _dense_to("cast_storage", data.asnumpy(), stype, data.context)
    raise MXNetError(f"cast_storage: expected an NDArray, got {type(data).__name__}")


def retain(data, indices) -> RowSparseNDArray:
    """The rows `indices` of row_sparse array `data` (MXNet's `sparse.retain`): the result stores
    exactly those rows, holding `data`'s values there; every other row is zero."""
    if not isinstance(data, RowSparseNDArray):
        raise MXNetError(f"retain: data must be a RowSparseNDArray, got {type(data).__name__} "
                         f"with storage {getattr(data, 'stype', None)!r}")
    rows = np.unique(_numpy(indices).reshape(-1).astype(_INDEX_DTYPE))
    if rows.size and (rows[0] < 0 or rows[-1] >= data.shape[0]):
        raise MXNetError(f"retain: indices must be in [0, {data.shape[0]}), got {rows.tolist()}")
    return _make_row_sparse("retain", data._data[rows], rows, data.shape, data.context, data._dtype)


def zeros(stype: str, shape, ctx=None, dtype=None, **kwargs):
    """An all-zero array of storage `stype` (nothing stored for the sparse types)."""
    dt = np.dtype(canonical_dtype(dtype if dtype is not None else mx_real_t))
    shape = _shape("zeros", shape)
    if stype == "default":
        return NDArray(np.zeros(shape, dtype=dt), _ctx(ctx))
    if stype == "csr":
        if len(shape) != 2:
            raise MXNetError(f"zeros: csr storage is 2-D only, got shape {shape}")
        return _make_csr("zeros", np.zeros((0,), dt), np.zeros((0,), _INDEX_DTYPE),
                         np.zeros((shape[0] + 1,), _INDEX_DTYPE), shape, ctx, dt)
    if stype == "row_sparse":
        if not shape:
            raise MXNetError("zeros: row_sparse storage needs at least one dimension")
        return _make_row_sparse("zeros", np.zeros((0,) + shape[1:], dt), np.zeros((0,), _INDEX_DTYPE),
                                shape, ctx, dt)
    raise MXNetError(f"zeros: unknown storage type {stype!r}; expected one of {list(STORAGE_TYPES)}")


def empty(stype: str, shape, ctx=None, dtype=None):
    """A sparse array with nothing stored (all zeros), as MXNet's `sparse.empty`."""
    return zeros(stype, shape, ctx, dtype)


def _is_array_like(x) -> bool:
    return isinstance(x, (NDArray, np.ndarray, list)) or (isinstance(x, tuple) and len(x) == 0)


def csr_matrix(arg1, shape=None, ctx=None, dtype=None) -> CSRNDArray:
    """A CSRNDArray from (data, indices, indptr) with `shape`, from a dense 2-D array
    (NDArray, numpy array or nested list), from a CSRNDArray (copied), or all-zero from a
    (rows, cols) shape tuple."""
    if isinstance(arg1, CSRNDArray):
        out = arg1.astype(dtype) if dtype is not None else arg1.copy()
        out._ctx = _ctx(ctx) if ctx is not None else arg1.context
        return out
    if all(hasattr(arg1, a) for a in ("data", "indices", "indptr", "shape", "tocsr")):  # scipy.sparse
        arg1 = arg1.tocsr()
        arg1.sort_indices()
        shape = arg1.shape if shape is None else shape
        arg1 = (arg1.data, arg1.indices, arg1.indptr)
    if isinstance(arg1, tuple) and len(arg1) == 3:
        data, indices, indptr = arg1
        if shape is None:
            rows = len(_numpy(indptr)) - 1
            idx = _numpy(indices)
            shape = (rows, int(idx.max()) + 1 if idx.size else 0)
        dt = dtype if dtype is not None else (data.dtype if isinstance(data, (NDArray, np.ndarray)) else mx_real_t)
        return _make_csr("csr_matrix", data, indices, indptr, shape, ctx, canonical_dtype(dt))
    if isinstance(arg1, tuple) and len(arg1) == 2 and all(isinstance(d, (int, np.integer)) for d in arg1):
        return zeros("csr", arg1, ctx, dtype)
    if isinstance(arg1, BaseSparseNDArray) or _is_array_like(arg1):
        dense = _numpy(arg1, None if dtype is None and not isinstance(arg1, list)
                       else canonical_dtype(dtype if dtype is not None else mx_real_t))
        if shape is not None and tuple(shape) != dense.shape:
            raise MXNetError(f"csr_matrix: shape {tuple(shape)} does not match the data's shape {dense.shape}")
        return _dense_to("csr_matrix", dense, "csr", ctx)
    raise MXNetError(f"csr_matrix: unsupported argument of type {type(arg1).__name__}")


def row_sparse_array(arg1, shape=None, ctx=None, dtype=None) -> RowSparseNDArray:
    """A RowSparseNDArray from (data, indices) with `shape`, from a dense array, from a
    RowSparseNDArray (copied), or all-zero from a shape tuple of ints."""
    if isinstance(arg1, RowSparseNDArray):
        out = arg1.astype(dtype) if dtype is not None else arg1.copy()
        out._ctx = _ctx(ctx) if ctx is not None else arg1.context
        return out
    if isinstance(arg1, tuple) and arg1 and all(isinstance(d, (int, np.integer)) for d in arg1):
        return zeros("row_sparse", arg1, ctx, dtype)
    if isinstance(arg1, tuple) and len(arg1) == 2:
        data, indices = arg1
        data_np = _numpy(data)
        if shape is None:
            idx = _numpy(indices)
            shape = (int(idx.max()) + 1 if idx.size else 0,) + data_np.shape[1:]
        dt = dtype if dtype is not None else (data.dtype if isinstance(data, (NDArray, np.ndarray)) else mx_real_t)
        return _make_row_sparse("row_sparse_array", data_np, indices, shape, ctx, canonical_dtype(dt))
    if isinstance(arg1, BaseSparseNDArray) or _is_array_like(arg1):
        dense = _numpy(arg1, None if dtype is None and not isinstance(arg1, list)
                       else canonical_dtype(dtype if dtype is not None else mx_real_t))
        if shape is not None and tuple(shape) != dense.shape:
            raise MXNetError(f"row_sparse_array: shape {tuple(shape)} does not match the data's shape {dense.shape}")
        return _dense_to("row_sparse_array", dense, "row_sparse", ctx)
    raise MXNetError(f"row_sparse_array: unsupported argument of type {type(arg1).__name__}")


def array(source_array, ctx=None, dtype=None):
    """A sparse copy of a sparse array (same storage type); dense sources give a dense NDArray."""
    if isinstance(source_array, CSRNDArray):
        return csr_matrix(source_array, ctx=ctx, dtype=dtype)
    if isinstance(source_array, RowSparseNDArray):
        return row_sparse_array(source_array, ctx=ctx, dtype=dtype)
    return _dense_array(source_array, ctx, dtype)


#: operators that map zeros to zeros: on a sparse first input their result keeps its storage type,
#: as MXNet's sparse kernels do; every other operator gives a dense result (MXNet's fallback)
_ZERO_PRESERVING = frozenset({
    "abs", "sign", "negative", "relu", "square", "sqrt", "cbrt", "sin", "tan", "arcsin", "arctan",
    "sinh", "tanh", "arcsinh", "arctanh", "degrees", "radians", "floor", "ceil", "round", "rint",
    "trunc", "fix", "expm1", "log1p", "elemwise_mul", "elemwise_add", "elemwise_sub", "zeros_like",
    "clip", "copy", "_mul_scalar", "_div_scalar", "_copy"})


def _sparse_op(name: str, dense_fn):
    """`dense_fn` (an `mx.nd` operator) with MXNet's sparse output storage (`_ZERO_PRESERVING`)."""
    def fn(*args, **kwargs):
        out = dense_fn(*args, **kwargs)
        first = args[0] if args else next(iter(kwargs.values()), None)
        if (name in _ZERO_PRESERVING and isinstance(first, BaseSparseNDArray) and isinstance(out, NDArray)
                and not isinstance(out, BaseSparseNDArray) and out.shape == first.shape):
            return _dense_to(name, out.asnumpy(), first.stype, out.context)
        return out
    fn.__name__ = name
    fn.__doc__ = dense_fn.__doc__
    return fn


def __getattr__(name: str):
    """`mx.nd.sparse.<op>`: every `mx.nd` operator, with sparse results where MXNet's are sparse."""
    from .. import ndarray as nd
    dense_fn = getattr(nd, name, None) if not name.startswith("__") else None
    if not callable(dense_fn):
        raise AttributeError(f"module 'symjit.ndarray.sparse' has no attribute {name!r}")
    fn = _sparse_op(name, dense_fn)
    globals()[name] = fn
    return fn
