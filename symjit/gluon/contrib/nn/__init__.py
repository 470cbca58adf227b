"""symjit.gluon.contrib.nn (`mx.gluon.contrib.nn`): MXNet 1.9.1's contributed Gluon layers."""
from .basic_layers import *  # noqa: F401,F403
from .basic_layers import __all__  # noqa: F401
