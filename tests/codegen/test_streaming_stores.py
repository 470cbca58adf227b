"""Streaming (non-temporal) stores of large elementwise outputs (codegen/llvm/nontemporal.py):
the IR rewrite touches only the vector stores of `.stream` copies; compiled kernels with large
outputs contain non-temporal stores and compute the same values whether the output is aligned
(streaming copy) or not (plain loop), over any sub-range; calls on short ranges (a
convolution's epilogue, row by row) take the plain loop; small kernels are unchanged."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit.codegen.llvm import ElementwiseSpec, compile_elementwise, jit
from symjit.codegen.llvm.elementwise import elementwise_module
from symjit.codegen.llvm.nontemporal import (STREAM_MIN_BYTES, STREAM_MIN_CALL_BYTES, STREAM_SUFFIX,
                                             mark_streaming_stores)
from symjit.ops import scalar as S

IR = """define internal void @k.stream(i64 %begin, i64 %end, ptr %args) #3 {
entry:
  store <16 x float> %v, ptr %p, align 4, !llvm.access.group !3
  store <2 x float> %w, ptr %q, align 4
  store float %s, ptr %r, align 4
  ret void
}

define void @k(i64 %begin, i64 %end, ptr %args) #1 {
entry:
  store <16 x float> %v, ptr %p, align 4
  ret void
}
!3 = distinct !{}
"""


def test_rewrite_marks_only_wide_vector_stores_of_stream_copies():
    text, count = mark_streaming_stores(IR)
    assert count == 1
    lines = text.splitlines()
    assert "  store <16 x float> %v, ptr %p, align 64, !llvm.access.group !3, !nontemporal !4" in lines
    assert "  store <2 x float> %w, ptr %q, align 4" in lines          # too narrow for movnt
    assert "  store float %s, ptr %r, align 4" in lines
    assert lines.count("  store <16 x float> %v, ptr %p, align 4") == 1  # the exported kernel's
    assert lines[-1] == "!4 = !{i32 1}"


def test_rewrite_leaves_text_without_stream_copies_alone():
    plain = IR.replace(STREAM_SUFFIX, "_other")
    assert mark_streaming_stores(plain) == (plain, 0)


def _spec(exprs, out_dtypes, n, in_dtype="float32", n_in=1):
    return ElementwiseSpec(tuple(exprs), (in_dtype,) * n_in, ((n,),) * n_in, in_dtype, tuple(out_dtypes),
                           (n,))


BIG = STREAM_MIN_BYTES // 4 + 7         # float32 elements: over the threshold, not a multiple of 16


def test_large_kernels_stream_and_small_ones_do_not():
    x = S.Input(0)
    big = jit.assembly(elementwise_module(_spec([x * 2.0 + 1.0], ["float32"], BIG))[0])
    small = jit.assembly(elementwise_module(_spec([x * 2.0 + 1.0], ["float32"], 4096))[0])
    assert "movntps" in big and "sfence" in big
    assert "movnt" not in small and "sfence" not in small


def test_short_calls_take_the_plain_loop():
    """The exported kernel streams only calls that write at least STREAM_MIN_CALL_BYTES of each
    output: its dispatch compares the call's length with that many elements."""
    x = S.Input(0)
    ir = elementwise_module(_spec([x * 2.0 + 1.0], ["float32"], BIG))[0]
    exported = ir[ir.index("define void @"):]
    exported = exported[:exported.index("\n}")]
    assert "sub i64 %end, %begin" in exported
    assert "icmp sge i64 %" in exported and f", {STREAM_MIN_CALL_BYTES // 4}\n" in exported
    assert f"{STREAM_SUFFIX}(i64 %begin, i64 %end, ptr %args)" in exported


def _ranges(n):
    """Sub-ranges whose starts are, and are not, multiples of 16 elements, and short ranges at
    aligned starts (the plain loop on an aligned output)."""
    return [(0, n), (0, 1_000_003), (1_000_003, n), (16 * 5000, n - 3), (0, 64), (16 * 7, 16 * 7 + 100)]


@pytest.mark.parametrize("offset_elems", [0, 1])
def test_streamed_results_equal_numpy_aligned_or_not(offset_elems):
    x = S.Input(0)
    kernel = compile_elementwise(_spec([x * 2.0 + 1.0], ["float32"], BIG))
    a = np.random.default_rng(0).standard_normal(BIG).astype(np.float32)
    want = a * 2 + 1                   # exact in float32 (x * 2 is exact), with or without FMA
    buf = np.full(BIG + 32, np.nan, np.float32)
    first = (-buf.__array_interface__["data"][0] % 64) // 4 + offset_elems   # 64-byte aligned + offset
    out = buf[first:first + BIG]
    assert (out.__array_interface__["data"][0] % 64 == 0) == (offset_elems == 0)
    args = kernel.pack_args([a], [out])
    for begin, end in _ranges(BIG):
        out[:] = np.nan
        kernel.call_range(begin, end, args)
        np.testing.assert_array_equal(out[begin:end], want[begin:end])
        assert np.isnan(out[:begin]).all() and np.isnan(out[end:]).all()   # nothing outside


def test_streamed_multi_output_float64_and_bool():
    x = S.Input(0)
    n = STREAM_MIN_BYTES // 8 + 33
    kernel = compile_elementwise(_spec([x * 0.5, x > 0.0], ["float64", "bool"], n, "float64"))
    a = np.random.default_rng(1).standard_normal(n)
    half, pos = np.empty(n), np.empty(n, np.bool_)
    args = kernel.pack_args([a], [half, pos])
    for begin, end in _ranges(n):
        half[:] = np.nan
        pos[:] = False
        kernel.call_range(begin, end, args)
        np.testing.assert_array_equal(half[begin:end], a[begin:end] * 0.5)
        np.testing.assert_array_equal(pos[begin:end], a[begin:end] > 0)


def test_large_graph_compiled_equals_interpreter(monkeypatch):
    n = STREAM_MIN_BYTES // 4 + 16 * 3 + 5
    rng = np.random.default_rng(2)
    data = {k: mx.nd.array(rng.standard_normal(n).astype(np.float32)) for k in "abc"}
    a, b, c = (mx.sym.Variable(k) for k in "abc")
    ew = mx.sym.relu(a * b + c) * mx.sym.sigmoid(a) - mx.sym.tanh(c)
    compiled = ew.bind(mx.cpu(), data, grad_req="null").forward()[0].asnumpy()
    monkeypatch.setenv("SYMJIT_BACKEND", "interp")
    reference = ew.bind(mx.cpu(), data, grad_req="null").forward()[0].asnumpy()
    np.testing.assert_allclose(compiled, reference, rtol=1e-5, atol=1e-6)
