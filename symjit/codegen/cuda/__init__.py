"""The CUDA backend: CUDA C for NVIDIA GPUs, built ahead of time with nvcc.

    plan = lower_graph(planned_graph, bound_weights, name)   # graph.py: kernels + launch plan
    text = render(plan)                                      # source.py: one self-contained .cu
    build_library(planned_graph, "out/model", bound=...)     # aot.py: OUT.so/.cu/.h/.json via nvcc
    lib, entry = load_emulated(plan)                         # emulate.py: the .cu run on the host CPU

One module per concern: `expr` (scalar expressions -> C), `prelude` (device helpers),
`plan` (kernels, launches, placement), `elementwise` (fused kernels), `gemm` (FullyConnected,
dot, batch_dot, Convolution, Deconvolution: tiled shared-memory GEMM and implicit-GEMM
convolution with fused epilogues), `reduce` (reductions, the softmax family, LayerNorm), `nn`
(pooling, BatchNorm in inference, LeakyReLU, loss heads), `shape` (copies and data movement,
`where`, Embedding), `graph` (the lowering registry), `source`, `aot`, `emulate`. Ops without a
CUDA lowering raise MXNetError naming the op (`supported_ops()` lists those with one).
Importing this package needs neither a GPU nor nvcc.

The CUDA target compiles inference graphs (the `inference` pass pipeline): mode-dependent ops
take their inference behaviour (Dropout is the identity, BatchNorm uses the moving statistics).
"""
from __future__ import annotations

from ...ir.target import Target
from .graph import lower_graph, supported_ops
from .plan import LaunchPlan
from .source import ARCHS, render

__all__ = ["lower_graph", "supported_ops", "LaunchPlan", "render", "ARCHS", "plan_graph", "TARGET"]

#: what the CUDA code generator compiles for (the pass manager skips the passes whose fused ops
#: only the CPU kernel library implements: they are marked `only_for` llvm targets)
TARGET = Target("cuda", cpu="", sm=tuple(int(a.split("_")[1]) for a in ARCHS))


def plan_graph(g, constants=None, disabled=()):
    """Run the inference pass pipeline for the CUDA target over IR graph `g` with the graph
    inputs named in `constants` bound to their arrays; returns the planned graph."""
    from ...passes.manager import PassManager
    return PassManager("inference", disabled=set(disabled), target=TARGET).run(g, constants or None)
