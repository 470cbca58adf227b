"""Device contexts: `cpu(i)` and `gpu(i)` as MXNet 1.x spells them.

Contexts are device labels. `cpu(0)` and `cpu(1)` are distinct labels over the
same host memory (MXNet semantics, used by KVStore and multi-device Gluon);
`gpu(i)` needs CuPy and a visible GPU, otherwise using it raises MXNetError.
"""
from __future__ import annotations

import threading

from .base import MXNetError

__all__ = ["Context", "cpu", "gpu", "cpu_pinned", "current_context", "num_gpus", "gpu_available",
           "gpu_memory_info"]


class Context:
    """A device label: device_type in {'cpu', 'gpu', 'cpu_pinned', 'cpu_shared'} and an id."""

    devtype2str = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}
    devstr2type = {v: k for k, v in devtype2str.items()}
    _default = threading.local()

    def __init__(self, device_type, device_id: int = 0):
        if isinstance(device_type, Context):
            self.device_typeid = device_type.device_typeid
            self.device_id = device_type.device_id
        else:
            if device_type not in self.devstr2type:
                raise MXNetError(f"unknown device type {device_type!r}; expected one of "
                                 f"{sorted(self.devstr2type)}")
            self.device_typeid = self.devstr2type[device_type]
            self.device_id = int(device_id)
        self._old_ctx = None

    @property
    def device_type(self) -> str:
        return self.devtype2str[self.device_typeid]

    def __hash__(self):
        return hash((self.device_typeid, self.device_id))

    def __eq__(self, other):
        return (isinstance(other, Context) and self.device_typeid == other.device_typeid
                and self.device_id == other.device_id)

    def __str__(self):
        return f"{self.device_type}({self.device_id})"

    __repr__ = __str__

    def __enter__(self):
        self._old_ctx = current_context()
        Context._default.value = self
        return self

    def __exit__(self, *exc):
        Context._default.value = self._old_ctx

    def empty_cache(self):
        """Release cached device memory (a no-op on CPU, where numpy owns memory)."""


def cpu(device_id: int = 0) -> Context:
    return Context("cpu", device_id)


def cpu_pinned(device_id: int = 0) -> Context:
    return Context("cpu_pinned", device_id)


def gpu(device_id: int = 0) -> Context:
    """A GPU context label. Creating it always works (as in MXNet); allocating on it
    needs CuPy and a GPU."""
    return Context("gpu", device_id)


def num_gpus() -> int:
    """Number of visible CUDA GPUs (0 when CuPy or a GPU is missing)."""
    try:
        import cupy  # noqa: F401
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


def gpu_memory_info(device_id: int = 0) -> tuple:
    """(free, total) bytes of memory on GPU `device_id`; an MXNetError when that GPU is absent."""
    from .base import MXNetError
    if not 0 <= device_id < num_gpus():
        raise MXNetError(f"gpu_memory_info: no GPU {device_id} (visible GPUs: {num_gpus()})")
    import cupy
    with cupy.cuda.Device(device_id):
        free, total = cupy.cuda.runtime.memGetInfo()
    return int(free), int(total)


def gpu_available(ctx: Context) -> bool:
    return ctx.device_type == "gpu" and ctx.device_id < num_gpus()


def current_context() -> Context:
    ctx = getattr(Context._default, "value", None)
    return ctx if ctx is not None else Context("cpu", 0)
