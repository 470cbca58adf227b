"""The launch plan: kernels, the ordered steps that run them, and where every value lives.

A lowered graph is a `LaunchPlan`:
  * `kernels`: distinct `__global__` functions (deduplicated by their text; a kernel's name
    is a hash of its body, so equal code gets one name and different code another);
  * `steps`: `Launch` (a kernel over a 1-D grid of 1-D blocks, arguments are values' device
    pointers and integers) and `Copy` (a device-to-device copy), executed in order on one
    stream, so every step sees the results of the steps before it;
  * `placement`: the device buffer of every value, all of them inside one device allocation
    whose regions are described by `DeviceLayout`.

Where values live (`Placement.where[value]`): ('input', k) the k-th free graph input,
('output', j) the j-th graph output (its first occurrence), ('param', p) a parameter (a bound
graph input the code reads, or a `_const`), ('arena', offset) every other value, at the
memory plan's offset (`g.annotations['memory_plan']`) in the workspace. Outputs that repeat a
value, or that are inputs or parameters, are `Copy` steps at the end.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from ...base import MXNetError
from ...ir.graph import Graph, Node, Value

__all__ = ["Kernel", "Launch", "Copy", "Placement", "LaunchPlan", "LoweringContext", "place_values", "nbytes",
           "PARAM_ALIGNMENT"]

#: alignment of every parameter inside the device parameter block (cudaMalloc gives 256)
PARAM_ALIGNMENT = 256


def nbytes(v: Value) -> int:
    return int(np.prod(v.type.shape, dtype=np.int64)) * np.dtype(v.type.dtype).itemsize


@dataclass(frozen=True)
class Kernel:
    """One `extern "C" __global__` function.

    `source` is its complete definition; `param_types` the C types of its parameters (launch
    arguments are cast to them); `barriers` says whether it calls `__syncthreads` (it is then
    launched with SJ_LAUNCH_SYNC); `threads` is the block size it was written for (its
    `__launch_bounds__`, and the block size of every launch)."""
    name: str
    source: str
    param_types: tuple
    threads: int
    barriers: bool


@dataclass
class Launch:
    """kernel<<<grid, threads>>>(args): args are Values (device pointers of their buffers,
    cast to the kernel's parameter types) in the order of the kernel's parameters."""
    kernel: Kernel
    grid: int
    args: list
    node: str

    def __post_init__(self):
        if not 1 <= self.grid <= 2 ** 31 - 1:
            raise MXNetError(f"cuda codegen: node {self.node!r}: grid of {self.grid} blocks is out of range")


@dataclass
class Copy:
    """Copy `nbytes` bytes of value `src` into value `dst` (device to device)."""
    dst: Value
    src: Value
    nbytes: int
    node: str


@dataclass
class Placement:
    """Storage of every value (see the module docstring)."""
    where: dict = field(default_factory=dict)
    params: list = field(default_factory=list)      # (name, numpy array) per parameter
    param_offsets: list = field(default_factory=list)
    inputs: list = field(default_factory=list)      # free graph inputs, in signature order
    outputs: list = field(default_factory=list)     # graph outputs, in order
    output_copies: list = field(default_factory=list)  # (output index, source Value)

    @property
    def param_bytes(self) -> int:
        if not self.params:
            return 0
        last = self.params[-1][1]
        return self.param_offsets[-1] + last.nbytes


def place_values(g: Graph, bound: dict) -> Placement:
    """Placement of every value of planned graph `g`; `bound` maps the names of graph inputs
    that are compile-time constants (the weights) to their arrays: those the code reads become
    parameters, the others are dropped; the remaining graph inputs are the free inputs."""
    plan = g.annotations.get("memory_plan")
    if plan is None:
        raise MXNetError("cuda codegen: the graph has no memory plan; run the pass pipeline first")
    p = Placement()
    used = {v for n in g.nodes for v in n.inputs} | set(g.outputs)

    def add_param(v: Value, array) -> None:
        arr = np.ascontiguousarray(np.asarray(array, dtype=v.type.dtype).reshape(v.type.shape))
        off = 0
        if p.params:
            off = p.param_offsets[-1] + p.params[-1][1].nbytes
            off = -(-off // PARAM_ALIGNMENT) * PARAM_ALIGNMENT
        p.where[v] = ("param", len(p.params))
        p.params.append((v.name, arr))
        p.param_offsets.append(off)

    for v in g.inputs:
        if not v.type.known:
            raise MXNetError(f"cuda codegen: graph input {v.name!r} has unknown type {v.type}")
        if v.name in bound:
            if v in used:
                add_param(v, bound[v.name])
        else:
            p.where[v] = ("input", len(p.inputs))
            p.inputs.append(v)
    for n in g.nodes:
        if n.op.name == "_const":
            add_param(n.outputs[0], n.attrs["value"])
    for j, v in enumerate(g.outputs):
        p.outputs.append(v)
        if v in p.where:        # an input, a parameter or a value already returned by an earlier slot
            p.output_copies.append((j, v))
        else:
            p.where[v] = ("output", j)
    for v, off in plan.offsets.items():
        if v not in p.where:
            p.where[v] = ("arena", int(off))
    return p


@dataclass
class LaunchPlan:
    """The lowered graph (see the module docstring)."""
    name: str
    kernels: list
    steps: list
    placement: Placement
    workspace_size: int

    @property
    def launches(self) -> list:
        return [s for s in self.steps if isinstance(s, Launch)]


class LoweringContext:
    """What a lowering uses: the kernels generated so far (deduplicated) and the node."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.kernels: dict[str, Kernel] = {}
        self.node: Node | None = None

    def kernel(self, base: str, params: list, body: str, threads: int, barriers: bool = False) -> Kernel:
        """Register the kernel `base` with parameters `params` ([(C type, name)]) and `body`
        (C statements); returns the (possibly already registered) Kernel. The name is `base`
        plus a hash of the text, so a kernel is generated once however many nodes use it."""
        plist = ", ".join(f"{t} {n}" for t, n in params)
        head = f'extern "C" __global__ void __launch_bounds__({threads}) @NAME@({plist})'
        source = f"{head} {{\n{body.rstrip()}\n}}\n"
        digest = hashlib.sha1(f"{barriers}|{source}".encode()).hexdigest()[:16]
        name = f"{base}_{digest}"
        k = self.kernels.get(name)
        if k is None:
            k = self.kernels[name] = Kernel(name, source.replace("@NAME@", name), tuple(t for t, _ in params),
                                            threads, barriers)
        return k

    def launch(self, kernel: Kernel, grid: int, args: list) -> Launch:
        return Launch(kernel, int(grid), list(args), self.node.name if self.node is not None else "")

    def copy(self, dst: Value, src: Value) -> Copy:
        return Copy(dst, src, nbytes(src), self.node.name if self.node is not None else "")
