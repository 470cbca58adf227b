"""Contrib fft / ifft, count_sketch, hawkesll and arange_like: numpy references (np.fft, explicit
loops, the Hawkes likelihood written from its intensity), MXNet's documented examples,
gradients against finite differences, the Symbol / hybridized paths and bad input refused."""
from __future__ import annotations

import math

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from symjit.test_utils import check_op_gradient

RNG = np.random.default_rng(11)


# ---- fft / ifft -----------------------------------------------------------------------------

def _interleave(c):
    return np.stack([c.real, c.imag], axis=-1).reshape(c.shape[:-1] + (2 * c.shape[-1],))


@pytest.mark.parametrize("shape", [(3, 8), (2, 1, 3, 5)])
def test_fft_is_the_interleaved_dft_and_ifft_its_unnormalized_inverse(shape):
    x = RNG.normal(size=shape).astype(np.float32)
    f = mx.nd.contrib.fft(mx.nd.array(x))
    np.testing.assert_allclose(f.asnumpy(), _interleave(np.fft.fft(x.astype(np.float64))), rtol=1e-5, atol=1e-5)
    z = RNG.normal(size=shape[:-1] + (2 * shape[-1],)).astype(np.float32)
    got = mx.nd.contrib.ifft(mx.nd.array(z)).asnumpy()
    ref = (np.fft.ifft(z[..., 0::2] + 1j * z[..., 1::2]) * shape[-1]).real
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mx.nd.contrib.ifft(f).asnumpy() / shape[-1], x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op,shape", [("_contrib_fft", (2, 5)), ("_contrib_ifft", (3, 8)), ("_contrib_fft", (1, 2, 2, 3))])
def test_fft_gradients_match_finite_differences(op, shape):
    check_op_gradient(op, [RNG.normal(size=shape)], rtol=1e-6, atol=1e-8)


def test_fft_in_symbol_and_hybridized_block_with_backward():
    x = RNG.normal(size=(2, 4)).astype(np.float32)
    head = RNG.normal(size=(2, 8)).astype(np.float32)
    ex = mx.sym.contrib.fft(mx.sym.var("x")).simple_bind(mx.cpu(), x=(2, 4))
    ex.arg_dict["x"][:] = x
    np.testing.assert_allclose(ex.forward(is_train=True)[0].asnumpy(), _interleave(np.fft.fft(x)), rtol=1e-5, atol=1e-5)
    ex.backward(mx.nd.array(head))
    expect = (np.fft.ifft(head[:, 0::2] + 1j * head[:, 1::2]) * 4).real
    np.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), expect, rtol=1e-5, atol=1e-5)

    class Net(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, v):
            return F.contrib.ifft(F.contrib.fft(v))
    net = Net()
    net.hybridize()
    np.testing.assert_allclose(net(mx.nd.array(x)).asnumpy(), 4 * x, rtol=1e-5, atol=1e-5)


def test_fft_refuses_bad_shapes():
    with pytest.raises(MXNetError, match="2-D"):
        mx.nd.contrib.fft(mx.nd.zeros((2, 3, 4)))
    with pytest.raises(MXNetError, match="even"):
        mx.nd.contrib.ifft(mx.nd.zeros((2, 5)))


# ---- count_sketch -------------------------------------------------------------------------

def test_count_sketch_documented_example():
    x = mx.nd.array([[1.2, 2.5, 3.4], [3.2, 5.7, 6.6]])
    out = mx.nd.contrib.count_sketch(data=x, h=mx.nd.array([[0, 3, 4]]), s=mx.nd.array([[1, -1, 1]]), out_dim=5)
    np.testing.assert_allclose(out.asnumpy(), [[1.2, 0, 0, -2.5, 3.4], [3.2, 0, 0, -5.7, 6.6]], rtol=1e-6)


def test_count_sketch_sums_colliding_features_and_its_gradient():
    n, d, k = 3, 7, 4
    x = RNG.normal(size=(n, d))
    h = RNG.integers(0, k, (1, d)).astype(np.float64)
    s = RNG.choice([-1.0, 1.0], (1, d))
    got = mx.nd.contrib.count_sketch(mx.nd.array(x), mx.nd.array(h), mx.nd.array(s), out_dim=k).asnumpy()
    ref = np.zeros((n, k))
    for i in range(n):
        for j in range(d):
            ref[i, int(h[0, j])] += s[0, j] * x[i, j]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    check_op_gradient("_contrib_count_sketch", [x, h, s], {"out_dim": k}, wrt=[0], rtol=1e-6, atol=1e-8)


