"""Nested lists of arrays or symbols, flattened and regrouped (MXNet's `_flatten` / `_regroup`).

`flatten(args, leaf, what)` turns a nested list/tuple of `leaf` objects into a flat list plus a
format; `regroup(flat, fmt)` rebuilds the nesting from the format: (nested, rest of flat).
Shared by the imperative and symbolic control-flow frontends (`nd.contrib`, `sym.contrib`).
"""
from __future__ import annotations

from .base import MXNetError

__all__ = ["flatten", "regroup"]


def flatten(args, leaf: type, what: str):
    """(flat list, format) of a nested list of `leaf` objects; MXNetError on anything else."""
    if isinstance(args, leaf):
        return [args], 0
    if not isinstance(args, (list, tuple)):
        raise MXNetError(f"{what} must be a (nested) list of {leaf.__name__}, but got {args!r} of type "
                         f"{type(args).__name__}")
    flat, fmts = [], []
    for a in args:
        f, fmt = flatten(a, leaf, what)
        flat.extend(f)
        fmts.append(fmt)
    return flat, fmts


def regroup(args: list, fmt):
    """Rebuild the nesting described by `fmt`; returns (nested, the unused rest of `args`)."""
    if isinstance(fmt, int):
        if fmt == 0:
            return args[0], args[1:]
        return args[:fmt], args[fmt:]
    ret = []
    for f in fmt:
        res, args = regroup(args, f)
        ret.append(res)
    return ret, args
