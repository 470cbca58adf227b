"""Distributed KVStores on MPI: 'dist_sync', 'dist_async' (and their '_device' variants), 'horovod'.

Every worker process runs the same program (SPMD) and calls the store's collective methods
(`init`, `push`, `pushpull`, `broadcast`, `barrier`, `set_optimizer` of dist_async) in the same
order. Values of `init` come from rank 0 (MXNet: "only the value supplied by worker with rank 0
is used"); the other workers' values must have the same shapes and dtypes.

dist_sync
    Every worker holds a full copy of the store. `push` sums the pushed values on the worker
    (over its devices), then over all workers (MPI allreduce), then applies the updater (or
    assigns) once per key on every worker's copy. Since all workers apply the same update to the
    same sum, every worker sees identical values after each push; `pull` is a local copy.
    With `set_optimizer` each worker keeps identical optimizer states, so
    `save_optimizer_states` works on every rank.

dist_async
    The values live on a server: a thread of rank 0, which applies each push as soon as it
    arrives (rank 0's own pushes directly). `pull` returns the server's current value.
    Staleness: a worker's pull reflects all of that worker's earlier pushes (its messages to the
    server are handled in order) and whatever pushes of other workers arrived before it; with N
    workers a pull may lack up to N-1 concurrent updates of the others, and no bound holds when a
    worker runs ahead. The optimizer (`set_optimizer`, `_set_updater`) that counts is rank 0's:
    it runs in the server; optimizer states can be saved on rank 0 only. At exit rank 0 keeps
    serving until every worker has closed its store (or the timeout passes).

'_device' variants
    Sum each worker's values where they live (the device of the first pushed value) before the
    values leave the process; otherwise identical.

horovod
    MXNet's Horovod store: `pushpull` is an allreduce (sum) of the values, `broadcast` copies
    rank 0's value; no stored state, no optimizer on the store.

Timeouts and failures are handled by `comm` (env SYMJIT_KV_TIMEOUT): an operation that a peer
never completes raises MXNetError; nothing waits forever.
"""
from __future__ import annotations

import atexit
import threading
import time
from typing import Any

import numpy as np

from ..base import MXNetError
from ..context import cpu
from ..ndarray import NDArray
from . import comm as comm_mod
from .base import KVStoreBase, commit_sparse, group_pairs, key_value_pairs
from .kvstore import KVStore, _key_text

__all__ = ["create", "DistSyncKVStore", "DistAsyncKVStore", "HorovodKVStore"]

_CANONICAL = {"dist": "dist_sync", "dist_device_sync": "dist_sync_device",
              "dist_device_async": "dist_async_device"}


def create(name: str) -> KVStoreBase:
    """A distributed store of type `name` over the process's worker group."""
    kind = _CANONICAL.get(name, name)
    if kind == "horovod":
        return HorovodKVStore(name)
    if kind.startswith("dist_sync"):
        return DistSyncKVStore(name)
    if kind.startswith("dist_async"):
        return DistAsyncKVStore(name)
    raise MXNetError(f"Unknown distributed KVStore type {name!r}")


def _agree(comm, local: Any, what: str) -> None:
    """Check that every worker calls the same collective with the same metadata; MXNetError on
    every worker otherwise (so no worker goes on to a data transfer the others skip)."""
    allmeta = comm.allgather_obj(local, what)
    errors = [(r, m) for r, m in enumerate(allmeta) if isinstance(m, str)]
    if errors:
        r, msg = errors[0]
        raise MXNetError(f"{what}: rank {r} failed: {msg}")
    for r, m in enumerate(allmeta):
        if m != allmeta[0]:
            raise MXNetError(f"{what}: workers disagree: rank 0 has {allmeta[0]}, rank {r} has {m}")


def _meta_of(items) -> list:
    return [(k, tuple(v.shape), v._data.dtype.name) for k, v in items]


