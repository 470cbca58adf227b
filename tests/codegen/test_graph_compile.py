"""The LLVM graph backend against the interpreter, the object cache, and call-time validation.

Tolerance: compiled float32 results equal the interpreter's within rtol 2e-5 / atol 1e-5
(vectorized transcendental functions are accurate to a few ulp; the interpreter rounds
float64 evaluations).
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphgen import feeds, random_graph
from symjit.base import MXNetError
from symjit.codegen import cache
from symjit.codegen.llvm.executable import compile_planned
from symjit.ir import GraphBuilder, TensorType, run
from symjit.passes.manager import compile_graph
from symjit.passes.training_graph import build_training_graph

RTOL, ATOL = 2e-5, 1e-5


def _compiled(g, pipeline="inference"):
    opt, _ = compile_graph(g, pipeline)
    return compile_planned(opt, "test")


def _check(g, f, pipeline="inference"):
    cg = _compiled(g, pipeline)
    got = cg([np.ascontiguousarray(f[v.name]) for v in cg.graph.inputs])
    want = run(g, f).outputs
    for a, b in zip(want, got):
        np.testing.assert_allclose(b, a, rtol=RTOL, atol=ATOL)
    return cg


@settings(max_examples=30, deadline=None)
@given(random_graph(), st.integers(0, 2 ** 31))
def test_random_graphs_compiled_equal_interpreter(g, seed):
    _check(g, feeds(g, np.random.default_rng(seed)))


@settings(max_examples=15, deadline=None)
@given(random_graph(max_nodes=8), st.integers(0, 2 ** 31))
def test_random_training_graphs_compiled_equal_interpreter(g, seed):
    joint, _ = build_training_graph(g, [v.name for v in g.args])
    _check(joint, feeds(joint, np.random.default_rng(seed)), "training")


def _ew_graph(n=1000, dtype="float32"):
    b = GraphBuilder()
    a, bb, c = (b.add_input(k, TensorType((n,), dtype)) for k in "abc")
    s = b.add_node("elemwise_add", [b.add_node("elemwise_mul", [a, bb])[0], c])[0]
    m = b.add_node("elemwise_mul", [b.add_node("relu", [s])[0], b.add_node("sigmoid", [a])[0]])[0]
    return b.build([b.add_node("elemwise_sub", [m, b.add_node("tanh", [c])[0]])[0]])


def test_issue_chain_is_one_native_call():
    g = _ew_graph(100003)
    cg = _check(g, feeds(g, np.random.default_rng(0)))
    assert cg.native and len(cg.module.segment_names) == 1


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "int8"])
def test_dtypes(dtype):
    b = GraphBuilder()
    x = b.add_input("x", TensorType((7, 5), dtype))
    y = b.add_input("y", TensorType((1, 5), dtype))
    s = b.add_node("broadcast_add", [x, y])[0]
    m = b.add_node("broadcast_maximum", [s, x])[0]
    g = b.build([b.add_node("elemwise_mul", [m, x])[0], s])
    rng = np.random.default_rng(1)
    f = {"x": rng.integers(0, 10, (7, 5)).astype(dtype), "y": rng.integers(0, 10, (1, 5)).astype(dtype)}
    cg = _check(g, f)
    assert cg.native


def test_outputs_that_alias_inputs_or_repeat():
    b = GraphBuilder()
    x = b.add_input("x", TensorType((4,), "float32"))
    y = b.add_node("exp", [x])[0]
    g = b.build([y, x, y])
    f = {"x": np.arange(4, dtype=np.float32)}
    cg = _check(g, f)
    outs = cg([f["x"]])
    assert outs[1] is not f["x"] and outs[0] is not outs[2]


def test_hybrid_graph_runs_reference_steps_between_segments():
    b = GraphBuilder()
    x = b.add_input("x", TensorType((3, 8), "float32"))
    e = b.add_node("exp", [x])[0]
    t = b.add_node("topk", [e], {"k": 2, "ret_typ": "value"})[0]  # no native lowering
    g = b.build([b.add_node("tanh", [t])[0]])
    cg = _check(g, {"x": np.random.default_rng(2).standard_normal((3, 8)).astype(np.float32)})
    assert not cg.native and cg.module.python_nodes


def test_call_time_validation_raises_before_native_code():
    g = _ew_graph(16)
    cg = _compiled(g)
    ok = [np.zeros(16, np.float32)] * 3
    cg(ok)
    with pytest.raises(MXNetError, match="shape"):
        cg([np.zeros(15, np.float32)] + ok[1:])
    with pytest.raises(MXNetError, match="dtype"):
        cg([np.zeros(16, np.float64)] + ok[1:])
    with pytest.raises(MXNetError):
        cg(ok[:2])
    with pytest.raises(MXNetError, match="contiguous"):
        cg([np.zeros(32, np.float32)[::2]] + ok[1:])


def test_disk_cache_round_trip_and_corruption(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMJIT_CACHE_DIR", str(tmp_path))
    key = cache.make_key("some module text", "target")
    assert cache.get(key) is None
    assert cache.put(key, b"object bytes")
    assert cache.get(key) == b"object bytes"
    path = tmp_path / f"{key}.obj"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    assert cache.get(key) is None           # checksum mismatch: never loaded
    path.write_bytes(b"garbage")
    assert cache.get(key) is None           # truncated / foreign
    other = cache.make_key("other")
    (tmp_path / f"{other}.obj").write_bytes(path.read_bytes())
    assert cache.get(other) is None
    with pytest.raises(ValueError):
        cache.get("../../etc/passwd")
    assert not list(tmp_path.glob(".tmp-*"))


_CHILD = r"""
import numpy as np, sys
from symjit.ir import GraphBuilder, TensorType
from symjit.passes.manager import compile_graph
from symjit.codegen.llvm.executable import compile_planned
b = GraphBuilder()
x = b.add_input("x", TensorType((64,), "float32"))
g = b.build([b.add_node("tanh", [b.add_node("_mul_scalar", [x], {"scalar": %s})[0]])[0]])
cg = compile_planned(compile_graph(g)[0], "child")
y = cg([np.linspace(-1, 1, 64, dtype=np.float32)])[0]
assert np.allclose(y, np.tanh(np.linspace(-1, 1, 64) * %s), atol=1e-6)
print(cg.stats.cache)
"""


def test_second_process_loads_from_disk_and_corrupt_entries_recompile(tmp_path):
    env = dict(os.environ, SYMJIT_CACHE_DIR=str(tmp_path))
    code = _CHILD % ("1.5", "1.5")

    def child():
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              check=True).stdout.strip()
    assert child() == "none"
    assert child() == "disk"
    for f in tmp_path.glob("*.obj"):
        f.write_bytes(f.read_bytes()[:100])  # truncate every entry
    assert child() == "none"
    assert child() == "disk"


def test_concurrent_processes_share_the_cache(tmp_path):
    env = dict(os.environ, SYMJIT_CACHE_DIR=str(tmp_path))
    code = _CHILD % ("2.5", "2.5")
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(3)]
    results = [p.communicate()[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs) and set(results) <= {"none", "disk"}
    assert len(list(tmp_path.glob("*.obj"))) == 1 and not list(tmp_path.glob(".tmp-*"))


def test_deep_elementwise_chains_compile_in_linear_size():
    # relu's expression reads its input three times: a fused chain is a DAG whose tree
    # expansion has 3**k paths; texts, hashes and code must follow distinct nodes only
    from symjit.ops import scalar as S
    b = GraphBuilder()
    x = b.add_input("x", TensorType((5,), "float32"))
    y = x
    for _ in range(12):
        y = b.add_node("_plus_scalar", [b.add_node("relu", [y])[0]], {"scalar": -0.25})[0]
    g = b.build([y])
    cg = _check(g, {"x": np.linspace(-1, 3, 5, dtype=np.float32)})
    (node,) = [n for n in cg.graph.nodes if n.op.name == "_fused_elemwise"]
    assert len(S.to_text(node.attrs["exprs"][0])) < 12 * 200


def test_multi_output_kernel_may_write_an_input_in_place():
    # output 0 (from y only) overwrites input x, output 1 still reads x: every output of an
    # element is computed before any is stored (what the in-place pass relies on for fused groups)
    from symjit.codegen.llvm import ElementwiseSpec, compile_elementwise
    from symjit.ops import scalar as S
    x, y = S.Input(0), S.Input(1)
    spec = ElementwiseSpec((y * 2.0, S.call("exp", x) + 1.0), ("float32", "float32"), ((1000,), (1000,)),
                           "float32", ("float32", "float32"), (1000,))
    kernel = compile_elementwise(spec)
    a = np.linspace(-1, 1, 1000, dtype=np.float32)
    b = np.linspace(3, 4, 1000, dtype=np.float32)
    want = (b * 2, np.exp(a) + 1)
    out1 = np.empty_like(a)
    args = kernel.pack_args([a, b], [a, out1])
    kernel.call_range(0, 1000, args)
    np.testing.assert_allclose(a, want[0], rtol=1e-6)
    np.testing.assert_allclose(out1, want[1], rtol=1e-6)


def test_run_deferred_runs_every_job_alongside_and_reraises():
    """Every job runs exactly once, on worker threads and the caller, while `meanwhile` runs;
    a failing job's exception reaches the caller after all jobs ended."""
    import threading
    from symjit.codegen.llvm.graph import run_deferred
    done, lock = [], threading.Lock()

    def job(i):
        def run():
            with lock:
                done.append(i)
        return run
    assert run_deferred([job(i) for i in range(20)], lambda: "code") == "code"
    assert sorted(done) == list(range(20))
    assert run_deferred([]) is None
    done.clear()

    def bad():
        raise ValueError("pack failed")
    with pytest.raises(ValueError, match="pack failed"):
        run_deferred([job(0), bad, job(1)], lambda: None)
    assert sorted(done) == [0, 1]


