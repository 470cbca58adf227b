"""symjit.gluon.model_zoo (`mx.gluon.model_zoo`): MXNet 1.x's predefined networks.

The architectures are built exactly as MXNet builds them (same blocks, same parameter names),
so parameters saved by MXNet load into them. Pretrained weights are not downloaded: with
`pretrained=True` the `.params` file must already be in `root` (MXNet's cache layout,
`root/NAME-HASH.params`, HASH from MXNet's SHA-1 table, content verified), else MXNetError names
the file and where MXNet publishes it.
"""
from . import vision  # noqa: F401
from . import model_store  # noqa: F401
from .model_store import get_model_file  # noqa: F401