class DistSyncKVStore(KVStore):
    """'dist_sync' / 'dist_sync_device': synchronous data-parallel store (see module docstring)."""

    def __init__(self, name: str):
        super().__init__(name)
        self._on_device = "device" in name
        self._comm = comm_mod.get()
        self._wmerge: dict = {}

    @property
    def rank(self) -> int:
        return self._comm.rank

    @property
    def num_workers(self) -> int:
        return self._comm.size

    def _init_values(self, items):
        _agree(self._comm, _meta_of(items), "KVStore.init")
        datas = [np.array(v._data, copy=True, order="C") for _, v in items]
        self._comm.bcast(datas, 0, f"KVStore.init of keys {[k for k, _ in items]}")
        return datas

    def _compress_each(self) -> bool:
        return False  # a dist store quantizes once per worker, after local aggregation

    def _reduce_workers(self, keys, merged):
        comp = self._compression
        sends, recvs = [], []
        out = {}
        for k in keys:
            src = merged[k]
            if comp is not None and comp.active:
                src = comp.quantize(k, src)
            buf = self._wmerge.get(k)
            if buf is None or buf.shape != src.shape or buf.dtype != src.dtype:
                buf = self._wmerge[k] = np.empty(src.shape, src.dtype)
            sends.append(np.ascontiguousarray(src))
            recvs.append(buf)
            out[k] = buf
        if self._comm.size == 1:
            for s, r in zip(sends, recvs):
                r[...] = s
        else:
            self._comm.allreduce(sends, recvs, "sum", f"KVStore.push of keys {keys}")
        return out

    def _barrier(self) -> None:
        self._comm.barrier("KVStore.barrier")


class HorovodKVStore(KVStoreBase):
    """'horovod': allreduce (`pushpull`) and broadcast over the workers; nothing stored."""

    def __init__(self, name: str = "horovod"):
        self._type = name
        self._comm = comm_mod.get()

    @property
    def type(self) -> str:
        return self._type

    @property
    def rank(self) -> int:
        return self._comm.rank

    @property
    def num_workers(self) -> int:
        return self._comm.size

    def _optimizer_capable(self) -> bool:
        return False

    def _unsupported(self, what: str):
        raise MXNetError(f"KVStore.{what} is not supported by the 'horovod' KVStore; use pushpull "
                         "and broadcast (or a 'dist_sync' store)")

    def init(self, key, value):
        self._unsupported("init")

    def push(self, key, value, priority=0):
        self._unsupported("push")

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        self._unsupported("pull")

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        self._unsupported("row_sparse_pull")

    def set_optimizer(self, optimizer):
        self._unsupported("set_optimizer")

    def _set_updater(self, updater):
        self._unsupported("_set_updater")

    set_updater = _set_updater

    def save_optimizer_states(self, fname, dump_optimizer=False):
        self._unsupported("save_optimizer_states")

    def load_optimizer_states(self, fname):
        self._unsupported("load_optimizer_states")

    def set_gradient_compression(self, compression_params):
        self._unsupported("set_gradient_compression")

    def pushpull(self, key, value, out=None, priority: int = 0) -> None:
        """out (or value) = sum over workers and devices of the values of each key."""
        vpairs = key_value_pairs(key, value, "pushpull")
        opairs = vpairs if out is None else key_value_pairs(key, out, "pushpull")
        if len(opairs) != len(vpairs):
            raise MXNetError("KVStore.pushpull: value and out list different numbers of keys")
        for (k, vals), (_, outs) in zip(vpairs, opairs):
            for a in vals + outs:
                if a.shape != vals[0].shape or a._data.dtype != vals[0]._data.dtype:
                    raise MXNetError(f"KVStore.pushpull: key {_key_text(k)}: arrays differ: {vals[0].shape} "
                                     f"{vals[0]._data.dtype.name} vs {a.shape} {a._data.dtype.name}")
        _agree(self._comm, [(k, vals[0].shape, vals[0]._data.dtype.name) for k, vals in vpairs],
               "KVStore.pushpull")
        sums = []
        for _, vals in vpairs:
            acc = np.array(vals[0]._data, copy=True, order="C")
            for v in vals[1:]:
                acc += v._data
            sums.append(acc)
        self._comm.allreduce(sums, sums, "sum", "KVStore.pushpull")
        for (_, outs), s in zip(opairs, sums):
            for o in outs:
                o._data[...] = s

    def broadcast(self, key, value, out, priority: int = 0) -> None:
        """out = rank 0's value of each key."""
        vpairs = key_value_pairs(key, value, "broadcast")
        opairs = key_value_pairs(key, out, "broadcast")
        _agree(self._comm, [(k, vals[0].shape, vals[0]._data.dtype.name) for k, vals in vpairs],
               "KVStore.broadcast")
        datas = [np.array(vals[0]._data, copy=True, order="C") for _, vals in vpairs]
        self._comm.bcast(datas, 0, "KVStore.broadcast")
        for (k, outs), d in zip(opairs, datas):
            for o in outs:
                if o.shape != d.shape:
                    raise MXNetError(f"KVStore.broadcast: output for key {_key_text(k)} has shape "
                                     f"{o.shape}, value has {d.shape}")
                o._data[...] = d

    def _barrier(self) -> None:
        self._comm.barrier("KVStore.barrier")


