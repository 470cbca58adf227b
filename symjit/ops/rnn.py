"""MXNet's fused recurrent operator `RNN` (modes rnn_relu, rnn_tanh, lstm, gru) with packed
parameters, and `_rnn_param_concat`, which Gluon's fused layers use to pack them.

Layout of `parameters` (MXNet/cuDNN): first every weight, for layer l = 0..L-1 and direction
d = 0..D-1: W_i2h (G*H, in_l) then W_h2h (G*H, H); then every bias in the same order: b_i2h
(G*H,), b_h2h (G*H,). G = 1, 4 (gates i, f, c, o) or 3 (gates r, z, n with
n = act(W_in x + b_in + r * (W_hn h + b_hn))); in_0 = C, in_l = D*H. Layer l reads layer
l-1's output (directions concatenated); `p` is dropout between layers in training.

With dropout (p > 0, more than one layer) the op has one more, hidden, output: the dropout
masks between layers, (num_layers - 1, T, N, D*H), already scaled by 1 / (1 - p) (all ones
outside training). Last comes the hidden output `reserve` (`reserve_size` floats), MXNet's
reserve space: the native kernel (runtime/nn/rnn.c) writes there the gates and states its
backward reuses, behind a header naming the geometry; this reference leaves it zero, and a
backward that finds no header recomputes the forward. The reference gradient op
`_backward_RNN` recomputes the forward with the masks and back-propagates through time in
numpy. Not supported (MXNetError): projection_size, use_sequence_length,
state clipping.
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Count, Enum, Float, Int, Optional, Param
from .registry import Op, register

#: gates per cell type: the packed weights of a layer have gates * state_size rows
GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}

_PARAMS = {
    "state_size": Param(Int, doc="hidden units H"),
    "num_layers": Param(Count, doc="stacked layers L (bounded like a count: loops run per layer)"),
    "bidirectional": Param(Bool, False, "D = 2 directions"),
    "mode": Param(Enum("rnn_relu", "rnn_tanh", "lstm", "gru"), doc="cell type"),
    "p": Param(Float, 0.0, "dropout between layers (training)"),
    "state_outputs": Param(Bool, False, "also return the final states"),
    "projection_size": Param(Optional(Int), None, "LSTM projection (unsupported)"),
    "lstm_state_clip_min": Param(Optional(Float), None, "unsupported"),
    "lstm_state_clip_max": Param(Optional(Float), None, "unsupported"),
    "lstm_state_clip_nan": Param(Bool, False, "unsupported"),
    "use_sequence_length": Param(Bool, False, "unsupported"),
}


def _names(attrs) -> list[str]:
    names = ["data", "parameters", "state"]
    if attrs["mode"] == "lstm":
        names.append("state_cell")
    if attrs["use_sequence_length"]:
        names.append("sequence_length")
    return names


def _check_sizes(op: str, attrs):
    if attrs["num_layers"] < 1 or attrs["state_size"] < 1:
        raise MXNetError(f"{op}: num_layers and state_size must be at least 1, got "
                         f"{attrs['num_layers']} and {attrs['state_size']}")


def _check_supported(op: str, attrs):
    _check_sizes(op, attrs)
    for key in ("projection_size", "lstm_state_clip_min", "lstm_state_clip_max"):
        if attrs[key] is not None:
            raise MXNetError(f"{op}: {key} is not supported")
    if attrs["use_sequence_length"] or attrs["lstm_state_clip_nan"]:
        raise MXNetError(f"{op}: use_sequence_length and lstm_state_clip_nan are not supported")


def param_size(attrs, input_size: int) -> int:
    """Length of the packed parameter vector for data with `input_size` features."""
    g, h, n_l = GATES[attrs["mode"]], attrs["state_size"], attrs["num_layers"]
    d = 2 if attrs["bidirectional"] else 1
    size = 0
    for layer in range(n_l):
        ni = input_size if layer == 0 else d * h
        size += d * (g * h * (ni + h) + 2 * g * h)
    return size


def reserve_size(attrs, seq: int, batch: int, input_size: int) -> int:
    """Floats of the hidden `reserve` output: the native kernel's header and traces
    (runtime/nn/rnn.c rnn_reserve_floats; each block padded to 16 floats): every layer's
    output, one layer's projection biases, and per layer and direction the gates, the
    auxiliary row, hidden and cell states with an initial slot, and the packed W_h2h."""
    del input_size   # the traces hold the gates, not the layer input
    g, h, n_l = GATES[attrs["mode"]], attrs["state_size"], attrs["num_layers"]
    d = 2 if attrs["bidirectional"] else 1
    t, n = seq, batch

    def pad(v):
        return -(-v // 16) * 16
    per_dir = pad(t * n * g * h) + pad(t * n * h) + 2 * pad((t + 1) * n * h) + pad(h * g * h)
    return 16 + n_l * pad(t * n * d * h) + pad(d * g * h) + n_l * d * per_dir


def _unpack(attrs, flat: np.ndarray, input_size: int) -> dict:
    """{(layer, dir): (W_i2h, W_h2h, b_i2h, b_h2h)} views into the packed vector."""
    g, h, n_l = GATES[attrs["mode"]], attrs["state_size"], attrs["num_layers"]
    d = 2 if attrs["bidirectional"] else 1
    out, pos = {}, 0
    for layer in range(n_l):
        ni = input_size if layer == 0 else d * h
        for k in range(d):
            wi = flat[pos:pos + g * h * ni].reshape(g * h, ni)
            pos += g * h * ni
            wh = flat[pos:pos + g * h * h].reshape(g * h, h)
            pos += g * h * h
            out[(layer, k)] = [wi, wh]
    for layer in range(n_l):
        for k in range(d):
            out[(layer, k)] += [flat[pos:pos + g * h], flat[pos + g * h:pos + 2 * g * h]]
            pos += 2 * g * h
    return out


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _run_direction(mode, x, h, c, w):
    """Forward one direction over x (T, N, in) from (h, c); returns outputs (T, N, H), final
    (h, c) and the per-step cache for back-propagation. The input projection of every step is
    one matrix product; only the recurrent product runs step by step."""
    wi, wh, bi, bh = w
    t_len, n = x.shape[0], x.shape[1]
    gi_all = (x.reshape(t_len * n, -1) @ wi.T + bi).reshape(t_len, n, -1)
    outs, cache = [], []
    for t in range(t_len):
        gi = gi_all[t]
        gh = h @ wh.T + bh
        if mode in ("rnn_relu", "rnn_tanh"):
            a = gi + gh
            h_new = np.maximum(a, 0) if mode == "rnn_relu" else np.tanh(a)
            cache.append((h, h_new))
        elif mode == "lstm":
            i, f, g, o = np.split(gi + gh, 4, axis=1)
            i, f, g, o = _sig(i), _sig(f), np.tanh(g), _sig(o)
            c_new = f * c + i * g
            tc = np.tanh(c_new)
            h_new = o * tc
            cache.append((h, c, i, f, g, o, tc))
            c = c_new
        else:
            ir, iz, i_n = np.split(gi, 3, axis=1)
            hr, hz, hn = np.split(gh, 3, axis=1)
            r, z = _sig(ir + hr), _sig(iz + hz)
            n_gate = np.tanh(i_n + r * hn)
            h_new = (1 - z) * n_gate + z * h
            cache.append((h, r, z, n_gate, hn))
        h = h_new
        outs.append(h)
    return np.stack(outs), h, c, cache


def _back_direction(mode, x, w, cache, dout, dh, dc):
    """Back-propagate one direction: returns dx, [dWi, dWh, dbi, dbh], dh0, dc0. The input-side
    gradients of all steps are gathered and reduced by one matrix product each."""
    wi, wh, _, _ = w
    t_len, n = x.shape[0], x.shape[1]
    dwh = np.zeros_like(wh)
    dbh = np.zeros(wh.shape[0], dtype=wh.dtype)
    dgi_all = np.empty((t_len, n, wi.shape[0]), dtype=wi.dtype)
    for t in range(t_len - 1, -1, -1):
        dh = dh + dout[t]
        if mode in ("rnn_relu", "rnn_tanh"):
            h_prev, h_new = cache[t]
            da = dh * ((h_new > 0) if mode == "rnn_relu" else (1 - h_new ** 2))
            dgi = dgh = da
        elif mode == "lstm":
            h_prev, c_prev, i, f, g, o, tc = cache[t]
            do = dh * tc
            dct = dc + dh * o * (1 - tc ** 2)
            di, df, dg = dct * g, dct * c_prev, dct * i
            dc = dct * f
            dgi = dgh = np.concatenate([di * i * (1 - i), df * f * (1 - f), dg * (1 - g ** 2),
                                        do * o * (1 - o)], axis=1)
        else:
            h_prev, r, z, n_gate, hn = cache[t]
            dn = dh * (1 - z)
            dz = dh * (h_prev - n_gate)
            dn_pre = dn * (1 - n_gate ** 2)
            dr = dn_pre * hn
            dr_pre, dz_pre = dr * r * (1 - r), dz * z * (1 - z)
            dgi = np.concatenate([dr_pre, dz_pre, dn_pre], axis=1)
            dgh = np.concatenate([dr_pre, dz_pre, dn_pre * r], axis=1)
            dh_direct = dh * z
        dgi_all[t] = dgi
        dwh += dgh.T @ h_prev
        dbh += dgh.sum(0)
        dh = dgh @ wh + (dh_direct if mode == "gru" else 0)
    dgi_flat = dgi_all.reshape(t_len * n, -1)
    dx = (dgi_flat @ wi).reshape(x.shape)
    dwi = dgi_flat.T @ x.reshape(t_len * n, -1)
    return dx, [dwi, dwh, dgi_flat.sum(0), dbh], dh, dc


def _work_dtype(dtype) -> np.dtype:
    """The dtype the kernel computes in: the data's, at least float32 (float16 is widened)."""
    return np.result_type(dtype, np.float32)