def test_count_sketch_refuses_bad_hashes_and_shapes():
    with pytest.raises(MXNetError, match="out of range"):
        mx.nd.contrib.count_sketch(mx.nd.ones((1, 2)), mx.nd.array([[0, 5]]), mx.nd.ones((1, 2)), out_dim=5)
    with pytest.raises(MXNetError, match="shape"):
        mx.nd.contrib.count_sketch(mx.nd.ones((1, 2)), mx.nd.array([[0, 1, 2]]), mx.nd.ones((1, 3)), out_dim=5)


# ---- hawkesll ---------------------------------------------------------------------------

def _hawkes_reference(mu, alpha, beta, state, lags, marks, vlen, tmax):
    """Log likelihood from the intensity written out: sum of log intensities at the points
    minus the integrated intensity, with the initial state decaying from time 0."""
    n_seq, k = mu.shape
    ll, final = np.zeros(n_seq), np.zeros((n_seq, k))
    for n in range(n_seq):
        times = np.cumsum(lags[n, :int(vlen[n])])
        mk = marks[n, :int(vlen[n])]
        for i, (t, c) in enumerate(zip(times, mk)):
            past = times[:i][mk[:i] == c]
            excite = state[n, c] * math.exp(-beta[c] * t) + np.exp(-beta[c] * (t - past)).sum()
            ll[n] += math.log(mu[n, c] + alpha[c] * beta[c] * excite)
        big_t = tmax[n]
        for c in range(k):
            own = times[mk == c]
            ll[n] -= mu[n, c] * big_t + alpha[c] * (state[n, c] * (1 - math.exp(-beta[c] * big_t))
                                                     + (1 - np.exp(-beta[c] * (big_t - own))).sum())
            final[n, c] = state[n, c] * math.exp(-beta[c] * big_t) + np.exp(-beta[c] * (big_t - own)).sum()
    return ll, final


def _hawkes_inputs(n=3, k=2, t=5):
    mu = RNG.uniform(0.5, 2.0, (n, k))
    alpha = RNG.uniform(0.1, 0.6, k)
    beta = RNG.uniform(0.5, 2.0, k)
    state = RNG.uniform(0, 1, (n, k))
    lags = RNG.uniform(0.1, 1.0, (n, t))
    marks = RNG.integers(0, k, (n, t)).astype(np.int32)
    vlen = np.array([t, 2, 0][:n], dtype=np.float64)
    tmax = lags.sum(axis=1) + 0.5
    return [mu, alpha, beta, state, lags, marks, vlen, tmax]


def test_hawkesll_documented_example():
    n, k, t = 4, 3, 4
    lda = mx.nd.array([1.5, 2.0, 3.0]).tile((n, 1))
    alpha, beta = mx.nd.array([0.2, 0.3, 0.4]), mx.nd.array([1.0, 2.0, 3.0])
    lags = mx.nd.array([[6, 7, 8, 9], [1, 2, 3, 4], [3, 4, 5, 6], [8, 9, 10, 11]])
    marks = mx.nd.zeros((n, t)).astype(np.int32)
    vlen, tmax = mx.nd.array([1, 2, 3, 4]), mx.nd.ones((n,)) * 100.0
    ll, state = mx.nd.contrib.hawkesll(lda, alpha, beta, mx.nd.zeros((n, k)), lags, marks, vlen, tmax)
    # the values MXNet 1.9.1's own test of this example asserts
    np.testing.assert_allclose(ll.asnumpy(), [-649.79453489, -649.57118596, -649.38025115, -649.17811484], rtol=1e-6)
    ref_ll, ref_state = _hawkes_reference(*[a.asnumpy().astype(np.float64) for a in
                                            (lda, alpha, beta, mx.nd.zeros((n, k)), lags)], marks.asnumpy(),
                                          vlen.asnumpy(), tmax.asnumpy())
    np.testing.assert_allclose(ll.asnumpy(), ref_ll, rtol=1e-6)
    np.testing.assert_allclose(state.asnumpy(), ref_state, rtol=1e-5, atol=1e-30)


