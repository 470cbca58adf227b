"""random_pdf_* against scipy.stats, gradients against finite differences."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from symjit import nd
from symjit.base import MXNetError
from symjit.ops import apply_numpy
from symjit.test_utils import check_op_gradient

RNG = np.random.default_rng(0)
A = RNG.uniform(1, 3, size=(2,))
B = RNG.uniform(0.5, 2, size=(2,))
XP = RNG.uniform(0.5, 3, size=(2, 3))
XC = np.array([[0.0, 2, 5], [1, 3, 4]])


@pytest.mark.parametrize("dist,params,x,ref,wrt", [
    ("normal", [RNG.normal(size=2), B], RNG.normal(size=(2, 3)), lambda x, m, s: stats.norm.pdf(x, m, s), None),
    ("gamma", [A, B], XP, lambda x, a, b: stats.gamma.pdf(x, a, scale=b), None),
    ("exponential", [B], XP, lambda x, lam: stats.expon.pdf(x, scale=1 / lam), None),
    ("uniform", [np.zeros(2), np.full(2, 4.0)], XP, lambda x, lo, hi: stats.uniform.pdf(x, lo, hi - lo), None),
    ("poisson", [B], XC, lambda x, lam: stats.poisson.pmf(x, lam), [1]),
    ("negative_binomial", [A, np.array([0.3, 0.6])], XC, lambda x, k, p: stats.nbinom.pmf(x, k, p), [1, 2]),
    ("generalized_negative_binomial", [A, B], XC,
     lambda x, mu, al: stats.nbinom.pmf(x, 1 / al, 1 / (1 + al * mu)), [1, 2]),
])
def test_pdf(dist, params, x, ref, wrt):
    got = apply_numpy(f"_random_pdf_{dist}", [x, *params])[0]
    np.testing.assert_allclose(got, ref(x, *[p[:, None] for p in params]), rtol=1e-10, atol=1e-14)
    log = apply_numpy(f"_random_pdf_{dist}", [x, *params], {"is_log": True})[0]
    np.testing.assert_allclose(np.exp(log), got, rtol=1e-10, atol=1e-14)
    check_op_gradient(f"_random_pdf_{dist}", [x, *params], wrt=wrt)
    check_op_gradient(f"_random_pdf_{dist}", [x, *params], {"is_log": True}, wrt=wrt)


def test_dirichlet_and_errors():
    alpha = RNG.uniform(1, 3, size=(2, 4))
    x = RNG.dirichlet(np.ones(4), size=(2, 3))
    got = nd.random_pdf_dirichlet(nd.array(x, dtype="float64"), nd.array(alpha, dtype="float64")).asnumpy()
    assert got.shape == (2, 3)
    np.testing.assert_allclose(got[1, 2], stats.dirichlet.pdf(x[1, 2], alpha[1]), rtol=1e-10)
    check_op_gradient("_random_pdf_dirichlet", [x, alpha], wrt=[1])
    with pytest.raises(MXNetError, match="_random_pdf_normal.*sigma"):
        nd.random_pdf_normal(nd.ones((2, 3)), nd.zeros((2,)), nd.ones((3,)))
