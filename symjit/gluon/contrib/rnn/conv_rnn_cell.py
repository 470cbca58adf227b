"""MXNet 1.9.1's convolutional recurrent cells (`gluon.contrib.rnn`): Conv{1,2,3}D{RNN,LSTM,GRU}Cell.

The gates are convolutions instead of dense layers (Shi et al., 2015, "Convolutional LSTM"):
i2h convolves the input (kernel i2h_kernel, padding i2h_pad, dilation i2h_dilate, stride 1) and
h2h the hidden state ("same" padding: h2h_kernel must be odd). Gate order and formulas are those
of the dense cells (LSTM [i, f, c, o], GRU [r, z, n]); states have shape
(batch,) + state shape, the state shape being (hidden_channels, *conv output size) for channel-
first layouts and (*conv output size, hidden_channels) for channel-last ones. `input_shape`
excludes the batch axis. Parameter names: i2h_weight, h2h_weight, i2h_bias, h2h_bias under the
prefixes conv_rnn / conv_lstm / conv_gru.
"""
from __future__ import annotations

import numbers

from ....base import MXNetError
from ...rnn.rnn_cell import HybridRecurrentCell, activation

__all__ = ["Conv1DRNNCell", "Conv2DRNNCell", "Conv3DRNNCell", "Conv1DLSTMCell", "Conv2DLSTMCell",
           "Conv3DLSTMCell", "Conv1DGRUCell", "Conv2DGRUCell", "Conv3DGRUCell"]


def _tuple(spec, dims: int, what: str, cell: str) -> tuple:
    if isinstance(spec, numbers.Integral):
        return (int(spec),) * dims
    spec = tuple(int(s) for s in spec)
    if len(spec) != dims:
        raise MXNetError(f"{cell}: for {dims}D convolution, {what} must be an int or a tuple of length {dims}, "
                         f"got {spec}")
    return spec


def _conv_out_size(dimensions, kernels, paddings, dilations) -> tuple:
    """Spatial output size of a stride-1 convolution (0 stays 0: unknown)."""
    return tuple(x + 2 * p - d * (k - 1) if x else 0 for x, k, p, d in zip(dimensions, kernels, paddings, dilations))


