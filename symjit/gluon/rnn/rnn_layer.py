"""Multi-layer recurrent layers (MXNet 1.x `gluon.rnn.rnn_layer`): RNN, LSTM and GRU.

Parameters carry MXNet's names and shapes (`l0_i2h_weight` (gates*hidden, input),
`r1_h2h_bias`, ... under the layer prefix `rnn0_`/`lstm0_`/`gru0_`), so `.params` files
interchange with MXNet. The computation is unrolled over time with the cells' step functions
(registered ops only): gradients, hybridization and export need nothing RNN-specific. The
unrolled graph depends on the sequence length, so a hybridized layer re-traces when the
length (or whether states were passed) changes. Composed on Symbols directly (length
unknown), a layer builds MXNet's own graph instead: `_rnn_param_concat` + the fused `RNN` op.

Semantics as MXNet's fused kernel: layer l reads layer l-1's output (both directions
concatenated on the feature axis), dropout (training only) between layers, returned states
stacked as (num_layers * directions, batch, hidden) in order l0, r0, l1, r1, ...
"""
from __future__ import annotations

from ... import ndarray, symbol
from ...base import MXNetError
from ...ndarray.ndarray import NDArray
from ...ops import get_op
from ..block import HybridBlock
from .rnn_cell import gru_step, lstm_step, rnn_step, split_steps

__all__ = ["RNN", "LSTM", "GRU"]


