"""symjit.gluon.nn: neural network layers (MXNet 1.x `gluon.nn`).

Layer families live in one module each (basic_layers: containers, Dense, BatchNorm, ...);
a new family module adds its `from .module import *` line here.
"""
from ..block import Block, HybridBlock, SymbolBlock  # noqa: F401
from .basic_layers import *  # noqa: F401,F403
from .conv_layers import *  # noqa: F401,F403
from .activations import *  # noqa: F401,F403
