"""`mx.np.linalg`'s functions that run numpy's (MXNet's fallback_linalg list, less matrix_power and
multi_dot, which `mx.np.linalg` computes with differentiable ops): no gradient."""
from __future__ import annotations

import numpy as _onp

from .fallback import numpy_fallback

__all__ = ["cond", "lstsq", "matrix_rank", "qr"]

cond = numpy_fallback(_onp.linalg.cond, "cond")
lstsq = numpy_fallback(_onp.linalg.lstsq, "lstsq")
matrix_rank = numpy_fallback(_onp.linalg.matrix_rank, "matrix_rank")
qr = numpy_fallback(_onp.linalg.qr, "qr")
