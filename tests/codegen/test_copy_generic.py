"""Shape-generic row copies (lower_shape.copy_call): copies of one pattern (element size, rank
of the merged index space, unit inner strides) share one compiled kernel that reads extents,
strides and offsets from a table. Differential against numpy over random shapes."""
from __future__ import annotations

import re

import numpy as np
import pytest

import symjit as mx


def _compile(sym, feeds):
    return mx.compile(sym, {k: v.shape for k, v in feeds.items()}, dtypes={k: v.dtype for k, v in feeds.items()})


def _check_concat_copies_with_one_kernel(feeds, kernel):
    """The channel concatenation of `feeds` is exact, and its module defines one `kernel`
    (every part's copy shares it) and no specialised `sj_copy_` loop."""
    sym = mx.sym.Concat(*[mx.sym.Variable(k) for k in feeds], dim=1, num_args=len(feeds))
    model = _compile(sym, feeds)
    ir = model.compiled.module.ir
    assert len(re.findall(rf"^define void @{kernel}_", ir, re.M)) == 1
    assert not re.findall(r"^define void @sj_copy_", ir, re.M)
    out, = model(**feeds)
    np.testing.assert_array_equal(out, np.concatenate(list(feeds.values()), axis=1))


@pytest.mark.parametrize("seed", range(8))
def test_channel_concat_of_random_parts_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    n, h, w = int(rng.integers(2, 5)), int(rng.integers(1, 9)), int(rng.integers(1, 9))
    dtype = ["float32", "float64", "int32", "uint8"][seed % 4]
    parts = int(rng.integers(2, 6))
    feeds = {f"x{i}": (rng.standard_normal((n, int(rng.integers(1, 40)), h, w)) * 50).astype(dtype)
             for i in range(parts)}
    sym = mx.sym.Concat(*[mx.sym.Variable(k) for k in feeds], dim=1, num_args=parts)
    model = _compile(sym, feeds)
    out, = model(**feeds)
    np.testing.assert_array_equal(out, np.concatenate(list(feeds.values()), axis=1))


def test_concat_parts_share_one_copy_kernel():
    rng = np.random.default_rng(1)
    feeds = {f"x{i}": rng.standard_normal((4, c, 6, 6)).astype(np.float32) for i, c in enumerate([3, 16, 40])}
    _check_concat_copies_with_one_kernel(feeds, "sj_copyg")


@pytest.mark.parametrize("seed", range(6))
def test_strided_slices_and_axis_swaps_match_numpy(seed):
    """Slices with steps (strided inner source) and transposes of one long and one short dim
    (strided inner destination or source, not tiled)."""
    rng = np.random.default_rng(20 + seed)
    shape = (int(rng.integers(2, 5)), int(rng.integers(2, 7)), int(rng.integers(9, 60)))
    x = rng.standard_normal(shape).astype(np.float32)
    begin, step = int(rng.integers(0, 3)), int(rng.integers(1, 4))
    sym_slice = mx.sym.slice(mx.sym.Variable("x"), begin=(None, None, begin), end=(None, None, None),
                             step=(None, None, step))
    got, = _compile(sym_slice, {"x": x})(x=x)
    np.testing.assert_array_equal(got, x[:, :, begin::step])
    got, = _compile(mx.sym.transpose(mx.sym.Variable("x"), axes=(0, 2, 1)), {"x": x})(x=x)
    np.testing.assert_array_equal(got, x.transpose(0, 2, 1))
    got, = _compile(mx.sym.transpose(mx.sym.Variable("x"), axes=(1, 0, 2)), {"x": x})(x=x)
    np.testing.assert_array_equal(got, x.transpose(1, 0, 2))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "float64"])
def test_contiguous_copies_share_one_memcpy_kernel(dtype):
    """At batch 1 every part of a channel concatenation is one contiguous block of the output:
    all parts go through the module's one memcpy kernel (byte offsets from a table), split
    between threads when large (the 300 000-element part spans several tasks), exact for every
    element size."""
    rng = np.random.default_rng(3)
    feeds = {f"x{i}": (rng.standard_normal((1, c, 50, 60)) * 50).astype(dtype) for i, c in enumerate([1, 100, 3, 2])}
    _check_concat_copies_with_one_kernel(feeds, "sj_memcpy")


@pytest.mark.parametrize("begin,end", [(1, 2), (3, 17), (0, 40)])
def test_contiguous_slice_at_an_odd_byte_offset_matches_numpy(begin, end):
    x = np.arange(40 * 7, dtype=np.int8).reshape(40, 7)
    sym = mx.sym.slice_axis(mx.sym.Variable("x"), axis=0, begin=begin, end=end)
    got, = _compile(sym, {"x": x})(x=x)
    np.testing.assert_array_equal(got, x[begin:end])
