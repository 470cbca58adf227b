"""The fused recurrent op `RNN` (rnn_relu, rnn_tanh, lstm, gru; layers, directions, initial and
final states, dropout between layers) and its gradient `_backward_RNN`, as calls into the
kernel library (runtime/nn/rnn.c: one GEMM for every step's input projection, one parallel
pass per step for the recurrent GEMM columns and the gate math of a block of hidden units,
float32). The forward writes its gates and states into the op's hidden `reserve` output, which
the backward reuses instead of recomputing the forward (a reserve without the kernel's header,
e.g. from the numpy reference, makes it recompute).

Dropout between layers in training draws its masks with the Dropout kernel's generator
(`lower_dropout.mask_call`) into the op's hidden mask output, which the RNN kernel then
applies and the gradient replays; in inference the masks are ones and the kernel skips them.
A graph whose mode is chosen per call (`is_train` None) keeps the Python step when it has
dropout between layers. Other dtypes, projections, sequence lengths and state clipping keep
the op's numpy reference (symjit/ops/rnn.py).
"""
from __future__ import annotations

import ctypes
import os


from ...ops.rnn import has_dropout_mask, reserve_size
from .graph import register_lowering
from .lower_dropout import mask_call
from .lower_gemm import I64, NativeCall, desc_words, emit_native, is_f32, shape_of
from .lower_shape import fill_call

__all__ = ["RnnDesc", "RNN_MODES", "ENABLED"]

#: whether RNN and _backward_RNN lower natively (`SYMJIT_NATIVE_RNN=0`: the numpy reference
#: runs as a Python node; read at lowering time, so benchmarks compare both in one process)
ENABLED = os.environ.get("SYMJIT_NATIVE_RNN", "1") != "0"

#: symjit_rnn_desc.mode values (runtime/nnkernels.h enum symjit_rnn_mode)
RNN_MODES = {"rnn_relu": 0, "rnn_tanh": 1, "lstm": 2, "gru": 3}


class RnnDesc(ctypes.Structure):
    """runtime/nnkernels.h `symjit_rnn_desc` (checked against the header by
    tests/runtime/test_kernel_header.py)."""
    _fields_ = [("mode", I64), ("seq", I64), ("batch", I64), ("input", I64), ("hidden", I64), ("layers", I64),
                ("dirs", I64), ("reserve", I64)]


def _native_attrs(attrs) -> bool:
    return (attrs.get("projection_size") is None and attrs.get("lstm_state_clip_min") is None
            and attrs.get("lstm_state_clip_max") is None and not attrs.get("lstm_state_clip_nan")
            and not attrs.get("use_sequence_length"))


def _desc(attrs, data) -> tuple | None:
    """The descriptor words for data (T, N, C), or None when a dimension is empty."""
    t, n, c = shape_of(data)
    if min(t, n, c, attrs["state_size"], attrs["num_layers"]) <= 0:
        return None
    d = RnnDesc(RNN_MODES[attrs["mode"]], t, n, c, attrs["state_size"], attrs["num_layers"],
                2 if attrs["bidirectional"] else 1, reserve_size(attrs, t, n, c))
    return desc_words(d)


@register_lowering("RNN")
def lower_rnn(node, ctx):
    attrs = node.attrs
    lstm = attrs["mode"] == "lstm"
    n_in = 4 if lstm else 3
    if not ENABLED or not _native_attrs(attrs) or len(node.inputs) != n_in or not is_f32(*node.inputs, *node.outputs):
        return None
    desc = _desc(attrs, node.inputs[0])
    if desc is None:
        return None
    x, params, h0 = node.inputs[:3]
    c0 = node.inputs[3] if lstm else None
    outs = list(node.outputs)
    reserve = outs.pop()
    if shape_of(reserve) != (reserve_size(attrs, *shape_of(x)),):
        return None
    calls, masks = [], None
    if has_dropout_mask(attrs):
        mask_out = outs.pop()
        if ctx.is_train is None:
            return None
        if ctx.is_train:
            calls.append(mask_call(ctx, mask_out, 1.0 - float(attrs["p"])))
            masks = mask_out
        else:
            calls.append(fill_call(ctx, mask_out, 1.0))
    y = outs[0]
    hy = outs[1] if len(outs) > 1 else None
    cy = outs[2] if len(outs) > 2 else None
    arg = (lambda v: ("v", v) if v is not None else ("null",))
    native = emit_native(ctx, [NativeCall("symjit_nn_rnn", desc, [
        ("desc",), ("v", x), ("v", params), ("v", h0), arg(c0), arg(masks), ("v", y), arg(hy), arg(cy),
        ("v", reserve)])])
    return calls + native


@register_lowering("_backward_RNN")
def lower_rnn_backward(node, ctx):
    attrs = node.attrs
    lstm = attrs["mode"] == "lstm"
    k = 3 if lstm else 2
    n_fwd = 4 if lstm else 3
    want = k + n_fwd + int(has_dropout_mask(attrs)) + 1
    if not ENABLED or not _native_attrs(attrs) or len(node.inputs) != want or not is_f32(*node.inputs, *node.outputs):
        return None
    dy, dhy = node.inputs[:2]
    dcy = node.inputs[2] if lstm else None
    x, params, h0 = node.inputs[k:k + 3]
    c0 = node.inputs[k + 3] if lstm else None
    masks = node.inputs[k + n_fwd] if has_dropout_mask(attrs) else None
    reserve = node.inputs[-1]
    desc = _desc(attrs, x)
    if desc is None:
        return None
    dx, dparams, dh0 = node.outputs[:3]
    dc0 = node.outputs[3] if lstm else None
    arg = (lambda v: ("v", v) if v is not None else ("null",))
    return emit_native(ctx, [NativeCall("symjit_nn_rnn_bwd", desc, [
        ("desc",), ("v", x), ("v", params), ("v", h0), arg(c0), arg(masks), ("v", reserve), ("v", dy), ("v", dhy),
        arg(dcy),
        ("v", dx), ("v", dparams), ("v", dh0), arg(dc0)])])
