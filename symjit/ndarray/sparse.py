"""symjit.ndarray.sparse (`mx.nd.sparse`): MXNet 1.x sparse storage — CSRNDArray and
RowSparseNDArray containers with conversion to and from dense.

Storage (as MXNet):
  * `csr` (2-D only): `data` (nnz,), `indices` (nnz,) int64 column numbers, `indptr` (rows+1,)
    int64 — row r holds `data[indptr[r]:indptr[r+1]]` at columns `indices[...]`;
  * `row_sparse` (n-D): `indices` (k,) int64 sorted distinct row numbers and `data`
    (k,) + shape[1:] holding those rows; every other row is zero.

Invariants: the arrays above are owned by the container, validated on construction
(`MXNetError` naming the function on malformed input), and never aliased by what the
accessors return. A container holds either the compressed arrays or a dense image (see
`BaseSparseNDArray`); operators given a sparse input run the sparse kernels of `sparse_ops`
(MXNet's output storage rules, cost in stored values) and fall back to the dense operator,
with a dense result, where MXNet does.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..base import MXNetError, canonical_dtype, mx_real_t
from ..context import Context, current_context
from .ndarray import NDArray, array as _dense_array

__all__ = ["BaseSparseNDArray", "CSRNDArray", "RowSparseNDArray", "zeros", "empty", "csr_matrix",
           "row_sparse_array", "array", "cast_storage", "retain", "STORAGE_TYPES", "dot", "add", "subtract",
           "multiply", "divide"]

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


#: numpy's dense buffer slot of NDArray (sparse containers keep it empty while compressed)
_DENSE_SLOT = NDArray.__dict__["_data"]


class BaseSparseNDArray(NDArray):
    """Common behaviour of the sparse containers. An array is in one of two modes:

      * compressed (`_comp` is a dict of arrays): the compressed arrays are the truth and no
        dense buffer exists. Sparse operators (`sparse_ops`) read and produce this mode, so
        their cost follows the number of stored values;
      * dense (`_comp` is None): `_data` (the NDArray buffer, so dense operators, autograd and
        in-place writes see the values) plus the set of explicitly stored positions `_stored`
        (a bool mask: rows for row_sparse, entries for csr). The compressed arrays are derived
        on demand: the stored positions together with every nonzero value, row-major.

    Reading `_data` switches an array to the dense mode for good (whoever reads the buffer may
    write into it); `_arrays = ...` switches it back. Shape and dtype are kept in `_meta`."""
    __slots__ = ("_stored_mask", "_comp", "_meta")
    _stype = ""
    _is_sparse = True

    def __init__(self, shape: tuple, dtype, ctx: Context, arrays: dict):
        self._meta = (tuple(int(d) for d in shape), np.dtype(dtype))
        self._stored_mask = None
        self._comp = None
        NDArray.__init__(self, None, ctx)
        self._comp = arrays

    # ---- the two modes -------------------------------------------------------------------
    @property
    def _data(self) -> np.ndarray:
        if self._comp is not None:
            dense, mask = self._expand(self._comp)
            _DENSE_SLOT.__set__(self, dense)
            self._stored_mask, self._comp = mask, None
        return _DENSE_SLOT.__get__(self)

    @_data.setter
    def _data(self, value) -> None:
        _DENSE_SLOT.__set__(self, value)
        if value is None:
            return
        self._comp = None
        new_meta = (tuple(value.shape), value.dtype)
        if getattr(self, "_meta", None) is None or self._meta[0] != new_meta[0]:
            self._stored_mask = None
        self._meta = new_meta

    @property
    def _stored(self) -> np.ndarray:
        self._data   # noqa: B018  (switches to the dense mode)
        if self._stored_mask is None:
            self._stored_mask = np.zeros(self._mask_shape(), dtype=bool)
        return self._stored_mask

    @_stored.setter
    def _stored(self, mask: np.ndarray) -> None:
        self._data   # noqa: B018  (the mask belongs to the dense mode)
        self._stored_mask = mask

    @property
    def _arrays(self) -> dict:
        """The compressed arrays (shared while compressed: never write into them)."""
        if self._comp is not None:
            return self._comp
        return self._compress(_DENSE_SLOT.__get__(self), self._stored)

    @_arrays.setter
    def _arrays(self, arrays: dict) -> None:
        _DENSE_SLOT.__set__(self, None)
        self._stored_mask = None
        self._comp = arrays

    @property
    def is_compressed(self) -> bool:
        """Whether the compressed arrays are held directly (no dense buffer)."""
        return self._comp is not None

    @classmethod
    def _from_arrays(cls, shape, dtype, ctx, arrays: dict):
        """A container holding `arrays` (valid, owned by the result) in the compressed mode."""
        out = cls.__new__(cls)
        BaseSparseNDArray.__init__(out, shape, dtype, ctx, arrays)
        return out

    # ---- attributes without densifying -------------------------------------------------------
    @property
    def _shape(self) -> tuple:
        return self._meta[0]

    @property
    def _dtype(self) -> np.dtype:
        return self._meta[1]

    @property
    def shape(self) -> tuple:
        return self._meta[0]

    @property
    def size(self) -> int:
        return int(np.prod(self._meta[0], dtype=np.int64))

    @property
    def ndim(self) -> int:
        return len(self._meta[0])

    @property
    def dtype(self) -> type:
        return self._meta[1].type

    @property
    def stype(self) -> str:
        return self._stype

    @property
    def data(self) -> NDArray:
        """The stored values (a copy)."""
        return NDArray(np.array(self._arrays["data"], copy=True), self._ctx)

    @property
    def indices(self) -> NDArray:
        """Column (csr) or row (row_sparse) numbers of the stored values (a copy)."""
        return NDArray(np.array(self._arrays["indices"], copy=True), self._ctx)

    def asnumpy(self) -> np.ndarray:
        if self._comp is not None:
            return self._expand(self._comp)[0]
        return np.array(_DENSE_SLOT.__get__(self), copy=True)

    def __repr__(self) -> str:
        shape_info = "x".join(str(d) for d in self._shape)
        return f"\n<{type(self).__name__} {shape_info} @{self._ctx}>"

    __str__ = __repr__

    def __bool__(self):
        raise ValueError("The truth value of a sparse NDArray is ambiguous; convert with tostype('default')")

    __hash__ = NDArray.__hash__

    def __reduce__(self):
        arrays = {k: np.array(v, copy=True) for k, v in self._arrays.items()}
        return (_rebuild_sparse, (self._stype, self._shape, self._dtype.str, arrays, str(self._ctx)))

    # ---- conversion ----------------------------------------------------------------------
    def todense(self) -> NDArray:
        return self.tostype("default")

    def tostype(self, stype: str) -> Any:
        """This array in storage `stype` ('default', 'csr', 'row_sparse')."""
        if stype == self._stype:
            return self
        return cast_storage(self, stype)

    def _with_arrays(self, arrays: dict, dtype=None, ctx=None) -> "BaseSparseNDArray":
        """An array of this type and shape holding `arrays` (owned by the result)."""
        dt = self._dtype if dtype is None else np.dtype(dtype)
        return type(self)._from_arrays(self._shape, dt, ctx if ctx is not None else self._ctx, arrays)

    def _copied_arrays(self, dtype=None) -> dict:
        arrays = self._arrays
        out = {k: np.array(v, copy=True) for k, v in arrays.items()}
        if dtype is not None:
            out["data"] = out["data"].astype(dtype)
        return out

    def astype(self, dtype, copy: bool = True):
        dt = np.dtype(canonical_dtype(dtype))
        if not copy and dt == self._dtype:
            return self
        return self._with_arrays(self._copied_arrays(dt), dt)

    def copy(self):
        return self._with_arrays(self._copied_arrays())

    def copyto(self, other):
        """A copy on context `other`, or the values written into `other` (an array of this
        shape: a dense NDArray receives the dense values)."""
        if isinstance(other, Context):
            return self._with_arrays(self._copied_arrays(), ctx=other)
        if isinstance(other, BaseSparseNDArray):
            if other.shape != self._shape:
                raise MXNetError(f"copyto: shape mismatch: source {self._shape}, target {other.shape}")
            conv = cast_storage(self, other.stype)
            other._arrays = conv._copied_arrays(other._dtype)
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
        return self.copy()

    def zeros_like(self):
        return zeros(self._stype, self._shape, self._ctx, self._dtype)


class CSRNDArray(BaseSparseNDArray):
    """A 2-D array in compressed sparse row format."""
    __slots__ = ()
    _stype = "csr"

    def _mask_shape(self) -> tuple:
        return self._shape

    def _compress(self, dense: np.ndarray, stored: np.ndarray) -> dict:
        mask = stored | (dense != 0)
        rows, cols = np.nonzero(mask)
        indptr = np.concatenate([[0], np.cumsum(mask.sum(axis=1))]).astype(_INDEX_DTYPE)
        return {"data": np.ascontiguousarray(dense[rows, cols]), "indices": cols.astype(_INDEX_DTYPE),
                "indptr": indptr}

    def _expand(self, arrays: dict) -> tuple:
        rows = np.repeat(np.arange(self._shape[0]), np.diff(arrays["indptr"]))
        dense = np.zeros(self._shape, self._dtype)
        dense[rows, arrays["indices"]] = arrays["data"]
        stored = np.zeros(self._shape, bool)
        stored[rows, arrays["indices"]] = True
        return dense, stored

    def __getitem__(self, key):
        """Rows `key` (a slice with step 1) as a CSRNDArray, as MXNet; other keys give the
        dense NDArray result."""
        if isinstance(key, slice) and key.step in (None, 1):
            start, stop, _ = key.indices(self._shape[0])
            return csr_row_slice(self, start, max(start, stop))
        return NDArray.__getitem__(self, key)

    @property
    def indptr(self) -> NDArray:
        """Row pointers: row r's values are data[indptr[r]:indptr[r+1]] (a copy)."""
        return NDArray(np.array(self._arrays["indptr"], copy=True), self._ctx)


