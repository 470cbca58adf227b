"""symjit.gluon.contrib (`mx.gluon.contrib`): MXNet 1.x's contributed Gluon layers."""
from . import nn  # noqa: F401