class _RNNLayer(HybridBlock):
    """Implementation shared by RNN, LSTM and GRU."""

    def __init__(self, hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                 i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                 h2h_bias_initializer, mode, projection_size, h2r_weight_initializer,
                 lstm_state_clip_min, lstm_state_clip_max, lstm_state_clip_nan, dtype,
                 use_sequence_length=False, **kwargs):
        super().__init__(**kwargs)
        if layout not in ("TNC", "NTC"):
            raise ValueError(f"Invalid layout {layout}; must be one of ['TNC' or 'NTC']")
        self._hidden_size = hidden_size
        self._projection_size = projection_size if projection_size else None
        self._num_layers = num_layers
        self._mode = mode
        self._layout = layout
        self._dropout = dropout
        self._dir = 2 if bidirectional else 1
        self._input_size = input_size
        self._lstm_state_clip_min = lstm_state_clip_min
        self._lstm_state_clip_max = lstm_state_clip_max
        self._lstm_state_clip_nan = lstm_state_clip_nan
        self._dtype = dtype
        self._use_sequence_length = use_sequence_length
        self.skip_states = None
        self._trace_key = None
        self._gates = get_op("RNN").gates[mode]
        ng, ni, nh = self._gates, input_size, hidden_size
        nr = self._projection_size
        for i in range(num_layers):
            for j in ["l", "r"][:self._dir]:
                self._register_param(f"{j}{i}_i2h_weight", (ng * nh, ni), i2h_weight_initializer, dtype)
                self._register_param(f"{j}{i}_h2h_weight", (ng * nh, nr or nh), h2h_weight_initializer,
                                     dtype)
                self._register_param(f"{j}{i}_i2h_bias", (ng * nh,), i2h_bias_initializer, dtype)
                self._register_param(f"{j}{i}_h2h_bias", (ng * nh,), h2h_bias_initializer, dtype)
                if nr:
                    self._register_param(f"{j}{i}_h2r_weight", (nr, nh), h2r_weight_initializer, dtype)
            ni = (nr or nh) * self._dir

    def _register_param(self, name, shape, init, dtype):
        p = self.params.get(name, shape=shape, init=init, allow_deferred_init=True, dtype=dtype)
        setattr(self, name, p)
        return p

    def __repr__(self):
        s = "{name}({mapping}, {_layout}"
        if self._num_layers != 1:
            s += ", num_layers={_num_layers}"
        if self._dropout != 0:
            s += ", dropout={_dropout}"
        if self._dir == 2:
            s += ", bidirectional"
        s += ")"
        shape = self.l0_i2h_weight.shape
        mapping = "{0} -> {1}".format(shape[1] if shape[1] else None, shape[0] // self._gates)
        return s.format(name=self.__class__.__name__, mapping=mapping, **self.__dict__)

    def state_info(self, batch_size=0):
        raise NotImplementedError

    def begin_state(self, batch_size=0, func=ndarray.zeros, **kwargs):
        """Initial states (zeros by default), one per `state_info` entry."""
        states = []
        for i, info in enumerate(self.state_info(batch_size)):
            info = dict(info) if info is not None else {}
            info.update(kwargs)
            info.pop("__layout__", None)
            states.append(func(name="%sh0_%d" % (self.prefix, i), **info))
        return states

    def __call__(self, inputs, states=None, sequence_length=None, **kwargs):
        self.skip_states = states is None
        if states is None:
            if isinstance(inputs, NDArray):
                batch_size = inputs.shape[self._layout.find("N")]
                states = self.begin_state(batch_size, ctx=inputs.context, dtype=inputs.dtype)
            else:
                states = self._zero_states_like(symbol, inputs)
        if isinstance(states, (NDArray, symbol.Symbol)):
            states = [states]
        if self._use_sequence_length:
            return super().__call__(inputs, states, sequence_length, **kwargs)
        return super().__call__(inputs, states, **kwargs)

    def _zero_states_like(self, F, inputs):
        """Zero begin states (L*D, N, H) built from the symbolic input's batch axis, so that
        shape inference needs no placeholder dims (MXNet uses zeros of shape (L*D, 0, H))."""
        t_axis = self._layout.find("T")
        step = F.zeros_like(F.slice_axis(inputs, axis=t_axis, begin=0, end=1))
        col = F.sum(step, axis=2, keepdims=True)  # (1, N, 1) for TNC, (N, 1, 1) for NTC
        if t_axis == 1:
            col = F.swapaxes(col, dim1=0, dim2=1)
        states = []
        for info in self.state_info(0):
            n, _, h = info["shape"]
            states.append(F.broadcast_axis(col, axis=(0, 2), size=(n, h)))
        return states

    # ---- tracing depends on the sequence length --------------------------------------------
    def _key(self, inputs):
        length = inputs.shape[self._layout.find("T")] if isinstance(inputs, NDArray) else None
        return (length, self.skip_states)

    def _get_graph(self, *args):
        key = self._key(args[0])
        if self._cached_graph and key != self._trace_key:
            self._clear_cached_op()
        self._trace_key = key
        return super()._get_graph(*args)

    def _call_cached_op(self, *args):
        if self._cached_op is not None and self._key(args[0]) != self._trace_key:
            self._clear_cached_op()
        return super()._call_cached_op(*args)

    def hybrid_forward(self, F, inputs, states, sequence_length=None, **kwargs):
        if F is ndarray:
            batch_size = inputs.shape[self._layout.find("N")]
            for state, info in zip(states, self.state_info(batch_size)):
                if state.shape != info["shape"]:
                    raise ValueError(f"Invalid recurrent state shape. Expecting {info['shape']}, "
                                     f"got {state.shape}.")
            length = inputs.shape[self._layout.find("T")]
        else:
            length = self._trace_key[0] if self._trace_key else None
            if not length:
                # composed on Symbols of unknown length: MXNet's fused RNN op
                out = self._fused_forward(F, inputs, states, sequence_length, **kwargs)
                return out[0] if self.skip_states else out
        out = self._forward_kernel(F, inputs, states, length, sequence_length, **kwargs)
        return out[0] if self.skip_states else out

    # ---- the unrolled computation --------------------------------------------------------
    def _step(self, F, x, h, c, p):
        """One time step of one direction of one layer; returns (h', c') (c' None unless LSTM)."""
        nh = self._hidden_size
        if self._mode == "lstm":
            clip = None
            if self._lstm_state_clip_min is not None or self._lstm_state_clip_max is not None:
                clip = self._clip_state
            h_new, c_new = lstm_step(F, x, h, c, p("i2h_weight"), p("h2h_weight"), p("i2h_bias"),
                                     p("h2h_bias"), nh, clip_state=clip)
            if self._projection_size:
                h_new = F.FullyConnected(h_new, p("h2r_weight"), no_bias=True,
                                         num_hidden=self._projection_size)
            return h_new, c_new
        if self._mode == "gru":
            return gru_step(F, x, h, p("i2h_weight"), p("h2h_weight"), p("i2h_bias"), p("h2h_bias"),
                            nh), None
        act = "relu" if self._mode == "rnn_relu" else "tanh"
        return rnn_step(F, x, h, p("i2h_weight"), p("h2h_weight"), p("i2h_bias"), p("h2h_bias"),
                        nh, act), None

    def _clip_state(self, F, c):
        lo = -float("inf") if self._lstm_state_clip_min is None else float(self._lstm_state_clip_min)
        hi = float("inf") if self._lstm_state_clip_max is None else float(self._lstm_state_clip_max)
        clipped = F.clip(c, lo, hi)
        if self._lstm_state_clip_nan:
            # NaN cells become the lower bound (x == x is false only for NaN)
            clipped = F.where(clipped == clipped, clipped, F.ones_like(clipped) * lo)
        return clipped

    def _fused_forward(self, F, inputs, states, sequence_length=None, **params):
        """The layer as MXNet builds it: parameters packed by `_rnn_param_concat` (all weights,
        then all biases, per layer and direction) feeding one `RNN` op over TNC data."""
        if sequence_length is not None or self._projection_size or \
                self._lstm_state_clip_min is not None or self._lstm_state_clip_max is not None:
            raise MXNetError(f"{self.name}: sequence_length, projection and state clipping need "
                             "the unrolled layer; call it on NDArrays")
        if self._layout == "NTC":
            inputs = F.swapaxes(inputs, dim1=0, dim2=1)
        flat = []
        for t in ("weight", "bias"):
            for layer in range(self._num_layers):
                for d in ["l", "r"][:self._dir]:
                    for g in ("i2h", "h2h"):
                        name = f"{d}{layer}_{g}_{t}"
                        if name.endswith("0_i2h_weight") and not getattr(self, name).shape[1]:
                            # input size still deferred: infer it from the data
                            flat.append(F._rnn_flat_input_weight(params[name], inputs,
                                                                 rows=self._gates * self._hidden_size))
                        else:
                            flat.append(F.reshape(params[name], shape=(-1,)))
        packed = F._rnn_param_concat(*flat, dim=0, num_args=len(flat))
        rnn = F.RNN(inputs, packed, *states, state_size=self._hidden_size,
                    num_layers=self._num_layers, bidirectional=self._dir == 2, p=self._dropout,
                    state_outputs=True, mode=self._mode)
        outputs = rnn[0]
        out_states = [rnn[1], rnn[2]] if self._mode == "lstm" else [rnn[1]]
        if self._layout == "NTC":
            outputs = F.swapaxes(outputs, dim1=0, dim2=1)
        return outputs, out_states

    def _forward_kernel(self, F, inputs, states, length, sequence_length=None, **params):
        if sequence_length is not None:
            raise MXNetError(f"{self.name}: use_sequence_length is not supported by the unrolled "
                             "RNN layers")
        t_axis = self._layout.find("T")
        steps = split_steps(F, inputs, length, t_axis)
        n_state = self._num_layers * self._dir
        h0 = split_steps(F, states[0], n_state, 0)
        c0 = split_steps(F, states[1], n_state, 0) if self._mode == "lstm" else [None] * n_state
        final_h, final_c = [], []
        for layer in range(self._num_layers):
            per_dir = []
            for d, j in enumerate(["l", "r"][:self._dir]):
                def p(name, _j=j, _l=layer):
                    return params[f"{_j}{_l}_{name}"]
                h, c = h0[layer * self._dir + d], c0[layer * self._dir + d]
                outs = []
                for x in (steps if d == 0 else steps[::-1]):
                    h, c = self._step(F, x, h, c, p)
                    outs.append(h)
                per_dir.append(outs if d == 0 else outs[::-1])
                final_h.append(h)
                final_c.append(c)
            steps = per_dir[0] if self._dir == 1 else [F.concat(a, b, dim=1)
                                                        for a, b in zip(*per_dir)]
            if self._dropout and layer < self._num_layers - 1:
                steps = [F.Dropout(s, p=self._dropout) for s in steps]
        output = F.stack(*steps, axis=t_axis)
        out_states = [F.stack(*final_h, axis=0)]
        if self._mode == "lstm":
            out_states.append(F.stack(*final_c, axis=0))
        return output, out_states


class RNN(_RNNLayer):
    """Elman RNN (activation 'relu' or 'tanh'): h_t = act(W_i x_t + b_i + W_h h_{t-1} + b_h).

    Input (T, N, C) for layout 'TNC' or (N, T, C) for 'NTC'; states [(L*D, N, H)]."""

    def __init__(self, hidden_size, num_layers=1, activation="relu", layout="TNC", dropout=0,
                 bidirectional=False, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros", input_size=0,
                 dtype="float32", **kwargs):
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "rnn_" + activation, None, None, None, None, False,
                         dtype, **kwargs)

    def state_info(self, batch_size=0):
        return [{"shape": (self._num_layers * self._dir, batch_size, self._hidden_size),
                 "__layout__": "LNC", "dtype": self._dtype}]


