"""Attribute schemas: typed operator parameters that parse MXNet's string attributes.

MXNet passes operator attributes either as Python values (`kernel=(3, 3)`) or, in
JSON graphs, as strings (`"kernel": "(3, 3)"`, `"no_bias": "True"`). A `Param`
turns either form into one canonical Python value; `format_attr` writes it back
in MXNet's spelling. This is the only place attribute strings are parsed.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from ..base import MXNetError, canonical_dtype

__all__ = ["Param", "REQUIRED", "parse_attrs", "format_attr", "parse_literal", "abbreviate", "Int", "Count",
           "MAX_COUNT", "Float", "Bool", "Str", "Shape", "Dtype", "Enum", "Optional", "FloatTuple", "Any_"]

class _Required:
    def __repr__(self):
        return "REQUIRED"

REQUIRED = _Required()

#: longest attribute string parsed as a Python literal (a 1000-dim shape is ~7000 characters);
#: longer text is refused before the parser sees it, so parsing is bounded in time and memory
MAX_LITERAL_CHARS = 16384


def abbreviate(value, limit: int = 60) -> str:
    """repr(value), cut to about `limit` characters (error messages quote attribute values)."""
    r = repr(value)
    return r if len(r) <= limit else f"{r[:limit]}... ({len(r)} characters)"


def parse_literal(text: str):
    """A Python literal from an attribute string, bounded in length and nesting; anything
    else raises ValueError (which `parse_attrs` reports as an MXNetError)."""
    if len(text) > MAX_LITERAL_CHARS:
        raise ValueError(f"value of {len(text)} characters is too long "
                         f"(at most {MAX_LITERAL_CHARS}): {abbreviate(text)}")
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError) as e:
        raise ValueError(f"cannot parse {abbreviate(text)}") from e
    except (MemoryError, RecursionError):
        raise ValueError(f"cannot parse {abbreviate(text)}: nested too deeply") from None


def Int(v) -> int:
    if isinstance(v, str):
        v = parse_literal(v.strip())
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return int(v)
    raise ValueError(f"expected an integer, got {abbreviate(v)}")

#: the most inputs or outputs a variadic op may declare (`num_args`, `num_outputs`): a count is
#: checked against this bound when parsed, before any per-input list is built from it
MAX_COUNT = 1 << 16


def Count(v) -> int:
    """A number of inputs or outputs: an integer in [0, MAX_COUNT]."""
    n = Int(v)
    if not 0 <= n <= MAX_COUNT:
        raise ValueError(f"expected a count between 0 and {MAX_COUNT}, got {n}")
    return n


def Float(v) -> float:
    if isinstance(v, str):
        s = v.strip()
        low = s.lower()
        if low in ("inf", "+inf", "infinity"):
            return float("inf")
        if low in ("-inf", "-infinity"):
            return float("-inf")
        if low == "nan":
            return float("nan")
        v = parse_literal(s)
    if isinstance(v, (bool, np.bool_)):
        return float(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    if isinstance(v, np.ndarray) and v.size == 1:
        return float(v.reshape(()))
    raise ValueError(f"expected a number, got {abbreviate(v)}")

def Bool(v) -> bool:
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("true", "1"):
            return True
        if s in ("false", "0"):
            return False
        raise ValueError(f"expected a boolean, got {abbreviate(v)}")
    if isinstance(v, (bool, np.bool_, int, np.integer)):
        return bool(v)
    raise ValueError(f"expected a boolean, got {abbreviate(v)}")

def Str(v) -> str:
    if not isinstance(v, str):
        raise ValueError(f"expected a string, got {abbreviate(v)}")
    return v

def Shape(v) -> tuple:
    """A tuple of ints; accepts '(3, 3)', '[3,3]', '3', 3, (3, 3), [3, 3], '()'."""
    if isinstance(v, str):
        v = parse_literal(v.strip()) if v.strip() else ()
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v),)
    if isinstance(v, np.ndarray) and v.ndim <= 1:
        v = v.reshape(-1).tolist()
    if isinstance(v, (tuple, list)):
        return tuple(Int(x) for x in v)
    raise ValueError(f"expected a shape tuple, got {abbreviate(v)}")

def FloatTuple(v) -> tuple:
    if isinstance(v, str):
        v = parse_literal(v.strip())
    if isinstance(v, (int, float, np.number)):
        return (float(v),)
    if isinstance(v, (tuple, list)):
        return tuple(Float(x) for x in v)
    raise ValueError(f"expected a tuple of numbers, got {abbreviate(v)}")

def Dtype(v) -> str:
    """A dtype, canonicalised to its MXNet name ('float32', ...)."""
    try:
        return np.dtype(canonical_dtype(v)).name
    except MXNetError as e:
        raise ValueError(str(e)) from e

def Any_(v):
    return v

def Enum(*choices: str) -> Callable[[Any], str]:
    def parse(v) -> str:
        if isinstance(v, (type, np.dtype)):   # a dtype choice given as np.float64 / np.dtype
            try:
                v = np.dtype(v).name
            except TypeError:
                pass
        s = str(v).strip().strip("'\"")
        if s not in choices:
            raise ValueError(f"expected one of {list(choices)}, got {abbreviate(v)}")
        return s
    parse.__name__ = "Enum" + str(list(choices))
    parse.choices = choices
    return parse

def Optional(kind: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`None` (or the string 'None') or a value of `kind`."""
    def parse(v):
        if v is None or (isinstance(v, str) and v.strip() == "None"):
            return None
        return kind(v)
    parse.__name__ = f"Optional[{getattr(kind, '__name__', kind)}]"
    parse.inner = kind
    return parse

@dataclass(frozen=True)
class Param:
    """One operator attribute: its parser, default and documentation."""
    kind: Callable[[Any], Any]
    default: Any = REQUIRED
    doc: str = ""

def parse_attrs(op_name: str, schema: Mapping[str, Param], raw: Mapping[str, Any],
                ignore: frozenset = frozenset()) -> dict:
    """Parse raw attributes (Python values or MXNet strings) against a schema.

    Returns a dict holding every schema key. Unknown keys, missing required keys and
    unparsable values raise MXNetError naming the op and the attribute. Keys in
    `ignore` (frontend-only attributes such as `name`, `__lr_mult__`) are dropped. An op
    without any attribute (an empty schema: MXNet registers no parameter parser for it, e.g.
    `broadcast_add`, `relu`) drops every key, as MXNet keeps them as mere annotations.
    """
    out = {}
    for key, value in raw.items():
        if key in ignore or (key.startswith("__") and key.endswith("__")) or not schema:
            continue
        if key not in schema:
            raise MXNetError(f"{op_name}: unknown attribute {key!r}; expected one of {sorted(schema)}")
        try:
            out[key] = schema[key].kind(value)
        except (ValueError, TypeError) as e:
            raise MXNetError(f"{op_name}: invalid value for attribute {key!r}: {e}") from None
    for key, p in schema.items():
        if key not in out:
            if p.default is REQUIRED:
                raise MXNetError(f"{op_name}: required attribute {key!r} is missing")
            out[key] = p.default
    return out

def format_attr(value) -> str:
    """Write a parsed attribute back in MXNet's string spelling ('(3, 3)', 'True', '0.001')."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, tuple):
        return "(" + ", ".join(format_attr(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if value is None:
        return "None"
    if isinstance(value, float):
        return repr(value)
    return str(value)
