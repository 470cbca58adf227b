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

__all__ = ["Param", "REQUIRED", "parse_attrs", "format_attr", "Int", "Float", "Bool", "Str", "Shape",
           "Dtype", "Enum", "Optional", "FloatTuple", "Any_"]

class _Required:
    def __repr__(self):
        return "REQUIRED"

REQUIRED = _Required()

def _literal(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError) as e:
        raise ValueError(f"cannot parse {text!r}") from e

def Int(v) -> int:
    if isinstance(v, str):
        v = _literal(v.strip())
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return int(v)
    raise ValueError(f"expected an integer, got {v!r}")

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
        v = _literal(s)
    if isinstance(v, (bool, np.bool_)):
        return float(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    if isinstance(v, np.ndarray) and v.size == 1:
        return float(v.reshape(()))
    raise ValueError(f"expected a number, got {v!r}")

def Bool(v) -> bool:
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("true", "1"):
            return True
        if s in ("false", "0"):
            return False
        raise ValueError(f"expected a boolean, got {v!r}")
    if isinstance(v, (bool, np.bool_, int, np.integer)):
        return bool(v)
    raise ValueError(f"expected a boolean, got {v!r}")

def Str(v) -> str:
    if not isinstance(v, str):
        raise ValueError(f"expected a string, got {v!r}")
    return v

def Shape(v) -> tuple:
    """A tuple of ints; accepts '(3, 3)', '[3,3]', '3', 3, (3, 3), [3, 3], '()'."""
    if isinstance(v, str):
        v = _literal(v.strip()) if v.strip() else ()
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v),)
    if isinstance(v, np.ndarray) and v.ndim <= 1:
        v = v.reshape(-1).tolist()
    if isinstance(v, (tuple, list)):
        return tuple(Int(x) for x in v)
    raise ValueError(f"expected a shape tuple, got {v!r}")

def FloatTuple(v) -> tuple:
    if isinstance(v, str):
        v = _literal(v.strip())
    if isinstance(v, (int, float, np.number)):
        return (float(v),)
    if isinstance(v, (tuple, list)):
        return tuple(Float(x) for x in v)
    raise ValueError(f"expected a tuple of numbers, got {v!r}")

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
            raise ValueError(f"expected one of {list(choices)}, got {v!r}")
        return s
    parse.__name__ = "Enum" + str(list(choices))
    return parse

def Optional(kind: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`None` (or the string 'None') or a value of `kind`."""
    def parse(v):
        if v is None or (isinstance(v, str) and v.strip() == "None"):
            return None
        return kind(v)
    parse.__name__ = f"Optional[{getattr(kind, '__name__', kind)}]"
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
    `ignore` (frontend-only attributes such as `name`, `__lr_mult__`) are dropped.
    """
    out = {}
    for key, value in raw.items():
        if key in ignore or (key.startswith("__") and key.endswith("__")):
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
