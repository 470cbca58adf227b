"""The native fused RNN (runtime/nn/rnn.c through codegen/llvm/lower_rnn.py) against the op's
numpy reference (symjit/ops/rnn.py, float64): forward outputs and final states, and the
gradient `_backward_RNN`, for every cell type, one and two layers, one and two directions,
with and without initial states and state outputs, dropout between layers in training, the
backward from the native forward's reserve (its traces reused) and from a reserve without
them (the reference's zeros: the forward recomputed).
Tolerances: float32 results against the float64 reference, rtol 1e-4 and atol 1e-5 times the
largest magnitude (tanh / sigmoid through a polynomial exp with relative error ~2e-7)."""
from __future__ import annotations

import numpy as np
import pytest

from symjit.codegen.llvm.executable import compile_planned
from symjit.ir import GraphBuilder, TensorType, run
from symjit.ops.registry import ComputeContext, get_op
from symjit.ops.rnn import param_size
from symjit.passes.manager import compile_graph
from symjit.test_utils import numeric_grad

MODES = ["rnn_relu", "rnn_tanh", "lstm", "gru"]


def _attrs(mode, layers, bidirectional, state_outputs=True, p=0.0, hidden=5):
    return dict(state_size=hidden, num_layers=layers, bidirectional=bidirectional, mode=mode,
                state_outputs=state_outputs, p=p)


def _inputs(attrs, seq, batch, feat, rng):
    """[(name, array)] of RNN's inputs, float32."""
    d = 2 if attrs["bidirectional"] else 1
    parsed = get_op("RNN").parse(attrs)
    st = (attrs["num_layers"] * d, batch, attrs["state_size"])
    ins = [("data", rng.standard_normal((seq, batch, feat))),
           ("parameters", rng.standard_normal(param_size(parsed, feat)) * 0.4),
           ("state", rng.standard_normal(st) * 0.5)]
    if attrs["mode"] == "lstm":
        ins.append(("state_cell", rng.standard_normal(st) * 0.5))
    return [(n, a.astype(np.float32)) for n, a in ins]


def _compiled(op, ins, attrs, is_train=False, reserve=False):
    """The one-node graph of `op` compiled natively (every node lowered) and the graph; RNN's
    graph returns its outputs but the reserve (with `reserve`: all of them)."""
    b = GraphBuilder(name=f"t_{op}")
    vals = [b.add_input(n, TensorType(a.shape, "float32")) for n, a in ins]
    outs = b.add_node(op, vals, attrs)
    g = b.build(outs if op != "RNN" or reserve else outs[:-1])
    opt, _ = compile_graph(g, "training" if is_train else "inference")
    cg = compile_planned(opt, g.name, is_train)
    assert cg.native, [n.op.name for n in cg.module.python_nodes]
    feeds = dict(ins)
    return cg, g, [feeds[v.name] for v in opt.inputs]


def _matches_reference(op, ins, attrs, n_out):
    """The native one-node graph of `op` against the interpreter (the numpy reference):
    `n_out` outputs, each within the module's tolerance. Returns (outputs, compiled, graph)."""
    cg, g, arrays = _compiled(op, ins, attrs)
    got = cg(arrays)
    want = run(g, dict(ins)).outputs
    assert len(got) == len(want) == n_out
    for a, w in zip(got, want):
        _close(a, w)
    return got, cg, g


def _close(got, want):
    assert got.shape == want.shape and got.dtype == np.float32
    scale = max(float(np.abs(want).max()) if want.size else 0.0, 1.0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, False), (1, True), (2, True)])
def test_rnn_forward_matches_the_reference(mode, layers, bidirectional):
    rng = np.random.default_rng(0)
    attrs = _attrs(mode, layers, bidirectional)
    _matches_reference("RNN", _inputs(attrs, 6, 3, 4, rng), attrs, 3 if mode == "lstm" else 2)


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_rnn_forward_without_state_outputs_and_zero_initial_state(mode):
    """Gluon's layers call RNN with zero initial states and only the sequence output; hidden
    sizes that split into several 16-unit blocks per step exercise the task split."""
    rng = np.random.default_rng(1)
    attrs = _attrs(mode, 2, False, state_outputs=False, hidden=40)
    ins = [(n, np.zeros_like(a) if n.startswith("state") else a) for n, a in _inputs(attrs, 7, 5, 9, rng)]
    cg, g, arrays = _compiled("RNN", ins, attrs)
    got = cg(arrays)
    want = run(g, dict(ins)).outputs
    assert len(got) == 1
    _close(got[0], want[0])


