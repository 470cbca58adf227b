"""Embedding lowerings: the row gather `Embedding` and its scatter-add `_backward_Embedding`,
as calls into runtime/nnkernels.c (float32 weights; float32/float64/int32/int64 indices,
truncated toward zero and clipped to the vocabulary as symjit.ops.nn_conv does).

The gather copies whole rows, split over the thread pool by index; the scatter-add gives each
task a column range of the weight gradient, so no two tasks add into the same element.
"""
from __future__ import annotations

import numpy as np

from .graph import register_lowering
from .lower_gemm import emit_native, NativeCall, is_f32, shape_of

_INDEX_KINDS = {"float32": 0, "float64": 1, "int32": 2, "int64": 3}


def _index_kind(v) -> int | None:
    return _INDEX_KINDS.get(np.dtype(v.type.dtype).name) if v.type.known else None


@register_lowering("Embedding")
def lower_embedding(node, ctx):
    idx, w = node.inputs
    y = node.outputs[0]
    kind = _index_kind(idx)
    if kind is None or not is_f32(w, y):
        return None
    rows, dim = shape_of(w)
    n = int(np.prod(shape_of(idx), dtype=np.int64))
    if n == 0 or rows == 0 or dim == 0:
        return None
    return emit_native(ctx, [NativeCall("symjit_nn_embedding", (), [
        ("i64", n), ("i64", rows), ("i64", dim), ("i64", kind), ("v", idx), ("v", w), ("v", y)])])


@register_lowering("_backward_Embedding")
def lower_embedding_backward(node, ctx):
    dy, idx = node.inputs
    dw = node.outputs[0]
    kind = _index_kind(idx)
    if kind is None or not is_f32(dy, dw):
        return None
    rows, dim = shape_of(dw)
    n = int(np.prod(shape_of(idx), dtype=np.int64))
    if rows == 0 or dim == 0 or n == 0:
        return None
    return emit_native(ctx, [NativeCall("symjit_nn_embedding_bwd", (), [
        ("i64", n), ("i64", rows), ("i64", dim), ("i64", kind), ("v", idx), ("v", dy), ("v", dw)])])
