"""rewrite.const_node builds exactly the `_const` node make_node builds (types, values, flags)."""
from __future__ import annotations

import numpy as np
import pytest

from symjit.ir.graph import Graph
from symjit.passes.rewrite import NameSource, const_node, make_node

ARRAYS = [np.float32(2.5), np.arange(6, dtype=np.float64).reshape(2, 3),
          np.arange(12, dtype=np.int32).reshape(3, 4).T,        # not contiguous
          np.array([True, False]), np.zeros((2, 0, 3), np.float16), np.array(7, np.int64),
          np.ones((4, 1, 3, 3), np.uint8)[::2]]


@pytest.mark.parametrize("value", ARRAYS, ids=lambda a: f"{a.dtype}{np.shape(a)}")
def test_const_node_matches_make_node(value):
    names = NameSource(Graph([], [], []))
    want = make_node(names, "_const", [], {"value": np.asarray(value)}, base="c")
    got = const_node(names, np.asarray(value), base="c")
    assert got.op is want.op and got.inputs == [] and len(got.outputs) == 1
    assert want.name == "c" and got.name == got.outputs[0].name == "c_1"   # fresh names, same source
    assert got.outputs[0].type == want.outputs[0].type
    assert all(type(d) is int for d in got.outputs[0].type.shape)
    a, b = got.attrs["value"], want.attrs["value"]
    assert a.dtype == b.dtype and a.shape == b.shape and a.flags.c_contiguous
    assert not a.flags.writeable
    np.testing.assert_array_equal(a, b)
