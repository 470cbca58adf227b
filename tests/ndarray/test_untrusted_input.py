"""Arrays from untrusted sources: `.params` bytes are checked to the last byte, and complex
data (MXNet has no complex dtype) is refused instead of losing its imaginary part."""
from __future__ import annotations

import struct

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError


def _saved(tmp_path, data) -> bytes:
    f = tmp_path / "w.params"
    mx.nd.save(str(f), data)
    return f.read_bytes()


@pytest.mark.parametrize("extra", [b"\x00", b"garbage", bytes(64)])
def test_params_with_trailing_bytes_are_rejected(tmp_path, extra):
    buf = _saved(tmp_path, {"arg:w": mx.nd.ones((2, 3))})
    assert mx.nd.load_frombuffer(buf)["arg:w"].shape == (2, 3)
    f = tmp_path / "t.params"
    f.write_bytes(buf + extra)
    with pytest.raises(MXNetError, match=rf"t\.params.*{len(extra)} trailing bytes"):
        mx.nd.load(str(f))
    with pytest.raises(MXNetError, match="trailing bytes"):
        mx.nd.load_frombuffer(buf + extra)


def test_params_list_with_trailing_bytes_is_rejected(tmp_path):
    buf = _saved(tmp_path, [mx.nd.ones((2,))])
    with pytest.raises(MXNetError, match="1 trailing bytes"):
        mx.nd.load_frombuffer(buf + b"\x01")


def test_params_with_an_implausible_zero_size_shape_are_rejected(tmp_path):
    # a (0, 2**62) array has no data bytes, so only the shape check stands between it and numpy
    buf = bytearray(_saved(tmp_path, [mx.nd.ones((1, 1))]))
    dims_at = 8 * 3 + 4 + 4 + 4          # header, count | magic, stype, ndim
    struct.pack_into("<qq", buf, dims_at, 0, 2 ** 62)
    with pytest.raises(MXNetError, match="implausible shape"):
        mx.nd.load_frombuffer(bytes(buf))


def test_complex_inputs_are_refused():
    z = np.array([1 + 2j, 3 - 1j], dtype=np.complex64)
    with pytest.raises(MXNetError, match="complex values .*complex64"):
        mx.nd.array(z)
    with pytest.raises(MXNetError, match="complex"):
        mx.nd.array(z, dtype="float32")
    x = mx.nd.zeros((2,))
    with pytest.raises(MXNetError, match="NDArray assignment: complex"):
        x[:] = z
    with pytest.raises(MXNetError, match="complex scalar"):
        x * (1 + 2j)
    ex = mx.sym.var("x").simple_bind(mx.cpu(), x=(2,), grad_req="null")
    with pytest.raises(MXNetError, match="forward: argument 'x': complex"):
        ex.forward(x=z)
    model = mx.compile(mx.sym.var("x") * 2, shapes={"x": (2,)})
    with pytest.raises(MXNetError, match="complex"):
        model(x=z)
    assert x.asnumpy().tolist() == [0.0, 0.0]