def _backward_inputs(attrs, ins, rng, masks=None, reserve=None):
    """_backward_RNN's inputs: head gradients of output, hy (and cy), the forward's inputs,
    the masks, the reserve (default: the reference's, zeros)."""
    op = get_op("RNN")
    parsed = op.parse(dict(attrs, state_outputs=True))
    x = ins[0][1]
    _, outs = op.infer_shape(parsed, [x.shape, None, None, None][:len(ins)])
    names = ["ograd_output", "ograd_hy", "ograd_cy"][:len(ins) - 1]
    heads = [(n, rng.standard_normal(s).astype(np.float32)) for n, s in zip(names, outs)]
    if reserve is None:
        reserve = np.zeros(outs[-1], np.float32)
    return heads + ins + ([("dropout_mask", masks)] if masks is not None else []) + [("reserve", reserve)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, True)])
@pytest.mark.parametrize("traced", [False, True])
def test_rnn_backward_matches_the_reference(mode, layers, bidirectional, traced):
    """traced: the reserve of the native forward (the backward reuses its traces); otherwise
    the reference's zeros (the backward recomputes the forward)."""
    rng = np.random.default_rng(2)
    attrs = _attrs(mode, layers, bidirectional)
    fwd_ins = _inputs(attrs, 5, 3, 4, rng)
    reserve = None
    if traced:
        fcg, _, farrays = _compiled("RNN", fwd_ins, attrs, reserve=True)
        reserve = fcg(farrays)[-1]
        assert reserve[:2].view(np.int64)[0] == int.from_bytes(b"RNNRESV1", "little")
    ins = _backward_inputs(attrs, fwd_ins, rng, reserve=reserve)
    got, cg, g = _matches_reference("_backward_RNN", ins, attrs, 4 if mode == "lstm" else 3)
    if traced:   # the traces are what the backward reads: spoiling them changes the gradient
        spoiled = dict(ins, reserve=np.where(np.arange(reserve.size) < 16, reserve, 0.5).astype(np.float32))
        bad = cg([spoiled[v.name] for v in cg_inputs(g)])
        assert not np.allclose(bad[1], got[1])


def cg_inputs(g):
    opt, _ = compile_graph(g, "inference")
    return opt.inputs


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_rnn_backward_with_larger_blocks(mode):
    rng = np.random.default_rng(3)
    attrs = _attrs(mode, 2, True, hidden=48)
    ins = _backward_inputs(attrs, _inputs(attrs, 4, 6, 20, rng), rng)
    cg, g, arrays = _compiled("_backward_RNN", ins, attrs)
    for a, w in zip(cg(arrays), run(g, dict(ins)).outputs):
        _close(a, w)


def _loss(cg, arrays, heads):
    return sum(float((o.astype(np.float64) * h).sum()) for o, h in zip(cg(arrays)[:-1], heads))


