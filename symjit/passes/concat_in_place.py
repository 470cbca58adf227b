"""Concatenation written in place by its producers.

Where a Concat's (or numpy's concatenate's, `concat_axis`) parts are contiguous slabs of its output (every dimension before the axis is
1, e.g. channels at batch 1) and the output and the parts are arena values (not graph inputs,
constants or outputs) outside in-place pairs, each part can live at its slab inside the
output's buffer: the producers then write the concatenation and its copies are no-ops, which
the code generators skip (codegen/llvm/lower_shape.py). DenseNet's, Inception's and
SqueezeNet's blocks then copy nothing; nested concatenations (DenseNet: each layer's
concatenation is a part of the next one's) compose. The memory plan (memory_plan.py) places
them; this pass only chooses, as `g.annotations['concat_aliases']`.

Why in-place pairs are excluded: a part's buffer must hold the part's value as long as the
concatenation is live, so no later node may take it over in place; and an in-place output
shares its input's buffer, which is not at the slab.

Guarantee: the graph is unchanged; every chosen slab starts at a multiple of the alignment
(kernels may assume aligned buffers); a value is a part of at most one chosen concatenation.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph
from .inplace import nbytes
from .memory_plan import intermediates


def concat_axis(n) -> int | None:
    """The axis along which node `n` concatenates its inputs into its one output (Concat, or an
    op whose `join_axis` joins along an existing axis, as numpy's concatenate), else None."""
    if len(n.outputs) != 1 or not n.outputs[0].type.shape_known:
        return None
    ndim = len(n.outputs[0].type.shape)
    if n.op.name in ("Concat", "concat"):
        return n.attrs["dim"] % ndim
    join = getattr(n.op, "join_axis", None)
    found = join(n.attrs, ndim) if callable(join) else None
    return found[0] if found is not None and not found[1] else None


def concat_aliases(g: Graph, values: list, inplace: dict, alignment: int = 64) -> dict:
    """{part Value: (concat output Value, byte offset)} for the concatenations written in place
    (module docstring): the output and every part are in `values` (the arena's), none is in an
    in-place pair or read twice by the concatenation or already a part of another one, the
    dtypes agree, and every slab starts at a multiple of `alignment` bytes."""
    member = set(values)
    paired = set(inplace) | set(inplace.values())
    alias: dict = {}
    for n in g.nodes:
        axis = concat_axis(n)
        if axis is None:
            continue
        y = n.outputs[0]
        shape = tuple(y.type.shape)
        parts = list(n.inputs)
        if (y not in member or y in paired or int(np.prod(shape[:axis], dtype=np.int64)) != 1
                or len(set(parts)) != len(parts)
                or any(p not in member or p in paired or p in alias or p.type.dtype != y.type.dtype
                       for p in parts)):
            continue
        slab = int(np.prod(shape[axis + 1:], dtype=np.int64)) * np.dtype(y.type.dtype).itemsize
        offsets = np.cumsum([0] + [p.type.shape[axis] * slab for p in parts[:-1]])
        if any(int(o) % alignment for o in offsets):
            continue
        alias.update({p: (y, int(o)) for p, o in zip(parts, offsets)})
    return alias


def plan_concat_in_place(g: Graph, alignment: int = 64) -> tuple[Graph, dict]:
    """The module docstring's choice; stats: `concat_parts_in_place`, `bytes_not_copied`."""
    inplace = dict(g.annotations.get("inplace", {}))
    g = g.copy()
    by_name = {v.name: v for v in g.values()}   # the copy's Values: the pairs carried over by name
    inplace = {by_name[o.name]: by_name[i.name] for o, i in inplace.items()}
    alias = concat_aliases(g, intermediates(g), inplace, alignment)
    g.annotations["inplace"] = inplace
    g.annotations["concat_aliases"] = alias
    return g, {"concat_parts_in_place": len(alias), "bytes_not_copied": sum(nbytes(p) for p in alias)}
