"""Interleaved multi-head attention products against an explicit numpy formulation."""
from __future__ import annotations

import numpy as np

from symjit.ops import apply_numpy
from symjit.test_utils import check_op_gradient

RNG = np.random.default_rng(0)
L, B, H, D = 4, 2, 3, 5


def _heads(x, parts, which):
    """(L, B, H * parts * D) -> the `which` projection as (B * H, L, D)."""
    l = x.shape[0]
    return x.reshape(l, B, H, parts, D)[..., which, :].transpose(1, 2, 0, 3).reshape(B * H, l, D)


def test_self_attention():
    x = RNG.normal(size=(L, B, H * 3 * D))
    att = RNG.normal(size=(B * H, L, L))
    q, k, v = (_heads(x, 3, i) for i in range(3))
    scores = apply_numpy("_contrib_interleaved_matmul_selfatt_qk", [x], {"heads": H})[0]
    np.testing.assert_allclose(scores, q @ k.transpose(0, 2, 1) / np.sqrt(D), rtol=1e-12)
    out = apply_numpy("_contrib_interleaved_matmul_selfatt_valatt", [x, att], {"heads": H})[0]
    ref = (att @ v).reshape(B, H, L, D).transpose(2, 0, 1, 3).reshape(L, B, H * D)
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    check_op_gradient("_contrib_interleaved_matmul_selfatt_qk", [x], {"heads": H})
    check_op_gradient("_contrib_interleaved_matmul_selfatt_valatt", [x, att], {"heads": H})


def test_encoder_decoder_attention():
    q_in = RNG.normal(size=(3, B, H * D))
    kv = RNG.normal(size=(L, B, H * 2 * D))
    att = RNG.normal(size=(B * H, 3, L))
    q, k, v = _heads(q_in, 1, 0), _heads(kv, 2, 0), _heads(kv, 2, 1)
    scores = apply_numpy("_contrib_interleaved_matmul_encdec_qk", [q_in, kv], {"heads": H})[0]
    np.testing.assert_allclose(scores, q @ k.transpose(0, 2, 1) / np.sqrt(D), rtol=1e-12)
    out = apply_numpy("_contrib_interleaved_matmul_encdec_valatt", [kv, att], {"heads": H})[0]
    np.testing.assert_allclose(out, (att @ v).reshape(B, H, 3, D).transpose(2, 0, 1, 3).reshape(3, B, H * D),
                               rtol=1e-12)
    check_op_gradient("_contrib_interleaved_matmul_encdec_qk", [q_in, kv], {"heads": H})
    check_op_gradient("_contrib_interleaved_matmul_encdec_valatt", [kv, att], {"heads": H})
