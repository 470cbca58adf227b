"""symjit.kvstore (`mx.kv`): MXNet 1.x KVStores.

`create(name)` makes a store:

=====================================  ========================================================
'local' (and 'local_update_cpu', ...)  one process; values and aggregation on the CPU
'device', 'nccl'                       one process; aggregation where the pushed data lives
'dist_sync', 'dist_sync_device'        MPI workers; each push is summed over all workers, then
                                       applied once, identically on every worker
'dist_async', 'dist_async_device'      MPI workers; pushes are applied as they arrive by a
                                       server thread on rank 0 (see `dist` for staleness)
'horovod'                              MPI workers; `pushpull` (allreduce) and `broadcast` only
=====================================  ========================================================

Distributed types run on MPI through mpi4py (`pip install 'symjit[mpi]'`): start the workers
with `mpiexec -n N python train.py` or `python -m symjit.launch -n N -- python train.py`. A
distributed store created in a plain single process (no launcher) is a 1-worker store: rank 0,
num_workers 1, every operation local (mpi4py is not needed then).
"""
from __future__ import annotations

from ..base import MXNetError
from .base import GradientCompression, KVStoreBase, TestStore  # noqa: F401
from .kvstore import LOCAL_TYPES, KVStore

__all__ = ["create", "KVStore", "KVStoreBase", "TestStore", "DIST_TYPES"]

#: distributed store types (all run on MPI)
DIST_TYPES = ("dist_sync", "dist_async", "dist_sync_device", "dist_async_device", "dist_device_sync",
              "dist_device_async", "dist", "horovod")


def create(name: str = "local") -> KVStoreBase:
    """Create a KVStore of type `name` (see the module docstring for the types)."""
    if not isinstance(name, str):
        raise TypeError("name must be a string")
    name = name.lower()
    if name in KVStoreBase.kv_registry:   # stores registered with KVStoreBase.register first
        return KVStoreBase.kv_registry[name]()
    if name in LOCAL_TYPES:
        return KVStore(name)
    if name in DIST_TYPES:
        from . import dist
        return dist.create(name)
    raise MXNetError(f"Unknown KVStore type {name!r}; expected one of {list(LOCAL_TYPES) + list(DIST_TYPES)}")
