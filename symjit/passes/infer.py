"""Shape and dtype inference over the IR.

`infer_types(g, shapes, dtypes)` returns a copy of `g` whose Value types are refined as far
as the ops' `infer_shape` / `infer_type` rules allow, starting from the graph inputs' types
plus the given `shapes` / `dtypes` (by input name). Partial results are allowed (MXNet's
`infer_shape_partial`): unknown shapes stay None, unknown dims 0, unknown dtypes None.

Guarantees
  * the result has the same structure as `g` (same nodes, inputs and outputs, fresh objects);
  * types only become more precise, never contradict what `g` recorded;
  * it reaches a fixpoint: information flows forward (inputs to outputs) and back into
    inputs where an op deduces input shapes (FullyConnected fills its weight from data, and
    its data's batch size from its output: `Op.infer_shape_backward`), over
    repeated sweeps until nothing changes (at most one sweep per node plus one);
  * a conflict raises MXNetError naming the node, its op and the conflicting shapes/dtypes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..base import MXNetError
from ..ir.builder import describe_node, infer_node_types
from ..ir.graph import Graph, TensorType
from ..ops.registry import merge_shape

__all__ = ["infer_types", "InferStats"]


@dataclass
class InferStats:
    """What inference achieved: sweeps run, values whose shape / dtype is fully known."""
    sweeps: int = 0
    values: int = 0
    shapes_known: int = 0
    dtypes_known: int = 0


def _merge_type(where: str, what: str, old: TensorType, new: TensorType) -> TensorType:
    try:
        shape = merge_shape(where, what, old.shape, new.shape)
    except MXNetError:
        raise MXNetError(f"shape inference failed at {where}: conflicting shapes for {what}: "
                         f"{tuple(old.shape)} vs {tuple(new.shape)}") from None
    if old.dtype is not None and new.dtype is not None and old.dtype != new.dtype:
        raise MXNetError(f"type inference failed at {where}: conflicting dtypes for {what}: "
                         f"{old.dtype} vs {new.dtype}")
    return TensorType(shape, old.dtype or new.dtype, old.device)


def infer_types(g: Graph, shapes: Mapping[str, tuple] | None = None,
                dtypes: Mapping[str, str] | None = None) -> tuple[Graph, InferStats]:
    """Refine every Value's type (see the module docstring)."""
    out = g.copy()
    by_name = {v.name: v for v in out.inputs}
    hint_replaced = False
    for table, kind in ((shapes or {}, "shape"), (dtypes or {}, "dtype")):
        for name, val in table.items():
            v = by_name.get(name)
            if v is None:
                raise MXNetError(f"infer: {name!r} is not an input of the graph; inputs are "
                                 f"{sorted(by_name)}")
            given = TensorType(tuple(int(d) for d in val), None) if kind == "shape" else TensorType(None, val)
            if kind == "shape" and all(given.shape):
                # a fully known shape replaces the variable's `__shape__` hint (MXNet reads the
                # attribute only for shapes it is not given)
                hint_replaced |= v.type.shape is not None and tuple(v.type.shape) != given.shape
                v.type = TensorType(given.shape, v.type.dtype, v.type.device)
            else:
                v.type = _merge_type(f"input {name!r}", f"the given {kind}", v.type, given)
    if hint_replaced:   # shapes derived from the replaced hints are inferred again
        for n in out.nodes:
            for o in n.outputs:
                o.type = TensorType(None, o.type.dtype, o.type.device)
    stats = InferStats()
    for sweep in range(len(out.nodes) + 2):
        stats.sweeps = sweep + 1
        changed = False
        for n in out.nodes:
            where = describe_node(n.name, n.op)
            new_in, new_out = infer_node_types(n.name, n.op, n.attrs, [v.type for v in n.inputs])
            names = n.op.input_names(n.attrs)
            for i, (v, t) in enumerate(zip(n.inputs, new_in)):
                merged = _merge_type(where, f"input {names[i]!r}", v.type, t)
                if merged != v.type:
                    v.type, changed = merged, True
            for i, (v, t) in enumerate(zip(n.outputs, new_out)):
                merged = _merge_type(where, f"output {i}", v.type, t)
                if merged != v.type:
                    v.type, changed = merged, True
            if any(v.type.shape is not None for v in n.outputs) and not all(v.type.shape_known for v in n.inputs):
                back = n.op.infer_shape_backward(n.attrs, [v.type.shape for v in n.inputs],
                                                 [v.type.shape for v in n.outputs])
                for i, (v, s) in enumerate(zip(n.inputs, back)):
                    merged = _merge_type(where, f"input {names[i]!r}", v.type, v.type.with_shape(s))
                    if merged != v.type:
                        v.type, changed = merged, True
        if not changed:
            break
    vals = list(out.values())
    stats.values = len(vals)
    stats.shapes_known = sum(v.type.shape_known for v in vals)
    stats.dtypes_known = sum(v.type.dtype is not None for v in vals)
    return out, stats
