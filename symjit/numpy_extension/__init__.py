"""`mxnet.numpy_extension` (`mx.npx`): MXNet 1.9.1's operators beyond NumPy, on `mx.np` arrays.

- the switches: `set_np()` turns on NumPy shape and array semantics (Gluon blocks then hold and
  return `mx.np.ndarray`s and trace with `F.np` / `F.npx`), `reset_np()` turns them off,
  `is_np_array()`, `is_np_shape()`;
- the operators (activation, convolution, fully_connected, pooling, batch_norm, softmax, pick,
  reshape with npx's special codes, nonzero, ...; `names.NPX_OPS` says which registered
  operator each runs), recorded by autograd and hybridized into the same graphs as the legacy
  operators;
- `random` (bernoulli, normal_n, uniform_n, seed), `image`, `save` / `load`, contexts and
  `waitall`.
"""
from __future__ import annotations

from ..context import Context, cpu, cpu_pinned, current_context, gpu, gpu_memory_info, num_gpus  # noqa: F401
from ..ndarray import waitall  # noqa: F401
from ..util import is_np_array, is_np_shape, reset_np, set_np  # noqa: F401
from . import image, random  # noqa: F401
from ._op import *  # noqa: F401,F403
from ._op import __all__ as _op_all
from .utils import get_cuda_compute_capability, load, save  # noqa: F401

__all__ = ["Context", "cpu", "cpu_pinned", "current_context", "gpu", "gpu_memory_info", "num_gpus", "waitall",
           "is_np_array", "is_np_shape", "reset_np", "set_np", "image", "random", "load", "save",
           "get_cuda_compute_capability"] + _op_all