class RowSparseNDArray(BaseSparseNDArray):
    """An array whose listed rows are stored and every other row is zero."""
    __slots__ = ()
    _stype = "row_sparse"

    def _mask_shape(self) -> tuple:
        return self._shape[:1]

    def _compress(self, dense: np.ndarray, stored: np.ndarray) -> dict:
        live = stored | dense.reshape(self._shape[0], -1).any(axis=1)
        keep = np.nonzero(live)[0].astype(_INDEX_DTYPE)
        return {"data": np.ascontiguousarray(dense[keep]), "indices": keep}

    def _expand(self, arrays: dict) -> tuple:
        dense = np.zeros(self._shape, self._dtype)
        dense[arrays["indices"]] = arrays["data"]
        stored = np.zeros(self._shape[:1], bool)
        stored[arrays["indices"]] = True
        return dense, stored


def csr_row_slice(x: CSRNDArray, start: int, stop: int) -> CSRNDArray:
    """Rows [start, stop) of `x` as a CSRNDArray (index arithmetic on the compressed arrays)."""
    a = x._arrays
    lo, hi = int(a["indptr"][start]), int(a["indptr"][stop])
    arrays = {"data": a["data"][lo:hi].copy(), "indices": a["indices"][lo:hi].copy(),
              "indptr": a["indptr"][start:stop + 1] - lo}
    return CSRNDArray._from_arrays((stop - start, x.shape[1]), x._dtype, x.context, arrays)