def _validate(op, attrs, inputs):
    _check_supported(op, attrs)
    x, flat, h0 = inputs[0], inputs[1], inputs[2]
    d = 2 if attrs["bidirectional"] else 1
    h, n_l = attrs["state_size"], attrs["num_layers"]
    if x.ndim != 3:
        raise MXNetError(f"{op}: data must be 3-D (seq_length, batch, input_size), got shape {x.shape}")
    want = param_size(attrs, x.shape[2])
    if flat.shape != (want,):
        raise MXNetError(f"{op}: shape mismatch for input 'parameters': expected ({want},), got {flat.shape}")
    st = (n_l * d, x.shape[1], h)
    for name, s in zip(_names(attrs)[2:4], inputs[2:4]):
        if s.shape != st:
            raise MXNetError(f"{op}: shape mismatch for input '{name}': expected {st}, got {s.shape}")
    wd = _work_dtype(x.dtype)
    return x.astype(wd, copy=False), flat.astype(wd, copy=False), h0.astype(wd, copy=False)


def has_dropout_mask(attrs) -> bool:
    """True when RNN has the hidden dropout-mask output (dropout between layers)."""
    return attrs["p"] > 0 and attrs["num_layers"] > 1


def _forward(op, attrs, inputs, ctx, keep_cache=False, given_masks=None):
    """(output, hy, cy, masks) — plus the unpacked weights and per-direction caches with
    `keep_cache`. `given_masks` (num_layers - 1, T, N, D*H): the dropout masks to apply instead
    of drawing new ones (the backward pass replays the forward's)."""
    x, flat, h0 = _validate(op, attrs, inputs)
    mode = attrs["mode"]
    c0 = inputs[3].astype(h0.dtype, copy=False) if mode == "lstm" else np.zeros_like(h0)
    d = 2 if attrs["bidirectional"] else 1
    w = _unpack(attrs, flat, x.shape[2])
    layer_in, hy, cy, caches, masks = x, [], [], [], []
    for layer in range(attrs["num_layers"]):
        outs = []
        for k in range(d):
            seq = layer_in if k == 0 else layer_in[::-1]
            o, hn, cn, cache = _run_direction(mode, seq, h0[layer * d + k], c0[layer * d + k], w[(layer, k)])
            outs.append(o if k == 0 else o[::-1])
            hy.append(hn)
            cy.append(cn)
            caches.append((layer_in, seq, cache))
        out = np.concatenate(outs, axis=2)
        if layer < attrs["num_layers"] - 1 and has_dropout_mask(attrs):
            if given_masks is not None:
                mask = given_masks[layer].astype(out.dtype, copy=False)
            elif ctx.is_train:
                keep = 1.0 - attrs["p"]
                mask = ((ctx.random().random(out.shape) < keep) / keep).astype(out.dtype)
            else:
                mask = np.ones(out.shape, out.dtype)
            out = out * mask
            masks.append(mask)
        layer_in = out
    result = (layer_in, np.stack(hy), np.stack(cy), masks)
    return (result, w, caches) if keep_cache else result


