"""The linalg_* family: forward against numpy, gradients against finite differences."""
from __future__ import annotations

import numpy as np
import pytest

from symjit import nd
from symjit import symbol as sym
from symjit.base import MXNetError
from symjit.ops import apply_numpy, get_op
from symjit.ops.registry import numpy_emitter
from symjit.test_utils import check_op_gradient, numeric_grad

RNG = np.random.default_rng(0)
M = RNG.normal(size=(2, 4, 4))
SPD = M @ M.transpose(0, 2, 1) + 4 * np.eye(4)
CHOL = np.linalg.cholesky(SPD)


def _sym(x):
    return 0.5 * (x + x.swapaxes(-1, -2))


def _check_structured_grad(op, x, attrs, prep, symmetric):
    """Gradient through `prep` (the structure the op reads: symmetric or triangular)."""
    outs = apply_numpy(op, [prep(x)], attrs)
    heads = [RNG.normal(size=o.shape) for o in outs]

    def loss():
        return sum(float((o * h).sum()) for o, h in zip(apply_numpy(op, [prep(x)], attrs), heads))
    num = numeric_grad(loss, x, 1e-6)
    g = get_op(op).grad(numpy_emitter(), get_op(op).parse(attrs), [prep(x)], outs, heads)[0]
    g = _sym(g) if symmetric else g
    np.testing.assert_allclose(g, num, rtol=1e-4, atol=1e-6)


def test_gemm_forward_and_gradient():
    a, b, c = RNG.normal(size=(2, 3, 4)), RNG.normal(size=(2, 4, 5)), RNG.normal(size=(2, 3, 5))
    out = nd.linalg.gemm(nd.array(a), nd.array(b), nd.array(c), alpha=0.5, beta=2.0).asnumpy()
    np.testing.assert_allclose(out, 0.5 * a @ b + 2 * c, rtol=1e-5)
    check_op_gradient("_linalg_gemm", [a, b, c], {"alpha": 0.5, "beta": 2.0})
    with pytest.raises(MXNetError, match="_linalg_gemm.*'C'"):
        nd.linalg.gemm(nd.array(a), nd.array(b), nd.ones((2, 3, 4)))


@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_family(lower):
    tri = CHOL if lower else CHOL.transpose(0, 2, 1)
    got = nd.linalg.potrf(nd.array(SPD, dtype="float64"), lower=lower).asnumpy()
    np.testing.assert_allclose(got, tri, rtol=1e-10)
    inv = nd.linalg.potri(nd.array(tri, dtype="float64"), lower=lower).asnumpy()
    np.testing.assert_allclose(inv, np.linalg.inv(SPD), rtol=1e-8)
    _check_structured_grad("_linalg_potrf", SPD.copy(), {"lower": lower}, _sym, True)
    mask = np.tril if lower else np.triu
    _check_structured_grad("_linalg_potri", tri.copy(), {"lower": lower}, mask, False)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("rightside", [True, False])
def test_trmm_trsm(lower, transpose, rightside):
    tri = CHOL if lower else CHOL.transpose(0, 2, 1)
    b = RNG.normal(size=(2, 3, 4) if rightside else (2, 4, 3))
    attrs = {"lower": lower, "transpose": transpose, "rightside": rightside, "alpha": 1.5}
    op_a = tri.swapaxes(-1, -2) if transpose else tri
    prod = apply_numpy("_linalg_trmm", [tri, b], attrs)[0]
    np.testing.assert_allclose(prod, 1.5 * (b @ op_a if rightside else op_a @ b), rtol=1e-10)
    solved = apply_numpy("_linalg_trsm", [tri, prod], attrs)[0]
    np.testing.assert_allclose(solved, 2.25 * b, rtol=1e-8)   # alpha twice
    mask = np.tril if lower else np.triu
    for op in ("_linalg_trmm", "_linalg_trsm"):
        check_op_gradient(op, [tri, b], attrs, wrt=[1])
        outs = apply_numpy(op, [tri, b], attrs)
        head = RNG.normal(size=outs[0].shape)
        ga = get_op(op).grad(numpy_emitter(), get_op(op).parse(attrs), [tri, b], outs, [head])[0]
        x = tri.copy()
        num = numeric_grad(lambda: float((apply_numpy(op, [mask(x), b], attrs)[0] * head).sum()), x, 1e-6)
        np.testing.assert_allclose(ga, mask(num), rtol=1e-4, atol=1e-6)


