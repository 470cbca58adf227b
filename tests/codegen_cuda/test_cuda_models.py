"""The reference models (tests/shared_data.py) compiled for CUDA and run by the host emulation of
the generated source, against the outputs MXNet 1.9.1 computed (`NAME-output.npy`).

Tolerance (the models' README): max abs error below 1e-4 relative to the output's scale.
mlp and lenet run in the default suite; resnet18_v1 and mobilenet1.0 (tens of seconds of
emulated GPU threads each) are `slow`.
"""
from __future__ import annotations

import numpy as np
import pytest

from cuda_util import model_plan, needs_cxx
from shared_data import model_path
from symjit.codegen.cuda.emulate import load_emulated

pytestmark = needs_cxx


def _check(name: str, tmp_path) -> None:
    plan, _ = model_plan(name)
    assert [v.name for v in plan.placement.inputs] == ["data"]
    _, entry = load_emulated(plan, tmp_path, "-O1")
    y, = entry(np.load(model_path(f"{name}-input.npy")))
    ref = np.load(model_path(f"{name}-output.npy"))
    assert y.shape == ref.shape and y.dtype == ref.dtype
    assert np.abs(y - ref).max() <= 1e-4 * np.abs(ref).max()


@pytest.mark.parametrize("name", ["mlp", "lenet"])
def test_emulated_model_matches_mxnet(name, tmp_path):
    _check(name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18_v1", "mobilenet1.0"])
def test_emulated_large_model_matches_mxnet(name, tmp_path):
    _check(name, tmp_path)


def test_plans_of_the_large_models_lower_completely():
    """Every node of resnet18_v1 and mobilenet1.0 has a CUDA lowering; identical layers share
    kernels; the launch plan stays within the memory plan's arena."""
    for name in ("resnet18_v1", "mobilenet1.0"):
        plan, bound = model_plan(name)
        assert len(plan.kernels) < len(plan.launches)
        for step in plan.steps:
            for v in getattr(step, "args", []):
                kind, off = plan.placement.where[v]
                if kind == "arena":
                    nbytes = int(np.prod(v.type.shape)) * np.dtype(v.type.dtype).itemsize
                    assert off + nbytes <= plan.workspace_size
