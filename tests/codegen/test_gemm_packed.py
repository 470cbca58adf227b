"""Dense layers and `dot` with compile-time constant weights packed once for the kernel library
(symjit_nn_gemm_packed) against numpy, over rows 1..40 (the batch of an inference call), with and
without bias, flattened and 3-D inputs, fused epilogues, and the portable path switched on after
packing (the kernel falls back to the unpacked weights).

Tolerance: float32 products summed in another order than numpy's float64 reference: rtol 1e-4,
atol 1e-5 times the output's scale.
"""
from __future__ import annotations

import numpy as np
import pytest

import symjit
import symjit as mx
from symjit.codegen.llvm.lower_gemm import kernel_tune, native_kernels_available, set_native_kernels

from lowering_util import over_task_splits

ROWS = [1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 24, 31, 32, 33, 40]


def _first(got) -> np.ndarray:
    """A model call's (only) output as an array."""
    return np.asarray(got[0] if isinstance(got, (list, tuple)) else got)


def _packed_params(model) -> list[str]:
    return [n for n, _ in model.compiled.module.placement.params if n.endswith("gemm_packed")]


def _close(got, want):
    got = _first(got)
    scale = max(float(np.abs(want).max()), 1.0)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale)


def _dense(rng, m, k, n, bias, act, in_shape=None):
    x = rng.standard_normal(in_shape or (m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    flatten = in_shape is None
    y = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=n, no_bias=not bias, flatten=flatten, name="fc")
    if act == "relu":
        y = mx.sym.relu(y)
    elif act == "sigmoid_neg":
        y = mx.sym.negative(mx.sym.sigmoid(y))
    params = {"fc_weight": mx.nd.array(w)}
    if bias:
        params["fc_bias"] = mx.nd.array(b)
    model = symjit.compile(y, {"data": x.shape}, params)
    ref = x.astype(np.float64).reshape(-1, k) @ w.T.astype(np.float64) + (b if bias else 0)
    ref = ref.reshape(x.shape[:-1] + (n,)) if not flatten else ref
    if act == "relu":
        ref = np.maximum(ref, 0)
    elif act == "sigmoid_neg":
        ref = -1 / (1 + np.exp(-ref))
    return model, x, ref.astype(np.float32)


@pytest.mark.parametrize("m", ROWS)
def test_dense_constant_weights_over_rows(m):
    rng = np.random.default_rng(m)
    for k, n in [(int(rng.integers(1, 90)), int(rng.integers(1, 70))), (784, 128), (37, 200)]:
        for bias in (True, False):
            for act in (None, "relu", "sigmoid_neg"):
                model, x, ref = _dense(rng, m, k, n, bias, act)
                _close(model(data=x), ref)
                if native_kernels_available():
                    assert bool(_packed_params(model)) == (m >= 4), (m, k, n)


def test_dense_3d_input_not_flattened():
    rng = np.random.default_rng(1)
    model, x, ref = _dense(rng, 0, 19, 33, True, "relu", in_shape=(3, 5, 19))
    _close(model(data=x), ref)


def test_relu_keeps_nan_and_inf_rows():
    rng = np.random.default_rng(2)
    model, x, ref = _dense(rng, 9, 50, 47, True, "relu")
    x[3, 7] = np.nan
    x[5, 1] = np.inf
    with np.errstate(invalid="ignore"):
        got = model(data=x)
    got = _first(got)
    assert np.isnan(got[3]).all()
    assert np.isin(got[5], [0.0, np.inf]).all() and np.isinf(got[5]).any()
    keep = [i for i in range(9) if i not in (3, 5)]
    _close(got[keep], ref[keep])


@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("m,k,n", [(6, 33, 70), (20, 128, 16), (40, 9, 130)])
def test_dot_with_constant_rhs(m, k, n, tb):
    rng = np.random.default_rng(m + n)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    y = mx.sym.dot(mx.sym.var("data"), mx.sym.var("w"), transpose_b=tb)
    model = symjit.compile(y, {"data": x.shape, "w": w.shape}, {"w": mx.nd.array(w)})
    _close(model(data=x), (x.astype(np.float64) @ (w.T if tb else w)).astype(np.float32))
    if native_kernels_available():
        assert _packed_params(model)


def test_portable_path_after_packing_uses_the_unpacked_weights():
    if not native_kernels_available():
        pytest.skip("no AVX-512 tiles on this host: nothing is packed")
    rng = np.random.default_rng(3)
    model, x, ref = _dense(rng, 12, 64, 48, True, "relu")
    assert _packed_params(model)
    try:
        set_native_kernels(0)
        _close(model(data=x), ref)
    finally:
        set_native_kernels(-1)
    _close(model(data=x), ref)


def test_block_threshold_changes_who_computes_not_the_result():
    """The fewest flops per parallel block (`min_task`) only decides how a call is cut into
    blocks of whole tiles: one block or one per thread gives the same floats. On a host without
    the AVX-512 tiles a BLAS computes each block, and how it sums a block's products may depend
    on the block's size: there the two agree to rounding."""
    rng = np.random.default_rng(4)
    model, x, ref = _dense(rng, 24, 300, 200, True, "relu")
    outs = over_task_splits(lambda: _first(model(data=x)))
    if native_kernels_available():
        np.testing.assert_array_equal(outs[0], outs[1])
    else:   # the same products, summed in another order: an ulp or so of the output's scale
        np.testing.assert_allclose(outs[0], outs[1], rtol=0, atol=1e-6 * max(float(np.abs(ref).max()), 1.0))
    _close(outs[0], ref)


def test_hybridized_dense_repacks_after_new_weights_and_trains_on_inputs():
    """A hybridized Dense stack at inference binds its weights (packed at compile time); new
    parameter values give the new layer's output (not the packing of the old ones), and a
    recorded forward/backward still computes the weight gradient."""
    from symjit import autograd, gluon, nd
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(37, activation="relu", in_units=50), gluon.nn.Dense(11, in_units=37))
    net.initialize(mx.init.Xavier())
    net.hybridize()
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 50)).astype(np.float32)

    def reference():
        (w0, b0), (w1, b1) = [(blk.weight.data().asnumpy(), blk.bias.data().asnumpy()) for blk in net]
        return np.maximum(x @ w0.T + b0, 0) @ w1.T + b1

    _close(net(nd.array(x)).asnumpy(), reference())
    if native_kernels_available():
        assert net._fast_call.const_bytes > 0    # the packed copies of the bound weights
    for blk in net:
        blk.weight.set_data(nd.array(rng.standard_normal(blk.weight.shape).astype(np.float32)))
    _close(net(nd.array(x)).asnumpy(), reference())
    xs = nd.array(x)
    with autograd.record():
        loss = net(xs).sum()
    loss.backward()
    w1 = net[1].weight.data().asnumpy()
    h = np.maximum(x @ net[0].weight.data().asnumpy().T + net[0].bias.data().asnumpy(), 0)
    _close(net[1].weight.grad().asnumpy(), np.ones((8, 11), np.float32).T @ h)
    assert w1.shape == (11, 37)