@register("RNN")
class RNN(Op):
    """Fused multi-layer (bidirectional) RNN/LSTM/GRU over (T, N, C) with packed parameters."""
    params = _PARAMS
    inputs = ("data", "parameters", "state", "state_cell", "sequence_length")
    outputs = ("output", "hy", "cy")
    kernel = "rnn"
    is_random = True  # dropout between layers in training
    gates = GATES     # the trait frontends (gluon.rnn) read to shape the parameters

    def input_names(self, attrs):
        return _names(attrs)

    def num_visible_outputs(self, attrs):
        if not attrs["state_outputs"]:
            return 1
        return 3 if attrs["mode"] == "lstm" else 2

    def num_outputs(self, attrs):
        return self.num_visible_outputs(attrs) + int(has_dropout_mask(attrs)) + 1

    def output_names(self, attrs):
        names = list(self.outputs[:self.num_visible_outputs(attrs)])
        return names + (["dropout_mask"] if has_dropout_mask(attrs) else []) + ["reserve"]

    def infer_shape(self, attrs, in_shapes):
        _check_sizes(self.name, attrs)
        d = 2 if attrs["bidirectional"] else 1
        h, n_l = attrs["state_size"], attrs["num_layers"]
        shapes = list(in_shapes)
        data = shapes[0]
        if data is None:
            return shapes, [None] * self.num_outputs(attrs)
        if len(data) != 3:
            raise MXNetError(f"RNN: data must be 3-D (seq_length, batch, input_size), got shape {tuple(data)}")
        t, n, c = data
        if c:
            want = (param_size(attrs, c),)
            if shapes[1] is not None and tuple(shapes[1]) != want and shapes[1][0]:
                raise MXNetError(f"RNN: shape mismatch for input 'parameters': expected {want}, "
                                 f"got {tuple(shapes[1])}")
            shapes[1] = want
        for k in range(2, 4 if attrs["mode"] == "lstm" else 3):
            shapes[k] = (n_l * d, n, h)
        if attrs["use_sequence_length"]:
            shapes[-1] = (n,)
        outs = [(t, n, d * h), (n_l * d, n, h), (n_l * d, n, h)][:self.num_visible_outputs(attrs)]
        if has_dropout_mask(attrs):
            outs.append((n_l - 1, t, n, d * h))
        outs.append((reserve_size(attrs, t, n, c),) if t and n else None)
        return shapes, outs

    def compute(self, attrs, inputs, ctx):
        out, hy, cy, masks = _forward(self.name, attrs, inputs, ctx)
        dt = inputs[0].dtype
        res = [a.astype(dt) for a in (out, hy, cy)[:self.num_visible_outputs(attrs)]]
        if has_dropout_mask(attrs):
            res.append(np.stack(masks).astype(dt))
        res.append(np.zeros(reserve_size(attrs, *inputs[0].shape), dt))
        return res

    def grad(self, F, attrs, inputs, outputs, ograds):
        n_vis = self.num_visible_outputs(attrs)
        vis = list(ograds[:n_vis])
        extra = vis[1:] + [F.zeros_like(inputs[2])] * (3 - len(vis))
        if attrs["mode"] != "lstm":
            extra = extra[:1]
        masks = [outputs[n_vis]] if has_dropout_mask(attrs) else []
        grads = F.apply("_backward_RNN", [ograds[0], *extra, *inputs, *masks, outputs[-1]], **attrs)
        return list(grads)


