"""Image operators: MXNet's `_image_to_tensor` and `_image_normalize` (`mx.nd.image.*`,
`mx.sym.image.*`, the kernels behind Gluon's `transforms.ToTensor` / `transforms.Normalize`).

  * `_image_to_tensor(data)`: an image (H, W, C) or a batch (N, H, W, C) of any dtype
    (typically uint8 in [0, 255]) becomes float32 (C, H, W) / (N, C, H, W) with values / 255.
  * `_image_normalize(data, mean, std)`: a float tensor (C, H, W) or (N, C, H, W) with C in
    {1, 3}; channel c becomes (x - mean[c]) / std[c]; a one-element mean/std applies to every
    channel. Output float32 (MXNet 1.9.1's type rule).

Gradients: to_tensor's is the inverse layout change scaled by 1/255 (MXNet registers a plain
`_copy`, whose shape does not even match its input; this is the derivative of the forward);
normalize's is ograd / std[c] per channel (`_backward_image_normalize`, as MXNet).
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import FloatTuple, Param
from .registry import Op, register

__all__ = ["channel_values"]


def _err(op: str, msg: str) -> MXNetError:
    return MXNetError(f"{op}: {msg}")


def _dtype_name(x) -> str | None:
    """dtype name of an NDArray, numpy array or IR value (None when unknown)."""
    return None if x.dtype is None else np.dtype(x.dtype).name


def _to_tensor_shape(op: str, shape: tuple) -> tuple:
    """(H, W, C) -> (C, H, W); (N, H, W, C) -> (N, C, H, W)."""
    if len(shape) == 3:
        h, w, c = shape
        return (c, h, w)
    if len(shape) == 4:
        n, h, w, c = shape
        return (n, c, h, w)
    raise _err(op, f"input image must have shape (height, width, channels) or "
                   f"(N, height, width, channels), but got {tuple(shape)}")


def _to_image_axes(ndim: int) -> tuple:
    """The transpose that undoes to_tensor's layout change (CHW -> HWC, NCHW -> NHWC)."""
    return (1, 2, 0) if ndim == 3 else (0, 2, 3, 1)