# ------------------------------------------------------------------------------------------------
# dist_async
# ------------------------------------------------------------------------------------------------

_TAG_REQ, _TAG_DATA, _TAG_REPLY = 11, 12, 13


class _Server:
    """The value store of dist_async, run by a thread on rank 0.

    Requests (on a communicator of their own): ('push', key) followed by the data, ('pull',
    keys) answered with one message per key, ('bye',) when a worker closes its store."""

    def __init__(self, comm, mpi_comm, MPI):
        self.comm = comm
        self.mpi = mpi_comm
        self.MPI = MPI
        self.lock = threading.Lock()
        self.values: dict = {}
        self.updater = None
        self.error: str | None = None
        self.byes: set[int] = set()
        self._stop = False
        self._pending: list = []
        self._thread = None
        if mpi_comm is not None:
            self._thread = threading.Thread(target=self._serve, name="symjit-kv-server", daemon=True)
            self._thread.start()

    def apply(self, key, grad: np.ndarray) -> None:
        with self.lock:
            stored = self.values[key]
            if self.updater is None:
                stored._data[...] = grad
            else:
                self.updater(key, NDArray(grad, stored.context), stored)

    def snapshot(self, key) -> np.ndarray:
        with self.lock:
            return np.array(self.values[key]._data, copy=True)

    def _wait(self, req, what: str):
        deadline = time.monotonic() + self.comm.timeout
        while True:
            done, value = req.test()
            if done:
                return value
            if time.monotonic() > deadline:
                raise MXNetError(f"KVStore server: {what} did not complete within {self.comm.timeout:g} s")
            time.sleep(0.0001)

    def _serve(self) -> None:
        MPI = self.MPI
        status = MPI.Status()
        while not self._stop:
            try:
                msg = self.mpi.improbe(MPI.ANY_SOURCE, _TAG_REQ, status)
                self._pending = [(r, b) for r, b in self._pending if not r.Test()]
                if msg is None:
                    time.sleep(0.0002)
                    continue
                src = status.Get_source()
                header = self._wait(msg.irecv(), f"request from rank {src}")
                self._handle(src, header)
            except Exception as e:  # noqa: BLE001 - reported to rank 0's next store operation
                self.error = f"KVStore server (rank 0) failed: {e}"
                return

    def _handle(self, src: int, header: tuple) -> None:
        op = header[0]
        if op == "push":
            key = header[1]
            with self.lock:
                stored = self.values[key]
                buf = np.empty(stored.shape, stored._data.dtype)
            self._wait(_BufReq(self.mpi.Irecv(buf, src, _TAG_DATA)), f"push of key {key} from rank {src}")
            self.apply(key, buf)
        elif op == "pull":
            for key in header[1]:
                snap = self.snapshot(key)
                self._pending.append((self.mpi.Isend(snap, src, _TAG_REPLY), snap))
        elif op == "bye":
            self.byes.add(src)

    def stop(self, nworkers: int) -> None:
        """Wait (up to the timeout) until every other worker said bye, then stop serving."""
        if self._thread is None:
            return
        deadline = time.monotonic() + self.comm.timeout
        while len(self.byes) < nworkers - 1 and self.error is None and self._thread.is_alive():
            if time.monotonic() > deadline:
                missing = sorted(set(range(1, nworkers)) - self.byes)
                self.error = (f"KVStore server (rank 0): workers {missing} did not close their store "
                              f"within {self.comm.timeout:g} s")
                break
            time.sleep(0.01)
        self._stop = True
        self._thread.join(timeout=5)
        if self.error:
            import sys
            print(f"symjit.kvstore: {self.error}", file=sys.stderr, flush=True)