def _rebuild_sparse(stype: str, shape, dtype, arrays: dict, ctx: str):
    cls = CSRNDArray if stype == "csr" else RowSparseNDArray
    name, dev = ctx.split("(")
    return cls._from_arrays(tuple(shape), np.dtype(dtype), Context(name, int(dev[:-1])), arrays)


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
    falling = np.diff(indices) <= 0          # within a row, columns must increase
    if indices.size > 1 and np.any(falling):
        row_of_next = np.searchsorted(indptr, np.arange(1, indices.size), side="right") - 1
        same_row = indptr[row_of_next] != np.arange(1, indices.size)
        bad = np.nonzero(falling & same_row)[0]
        if bad.size:
            r = int(row_of_next[bad[0]])
            seg = indices[indptr[r]:indptr[r + 1]]
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
        if isinstance(data, CSRNDArray):
            return _csr_to_row_sparse(data)
        if data.ndim == 2:
            return _row_sparse_to_csr(data)
        return _dense_to("cast_storage", data.asnumpy(), stype, data.context)
    if isinstance(data, NDArray):
        if stype == "default":
            return data.copy()
        return _dense_to("cast_storage", data.asnumpy(), stype, data.context)
    raise MXNetError(f"cast_storage: expected an NDArray, got {type(data).__name__}")


def _csr_to_row_sparse(x: CSRNDArray) -> RowSparseNDArray:
    """The rows of `x` holding stored entries, as a RowSparseNDArray (no dense image of x)."""
    a = x._arrays
    counts = np.diff(a["indptr"])
    rows = np.nonzero(counts)[0].astype(_INDEX_DTYPE)
    values = np.zeros((rows.size, x.shape[1]), x._dtype)
    values[np.repeat(np.arange(rows.size), counts[rows]), a["indices"]] = a["data"]
    return RowSparseNDArray._from_arrays(x.shape, x._dtype, x.context, {"data": values, "indices": rows})


