"""symjit.gluon.model_zoo (`mx.gluon.model_zoo`): MXNet 1.x's predefined networks.

The architectures are built exactly as MXNet builds them (same blocks, same parameter names),
so parameters saved by MXNet load into them. Pretrained weights are not downloaded: with
`pretrained=True` the `.params` file must already be in `root` (MXNet's cache layout,
`root/NAME-HASH.params` or `root/NAME.params`), else MXNetError says where it was looked for.
"""
from . import vision  # noqa: F401
from .model_store import get_model_file  # noqa: F401
