"""Statistics and scans: `moments` (mean and variance), `cumsum`, `_histogram`.

`moments` reduces over `axes` (all axes when None) and returns (mean, var) with the population
variance (divide by N), as MXNet's. `cumsum` is the inclusive prefix sum along `axis` (of the
flattened array when None). `_histogram` counts the values of `data` per bin: either `bin_cnt`
equal bins over `range` (the data's min..max when no range), or the edges given as the `bins`
input; counts are int64, edges have the data's dtype, and values outside the edges are not counted
(the last bin includes its right edge), as numpy's and MXNet's histogram.
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Dtype, FloatTuple, Int, Optional, Param, Shape
from .registry import LikeInput, Op, register


def _reduce_axes(op: str, axes, ndim: int) -> tuple:
    if axes is None:
        return tuple(range(ndim))
    out = []
    for a in axes:
        b = a + ndim if a < 0 else a
        if not 0 <= b < ndim:
            raise MXNetError(f"{op}: axis {a} is out of bounds for array of dimension {ndim}")
        if b in out:
            raise MXNetError(f"{op}: duplicate axis {a} in axes {tuple(axes)}")
        out.append(b)
    return tuple(sorted(out))


def _reduced_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    out = tuple(d for i, d in enumerate(shape) if i not in axes)
    return out if out else (1,)


@register("moments", aliases=("_moments",))
class Moments(Op):
    """(mean, variance) of `data` over `axes` (all when None); variance divides by N."""
    params = {"axes": Param(Optional(Shape), None), "keepdims": Param(Bool, False)}
    outputs = ("mean", "var")

    def infer_shape(self, attrs, in_shapes):
        s = in_shapes[0]
        if s is None:
            return [None], [None, None]
        axes = _reduce_axes(self.name, attrs["axes"], len(s))
        out = _reduced_shape(tuple(s), axes, attrs["keepdims"])
        return [tuple(s)], [out, out]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[0], in_types[0]]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        axes = _reduce_axes(self.name, attrs["axes"], x.ndim)
        out_shape = _reduced_shape(x.shape, axes, attrs["keepdims"])
        mean = x.mean(axis=axes, keepdims=True, dtype=np.float64 if x.dtype == np.float64 else np.float32)
        var = np.square(x - mean).mean(axis=axes, keepdims=True)
        return [np.ascontiguousarray(mean.astype(x.dtype).reshape(out_shape)),
                np.ascontiguousarray(var.astype(x.dtype).reshape(out_shape))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        # d/dx: dmean / N + dvar * 2 (x - mean) / N
        return F.apply("_backward_moments", [ograds[0], ograds[1], inputs[0], outputs[0]], **attrs)


@register("_backward_moments")
class BackwardMoments(LikeInput):
    """d data of `moments` from (d mean, d var, data, mean)."""
    like = 2
    inputs = ("dmean", "dvar", "data", "mean")
    params = Moments.params
    hidden = True

    def compute(self, attrs, inputs, ctx):
        dmean, dvar, x, mean = inputs
        axes = _reduce_axes(self.name, attrs["axes"], x.ndim)
        kept = _reduced_shape(x.shape, axes, True)
        n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
        dm, dv, m = dmean.reshape(kept), dvar.reshape(kept), mean.reshape(kept)
        return [np.ascontiguousarray((dm / n + dv * 2.0 * (x - m) / n).astype(x.dtype))]


@register("cumsum", aliases=("_np_cumsum",))
class Cumsum(Op):
    """Inclusive prefix sums along `axis` (of the flattened array when None)."""
    inputs = ("a",)
    params = {"axis": Param(Optional(Int), None), "dtype": Param(Optional(Dtype), None)}

    def _axis(self, attrs, ndim: int):
        a = attrs["axis"]
        if a is None:
            return None
        b = a + ndim if a < 0 else a
        if not 0 <= b < ndim:
            raise MXNetError(f"{self.name}: axis {a} is out of bounds for array of dimension {ndim}")
        return b

    def infer_shape(self, attrs, in_shapes):
        s = in_shapes[0]
        if s is None:
            return [None], [None]
        self._axis(attrs, len(s))
        if attrs["axis"] is None:
            n = int(np.prod(s)) if all(s) else 0
            return [tuple(s)], [(n,)]
        return [tuple(s)], [tuple(s)]

    def infer_type(self, attrs, in_types):
        return list(in_types), [attrs["dtype"] or in_types[0]]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        axis = self._axis(attrs, x.ndim)
        dtype = attrs["dtype"] or x.dtype
        src = x.reshape(-1) if axis is None else x
        return [np.ascontiguousarray(np.cumsum(src, axis=0 if axis is None else axis, dtype=dtype))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return F.apply("_backward_cumsum", [ograds[0], inputs[0]], axis=attrs["axis"])


@register("_backward_cumsum")
class BackwardCumsum(LikeInput):
    """d a of cumsum: suffix sums of the output gradient, in the input's shape and dtype."""
    like = 1
    inputs = ("ograd", "a")
    params = {"axis": Param(Optional(Int), None)}
    hidden = True

    def compute(self, attrs, inputs, ctx):
        dy, x = inputs
        axis = 0 if attrs["axis"] is None else attrs["axis"]
        flat = dy.reshape(-1) if attrs["axis"] is None else dy
        rev = np.flip(np.cumsum(np.flip(flat, axis), axis=axis), axis)
        return [np.ascontiguousarray(rev.reshape(x.shape).astype(x.dtype))]


