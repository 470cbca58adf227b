"""Op traits (ops/registry.py): the facts passes and both code generators read instead of
lists of op names. Each trait is checked where it is read, and an op added with a trait set is
picked up by every layer without being named anywhere else."""
from __future__ import annotations

import numpy as np
import pytest

from symjit.codegen.cuda.graph import TABLE as CUDA
from symjit.codegen.llvm.executable import compile_planned
from symjit.codegen.llvm.graph import TABLE as LLVM
from symjit.ir import GraphBuilder, TensorType, run
from symjit.ops import OPS, get_op, register
from symjit.ops.registry import Elementwise, Op
from symjit.passes.manager import compile_graph

RESHAPE_ONLY = {"Reshape", "reshape_like", "Flatten", "expand_dims", "squeeze", "_copy", "BlockGrad", "_npx_reshape",
                "_np_reshape", "_npi_reshape", "_np_squeeze", "_npi_expand_dims"}
EPILOGUE_HOSTS = {"FullyConnected", "Convolution", "Deconvolution", "dot", "batch_dot",
                  "_backward_FullyConnected_data"}


def ops_with(trait) -> set:
    return {op.name for op in set(OPS.values()) if getattr(op, trait)}


def test_trait_sets():
    assert ops_with("reshape_only") == RESHAPE_ONLY
    assert ops_with("gradient_barrier") == {"BlockGrad"}
    assert ops_with("broadcast_only") == {"broadcast_to", "broadcast_axis", "broadcast_like"}
    assert ops_with("epilogue_host") == EPILOGUE_HOSTS
    assert get_op("RNN").gates == {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}
    assert {op.name: op.neutral_scalar for op in set(OPS.values()) if op.neutral_scalar is not None} == {
        "_plus_scalar": 0.0, "_minus_scalar": 0.0, "_mul_scalar": 1.0, "_div_scalar": 1.0, "_power_scalar": 1.0}


@pytest.mark.parametrize("name", sorted(RESHAPE_ONLY))
def test_reshape_only_ops_lower_to_a_copy_on_both_targets(name):
    op = get_op(name)
    assert LLVM.find(op).__name__ == "lower_copy" and CUDA.find(op).__name__ == "lower_copy"


def test_epilogue_hosts_lower_with_an_epilogue():
    """The LLVM target lowers every epilogue host with its epilogue (training graphs fuse
    dX * act'(y) into `_backward_FullyConnected_data`); the CUDA target compiles inference
    graphs, so it lowers every host but that backward op, and those with an epilogue too."""
    from symjit.codegen.cuda.gemm import lower_compute
    from symjit.codegen.llvm.lower_gemm import PLANS
    assert EPILOGUE_HOSTS <= set(PLANS)
    with_epi = get_op("_with_epilogue")
    assert LLVM.find(with_epi).__name__ == "lower_with_epilogue" and CUDA.find(with_epi) is lower_compute
    for name in EPILOGUE_HOSTS - {"_backward_FullyConnected_data"}:
        assert CUDA.find(get_op(name)) is lower_compute, name
    assert CUDA.find(get_op("_backward_FullyConnected_data")) is None


def test_inference_rewrites_come_from_the_ops():
    from symjit.passes.inference import inference_rewrites
    from symjit.passes.infer import infer_types
    b = GraphBuilder(name="heads")
    x = b.add_input("x", TensorType((2, 3, 4), "float32"))
    lab = b.add_input("label", TensorType((2, 3, 4), "float32"))
    d = b.add_node("Dropout", [x], {"p": 0.5})[0]
    s = b.add_node("SoftmaxOutput", [d, b.add_input("l2", TensorType((2, 3), "float32"))], {})[0]
    r = b.add_node("LogisticRegressionOutput", [x, lab], {})[0]
    g, _ = infer_types(b.build([s, r]))
    out, stats = inference_rewrites(g)
    assert stats["dropout_removed"] == 1 and stats["heads_rewritten"] == 2
    producers = {v: n for n in out.nodes for v in n.outputs}
    assert producers[out.outputs[1]].op.name == "sigmoid"
    assert producers[out.outputs[0]].op.name == "Reshape"      # softmax over the flattened axes
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32),
             "label": np.zeros((2, 3, 4), np.float32), "l2": np.zeros((2, 3), np.float32)}
    for a, w in zip(run(out, feeds).outputs, run(g, feeds).outputs):
        np.testing.assert_allclose(a, w, rtol=1e-6)


# ---- an op added with a trait is one definition ------------------------------------------

@pytest.fixture
def new_ops():
    added = []

    def add(name, cls):
        register(name)(cls)
        added.append(name)
        return get_op(name)
    yield add
    for name in added:
        OPS.pop(name)


