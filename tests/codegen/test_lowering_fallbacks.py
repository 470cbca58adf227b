"""Nodes without native code are reported (compile stats, `symjit inspect`) and, with
SYMJIT_STRICT=1, refused: a lowering that is missing or declines never goes unnoticed."""
from __future__ import annotations

import numpy as np
import pytest

import symjit
from symjit.base import MXNetError
from symjit.codegen.llvm.executable import compile_planned
from symjit.codegen.llvm.graph import TABLE
from symjit.ir import GraphBuilder, TensorType
from symjit.ops import get_op
from symjit.passes.manager import compile_graph


def _graph(dtype="float32"):
    """dot(x, w) followed by sort, which has no LLVM lowering; the GEMM lowering declines
    float64 (its kernels are float32)."""
    b = GraphBuilder(name="fallbacks")
    x = b.add_input("x", TensorType((4, 5), dtype))
    w = b.add_input("w", TensorType((5, 6), dtype))
    y = b.add_node("sort", [b.add_node("dot", [x, w])[0]], {"axis": -1})[0]
    return b.build([y])


def test_fallbacks_are_counted_in_the_compile_stats(monkeypatch):
    monkeypatch.delenv("SYMJIT_STRICT", raising=False)
    assert TABLE.find(get_op("sort")) is None
    opt, _ = compile_graph(_graph("float64"), "inference")
    cg = compile_planned(opt, "fallbacks")
    assert [(f.op, f.reason) for f in cg.stats.python_nodes] == [("dot", "lowering declined"),
                                                                  ("sort", "no lowering")]
    assert not cg.native and "python_nodes=2" in repr(cg.stats)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 5)), rng.standard_normal((5, 6))
    np.testing.assert_allclose(cg([x, w])[0], np.sort(x @ w, axis=-1), rtol=1e-12)


def test_strict_mode_refuses_python_nodes(monkeypatch):
    monkeypatch.setenv("SYMJIT_STRICT", "1")
    opt, _ = compile_graph(_graph(), "inference")
    with pytest.raises(MXNetError, match=r"SYMJIT_STRICT=1 .*'sort'.*\(sort\): no lowering"):
        compile_planned(opt, "strict")


def test_strict_mode_accepts_a_native_graph(monkeypatch):
    monkeypatch.setenv("SYMJIT_STRICT", "1")
    b = GraphBuilder(name="native")
    x = b.add_input("x", TensorType((4, 6), "float32"))
    opt, _ = compile_graph(b.build([b.add_node("relu", [x])[0]]), "inference")
    cg = compile_planned(opt, "native")
    assert cg.native and cg.stats.python_nodes == []


def test_inspect_lists_nodes_without_native_code(monkeypatch):
    monkeypatch.setenv("SYMJIT_STRICT", "1")      # inspect reports, it never raises for this
    rep = symjit.inspect(_graph())
    assert [(f.op, f.reason) for f in rep.python_nodes] == [("sort", "no lowering")]
    assert "nodes without native code (1):" in str(rep) and "(sort): no lowering on the llvm target" in str(rep)