class _BufReq:
    """Adapter giving a buffer request the (done, value) `test()` of object requests."""

    def __init__(self, req):
        self.req = req

    def test(self):
        return self.req.Test(), None


class DistAsyncKVStore(KVStore):
    """'dist_async' / 'dist_async_device': asynchronous updates on a server thread of rank 0."""

    def __init__(self, name: str):
        super().__init__(name)
        self._on_device = "device" in name
        self._comm = comm_mod.get()
        self._closed = False
        mpi_comm = MPI = None
        if self._comm.size > 1:
            mpi_comm = self._comm.dup()
            MPI = self._comm.MPI
        self._mpi = mpi_comm
        self._server = _Server(self._comm, mpi_comm if self._comm.rank == 0 else None, MPI) \
            if self._comm.rank == 0 else None
        self._meta_table: dict = {}
        atexit.register(self.close)

    @property
    def rank(self) -> int:
        return self._comm.rank

    @property
    def num_workers(self) -> int:
        return self._comm.size

    def _check_server(self) -> None:
        if self._closed:
            raise MXNetError("KVStore: this dist_async store was closed")
        if self._server is not None and self._server.error:
            raise MXNetError(self._server.error)
        self._comm.check()

    def _meta(self, key):
        meta = self._meta_table.get(key)
        if meta is None:
            raise MXNetError(f"KVStore: key {_key_text(key)} has not been initialized (call init first)")
        return meta

    # ---- init --------------------------------------------------------------------------------
    def init(self, key, value) -> None:
        self._check_server()
        pairs = self._pairs(key, value, "init")
        problem = None
        seen = set()
        for k, vals in pairs:
            if k in self._meta_table or k in seen:
                problem = f"duplicate init of key {_key_text(k)}"
            elif len(vals) != 1:
                problem = f"key {_key_text(k)} was given {len(vals)} values; init takes one value per key"
            seen.add(k)
        items = [(k, vals[0]) for k, vals in pairs]
        if problem is not None:
            raise MXNetError(f"KVStore.init: {problem}")
        if self._server is not None:
            with self._server.lock:
                for k, v in items:
                    ctx = v.context if self._on_device else cpu(0)
                    self._server.values[k] = NDArray(np.array(v._data, copy=True, order="C"), ctx)
        try:  # also the barrier that makes the values visible before anyone pulls
            _agree(self._comm, _meta_of(items), "KVStore.init")
        except MXNetError:
            if self._server is not None:
                with self._server.lock:
                    for k, _ in items:
                        self._server.values.pop(k, None)
            raise
        for k, v in items:
            self._meta_table[k] = (tuple(v.shape), v._data.dtype)
            if isinstance(k, str) and k not in self._str_order:
                self._str_order[k] = len(self._str_order)

    # ---- push / pull ---------------------------------------------------------------------------
    def push(self, key, value, priority: int = 0) -> None:
        self._check_server()
        grouped = group_pairs(self._pairs(key, value, "push"))
        keys = self._ordered(grouped)
        for k in keys:
            self._check_arrays("push", k, grouped[k])
        comp = self._compression
        for k in keys:
            merged = self._local_reduce(k, grouped[k])
            if comp is not None and comp.active:
                merged = comp.quantize(k, merged)
            if self._server is not None:
                self._server.apply(k, np.array(merged, copy=True))
            else:
                data = np.array(merged, copy=True, order="C")
                reqs = [self._mpi.isend(("push", k), 0, _TAG_REQ)]
                reqs.append(self._mpi.Isend(data, 0, _TAG_DATA))
                self._comm._wait(reqs, f"KVStore.push of key {_key_text(k)} to the server")

    def _compress_each(self) -> bool:
        return False

    def _merge_buffer(self, key) -> np.ndarray:
        shape, dtype = self._meta(key)
        return np.empty(shape, dtype)

    def _read_into(self, pairs) -> None:
        self._check_server()
        keys = [k for k, _ in pairs]
        if self._server is not None:
            datas = [self._server.snapshot(k) for k in keys]
        else:
            datas = [np.empty(*self._meta(k)) for k in keys]
            reqs = [self._mpi.isend(("pull", keys), 0, _TAG_REQ)]
            reqs += [self._mpi.Irecv(d, 0, _TAG_REPLY) for d in datas]
            self._comm._wait(reqs, f"KVStore.pull of keys {keys} from the server")
        for (_, outs), d in zip(pairs, datas):
            for o in outs:
                o._data[...] = d
            commit_sparse(outs)

    def _read_rows(self, plans, full: dict) -> None:
        holders = []
        for k, _, _ in plans:
            shape, dtype = self._meta(k)
            holders.append((k, [NDArray(np.empty(shape, dtype), cpu(0))]))
        self._read_into(holders)
        for k, arrs in holders:
            full[k] = arrs[0]._data

    # ---- updater / optimizer -----------------------------------------------------------------
    def _set_updater(self, updater) -> None:
        """Set the server's updater (effective on rank 0, whose server applies the pushes)."""
        super()._set_updater(updater)
        if self._server is not None:
            with self._server.lock:
                self._server.updater = updater

    set_updater = _set_updater

    def set_optimizer(self, optimizer) -> None:
        """Rank 0's optimizer runs in the server; collective (returns once it is in place)."""
        super().set_optimizer(optimizer)
        self._comm.barrier("KVStore.set_optimizer")

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        if self._server is None:
            raise MXNetError("KVStore.save_optimizer_states: the optimizer states of a dist_async store "
                             "live in its server; call it on rank 0")
        with self._server.lock:
            super().save_optimizer_states(fname, dump_optimizer)

    def load_optimizer_states(self, fname: str) -> None:
        if self._server is None:
            raise MXNetError("KVStore.load_optimizer_states: the optimizer states of a dist_async store "
                             "live in its server; call it on rank 0")
        with self._server.lock:
            super().load_optimizer_states(fname)

    def _barrier(self) -> None:
        self._check_server()
        self._comm.barrier("KVStore.barrier")

    def close(self) -> None:
        """End this worker's use of the store (at exit): workers tell the server, rank 0 serves
        until all have done so."""
        if self._closed:
            return
        self._closed = True
        if self._comm.size == 1 or getattr(self._comm, "_broken", None):
            return
        if self._server is not None:
            self._server.stop(self._comm.size)
            return
        try:
            self._comm._wait([self._mpi.isend(("bye",), 0, _TAG_REQ)], "closing the KVStore")
        except MXNetError as e:
            import sys
            print(f"symjit.kvstore: {e}", file=sys.stderr, flush=True)
