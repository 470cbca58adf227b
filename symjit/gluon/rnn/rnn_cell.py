"""Recurrent cells (MXNet 1.x `gluon.rnn.rnn_cell`): one time step of RNN/LSTM/GRU, and
`unroll` over a sequence.

Each cell's step is written with registered ops (FullyConnected, SliceChannel, elementwise
math), so gradients, hybridization and export need nothing RNN-specific. Gate layouts follow
MXNet (and cuDNN): LSTM rows of i2h/h2h are [input, forget, cell, output]; GRU rows are
[reset, update, new] with n = act(i2h_n + r * h2h_n) and h' = (1 - z) * n + z * h.
"""
from __future__ import annotations

from ... import ndarray, symbol
from ...base import MXNetError
from ...ndarray.ndarray import NDArray
from ...ops import get_op
from ...symbol.symbol import Symbol
from ..block import Block, HybridBlock
from ..parameter import _indent

#: gates per cell type, as the fused RNN op defines them
_GATES = get_op("RNN").gates

__all__ = ["RecurrentCell", "HybridRecurrentCell", "RNNCell", "LSTMCell", "GRUCell",
           "SequentialRNNCell", "HybridSequentialRNNCell", "DropoutCell", "ResidualCell",
           "BidirectionalCell", "ModifierCell", "ZoneoutCell"]

tensor_types = (Symbol, NDArray)


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def split_steps(F, x, n: int, axis: int) -> list:
    """`x` split into `n` slices along `axis`, the axis squeezed; always a list."""
    parts = F.split(x, axis=axis, num_outputs=n, squeeze_axis=1)
    if isinstance(parts, Symbol):
        return [parts] if n == 1 else [parts[i] for i in range(n)]
    return _as_list(parts)


def _format_sequence(length, inputs, layout, merge, in_layout=None):
    """(inputs as a list of steps or one merged tensor, time axis, F, batch size); as MXNet."""
    if inputs is None:
        raise ValueError("unroll(inputs=None) has been deprecated. Please create input variables "
                         "outside unroll.")
    axis = layout.find("T")
    batch_axis = layout.find("N")
    batch_size = 0
    in_axis = in_layout.find("T") if in_layout is not None else axis
    if isinstance(inputs, Symbol):
        F = symbol
        if merge is False:
            if len(inputs.list_outputs()) != 1:
                raise ValueError("unroll doesn't allow grouped symbol as input. Please convert to "
                                 "list with list(inputs) first or let unroll handle splitting.")
            inputs = split_steps(symbol, inputs, length, in_axis)
    elif isinstance(inputs, NDArray):
        F = ndarray
        batch_size = inputs.shape[batch_axis]
        if merge is False:
            if length is not None and length != inputs.shape[in_axis]:
                raise ValueError(f"unroll: length {length} does not match the input's time axis "
                                 f"({inputs.shape[in_axis]})")
            inputs = split_steps(ndarray, inputs, inputs.shape[in_axis], in_axis)
    else:
        if length is not None and len(inputs) != length:
            raise ValueError(f"unroll: length {length} does not match the {len(inputs)} inputs")
        if isinstance(inputs[0], Symbol):
            F = symbol
        else:
            F = ndarray
            batch_size = inputs[0].shape[batch_axis]
        if merge is True:
            inputs = F.stack(*inputs, axis=axis)
            in_axis = axis
    if isinstance(inputs, tensor_types) and axis != in_axis:
        inputs = F.swapaxes(inputs, dim1=axis, dim2=in_axis)
    return inputs, axis, F, batch_size


def _get_begin_state(cell, F, begin_state, inputs, batch_size):
    if begin_state is None:
        if F is ndarray:
            ctx = inputs.context if isinstance(inputs, tensor_types) else inputs[0].context
            begin_state = cell.begin_state(func=F.zeros, batch_size=batch_size, ctx=ctx)
        else:
            begin_state = cell.begin_state(func=F.zeros, batch_size=batch_size)
    return begin_state


