"""The KVStore of MXNet 1.x for one process: types 'local', 'device' and 'nccl'.

Semantics (MXNet 1.x `KVStoreLocal`):

* `init(key, value)` stores a copy of `value`; every key is initialized once.
* `push(key, values)` sums the values given for the key (one per device), then calls the updater
  once per key, `updater(key, merged, stored)`, which changes `stored` in place. Without an
  updater the sum replaces the stored value (ASSIGN). Keys of one call are processed in sorted
  order (integer keys by value, string keys in the order they were initialized).
* `pull(key, out)` copies the stored value into every output; it never calls the updater.
* Errors (unknown key, pull before init, shape or dtype mismatch) are raised before anything
  is written, so the store keeps its values.

'local' keeps stored values and the merge buffer on the CPU; 'device' (and its alias 'nccl')
sums where the pushed data lives: into a merge buffer on the first pushed value's device, and
keeps each stored value on the device of its initial value. Sums are accumulated in place into
one persistent merge buffer per key (no temporary per device, no copy for a single value).

The distributed stores (`symjit.kvstore.dist`) reuse this class and override three hooks:
`_init_values` (rank 0's value wins), `_reduce_workers` (sum over workers) and `_barrier`.
"""
from __future__ import annotations

import pickle
from typing import Any, Callable

import numpy as np

from ..base import MXNetError
from ..context import Context, cpu
from ..ndarray import NDArray
from ..ndarray.sparse import RowSparseNDArray
from ..ndarray.write_guard import writable
from .base import GradientCompression, KVStoreBase, SparseImage, commit_sparse, group_pairs, key_value_pairs, sort_key

__all__ = ["KVStore"]

#: store type names of the in-process store; 'device' semantics for all but 'local*'
LOCAL_TYPES = ("local", "local_update_cpu", "local_allreduce_cpu", "local_allreduce_device", "device", "nccl")


def _key_text(key) -> str:
    return repr(key) if isinstance(key, str) else str(key)


