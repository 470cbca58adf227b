"""Native data-movement ops (lower_shape.py): compiled graphs equal the interpreter and run as
one native call; plus the random-graph property mixing elementwise ops, reductions, softmax,
transpose, concat, slice and broadcast."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lowering_util import assert_close, compile_and_run, one_node_graph
from symjit.codegen.llvm.lower_shape import fit_affine, merge_copy_dims
from symjit.ir import GraphBuilder, TensorType

DTYPES = ["float32", "float64", "int32"]


def _data(rng, shape, dtype):
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-100, 100, shape).astype(dtype)


def _check(op, shapes, attrs, dtype="float32", rng=None, native=True):
    rng = rng or np.random.default_rng(0)
    ins = [(f"x{i}", s, dtype) for i, s in enumerate(shapes)]
    g = one_node_graph(op, ins, attrs)
    feeds = {n: _data(rng, s, d) for n, s, d in ins}
    got, want, cg, _, _ = compile_and_run(g, feeds)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype
    if native:
        assert cg.native, [n.op.name for n in cg.module.python_nodes]
    return got


def test_fit_affine_and_merge():
    idx = np.arange(24).reshape(2, 3, 4).transpose(2, 0, 1)
    assert fit_affine(idx) == (0, [1, 12, 4])
    assert fit_affine(np.array([[0, 1], [2, 4]])) is None
    assert fit_affine(np.arange(10)[::-2]) == (9, [-2])
    assert merge_copy_dims((2, 3, 4), (12, 4, 1), (12, 4, 1)) == [(24, 1, 1)]
    assert merge_copy_dims((2, 1, 4), (4, 99, 1), (1, 0, 2)) == [(2, 4, 1), (4, 1, 2)]


@pytest.mark.parametrize("dtype", DTYPES + ["float16", "int8"])
def test_transpose_any_axes(dtype):
    rng = np.random.default_rng(1)
    for shape, axes in [((2, 3, 4), (2, 0, 1)), ((5, 7), ()), ((2, 3, 4, 5), (1, 3, 0, 2)), ((6,), (0,))]:
        got = _check("transpose", [shape], {"axes": axes}, dtype, rng)
        assert got[0].shape == np.empty(shape).transpose(axes or None).shape


def test_transpose_independent_of_interpreter():
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    g = one_node_graph("transpose", [("x", x.shape, "float32")], {"axes": (1, 2, 0)})
    got, _, _, _, _ = compile_and_run(g, {"x": x})
    np.testing.assert_array_equal(got[0], np.transpose(x, (1, 2, 0)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_slices_and_flips(dtype):
    rng = np.random.default_rng(2)
    _check("slice", [(5, 6, 7)], {"begin": (1, None, 6), "end": (4, None, 0), "step": (2, 1, -2)}, dtype, rng)
    _check("slice", [(5, 6)], {"begin": (-3,), "end": (None,)}, dtype, rng)
    _check("crop", [(5, 6)], {"begin": (1, 2), "end": (3, 5)}, dtype, rng)
    _check("slice_axis", [(5, 6, 7)], {"axis": 1, "begin": 2, "end": -1}, dtype, rng)
    _check("slice_like", [(5, 6, 7), (3, 4, 7)], {"axes": (0, 1)}, dtype, rng)
    _check("reverse", [(5, 6, 3)], {"axis": (0, 2)}, dtype, rng)
    _check("SwapAxis", [(2, 3, 4)], {"dim1": 0, "dim2": 2}, dtype, rng)


@pytest.mark.parametrize("dtype", DTYPES)
def test_joins_and_splits(dtype):
    rng = np.random.default_rng(3)
    _check("Concat", [(2, 3, 4), (2, 5, 4), (2, 1, 4)], {"num_args": 3, "dim": 1}, dtype, rng)
    _check("Concat", [(2, 3), (4, 3)], {"num_args": 2, "dim": 0}, dtype, rng)
    _check("Concat", [(2, 3), (2, 2)], {"num_args": 2, "dim": -1}, dtype, rng)
    _check("stack", [(2, 3), (2, 3), (2, 3)], {"num_args": 3, "axis": 1}, dtype, rng)
    _check("stack", [(2, 3), (2, 3)], {"num_args": 2, "axis": -1}, dtype, rng)
    _check("SliceChannel", [(2, 6, 3)], {"num_outputs": 3, "axis": 1}, dtype, rng)
    _check("SliceChannel", [(4, 3)], {"num_outputs": 4, "axis": 0, "squeeze_axis": True}, dtype, rng)


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcasts_tile_repeat(dtype):
    rng = np.random.default_rng(4)
    _check("broadcast_to", [(2, 1, 3)], {"shape": (2, 4, 3)}, dtype, rng)
    _check("broadcast_to", [(1, 3)], {"shape": (5, 0)}, dtype, rng)
    _check("broadcast_axis", [(2, 1, 1)], {"axis": (1, 2), "size": (3, 4)}, dtype, rng)
    _check("broadcast_like", [(1, 3), (4, 3)], {}, dtype, rng)
    _check("tile", [(2, 3)], {"reps": (2, 1, 3)}, dtype, rng)
    _check("tile", [(2, 3, 4)], {"reps": (2,)}, dtype, rng)
    _check("repeat", [(2, 3)], {"repeats": 3, "axis": 1}, dtype, rng)
    _check("repeat", [(2, 3)], {"repeats": 2}, dtype, rng)
    _check("depth_to_space", [(1, 8, 2, 3)], {"block_size": 2}, dtype, rng)
    _check("space_to_depth", [(1, 2, 4, 6)], {"block_size": 2}, dtype, rng)


def test_pad_where_and_fallbacks():
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        _check("Pad", [(1, 2, 3, 3)], {"mode": "constant", "pad_width": (0, 0, 0, 0, 1, 2, 2, 1),
                                       "constant_value": 1.5}, dtype, rng)
        _check("where", [(4, 3), (4, 3), (4, 3)], {}, dtype, rng)
    _check("where", [(4,), (4, 3), (4, 3)], {}, "float32", rng)
    # edge padding is not affine: it stays a (correct) Python step
    _check("Pad", [(1, 2, 3, 3)], {"mode": "edge", "pad_width": (0, 0, 0, 0, 1, 2, 2, 1)}, "float32", rng,
           native=False)


def test_large_copies_split_over_threads():
    rng = np.random.default_rng(6)
    _check("transpose", [(256, 300)], {"axes": (1, 0)}, "float32", rng)
    _check("Concat", [(128, 200), (128, 300)], {"num_args": 2, "dim": 1}, "float64", rng)


# ---- random graphs: compiled == interpreter ----------------------------------------------

UNARY = ["relu", "sigmoid", "tanh", "abs", "negative", "exp"]


@st.composite
def mixed_graph(draw):
    """A graph over (r, c) float32 values mixing elementwise ops, reductions broadcast back,
    softmax, transpose, concat + slice, and broadcasts."""
    r, c = draw(st.integers(1, 5)), draw(st.integers(1, 6))
    b = GraphBuilder(name="mixed")
    pool = [b.add_input(f"x{i}", TensorType((r, c), "float32")) for i in range(draw(st.integers(1, 3)))]
    row = b.add_input("row", TensorType((1, c), "float32"))
    for _ in range(draw(st.integers(1, 8))):
        x = draw(st.sampled_from(pool))
        kind = draw(st.sampled_from(["unary", "binary", "reduce", "softmax", "transpose", "concat", "bcast"]))
        if kind == "unary":
            op = draw(st.sampled_from(UNARY))
            if op == "exp":
                x = b.add_node("tanh", [x])[0]
            y = b.add_node(op, [x])[0]
        elif kind == "binary":
            y = b.add_node(draw(st.sampled_from(["elemwise_add", "elemwise_mul", "_maximum"])),
                           [x, draw(st.sampled_from(pool))])[0]
        elif kind == "reduce":
            op = draw(st.sampled_from(["sum", "mean", "max", "min"]))
            axis = draw(st.sampled_from([0, 1]))
            s = b.add_node(op, [x], {"axis": (axis,), "keepdims": True})[0]
            y = b.add_node("broadcast_sub", [x, s])[0]
        elif kind == "softmax":
            y = b.add_node(draw(st.sampled_from(["softmax", "log_softmax"])), [x],
                           {"axis": draw(st.sampled_from([0, 1, -1]))})[0]
        elif kind == "transpose":
            t = b.add_node("transpose", [x])[0]
            y = b.add_node("transpose", [b.add_node("sigmoid", [t])[0]])[0]
        elif kind == "concat":
            cat = b.add_node("Concat", [x, draw(st.sampled_from(pool))], {"num_args": 2, "dim": 1})[0]
            lo = draw(st.integers(0, c))
            y = b.add_node("slice_axis", [cat], {"axis": 1, "begin": lo, "end": lo + c})[0]
        else:
            y = b.add_node("broadcast_add", [x, b.add_node("broadcast_to", [row], {"shape": (r, c)})[0]])[0]
        pool.append(y)
    outs = pool[-draw(st.integers(1, min(2, len(pool)))):]
    return b.build(outs)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_graph(), st.integers(0, 2**31 - 1))
def test_random_graphs_compiled_equal_interpreter(g, seed):
    rng = np.random.default_rng(seed)
    feeds = {v.name: rng.uniform(-2, 2, v.type.shape).astype(np.float32) for v in g.inputs}
    got, want, cg, _, _ = compile_and_run(g, feeds)
    for a, b in zip(got, want):
        assert_close(a, b, rtol=2e-5, atol=2e-5)
    assert cg.native, [n.op.name for n in cg.module.python_nodes]


# ---- gathers ------------------------------------------------------------------------------

@pytest.mark.parametrize("idt", ["float32", "int32", "int64"])
@pytest.mark.parametrize("mode", ["clip", "wrap", "raise"])
def test_take(idt, mode):
    rng = np.random.default_rng(7)
    lo, hi = (0, 5) if mode == "raise" else (-7, 9)
    for axis, ashape in [(1, (4, 5, 3)), (0, (5, 6)), (-1, (2, 5))]:
        g = one_node_graph("take", [("a", ashape, "float32"), ("i", (3, 2), idt)], {"axis": axis, "mode": mode})
        feeds = {"a": rng.standard_normal(ashape).astype(np.float32),
                 "i": rng.integers(lo, hi, (3, 2)).astype(idt)}
        got, want, cg, _, _ = compile_and_run(g, feeds)
        np.testing.assert_array_equal(got[0], want[0])
        assert cg.native


def test_take_float_indices_truncate_and_errors_raise():
    from symjit.base import MXNetError
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    g = one_node_graph("take", [("a", (4, 5), "float32"), ("i", (3,), "float32")], {"axis": 0})
    got, _, cg, _, _ = compile_and_run(g, {"a": a, "i": np.array([1.7, -0.5, 3.2], np.float32)})
    np.testing.assert_array_equal(got[0], a[[1, 0, 3]])
    g = one_node_graph("take", [("a", (4, 5), "float32"), ("i", (3,), "float32")], {"mode": "raise"})
    with pytest.raises(MXNetError, match="out of bounds"):
        compile_and_run(g, {"a": a, "i": np.array([0, 9, 1], np.float32)})
    with pytest.raises(MXNetError, match="finite"):
        compile_and_run(g, {"a": a, "i": np.array([0, np.nan, 1], np.float32)})


@pytest.mark.parametrize("idt", ["float32", "int32"])
def test_pick_and_one_hot(idt):
    rng = np.random.default_rng(8)
    for axis, shape, ishape, keep, mode in [(1, (4, 5, 3), (4, 3), False, "wrap"), (-1, (4, 5), (4,), True, "clip"),
                                           (0, (5, 2), (2,), False, "clip")]:
        g = one_node_graph("pick", [("a", shape, "float64"), ("i", ishape, idt)],
                           {"axis": axis, "keepdims": keep, "mode": mode})
        feeds = {"a": rng.standard_normal(shape), "i": rng.integers(-7, 9, ishape).astype(idt)}
        got, want, cg, _, _ = compile_and_run(g, feeds)
        np.testing.assert_array_equal(got[0], want[0])
        assert cg.native
    for dtype in ["float32", "int32", "float64"]:
        g = one_node_graph("one_hot", [("i", (4, 3), idt)], {"depth": 5, "on_value": 2.0, "off_value": -1.0,
                                                             "dtype": dtype})
        i = rng.integers(-2, 7, (4, 3)).astype(idt)
        got, want, cg, _, _ = compile_and_run(g, {"i": i})
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[0], np.where(i[..., None] == np.arange(5), 2, -1).astype(dtype))
        assert cg.native


@pytest.mark.parametrize("sd,dd", [("float32", "float16"), ("float16", "float32"), ("float16", "float64"),
                                   ("int32", "float16"), ("float16", "int32"), ("float16", "uint8"),
                                   ("uint8", "float16"), ("float16", "bool"), ("float32", "int32")])
def test_cast_with_float16(sd, dd):
    from symjit.codegen.llvm.target import host_target
    rng = np.random.default_rng(10)
    x = rng.standard_normal((5, 77)) * 300
    x.reshape(-1)[:4] = [np.nan, np.inf, -np.inf, 70000.0]
    with np.errstate(all="ignore"):
        x = x.astype(sd)
    g = one_node_graph("Cast", [("x", x.shape, sd)], {"dtype": dd})
    got, want, cg, _, _ = compile_and_run(g, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])
    assert got[0].dtype == np.dtype(dd)
    assert cg.native or "+f16c" not in host_target().features.split(",")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_take_and_pick_gradients(dtype, mode):
    rng = np.random.default_rng(11)
    for ax, shape in [(0, (5, 3)), (1, (2, 5, 3)), (-1, (3, 5))]:
        a = ax % len(shape)
        ishape = (4, 2)     # duplicate indices accumulate
        gshape = shape[:a] + ishape + shape[a + 1:]
        g = one_node_graph("_backward_take", [("g", gshape, dtype), ("i", ishape, "float32")],
                           {"axis": ax, "mode": mode, "shape": shape})
        feeds = {"g": _data(rng, gshape, dtype), "i": rng.integers(-3, 8, ishape).astype(np.float32)}
        got, want, cg, _, _ = compile_and_run(g, feeds, is_train=True)
        np.testing.assert_array_equal(got[0], want[0])
        assert cg.native
        pshape = shape[:a] + shape[a + 1:]
        g = one_node_graph("_backward_pick", [("g", pshape, dtype), ("i", pshape, "int32")],
                           {"axis": ax, "mode": mode, "shape": shape})
        feeds = {"g": _data(rng, pshape, dtype), "i": rng.integers(-3, 8, pshape).astype(np.int32)}
        got, want, cg, _, _ = compile_and_run(g, feeds, is_train=True)
        np.testing.assert_array_equal(got[0], want[0])
        assert cg.native


@pytest.mark.parametrize("dtype", DTYPES + ["float16"])
def test_slice_assign_native(dtype):
    rng = np.random.default_rng(5)
    for attrs, rshape in [({"begin": (1, None), "end": (3, None), "step": (None, 3)}, (2, 2)),
                          ({"begin": (-3, 1), "end": (None, 4), "step": ()}, (3, 3)),
                          ({"begin": (0,), "end": (4,), "step": (2,)}, (2, 5))]:
        got = _check("_slice_assign", [(4, 5), rshape], attrs, dtype, rng)
        assert got[0].shape == (4, 5)
    # a negative step keeps its (correct) Python step
    _check("_slice_assign", [(4, 5), (2, 5)], {"begin": (3,), "end": (None,), "step": (-2,)}, "float32",
           rng, native=False)