def _mask_steps(F, outputs, valid_length):
    """Zero each step's output where the step index >= valid_length (per sample)."""
    masked = []
    for i, out in enumerate(outputs):
        keep = F.expand_dims(F._greater_scalar(valid_length, scalar=float(i)), axis=1)
        masked.append(F.broadcast_mul(out, F.cast(keep, "float32") if F is symbol else keep.astype(out.dtype)))
    return masked


def _last_valid(F, steps, valid_length):
    """The element of `steps` at index valid_length - 1, per sample (SequenceLast)."""
    total = None
    for i, s in enumerate(steps):
        sel = F.expand_dims(F._equal_scalar(valid_length, scalar=float(i + 1)), axis=1)
        term = F.broadcast_mul(s, F.cast(sel, "float32") if F is symbol else sel.astype(s.dtype))
        total = term if total is None else total + term
    return total


def _cells_state_info(cells, batch_size):
    return sum([c.state_info(batch_size) for c in cells], [])


def _cells_begin_state(cells, **kwargs):
    return sum([c.begin_state(**kwargs) for c in cells], [])


def activation(F, x, act, **kwargs):
    """Apply `act`: a name ('tanh', 'relu', 'sigmoid', 'softsign', or any Activation type), a
    LeakyReLU block, or a callable."""
    from ..nn.activations import LeakyReLU
    func = {"tanh": F.tanh, "relu": F.relu, "sigmoid": F.sigmoid, "softsign": F.softsign}.get(act) \
        if isinstance(act, str) else None
    if func:
        return func(x, **kwargs)
    if isinstance(act, str):
        return F.Activation(x, act_type=act, **kwargs)
    if isinstance(act, LeakyReLU):
        return F.LeakyReLU(x, act_type="leaky", slope=act._alpha, **kwargs)
    return act(x, **kwargs)


class RecurrentCell(Block):
    """Abstract recurrent cell: `cell(inputs, states) -> (output, new_states)` for one step."""

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self._modified = False
        self.reset()

    def __repr__(self):
        s = "{name}({mapping}"
        if hasattr(self, "_activation"):
            s += ", {_activation}"
        s += ")"
        shape = self.i2h_weight.shape
        mapping = "{0} -> {1}".format(shape[1] if shape[1] else None, shape[0])
        return s.format(name=self.__class__.__name__, mapping=mapping, **self.__dict__)

    def reset(self):
        """Reset the step counters before unrolling a new sequence."""
        self._init_counter = -1
        self._counter = -1
        for cell in self._children.values():
            cell.reset()

    def state_info(self, batch_size=0):
        """Shape and layout of each state tensor."""
        raise NotImplementedError

    @property
    def _curr_prefix(self):
        return "%st%d_" % (self.prefix, self._counter)

    def begin_state(self, batch_size=0, func=ndarray.zeros, **kwargs):
        """Initial states made by `func(name=..., shape=..., **kwargs)` (zeros by default)."""
        if self._modified:
            raise MXNetError("After applying modifier cells (e.g. ZoneoutCell) the base cell "
                             "cannot be called directly. Call the modifier cell instead.")
        states = []
        for info in self.state_info(batch_size):
            self._init_counter += 1
            info = dict(info) if info is not None else {}
            info.update(kwargs)
            info.pop("__layout__", None)
            states.append(func(name="%sbegin_state_%d" % (self._prefix, self._init_counter), **info))
        return states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        """Run `length` steps over `inputs` (a (N, T, C)/(T, N, C) tensor or a list of steps).

        Returns (outputs, last states); outputs is one merged tensor when merge_outputs is True
        (or the inputs were one tensor and merge_outputs is None), else a list. With
        `valid_length` (N,), outputs past each sample's length are zero and the states are
        those of its last valid step."""
        self.reset()
        inputs, axis, F, batch_size = _format_sequence(length, inputs, layout, False)
        begin_state = _get_begin_state(self, F, begin_state, inputs, batch_size)
        states = begin_state
        outputs = []
        all_states = []
        for i in range(length):
            output, states = self(inputs[i], states)
            outputs.append(output)
            if valid_length is not None:
                all_states.append(states)
        if valid_length is not None:
            states = [_last_valid(F, list(ele), valid_length) for ele in zip(*all_states)]
            outputs = _mask_steps(F, outputs, valid_length)
        outputs, _, _, _ = _format_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def forward(self, inputs, states):
        self._counter += 1
        return super().forward(inputs, states)


