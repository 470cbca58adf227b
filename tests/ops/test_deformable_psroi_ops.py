"""DeformablePSROIPooling: shapes and refusals, the data gradient against finite differences,
and the trans gradient against finite differences where no sampling point is clamped (MXNet's
rule differentiates the interpolation at the clamped point). MXNet 1.9.1's values are in the
golden tests (tests/golden/test_golden_contrib.py)."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from symjit.test_utils import check_op_gradient

RNG = np.random.default_rng(41)
OP = "_contrib_DeformablePSROIPooling"
ATTRS = {"spatial_scale": 1.0, "output_dim": 2, "group_size": 2, "pooled_size": 2, "sample_per_part": 2,
         "trans_std": 0.1}


def test_shapes_and_refusals():
    s = mx.sym.contrib.DeformablePSROIPooling(mx.sym.var("d"), mx.sym.var("r"), mx.sym.var("t"), **ATTRS)
    args, outs, _ = s.infer_shape(d=(1, 8, 9, 9), r=(3, 5), t=(3, 2, 2, 2))
    assert outs == [(3, 2, 2, 2)]
    with pytest.raises(MXNetError, match="group_size"):
        s.infer_shape(d=(1, 6, 9, 9), r=(3, 5), t=(3, 2, 2, 2))
    no_trans = mx.sym.contrib.DeformablePSROIPooling(mx.sym.var("d"), mx.sym.var("r"), **dict(ATTRS, no_trans=True))
    assert no_trans.list_arguments() == ["d", "r"]
    with pytest.raises(MXNetError, match="batch"):
        mx.nd.contrib.DeformablePSROIPooling(mx.nd.ones((1, 8, 5, 5)), mx.nd.array([[1, 0, 0, 3, 3]]),
                                             mx.nd.zeros((1, 2, 2, 2)), **ATTRS)


def test_gradients_match_finite_differences_inside_the_map():
    data = RNG.normal(size=(1, 8, 10, 10))
    rois = np.array([[0, 2, 2, 6, 7], [0, 3, 1, 7, 5]], np.float64)
    trans = RNG.uniform(-0.4, 0.4, size=(2, 2, 2, 2))     # every point stays well inside the map
    check_op_gradient(OP, [data, rois, trans], ATTRS, wrt=[0, 2], rtol=1e-3, atol=1e-6)
