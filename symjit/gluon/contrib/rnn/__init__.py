"""symjit.gluon.contrib.rnn (`mx.gluon.contrib.rnn`): MXNet 1.9.1's contributed recurrent cells."""
from .conv_rnn_cell import *  # noqa: F401,F403
from .rnn_cell import *  # noqa: F401,F403
from . import conv_rnn_cell, rnn_cell

__all__ = conv_rnn_cell.__all__ + rnn_cell.__all__