class HybridRecurrentCell(RecurrentCell, HybridBlock):
    """A recurrent cell whose step is a `hybrid_forward`."""

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)

    def hybrid_forward(self, F, x, *args, **kwargs):
        raise NotImplementedError


def rnn_step(F, x, h, i2h_weight, h2h_weight, i2h_bias, h2h_bias, hidden, act, prefix=""):
    """Elman step: act(W_i x + b_i + W_h h + b_h)."""
    i2h = F.FullyConnected(data=x, weight=i2h_weight, bias=i2h_bias, num_hidden=hidden,
                           name=prefix + "i2h")
    h2h = F.FullyConnected(data=h, weight=h2h_weight, bias=h2h_bias, num_hidden=hidden,
                           name=prefix + "h2h")
    return activation(F, F.elemwise_add(i2h, h2h, name=prefix + "plus0"), act, name=prefix + "out")


def lstm_step(F, x, h, c, i2h_weight, h2h_weight, i2h_bias, h2h_bias, hidden, act="tanh",
              recurrent_act="sigmoid", prefix="", clip_state=None):
    """LSTM step with gates [i, f, c, o]: returns (h', c'); `clip_state(F, c')`, when given,
    transforms the new cell state before h' reads it (LSTM layers' state clipping)."""
    i2h = F.FullyConnected(data=x, weight=i2h_weight, bias=i2h_bias, num_hidden=hidden * 4,
                           name=prefix + "i2h")
    h2h = F.FullyConnected(data=h, weight=h2h_weight, bias=h2h_bias, num_hidden=hidden * 4,
                           name=prefix + "h2h")
    gates = F.elemwise_add(i2h, h2h, name=prefix + "plus0")
    sl = F.SliceChannel(gates, num_outputs=4, name=prefix + "slice")
    in_gate = activation(F, sl[0], recurrent_act, name=prefix + "i")
    forget_gate = activation(F, sl[1], recurrent_act, name=prefix + "f")
    in_transform = activation(F, sl[2], act, name=prefix + "c")
    out_gate = activation(F, sl[3], recurrent_act, name=prefix + "o")
    next_c = F.elemwise_add(F.elemwise_mul(forget_gate, c, name=prefix + "mul0"),
                            F.elemwise_mul(in_gate, in_transform, name=prefix + "mul1"),
                            name=prefix + "state")
    if clip_state is not None:
        next_c = clip_state(F, next_c)
    next_h = F.elemwise_mul(out_gate, F.Activation(next_c, act_type=act, name=prefix + "activation0"),
                            name=prefix + "out")
    return next_h, next_c


