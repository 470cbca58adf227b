"""Interleaved multi-head attention products (MXNet 1.9.1's `_contrib_interleaved_matmul_*`).

Projections are interleaved per head: `queries_keys_values` is (L, B, H * 3 * D) viewed as
(L, B, H, 3, D) (q, k, v of each head side by side), `keys_values` (L, B, H * 2 * D) as
(L, B, H, 2, D). Scores are (B * H, Lq, Lk) = (q / sqrt(D)) k^T; the value products return
(Lq, B, H * D) = scores v, heads concatenated. Each op's gradient is one hidden backward node
computing the products' gradients.
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Int, Param
from .registry import Op, register

_HEADS = {"heads": Param(Int, doc="number of attention heads")}


def _split(op: str, x: np.ndarray, heads: int, parts: int) -> np.ndarray:
    """(L, B, H * parts * D) -> (parts, B * H, L, D)."""
    if x.ndim != 3 or x.shape[2] % (heads * parts):
        raise MXNetError(f"{op}: input of shape {x.shape} must be (L, B, heads * {parts} * head_dim) "
                         f"with heads={heads}")
    l, b, _ = x.shape
    d = x.shape[2] // (heads * parts)
    v = x.reshape(l, b, heads, parts, d).transpose(3, 1, 2, 0, 4)      # (parts, B, H, L, D)
    return v.reshape(parts, b * heads, l, d)


def _merge(parts: np.ndarray, l: int, b: int, heads: int) -> np.ndarray:
    """(parts, B * H, L, D) -> (L, B, H * parts * D): the inverse of `_split`."""
    p, _, _, d = parts.shape
    return parts.reshape(p, b, heads, l, d).transpose(3, 1, 2, 0, 4).reshape(l, b, heads * p * d)


def _heads_out(x: np.ndarray, b: int, heads: int) -> np.ndarray:
    """(B * H, L, D) -> (L, B, H * D)."""
    bh, l, d = x.shape
    return x.reshape(b, heads, l, d).transpose(2, 0, 1, 3).reshape(l, b, heads * d)


def _heads_in(y: np.ndarray, heads: int) -> np.ndarray:
    """(L, B, H * D) -> (B * H, L, D)."""
    l, b, hd = y.shape
    return y.reshape(l, b, heads, hd // heads).transpose(1, 2, 0, 3).reshape(b * heads, l, hd // heads)


def _t(x):
    return np.swapaxes(x, -1, -2)


class _Attention(Op):
    params = _HEADS

    def infer_type(self, attrs, in_types):
        ins, outs = super().infer_type(attrs, in_types)
        if outs[0] is not None and np.dtype(outs[0]).kind != "f":
            raise MXNetError(f"{self.name}: inputs must be floating point, got {outs[0]}")
        return ins, outs

    def grad(self, F, attrs, inputs, outputs, ograds):
        return F.apply(f"_backward_{self.name}", [ograds[0], *inputs], **attrs)


class _AttentionBackward(Op):
    params = _HEADS
    hidden = True
    n_in = 1

    def input_names(self, attrs):
        return ["ograd"] + [f"arg{i}" for i in range(self.n_in)]

    def num_outputs(self, attrs):
        return self.n_in

    def output_names(self, attrs):
        return [f"arg{i}_grad" for i in range(self.n_in)]

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), list(in_shapes[1:])

    def infer_type(self, attrs, in_types):
        return list(in_types), list(in_types[1:])


def _scores_shape(q, k, heads):
    if q is None or k is None:
        return None
    return (q[1] * heads, q[0], k[0])


@register("_contrib_interleaved_matmul_selfatt_qk")
class SelfattQK(_Attention):
    """Scores (B * H, L, L) = (q / sqrt(D)) k^T from interleaved q, k, v."""
    inputs = ("queries_keys_values",)

    def infer_shape(self, attrs, in_shapes):
        s = in_shapes[0]
        return [s], [_scores_shape(s, s, attrs["heads"])]

    def compute(self, attrs, inputs, ctx):
        x = inputs[0]
        q, k, _ = _split(self.name, x, attrs["heads"], 3)
        return [np.ascontiguousarray((q / np.sqrt(q.shape[-1]).astype(x.dtype)) @ _t(k)).astype(x.dtype)]


@register("_backward__contrib_interleaved_matmul_selfatt_qk")
class SelfattQKBackward(_AttentionBackward):
    def compute(self, attrs, inputs, ctx):
        dy, x = inputs
        q, k, v = _split(self.name, x, attrs["heads"], 3)
        scale = 1.0 / np.sqrt(q.shape[-1])
        parts = np.stack([dy @ k * scale, _t(dy) @ q * scale, np.zeros_like(v)])
        return [_merge(parts, x.shape[0], x.shape[1], attrs["heads"]).astype(x.dtype)]


@register("_contrib_interleaved_matmul_selfatt_valatt")
class SelfattValatt(_Attention):
    """(L, B, H * D) = attention v, from interleaved q, k, v and (B * H, L, L) attention."""
    inputs = ("queries_keys_values", "attention")

    def infer_shape(self, attrs, in_shapes):
        s, att = in_shapes
        if s is None:
            return [s, att], [None]
        return [s, _scores_shape(s, s, attrs["heads"])], [(s[0], s[1], s[2] // 3)]

    def compute(self, attrs, inputs, ctx):
        x, att = inputs
        _, _, v = _split(self.name, x, attrs["heads"], 3)
        return [np.ascontiguousarray(_heads_out(att @ v, x.shape[1], attrs["heads"])).astype(x.dtype)]


@register("_backward__contrib_interleaved_matmul_selfatt_valatt")
class SelfattValattBackward(_AttentionBackward):
    n_in = 2

    def compute(self, attrs, inputs, ctx):
        dy, x, att = inputs
        q, k, v = _split(self.name, x, attrs["heads"], 3)
        g = _heads_in(dy, attrs["heads"])
        parts = np.stack([np.zeros_like(q), np.zeros_like(k), _t(att) @ g])
        return [_merge(parts, x.shape[0], x.shape[1], attrs["heads"]).astype(x.dtype),
                (g @ _t(v)).astype(att.dtype)]


@register("_contrib_interleaved_matmul_encdec_qk")
class EncdecQK(_Attention):
    """Scores (B * H, Lq, Lk) = (q / sqrt(D)) k^T from queries and interleaved keys, values."""
    inputs = ("queries", "keys_values")

    def infer_shape(self, attrs, in_shapes):
        q, kv = in_shapes
        return [q, kv], [_scores_shape(q, kv, attrs["heads"])]

    def compute(self, attrs, inputs, ctx):
        qin, kv = inputs
        (q,) = _split(self.name, qin, attrs["heads"], 1)
        k, _ = _split(self.name, kv, attrs["heads"], 2)
        return [np.ascontiguousarray((q / np.sqrt(q.shape[-1]).astype(qin.dtype)) @ _t(k)).astype(qin.dtype)]


@register("_backward__contrib_interleaved_matmul_encdec_qk")
class EncdecQKBackward(_AttentionBackward):
    n_in = 2

    def compute(self, attrs, inputs, ctx):
        dy, qin, kv = inputs
        h = attrs["heads"]
        (q,) = _split(self.name, qin, h, 1)
        k, v = _split(self.name, kv, h, 2)
        scale = 1.0 / np.sqrt(q.shape[-1])
        dq = _merge((dy @ k * scale)[None], qin.shape[0], qin.shape[1], h)
        dkv = _merge(np.stack([_t(dy) @ q * scale, np.zeros_like(v)]), kv.shape[0], kv.shape[1], h)
        return [dq.astype(qin.dtype), dkv.astype(kv.dtype)]


@register("_contrib_interleaved_matmul_encdec_valatt")
class EncdecValatt(_Attention):
    """(Lq, B, H * D) = attention v, from interleaved keys, values and (B * H, Lq, Lk) attention."""
    inputs = ("keys_values", "attention")

    def infer_shape(self, attrs, in_shapes):
        kv, att = in_shapes
        if kv is None or att is None:
            return [kv, att], [None]
        return [kv, att], [(att[1], kv[1], kv[2] // 2)]

    def compute(self, attrs, inputs, ctx):
        kv, att = inputs
        _, v = _split(self.name, kv, attrs["heads"], 2)
        return [np.ascontiguousarray(_heads_out(att @ v, kv.shape[1], attrs["heads"])).astype(kv.dtype)]


@register("_backward__contrib_interleaved_matmul_encdec_valatt")
class EncdecValattBackward(_AttentionBackward):
    n_in = 2

    def compute(self, attrs, inputs, ctx):
        dy, kv, att = inputs
        h = attrs["heads"]
        k, v = _split(self.name, kv, h, 2)
        g = _heads_in(dy, h)
        dkv = _merge(np.stack([np.zeros_like(k), _t(att) @ g]), kv.shape[0], kv.shape[1], h)
        return [dkv.astype(kv.dtype), (g @ _t(v)).astype(att.dtype)]