def _compile(g):
    opt, _ = compile_graph(g, "inference")
    return opt, compile_planned(opt, g.name)


def test_new_reshape_only_op_needs_no_other_change(new_ops):
    class Ravel(Op):
        """y = x as one dimension."""
        reshape_only = True

        def infer_shape(self, attrs, in_shapes):
            s = in_shapes[0]
            return [s], [None if s is None else (int(np.prod(s)),)]

        def compute(self, attrs, inputs, ctx):
            return [inputs[0].reshape(-1).copy()]
    new_ops("_test_ravel", Ravel)
    b = GraphBuilder(name="ravel")
    x = b.add_input("x", TensorType((3, 5), "float32"))
    y = b.add_node("relu", [b.add_node("_test_ravel", [x])[0]])[0]
    g = b.build([y])
    opt, cg = _compile(g)
    assert cg.native, [n.op.name for n in cg.module.python_nodes]
    feeds = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_array_equal(cg([feeds])[0], run(g, {"x": feeds}).outputs[0])
    b = GraphBuilder(name="ravel_1d")            # same shape: simplification drops it
    x = b.add_input("x", TensorType((7,), "float32"))
    opt, _ = compile_graph(b.build([b.add_node("_test_ravel", [x])[0]]), "inference")
    assert "_test_ravel" not in {n.op.name for n in opt.nodes}


def test_new_elementwise_op_fuses_and_lowers_on_both_targets(new_ops):
    class Cube(Elementwise):
        """y = x * x * x."""
        def expr(self, attrs, x):
            return x * x * x
    op = new_ops("_test_cube", Cube)
    assert LLVM.find(op) is not None and CUDA.find(op) is not None
    b = GraphBuilder(name="cube")
    x = b.add_input("x", TensorType((4, 9), "float32"))
    y = b.add_node("_test_cube", [b.add_node("tanh", [x])[0]])[0]
    g = b.build([y])
    opt, cg = _compile(g)
    assert [n.op.name for n in opt.nodes] == ["_fused_elemwise"] and cg.native
    xv = np.linspace(-2, 2, 36, dtype=np.float32).reshape(4, 9)
    np.testing.assert_allclose(cg([xv])[0], np.tanh(xv) ** 3, rtol=1e-5, atol=1e-6)


def test_new_epilogue_host_gets_its_epilogue_fused(new_ops):
    """An op with `epilogue_host` and an LLVM plan for its name is fused with its epilogue by
    passes/fusion.py without being listed there."""
    from symjit.codegen.llvm import lower_gemm

    class MatMul(type(get_op("dot"))):
        """dot under another name."""
        epilogue_host = True
    new_ops("_test_matmul", MatMul)
    lower_gemm.PLANS["_test_matmul"] = lower_gemm.PLANS["dot"]
    LLVM.register("_test_matmul")(LLVM.find(get_op("dot")))
    try:
        b = GraphBuilder(name="mm")
        a = b.add_input("a", TensorType((6, 8), "float32"))
        w = b.add_input("w", TensorType((8, 5), "float32"))
        y = b.add_node("sigmoid", [b.add_node("_test_matmul", [a, w])[0]])[0]
        g = b.build([y])
        opt, cg = _compile(g)
        hosted = [n.attrs.get("inner") for n in opt.nodes if n.op.name == "_with_epilogue"]
        assert hosted == ["_test_matmul"] and cg.native
        rng = np.random.default_rng(2)
        av, wv = rng.standard_normal((6, 8)).astype(np.float32), rng.standard_normal((8, 5)).astype(np.float32)
        np.testing.assert_allclose(cg([av, wv])[0], 1 / (1 + np.exp(-(av @ wv))), rtol=1e-5, atol=1e-6)
    finally:
        del lower_gemm.PLANS["_test_matmul"], LLVM.by_op["_test_matmul"]



def test_monitor_input_names_follow_mxnets_listed_input_names():
    """Ops MXNet lists input names for are monitored as `<node>_<input>`; the unary math ops
    and Activation (no FListInputNames in MXNet) as `<node>_input<i>`."""
    fc = get_op("FullyConnected")
    assert fc.monitor_input_names(fc.parse({"num_hidden": 2})) == ["data", "weight", "bias"]
    assert fc.monitor_input_names(fc.parse({"num_hidden": 2, "no_bias": True})) == ["data", "weight"]
    for name in ("relu", "exp", "tanh", "Activation"):
        op = get_op(name)
        attrs = op.parse({"act_type": "relu"} if name == "Activation" else {})
        assert op.monitor_input_names(attrs) == ["input0"], name
    add = get_op("elemwise_add")
    assert add.monitor_input_names(add.parse({})) == add.input_names(add.parse({}))
