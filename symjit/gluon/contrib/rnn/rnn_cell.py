"""MXNet 1.9.1's contributed recurrent cells: VariationalDropoutCell and LSTMPCell."""
from __future__ import annotations

from ....base import MXNetError
from ....ndarray.ndarray import NDArray
from ...rnn.rnn_cell import (BidirectionalCell, HybridRecurrentCell, ModifierCell, SequentialRNNCell, _as_list,
                             _format_sequence, _get_begin_state, _mask_steps, lstm_step, tensor_types)

__all__ = ["VariationalDropoutCell", "LSTMPCell", "dynamic_unroll"]


class VariationalDropoutCell(ModifierCell):
    """Variational dropout (Gal & Ghahramani, 2016) around `base_cell`: one dropout mask per
    sequence, drawn at the first step after `reset()` (each `unroll` resets) and reused at every
    step (also when hybridized: the masks are applied outside the compiled base cell), for the inputs (`drop_inputs`), the first state h (`drop_states`) and the outputs
    (`drop_outputs`). Masks are drawn in training only (Dropout's rule), so inference is the base
    cell. Without state dropout `unroll` drops whole sequences at once (masks shared along time)."""

    def __init__(self, base_cell, drop_inputs=0., drop_states=0., drop_outputs=0.):
        if drop_states and isinstance(base_cell, BidirectionalCell):
            raise MXNetError("BidirectionalCell doesn't support variational state dropout. "
                             "Please add VariationalDropoutCell to the cells underneath instead.")
        if drop_states and isinstance(base_cell, SequentialRNNCell) and \
                any(isinstance(c, BidirectionalCell) for c in base_cell._children.values()):
            raise MXNetError("Bidirectional SequentialRNNCell doesn't support variational state dropout. "
                             "Please add VariationalDropoutCell to the cells underneath instead.")
        super().__init__(base_cell)
        self.drop_inputs = drop_inputs
        self.drop_states = drop_states
        self.drop_outputs = drop_outputs
        self.drop_inputs_mask = None
        self.drop_states_mask = None
        self.drop_outputs_mask = None

    def _alias(self):
        return "vardrop"

    def reset(self):
        super().reset()
        self.drop_inputs_mask = None
        self.drop_states_mask = None
        self.drop_outputs_mask = None

    @staticmethod
    def _mask(F, current, like, p):
        """The sequence's mask for `like` (drawn now when there is none of this kind of array:
        a traced step never reuses an eager mask, nor the other way round)."""
        if current is not None and isinstance(current, NDArray) == isinstance(like, NDArray):
            return current
        return F.Dropout(F.ones_like(like), p=p)

    def forward(self, inputs, states):
        """On NDArrays the masks are applied eagerly, even when hybridized (the base cell still
        runs compiled): a compiled step would draw new masks at every call."""
        if isinstance(inputs, NDArray):
            from .... import ndarray
            self._counter += 1
            return self.hybrid_forward(ndarray, inputs, states)
        return super().forward(inputs, states)

    def hybrid_forward(self, F, inputs, states):
        if self.drop_states:
            self.drop_states_mask = self._mask(F, self.drop_states_mask, states[0], self.drop_states)
            states = list(states)
            states[0] = states[0] * self.drop_states_mask       # h is always the first state
        if self.drop_inputs:
            self.drop_inputs_mask = self._mask(F, self.drop_inputs_mask, inputs, self.drop_inputs)
            inputs = inputs * self.drop_inputs_mask
        next_output, next_states = self.base_cell(inputs, states)
        if self.drop_outputs:
            self.drop_outputs_mask = self._mask(F, self.drop_outputs_mask, next_output, self.drop_outputs)
            next_output = next_output * self.drop_outputs_mask
        return next_output, next_states

    def __repr__(self):
        return f"{self.__class__.__name__}(p_out = {self.drop_outputs}, p_state = {self.drop_states})"

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None, valid_length=None):
        if self.drop_states:
            return super().unroll(length, inputs, begin_state, layout, merge_outputs, valid_length=valid_length)
        self.reset()
        inputs, axis, F, batch_size = _format_sequence(length, inputs, layout, True)
        states = _get_begin_state(self, F, begin_state, inputs, batch_size)
        if self.drop_inputs:
            inputs = F.Dropout(inputs, p=self.drop_inputs, axes=(axis,))
        outputs, states = self.base_cell.unroll(length, inputs, states, layout, merge_outputs=True,
                                                valid_length=valid_length)
        if self.drop_outputs:
            outputs = F.Dropout(outputs, p=self.drop_outputs, axes=(axis,))
        merge_outputs = isinstance(outputs, tensor_types) if merge_outputs is None else merge_outputs
        outputs, _, _, _ = _format_sequence(length, outputs, layout, merge_outputs)
        if valid_length is not None:
            if merge_outputs:
                steps, _, _, _ = _format_sequence(length, outputs, layout, False)
                outputs = F.stack(*_mask_steps(F, steps, valid_length), axis=axis)
            else:
                outputs = _mask_steps(F, outputs, valid_length)
        return outputs, states


