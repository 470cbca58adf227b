"""Run the seed examples of ../shared/spec/seed_examples.json under `import symjit as mx`.

Examples of one session run in order in one namespace, as in the spec. A trailing
expression statement is printed with repr (the spec's REPL convention). Outputs of
deterministic examples must match MXNet 1.9.1's exactly; random ones match in format
(numbers masked). Examples whose MXNet status is an error must raise MXNetError.
"""
from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
from pathlib import Path

SPEC = Path(os.environ.get("SYMJIT_SHARED_DIR") or Path(__file__).resolve().parents[2] / "shared") \
    / "spec" / "seed_examples.json"


def load_examples() -> list[dict]:
    """The spec's examples ([] when the shared directory is absent)."""
    return json.loads(SPEC.read_text()) if SPEC.is_file() else []


def translate(code: str) -> str:
    """Point MXNet imports at symjit."""
    code = re.sub(r"^(\s*)import mxnet as ", r"\1import symjit as ", code, flags=re.M)
    code = re.sub(r"^(\s*)import mxnet\s*$", r"\1import symjit as mxnet", code, flags=re.M)
    code = re.sub(r"^(\s*)from mxnet(\.| )", r"\1from symjit\2", code, flags=re.M)
    return code


def run_code(code: str, namespace: dict) -> str:
    """Execute like a notebook cell: the last bare expression is printed with repr."""
    tree = ast.parse(translate(code))
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            exec(compile(tree, "<example>", "exec"), namespace)
            if last is not None:
                value = eval(compile(last, "<example>", "eval"), namespace)
                if value is not None:
                    print(repr(value))
        except BaseException as e:  # noqa: BLE001 - reported with the output so far
            e.partial_output = buf.getvalue()
            raise
    return buf.getvalue()


_NUM = re.compile(r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf)")


def mask_numbers(text: str) -> str:
    """Replace every number (and hex address) by '#' and collapse whitespace: the format of a
    random output. Padding spaces that depend on the values (before ',' and ']') are dropped."""
    text = re.sub(r"\s+", " ", _NUM.sub("#", re.sub(r"0x[0-9a-fA-F]+", "#", text))).strip()
    text = re.sub(r" ,", ",", text)
    return re.sub(r"\[ ", "[", re.sub(r" \]", "]", text))


#: classes of third-party libraries that moved between modules after the versions MXNet 1.9.1
#: ran with: graphviz >= 0.18 defines `graphviz.Digraph` in graphviz.graphs, not graphviz.dot
_MOVED_CLASSES = {"<graphviz.dot.Digraph ": "<graphviz.graphs.Digraph "}


def normalize(text: str) -> str:
    """Drop the spec's '(nothing)' marker; MXNet's module paths read as symjit's (the contract is
    `import symjit as mx`, so `<mxnet.module.module.Module object ...>` is symjit's Module);
    a default object repr's address is never reproducible, so `object at 0x...` is masked;
    classes that moved in newer third-party libraries read under their current path."""
    text = text.replace("(nothing)", "").replace("<mxnet.", "<symjit.")
    for old, new in _MOVED_CLASSES.items():
        text = text.replace(old, new)
    return re.sub(r" object at 0x[0-9a-fA-F]+>", " object at 0x#>", text).strip("\n")
