"""Compiled code is freed with its last user: every compiled graph holds the JIT engine of its
object, the engine (and its machine code) goes when the last holder goes, and code still in
use keeps working while others are freed."""
import gc

import numpy as np

from symjit.codegen.llvm import jit
from symjit.codegen.llvm.executable import compile_planned
from symjit.ir import GraphBuilder, TensorType
from symjit.passes.manager import compile_graph


def _graph(k: int):
    b = GraphBuilder()
    x = b.add_input("x", TensorType((64,), "float32"))
    y = b.add_node("tanh", [b.add_node("_mul_scalar", [x], {"scalar": 1.0 + k / 8})[0]])[0]
    return b.build([y])


def _compile(k: int):
    return compile_planned(compile_graph(_graph(k))[0], f"life{k}")


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


X = np.linspace(-1, 1, 64, dtype=np.float32)


def _want(k: int):
    return np.tanh(X * np.float32(1.0 + k / 8))


def test_dropped_graphs_free_their_engines_and_memory(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMJIT_CACHE_DIR", str(tmp_path))
    n = 24
    gc.collect()
    base = jit.live_engines()
    graphs = [_compile(k) for k in range(n)]          # LLVM compiles, objects stored on disk
    assert jit.live_engines() == base + n
    for k, cg in enumerate(graphs):
        np.testing.assert_allclose(cg([X])[0], _want(k), rtol=1e-5, atol=1e-6)
    del graphs, cg
    gc.collect()
    assert jit.live_engines() == base
    # reload the same objects from disk round after round: with the code freed each time,
    # memory stays flat (kept code would add an engine and its pages per graph per round)
    growth = []
    for _ in range(4):
        before = _rss()
        graphs = [_compile(k) for k in range(n)]
        assert all(cg.stats.cache == "disk" for cg in graphs)
        assert jit.live_engines() == base + n
        del graphs
        gc.collect()
        assert jit.live_engines() == base
        growth.append(_rss() - before)
    assert sum(growth[1:]) < 3 * n * 64 * 1024, growth   # loosely: well under an engine per graph


def test_code_in_use_keeps_working_after_others_are_freed(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMJIT_CACHE_DIR", str(tmp_path))
    keep = _compile(100)
    entry = keep.entry                   # a runtime Entry alone also keeps its code alive
    others = [_compile(k) for k in range(101, 109)]
    del others
    gc.collect()
    np.testing.assert_allclose(keep([X])[0], _want(100), rtol=1e-5, atol=1e-6)
    del keep
    gc.collect()
    np.testing.assert_allclose(entry(X)[0], _want(100), rtol=1e-5, atol=1e-6)
    assert entry.owner is not None


def test_a_graph_compiled_again_while_alive_shares_its_code(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMJIT_CACHE_DIR", str(tmp_path))
    gc.collect()
    base = jit.live_engines()
    a = _compile(200)
    b = _compile(200)
    assert b.stats.cache == "memory" and b.code is a.code and jit.live_engines() == base + 1
    del a
    gc.collect()
    np.testing.assert_allclose(b([X])[0], _want(200), rtol=1e-5, atol=1e-6)
    del b
    gc.collect()
    assert jit.live_engines() == base


def test_an_interrupted_compilation_frees_its_module_before_its_context(monkeypatch):
    """A compilation stopped inside LLVM (a timeout, Ctrl-C) leaves no module for the garbage
    collector: freed there, a module may outlive its context and crash a later collection."""
    import pytest

    made = []
    parse = jit.parse_and_verify

    def recording_parse(text, target=None):
        made.append(parse(text, target))
        return made[-1]

    class StoppingBuilder:
        def getModulePassManager(self):
            return self

        def run(self, mod, pb):
            raise KeyboardInterrupt

    monkeypatch.setattr(jit, "parse_and_verify", recording_parse)
    monkeypatch.setattr(jit.llvm, "create_pass_builder", lambda tm, pto: StoppingBuilder())
    ir = 'define void @stopped(i64 %a) {\n  ret void\n}\n'
    with pytest.raises(KeyboardInterrupt):
        jit.compile_to_object(ir)
    assert made and all(m.closed and m._context.closed for m in made)
    monkeypatch.undo()
    gc.collect()
    assert jit.compile_to_object(ir)         # LLVM still works afterwards