def gru_step(F, x, h, i2h_weight, h2h_weight, i2h_bias, h2h_bias, hidden, act="tanh",
             recurrent_act="sigmoid", prefix=""):
    """GRU step with gates [r, z, n]: n = act(i2h_n + r * h2h_n); h' = (1 - z) * n + z * h."""
    i2h = F.FullyConnected(data=x, weight=i2h_weight, bias=i2h_bias, num_hidden=hidden * 3,
                           name=prefix + "i2h")
    h2h = F.FullyConnected(data=h, weight=h2h_weight, bias=h2h_bias, num_hidden=hidden * 3,
                           name=prefix + "h2h")
    i2h_s = F.SliceChannel(i2h, num_outputs=3, name=prefix + "i2h_slice")
    h2h_s = F.SliceChannel(h2h, num_outputs=3, name=prefix + "h2h_slice")
    i2h_r, i2h_z, i2h_n = i2h_s[0], i2h_s[1], i2h_s[2]
    h2h_r, h2h_z, h2h_n = h2h_s[0], h2h_s[1], h2h_s[2]
    reset_gate = activation(F, F.elemwise_add(i2h_r, h2h_r, name=prefix + "plus0"), recurrent_act,
                            name=prefix + "r_act")
    update_gate = activation(F, F.elemwise_add(i2h_z, h2h_z, name=prefix + "plus1"), recurrent_act,
                             name=prefix + "z_act")
    next_h_tmp = activation(F, F.elemwise_add(i2h_n, F.elemwise_mul(reset_gate, h2h_n,
                                                                    name=prefix + "mul0"),
                                              name=prefix + "plus2"), act, name=prefix + "h_act")
    ones = F.ones_like(update_gate, name=prefix + "ones_like0")
    return F.elemwise_add(F.elemwise_mul(ones - update_gate, next_h_tmp, name=prefix + "mul1"),
                          F.elemwise_mul(update_gate, h, name=prefix + "mul20"), name=prefix + "out")


class _GatedCell(HybridRecurrentCell):
    """Shared parameters of RNN/LSTM/GRU cells: i2h/h2h weights (gates*hidden rows) and biases."""

    _gates = _GATES["rnn_tanh"]

    def __init__(self, hidden_size, i2h_weight_initializer, h2h_weight_initializer,
                 i2h_bias_initializer, h2h_bias_initializer, input_size, prefix, params):
        super().__init__(prefix=prefix, params=params)
        self._hidden_size = hidden_size
        self._input_size = input_size
        ng = self._gates * hidden_size
        self.i2h_weight = self.params.get("i2h_weight", shape=(ng, input_size),
                                          init=i2h_weight_initializer, allow_deferred_init=True)
        self.h2h_weight = self.params.get("h2h_weight", shape=(ng, hidden_size),
                                          init=h2h_weight_initializer, allow_deferred_init=True)
        self.i2h_bias = self.params.get("i2h_bias", shape=(ng,), init=i2h_bias_initializer,
                                        allow_deferred_init=True)
        self.h2h_bias = self.params.get("h2h_bias", shape=(ng,), init=h2h_bias_initializer,
                                        allow_deferred_init=True)

    def state_info(self, batch_size=0):
        return [{"shape": (batch_size, self._hidden_size), "__layout__": "NC"}]


class RNNCell(_GatedCell):
    """Elman cell: h' = activation(W_i x + b_i + W_h h + b_h); parameter prefix 'rnn'."""

    _gates = _GATES["rnn_tanh"]

    def __init__(self, hidden_size, activation="tanh", i2h_weight_initializer=None,
                 h2h_weight_initializer=None, i2h_bias_initializer="zeros",
                 h2h_bias_initializer="zeros", input_size=0, prefix=None, params=None):
        super().__init__(hidden_size, i2h_weight_initializer, h2h_weight_initializer,
                         i2h_bias_initializer, h2h_bias_initializer, input_size, prefix, params)
        self._activation = activation

    def _alias(self):
        return "rnn"

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        out = rnn_step(F, inputs, states[0], i2h_weight, h2h_weight, i2h_bias, h2h_bias,
                       self._hidden_size, self._activation, prefix="t%d_" % self._counter)
        return out, [out]


class LSTMCell(_GatedCell):
    """LSTM cell (gates i, f, c, o); states [h, c]; parameter prefix 'lstm'."""

    _gates = _GATES["lstm"]

    def __init__(self, hidden_size, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros", input_size=0,
                 prefix=None, params=None, activation="tanh", recurrent_activation="sigmoid"):
        super().__init__(hidden_size, i2h_weight_initializer, h2h_weight_initializer,
                         i2h_bias_initializer, h2h_bias_initializer, input_size, prefix, params)
        self._activation = activation
        self._recurrent_activation = recurrent_activation

    def state_info(self, batch_size=0):
        return [{"shape": (batch_size, self._hidden_size), "__layout__": "NC"},
                {"shape": (batch_size, self._hidden_size), "__layout__": "NC"}]

    def _alias(self):
        return "lstm"

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        h, c = lstm_step(F, inputs, states[0], states[1], i2h_weight, h2h_weight, i2h_bias, h2h_bias,
                         self._hidden_size, self._activation, self._recurrent_activation,
                         prefix="t%d_" % self._counter)
        return h, [h, c]