@register("_backward_RNN")
class BackwardRNN(Op):
    """Gradients of RNN w.r.t. data, parameters, state (and state_cell) from the output
    gradient and the final-state gradients, by back-propagation through time. The reference
    recomputes the forward and ignores `reserve` (the forward's hidden output)."""
    params = _PARAMS
    kernel = "rnn"
    hidden = True
    forward_op = "RNN"
    forward_inputs = {n: n for n in ("data", "parameters", "state", "state_cell", "sequence_length")}
    forward_outputs = {"ograd_output": 0, "ograd_hy": 1, "ograd_cy": 2}

    def forward_attrs(self, attrs):
        return dict(attrs, state_outputs=True)   # the final-state gradients match those outputs

    def input_names(self, attrs):
        og = ["ograd_output", "ograd_hy"] + (["ograd_cy"] if attrs["mode"] == "lstm" else [])
        return og + _names(attrs) + (["dropout_mask"] if has_dropout_mask(attrs) else []) + ["reserve"]

    def num_outputs(self, attrs):
        return len(_names(attrs))

    def infer_shape(self, attrs, in_shapes):
        k = 3 if attrs["mode"] == "lstm" else 2
        return list(in_shapes), list(in_shapes[k:k + len(_names(attrs))])

    def infer_type(self, attrs, in_types):
        k = 3 if attrs["mode"] == "lstm" else 2
        return list(in_types), list(in_types[k:k + len(_names(attrs))])

    def compute(self, attrs, inputs, ctx):
        k = 3 if attrs["mode"] == "lstm" else 2
        wd = _work_dtype(inputs[k].dtype)
        dout = inputs[0].astype(wd)
        dhy = inputs[1].astype(wd)
        dcy = inputs[2].astype(wd) if k == 3 else np.zeros_like(dhy)
        fwd = inputs[k:k + len(_names(attrs))]
        given = inputs[k + len(_names(attrs))] if has_dropout_mask(attrs) else None
        (_, _, _, masks), w, caches = _forward(self.name, attrs, fwd, ctx, keep_cache=True, given_masks=given)
        mode, d = attrs["mode"], (2 if attrs["bidirectional"] else 1)
        x = fwd[0]
        flat_grads = {}
        dh0 = np.zeros_like(dhy)
        dc0 = np.zeros_like(dcy)
        h = attrs["state_size"]
        for layer in range(attrs["num_layers"] - 1, -1, -1):
            layer_in = caches[layer * d][0]
            dx_layer = np.zeros_like(layer_in)
            for kd in range(d):
                idx = layer * d + kd
                _, seq, cache = caches[idx]
                dseq = dout[:, :, kd * h:(kd + 1) * h]
                if kd == 1:
                    dseq = dseq[::-1]
                dxs, gw, dh0[idx], dc0[idx] = _back_direction(mode, seq, w[(layer, kd)], cache, dseq,
                                                              dhy[idx], dcy[idx])
                dx_layer += dxs if kd == 0 else dxs[::-1]
                flat_grads[(layer, kd)] = gw
            # layer l read layer l-1's output after its dropout mask
            dout = dx_layer * masks[layer - 1] if layer > 0 and masks else dx_layer
        dparams = np.zeros(param_size(attrs, x.shape[2]), wd)
        dview = _unpack(attrs, dparams, x.shape[2])
        for key, gw in flat_grads.items():
            for view, g in zip(dview[key], gw):
                view[...] = g
        res = [dout.astype(x.dtype), dparams.astype(fwd[1].dtype), dh0.astype(fwd[2].dtype)]
        if mode == "lstm":
            res.append(dc0.astype(fwd[3].dtype))
        return res

    def grad(self, F, attrs, inputs, outputs, ograds):
        raise MXNetError("_backward_RNN: second-order gradients of RNN are not supported")