@register("_histogram")
class Histogram(Op):
    """(counts, bin edges) of `data`: `bin_cnt` equal bins over `range`, or the edges `bins`."""
    inputs = ("data", "bins")
    outputs = ("histogram", "bin_edges")
    params = {"bin_cnt": Param(Optional(Int), None, "number of equal bins (no `bins` input)"),
              "range": Param(Optional(FloatTuple), None, "(low, high) of the equal bins")}
    differentiable = False

    def input_names(self, attrs):
        return ["data"] if attrs["bin_cnt"] is not None else ["data", "bins"]

    def _check(self, attrs):
        cnt, rng = attrs["bin_cnt"], attrs["range"]
        if cnt is not None and cnt < 1:
            raise MXNetError(f"{self.name}: bin_cnt must be at least 1, got {cnt}")
        if rng is not None and (len(rng) != 2 or not rng[0] < rng[1]):
            raise MXNetError(f"{self.name}: range must be (low, high) with low < high, got {rng}")

    def infer_shape(self, attrs, in_shapes):
        self._check(attrs)
        if attrs["bin_cnt"] is not None:
            n = attrs["bin_cnt"]
            return list(in_shapes), [(n,), (n + 1,)]
        bins = in_shapes[1]
        if bins is None:
            return list(in_shapes), [None, None]
        if len(bins) != 1:
            raise MXNetError(f"{self.name}: bins must be a 1-D array of edges, got shape {tuple(bins)}")
        n = bins[0]
        return list(in_shapes), [(n - 1 if n else 0,), (n,)]

    def infer_type(self, attrs, in_types):
        return list(in_types), ["int64", in_types[0]]

    def compute(self, attrs, inputs, ctx):
        self._check(attrs)
        x = inputs[0].reshape(-1)
        if attrs["bin_cnt"] is not None:
            rng = attrs["range"]
            if rng is None:
                rng = (float(x.min()), float(x.max())) if x.size else (0.0, 1.0)
            counts, edges = np.histogram(x, bins=attrs["bin_cnt"], range=rng)
        else:
            edges_in = inputs[1]
            if edges_in.ndim != 1 or edges_in.size < 2:
                raise MXNetError(f"{self.name}: bins must be a 1-D array of at least 2 edges, "
                                 f"got shape {edges_in.shape}")
            counts, edges = np.histogram(x, bins=edges_in)
        return [counts.astype(np.int64), np.ascontiguousarray(edges.astype(inputs[0].dtype))]