class GRUCell(_GatedCell):
    """GRU cell (gates r, z, n as MXNet/cuDNN); parameter prefix 'gru'."""

    _gates = _GATES["gru"]

    def __init__(self, hidden_size, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros", input_size=0,
                 prefix=None, params=None, activation="tanh", recurrent_activation="sigmoid"):
        super().__init__(hidden_size, i2h_weight_initializer, h2h_weight_initializer,
                         i2h_bias_initializer, h2h_bias_initializer, input_size, prefix, params)
        self._activation = activation
        self._recurrent_activation = recurrent_activation

    def _alias(self):
        return "gru"

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        h = gru_step(F, inputs, states[0], i2h_weight, h2h_weight, i2h_bias, h2h_bias,
                     self._hidden_size, self._activation, self._recurrent_activation,
                     prefix="t%d_" % self._counter)
        return h, [h]


class SequentialRNNCell(RecurrentCell):
    """Stacks cells: each step feeds a cell's output to the next; states are concatenated."""

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)

    def __repr__(self):
        modstr = "\n".join("({i}): {m}".format(i=i, m=_indent(m.__repr__(), 2))
                           for i, m in self._children.items())
        return f"{self.__class__.__name__}(\n{modstr}\n)"

    def add(self, cell):
        """Append a cell."""
        self.register_child(cell)

    def state_info(self, batch_size=0):
        return _cells_state_info(self._children.values(), batch_size)

    def begin_state(self, **kwargs):
        return _cells_begin_state(self._children.values(), **kwargs)

    def __call__(self, inputs, states):
        self._counter += 1
        next_states = []
        p = 0
        for cell in self._children.values():
            if isinstance(cell, BidirectionalCell):
                raise MXNetError("BidirectionalCell cannot be stepped; use unroll")
            n = len(cell.state_info())
            state = states[p:p + n]
            p += n
            inputs, state = cell(inputs, state)
            next_states.append(state)
        return inputs, sum(next_states, [])

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        self.reset()
        inputs, _, F, batch_size = _format_sequence(length, inputs, layout, None)
        num_cells = len(self._children)
        begin_state = _get_begin_state(self, F, begin_state, inputs, batch_size)
        p = 0
        next_states = []
        for i, cell in enumerate(self._children.values()):
            n = len(cell.state_info())
            states = begin_state[p:p + n]
            p += n
            inputs, states = cell.unroll(length, inputs=inputs, begin_state=states, layout=layout,
                                         merge_outputs=None if i < num_cells - 1 else merge_outputs,
                                         valid_length=valid_length)
            next_states.extend(states)
        return inputs, next_states

    def __getitem__(self, i):
        return self._children[str(i)]

    def __len__(self):
        return len(self._children)

    def hybrid_forward(self, *args, **kwargs):
        raise NotImplementedError


class HybridSequentialRNNCell(HybridRecurrentCell):
    """SequentialRNNCell of hybridizable cells (hybridizable itself)."""

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)

    __repr__ = SequentialRNNCell.__repr__
    add = SequentialRNNCell.add
    state_info = SequentialRNNCell.state_info
    begin_state = SequentialRNNCell.begin_state
    unroll = SequentialRNNCell.unroll
    __getitem__ = SequentialRNNCell.__getitem__
    __len__ = SequentialRNNCell.__len__

    def __call__(self, inputs, states):
        return SequentialRNNCell.__call__(self, inputs, states)

    def hybrid_forward(self, F, inputs, states):
        return SequentialRNNCell.__call__(self, inputs, states)


