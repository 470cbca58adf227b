"""mx.np operators in compiled graphs: lowered natively (elementwise ops as scalar expressions,
reductions, GEMM products, joins and element moves), fused like the legacy ops, and giving the
interpreter's results (the ops' numpy references).

Tolerances: integer and bool results are compared exactly; float results within rtol 1e-5 /
atol 1e-6 for float32 (the kernels' vector math differs from numpy's by a few ulp; reductions
reassociate sums) and 1e-9 / 1e-12 for float64 (5e-5 for reductions and products). Dtypes are
always compared exactly: the compiled kernel must store MXNet np's result dtype.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "codegen"))
from lowering_util import assert_close, compile_and_run, one_node_graph  # noqa: E402

from symjit.codegen.llvm.executable import compile_planned  # noqa: E402
from symjit.ir import GraphBuilder, TensorType, run  # noqa: E402
from symjit.ops.registry import OPS, Elementwise  # noqa: E402
from symjit.passes.manager import compile_graph  # noqa: E402

TOL = {"float32": (1e-5, 1e-6), "float64": (1e-9, 1e-12)}


def _data(rng, shape, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (rng.standard_normal(shape) * 2).astype(dt)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    return rng.integers(-5, 6, shape).astype(dt)


def _assert_same(got, want, rtol=None, atol=None):
    """Same dtype and shape; integers and bools exactly, floats within `TOL` of their dtype."""
    r, a = TOL.get(np.asarray(want).dtype.name, (1e-3, 1e-3))
    assert_close(got, want, rtol or r, atol or a)


def _np_elementwise_ops() -> list[str]:
    return sorted({op.name for op in OPS.values()
                   if isinstance(op, Elementwise) and op.name.startswith(("_np_", "_npi_"))})


def _n_inputs(op, attrs) -> int:
    return len(op.input_names(op.parse(attrs)))


def _attrs_for(op, scalar=2.0) -> dict:
    if "scalar" in op.params:
        attrs = {"scalar": scalar}
        if "is_int" in op.params:
            attrs["is_int"] = float(scalar).is_integer()
        return attrs
    if "a_min" in op.params:
        return {"a_min": -1.0, "a_max": 1.5}
    if "dtype" in op.params:
        return {"dtype": "int32"}
    return {}


# --------------------------------------------------------------------------------------------
# Every np elementwise op: native in float32/float64, exact where it compiles in other dtypes
# --------------------------------------------------------------------------------------------

#: float ops whose kernels exist for every float instance: all np elementwise ops
ELEMENTWISE = _np_elementwise_ops()


def test_the_np_elementwise_family_is_large():
    assert len(ELEMENTWISE) >= 90
    for name in ("_npi_add", "_npi_true_divide", "_npi_exp", "_npi_tanh", "_npi_less", "_npi_where",
                 "_npi_clip", "_npi_rsubtract_scalar", "_npi_power", "_npi_isnan"):
        assert name in ELEMENTWISE


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise_op_compiles_natively(name, dtype):
    op = OPS[name]
    attrs = _attrs_for(op, 2.5)
    shapes = [(3, 4), (4,), (3, 1)][:_n_inputs(op, attrs)]
    ins = [(f"x{i}", s, dtype) for i, s in enumerate(shapes)]
    rng = np.random.default_rng(len(name))
    feeds = {n: _data(rng, s, d) for n, s, d in ins}
    outs, ref, cg, _, _ = compile_and_run(one_node_graph(name, ins, attrs), feeds)
    assert cg.native, f"{name} {dtype} ran as a numpy step"
    _assert_same(outs[0], ref[0])


@pytest.mark.parametrize("dtypes", [("int32",), ("int64",), ("bool",), ("int32", "float32"), ("bool", "int64"),
                                    ("int64", "int32"), ("float32", "float64")])
@pytest.mark.parametrize("scalar", [2.0, 2.5, -1.0, 0.0])
def test_elementwise_other_dtypes_equal_the_reference(dtypes, scalar):
    """Integer, bool and mixed dtypes: a kernel where the op computes exactly, else the numpy
    step; the result (values and MXNet np's dtype) is the reference's either way."""
    rng = np.random.default_rng(7)
    native = 0
    for name in ELEMENTWISE:
        op = OPS[name]
        attrs = _attrs_for(op, scalar)
        n = _n_inputs(op, attrs)
        dts = (dtypes * 3)[:n] if n != len(dtypes) else dtypes
        ins = [(f"x{i}", s, d) for i, (s, d) in enumerate(zip([(3, 4), (4,), (3, 1)], dts))]
        try:
            g = one_node_graph(name, ins, attrs)
        except Exception:   # noqa: BLE001 - dtype combinations the op refuses at inference
            continue
        feeds = {k: _data(rng, s, d) for k, s, d in ins}
        try:
            ref = run(g, feeds).outputs
        except Exception:   # noqa: BLE001 - the reference refuses the values (int ** negative)
            continue
        outs, ref, cg, _, _ = compile_and_run(g, feeds)
        native += cg.native
        _assert_same(outs[0], ref[0])
    assert native > 0


def test_integer_arithmetic_compiles():
    for name, ins in [("_npi_add", [("a", (5,), "int32"), ("b", (5,), "int32")]),
                      ("_npi_multiply", [("a", (5,), "int64"), ("b", (5,), "int32")]),
                      ("_npi_true_divide", [("a", (5,), "int32"), ("b", (5,), "int32")]),
                      ("_npi_less", [("a", (5,), "int32"), ("b", (5,), "int32")]),
                      ("_npi_logical_not", [("a", (5,), "bool")])]:
        rng = np.random.default_rng(1)
        feeds = {k: _data(rng, s, d) for k, s, d in ins}
        outs, ref, cg, _, _ = compile_and_run(one_node_graph(name, ins), feeds)
        assert cg.native, name
        _assert_same(outs[0], ref[0])
    assert np.dtype(outs[0].dtype) == np.bool_


def test_instances_without_an_exact_kernel_keep_the_numpy_step():
    """exp of an integer array goes through float64 in numpy: no kernel, same result."""
    rng = np.random.default_rng(2)
    for name, dt in [("_npi_exp", "int32"), ("_npi_power", "int32"), ("_npi_exp", "float16")]:
        ins = [("a", (6,), dt)] + ([("b", (6,), dt)] if name == "_npi_power" else [])
        feeds = {k: np.abs(_data(rng, s, d)) for k, s, d in ins}
        outs, ref, cg, _, _ = compile_and_run(one_node_graph(name, ins), feeds)
        assert not cg.native
        _assert_same(outs[0], ref[0])


def test_float16_graph_runs_as_numpy_steps_with_the_reference_result():
    rng = np.random.default_rng(3)
    b = GraphBuilder(name="f16")
    x, y = (b.add_input(n, TensorType((4, 5), "float16")) for n in "xy")
    (s,) = b.add_node("_npi_add", [x, y], {})
    (e,) = b.add_node("_npi_exp", [s], {})
    (m,) = b.add_node("_npi_mean", [e], {"axis": 1})
    g = b.build([m])
    feeds = {k: _data(rng, (4, 5), "float16") for k in "xy"}
    outs, ref, _, _, _ = compile_and_run(g, feeds)
    _assert_same(outs[0], ref[0])
    want = np.exp(feeds["x"] + feeds["y"]).mean(axis=1).astype(np.float16)
    np.testing.assert_allclose(outs[0].astype(np.float32), want.astype(np.float32), rtol=2e-3)


# --------------------------------------------------------------------------------------------
# Fusion of np elementwise chains
# --------------------------------------------------------------------------------------------

def _fusion_stats(g):
    opt, pm = compile_graph(g, "inference")
    groups = [n for n in opt.nodes if n.op.name == "_fused_elemwise"]
    return opt, groups


def test_np_chain_fuses_into_one_group():
    """tanh(x * w + b) * sigmoid-like 1 / (1 + exp(-x)) - x ** 2: one fused kernel."""
    b = GraphBuilder(name="chain")
    x, w, c = (b.add_input(n, TensorType((8, 16), "float32")) for n in "xwc")
    (t,) = b.add_node("_npi_multiply", [x, w], {})
    (t,) = b.add_node("_npi_add", [t, c], {})
    (t,) = b.add_node("_npi_tanh", [t], {})
    (e,) = b.add_node("_npi_negative", [x], {})
    (e,) = b.add_node("_npi_exp", [e], {})
    (e,) = b.add_node("_npi_add_scalar", [e], {"scalar": 1.0})
    (e,) = b.add_node("_npi_rtrue_divide_scalar", [e], {"scalar": 1.0})
    (t,) = b.add_node("_npi_multiply", [t, e], {})
    (q,) = b.add_node("_npi_power_scalar", [x], {"scalar": 2.0})
    (t,) = b.add_node("_npi_subtract", [t, q], {})
    g = b.build([t])
    opt, groups = _fusion_stats(g)
    assert len(groups) == 1 and len(groups[0].attrs["members"]) == 10
    assert [n.op.name for n in opt.nodes if n.op.name != "_const"] == ["_fused_elemwise"]
    rng = np.random.default_rng(4)
    feeds = {k: _data(rng, (8, 16), "float32") for k in "xwc"}
    outs, ref, cg, _, _ = compile_and_run(g, feeds)
    assert cg.native
    _assert_same(outs[0], ref[0])
    xv, wv, cv = feeds["x"], feeds["w"], feeds["c"]
    np.testing.assert_allclose(outs[0], np.tanh(xv * wv + cv) / (1 + np.exp(-xv)) - xv ** 2, rtol=1e-5, atol=1e-5)


def test_dtype_changes_split_fusion_groups():
    """A comparison (bool result) and an int -> float32 true_divide are not fused with float
    chains (fusion computes in one dtype), yet every node compiles."""
    b = GraphBuilder(name="split")
    x = b.add_input("x", TensorType((6,), "float32"))
    i = b.add_input("i", TensorType((6,), "int32"))
    (a,) = b.add_node("_npi_exp", [x], {})
    (a,) = b.add_node("_npi_multiply_scalar", [a], {"scalar": 3.0})
    (c,) = b.add_node("_npi_greater_scalar", [a], {"scalar": 2.0, "is_int": False})
    (d,) = b.add_node("_npi_true_divide_scalar", [i], {"scalar": 2.0, "is_int": True})
    (s,) = b.add_node("_npi_add", [a, d], {})
    (w,) = b.add_node("_npi_where", [c, s, a], {})
    g = b.build([w, c])
    opt, groups = _fusion_stats(g)
    assert 1 <= len(groups) <= 3
    rng = np.random.default_rng(5)
    feeds = {"x": _data(rng, (6,), "float32"), "i": _data(rng, (6,), "int32")}
    outs, ref, cg, _, _ = compile_and_run(g, feeds)
    assert cg.native
    for o, r in zip(outs, ref):
        _assert_same(o, r)


# --------------------------------------------------------------------------------------------
# Random np elementwise graphs (hypothesis): compiled == interpreter == numpy
# --------------------------------------------------------------------------------------------

UNARY_POOL = {"_npi_exp": np.exp, "_npi_tanh": np.tanh, "_npi_sin": np.sin, "_npi_absolute": np.abs,
              "_npi_negative": np.negative, "_npi_square": np.square, "_npi_sqrt": lambda v: np.sqrt(np.abs(v)),
              "_npi_log1p": lambda v: np.log1p(np.abs(v))}
BINARY_POOL = {"_npi_add": np.add, "_npi_subtract": np.subtract, "_npi_multiply": np.multiply,
               "_npi_maximum": np.maximum, "_npi_minimum": np.minimum}
SCALAR_POOL = {"_npi_multiply_scalar": lambda v, s: v * s, "_npi_add_scalar": lambda v, s: v + s,
               "_npi_rsubtract_scalar": lambda v, s: s - v, "_npi_true_divide_scalar": lambda v, s: v / s}


def _random_graph(draw_ops, dtype):
    """A graph of the drawn steps over inputs a (4, 5) and b (5,); returns (graph, numpy fn)."""
    b = GraphBuilder(name="rnd")
    vals = [b.add_input("a", TensorType((4, 5), dtype)), b.add_input("b", TensorType((5,), dtype))]
    fns = [lambda env: env["a"], lambda env: env["b"]]
    for kind, name, i, j, s in draw_ops:
        i, j = i % len(vals), j % len(vals)
        if kind == "u":
            inner = UNARY_POOL[name]
            if name in ("_npi_sqrt", "_npi_log1p"):      # keep the operand non-negative
                (v,) = b.add_node("_npi_absolute", [vals[i]], {})
                (v,) = b.add_node(name, [v], {})
            else:
                (v,) = b.add_node(name, [vals[i]], {})
            fns.append(lambda env, f=fns[i], g=inner: g(f(env)))
        elif kind == "b":
            (v,) = b.add_node(name, [vals[i], vals[j]], {})
            fns.append(lambda env, f=fns[i], h=fns[j], g=BINARY_POOL[name]: g(f(env), h(env)))
        else:
            (v,) = b.add_node(name, [vals[i]], {"scalar": s, "is_int": False})
            fns.append(lambda env, f=fns[i], g=SCALAR_POOL[name], c=s: g(f(env), np.asarray(c, f(env).dtype)))
        vals.append(v)
    return b.build([vals[-1]]), fns[-1]


_step = st.one_of(
    st.tuples(st.just("u"), st.sampled_from(sorted(UNARY_POOL)), st.integers(0, 20), st.just(0), st.just(0.0)),
    st.tuples(st.just("b"), st.sampled_from(sorted(BINARY_POOL)), st.integers(0, 20), st.integers(0, 20),
              st.just(0.0)),
    st.tuples(st.just("s"), st.sampled_from(sorted(SCALAR_POOL)), st.integers(0, 20), st.just(0),
              st.sampled_from([0.5, 1.5, 3.0, -2.0])))


@settings(max_examples=25, deadline=None)
@given(steps=st.lists(_step, min_size=1, max_size=8), dtype=st.sampled_from(["float32", "float64"]),
       seed=st.integers(0, 2 ** 16))
def test_random_np_graphs_compiled_equal_interpreter_and_numpy(steps, dtype, seed):
    g, numpy_fn = _random_graph(steps, dtype)
    rng = np.random.default_rng(seed)
    feeds = {"a": (rng.standard_normal((4, 5)) * 0.5).astype(dtype),
             "b": (rng.standard_normal((5,)) * 0.5).astype(dtype)}
    outs, ref, cg, _, _ = compile_and_run(g, feeds)
    assert cg.native
    _assert_same(outs[0], ref[0], *((1e-4, 1e-5) if dtype == "float32" else (1e-9, 1e-12)))
    with np.errstate(all="ignore"):
        want = np.broadcast_to(numpy_fn(feeds), np.shape(ref[0]))
    np.testing.assert_allclose(np.asarray(outs[0], np.float64), want, rtol=1e-4, atol=1e-5, equal_nan=True)


# --------------------------------------------------------------------------------------------
# Reductions, products, joins and element moves
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["_np_sum", "_np_prod", "_npi_mean", "_np_max", "_np_min", "_npi_argmax",
                                  "_npi_argmin"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(name, dtype, axis, keepdims):
    if name.startswith("_npi_arg") and isinstance(axis, tuple):
        pytest.skip("argmax/argmin take one axis")
    rng = np.random.default_rng(6)
    x = _data(rng, (3, 4, 5), dtype)
    outs, ref, cg, _, _ = compile_and_run(
        one_node_graph(name, [("x", (3, 4, 5), dtype)], {"axis": axis, "keepdims": keepdims}), {"x": x})
    assert cg.native == (name != "_npi_mean" or dtype.startswith("float"))
    _assert_same(outs[0], ref[0], *((5e-5, 5e-5) if dtype == "float32" else (None, None)))


def test_reduction_with_initial_keeps_the_numpy_step():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    outs, ref, cg, _, _ = compile_and_run(
        one_node_graph("_np_sum", [("x", (2, 3), "float32")], {"axis": 1, "initial": 10.0}), {"x": x})
    assert not cg.native
    _assert_same(outs[0], ref[0])


PRODUCTS = [("_np_dot", (3, 4), (4, 5), {}, True), ("_np_dot", (2, 3, 4), (4, 5), {}, True),
            ("_np_dot", (4,), (4, 5), {}, True), ("_np_dot", (3, 4), (4,), {}, True),
            ("_np_dot", (2, 3, 4), (2, 4, 5), {}, False),
            ("_npi_matmul", (2, 3, 4), (2, 4, 5), {}, True), ("_npi_matmul", (3, 4), (2, 4, 5), {}, True),
            ("_npi_matmul", (4,), (2, 4, 5), {}, True), ("_npi_matmul", (2, 3, 4), (4,), {}, True),
            ("_npi_matmul", (2, 1, 3, 4), (5, 4, 6), {}, False),
            ("_npi_tensordot", (2, 3, 4), (3, 4, 5), {"a_axes_summed": (1, 2), "b_axes_summed": (0, 1)}, True),
            ("_npi_tensordot", (2, 3, 4), (4, 3, 5), {"a_axes_summed": (2, 1), "b_axes_summed": (0, 1)}, False),
            ("_npi_tensordot_int_axes", (2, 3), (4, 5), {"axes": 0}, True)]


@pytest.mark.parametrize("name,sa,sb,attrs,native", PRODUCTS)
def test_products_run_as_gemm(name, sa, sb, attrs, native):
    rng = np.random.default_rng(8)
    feeds = {"a": rng.standard_normal(sa).astype(np.float32), "b": rng.standard_normal(sb).astype(np.float32)}
    outs, ref, cg, _, _ = compile_and_run(
        one_node_graph(name, [("a", sa, "float32"), ("b", sb, "float32")], attrs), feeds)
    assert cg.native == native
    _assert_same(outs[0], ref[0], 1e-5, 1e-5)


def test_dense_layer_is_a_gemm_and_one_fused_group():
    b = GraphBuilder(name="dense")
    x = b.add_input("x", TensorType((8, 16), "float32"))
    w = b.add_input("w", TensorType((16, 4), "float32"))
    c = b.add_input("c", TensorType((4,), "float32"))
    (y,) = b.add_node("_np_dot", [x, w], {})
    (y,) = b.add_node("_npi_add", [y, c], {})
    (y,) = b.add_node("_npi_tanh", [y], {})
    g = b.build([y])
    opt, _ = compile_graph(g, "inference")
    assert [n.op.name for n in opt.nodes] == ["_np_dot", "_fused_elemwise"]
    rng = np.random.default_rng(9)
    feeds = {"x": rng.standard_normal((8, 16)).astype(np.float32), "w": rng.standard_normal((16, 4)).astype(np.float32),
             "c": rng.standard_normal(4).astype(np.float32)}
    outs, ref, cg, _, _ = compile_and_run(g, feeds)
    assert cg.native
    _assert_same(outs[0], ref[0], 1e-5, 1e-5)


MOVES = [("_np_reshape", {"newshape": (4, 6)}, True), ("_np_transpose", {"axes": None}, True),
         ("_np_transpose", {"axes": (1, 0, 2)}, True), ("_npi_expand_dims", {"axis": 1}, True),
         ("_npi_swapaxes", {"dim1": 0, "dim2": 2}, True), ("_np_moveaxis", {"source": 0, "destination": 2}, True),
         ("_npi_flip", {"axis": 1}, True), ("_npi_broadcast_to", {"shape": (2, 2, 3, 4)}, True),
         ("_np_copy", {}, True), ("_npi_rot90", {"k": 1, "axes": (0, 1)}, True),
         ("_npi_slice", {"begin": (0, 1), "end": (2, 3), "step": (None, None)}, True),
         ("_np_roll", {"shift": 1, "axis": 1}, False)]


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize("name,attrs,native", MOVES)
def test_element_moves_are_strided_copies(name, attrs, native, dtype):
    x = _data(np.random.default_rng(10), (2, 3, 4), dtype)
    outs, ref, cg, _, _ = compile_and_run(one_node_graph(name, [("x", (2, 3, 4), dtype)], attrs), {"x": x})
    assert cg.native == native
    _assert_same(outs[0], ref[0])


@pytest.mark.parametrize("name,attrs,shapes", [
    ("_npi_concatenate", {"num_args": 2, "dim": 1}, [(2, 3), (2, 5)]),
    ("_npi_concatenate", {"num_args": 2, "axis": -1}, [(2, 3), (2, 5)]),
    ("_npi_stack", {"num_args": 3, "axis": 1}, [(2, 3)] * 3),
    ("_npi_stack", {"num_args": 2, "axis": -1}, [(2, 3)] * 2)])
def test_joins_copy_each_input_into_its_slab(name, attrs, shapes):
    rng = np.random.default_rng(11)
    ins = [(f"a{i}", s, "float32") for i, s in enumerate(shapes)]
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s, _ in ins}
    outs, ref, cg, _, _ = compile_and_run(one_node_graph(name, ins, attrs), feeds)
    assert cg.native
    _assert_same(outs[0], ref[0])


def test_compiled_planned_graph_has_no_python_steps_for_an_np_mlp():
    """x -> dot -> + b -> maximum(., 0) -> dot -> log_softmax written with np ops: every node
    compiles (no numpy step)."""
    b = GraphBuilder(name="mlp")
    x = b.add_input("x", TensorType((16, 32), "float32"))
    w1 = b.add_input("w1", TensorType((32, 64), "float32"))
    b1 = b.add_input("b1", TensorType((64,), "float32"))
    w2 = b.add_input("w2", TensorType((64, 10), "float32"))
    (h,) = b.add_node("_np_dot", [x, w1], {})
    (h,) = b.add_node("_npi_add", [h, b1], {})
    (h,) = b.add_node("_npi_maximum_scalar", [h], {"scalar": 0.0, "is_int": True})
    (o,) = b.add_node("_np_dot", [h, w2], {})
    (m,) = b.add_node("_np_max", [o], {"axis": 1, "keepdims": True})
    (o,) = b.add_node("_npi_subtract", [o, m], {})
    (e,) = b.add_node("_npi_exp", [o], {})
    (s,) = b.add_node("_np_sum", [e], {"axis": 1, "keepdims": True})
    (s,) = b.add_node("_npi_log", [s], {})
    (o,) = b.add_node("_npi_subtract", [o, s], {})
    g = b.build([o])
    opt, _ = compile_graph(g, "inference")
    assert compile_planned(opt, "mlp", False).native
    rng = np.random.default_rng(12)
    feeds = {"x": rng.standard_normal((16, 32)), "w1": rng.standard_normal((32, 64)) * 0.1,
             "b1": rng.standard_normal(64) * 0.1, "w2": rng.standard_normal((64, 10)) * 0.1}
    feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
    outs, ref, cg, _, _ = compile_and_run(g, feeds)
    _assert_same(outs[0], ref[0], 1e-5, 1e-5)


def test_hybridized_np_block_trains_with_no_numpy_step(monkeypatch):
    """A Gluon block in NumPy mode: forward and backward graphs compile entirely (SYMJIT_STRICT
    refuses numpy steps), and the gradients equal the eager (interpreted) block's."""
    import symjit as mx
    from symjit import autograd, npx
    from symjit.gluon import nn

    class Block(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            self.d1 = nn.Dense(16)
            self.d2 = nn.Dense(4)

        def hybrid_forward(self, F, x):
            h = self.d1(x)
            h = F.np.tanh(h) * 0.5 + F.np.exp(-h * h) - F.np.maximum(h, 0) / 3
            return self.d2(h)

    def grads(hybrid: bool):
        mx.random.seed(0)
        net = Block()
        net.initialize()
        if hybrid:
            net.hybridize()
        x = mx.np.array(np.linspace(-1, 1, 40, dtype=np.float32).reshape(5, 8))
        with autograd.record():
            loss = (net(x) ** 2).sum()
        loss.backward()
        return [p.grad().asnumpy() for p in net.collect_params().values()]

    npx.set_np()
    try:
        eager = grads(False)
        monkeypatch.setenv("SYMJIT_STRICT", "1")
        compiled = grads(True)
    finally:
        npx.reset_np()
    for a, b in zip(compiled, eager):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("src", ["float32", "float64", "int32", "int64", "bool", "uint8", "int8"])
@pytest.mark.parametrize("dst", ["float32", "float64", "int32", "int64", "bool", "uint8", "int8", "float16"])
def test_cast_compiles_except_float_to_unsigned_and_float16(src, dst):
    rng = np.random.default_rng(13)
    x = _data(rng, (20,), src) * (np.asarray(20, src) if src not in ("bool",) else True)
    outs, ref, cg, _, _ = compile_and_run(one_node_graph("_npi_cast", [("x", (20,), src)], {"dtype": dst}), {"x": x})
    assert cg.native == (dst != "float16" and not (src.startswith("float") and dst == "uint8"))
    _assert_same(outs[0], ref[0])


def test_np_concatenate_at_batch_1_is_written_in_place():
    """numpy's concatenate takes part in concatenation in place like Concat: its parts'
    producers write their slabs of the output (no copy), with the interpreter's result."""
    b = GraphBuilder(name="cat")
    x = b.add_input("x", TensorType((1, 32), "float32"))
    (p,) = b.add_node("_npi_exp", [x], {})
    (q,) = b.add_node("_np_dot", [x, b.add_input("w", TensorType((32, 32), "float32"))], {})
    (c,) = b.add_node("_npi_concatenate", [p, q], {"num_args": 2, "axis": 1})
    (y,) = b.add_node("_np_sum", [c], {"axis": 1})
    g = b.build([y])
    opt, _ = compile_graph(g, "inference")
    assert sorted(v.name for v in opt.annotations["concat_aliases"]) == sorted(v.name for v in opt.nodes[-2].inputs)
    rng = np.random.default_rng(14)
    feeds = {"x": rng.standard_normal((1, 32)).astype(np.float32),
             "w": rng.standard_normal((32, 32)).astype(np.float32)}
    outs, ref, cg, _, _ = compile_and_run(g, feeds)
    assert cg.native
    _assert_same(outs[0], ref[0], 1e-5, 1e-5)