def _row_sparse_to_csr(x: RowSparseNDArray) -> CSRNDArray:
    """The nonzero entries of a 2-D RowSparseNDArray's stored rows, as a CSRNDArray."""
    a = x._arrays
    local_rows, cols = np.nonzero(a["data"])
    counts = np.zeros(x.shape[0], _INDEX_DTYPE)
    counts[a["indices"]] = np.bincount(local_rows, minlength=a["indices"].size)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(_INDEX_DTYPE)
    return CSRNDArray._from_arrays(x.shape, x._dtype, x.context,
                                   {"data": np.ascontiguousarray(a["data"][local_rows, cols]),
                                    "indices": cols.astype(_INDEX_DTYPE), "indptr": indptr})


def retain(data, indices) -> RowSparseNDArray:
    """The rows `indices` of row_sparse array `data` (MXNet's `sparse.retain`): the result stores
    exactly those rows, holding `data`'s values there; every other row is zero."""
    if not isinstance(data, RowSparseNDArray):
        raise MXNetError(f"retain: data must be a RowSparseNDArray, got {type(data).__name__} "
                         f"with storage {getattr(data, 'stype', None)!r}")
    rows = np.unique(_numpy(indices).reshape(-1).astype(_INDEX_DTYPE))
    if rows.size and (rows[0] < 0 or rows[-1] >= data.shape[0]):
        raise MXNetError(f"retain: indices must be in [0, {data.shape[0]}), got {rows.tolist()}")
    a = data._arrays
    pos = np.searchsorted(a["indices"], rows)
    present = pos < a["indices"].size
    present[present] = a["indices"][pos[present]] == rows[present]
    values = np.zeros((rows.size,) + data.shape[1:], data._dtype)
    values[present] = a["data"][pos[present]]
    return RowSparseNDArray._from_arrays(data.shape, data._dtype, data.context, {"data": values, "indices": rows})


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


# ------------------------------------------------------------------------------------------
# Operators (mx.nd.sparse.*): the registry's operators, run by the sparse kernels
# (`sparse_ops`) where an input is sparse
# ------------------------------------------------------------------------------------------

def dot(lhs, rhs, transpose_a=False, transpose_b=False, forward_stype=None):
    """The matrix product with MXNet's sparse storage rules: dot(csr, dense) = dense,
    dot(csr, dense, transpose_a=True) = row_sparse, dot(dense, csr) = csr,
    dot(dense, csr, transpose_b=True) = dense; `forward_stype` asks for another storage."""
    from .ndarray import invoke
    return invoke("dot", [lhs, rhs], {"transpose_a": transpose_a, "transpose_b": transpose_b,
                                      "forward_stype": forward_stype})


def _elemwise_or_broadcast(elemwise: str, broadcast: str, scalar: str, rscalar: str):
    def fn(lhs, rhs):
        """Elementwise when the shapes agree (sparse results for sparse operands, as MXNet's
        `sparse.add` & co.), broadcasting otherwise; numbers act as scalars."""
        from .ndarray import invoke
        if isinstance(lhs, NDArray) and isinstance(rhs, NDArray):
            return invoke(elemwise if lhs.shape == rhs.shape else broadcast, [lhs, rhs], {})
        if isinstance(lhs, NDArray):
            return invoke(scalar, [lhs], {"scalar": float(rhs)})
        return invoke(rscalar, [rhs], {"scalar": float(lhs)})
    fn.__name__ = elemwise.replace("elemwise_", "")
    return fn


add = _elemwise_or_broadcast("elemwise_add", "broadcast_add", "_plus_scalar", "_plus_scalar")
subtract = _elemwise_or_broadcast("elemwise_sub", "broadcast_sub", "_minus_scalar", "_rminus_scalar")
multiply = _elemwise_or_broadcast("elemwise_mul", "broadcast_mul", "_mul_scalar", "_mul_scalar")
divide = _elemwise_or_broadcast("elemwise_div", "broadcast_div", "_div_scalar", "_rdiv_scalar")


def __getattr__(name: str):
    """Every registered operator, as `mx.nd.sparse.NAME` (MXNet's sparse op namespace); an op
    registered as `_sparse_NAME` (MXNet's sparse-only operators) takes precedence."""
    from ..ops.registry import list_ops
    names = set(list_ops())
    op_name = "_sparse_" + name if "_sparse_" + name in names else name
    if name.startswith("__") or op_name not in names:
        raise AttributeError(f"module 'symjit.ndarray.sparse' has no attribute {name!r}")
    from . import _op_function
    return _op_function(op_name)
