"""symjit.contrib (`mx.contrib`): MXNet 1.x's contrib namespaces, `mx.contrib.ndarray` (`nd`) and
`mx.contrib.symbol` (`sym`), the same functions as `mx.nd.contrib` and `mx.sym.contrib`."""
from __future__ import annotations

from .ndarray import contrib as ndarray  # noqa: F401
from .ndarray import contrib as nd  # noqa: F401
from .symbol import contrib as symbol  # noqa: F401
from .symbol import contrib as sym  # noqa: F401
