"""A Symbol's graph as a key for the plan cache (codegen/plan_cache.py), computed without
building the IR graph: what a second process needs to find a plan it stored before."""
from __future__ import annotations

import hashlib

from ..codegen.plan_cache import canonical
from .symbol import topo_nodes

__all__ = ["symbol_fingerprint"]


def symbol_fingerprint(sym) -> str:
    """sha256 of a Symbol's graph: every node reachable from its outputs (op, name, attribute
    strings, inputs by position) and the outputs. Raises plan_cache.Uncacheable for an
    attribute value without a canonical text."""
    heads = sym._outputs
    nodes = topo_nodes(heads)
    index = {id(n): i for i, n in enumerate(nodes)}
    h = hashlib.sha256(b"symbol\0")
    for n in nodes:
        op = n.op.name if n.op is not None else "null"
        ins = ",".join(f"{index[id(c)]}:{k}" for c, k in n.inputs)
        attrs = n.attrs
        text = (repr(sorted(attrs.items())) if all(type(k) is str and type(v) is str for k, v in attrs.items())
                else canonical(attrs))   # attribute strings (the usual case): their repr is canonical
        h.update(f"{op}|{n.name}|{text}|{ins}\n".encode())
    h.update(("out:" + ",".join(f"{index[id(n)]}:{k}" for n, k in heads)).encode())
    return h.hexdigest()
