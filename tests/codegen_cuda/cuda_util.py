"""Helpers of the CUDA backend tests: graphs through the inference pipeline and the CUDA
lowering, run by the host emulation of the generated source (`codegen/cuda/emulate.py`) and
compared with the reference interpreter; nvcc availability."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from symjit.base import MXNetError
from symjit.codegen.cuda import lower_graph, plan_graph
from symjit.codegen.cuda.emulate import host_compiler, load_emulated
from symjit.ir import GraphBuilder, TensorType, run
from symjit.ir.graph import Value

from shared_data import model_path


def have_nvcc() -> bool:
    from symjit.codegen.cuda.aot import find_nvcc
    try:
        find_nvcc()
        return True
    except MXNetError:
        return False


needs_cxx = pytest.mark.skipif(shutil.which(host_compiler()) is None or shutil.which("cc") is None,
                               reason="the CUDA emulation needs the host C++ compiler (c++) and cc")
needs_nvcc = pytest.mark.skipif(not have_nvcc(), reason="needs the CUDA compiler nvcc (not found)")


class Net:
    """A small graph under construction with its random feeds: `x = net.input(...)`,
    `y, = net.op("relu", [x])`, `net.output(y)`, `net.graph()`."""

    def __init__(self, name: str, seed: int = 0):
        self.b = GraphBuilder(name=name)
        self.rng = np.random.default_rng(seed)
        self.feeds: dict = {}
        self.consts: dict = {}
        self.outs: list = []

    def input(self, name: str, shape, dtype: str = "float32", low=-2.0, high=2.0, const: bool = False) -> Value:
        v = self.b.add_input(name, TensorType(tuple(shape), dtype))
        if np.dtype(dtype).kind == "f":
            a = self.rng.uniform(low, high, size=shape).astype(dtype)
        else:
            a = self.rng.integers(int(low), int(high) + 1, size=shape).astype(dtype)
        (self.consts if const else self.feeds)[name] = a
        return v

    def op(self, name: str, inputs: list, **attrs) -> list:
        return self.b.add_node(name, inputs, attrs)

    def output(self, *values) -> None:
        self.outs.extend(values)

    def graph(self):
        return self.b.build(self.outs)


def emulate_graph(g, feeds: dict, tmp_path, consts: dict | None = None, opt: str = "-O0", disabled=()):
    """(emulated outputs, interpreter outputs, LaunchPlan) of graph `g` after the inference
    pipeline (minus the `disabled` passes) with `consts` bound as compile-time parameters
    (small test graphs compile fastest unoptimized: `opt`)."""
    consts = dict(consts or {})
    plan = lower_graph(plan_graph(g, consts, disabled), consts, g.name)
    _, entry = load_emulated(plan, tmp_path, opt)
    got = entry(*[np.ascontiguousarray(feeds[v.name]) for v in plan.placement.inputs])
    want = run(g, {**feeds, **consts}).outputs
    return list(got), list(want), plan


def assert_close(got, want, rtol=1e-5, atol=1e-6, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    if got.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def emulate_spec(spec, arrays: list, tmp_path, name: str = "spec") -> list:
    """Run one elementwise kernel (`ElementwiseSpec`) through the emulation: a launch plan with
    the spec's inputs as the library inputs and its outputs as the library outputs."""
    from symjit.codegen.cuda.elementwise import elementwise_launch
    from symjit.codegen.cuda.plan import LaunchPlan, LoweringContext, Placement
    from symjit.ir.graph import Graph
    ins = [Value(f"in{k}", TensorType(tuple(s), d)) for k, (s, d) in enumerate(zip(spec.in_shapes, spec.in_dtypes))]
    outs = [Value(f"out{j}", TensorType(tuple(spec.out_shape), d)) for j, d in enumerate(spec.out_dtypes)]
    ctx = LoweringContext(Graph(name=name))
    steps = elementwise_launch(ctx, spec, ins + outs)
    p = Placement(inputs=ins, outputs=outs)
    p.where.update({v: ("input", k) for k, v in enumerate(ins)})
    p.where.update({v: ("output", j) for j, v in enumerate(outs)})
    plan = LaunchPlan(name, list(ctx.kernels.values()), steps, p, 0)
    _, entry = load_emulated(plan, tmp_path, "-O0")
    return list(entry(*[np.ascontiguousarray(a) for a in arrays]))