class KVStore(KVStoreBase):
    """A key-value store for synchronizing values over devices (and, in subclasses, workers)."""

    def __init__(self, name: str = "local"):
        self._type = name
        self._on_device = "device" in name or name == "nccl"
        self._store: dict[int | str, NDArray] = {}
        self._merge: dict[int | str, np.ndarray] = {}
        self._str_order: dict[str, int] = {}
        self._updater: Callable | None = None
        self._compression: GradientCompression | None = None
        self._key_kind: type | None = None   # int or str: MXNet's stores take one kind of key

    def _pairs(self, key, value, what: str) -> list:
        """key_value_pairs, refusing keys of the other kind than this store's first ones."""
        pairs = key_value_pairs(key, value, what)
        for k, _ in pairs:
            kind = type(k)
            if self._key_kind is None:
                self._key_kind = kind
            elif kind is not self._key_kind:
                raise MXNetError(f"KVStore.{what}: key {k!r} is a {kind.__name__}, but this store uses "
                                 f"{self._key_kind.__name__} keys (MXNet stores take one kind of key)")
        return pairs

    # ---- properties ----------------------------------------------------------------------------
    @property
    def type(self) -> str:
        """The type name this store was created with."""
        return self._type

    @property
    def rank(self) -> int:
        """Rank of this worker, in [0, num_workers)."""
        return 0

    @property
    def num_workers(self) -> int:
        """Number of worker processes."""
        return 1

    # ---- validation ----------------------------------------------------------------------------
    def _meta(self, key) -> tuple[tuple, np.dtype]:
        """(shape, dtype) of an initialized key; MXNetError for an unknown key."""
        arr = self._store.get(key)
        if arr is None:
            raise MXNetError(f"KVStore: key {_key_text(key)} has not been initialized (call init first)")
        return arr.shape, arr._data.dtype

    def _check_arrays(self, what: str, key, arrays: list[NDArray]) -> None:
        shape, dtype = self._meta(key)
        for a in arrays:
            if a.shape != shape:
                raise MXNetError(f"KVStore.{what}: shape mismatch for key {_key_text(key)}: stored "
                                 f"{shape}, got {a.shape}")
            if a._data.dtype != dtype:
                raise MXNetError(f"KVStore.{what}: dtype mismatch for key {_key_text(key)}: stored "
                                 f"{dtype.name}, got {a._data.dtype.name}")

    def _ordered(self, keys) -> list:
        return sorted(keys, key=lambda k: sort_key(k, self._str_order))

    # ---- init ----------------------------------------------------------------------------------
    def init(self, key, value) -> None:
        """Initialize one key or a list of keys (one value each) in the store."""
        pairs = self._pairs(key, value, "init")
        seen = set()
        for k, vals in pairs:
            if k in self._store or k in seen:
                raise MXNetError(f"KVStore.init: duplicate init of key {_key_text(k)}")
            if len(vals) != 1:
                raise MXNetError(f"KVStore.init: key {_key_text(k)} was given {len(vals)} values; init "
                                 "takes one value per key")
            seen.add(k)
        items = [(k, vals[0]) for k, vals in pairs]
        for (k, v), data in zip(items, self._init_values(items)):
            ctx = v.context if self._on_device else cpu(0)
            self._store[k] = NDArray(data, ctx)
            if isinstance(k, str) and k not in self._str_order:
                self._str_order[k] = len(self._str_order)

    def _init_values(self, items: list[tuple[Any, NDArray]]) -> list[np.ndarray]:
        """Fresh arrays holding the initial values (here: copies of the given ones)."""
        return [np.array(v._data, copy=True, order="C") for _, v in items]

    # ---- push ----------------------------------------------------------------------------------
    def push(self, key, value, priority: int = 0) -> None:
        """Sum the values of each key (over devices and, for dist stores, workers) and apply the
        updater (default: assign) once per key."""
        grouped = group_pairs(self._pairs(key, value, "push"))
        keys = self._ordered(grouped)
        for k in keys:
            self._check_arrays("push", k, grouped[k])
        merged = {k: self._local_reduce(k, grouped[k]) for k in keys}
        merged = self._reduce_workers(keys, merged)
        for k in keys:
            self._apply(k, merged[k], self._merge_ctx(k, grouped[k]), _pushed_rows(grouped[k]))

    def _merge_ctx(self, key, arrays: list[NDArray]) -> Context:
        return arrays[0].context if self._on_device else cpu(0)

    def _merge_buffer(self, key) -> np.ndarray:
        buf = self._merge.get(key)
        stored = self._store[key]._data
        if buf is None or buf.shape != stored.shape or buf.dtype != stored.dtype:
            buf = self._merge[key] = np.empty(stored.shape, stored.dtype)
        return buf

    def _compress_each(self) -> bool:
        """Whether each pushed array is quantized on its own device (device stores)."""
        return self._compression is not None and self._compression.active

    def _local_reduce(self, key, arrays: list[NDArray]) -> np.ndarray:
        """Sum of the arrays pushed for `key` by this process. May be the (unchanged) array of a
        single pushed value; callers never write into the result."""
        datas = [a._data for a in arrays]
        if self._compress_each():
            datas = [self._compression.quantize((key, i), d) for i, d in enumerate(datas)]
        if len(datas) == 1:
            return datas[0]
        buf = self._merge_buffer(key)
        np.add(datas[0], datas[1], out=buf)
        for d in datas[2:]:
            np.add(buf, d, out=buf)
        return buf

    def _reduce_workers(self, keys: list, merged: dict) -> dict:
        """Sum over worker processes (a single process: nothing to do)."""
        return merged

    def _apply(self, key, merged: np.ndarray, ctx: Context, rows: np.ndarray | None = None) -> None:
        """The updater on the merged value; `rows`: the rows stored by row_sparse pushes, whose
        merge the updater receives as a RowSparseNDArray (MXNet: lazy updates touch those only)."""
        stored = self._store[key]
        if self._updater is None:
            writable(stored._data)[...] = merged
        elif rows is not None:
            grad = RowSparseNDArray._from_arrays(merged.shape, merged.dtype, ctx,
                                                 {"data": np.ascontiguousarray(merged[rows]), "indices": rows})
            self._updater(key, grad, stored)
        else:
            self._updater(key, NDArray(merged, ctx), stored)

    # ---- pull ----------------------------------------------------------------------------------
    def pull(self, key, out=None, priority: int = 0, ignore_sparse: bool = True) -> None:
        """Copy the stored value of each key into every array of `out`."""
        if out is None:
            raise MXNetError("KVStore.pull: out= is required")
        pairs = self._pairs(key, out, "pull")
        for k, outs in pairs:
            self._check_arrays("pull", k, outs)
        if ignore_sparse:   # MXNet leaves sparse outputs of a plain pull untouched
            pairs = [(k, [o for o in outs if not isinstance(o, SparseImage)]) for k, outs in pairs]
        self._read_into(pairs)

    def _read_into(self, pairs) -> None:
        for k, outs in pairs:
            src = self._store[k]._data
            for o in outs:
                if o._data is not src:
                    writable(o._data)[...] = src
            commit_sparse(outs)

    def pushpull(self, key, value, out=None, priority: int = 0) -> None:
        """push, then pull into `out` (into `value` when out is None)."""
        if out is not None:  # validate the outputs before the push changes the store
            for k, outs in key_value_pairs(key, out, "pushpull"):
                self._check_arrays("pushpull", k, outs)
        self.push(key, value, priority)
        self.pull(key, value if out is None else out, priority)

    def broadcast(self, key, value, out, priority: int = 0) -> None:
        """init with `value` (for distributed stores: rank 0's), then pull into `out`."""
        vpairs = key_value_pairs(key, value, "broadcast")
        for (k, vals), (_, outs) in zip(vpairs, key_value_pairs(key, out, "broadcast")):
            for o in outs:  # checked before init, so a bad output leaves the store unchanged
                if o.shape != vals[0].shape or o._data.dtype != vals[0]._data.dtype:
                    raise MXNetError(f"KVStore.broadcast: output for key {_key_text(k)} is "
                                     f"{o.shape} {o._data.dtype.name}, value is {vals[0].shape} "
                                     f"{vals[0]._data.dtype.name}")
        self.init(key, value)
        self.pull(key, out, priority)

    def row_sparse_pull(self, key, out=None, priority: int = 0, row_ids=None) -> None:
        """Pull only the rows `row_ids` of each key: those rows of `out` get the stored rows and
        the other rows become 0 (the dense image of MXNet's row_sparse result)."""
        if out is None or row_ids is None:
            raise MXNetError("KVStore.row_sparse_pull: out= and row_ids= are required")
        pairs = self._pairs(key, out, "row_sparse_pull")
        if isinstance(row_ids, NDArray):
            rid_lists = [[row_ids] * len(outs) for _, outs in pairs]
        else:
            rid_pairs = key_value_pairs(key, row_ids, "row_sparse_pull")
            rid_lists = []
            for (k, outs), (_, rids) in zip(pairs, rid_pairs):
                if len(rids) == 1:
                    rids = rids * len(outs)
                if len(rids) != len(outs):
                    raise MXNetError(f"KVStore.row_sparse_pull: key {_key_text(k)} has {len(outs)} outputs "
                                     f"but {len(rids)} row_ids")
                rid_lists.append(rids)
        plans = []
        for (k, outs), rids in zip(pairs, rid_lists):
            self._check_arrays("row_sparse_pull", k, outs)
            if not all(isinstance(o, SparseImage) and o.sparse.stype == "row_sparse" for o in outs):
                raise MXNetError(f"KVStore.row_sparse_pull: outputs for key {_key_text(k)} must be "
                                 "row_sparse NDArrays (use pull for dense outputs)")
            shape, _ = self._meta(k)
            if len(shape) == 0:
                raise MXNetError(f"KVStore.row_sparse_pull: key {_key_text(k)} has no rows")
            rows = [_row_indices(r, shape[0], k) for r in rids]
            plans.append((k, outs, rows))
        full: dict = {}
        self._read_rows(plans, full)
        for k, outs, rows in plans:
            src = full[k]
            for o, r in zip(outs, rows):   # MXNet: exactly the requested rows are stored
                o.sparse._arrays = {"data": np.array(src[r], dtype=o.sparse._dtype), "indices": r}

    def _read_rows(self, plans, full: dict) -> None:
        for k, _, _ in plans:
            full[k] = self._store[k]._data

    # ---- updater / optimizer -----------------------------------------------------------------
    def _set_updater(self, updater: Callable) -> None:
        """Set the push updater `updater(key, input, stored)`; it must change `stored` in place."""
        if updater is not None and not callable(updater):
            raise MXNetError(f"KVStore: the updater must be callable, got {type(updater).__name__}")
        self._updater = updater

    set_updater = _set_updater

    def set_optimizer(self, optimizer) -> None:
        """Apply `optimizer` to every push on the store (update_on_kvstore)."""
        from .. import optimizer as opt
        if not isinstance(optimizer, opt.Optimizer):
            raise MXNetError(f"KVStore.set_optimizer: expected an Optimizer, got {type(optimizer).__name__}")
        self._set_updater(opt.get_updater(optimizer))

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        """Write the optimizer states of the store's updater (and the optimizer) to `fname`."""
        if self._updater is None or not hasattr(self._updater, "get_states"):
            raise MXNetError("KVStore.save_optimizer_states: no optimizer is set on this KVStore "
                             "(call set_optimizer first)")
        with open(fname, "wb") as f:
            f.write(self._updater.get_states(dump_optimizer))

    def load_optimizer_states(self, fname: str) -> None:
        """Restore optimizer states written by `save_optimizer_states`."""
        if self._updater is None or not hasattr(self._updater, "set_states"):
            raise MXNetError("KVStore.load_optimizer_states: no optimizer is set on this KVStore "
                             "(call set_optimizer first)")
        with open(fname, "rb") as f:
            data = f.read()
        try:
            pickle.loads(data)
        except Exception as e:  # noqa: BLE001 - any unpickling failure means a bad file
            raise MXNetError(f"KVStore.load_optimizer_states: {fname!r} is not an optimizer states "
                             f"file: {e}") from None
        self._updater.set_states(data)

    # ---- compression -------------------------------------------------------------------------
    def set_gradient_compression(self, compression_params: dict) -> None:
        """Enable MXNet's 2-bit gradient compression (device and dist stores only, as MXNet)."""
        if "device" not in self._type and "dist" not in self._type:
            raise MXNetError(f"Gradient compression is not supported for this type of kvstore "
                             f"({self._type!r}); use 'device' or a 'dist_*' type")
        self._compression = GradientCompression(compression_params)


def _pushed_rows(arrays: list) -> np.ndarray | None:
    """The union of the stored rows when every pushed array is row_sparse, else None."""
    if not arrays or not all(isinstance(a, SparseImage) and a.sparse.stype == "row_sparse" for a in arrays):
        return None
    return np.unique(np.concatenate([a.sparse._arrays["indices"] for a in arrays])).astype(np.int64)


def _row_indices(row_ids: NDArray, nrows: int, key) -> np.ndarray:
    if not isinstance(row_ids, NDArray):
        raise MXNetError(f"KVStore.row_sparse_pull: row_ids must be NDArrays, got {type(row_ids).__name__}")
    ids = row_ids._data.reshape(-1)
    if ids.size and not np.all(np.equal(np.mod(ids, 1), 0)):
        raise MXNetError(f"KVStore.row_sparse_pull: row_ids of key {_key_text(key)} must be integers")
    ids = ids.astype(np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= nrows):
        raise MXNetError(f"KVStore.row_sparse_pull: row_ids of key {_key_text(key)} must lie in "
                         f"[0, {nrows}), got {ids.min()}..{ids.max()}")
    return np.unique(ids)
