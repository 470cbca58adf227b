"""The reference interpreter: runs a Graph node by node on numpy through each op's `compute`.

It is the ground truth that optimisation passes and code generators are tested against,
so it is deliberately simple: no fusion, no memory planning, no reuse of buffers other than
dropping arrays after their last use.

Semantics
  * `feeds` gives one array per graph input (by Value or by name); known dims of the input's
    type must match; arrays are never written to.
  * `is_train` is passed to ops (Dropout, BatchNorm batch statistics, ...).
  * An op with `updates_aux` returns, in training, the new values of its auxiliary inputs
    after its outputs; the interpreter reports them in `RunResult.aux_updates` (keyed by the
    graph aux input the node read) instead of writing them anywhere. Later nodes in the same
    run see the old values, as in MXNet where an op updates its aux states in place.
  * Errors from ops become MXNetError naming the node and its op; nothing crashes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np

from ..base import MXNetError
from ..ops.registry import ComputeContext
from .builder import describe_node
from .graph import Graph, Value

__all__ = ["RunResult", "run"]


@dataclass
class RunResult:
    """Outputs in `graph.outputs` order, aux updates, and the values asked to be kept."""
    outputs: list
    aux_updates: dict = field(default_factory=dict)
    kept: dict = field(default_factory=dict)


def _bind_feeds(g: Graph, feeds: Mapping) -> dict:
    by_name = {v.name: v for v in g.inputs}
    inputs = set(g.inputs)
    env: dict[Value, np.ndarray] = {}
    for key, arr in feeds.items():
        v = key if isinstance(key, Value) else by_name.get(key)
        if v is None or v not in inputs:
            raise MXNetError(f"interpreter: {key!r} is not an input of graph {g.name!r}")
        env[v] = np.asarray(arr)
    for v in g.inputs:
        if v not in env:
            raise MXNetError(f"interpreter: no value fed for graph input %{v.name}")
        shape, have = v.type.shape, env[v].shape
        if shape is not None and (len(shape) != len(have) or any(d and d != h for d, h in zip(shape, have))):
            raise MXNetError(f"interpreter: input %{v.name} expects shape {tuple(shape)}, got {have}")
    return env


def run(g: Graph, feeds: Mapping, is_train: bool = False, rng: np.random.Generator | None = None,
        keep: Iterable[Value] = ()) -> RunResult:
    """Evaluate `g` on `feeds` (see the module docstring); `keep` lists values to return in
    `RunResult.kept` (e.g. forward values a backward graph needs)."""
    env = _bind_feeds(g, feeds)
    keep = set(keep)
    aux_inputs = set(g.aux)
    remaining: dict[Value, int] = {}
    for n in g.nodes:
        for v in n.inputs:
            remaining[v] = remaining.get(v, 0) + 1
    pinned = keep | set(g.outputs)
    ctx = ComputeContext(is_train=is_train, rng=rng)
    aux_updates: dict[Value, np.ndarray] = {}
    for n in g.nodes:
        try:
            args = [env[v] for v in n.inputs]
        except KeyError as e:
            raise MXNetError(f"interpreter: {describe_node(n.name, n.op)} reads a value that is not "
                             f"computed yet: {e}") from None
        results = _compute(n, args, ctx)
        n_out = len(n.outputs)
        if len(results) < n_out:
            raise MXNetError(f"interpreter: {describe_node(n.name, n.op)} returned {len(results)} "
                             f"results for {n_out} outputs")
        for v, r in zip(n.outputs, results):
            env[v] = r
        if len(results) > n_out and (is_train or not n.op.updates_aux):
            names = n.op.input_names(n.attrs)
            positions = [names.index(a) for a in n.op.state_targets(n.attrs) if a in names]
            for pos, new in zip(positions, results[n_out:]):
                src = n.inputs[pos]
                if src in aux_inputs:
                    aux_updates[src] = new
        for v in n.inputs:
            remaining[v] -= 1
            if remaining[v] == 0 and v not in pinned and v not in aux_inputs:
                env.pop(v, None)
    return RunResult([env[v] for v in g.outputs], aux_updates, {v: env[v] for v in keep if v in env})


def _compute(n, args, ctx) -> list:
    if not n.inputs:      # creation ops: the inferred output shapes complete unknown dims
        ctx = ComputeContext(ctx.is_train, ctx.rng, tuple(v.type.shape for v in n.outputs))
    try:
        out = n.op.compute(n.attrs, args, ctx)
    except MXNetError as e:
        raise MXNetError(f"{describe_node(n.name, n.op)}: {e}") from None
    except Exception as e:  # noqa: BLE001 - a bad input must never crash the caller
        raise MXNetError(f"{describe_node(n.name, n.op)}: {type(e).__name__}: {e}") from None
    return [np.asarray(r) for r in out]
