"""BatchNorm + relu fusion in training graphs (passes/norm_relu.py, ops/norm_relu.py): the fused
forward and backward nodes compute the unfused graph's values bit for bit (outputs, gradients,
moving-average updates, NaN included), equal the interpreter, fire only on their exact
patterns, and the fused ops' numpy references equal the pair of ops they replace."""
from __future__ import annotations

import numpy as np
import pytest

from symjit.codegen.llvm.executable import compile_planned
from symjit.ir import GraphBuilder, TensorType, run
from symjit.ops.registry import ComputeContext, apply_numpy
from symjit.passes.manager import compile_graph
from symjit.passes.norm_relu import fuse_batch_norm_relu
from symjit.passes.training_graph import build_training_graph

AUX = ("moving_mean", "moving_var")


def _bn_graph(shape, dtype, tail="relu", fix_gamma=False, second_reader=False):
    """x -> BatchNorm -> (relu | relu * 2) -> 2x2 max pooling (or a sum for 2-D data), as a
    joint training graph with the gradients of x, gamma and beta."""
    b = GraphBuilder(name="bn_relu")
    c = shape[1]
    x = b.add_input("x", TensorType(shape, dtype))
    gamma = b.add_input("gamma", TensorType((c,), dtype))
    beta = b.add_input("beta", TensorType((c,), dtype))
    mm = b.add_input("moving_mean", TensorType((c,), dtype), aux=True)
    mv = b.add_input("moving_var", TensorType((c,), dtype), aux=True)
    y = b.add_node("BatchNorm", [x, gamma, beta, mm, mv], {"fix_gamma": fix_gamma, "eps": 1e-5})[0]
    r = b.add_node("relu", [y])[0]
    if tail == "relu_times_2":
        r = b.add_node("_mul_scalar", [r], {"scalar": 2.0})[0]
    if len(shape) == 4:
        out = b.add_node("Pooling", [r], {"kernel": (2, 2), "stride": (2, 2), "pool_type": "max"})[0]
    else:
        out = b.add_node("sum", [r], {"axis": (1,)})[0]
    outs = [out] + ([b.add_node("exp", [y])[0]] if second_reader else [])
    g = b.build(outs)
    joint, _ = build_training_graph(g, wrt=["x", "gamma", "beta"])
    return joint


def _feeds(g, rng, nan=False):
    feeds = {}
    for v in g.inputs:
        a = rng.standard_normal(v.type.shape) * 2 + 0.3
        if v.name == "moving_var":
            a = np.abs(a) + 0.5
        feeds[v.name] = a.astype(v.type.dtype)
    if nan:
        feeds["x"].reshape(-1)[5] = np.nan
    return feeds


def _compile_run(g, feeds, disabled=()):
    opt, _ = compile_graph(g, "training", disabled=set(disabled))
    cg = compile_planned(opt, g.name, True)
    outs, updates = cg.run([np.ascontiguousarray(feeds[v.name]) for v in opt.inputs], is_train=True)
    return opt, [np.array(o) for o in outs], {v.name: np.array(a) for v, a in updates.items()}, cg


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 3, 6, 8), (5, 7)])
@pytest.mark.parametrize("fix_gamma", [False, True])
@pytest.mark.parametrize("nan", [False, True])
def test_fused_equals_unfused_bitwise_and_interpreter(dtype, shape, fix_gamma, nan):
    g = _bn_graph(shape, dtype, fix_gamma=fix_gamma)
    feeds = _feeds(g, np.random.default_rng(3), nan=nan)
    fused_g, fused, fused_upd, cg = _compile_run(g, feeds)
    plain_g, plain, plain_upd, _ = _compile_run(g, feeds, disabled=("bn_relu",))
    ops = [n.op.name for n in fused_g.nodes]
    assert "_batch_norm_relu" in ops and "_backward_batch_norm_relu" in ops
    assert "BatchNorm" not in ops and "_backward_BatchNorm" not in ops
    assert "_batch_norm_relu" not in [n.op.name for n in plain_g.nodes]
    python_ops = {n.op.name for n in cg.module.python_nodes}    # (float64 pooling runs in numpy)
    assert not python_ops & {"_batch_norm_relu", "_backward_batch_norm_relu"}, python_ops
    for a, b in zip(fused, plain):
        np.testing.assert_array_equal(a, b)
    assert fused_upd.keys() == plain_upd.keys() == set(AUX)
    for k in AUX:
        np.testing.assert_array_equal(fused_upd[k], plain_upd[k])
    if not nan:
        ref = run(g, feeds, is_train=True)
        tol = 2e-4 if dtype == "float32" else 1e-10
        for a, b in zip(fused, ref.outputs):
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", ["relu_times_2", "second_reader"])
def test_other_patterns_are_left_alone(case):
    g = _bn_graph((2, 3, 4, 4), "float32", tail="relu_times_2" if case == "relu_times_2" else "relu",
                  second_reader=case == "second_reader")
    opt, _ = compile_graph(g, "training", disabled={"bn_relu"})
    out, stats = fuse_batch_norm_relu(opt)
    assert stats["bn_relu_forward"] == 0
    assert [n.op.name for n in out.nodes] == [n.op.name for n in opt.nodes]