class LSTMPCell(HybridRecurrentCell):
    """LSTM with a projected recurrent state (Sak et al., 2014): the LSTM's hidden vector h
    (hidden_size) is projected by h2r_weight (no bias) to r (projection_size), which is the
    output and the recurrent state. States [r, c]; parameter prefix 'lstmp'."""

    def __init__(self, hidden_size, projection_size, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 h2r_weight_initializer=None, i2h_bias_initializer="zeros", h2h_bias_initializer="zeros",
                 input_size=0, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self._hidden_size = hidden_size
        self._input_size = input_size
        self._projection_size = projection_size
        self.i2h_weight = self.params.get("i2h_weight", shape=(4 * hidden_size, input_size),
                                          init=i2h_weight_initializer, allow_deferred_init=True)
        self.h2h_weight = self.params.get("h2h_weight", shape=(4 * hidden_size, projection_size),
                                          init=h2h_weight_initializer, allow_deferred_init=True)
        self.h2r_weight = self.params.get("h2r_weight", shape=(projection_size, hidden_size),
                                          init=h2r_weight_initializer, allow_deferred_init=True)
        self.i2h_bias = self.params.get("i2h_bias", shape=(4 * hidden_size,), init=i2h_bias_initializer,
                                        allow_deferred_init=True)
        self.h2h_bias = self.params.get("h2h_bias", shape=(4 * hidden_size,), init=h2h_bias_initializer,
                                        allow_deferred_init=True)

    def state_info(self, batch_size=0):
        return [{"shape": (batch_size, self._projection_size), "__layout__": "NC"},
                {"shape": (batch_size, self._hidden_size), "__layout__": "NC"}]

    def _alias(self):
        return "lstmp"

    def __repr__(self):
        shape, proj = self.i2h_weight.shape, self.h2r_weight.shape
        return f"{self.__class__.__name__}({shape[1] if shape[1] else None} -> {shape[0]} -> {proj[0]})"

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, h2r_weight, i2h_bias, h2h_bias):
        prefix = "t%d_" % self._counter
        hidden, next_c = lstm_step(F, inputs, states[0], states[1], i2h_weight, h2h_weight, i2h_bias, h2h_bias,
                                   self._hidden_size, prefix=prefix)
        next_r = F.FullyConnected(data=hidden, num_hidden=self._projection_size, weight=h2r_weight, no_bias=True,
                                  name=prefix + "out")
        return next_r, [next_r, next_c]


def dynamic_unroll(cell, inputs, begin_state, drop_inputs=0, drop_outputs=0, layout="TNC", valid_length=None):
    """Unroll `cell` over the time axis of `inputs` with one `contrib.foreach` loop (a single
    loop node when traced, whatever the sequence length). Returns (outputs, states) with the
    outputs time-major (T, N, C). `drop_inputs` / `drop_outputs`: dropout with one mask along
    time; `valid_length` (N,): each sample's states stop changing after its last valid step and
    its outputs past it are zero."""
    inputs, axis, F, _ = _format_sequence(0, inputs, layout, True)
    if axis != 0:
        axes = list(range(len(layout)))
        axes[0], axes[axis] = axes[axis], axes[0]
        inputs = F.transpose(inputs, axes=axes)
    states = begin_state
    if drop_inputs:
        inputs = F.Dropout(inputs, p=drop_inputs, axes=(0,))
    if valid_length is None:
        def loop_body(step, states):
            return cell(step, states)
    else:
        states = list(_as_list(states)) + [F.zeros((1,))]

        def loop_body(step, states):
            cell_states, iter_no = states[:-1], states[-1]
            out, new_states = cell(step, cell_states)
            new_states = list(_as_list(new_states))
            alive = F.broadcast_greater(valid_length, iter_no)
            for i, old in enumerate(cell_states):
                new_states[i] = F.where(alive, new_states[i], old)
            return out, new_states + [iter_no + 1]
    outputs, states = F.contrib.foreach(loop_body, inputs, states)
    if drop_outputs:
        outputs = F.Dropout(outputs, p=drop_outputs, axes=(0,))
    if valid_length is None:
        return outputs, states
    outputs = F.SequenceMask(outputs, sequence_length=valid_length, use_sequence_length=True, axis=0)
    return outputs, states[:-1]