class DropoutCell(HybridRecurrentCell):
    """Applies Dropout(rate) to the input of each step; no states."""

    def __init__(self, rate, axes=(), prefix=None, params=None):
        super().__init__(prefix, params)
        if not isinstance(rate, (int, float)):
            raise TypeError("rate must be a number")
        self._rate = rate
        self._axes = axes

    def __repr__(self):
        return f"{self.__class__.__name__}(rate={self._rate}, axes={self._axes})"

    def state_info(self, batch_size=0):
        return []

    def _alias(self):
        return "dropout"

    def hybrid_forward(self, F, inputs, states):
        if self._rate > 0:
            inputs = F.Dropout(data=inputs, p=self._rate, axes=self._axes,
                               name="t%d_fwd" % self._counter)
        return inputs, states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        self.reset()
        inputs, _, F, _ = _format_sequence(length, inputs, layout, merge_outputs)
        if isinstance(inputs, tensor_types):
            return self.hybrid_forward(F, inputs, begin_state if begin_state else [])
        return super().unroll(length, inputs, begin_state=begin_state, layout=layout,
                              merge_outputs=merge_outputs, valid_length=valid_length)


class ModifierCell(HybridRecurrentCell):
    """Base class of cells that wrap a `base_cell` and modify its step."""

    def __init__(self, base_cell):
        if base_cell._modified:
            raise MXNetError(f"Cell {base_cell.name} is already modified. One cell cannot be "
                             "modified twice")
        base_cell._modified = True
        super().__init__(prefix=base_cell.prefix + self._alias(), params=None)
        self.base_cell = base_cell

    @property
    def params(self):
        return self.base_cell.params

    def state_info(self, batch_size=0):
        return self.base_cell.state_info(batch_size)

    def begin_state(self, func=ndarray.zeros, **kwargs):
        self.base_cell._modified = False
        begin = self.base_cell.begin_state(func=func, **kwargs)
        self.base_cell._modified = True
        return begin

    def hybrid_forward(self, F, inputs, states):
        raise NotImplementedError

    def __repr__(self):
        return f"{self.__class__.__name__}({self.base_cell})"


class ZoneoutCell(ModifierCell):
    """Zoneout (training only): each output / state unit keeps its previous value with
    probability zoneout_outputs / zoneout_states instead of taking the new one."""

    def __init__(self, base_cell, zoneout_outputs=0., zoneout_states=0.):
        if isinstance(base_cell, BidirectionalCell):
            raise MXNetError("BidirectionalCell doesn't support zoneout since it doesn't support "
                             "step. Please add ZoneoutCell to the cells underneath instead.")
        super().__init__(base_cell)
        self.zoneout_outputs = zoneout_outputs
        self.zoneout_states = zoneout_states
        self._prev_output = None

    def __repr__(self):
        return (f"{self.__class__.__name__}(p_out={self.zoneout_outputs}, "
                f"p_state={self.zoneout_states}, {self.base_cell})")

    def _alias(self):
        return "zoneout"

    def reset(self):
        super().reset()
        self._prev_output = None

    def hybrid_forward(self, F, inputs, states):
        cell, p_outputs, p_states = self.base_cell, self.zoneout_outputs, self.zoneout_states
        next_output, next_states = cell(inputs, states)

        def mask(p, like):
            return F.Dropout(F.ones_like(like), p=p)
        prev_output = self._prev_output
        if prev_output is None:
            prev_output = F.zeros_like(next_output)
        output = F.where(mask(p_outputs, next_output), next_output, prev_output) \
            if p_outputs != 0. else next_output
        states = [F.where(mask(p_states, new_s), new_s, old_s) for new_s, old_s in zip(next_states, states)] \
            if p_states != 0. else next_states
        self._prev_output = output
        return output, states