def every_template_net() -> Net:
    """One graph that uses every kernel template of the CUDA backend at least once (tiled
    GEMM, implicit-GEMM and depthwise convolution, deconvolution, pooling, thread and block
    reductions, thread and block softmax, BatchNorm, strided copies, fills, float and integer
    elementwise kernels, epilogues with extra inputs)."""
    net = Net("templates")
    x = net.input("x", (2, 6, 9, 11))
    w = net.input("w", (5, 6, 3, 3), const=True)
    b = net.input("b", (5,), const=True)
    res = net.input("res", (2, 5, 9, 11))
    c, = net.op("Convolution", [x, w, b], kernel=(3, 3), num_filter=5, pad=(1, 1))
    s, = net.op("elemwise_add", [c, res])
    r, = net.op("relu", [s])
    wd = net.input("wd", (6, 1, 3, 3), const=True)
    dw, = net.op("Convolution", [x, wd], kernel=(3, 3), num_filter=6, num_group=6, no_bias=True)
    wt = net.input("wt", (5, 2, 2, 2), const=True)
    dc, = net.op("Deconvolution", [r, wt], kernel=(2, 2), num_filter=2, stride=(2, 2))
    p, = net.op("Pooling", [r], kernel=(2, 2), stride=(2, 2), pool_type="max")
    f, = net.op("Flatten", [p])
    wf = net.input("wf", (10, 100), const=True)
    bf = net.input("bf", (10,), const=True)
    fc, = net.op("FullyConnected", [f, wf, bf], num_hidden=10)
    sm, = net.op("softmax", [fc])
    big = net.input("big", (2, 600))
    net.output(r, dw, dc, sm, *net.op("sum", [x], axis=(1, 3)), *net.op("max", [big], axis=1),
               *net.op("log_softmax", [big]), *net.op("argmax", [big], axis=1))
    g = net.input("g", (6,), const=True, low=0.5, high=1.5)
    mv = net.input("mv", (6,), const=True, low=0.5, high=1.5)
    net.output(net.op("BatchNorm", [x, g, g, g, mv], fix_gamma=False)[0])
    net.output(*net.op("transpose", [x], axes=(0, 2, 3, 1)),
               *net.op("Pad", [x], mode="constant", pad_width=(0, 0, 0, 0, 1, 1, 1, 1), constant_value=0.0))
    ia = net.input("ia", (3, 7), "int32", -9, 9)
    ib = net.input("ib", (3, 7), "int32", 1, 9)
    ba, bb = net.input("ba", (2, 3, 4)), net.input("bb", (2, 4, 5))
    net.output(*net.op("broadcast_mod", [ia, ib]), *net.op("batch_dot", [ba, bb]), *net.op("sum", [x], axis=0))
    gl, bl = net.input("gl", (600,), const=True), net.input("bl", (600,), const=True)
    gs, bs = net.input("gs", (10,), const=True), net.input("bs", (10,), const=True)
    net.output(net.op("LayerNorm", [big, gl, bl])[0], net.op("LayerNorm", [fc, gs, bs])[0])
    idx = net.input("idx", (2, 3), low=0, high=9)
    net.output(*net.op("Embedding", [idx, wf], input_dim=10, output_dim=100),
               *net.op("where", [net.input("cond", (2, 10), low=-1, high=1), fc, sm]))
    return net


#: model -> input shape (the reference models' README)
MODEL_SHAPES = {"mlp": (8, 784), "lenet": (4, 1, 28, 28), "resnet18_v1": (1, 3, 224, 224),
                "mobilenet1.0": (1, 3, 224, 224)}


def model_plan(name: str):
    """(LaunchPlan, bound weights) of a reference model (skips when it is absent), as `symjit compile --target cuda` builds it."""
    from symjit.cli import _shapes, load_model
    from symjit.compiler import _to_graph
    net, params, _ = load_model(str(model_path(f"{name}-symbol.json")), str(model_path(f"{name}-0000.params")))
    dims = "x".join(str(d) for d in MODEL_SHAPES[name])
    shapes, dtypes = _shapes(net, params, [f"data:{dims}"])
    g, _ = _to_graph(net, shapes, dtypes)
    bound = {k: v for k, v in params.items() if k in {v.name for v in g.inputs}}
    return lower_graph(plan_graph(g, bound), bound, name.replace(".", "_")), bound