def test_pass_is_idempotent_and_counts():
    g = _bn_graph((2, 3, 4, 4), "float32")
    opt, _ = compile_graph(g, "training", disabled={"bn_relu"})
    once, stats = fuse_batch_norm_relu(opt)
    assert stats == {"bn_relu_forward": 1, "bn_relu_backward": 1}
    twice, stats2 = fuse_batch_norm_relu(once)
    assert stats2 == {"bn_relu_forward": 0, "bn_relu_backward": 0}
    assert [n.op.name for n in twice.nodes] == [n.op.name for n in once.nodes]


@pytest.mark.parametrize("is_train", [False, True])
def test_numpy_references_equal_the_pair(is_train):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3, 5)).astype(np.float32)
    x[0, 1, 2] = np.nan
    gamma, beta = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    mm, mv = rng.standard_normal(3).astype(np.float32), (rng.random(3) + 0.5).astype(np.float32)
    attrs = {"fix_gamma": False, "eps": 1e-5}
    ctx = ComputeContext(is_train=is_train)
    bn = apply_numpy("BatchNorm", [x, gamma, beta, mm, mv], attrs, ctx)
    fused = apply_numpy("_batch_norm_relu", [x, gamma, beta, mm, mv], attrs, ctx)
    relu = apply_numpy("relu", [bn[0]], {}, ctx)[0]
    np.testing.assert_array_equal(fused[0], relu)
    for a, b in zip(fused[1:], bn[1:]):
        np.testing.assert_array_equal(a, b)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    grad_in = dy * np.where(np.isnan(relu), relu, (relu > 0).astype(np.float32))
    want = apply_numpy("_backward_BatchNorm", [grad_in, bn[1], bn[2], x, gamma], attrs, ctx)
    got = apply_numpy("_backward_batch_norm_relu", [dy, relu, bn[1], bn[2], x, gamma], attrs, ctx)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_gluon_hybridized_gradients_match_eager():
    """A hybridized conv-BN-relu-pool network's gradients equal the eager (unhybridized) ones."""
    import symjit as mx
    from symjit import autograd
    from symjit.gluon import nn
    grads = []
    for hybrid in (False, True):
        mx.random.seed(1)
        net = nn.HybridSequential()
        net.add(nn.Conv2D(4, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(2), nn.Dense(3))
        net.initialize(mx.init.Xavier())
        if hybrid:
            net.hybridize()
        x = mx.nd.array(np.random.default_rng(2).standard_normal((2, 3, 8, 8)).astype(np.float32))
        with autograd.record():
            y = net(x)
        y.backward()
        grads.append([p.grad().asnumpy() for p in net.collect_params().values() if p.grad_req != "null"])
    assert len(grads[0]) == len(grads[1]) == 6
    for i, (a, b) in enumerate(zip(grads[1], grads[0])):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=str(i))
