"""nvcc compiles the generated CUDA sources: every kernel template (default run, one arch,
warnings as errors), the shared models for every target arch plus PTX, and random graphs
(`slow`). Skipped with a reason when nvcc is not installed. Compiling proves the source is
valid CUDA for the GPU toolchain (ptxas included); running it needs a GPU (test_cuda_gpu.py)."""
from __future__ import annotations

import tempfile

import pytest
from hypothesis import HealthCheck, given, settings

from cuda_util import every_template_net, model_plan, needs_nvcc
from graphgen import random_graph
from symjit.codegen.cuda import lower_graph, plan_graph, render
from symjit.codegen.cuda.aot import compile_cuda, find_nvcc
from symjit.codegen.cuda.source import ARCHS

pytestmark = needs_nvcc

_STRICT = ("-Werror", "all-warnings", "-Xcompiler", "-Wall,-Wextra")


def _nvcc(plan, tmp, archs=("sm_80",)) -> None:
    cu = f"{tmp}/{plan.name}.cu"
    with open(cu, "w") as f:
        f.write(render(plan))
    compile_cuda(find_nvcc(), cu, f"{tmp}/{plan.name}.o", archs, _STRICT)


def test_nvcc_compiles_every_kernel_template_without_warnings(tmp_path):
    net = every_template_net()     # inference rewrites off: BatchNorm keeps its own kernel
    plan = lower_graph(plan_graph(net.graph(), net.consts, ("inference_rewrites",)), net.consts, "templates")
    assert any(k.name.startswith("sj_batchnorm") for k in plan.kernels)
    _nvcc(plan, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mlp", "lenet", "resnet18_v1", "mobilenet1.0"])
def test_nvcc_compiles_the_shared_models_for_every_arch(name, tmp_path):
    plan, _ = model_plan(name)
    _nvcc(plan, tmp_path, ARCHS)


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graph(max_nodes=20))
def test_nvcc_compiles_random_graphs(g):
    plan = lower_graph(plan_graph(g), {}, "random")
    with tempfile.TemporaryDirectory() as tmp:
        _nvcc(plan, tmp)
