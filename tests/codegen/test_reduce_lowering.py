"""Native reductions (lower_reduce.py): compiled graphs equal the interpreter and run as one
native call, over random shapes, axis sets (contiguous or not, keepdims, exclude) and dtypes."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from lowering_util import assert_close, compile_and_run, one_node_graph

REDUCE_OPS = ["sum", "mean", "prod", "max", "min", "nansum", "nanprod"]
DTYPES = ["float32", "float64", "int32"]


def _data(rng, shape, dtype, nan=False):
    if dtype.startswith("float"):
        x = rng.uniform(-2, 2, shape).astype(dtype)
        if nan and x.size > 2:
            x.reshape(-1)[::5] = np.nan
        return x
    return rng.integers(-9, 10, shape).astype(dtype)


def _random_axes(rng, ndim):
    k = int(rng.integers(0, ndim + 1))
    axes = tuple(sorted(rng.choice(ndim, size=k, replace=False).tolist()))
    if axes and rng.random() < 0.3:
        axes = tuple(a - ndim for a in axes)  # negative axes
    return axes


def _check(op, shape, dtype, attrs, rng, nan=False, rtol=1e-5):
    g = one_node_graph(op, [("x", shape, dtype)], attrs)
    x = _data(rng, shape, dtype, nan)
    got, want, cg, _, _ = compile_and_run(g, {"x": x})
    n = max(1, x.size)
    assert_close(got[0], want[0], rtol=rtol, atol=1e-6 * n)
    assert cg.native, [m.op.name for m in cg.module.python_nodes]


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_axes_random(op, dtype):
    rng = np.random.default_rng(zlib.crc32(f"{op}{dtype}".encode()))
    for _ in range(6):
        ndim = int(rng.integers(1, 5))
        shape = tuple(int(d) for d in rng.integers(1, 6, ndim))
        axes = _random_axes(rng, ndim)
        attrs = {"axis": axes, "keepdims": bool(rng.random() < 0.5), "exclude": bool(rng.random() < 0.3)}
        _check(op, shape, dtype, attrs, rng, nan=op in ("nansum", "nanprod", "max", "min"))


def test_sum_matches_numpy_independently():
    """Column (axis 0) and row (axis 1) sums, a non-contiguous axis set, and a full reduction
    against numpy written here."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((37, 300)).astype(np.float64)
    for axis, want in [((0,), x.sum(0)), ((1,), x.sum(1)), (None, np.array([x.sum()]))]:
        g = one_node_graph("sum", [("x", x.shape, "float64")], {"axis": axis})
        got, _, cg, _, _ = compile_and_run(g, {"x": x})
        np.testing.assert_allclose(got[0], want, rtol=1e-12)
        assert cg.native
    y = rng.standard_normal((3, 4, 5, 6))
    g = one_node_graph("max", [("x", y.shape, "float64")], {"axis": (0, 2), "keepdims": True})
    got, _, cg, _, _ = compile_and_run(g, {"x": y})
    np.testing.assert_array_equal(got[0], y.max(axis=(0, 2), keepdims=True))


def test_large_column_and_row_reductions_split_over_threads():
    rng = np.random.default_rng(2)
    for axis in [(0,), (1,), (0, 2), (1, 2)]:
        _check("sum", (64, 130, 33), "float32", {"axis": axis}, rng)
        _check("mean", (64, 130, 33), "float64", {"axis": axis}, rng)


def test_nan_propagation_and_empty_reductions():
    rng = np.random.default_rng(3)
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]], np.float32)
    for op in ["max", "min", "sum", "argmax", "argmin"]:
        g = one_node_graph(op, [("x", x.shape, "float32")], {"axis": (1,) if op[:3] != "arg" else 1})
        got, want, cg, _, _ = compile_and_run(g, {"x": x})
        assert_close(got[0], want[0])
        assert cg.native
    _check("sum", (3, 1, 4), "int32", {"axis": (1,)}, rng)   # size-1 reduced dim only


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_arg_reductions(op, dtype):
    rng = np.random.default_rng(4)
    for axis in [None, 0, 1, -1]:
        for keep in (False, True):
            _check(op, (3, 70, 5), dtype, {"axis": axis, "keepdims": keep}, rng, nan=dtype != "int32")
    # ties: the first index wins
    x = np.zeros((2, 6), dtype)
    g = one_node_graph(op, [("x", x.shape, dtype)], {"axis": 1})
    got, _, _, _, _ = compile_and_run(g, {"x": x})
    np.testing.assert_array_equal(got[0], np.zeros(2, dtype))


def test_argmax_channel_and_float_index_output():
    rng = np.random.default_rng(5)
    _check("argmax_channel", (4, 7, 3), "float32", {}, rng)
    x = rng.standard_normal((5, 9)).astype(np.float32)
    g = one_node_graph("argmax", [("x", x.shape, "float32")], {"axis": 1})
    got, _, _, _, _ = compile_and_run(g, {"x": x})
    assert got[0].dtype == np.float32
    np.testing.assert_array_equal(got[0], x.argmax(1).astype(np.float32))


@pytest.mark.parametrize("ord_", [1, 2])
def test_norm(ord_):
    rng = np.random.default_rng(6)
    for axis in [None, (0,), (1,), (0, 2), (-1,)]:
        for dtype in ("float32", "float64"):
            _check("norm", (4, 5, 6), dtype, {"ord": ord_, "axis": axis, "keepdims": axis == (1,)}, rng)
    x = rng.standard_normal((3, 4))
    g = one_node_graph("norm", [("x", x.shape, "float64")], {"ord": ord_, "axis": (1,)})
    got, _, _, _, _ = compile_and_run(g, {"x": x})
    want = np.abs(x).sum(1) if ord_ == 1 else np.sqrt((x * x).sum(1))
    np.testing.assert_allclose(got[0], want, rtol=1e-12)


def test_broadcast_backward_and_backward_sum_mean():
    rng = np.random.default_rng(7)
    for shape, like in [((4, 5, 6), (5, 1)), ((4, 5, 6), (1, 5, 6)), ((3, 4), (3, 4)), ((2, 3, 4), (1,))]:
        g = one_node_graph("_broadcast_backward", [("x", shape, "float32"), ("like", like, "float32")])
        feeds = {"x": rng.standard_normal(shape).astype(np.float32), "like": np.zeros(like, np.float32)}
        got, want, cg, _, _ = compile_and_run(g, feeds)
        assert_close(got[0], want[0], atol=1e-5)
        assert cg.native
    for op in ["_backward_sum", "_backward_mean"]:
        for dtype in DTYPES:
            for axis, keep, small in [((1,), False, (4, 6)), ((0, 2), True, (1, 5, 1)), (None, False, (1,))]:
                g = one_node_graph(op, [("g", small, dtype), ("x", (4, 5, 6), dtype)],
                                   {"axis": axis, "keepdims": keep})
                feeds = {"g": _data(rng, small, dtype), "x": _data(rng, (4, 5, 6), dtype)}
                got, want, cg, _, _ = compile_and_run(g, feeds)
                assert_close(got[0], want[0])
                assert cg.native
