"""Variable-length sequence operators: `SequenceMask`, `SequenceLast`, `SequenceReverse`.

`data` holds a batch of sequences with time on `axis` (0: (T, B, ...), 1: (B, T, ...)) and the batch
on the other of the first two axes. With `use_sequence_length`, a second input `sequence_length`
(shape (B,), any numeric dtype) gives each sequence's length; otherwise every sequence has length T.
Semantics are MXNet 1.9.1's: SequenceMask sets steps t >= length to `value`, SequenceLast picks step
length - 1, SequenceReverse reverses the first `length` steps and leaves the rest in place.
No gradient flows to `sequence_length`.
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Float, Int, Param
from .registry import LikeInput, Op, register

_PARAMS = {"use_sequence_length": Param(Bool, False, "read lengths from the `sequence_length` input"),
           "axis": Param(Int, 0, "the time axis (0 or 1)")}


class _SequenceOp(Op):
    inputs = ("data", "sequence_length")
    params = _PARAMS

    def input_names(self, attrs):
        return ["data", "sequence_length"] if attrs["use_sequence_length"] else ["data"]

    def _axes(self, attrs, ndim: int) -> tuple[int, int]:
        """(time axis, batch axis) after validating the rank and `axis`."""
        if attrs["axis"] not in (0, 1):
            raise MXNetError(f"{self.name}: axis must be 0 or 1, got {attrs['axis']}")
        if ndim < 2:
            raise MXNetError(f"{self.name}: data must have at least 2 dims (time and batch), got {ndim}")
        return attrs["axis"], 1 - attrs["axis"]

    def _length_shape(self, attrs, in_shapes):
        data = in_shapes[0]
        if not attrs["use_sequence_length"]:
            return []
        lens = in_shapes[1]
        if data is None:
            return [lens]
        _, b_ax = self._axes(attrs, len(data))
        if lens is not None and (len(lens) != 1 or (lens[0] and data[b_ax] and lens[0] != data[b_ax])):
            raise MXNetError(f"{self.name}: shape mismatch for input 'sequence_length': expected "
                             f"({data[b_ax]},), got {tuple(lens)}")
        return [(data[b_ax],)]

    def infer_shape(self, attrs, in_shapes):
        data = in_shapes[0]
        if data is not None:
            self._axes(attrs, len(data))
        return [data] + self._length_shape(attrs, in_shapes), [data]

    def infer_type(self, attrs, in_types):
        t = in_types[0]
        ins = [t]
        if attrs["use_sequence_length"]:
            ins.append(in_types[1] if in_types[1] is not None else t)
        return ins, [t]

    def lengths(self, attrs, inputs) -> np.ndarray:
        """Per-batch lengths as int64, validated against the time dimension."""
        data = inputs[0]
        t_ax, b_ax = self._axes(attrs, data.ndim)
        steps = data.shape[t_ax]
        if not attrs["use_sequence_length"]:
            return np.full(data.shape[b_ax], steps, dtype=np.int64)
        lens = inputs[1]
        if lens.shape != (data.shape[b_ax],):
            raise MXNetError(f"{self.name}: shape mismatch for input 'sequence_length': expected "
                             f"({data.shape[b_ax]},), got {lens.shape}")
        out = lens.astype(np.int64)
        if (out < 0).any() or (out > steps).any():
            raise MXNetError(f"{self.name}: sequence_length values must lie in [0, {steps}], got {lens.tolist()}")
        return out

    def _time_major(self, attrs, x: np.ndarray) -> np.ndarray:
        """View of `x` as (T, B, ...)."""
        return x if attrs["axis"] == 0 else np.swapaxes(x, 0, 1)

    def _no_length_grad(self, F, attrs, inputs) -> list:
        return [F.zeros_like(inputs[1])] if attrs["use_sequence_length"] else []


@register("SequenceMask")
class SequenceMask(_SequenceOp):
    """Steps at or beyond each sequence's length set to `value`."""
    params = {**_PARAMS, "value": Param(Float, 0.0, "the value of masked steps")}

    def compute(self, attrs, inputs, ctx):
        lens = self.lengths(attrs, inputs)
        out = np.array(inputs[0], copy=True)
        tm = self._time_major(attrs, out)
        steps = np.arange(tm.shape[0])[:, None]
        mask = steps >= lens[None, :]                      # (T, B)
        tm[mask] = inputs[0].dtype.type(attrs["value"])
        return [np.ascontiguousarray(out)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        extra = [inputs[1]] if attrs["use_sequence_length"] else []
        dx = F.SequenceMask(ograds[0], *extra, use_sequence_length=attrs["use_sequence_length"],
                            axis=attrs["axis"], value=0.0)
        return [dx] + self._no_length_grad(F, attrs, inputs)


@register("SequenceReverse")
class SequenceReverse(_SequenceOp):
    """The first `length` steps of each sequence reversed; later steps unchanged."""

    def compute(self, attrs, inputs, ctx):
        lens = self.lengths(attrs, inputs)
        out = np.array(inputs[0], copy=True)
        src, dst = self._time_major(attrs, inputs[0]), self._time_major(attrs, out)
        for b, n in enumerate(lens):
            if n:
                dst[:n, b] = src[:n, b][::-1]
        return [np.ascontiguousarray(out)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        extra = [inputs[1]] if attrs["use_sequence_length"] else []
        dx = F.SequenceReverse(ograds[0], *extra, use_sequence_length=attrs["use_sequence_length"],
                               axis=attrs["axis"])
        return [dx] + self._no_length_grad(F, attrs, inputs)


@register("SequenceLast")
class SequenceLast(_SequenceOp):
    """Step `length - 1` of each sequence: data without its time axis."""

    def infer_shape(self, attrs, in_shapes):
        data = in_shapes[0]
        if data is None:
            return list(in_shapes), [None]
        t_ax, _ = self._axes(attrs, len(data))
        out = tuple(d for i, d in enumerate(data) if i != t_ax)
        return [data] + self._length_shape(attrs, in_shapes), [out]

    def compute(self, attrs, inputs, ctx):
        lens = self.lengths(attrs, inputs)
        tm = self._time_major(attrs, inputs[0])
        idx = np.maximum(lens - 1, 0)
        return [np.ascontiguousarray(tm[idx, np.arange(tm.shape[1])])]

    def grad(self, F, attrs, inputs, outputs, ograds):
        ins = [ograds[0]] + list(inputs)
        dx = F.apply("_backward_SequenceLast", ins, use_sequence_length=attrs["use_sequence_length"],
                     axis=attrs["axis"])[0]
        return [dx] + self._no_length_grad(F, attrs, inputs)


@register("_backward_SequenceLast")
class BackwardSequenceLast(_SequenceOp):
    """d data of SequenceLast: `ograd` scattered to step length - 1, zeros elsewhere."""
    inputs = ("ograd", "data", "sequence_length")
    hidden = True

    def input_names(self, attrs):
        return ["ograd"] + super().input_names(attrs)

    infer_shape = LikeInput.infer_shape
    infer_type = LikeInput.infer_type
    like = 1

    def compute(self, attrs, inputs, ctx):
        dy, rest = inputs[0], inputs[1:]
        lens = self.lengths(attrs, rest)
        out = np.zeros_like(rest[0])
        tm = self._time_major(attrs, out)
        tm[np.maximum(lens - 1, 0), np.arange(tm.shape[1])] = dy
        return [out]
