"""Symbol files from untrusted sources: declared sizes are checked before anything is
allocated, and every problem is an MXNetError (naming the file when there is one)."""
from __future__ import annotations

import json
import tracemalloc

import pytest

import symjit as mx
from symjit.base import MXNetError

CONCAT_BOMB = ('{"nodes":[{"op":"null","name":"a","inputs":[]},{"op":"Concat","name":"c",'
               '"attrs":{"num_args":"99999999999"},"inputs":[[0,0,0]]}],"heads":[[1,0,0]]}')


def _peak_bytes(fn) -> tuple[int, str]:
    tracemalloc.start()
    try:
        with pytest.raises(MXNetError) as info:
            fn()
        return tracemalloc.get_traced_memory()[1], str(info.value)
    finally:
        tracemalloc.stop()


def test_num_args_bomb_is_refused_without_allocating():
    assert len(CONCAT_BOMB) < 200
    peak, msg = _peak_bytes(lambda: mx.sym.load_json(CONCAT_BOMB))
    assert peak < 20 * 2 ** 20          # used to allocate 3.7 GB
    assert "'num_args'" in msg and "99999999999" in msg and "'c'" in msg


def test_declared_count_is_checked_against_the_inputs_given():
    text = CONCAT_BOMB.replace("99999999999", "60000")
    peak, msg = _peak_bytes(lambda: mx.sym.load_json(text))
    assert "expected 60000 inputs" in msg and "got 1" in msg
    assert len(msg) < 400               # the expected names are elided, not all listed


@pytest.mark.parametrize("value", ["A" * 100000, "(" * 100000, "(1," * 30000, "-" * 99999 + "1",
                                   "(1," * 3000 + ")" * 3000])
def test_huge_or_deeply_nested_attribute_is_an_mxnet_error(value):
    g = {"nodes": [{"op": "null", "name": "x", "inputs": []},
                   {"op": "Convolution", "name": "c", "attrs": {"kernel": value, "num_filter": "1"},
                    "inputs": [[0, 0, 0]]}], "heads": [[1, 0, 0]]}
    with pytest.raises(MXNetError, match="kernel") as info:
        mx.sym.load_json(json.dumps(g))
    assert len(str(info.value)) < 400


def test_non_utf8_symbol_file_names_the_file(tmp_path):
    f = tmp_path / "model-symbol.json"
    f.write_bytes(b'{"nodes": [{"op": "null", "name": "\xff\xfe", "inputs": []}], "heads": [[0, 0, 0]]}')
    with pytest.raises(MXNetError, match=r"model-symbol\.json.*not a symbol JSON file.*0xff at offset 35"):
        mx.sym.load(str(f))


def test_invalid_graph_in_a_file_names_the_file(tmp_path):
    f = tmp_path / "bad-symbol.json"
    f.write_text(CONCAT_BOMB)
    with pytest.raises(MXNetError, match=r"bad-symbol\.json.*num_args"):
        mx.sym.load(str(f))


@pytest.mark.parametrize("op, attrs, n_in", [
    ("_elemwise_expr", {"expr": "x", "num_args": "1"}, 1),
    ("_fused_elemwise", {"exprs": "x", "num_args": "1", "dtype": "float32"}, 1),
    ("_const", {"value": "5"}, 0),
    ("_conv_pool", {"conv_attrs": "{}", "pool_attrs": "{}", "num_args": "2"}, 2),
])
def test_compiler_internal_ops_are_refused_from_files_and_frontends(op, attrs, n_in):
    # their attributes are structured values only compiler passes create; from text they used
    # to reach the lowering and fail there with AttributeError / TypeError
    nodes = [{"op": "null", "name": f"x{i}", "inputs": []} for i in range(n_in)]
    nodes.append({"op": op, "name": "n", "attrs": attrs, "inputs": [[i, 0, 0] for i in range(n_in)]})
    with pytest.raises(MXNetError, match=f"operator '{op}' is internal to the compiler"):
        mx.sym.load_json(json.dumps({"nodes": nodes, "heads": [[n_in, 0, 0]]}))
    with pytest.raises(MXNetError, match="internal to the compiler"):
        getattr(mx.sym, op)(*[mx.sym.var(f"x{i}") for i in range(n_in)], **attrs)
