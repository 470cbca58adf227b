"""Signal contrib operators of MXNet 1.9.1: `_contrib_fft`, `_contrib_ifft`, `_contrib_count_sketch`
(GPU-only in MXNet; the same semantics here on every device).

fft: real data (N, d) or (N1, N2, N3, d) -> (..., 2d), the unnormalized DFT along the last axis
interleaved as [real0, imag0, real1, imag1, ...]. ifft: interleaved complex data (..., 2d) ->
(..., d), the real part of the *unnormalized* inverse DFT (MXNet leaves the 1/d out, so
ifft(fft(x)) = d * x). The two are each other's transpose, so each one's gradient is the other
applied to the output gradient. Both compute in float64 and round to the input dtype.

count_sketch: data (N, in_dim), hash indices h (1, in_dim) in [0, out_dim), signs s (1, in_dim):
out[n, h[i]] += s[i] * data[n, i], shape (N, out_dim). The gradient of data is
s[i] * ograd[n, h[i]]; h and s get none (zeros).
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Int, Param
from .registry import Op, merge_shape, register

_COMPUTE_SIZE = {"compute_size": Param(Int, 128, "largest sub-batch transformed at once (no effect on results)")}


def _err(op: str, msg: str) -> MXNetError:
    return MXNetError(f"{op}: {msg}")


class _Transform(Op):
    """Shared rules of fft / ifft: 2-D or 4-D floating-point data, the last axis transformed."""
    params = _COMPUTE_SIZE
    kernel = "fft"
    #: the other transform (this one's gradient)
    adjoint: str = ""

    def out_last(self, n: int) -> int:
        raise NotImplementedError

    def infer_shape(self, attrs, in_shapes):
        d = in_shapes[0]
        if d is None:
            return [d], [None]
        if len(d) not in (2, 4):
            raise _err(self.name, f"data must be 2-D (N, d) or 4-D (N1, N2, N3, d), got shape {tuple(d)}")
        return [tuple(d)], [tuple(d[:-1]) + (self.out_last(d[-1]),)]

    def infer_type(self, attrs, in_types):
        t = in_types[0]
        if t is not None and np.dtype(t).kind != "f":
            raise _err(self.name, f"data must be floating point, got {t}")
        return [t], [t]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.apply(self.adjoint, [ograds[0]], **attrs)[0]]


@register("_contrib_fft")
class FFT(_Transform):
    """Unnormalized DFT of real data along the last axis, real and imaginary parts interleaved."""
    adjoint = "_contrib_ifft"

    def out_last(self, n):
        return 2 * n

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        self.infer_shape(attrs, [x.shape])
        c = np.fft.fft(x.astype(np.float64), axis=-1)
        out = np.stack([c.real, c.imag], axis=-1).reshape(x.shape[:-1] + (2 * x.shape[-1],))
        return [out.astype(x.dtype)]


@register("_contrib_ifft")
class IFFT(_Transform):
    """Real part of the unnormalized inverse DFT of interleaved complex data (last axis)."""
    adjoint = "_contrib_fft"

    def out_last(self, n):
        if n % 2:
            raise _err(self.name, f"the last dimension must be even (real, imaginary pairs), got {n}")
        return n // 2

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        self.infer_shape(attrs, [x.shape])
        z = x[..., 0::2].astype(np.float64) + 1j * x[..., 1::2].astype(np.float64)
        d = z.shape[-1]
        return [(np.fft.ifft(z, axis=-1).real * d).astype(x.dtype)]


@register("_contrib_count_sketch")
class CountSketch(Op):
    """Count sketch of data rows: out[n, h[i]] += s[i] * data[n, i]."""
    inputs = ("data", "h", "s")
    params = {
        "out_dim": Param(Int, doc="dimension of the sketch"),
        "processing_batch_size": Param(Int, 32, "rows processed at once (no effect on results)"),
    }
    kernel = "scatter"

    def infer_shape(self, attrs, in_shapes):
        d, h, s = in_shapes
        if attrs["out_dim"] < 1:
            raise _err(self.name, f"out_dim must be positive, got {attrs['out_dim']}")
        if d is not None and len(d) != 2:
            raise _err(self.name, f"data must be 2-D (N, in_dim), got shape {tuple(d)}")
        for name, v in (("h", h), ("s", s)):
            if v is not None and len(v) != 2:
                raise _err(self.name, f"{name} must have shape (1, in_dim), got {tuple(v)}")
        row = (1, d[1]) if d is not None else None
        h = merge_shape(self.name, "input 'h'", row, h)
        s = merge_shape(self.name, "input 's'", h, s)
        h = merge_shape(self.name, "input 'h'", s, h)
        if h is not None and h[0] not in (0, 1):
            raise _err(self.name, f"h and s must have shape (1, in_dim), got {tuple(h)}")
        if d is not None and h is not None:
            d = merge_shape(self.name, "input 'data'", (d[0], h[1]), d)
        return [d, h, s], [None if d is None else (d[0], attrs["out_dim"])]

    def infer_type(self, attrs, in_types):
        t = in_types[0]
        if t is not None and np.dtype(t).kind != "f":
            raise _err(self.name, f"data must be floating point, got {t}")
        return [t, in_types[1] or t, in_types[2] or t], [t]

    def compute(self, attrs, inputs, ctx):
        data, h, s = inputs
        self.infer_shape(attrs, [x.shape for x in inputs])
        idx = h.reshape(-1).astype(np.int64)
        bad = (idx < 0) | (idx >= attrs["out_dim"])
        if bad.any():
            raise _err(self.name, f"hash index {int(idx[bad][0])} is out of range [0, {attrs['out_dim']})")
        out = np.zeros((data.shape[0], attrs["out_dim"]), dtype=np.float64)
        np.add.at(out.T, idx, (data.astype(np.float64) * s.reshape(1, -1)).T)
        return [out.astype(data.dtype)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        data, h, s = inputs
        picked = F.take(ograds[0], F.reshape(h, shape=(-1,)), axis=1)
        return [F.broadcast_mul(picked, s), F.zeros_like(h), F.zeros_like(s)]
