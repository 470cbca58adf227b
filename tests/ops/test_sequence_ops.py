"""SequenceMask / SequenceLast / SequenceReverse against numpy loops, with gradients."""
from __future__ import annotations

import numpy as np
import pytest

from symjit import nd
from symjit.base import MXNetError
from symjit.test_utils import check_op_gradient

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("axis", [0, 1])
def test_mask_last_reverse(axis):
    data = RNG.normal(size=(4, 3, 2)) if axis == 0 else RNG.normal(size=(3, 4, 2))
    lens = np.array([1.0, 4.0, 2.0])
    tm = data if axis == 0 else data.swapaxes(0, 1)
    kw = dict(use_sequence_length=True, axis=axis)
    masked = nd.SequenceMask(nd.array(data), nd.array(lens), value=-1.0, **kw).asnumpy()
    exp = tm.copy()
    for b, n in enumerate(lens.astype(int)):
        exp[n:, b] = -1
    np.testing.assert_allclose(masked, exp if axis == 0 else exp.swapaxes(0, 1), rtol=1e-6)
    last = nd.SequenceLast(nd.array(data), nd.array(lens), **kw).asnumpy()
    np.testing.assert_allclose(last, np.stack([tm[int(n) - 1, b] for b, n in enumerate(lens)]), rtol=1e-6)
    for op in ("SequenceMask", "SequenceLast"):
        check_op_gradient(op, [data, lens], kw, wrt=[0])
    if axis == 0:
        rev = nd.SequenceReverse(nd.array(data), nd.array(lens), use_sequence_length=True).asnumpy()
        exp = data.copy()
        for b, n in enumerate(lens.astype(int)):
            exp[:n, b] = data[:n, b][::-1]
        np.testing.assert_allclose(rev, exp, rtol=1e-6)
        check_op_gradient("SequenceReverse", [data, lens], {"use_sequence_length": True}, wrt=[0])


def test_without_lengths_and_errors():
    data = RNG.normal(size=(5, 2))
    np.testing.assert_allclose(nd.SequenceLast(nd.array(data)).asnumpy(), data[-1], rtol=1e-6)
    np.testing.assert_allclose(nd.SequenceReverse(nd.array(data)).asnumpy(), data[::-1], rtol=1e-6)
    with pytest.raises(MXNetError, match="SequenceMask.*sequence_length"):
        nd.SequenceMask(nd.array(data), nd.array([1.0, 2.0, 3.0]), use_sequence_length=True)
    with pytest.raises(MXNetError, match="SequenceLast.*values must lie"):
        nd.SequenceLast(nd.array(data), nd.array([9.0, 1.0]), use_sequence_length=True)
