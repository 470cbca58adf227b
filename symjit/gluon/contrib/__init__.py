"""symjit.gluon.contrib (`mx.gluon.contrib`): MXNet 1.x's contributed Gluon layers, recurrent
cells and the Estimator training loop."""
from . import nn  # noqa: F401
from . import rnn  # noqa: F401
from . import estimator  # noqa: F401