class _BaseConvRNNCell(HybridRecurrentCell):
    """Shared parameters, shapes and convolutions of the convolutional cells."""
    _gate_names: tuple = ()

    def __init__(self, input_shape, hidden_channels, i2h_kernel, h2h_kernel, i2h_pad, i2h_dilate, h2h_dilate,
                 i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer, h2h_bias_initializer,
                 dims, conv_layout, activation, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        name = type(self).__name__
        self._hidden_channels = int(hidden_channels)
        self._input_shape = tuple(int(d) for d in input_shape)
        if len(self._input_shape) != dims + 1:
            raise MXNetError(f"{name}: input_shape must have {dims + 1} entries (channels and {dims} spatial "
                             f"sizes, no batch axis), got {tuple(input_shape)}")
        if len(conv_layout) != dims + 2 or "C" not in conv_layout or conv_layout[0] != "N":
            raise MXNetError(f"{name}: conv_layout must be a {dims}D layout such as {'NC' + 'DHW'[3 - dims:]}, "
                             f"got {conv_layout!r}")
        self._conv_layout = conv_layout
        self._activation = activation
        self._i2h_kernel = _tuple(i2h_kernel, dims, "i2h_kernel", name)
        self._stride = (1,) * dims
        self._i2h_pad = _tuple(i2h_pad, dims, "i2h_pad", name)
        self._i2h_dilate = _tuple(i2h_dilate, dims, "i2h_dilate", name)
        self._h2h_kernel = _tuple(h2h_kernel, dims, "h2h_kernel", name)
        if any(k % 2 == 0 for k in self._h2h_kernel):
            raise MXNetError(f"{name}: only odd h2h_kernel sizes keep the state's shape, got h2h_kernel={h2h_kernel}")
        self._h2h_dilate = _tuple(h2h_dilate, dims, "h2h_dilate", name)
        self._h2h_pad = tuple(d * (k - 1) // 2 for d, k in zip(self._h2h_dilate, self._h2h_kernel))
        self._channel_axis, self._in_channels, i2h_shape, h2h_shape, self._state_shape = self._decide_shapes()
        total = self._hidden_channels * self._num_gates
        self.i2h_weight = self.params.get("i2h_weight", shape=i2h_shape, init=i2h_weight_initializer,
                                          allow_deferred_init=True)
        self.h2h_weight = self.params.get("h2h_weight", shape=h2h_shape, init=h2h_weight_initializer,
                                          allow_deferred_init=True)
        self.i2h_bias = self.params.get("i2h_bias", shape=(total,), init=i2h_bias_initializer,
                                        allow_deferred_init=True)
        self.h2h_bias = self.params.get("h2h_bias", shape=(total,), init=h2h_bias_initializer,
                                        allow_deferred_init=True)

    @property
    def _num_gates(self) -> int:
        return len(self._gate_names)

    def _decide_shapes(self):
        channel_axis = self._conv_layout.find("C")
        channel_first = channel_axis == 1
        in_channels = self._input_shape[channel_axis - 1]
        dimensions = self._input_shape[1:] if channel_first else self._input_shape[:-1]
        total = self._hidden_channels * self._num_gates
        out_size = _conv_out_size(dimensions, self._i2h_kernel, self._i2h_pad, self._i2h_dilate)
        if channel_first:
            i2h = (total, in_channels) + self._i2h_kernel
            h2h = (total, self._hidden_channels) + self._h2h_kernel
            state = (self._hidden_channels,) + out_size
        else:
            i2h = (total,) + self._i2h_kernel + (in_channels,)
            h2h = (total,) + self._h2h_kernel + (self._hidden_channels,)
            state = out_size + (self._hidden_channels,)
        return channel_axis, in_channels, i2h, h2h, state

    def state_info(self, batch_size=0):
        return [{"shape": (batch_size,) + self._state_shape, "__layout__": self._conv_layout}]

    def __repr__(self):
        shape = self.i2h_weight.shape
        in_channels = shape[1 if self._channel_axis == 1 else -1]
        return (f"{self.__class__.__name__}({in_channels if in_channels else None} -> {shape[0]}, "
                f"{self._activation}, {self._conv_layout})")

    def _conv_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias, prefix):
        total = self._hidden_channels * self._num_gates
        i2h = F.Convolution(data=inputs, num_filter=total, kernel=self._i2h_kernel, stride=self._stride,
                            pad=self._i2h_pad, dilate=self._i2h_dilate, weight=i2h_weight, bias=i2h_bias,
                            layout=self._conv_layout, name=prefix + "i2h")
        h2h = F.Convolution(data=states[0], num_filter=total, kernel=self._h2h_kernel, dilate=self._h2h_dilate,
                            pad=self._h2h_pad, stride=self._stride, weight=h2h_weight, bias=h2h_bias,
                            layout=self._conv_layout, name=prefix + "h2h")
        return i2h, h2h


class _ConvRNNCell(_BaseConvRNNCell):
    """h' = activation(conv_i2h(x) + conv_h2h(h))."""
    _gate_names = ("",)

    def _alias(self):
        return "conv_rnn"

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        prefix = "t%d_" % self._counter
        i2h, h2h = self._conv_forward(F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias, prefix)
        output = activation(F, i2h + h2h, self._activation, name=prefix + "out")
        return output, [output]


class _ConvLSTMCell(_BaseConvRNNCell):
    """Convolutional LSTM: gates [i, f, c, o] along the channel axis; states [h, c]."""
    _gate_names = ("_i", "_f", "_c", "_o")

    def state_info(self, batch_size=0):
        info = {"shape": (batch_size,) + self._state_shape, "__layout__": self._conv_layout}
        return [info, dict(info)]

    def _alias(self):
        return "conv_lstm"

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        prefix = "t%d_" % self._counter
        i2h, h2h = self._conv_forward(F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias, prefix)
        gates = F.SliceChannel(i2h + h2h, num_outputs=4, axis=self._channel_axis, name=prefix + "slice")
        in_gate = F.Activation(gates[0], act_type="sigmoid", name=prefix + "i")
        forget_gate = F.Activation(gates[1], act_type="sigmoid", name=prefix + "f")
        in_transform = activation(F, gates[2], self._activation, name=prefix + "c")
        out_gate = F.Activation(gates[3], act_type="sigmoid", name=prefix + "o")
        next_c = F.elemwise_add(forget_gate * states[1], in_gate * in_transform, name=prefix + "state")
        next_h = F.elemwise_mul(out_gate, activation(F, next_c, self._activation), name=prefix + "out")
        return next_h, [next_h, next_c]


class _ConvGRUCell(_BaseConvRNNCell):
    """Convolutional GRU: gates [r, z, n]; n = act(i2h_n + r * h2h_n), h' = (1 - z) * n + z * h."""
    _gate_names = ("_r", "_z", "_o")

    def _alias(self):
        return "conv_gru"

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        prefix = "t%d_" % self._counter
        i2h, h2h = self._conv_forward(F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias, prefix)
        i2h_s = F.SliceChannel(i2h, num_outputs=3, axis=self._channel_axis, name=prefix + "i2h_slice")
        h2h_s = F.SliceChannel(h2h, num_outputs=3, axis=self._channel_axis, name=prefix + "h2h_slice")
        reset_gate = F.Activation(i2h_s[0] + h2h_s[0], act_type="sigmoid", name=prefix + "r_act")
        update_gate = F.Activation(i2h_s[1] + h2h_s[1], act_type="sigmoid", name=prefix + "z_act")
        candidate = activation(F, i2h_s[2] + reset_gate * h2h_s[2], self._activation, name=prefix + "h_act")
        next_h = F.elemwise_add((1. - update_gate) * candidate, update_gate * states[0], name=prefix + "out")
        return next_h, [next_h]


def _cell_class(base, dims: int, layout: str, default_activation: str, doc: str):
    zeros, ones = (0,) * dims, (1,) * dims

    def __init__(self, input_shape, hidden_channels, i2h_kernel, h2h_kernel, i2h_pad=zeros, i2h_dilate=ones,
                 h2h_dilate=ones, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros", conv_layout=layout,
                 activation=default_activation, prefix=None, params=None):
        base.__init__(self, input_shape=input_shape, hidden_channels=hidden_channels, i2h_kernel=i2h_kernel,
                      h2h_kernel=h2h_kernel, i2h_pad=i2h_pad, i2h_dilate=i2h_dilate, h2h_dilate=h2h_dilate,
                      i2h_weight_initializer=i2h_weight_initializer, h2h_weight_initializer=h2h_weight_initializer,
                      i2h_bias_initializer=i2h_bias_initializer, h2h_bias_initializer=h2h_bias_initializer,
                      dims=dims, conv_layout=conv_layout, activation=activation, prefix=prefix, params=params)

    kind = {"_ConvRNNCell": "RNN", "_ConvLSTMCell": "LSTM", "_ConvGRUCell": "GRU"}[base.__name__]
    name = f"Conv{dims}D{kind}Cell"
    return type(name, (base,), {"__init__": __init__, "__doc__": doc, "__module__": __name__, "__qualname__": name})


Conv1DRNNCell = _cell_class(_ConvRNNCell, 1, "NCW", "tanh", "1D convolutional RNN cell (layout NCW or NWC).")
Conv2DRNNCell = _cell_class(_ConvRNNCell, 2, "NCHW", "tanh", "2D convolutional RNN cell (layout NCHW or NHWC).")
Conv3DRNNCell = _cell_class(_ConvRNNCell, 3, "NCDHW", "tanh", "3D convolutional RNN cell (layout NCDHW or NDHWC).")
Conv1DLSTMCell = _cell_class(_ConvLSTMCell, 1, "NCW", "tanh", "1D convolutional LSTM cell (Shi et al., 2015).")
Conv2DLSTMCell = _cell_class(_ConvLSTMCell, 2, "NCHW", "tanh", "2D convolutional LSTM cell (Shi et al., 2015).")
Conv3DLSTMCell = _cell_class(_ConvLSTMCell, 3, "NCDHW", "tanh", "3D convolutional LSTM cell (Shi et al., 2015).")
Conv1DGRUCell = _cell_class(_ConvGRUCell, 1, "NCW", "tanh", "1D convolutional GRU cell.")
Conv2DGRUCell = _cell_class(_ConvGRUCell, 2, "NCHW", "tanh", "2D convolutional GRU cell.")
Conv3DGRUCell = _cell_class(_ConvGRUCell, 3, "NCDHW", "tanh", "3D convolutional GRU cell.")