def test_hawkesll_is_the_point_process_likelihood_and_has_exact_gradients():
    xs = _hawkes_inputs()
    ll, state = mx.nd.contrib.hawkesll(*[mx.nd.array(x, dtype=x.dtype) for x in xs])
    ref_ll, ref_state = _hawkes_reference(*xs)
    np.testing.assert_allclose(ll.asnumpy(), ref_ll, rtol=1e-5)
    np.testing.assert_allclose(state.asnumpy(), ref_state, rtol=1e-5)
    check_op_gradient("_contrib_hawkesll", xs, wrt=[0, 1, 2, 3], eps=1e-6, rtol=1e-5, atol=1e-7)


def test_hawkesll_autograd_and_symbol_paths_agree():
    xs = _hawkes_inputs()
    arrs = [mx.nd.array(x, dtype=x.dtype) for x in xs]
    for a in arrs[:4]:
        a.attach_grad()
    with mx.autograd.record():
        ll, _ = mx.nd.contrib.hawkesll(*arrs)
    ll.backward()
    names = ["lda", "alpha", "beta", "state", "lags", "marks", "valid_length", "max_time"]
    syms = [mx.sym.var(n) for n in names]
    s = mx.sym.contrib.hawkesll(*syms)[0]
    ex = s.simple_bind(mx.cpu(), type_dict={"marks": "int32"}, grad_req={n: ("write" if i < 4 else "null")
                                                                           for i, n in enumerate(names)},
                       **{n: x.shape for n, x in zip(names, xs)})
    for n, x in zip(names, xs):
        ex.arg_dict[n][:] = x
    np.testing.assert_allclose(ex.forward(is_train=True)[0].asnumpy(), ll.asnumpy(), rtol=1e-6)
    ex.backward(mx.nd.ones(ll.shape))
    for n, a in zip(names[:4], arrs[:4]):
        np.testing.assert_allclose(ex.grad_dict[n].asnumpy(), a.grad.asnumpy(), rtol=1e-5, atol=1e-6)


def test_hawkesll_refuses_bad_marks_and_shapes():
    xs = _hawkes_inputs()
    xs[5][0, 0] = 7
    with pytest.raises(MXNetError, match="mark 7"):
        mx.nd.contrib.hawkesll(*[mx.nd.array(x, dtype=x.dtype) for x in xs])
    xs = _hawkes_inputs()
    with pytest.raises(MXNetError, match="alpha"):
        mx.nd.contrib.hawkesll(*[mx.nd.array(x if i != 1 else np.ones(3), dtype=x.dtype) for i, x in enumerate(xs)])


# ---- arange_like ----------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(), dict(start=1.5, step=-0.5), dict(repeat=3, step=2.0)])
def test_arange_like_fills_the_data_shape(kw):
    x = mx.nd.zeros((2, 3, 4), dtype="float64")
    got = mx.nd.contrib.arange_like(x, **kw)
    start, step, rep = kw.get("start", 0.0), kw.get("step", 1.0), kw.get("repeat", 1)
    ref = start + (np.arange(24) // rep) * step
    assert got.dtype == np.float64
    np.testing.assert_allclose(got.asnumpy(), ref.reshape(2, 3, 4))


def test_arange_like_along_an_axis_symbol_and_zero_gradient():
    x = mx.nd.array(RNG.normal(size=(2, 5)))
    np.testing.assert_array_equal(mx.nd.contrib.arange_like(x, axis=-1, start=2).asnumpy(), np.arange(2, 7))
    x.attach_grad()
    with mx.autograd.record():
        y = (mx.nd.contrib.arange_like(x) * x).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), np.arange(10).reshape(2, 5))
    s = mx.sym.contrib.arange_like(mx.sym.var("d"), axis=0)
    assert s.infer_shape(d=(7, 3))[1] == [(7,)]
    with pytest.raises(MXNetError, match="out of bounds"):
        mx.nd.contrib.arange_like(x, axis=2)
