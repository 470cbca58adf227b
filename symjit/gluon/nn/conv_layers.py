"""Convolution, pooling and padding layers (MXNet 1.x `gluon.nn.conv_layers`), plus the
InstanceNorm and GroupNorm normalization layers.

Every layer is a HybridBlock whose `hybrid_forward` calls one registered op (`Convolution`,
`Deconvolution`, `Pooling`, `Pad`, `InstanceNorm`, `GroupNorm`) with MXNet's attributes, so
imperative and hybridized runs agree and exported graphs match MXNet's node for node.
Weights are created with deferred shapes (`in_channels=0`): the op's own shape inference
fills the unknown input-channel dimension on the first forward.
"""
from __future__ import annotations

from ...base import numeric_types
from ...ops.registry import get_op
from ...util import is_np_array
from ..block import HybridBlock
from .basic_layers import Activation

__all__ = ["Conv1D", "Conv2D", "Conv3D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose",
           "MaxPool1D", "MaxPool2D", "MaxPool3D", "AvgPool1D", "AvgPool2D", "AvgPool3D",
           "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPool3D",
           "GlobalAvgPool1D", "GlobalAvgPool2D", "GlobalAvgPool3D",
           "ReflectionPad2D", "InstanceNorm", "GroupNorm"]


def _tuple(value, n: int, what: str) -> tuple:
    """An int broadcast to an n-tuple, or a sequence checked to have n entries."""
    if isinstance(value, numeric_types):
        return (int(value),) * n
    value = tuple(int(v) for v in value)
    if len(value) != n:
        raise ValueError(f"{what} must be a number or a sequence of {n} numbers, got {value}")
    return value


def _infer_weight_shape(op_name: str, data_shape: tuple, kwargs: dict) -> list:
    """(data, weight, bias) shapes the op infers from a partial data shape (0 = unknown).

    Channel-last layouts (which only run on GPU) get the channel-first weight shape with its
    channel axis moved last, as MXNet lays such weights out."""
    op = get_op(op_name)
    layout = kwargs.get("layout")
    if layout and layout[-1] == "C":
        first = layout[0] + "C" + layout[1:-1]
        shapes = _infer_weight_shape(op_name, tuple(data_shape[layout.find(a)] for a in first),
                                     dict(kwargs, layout=first))
        w = shapes[1]
        return [tuple(data_shape), None if w is None else (w[0],) + tuple(w[2:]) + (w[1],), shapes[2]]
    attrs = op.parse(kwargs)
    n_in = len(op.input_names(attrs))
    in_shapes, _ = op.infer_shape(attrs, [tuple(data_shape)] + [None] * (n_in - 1))
    return list(in_shapes) + [None] * (3 - len(in_shapes))


#: the npx function of each convolution operator (what the layers call under NumPy semantics)
_NPX_NAMES = {"Convolution": "convolution", "Deconvolution": "deconvolution"}