def test_deferred_weight_packing_equals_packing_at_lowering():
    """Packed convolution weights filled on other threads while LLVM compiles (compile_planned)
    are the bytes `pack_weights` makes at once, and `lower_graph` without `defer` packs them
    before it returns (NCHW kernels: the blocked layout, which packs its own panels, is off)."""
    from symjit.codegen.llvm.graph import lower_graph
    from symjit.codegen.llvm.target import compile_target
    rng = np.random.default_rng(7)
    b = GraphBuilder()
    x = b.add_input("x", TensorType((1, 32, 14, 14), "float32"))
    w = b.add_input("w", TensorType((64, 32, 3, 3), "float32"))
    w2 = b.add_input("w2", TensorType((64, 64, 1, 1), "float32"))
    y = b.add_node("Convolution", [x, w], {"kernel": (3, 3), "num_filter": 64, "pad": (1, 1), "no_bias": True})[0]
    y = b.add_node("Convolution", [y, w2], {"kernel": (1, 1), "num_filter": 64, "no_bias": True})[0]
    g = b.build([y])
    consts = {"w": rng.standard_normal((64, 32, 3, 3)).astype(np.float32),
              "w2": rng.standard_normal((64, 64, 1, 1)).astype(np.float32)}
    opt, _ = compile_graph(g, "inference", constants=consts, target=compile_target("native"),
                           disabled={"blocked_layout"})
    cg = compile_planned(opt, "deferred_pack")
    now = lower_graph(opt, "deferred_pack")
    assert now.deferred == [] and cg.module.deferred == []
    from symjit import runtime
    if runtime.native_kernels_in_use():   # the kernel library packs these weights (AVX-512)
        assert any("conv_packed" in n for n, _ in now.placement.params)
    assert len(cg.params) == len(now.placement.params)
    for a, (_, bb) in zip(cg.params, now.placement.params):
        np.testing.assert_array_equal(a, bb)
    xv = rng.standard_normal((1, 32, 14, 14)).astype(np.float32)
    want = run(g, {"x": xv, **consts}).outputs[0]
    got = cg([xv if n == "x" else consts[n] for n, _, _ in cg.input_specs])[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
