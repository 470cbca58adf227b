"""How the LLVM backend lowers each NumPy-interface operator (`_np*`, `_npi*`, `_npx*`).

For every such op (gradient ops excluded) it prints the rule codegen/lowering.py finds for
it on the llvm target: a rule registered for the op's name, or for a trait the op has
(`elementwise`, `reduces`, `gemm`, `joins`, `moves_elements`, `reshape_only`), else "numpy
step" (the node runs its reference between native segments). A rule may still decline an
instance (a dtype it does not compute exactly, a non-affine selection, ...): `--probe` also
compiles each op with float32 operands of a small default shape where it can and reports
whether that instance ran natively.
Run: python benchmarks/np_lowering_table.py [--probe] [--only-python]
"""
from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from symjit.codegen.llvm.graph import TABLE
from symjit.codegen.lowering import TRAITS
from symjit.ops.registry import OPS

PREFIXES = ("_np_", "_npi_", "_npx_")


def np_ops() -> list:
    """(registered name, op) of the NumPy-interface names (an `_npx_` alias of a legacy op such
    as `_npx_fully_connected` is listed under its own name), gradient ops excluded."""
    return sorted((k, op) for k, op in OPS.items() if k.startswith(PREFIXES))


def lowering_of(op) -> str:
    """'op rule', 'trait <name>' or 'numpy step'."""
    TABLE.load()
    if op.name in TABLE.by_op:
        return f"op rule {TABLE.by_op[op.name].__name__}"
    for trait, has in TRAITS.items():
        if trait in TABLE.by_trait and has(op):
            return f"trait {trait}"
    return "numpy step"


def probe(op) -> str:
    """Compile the op on float32 operands of shape (4, 6) (as many as it takes without
    attributes) and say whether it ran natively; '-' when no such instance exists."""
    from symjit.codegen.llvm.executable import compile_planned
    from symjit.ir import GraphBuilder, TensorType
    from symjit.passes.manager import compile_graph
    try:
        attrs = op.parse({})
        n = len(op.input_names(attrs))
        b = GraphBuilder(name="probe")
        vals = [b.add_input(f"x{i}", TensorType((4, 6), "float32")) for i in range(n)]
        outs = b.add_node(op.name, vals, {})
        g = b.build(outs[:op.num_visible_outputs(attrs)])
        opt, _ = compile_graph(g, "inference")
        cg = compile_planned(opt, "probe", False)
        cg.run([np.ones((4, 6), np.float32) for _ in range(n)], is_train=False)
    except Exception:  # noqa: BLE001 - ops that need attributes or other operands
        return "-"
    return "native" if cg.native else "numpy step"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probe", action="store_true", help="compile a float32 instance of each op")
    ap.add_argument("--only-python", action="store_true", help="list only the ops without a rule")
    args = ap.parse_args()
    counts: Counter = Counter()
    rows = []
    for name, op in np_ops():
        how = lowering_of(op)
        counts["numpy step" if how == "numpy step" else how.split()[0] + " " + how.split()[1]] += 1
        if args.only_python and how != "numpy step":
            continue
        shown = name if name == op.name else f"{name} ({op.name})"
        rows.append((shown, how, probe(op) if args.probe else ""))
    width = max(len(r[0]) for r in rows) if rows else 10
    for name, how, probed in rows:
        print(f"{name:<{width}}  {how:<34} {probed}")
    total = sum(counts.values())
    print(f"\n{total} ops: " + ", ".join(f"{k}: {v}" for k, v in counts.most_common()))
    native = total - counts["numpy step"]
    print(f"lowered natively (a rule exists): {native}/{total}")


if __name__ == "__main__":
    main()
