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


def _have_nvcc() -> bool:
    from symjit.codegen.cuda.aot import find_nvcc
    try:
        find_nvcc()
        return True
    except MXNetError:
        return False


needs_cxx = pytest.mark.skipif(shutil.which(host_compiler()) is None or shutil.which("cc") is None,
                               reason="the CUDA emulation needs the host C++ compiler (c++) and cc")
needs_nvcc = pytest.mark.skipif(not _have_nvcc(), reason="needs the CUDA compiler nvcc (not found)")


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


def emulate_graph(g, feeds: dict, tmp_path, consts: dict | None = None):
    """(emulated outputs, interpreter outputs, LaunchPlan) of graph `g` after the inference
    pipeline with `consts` bound as compile-time parameters."""
    consts = dict(consts or {})
    plan = lower_graph(plan_graph(g, consts), consts, g.name)
    _, entry = load_emulated(plan, tmp_path)
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
    _, entry = load_emulated(plan, tmp_path)
    return list(entry(*[np.ascontiguousarray(a) for a in arrays]))
