"""Lowering rules keyed by the op, per target kind (as JAX's `register_lowering(prim, rule,
platform=...)`): one table per kind (`llvm`, `cuda`), filled by the backends' modules.

A rule is found for a node by its op: the rule registered for the op's name (aliases share
their op), else the rule registered for a trait the op has (`TRAITS`, first match), else
none. So an op that declares a trait (ops/registry.py: `reshape_only`, `reduces`, or an
`Elementwise` op; the NumPy-interface ops' `gemm_dims`, `join_axis` and `moves_elements`,
ops/np_matmul.py and ops/np_shape.py) is lowered without being named in any backend (by the
targets that have a rule for the trait). A rule returns the node's code, or None when it declines this instance (an unsupported dtype, say); a node
without a rule, or whose rule declined, is reported (`CompileStats.python_nodes`,
`symjit inspect`) and with `SYMJIT_STRICT=1` is an error (codegen/llvm/graph.py).
"""
from __future__ import annotations

from typing import Callable

from ..ops.registry import Elementwise, Op, get_op

__all__ = ["TRAITS", "LoweringTable", "lowering_table", "register_lowering"]

#: trait -> predicate on the op, in the order rules for traits are tried
TRAITS: dict[str, Callable[[Op], bool]] = {
    "reshape_only": lambda op: op.reshape_only,
    "elementwise": lambda op: isinstance(op, Elementwise),
    "reduces": lambda op: op.reduces is not None,
    "gemm": lambda op: callable(getattr(op, "gemm_dims", None)),
    "joins": lambda op: callable(getattr(op, "join_axis", None)),
    "moves_elements": lambda op: getattr(op, "moves_elements", False),
}


class LoweringTable:
    """The lowerings of one target kind: rules by op name and by trait."""

    def __init__(self, kind: str):
        self.kind = kind
        self.by_op: dict[str, Callable] = {}
        self.by_trait: dict[str, Callable] = {}
        self._loaders: list[Callable[[], None]] = []

    def register(self, *op_names: str):
        """Decorator: the rule lowers these ops (names or aliases, keyed by the op)."""
        def deco(rule):
            for name in op_names:
                self.by_op[get_op(name).name] = rule
            return rule
        return deco

    def register_trait(self, trait: str):
        """Decorator: the rule lowers every op with `trait` that has no rule of its own."""
        if trait not in TRAITS:
            raise ValueError(f"unknown trait {trait!r}; expected one of {sorted(TRAITS)}")

        def deco(rule):
            self.by_trait[trait] = rule
            return rule
        return deco

    def add_loader(self, load: Callable[[], None]) -> None:
        """`load()` imports the modules that register this kind's rules (run on first lookup)."""
        self._loaders.append(load)

    def load(self) -> None:
        """Run the pending loaders (idempotent)."""
        while self._loaders:
            self._loaders.pop(0)()

    def find(self, op: Op) -> Callable | None:
        """The rule for `op` (see the module docstring), or None."""
        self.load()
        rule = self.by_op.get(op.name)
        if rule is not None:
            return rule
        for trait, has in TRAITS.items():
            if trait in self.by_trait and has(op):
                return self.by_trait[trait]
        return None

    def lowers(self, op: Op) -> bool:
        return self.find(op) is not None


_TABLES: dict[str, LoweringTable] = {}


def lowering_table(kind: str) -> LoweringTable:
    """The table of target kind `kind` (created empty on first use)."""
    return _TABLES.setdefault(kind, LoweringTable(kind))


def register_lowering(op_name: str, rule: Callable, *, target: str) -> Callable:
    """Register `rule` for op `op_name` on target kind `target`; returns the rule."""
    return lowering_table(target).register(op_name)(rule)
