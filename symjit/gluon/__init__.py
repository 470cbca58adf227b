"""symjit.gluon (`mx.gluon`): MXNet 1.x Gluon — Parameters, Blocks with hybridize(), layers,
losses, Trainer and utilities."""
from .parameter import Constant, DeferredInitializationError, Parameter, ParameterDict  # noqa: F401
from .block import Block, HybridBlock, SymbolBlock  # noqa: F401
from . import nn  # noqa: F401
from . import loss  # noqa: F401
from . import utils  # noqa: F401
from .trainer import Trainer  # noqa: F401
from . import data  # noqa: F401
from . import rnn  # noqa: F401
from . import model_zoo  # noqa: F401
from . import contrib  # noqa: F401
