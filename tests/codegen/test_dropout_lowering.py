"""Native Dropout (lower_dropout.py): identity in inference (equal to the interpreter),
counter-based random masks in training (right values, rate, sharing along axes, fresh per
call, reproducible from the call's generator), one native call."""
from __future__ import annotations

import numpy as np
import pytest

from lowering_util import compile_and_run, one_node_graph
from symjit.codegen.llvm.executable import compile_planned
from symjit.codegen.llvm.lower_dropout import splitmix64_uniform
from symjit.passes.manager import compile_graph


def _compiled(shape, dtype, attrs, is_train):
    g = one_node_graph("Dropout", [("x", shape, dtype)], attrs, n_outputs=2)
    opt, _ = compile_graph(g, "training")
    cg = compile_planned(opt, "dropout", is_train)
    assert cg.native, [n.op.name for n in cg.module.python_nodes]
    return cg


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inference_and_p0_are_identity(dtype):
    x = np.random.default_rng(0).standard_normal((7, 9)).astype(dtype)
    for attrs, is_train in [({"p": 0.5}, False), ({"p": 0.0}, True)]:
        g = one_node_graph("Dropout", [("x", x.shape, dtype)], attrs, n_outputs=2)
        got, want, cg, _, _ = compile_and_run(g, {"x": x}, is_train=is_train)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], np.ones_like(x))
        assert cg.native


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_training_mask_values_and_rate(dtype, p):
    cg = _compiled((100, 200), dtype, {"p": p}, True)
    x = np.random.default_rng(1).standard_normal((100, 200)).astype(dtype)
    out, mask = cg([x], is_train=True)
    scale = np.asarray(1.0 / (1.0 - p)).astype(dtype)
    assert set(np.unique(mask).tolist()) <= {0.0, float(scale)}
    np.testing.assert_array_equal(out, x * mask)
    rate = float((mask == 0).mean())
    assert abs(rate - p) < 5 * np.sqrt(p * (1 - p) / mask.size)
    out2, mask2 = cg([x], is_train=True)
    assert (mask != mask2).any()          # a fresh mask per call


def test_masks_follow_the_generator_and_splitmix64():
    cg = _compiled((30, 40), "float64", {"p": 0.4}, True)
    x = np.ones((30, 40))
    _, m1 = cg([x], is_train=True, rng=np.random.default_rng(5))
    _, m2 = cg([x], is_train=True, rng=np.random.default_rng(5))
    np.testing.assert_array_equal(m1, m2)
    seed = int(np.random.default_rng(5).integers(0, 2**63, dtype=np.uint64))
    u = splitmix64_uniform(seed, np.arange(x.size)).reshape(x.shape)
    np.testing.assert_array_equal(m1, np.where(u < 0.6, 1 / 0.6, 0.0))
    # independent of the thread split: the same mask with one thread
    from symjit import runtime
    with runtime.threads(1):
        _, m3 = cg([x], is_train=True, rng=np.random.default_rng(5))
    np.testing.assert_array_equal(m1, m3)


def test_shared_axes_and_always_mode():
    cg = _compiled((6, 50, 4), "float32", {"p": 0.5, "axes": (1,)}, True)
    _, mask = cg([np.ones((6, 50, 4), np.float32)], is_train=True)
    assert (mask == mask[:, :1, :]).all() and 0 < (mask == 0).mean() < 1
    cg = _compiled((50, 50), "float32", {"p": 0.5, "mode": "always"}, False)
    _, mask = cg([np.ones((50, 50), np.float32)])
    assert 0.3 < (mask == 0).mean() < 0.7
    cg = _compiled((5, 5), "float32", {"p": 1.0}, True)
    out, mask = cg([np.ones((5, 5), np.float32)], is_train=True)
    assert np.isnan(out).all() and np.isnan(mask).all()   # MXNet: mask = 0 * (1 / 0)


def test_unknown_mode_keeps_python_step():
    g = one_node_graph("Dropout", [("x", (4, 4), "float32")], {"p": 0.5}, n_outputs=2)
    opt, _ = compile_graph(g, "training")
    cg = compile_planned(opt, "dropout")
    assert [n.op.name for n in cg.module.python_nodes] == ["Dropout"]


def test_executor_training_forward_backward_share_the_mask():
    import symjit as mx
    x = mx.sym.var("x")
    net = mx.sym.sum(mx.sym.Dropout(x, p=0.5) * 3.0)
    ex = net.simple_bind(mx.cpu(), x=(20, 30))
    ex.arg_dict["x"][:] = 1.0
    out = ex.forward(is_train=True)[0].asnumpy()
    ex.backward()
    grad = ex.grad_dict["x"].asnumpy()
    assert set(np.unique(grad).tolist()) <= {0.0, 6.0}
    np.testing.assert_allclose(out, [grad.sum()], rtol=1e-5)   # sum(3 * mask) both ways
