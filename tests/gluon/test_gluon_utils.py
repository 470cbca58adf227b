"""gluon.utils: split_data/split_and_load, clip_global_norm, check_sha1, download (a file:// URL
stands in for the network; an unreachable URL fails clearly), replace_file, shape_is_known."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

import symjit as mx
from symjit import nd
from symjit.base import MXNetError
from symjit.gluon import utils


def test_split_data_and_load():
    x = nd.arange(10).reshape((5, 2))
    parts = utils.split_data(x, 2, even_split=False)
    assert [p.shape for p in parts] == [(3, 2), (2, 2)]
    np.testing.assert_array_equal(np.concatenate([p.asnumpy() for p in parts]), x.asnumpy())
    with pytest.raises(ValueError, match="evenly split"):
        utils.split_data(x, 2)
    cols = utils.split_data(nd.arange(12).reshape((2, 6)), 3, batch_axis=1)
    np.testing.assert_array_equal(cols[1].asnumpy(), [[2, 3], [8, 9]])
    loaded = utils.split_and_load(np.ones((4, 3)), [mx.cpu(0), mx.cpu(1)])
    assert [a.context for a in loaded] == [mx.cpu(0), mx.cpu(1)] and loaded[0].shape == (2, 3)


def test_clip_global_norm():
    a, b = nd.array([3.0, 0.0]), nd.array([[4.0]])
    norm = utils.clip_global_norm([a, b], 1.0)
    assert norm == pytest.approx(5.0)
    np.testing.assert_allclose(a.asnumpy(), [0.6, 0.0], rtol=1e-6)
    np.testing.assert_allclose(b.asnumpy(), [[0.8]], rtol=1e-6)


def test_check_sha1_replace_file_and_download(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"symjit" * 1000)
    digest = hashlib.sha1(src.read_bytes()).hexdigest()
    assert utils.check_sha1(str(src), digest)
    assert not utils.check_sha1(str(src), "0" * 40)
    dst_dir = tmp_path / "dl"
    dst_dir.mkdir()
    got = utils.download(src.as_uri(), path=str(dst_dir), sha1_hash=digest)
    assert got == str(dst_dir / "src.bin") and (dst_dir / "src.bin").read_bytes() == src.read_bytes()
    with pytest.raises(MXNetError, match="src.bin.*after 2 attempts"):
        utils.download(src.as_uri(), path=str(tmp_path / "bad.bin"), sha1_hash="0" * 40, retries=1)
    assert not (tmp_path / "bad.bin").exists()
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".part"] == []
    with pytest.raises(MXNetError, match="could not fetch http://127.0.0.1:9/x.params"):
        utils.download("http://127.0.0.1:9/x.params", path=str(tmp_path / "x.params"), retries=0)
    other = tmp_path / "other"
    other.write_text("new")
    utils.replace_file(str(other), str(src))
    assert src.read_text() == "new" and not other.exists()


def test_shape_is_known():
    assert utils.shape_is_known((2, 3))
    assert not utils.shape_is_known(None)
    assert not utils.shape_is_known((0, 3))
    assert not utils.shape_is_known((2, -1))