def test_syrk_gelqf_syevd():
    a = RNG.normal(size=(2, 3, 4))
    for t in (False, True):
        check_op_gradient("_linalg_syrk", [a], {"alpha": 0.7, "transpose": t})
    q, low = nd.linalg.gelqf(nd.array(a, dtype="float64"))
    np.testing.assert_allclose(low.asnumpy() @ q.asnumpy(), a, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(q.asnumpy() @ q.asnumpy().swapaxes(1, 2), np.broadcast_to(np.eye(3), (2, 3, 3)),
                               atol=1e-12)
    check_op_gradient("_linalg_gelqf", [a])
    u, lam = nd.linalg.syevd(nd.array(SPD, dtype="float64"))
    u, lam = u.asnumpy(), lam.asnumpy()
    np.testing.assert_allclose(u.swapaxes(1, 2) @ (lam[..., None] * u), SPD, rtol=1e-10)
    assert (np.diff(lam, axis=-1) >= 0).all()
    big = np.take_along_axis(u, np.abs(u).argmax(-1)[..., None], -1)
    assert (big > 0).all()
    _check_structured_grad("_linalg_syevd", SPD.copy(), {}, _sym, True)
    with pytest.raises(MXNetError, match="gelqf.*rows <= columns"):
        nd.linalg.gelqf(nd.ones((4, 3)))


def test_inverse_det_slogdet_sumlogdiag():
    np.testing.assert_allclose(nd.linalg.inverse(nd.array(SPD, dtype="float64")).asnumpy(),
                               np.linalg.inv(SPD), rtol=1e-10)
    np.testing.assert_allclose(nd.linalg.det(nd.array(M, dtype="float64")).asnumpy(), np.linalg.det(M), rtol=1e-10)
    sign, logdet = nd.linalg.slogdet(nd.array(M, dtype="float64"))
    s, ld = np.linalg.slogdet(M)
    np.testing.assert_allclose(sign.asnumpy(), s)
    np.testing.assert_allclose(logdet.asnumpy(), ld, rtol=1e-10)
    np.testing.assert_allclose(nd.linalg.sumlogdiag(nd.array(SPD, dtype="float64")).asnumpy(),
                               np.log(np.diagonal(SPD, axis1=1, axis2=2)).sum(-1), rtol=1e-10)
    for op, x in (("_linalg_inverse", SPD), ("_linalg_det", M), ("_linalg_slogdet", M), ("_linalg_sumlogdiag", SPD)):
        check_op_gradient(op, [x])
    with pytest.raises(MXNetError, match="square"):
        nd.linalg.det(nd.ones((2, 3)))
    with pytest.raises(MXNetError, match="float32/float64"):
        nd.linalg.inverse(nd.ones((2, 2), dtype="int32"))


@pytest.mark.parametrize("offset", [0, 1, -1])
def test_diag_and_trian(offset):
    a = RNG.normal(size=(2, 3, 4))
    np.testing.assert_allclose(nd.linalg.extractdiag(nd.array(a), offset=offset).asnumpy(),
                               np.diagonal(a, offset, axis1=1, axis2=2), rtol=1e-6)
    d = RNG.normal(size=(2, 3))
    made = nd.linalg.makediag(nd.array(d), offset=offset).asnumpy()
    np.testing.assert_allclose(np.diagonal(made, offset, axis1=1, axis2=2), d, rtol=1e-6)
    check_op_gradient("_linalg_extractdiag", [a], {"offset": offset})
    check_op_gradient("_linalg_makediag", [d], {"offset": offset})
    for lower in (True, False):
        attrs = {"offset": offset, "lower": lower}
        packed = apply_numpy("_linalg_extracttrian", [SPD], attrs)[0]
        back = apply_numpy("_linalg_maketrian", [packed], attrs)[0]
        keep = (np.tril if (lower if offset == 0 else offset < 0) else np.triu)(SPD, offset)
        np.testing.assert_allclose(back, keep)
        check_op_gradient("_linalg_extracttrian", [SPD], attrs)
        check_op_gradient("_linalg_maketrian", [packed], attrs)


def test_symbolic_namespace_and_executor():
    a = sym.Variable("a")
    out = sym.linalg.syrk(a, alpha=2.0)
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    got = out.eval(a=nd.array(x))[0].asnumpy()
    np.testing.assert_allclose(got, 2 * x @ x.T, rtol=1e-5)
    assert out.infer_shape(a=(5, 3, 4))[1] == [(5, 3, 3)]
