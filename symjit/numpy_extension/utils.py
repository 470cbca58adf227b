"""`npx.save` / `npx.load`: MXNet's NDArray file format with numpy shape semantics (the format
MXNet 1.9.1 writes under `npx.set_np()`: zero-size and 0-d arrays round-trip); and
`get_cuda_compute_capability`."""
from __future__ import annotations

from ..ndarray import NDArray
from ..ndarray import serialization as _ser
from ..util import np_shape
from ._op import as_np

__all__ = ["save", "load", "get_cuda_compute_capability"]


def save(file, arr):
    """Save an array, a list of arrays or a dict str -> array to `file`."""
    items = arr.values() if isinstance(arr, dict) else arr if isinstance(arr, (list, tuple)) else [arr]
    for a in items:
        if not isinstance(a, NDArray):
            raise TypeError(f"npx.save: only accepts mx.np.ndarray, a list or a dict of them, got "
                            f"{type(a).__name__}")
    with np_shape(True):
        _ser.save(file, arr)


def load(file):
    """The arrays saved in `file`: a list, or a dict when they were saved with names."""
    with np_shape(True):
        loaded = _ser.load(file)
    if isinstance(loaded, dict):
        return {k: as_np(v) for k, v in loaded.items()}
    return as_np(loaded)


def get_cuda_compute_capability(ctx) -> int:
    """The compute capability of the GPU of `ctx` as MXNet gives it (major * 10 + minor, e.g.
    80); ValueError for a non-GPU context, MXNetError when that GPU is absent."""
    from ..base import MXNetError
    from ..context import gpu_available
    if getattr(ctx, "device_type", None) != "gpu":
        raise ValueError(f"Expecting a gpu context to get cuda compute capability, while received ctx {ctx}")
    if not gpu_available(ctx):
        raise MXNetError(f"get_cuda_compute_capability: {ctx} is not a visible GPU")
    import cupy
    return int(cupy.cuda.Device(ctx.device_id).compute_capability)
