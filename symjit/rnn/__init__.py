"""symjit.rnn (`mx.rnn`): MXNet 1.x's legacy symbolic RNN API — cells that build Symbol graphs
step by step (`unroll`), bucketed sentence iterators, and RNN checkpoints.
"""
from .rnn_cell import (BaseRNNCell, BidirectionalCell, DropoutCell, FusedRNNCell, GRUCell, LSTMCell,  # noqa: F401
                       ModifierCell, ResidualCell, RNNCell, RNNParams, SequentialRNNCell, ZoneoutCell)
from .io import BucketSentenceIter, encode_sentences  # noqa: F401
from .rnn import do_rnn_checkpoint, load_rnn_checkpoint, save_rnn_checkpoint  # noqa: F401