class LSTM(_RNNLayer):
    """LSTM (gates i, f, c, o), optional projection of h (`projection_size`) and cell-state
    clipping; states [h (L*D, N, H or P), c (L*D, N, H)]."""

    def __init__(self, hidden_size, num_layers=1, layout="TNC", dropout=0, bidirectional=False,
                 input_size=0, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros", projection_size=None,
                 h2r_weight_initializer=None, state_clip_min=None, state_clip_max=None,
                 state_clip_nan=False, dtype="float32", **kwargs):
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "lstm", projection_size, h2r_weight_initializer,
                         state_clip_min, state_clip_max, state_clip_nan, dtype, **kwargs)

    def state_info(self, batch_size=0):
        n = self._num_layers * self._dir
        h = self._projection_size or self._hidden_size
        return [{"shape": (n, batch_size, h), "__layout__": "LNC", "dtype": self._dtype},
                {"shape": (n, batch_size, self._hidden_size), "__layout__": "LNC",
                 "dtype": self._dtype}]


class GRU(_RNNLayer):
    """GRU (gates r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn))); states [(L*D, N, H)]."""

    def __init__(self, hidden_size, num_layers=1, layout="TNC", dropout=0, bidirectional=False,
                 input_size=0, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros", dtype="float32",
                 **kwargs):
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "gru", None, None, None, None, False, dtype, **kwargs)

    def state_info(self, batch_size=0):
        return [{"shape": (self._num_layers * self._dir, batch_size, self._hidden_size),
                 "__layout__": "LNC", "dtype": self._dtype}]