@pytest.mark.parametrize("mode", ["rnn_tanh", "lstm", "gru"])
def test_rnn_native_gradient_by_finite_differences(mode):
    """The native backward against central differences of the native forward (float32 step
    1e-2 on a smooth loss: agreement to a few parts in a thousand)."""
    rng = np.random.default_rng(4)
    attrs = _attrs(mode, 2, True, hidden=3)
    ins = _inputs(attrs, 3, 2, 3, rng)
    fwd, _, arrays = _compiled("RNN", ins, attrs, reserve=True)
    bins = _backward_inputs(attrs, ins, rng, reserve=fwd(arrays)[-1])
    n_heads = len(bins) - len(ins) - 1
    heads = [a for _, a in bins[:n_heads]]
    bwd, _, barrays = _compiled("_backward_RNN", bins, attrs)
    grads = bwd(barrays)
    for i, (name, a) in enumerate(ins):
        numeric = numeric_grad(lambda: _loss(fwd, arrays, heads), a, eps=1e-2)
        np.testing.assert_allclose(grads[i], numeric, rtol=3e-3, atol=3e-3, err_msg=name)


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_rnn_dropout_between_layers_in_training(mode):
    """Training: the forward draws its masks natively ({0, 1/keep}, about a fraction p of
    zeros), its outputs are the reference's with those masks, and the native backward through
    them equals the reference backward; inference: masks of ones, outputs without dropout."""
    from symjit.ops.rnn import _forward
    rng = np.random.default_rng(5)
    attrs = _attrs(mode, 3, True, p=0.3, hidden=16)
    ins = _inputs(attrs, 6, 4, 5, rng)
    cg, g, arrays = _compiled("RNN", ins, attrs, is_train=True, reserve=True)
    got = cg(arrays)
    n_vis = len(got) - 2
    masks, reserve = got[-2:]
    assert masks.shape == (2, 6, 4, 32)
    assert set(np.unique(masks)) <= {np.float32(0.0), np.float32(1 / 0.7)}
    assert 0.2 < float((masks == 0).mean()) < 0.4
    parsed = get_op("RNN").parse(attrs)
    ref = _forward("RNN", parsed, [a for _, a in ins], ComputeContext(is_train=True), given_masks=masks)
    for a, w in zip(got[:n_vis], ref[:n_vis]):
        _close(a, w.astype(np.float32))
    again = cg(arrays)[-2]
    assert not np.array_equal(again, masks)    # a fresh seed per call

    bins = _backward_inputs(attrs, ins, rng, masks=masks, reserve=reserve)
    bcg, bg, barrays = _compiled("_backward_RNN", bins, attrs, is_train=True)
    for a, w in zip(bcg(barrays), run(bg, dict(bins)).outputs):
        _close(a, w)

    icg, ig, iarrays = _compiled("RNN", ins, attrs, is_train=False)
    inf = icg(iarrays)
    assert (inf[-1] == 1).all()
    for a, w in zip(inf[:n_vis], run(ig, dict(ins), is_train=False).outputs[:n_vis]):
        _close(a, w)


def test_rnn_param_concat_lowers_natively():
    """`_rnn_param_concat` (Gluon's packing of a fused layer's weights) is a native copy: the
    one-node graph equals np.concatenate exactly and has no Python step."""
    rng = np.random.default_rng(5)
    parts = [rng.standard_normal(n).astype(np.float32) for n in (12, 7, 30)]
    b = GraphBuilder(name="t_concat")
    vals = [b.add_input(f"arg{i}", TensorType(a.shape, "float32")) for i, a in enumerate(parts)]
    g = b.build(b.add_node("_rnn_param_concat", vals, {"num_args": 3, "dim": 0}))
    opt, _ = compile_graph(g, "inference")
    cg = compile_planned(opt, g.name, False)
    assert cg.native, [n.op.name for n in cg.module.python_nodes]
    feeds = {f"arg{i}": a for i, a in enumerate(parts)}
    (got,) = cg([feeds[v.name] for v in opt.inputs])
    assert np.array_equal(got, np.concatenate(parts))


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("mode", MODES)
def test_rnn_blocks_with_tails_on_both_kernel_paths(mode, native):
    """Several blocks of hidden units, the last one partial (hidden 40 in blocks of 16 over three
    threads, a batch of 9 rows: partial row tiles and zero-padded weight panels), forward and
    backward, on the AVX-512 tiles (the recurrent weights packed in panels) and on the portable
    path (row-major blocks)."""
    from symjit import runtime
    from symjit.codegen.llvm.lower_gemm import set_native_kernels
    if native and not runtime.native_kernels_in_use():
        pytest.skip("this CPU has no AVX-512")
    rng = np.random.default_rng(7)
    attrs = _attrs(mode, 2, True, hidden=40)
    fwd_ins = _inputs(attrs, 4, 9, 11, rng)
    old = runtime.set_num_threads(3)
    try:
        if not native:
            set_native_kernels(0)
        fcg, fg, farrays = _compiled("RNN", fwd_ins, attrs, reserve=True)
        outs = fcg(farrays)
        for a, w in zip(outs[:-1], run(fg, dict(fwd_ins)).outputs[:-1]):
            _close(a, w)
        ins = _backward_inputs(attrs, fwd_ins, rng, reserve=outs[-1])
        _matches_reference("_backward_RNN", ins, attrs, 4 if mode == "lstm" else 3)
    finally:
        runtime.set_num_threads(old)
        set_native_kernels(-1)