class ResidualCell(ModifierCell):
    """Adds the step input to the base cell's output (output = cell(x) + x)."""

    def __init__(self, base_cell):
        super().__init__(base_cell)

    def hybrid_forward(self, F, inputs, states):
        output, states = self.base_cell(inputs, states)
        output = F.elemwise_add(output, inputs, name="t%d_fwd" % self._counter)
        return output, states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        self.reset()
        self.base_cell._modified = False
        outputs, states = self.base_cell.unroll(length, inputs=inputs, begin_state=begin_state,
                                                layout=layout, merge_outputs=merge_outputs,
                                                valid_length=valid_length)
        self.base_cell._modified = True
        merge_outputs = isinstance(outputs, tensor_types) if merge_outputs is None else merge_outputs
        inputs, axis, F, _ = _format_sequence(length, inputs, layout, merge_outputs)
        if valid_length is not None:
            inputs = _mask_steps(F, inputs if isinstance(inputs, list) else
                                 split_steps(F, inputs, length, axis), valid_length)
            if merge_outputs:
                inputs = F.stack(*inputs, axis=axis)
        if merge_outputs:
            outputs = F.elemwise_add(outputs, inputs)
        else:
            outputs = [F.elemwise_add(i, j) for i, j in zip(outputs, inputs)]
        return outputs, states


class BidirectionalCell(HybridRecurrentCell):
    """Runs `l_cell` forward and `r_cell` backward in time; outputs are concatenated on the
    feature axis. Only `unroll` is supported (a single step has no meaning)."""

    def __init__(self, l_cell, r_cell, output_prefix="bi_"):
        super().__init__(prefix="", params=None)
        self.register_child(l_cell, "l_cell")
        self.register_child(r_cell, "r_cell")
        self._output_prefix = output_prefix

    def __call__(self, inputs, states):
        raise NotImplementedError("Bidirectional cannot be stepped. Please use unroll")

    def __repr__(self):
        return "{name}(forward={l_cell}, backward={r_cell})".format(
            name=self.__class__.__name__, l_cell=self._children["l_cell"],
            r_cell=self._children["r_cell"])

    def state_info(self, batch_size=0):
        return _cells_state_info(self._children.values(), batch_size)

    def begin_state(self, **kwargs):
        return _cells_begin_state(self._children.values(), **kwargs)

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        self.reset()
        inputs, axis, F, batch_size = _format_sequence(length, inputs, layout, False)
        reversed_inputs = _reverse_steps(F, inputs, valid_length)
        begin_state = _get_begin_state(self, F, begin_state, inputs, batch_size)
        states = begin_state
        l_cell, r_cell = self._children.values()
        n_l = len(l_cell.state_info(batch_size))
        l_outputs, l_states = l_cell.unroll(length, inputs=inputs, begin_state=states[:n_l],
                                            layout=layout, merge_outputs=False,
                                            valid_length=valid_length)
        r_outputs, r_states = r_cell.unroll(length, inputs=reversed_inputs,
                                            begin_state=states[n_l:], layout=layout,
                                            merge_outputs=False, valid_length=valid_length)
        reversed_r_outputs = _reverse_steps(F, r_outputs, valid_length)
        outputs = [F.concat(l_o, r_o, dim=1, name="%sout%d" % (self._output_prefix, i))
                   for i, (l_o, r_o) in enumerate(zip(l_outputs, reversed_r_outputs))]
        if valid_length is not None:
            outputs = _mask_steps(F, outputs, valid_length)
        if merge_outputs is None or merge_outputs:
            outputs = F.stack(*outputs, axis=axis)
        return outputs, l_states + r_states


def _reverse_steps(F, steps, valid_length):
    """The list of steps reversed in time; with valid_length, each sample's first
    valid_length steps are reversed in place (padding stays at the end), as SequenceReverse."""
    if valid_length is None:
        return list(reversed(steps))
    n = len(steps)
    out = []
    for t in range(n):
        total = None
        for L in range(1, n + 1):
            src = L - 1 - t if t < L else t
            sel = F._equal_scalar(valid_length, scalar=float(L))
            sel = F.expand_dims(F.cast(sel, "float32") if F is symbol else sel.astype(steps[src].dtype),
                                axis=1)
            term = F.broadcast_mul(steps[src], sel)
            total = term if total is None else total + term
        out.append(total)
    return out