@register("_image_to_tensor")
class ToTensor(Op):
    """Convert an image (H, W, C) or batch (N, H, W, C) with values in [0, 255] to a float32
    tensor (C, H, W) / (N, C, H, W) with values divided by 255."""
    inputs = ("data",)
    kernel = "shape"

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        return [tuple(d)], [_to_tensor_shape(self.name, tuple(d))]

    def infer_type(self, attrs, in_types):
        return list(in_types), ["float32"]

    def compute(self, attrs, inputs, ctx):
        (x,) = inputs
        _to_tensor_shape(self.name, x.shape)
        axes = (2, 0, 1) if x.ndim == 3 else (0, 3, 1, 2)
        out = np.transpose(x, axes).astype(np.float32) / np.float32(255.0)
        return [np.ascontiguousarray(out, dtype=np.float32)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        (x,) = inputs
        dt = _dtype_name(x)
        if dt is not None and not np.issubdtype(np.dtype(dt), np.floating):
            return [F.zeros_like(x)]  # integer pixels carry no gradient
        back = F.transpose(ograds[0], axes=_to_image_axes(len(ograds[0].shape)))
        scaled = F._div_scalar(back, scalar=255.0)
        return [scaled if dt in (None, "float32") else F.Cast(scaled, dtype=dt)]


def _channels(op: str, shape: tuple) -> int:
    """Channel count of a (C, H, W) or (N, C, H, W) tensor; C must be 1 or 3 (MXNet)."""
    if len(shape) == 3:
        c, where = shape[0], "first"
    elif len(shape) == 4:
        c, where = shape[1], "second"
    else:
        raise _err(op, f"input tensor must have shape (channels, height, width), or "
                       f"(N, channels, height, width), but got {tuple(shape)}")
    if c not in (0, 1, 3):
        raise _err(op, f"the {where} dimension of input tensor must be the channel dimension "
                       f"with either 1 or 3 elements, but got input with shape {tuple(shape)}")
    return c


def _check_stats(op: str, attrs, shape: tuple) -> None:
    c = _channels(op, shape)
    for key in ("mean", "std"):
        n = len(attrs[key])
        if c and n not in (1, c):
            raise _err(op, f"invalid {key} for input with shape {tuple(shape)}: {key} must have "
                           f"either 1 or {c} elements, but got {attrs[key]}")


def channel_values(values: tuple, channels: int, ndim: int) -> np.ndarray:
    """Per-channel constants shaped to broadcast against a (C,H,W) / (N,C,H,W) tensor."""
    v = np.asarray(values if len(values) > 1 else values * channels, dtype=np.float32)
    return v.reshape((channels, 1, 1) if ndim == 3 else (1, channels, 1, 1))


_NORMALIZE_PARAMS = {
    "mean": Param(FloatTuple, (0.0, 0.0, 0.0, 0.0), "Sequence of means for each channel. Default value is 0."),
    "std": Param(FloatTuple, (1.0, 1.0, 1.0, 1.0),
                 "Sequence of standard deviations for each channel. Default value is 1."),
}


@register("_image_normalize")
class Normalize(Op):
    """Normalize a tensor (C, H, W) or (N, C, H, W): out[c] = (in[c] - mean[c]) / std[c]."""
    inputs = ("data",)
    params = _NORMALIZE_PARAMS
    kernel = "elementwise"
    inplace = {0: 0}

    def infer_shape(self, attrs, in_shapes):
        (d,) = in_shapes
        if d is None:
            return [None], [None]
        _check_stats(self.name, attrs, tuple(d))
        return [tuple(d)], [tuple(d)]

    def infer_type(self, attrs, in_types):
        return list(in_types), ["float32"]

    def compute(self, attrs, inputs, ctx):
        (x,) = inputs
        _check_stats(self.name, attrs, x.shape)
        c = x.shape[0] if x.ndim == 3 else x.shape[1]
        mean = channel_values(attrs["mean"], c, x.ndim)
        std = channel_values(attrs["std"], c, x.ndim)
        out = (x.astype(np.float32) - mean) / std
        return [np.ascontiguousarray(out, dtype=np.float32)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        (x,) = inputs
        g = F._backward_image_normalize(ograds[0], x, mean=attrs["mean"], std=attrs["std"])
        dt = _dtype_name(x)
        return [g if dt in (None, "float32") else F.Cast(g, dtype=dt)]


@register("_backward_image_normalize")
class BackwardNormalize(Op):
    """Gradient of `_image_normalize`: ograd[c] / std[c] (`data` gives the layout)."""
    inputs = ("ograd", "data")
    params = _NORMALIZE_PARAMS
    kernel = "elementwise"
    hidden = True

    def infer_shape(self, attrs, in_shapes):
        g, d = in_shapes
        shape = g if g is not None else d
        if shape is None:
            return [g, d], [None]
        _check_stats(self.name, attrs, tuple(shape))
        return [tuple(shape), tuple(shape)], [tuple(shape)]

    def infer_type(self, attrs, in_types):
        return list(in_types), ["float32"]

    def compute(self, attrs, inputs, ctx):
        g, x = inputs
        if g.shape != x.shape:
            raise _err(self.name, f"shape mismatch for input 'ograd': expected {x.shape}, got {g.shape}")
        _check_stats(self.name, attrs, x.shape)
        c = x.shape[0] if x.ndim == 3 else x.shape[1]
        std = channel_values(attrs["std"], c, x.ndim)
        return [np.ascontiguousarray(g.astype(np.float32) / std, dtype=np.float32)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        g, x = inputs
        return [F._backward_image_normalize(ograds[0], x, mean=attrs["mean"], std=attrs["std"]),
                F.zeros_like(x)]
