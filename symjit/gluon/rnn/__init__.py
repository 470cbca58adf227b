"""symjit.gluon.rnn (`mx.gluon.rnn`): recurrent cells and multi-layer RNN/LSTM/GRU layers."""
from .rnn_cell import *  # noqa: F401,F403
from .rnn_layer import *  # noqa: F401,F403