@pytest.mark.parametrize("m,k,n", [(1, 784, 128), (3, 301, 77), (16, 64, 1000), (2, 8, 5), (5, 13, 3)])
def test_portable_dense_layers_of_few_rows_are_dot_products(m, k, n):
    """On the portable path a dense layer of at most 16 rows (per block) runs as dot products
    (nn/gemm.c gemm_nt_dots) rather than through a BLAS that would pack all the weights each
    call: k tails past the last 8-lane vector, row and column counts that are no multiple of the
    2 x 4 tile included. Each output is summed one fixed way, so cutting the call into one block
    or one per thread gives the same floats on every host."""
    rng = np.random.default_rng(m * 1000 + n)
    model, x, ref = _dense(rng, m, k, n, True, "relu")
    set_native_kernels(0)
    try:
        outs = over_task_splits(lambda: _first(model(data=x)))
        kernel_tune("portable_blas", 1)    # the same layer on the BLAS (the override)
        blas = _first(model(data=x))
    finally:
        kernel_tune("portable_blas", 0)
        set_native_kernels(-1)
    np.testing.assert_array_equal(outs[0], outs[1])
    _close(blas, ref)
    # float32 sums of k products against the float64 reference
    np.testing.assert_allclose(outs[0], ref, rtol=1e-5, atol=1e-5 * np.sqrt(k) * max(float(np.abs(ref).max()), 1.0) / 10)