class _Conv(HybridBlock):
    """Shared implementation of (transposed) convolutions: `activation(op(x, weight, bias))`."""

    def __init__(self, channels, kernel_size, strides, padding, dilation, groups, layout,
                 in_channels=0, activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", op_name="Convolution", adj=None, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        with self.name_scope():
            self._channels = channels
            self._in_channels = in_channels
            nd = len(kernel_size)
            self._op_name = op_name
            self._kwargs = {
                "kernel": tuple(kernel_size), "stride": _tuple(strides, nd, "strides"),
                "dilate": _tuple(dilation, nd, "dilation"), "pad": _tuple(padding, nd, "padding"),
                "num_filter": channels, "num_group": groups, "no_bias": not use_bias, "layout": layout}
            if adj is not None:
                self._kwargs["adj"] = _tuple(adj, nd, "output_padding")
            dshape = [0] * (nd + 2)
            dshape[layout.find("N")] = 1
            dshape[layout.find("C")] = in_channels
            wshapes = _infer_weight_shape(op_name, tuple(dshape), self._kwargs)
            self.weight = self.params.get("weight", shape=wshapes[1], init=weight_initializer,
                                          allow_deferred_init=True)
            if use_bias:
                self.bias = self.params.get("bias", shape=wshapes[2], init=bias_initializer,
                                            allow_deferred_init=True)
            else:
                self.bias = None
            if activation is not None:
                self.act = Activation(activation, prefix=activation + "_")
            else:
                self.act = None

    def hybrid_forward(self, F, x, weight, bias=None):
        if is_np_array() and self._op_name in _NPX_NAMES:
            op = getattr(F.npx, _NPX_NAMES[self._op_name])
        else:
            op = getattr(F, self._op_name)
        if bias is None:
            act = op(x, weight, name="fwd", **self._kwargs)
        else:
            act = op(x, weight, bias, name="fwd", **self._kwargs)
        if self.act is not None:
            act = self.act(act)
        return act

    def _alias(self):
        return "conv"

    def __repr__(self):
        s = "{name}({mapping}, kernel_size={kernel}, stride={stride}"
        nd = len(self._kwargs["kernel"])
        if self._kwargs["pad"] != (0,) * nd:
            s += ", padding={pad}"
        if self._kwargs["dilate"] != (1,) * nd:
            s += ", dilation={dilate}"
        if hasattr(self, "out_pad") and self.out_pad != (0,) * nd:
            s += f", output_padding={self.out_pad}"
        if self._kwargs["num_group"] != 1:
            s += ", groups={num_group}"
        if self.bias is None:
            s += ", bias=False"
        if self.act:
            s += f", {self.act}"
        s += ")"
        shape = self.weight.shape
        return s.format(name=self.__class__.__name__,
                        mapping="{0} -> {1}".format(shape[1] if shape[1] else None, shape[0]),
                        **self._kwargs)


def _conv_init(cls_layouts, nd):
    """Constructor of the N-D convolution layer (layout checked against `cls_layouts`)."""

    def __init__(self, channels, kernel_size, strides=1, padding=0, dilation=1, groups=1,
                 layout=cls_layouts[0], activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", in_channels=0, **kwargs):
        if layout not in cls_layouts:
            raise ValueError(f"Only supports {' and '.join(repr(x) for x in cls_layouts)} layouts now")
        kernel_size = _tuple(kernel_size, nd, "kernel_size")
        _Conv.__init__(self, channels, kernel_size, strides, padding, dilation, groups, layout,
                       in_channels, activation, use_bias, weight_initializer, bias_initializer,
                       **kwargs)
    return __init__


def _deconv_init(cls_layouts, nd):
    """Constructor of the N-D transposed convolution layer (`Deconvolution` op)."""

    def __init__(self, channels, kernel_size, strides=1, padding=0, output_padding=0, dilation=1,
                 groups=1, layout=cls_layouts[0], activation=None, use_bias=True,
                 weight_initializer=None, bias_initializer="zeros", in_channels=0, **kwargs):
        if layout not in cls_layouts:
            raise ValueError(f"Only supports {' and '.join(repr(x) for x in cls_layouts)} layouts now")
        kernel_size = _tuple(kernel_size, nd, "kernel_size")
        output_padding = _tuple(output_padding, nd, "output_padding")
        _Conv.__init__(self, channels, kernel_size, strides, padding, dilation, groups, layout,
                       in_channels, activation, use_bias, weight_initializer, bias_initializer,
                       op_name="Deconvolution", adj=output_padding, **kwargs)
        self.outpad = output_padding  # MXNet's attribute name (its repr reads `out_pad`)
    return __init__


class Conv1D(_Conv):
    """1-D convolution over (N, C, W) input (layout 'NCW' or 'NWC')."""
    __init__ = _conv_init(("NCW", "NWC"), 1)


class Conv2D(_Conv):
    """2-D convolution over (N, C, H, W) input (layout 'NCHW' or 'NHWC')."""
    __init__ = _conv_init(("NCHW", "NHWC"), 2)


class Conv3D(_Conv):
    """3-D convolution over (N, C, D, H, W) input (layout 'NCDHW' or 'NDHWC')."""
    __init__ = _conv_init(("NCDHW", "NDHWC"), 3)


class Conv1DTranspose(_Conv):
    """1-D transposed convolution (`Deconvolution`); weight (in_channels, channels/groups, k)."""
    __init__ = _deconv_init(("NCW", "NWC"), 1)


class Conv2DTranspose(_Conv):
    """2-D transposed convolution (`Deconvolution`)."""
    __init__ = _deconv_init(("NCHW", "NHWC"), 2)


class Conv3DTranspose(_Conv):
    """3-D transposed convolution (`Deconvolution`)."""
    __init__ = _deconv_init(("NCDHW", "NDHWC"), 3)


class _Pooling(HybridBlock):
    """Shared implementation of pooling layers: one `Pooling` op named `<prefix>fwd`."""

    def __init__(self, pool_size, strides, padding, ceil_mode, global_pool, pool_type, layout,
                 count_include_pad=None, **kwargs):
        super().__init__(**kwargs)
        nd = len(pool_size)
        if strides is None:
            strides = pool_size
        self._kwargs = {
            "kernel": tuple(pool_size), "stride": _tuple(strides, nd, "strides"),
            "pad": _tuple(padding, nd, "padding"), "global_pool": global_pool,
            "pool_type": pool_type, "layout": layout,
            "pooling_convention": "full" if ceil_mode else "valid"}
        if count_include_pad is not None:
            self._kwargs["count_include_pad"] = count_include_pad

    def _alias(self):
        return "pool"

    def hybrid_forward(self, F, x):
        pooling = F.npx.pooling if is_np_array() else F.Pooling
        return pooling(x, name="fwd", **self._kwargs)

    def __repr__(self):
        s = "{name}(size={kernel}, stride={stride}, padding={pad}, ceil_mode={ceil_mode}"
        s += ", global_pool={global_pool}, pool_type={pool_type}, layout={layout})"
        return s.format(name=self.__class__.__name__,
                        ceil_mode=self._kwargs["pooling_convention"] == "full", **self._kwargs)


def _check_layout(layout, allowed):
    if layout not in allowed:
        raise ValueError(f"Only supports {' and '.join(repr(x) for x in allowed)} layouts now")


_LAYOUTS = {1: ("NCW", "NWC"), 2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}


def _pool_init(nd, pool_type):
    """Constructor of the N-D max or average pooling layer."""
    default_size = 2 if nd == 1 else (2,) * nd

    if pool_type == "max":
        def __init__(self, pool_size=default_size, strides=None, padding=0, layout=_LAYOUTS[nd][0],
                     ceil_mode=False, **kwargs):
            _check_layout(layout, _LAYOUTS[nd])
            _Pooling.__init__(self, _tuple(pool_size, nd, "pool_size"), strides, padding, ceil_mode,
                              False, "max", layout, **kwargs)
    else:
        def __init__(self, pool_size=default_size, strides=None, padding=0, layout=_LAYOUTS[nd][0],
                     ceil_mode=False, count_include_pad=True, **kwargs):
            _check_layout(layout, _LAYOUTS[nd])
            _Pooling.__init__(self, _tuple(pool_size, nd, "pool_size"), strides, padding, ceil_mode,
                              False, "avg", layout, count_include_pad, **kwargs)
    return __init__


def _global_pool_init(nd, pool_type):
    """Constructor of the N-D global pooling layer (output spatial size 1)."""

    def __init__(self, layout=_LAYOUTS[nd][0], **kwargs):
        _check_layout(layout, _LAYOUTS[nd])
        _Pooling.__init__(self, (1,) * nd, None, 0, True, True, pool_type, layout, **kwargs)
    return __init__


class MaxPool1D(_Pooling):
    """1-D max pooling (default pool_size 2, strides = pool_size)."""
    __init__ = _pool_init(1, "max")


class MaxPool2D(_Pooling):
    """2-D max pooling (default pool_size (2, 2), strides = pool_size)."""
    __init__ = _pool_init(2, "max")


class MaxPool3D(_Pooling):
    """3-D max pooling (default pool_size (2, 2, 2), strides = pool_size)."""
    __init__ = _pool_init(3, "max")


class AvgPool1D(_Pooling):
    """1-D average pooling; padding counts in the average unless count_include_pad=False."""
    __init__ = _pool_init(1, "avg")


class AvgPool2D(_Pooling):
    """2-D average pooling."""
    __init__ = _pool_init(2, "avg")


class AvgPool3D(_Pooling):
    """3-D average pooling."""
    __init__ = _pool_init(3, "avg")


class GlobalMaxPool1D(_Pooling):
    """Max over the whole width: (N, C, W) -> (N, C, 1)."""
    __init__ = _global_pool_init(1, "max")


class GlobalMaxPool2D(_Pooling):
    """Max over the whole image: (N, C, H, W) -> (N, C, 1, 1)."""
    __init__ = _global_pool_init(2, "max")


class GlobalMaxPool3D(_Pooling):
    """Max over the whole volume."""
    __init__ = _global_pool_init(3, "max")


class GlobalAvgPool1D(_Pooling):
    """Mean over the whole width: (N, C, W) -> (N, C, 1)."""
    __init__ = _global_pool_init(1, "avg")


class GlobalAvgPool2D(_Pooling):
    """Mean over the whole image: (N, C, H, W) -> (N, C, 1, 1)."""
    __init__ = _global_pool_init(2, "avg")


class GlobalAvgPool3D(_Pooling):
    """Mean over the whole volume."""
    __init__ = _global_pool_init(3, "avg")


class ReflectionPad2D(HybridBlock):
    """Pads the two spatial axes of (N, C, H, W) input by reflection; `padding` is a number or
    MXNet's 8-entry `pad_width` (before/after per axis, zeros for N and C)."""

    def __init__(self, padding=0, **kwargs):
        super().__init__(**kwargs)
        if isinstance(padding, numeric_types):
            padding = (0, 0, 0, 0, padding, padding, padding, padding)
        padding = tuple(padding)
        if len(padding) != 8:
            raise ValueError(f"ReflectionPad2D: padding must be a number or 8 numbers, got {padding}")
        self._padding = padding

    def hybrid_forward(self, F, x):
        return F.pad(x, mode="reflect", pad_width=self._padding)


def _norm_repr(block) -> str:
    content = ", ".join("=".join([k, v.__repr__()]) for k, v in block._kwargs.items())
    return f"{block.__class__.__name__}({content}, in_channels={block.gamma.shape[0]})"


class InstanceNorm(HybridBlock):
    """Normalizes each (sample, channel) over its spatial axes, then scales by gamma (only
    learned when `scale`) and shifts by beta. `axis` names the channel axis."""

    def __init__(self, axis=1, epsilon=1e-5, center=True, scale=False, beta_initializer="zeros",
                 gamma_initializer="ones", in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self._kwargs = {"eps": epsilon, "axis": axis, "center": center, "scale": scale}
        self._axis = axis
        self._epsilon = epsilon
        self.gamma = self.params.get("gamma", grad_req="write" if scale else "null",
                                     shape=(in_channels,), init=gamma_initializer,
                                     allow_deferred_init=True)
        self.beta = self.params.get("beta", grad_req="write" if center else "null",
                                    shape=(in_channels,), init=beta_initializer,
                                    allow_deferred_init=True)

    def hybrid_forward(self, F, x, gamma, beta):
        if self._axis == 1:
            return F.InstanceNorm(x, gamma, beta, name="fwd", eps=self._epsilon)
        x = x.swapaxes(1, self._axis)
        return F.InstanceNorm(x, gamma, beta, name="fwd", eps=self._epsilon).swapaxes(1, self._axis)

    def __repr__(self):
        return _norm_repr(self)


class GroupNorm(HybridBlock):
    """Splits the channels (axis 1) into `num_groups` groups, normalizes each (sample, group),
    then applies one gamma/beta per group (MXNet 1.x: shape (num_groups,))."""

    def __init__(self, num_groups=1, epsilon=1e-5, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self._kwargs = {"eps": epsilon, "num_groups": num_groups, "center": center, "scale": scale}
        self._num_groups = num_groups
        self._epsilon = epsilon
        self._center = center
        self._scale = scale
        self.gamma = self.params.get("gamma", grad_req="write" if scale else "null",
                                     shape=(num_groups,), init=gamma_initializer,
                                     allow_deferred_init=True)
        self.beta = self.params.get("beta", grad_req="write" if center else "null",
                                    shape=(num_groups,), init=beta_initializer,
                                    allow_deferred_init=True)

    def hybrid_forward(self, F, data, gamma, beta):
        return F.GroupNorm(data, gamma=gamma, beta=beta, num_groups=self._num_groups,
                           eps=self._epsilon)

    def __repr__(self):
        return _norm_repr(self)
