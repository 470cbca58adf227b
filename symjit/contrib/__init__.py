"""symjit.contrib (`mx.contrib`): MXNet 1.x's contributed APIs: `amp` (dynamic loss scaling for
mixed-precision training) and the contrib operator namespaces `nd` / `ndarray`, `sym` / `symbol`."""
from ..ndarray import contrib as ndarray  # noqa: F401
from ..ndarray import contrib as nd  # noqa: F401
from ..symbol import contrib as symbol  # noqa: F401
from ..symbol import contrib as sym  # noqa: F401
from . import amp  # noqa: F401