@register("_rnn_param_concat")
class RNNParamConcat(Op):
    """Concatenate flattened parameter vectors along `dim` (Gluon's packing of RNN weights)."""
    params = {"num_args": Param(Count), "dim": Param(Int, 0)}

    def input_names(self, attrs):
        return [f"arg{i}" for i in range(attrs["num_args"])]

    def infer_shape(self, attrs, in_shapes):
        if any(s is None for s in in_shapes):
            return list(in_shapes), [None]
        for i, s in enumerate(in_shapes):
            if len(s) != 1:
                raise MXNetError(f"_rnn_param_concat: arg{i} must be 1-D, got shape {tuple(s)}")
        total = sum(s[0] for s in in_shapes) if all(s[0] for s in in_shapes) else 0
        return list(in_shapes), [(total,)]

    def compute(self, attrs, inputs, ctx):
        for i, a in enumerate(inputs):
            if a.ndim != 1:
                raise MXNetError(f"_rnn_param_concat: arg{i} must be 1-D, got shape {a.shape}")
        return [np.concatenate(inputs)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        out, pos = [], 0
        for a in inputs:
            n = a.shape[0]
            out.append(F.slice_axis(ograds[0], axis=0, begin=pos, end=pos + n))
            pos += n
        return out


@register("_rnn_flat_input_weight")
class RNNFlatInputWeight(Op):
    """A first-layer i2h weight (rows, C), flattened, whose unknown input size C is inferred from
    `data` (T, N, C): lets a fused RNN traced before its input size is known defer its weight
    shape the way FullyConnected does (MXNet infers it backwards through `_rnn_param_concat`)."""
    params = {"rows": Param(Int, doc="gates * hidden units")}
    inputs = ("weight", "data")
    hidden = True

    def infer_shape(self, attrs, in_shapes):
        weight, data = in_shapes
        c = data[-1] if data is not None and len(data) == 3 else 0
        rows = attrs["rows"]
        if weight is not None and len(weight) != 2:
            raise MXNetError(f"_rnn_flat_input_weight: weight must be 2-D, got shape {tuple(weight)}")
        if weight is not None and weight[1] and c and weight[1] != c:
            raise MXNetError(f"_rnn_flat_input_weight: shape mismatch for input 'weight': expected "
                             f"({rows}, {c}), got {tuple(weight)}")
        c = c or (weight[1] if weight is not None else 0)
        return [(rows, c), data], [(rows * c,) if c else (0,)]

    def infer_type(self, attrs, in_types):
        t = in_types[0] or in_types[1]
        return [t, in_types[1]], [t]

    def compute(self, attrs, inputs, ctx):
        w, x = inputs
        if w.ndim != 2 or w.shape[0] != attrs["rows"] or (x.ndim == 3 and w.shape[1] != x.shape[2]):
            raise MXNetError(f"_rnn_flat_input_weight: weight shape {w.shape} does not match "
                             f"({attrs['rows']}, input size of data {x.shape})")
        return [w.reshape(-1).copy()]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.reshape_like(ograds[0], inputs[0]), F.zeros_like(inputs[1])]
