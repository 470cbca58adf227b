"""mx.recordio: the exact bytes of MXNet's RecordIO format (dmlc-core's writer: magic, the
cflag/length word, 4-byte padding, records split at embedded magic numbers), the text index,
IRHeader packing and image records."""
from __future__ import annotations

import multiprocessing
import pickle
import struct

import numpy as np
import pytest

import symjit as mx
from symjit import recordio
from symjit.base import MXNetError

MAGIC = b"\x0a\x23\xd7\xce"   # 0xced7230a, little-endian


def _word(cflag, length):
    return struct.pack("<I", cflag << 29 | length)


def test_byte_layout_of_plain_and_padded_records(tmp_path):
    path = str(tmp_path / "a.rec")
    w = mx.recordio.MXRecordIO(path, "w")
    for rec in (b"abcde", b"", b"wxyz"):
        w.write(rec)
    w.close()
    want = (MAGIC + _word(0, 5) + b"abcde\0\0\0" + MAGIC + _word(0, 0) + MAGIC + _word(0, 4) + b"wxyz")
    assert open(path, "rb").read() == want
    r = mx.recordio.MXRecordIO(path, "r")
    assert [r.read(), r.read(), r.read(), r.read()] == [b"abcde", b"", b"wxyz", None]
    r.reset()
    assert r.read() == b"abcde"
    r.close()


def test_records_containing_the_magic_are_split_into_parts(tmp_path):
    path = str(tmp_path / "m.rec")
    recs = [b"abcd" + MAGIC + b"ef", MAGIC, b"12" + MAGIC + b"34",   # unaligned magic: not split
            b"abcd" + MAGIC + b"efgh" + MAGIC + b"i"]
    w = mx.recordio.MXRecordIO(path, "w")
    for rec in recs:
        w.write(rec)
    w.close()
    want = (MAGIC + _word(1, 4) + b"abcd" + MAGIC + _word(3, 2) + b"ef\0\0"
            + MAGIC + _word(1, 0) + MAGIC + _word(3, 0)
            + MAGIC + _word(0, 8) + b"12" + MAGIC + b"34"
            + MAGIC + _word(1, 4) + b"abcd" + MAGIC + _word(2, 4) + b"efgh" + MAGIC + _word(3, 1) + b"i\0\0\0")
    assert open(path, "rb").read() == want
    r = mx.recordio.MXRecordIO(path, "r")
    assert [r.read() for _ in recs] == recs and r.read() is None


def test_indexed_records_and_idx_text(tmp_path):
    rec, idx = str(tmp_path / "i.rec"), str(tmp_path / "i.idx")
    w = mx.recordio.MXIndexedRecordIO(idx, rec, "w")
    for i in range(5):
        w.write_idx(i, b"record%d" % i * (i + 1))
    w.close()
    offsets = [0]
    for i in range(4):
        n = len(b"record%d" % i * (i + 1))
        offsets.append(offsets[-1] + 8 + n + (-n) % 4)
    assert open(idx).read() == "".join("%d\t%d\n" % (i, o) for i, o in enumerate(offsets))
    r = mx.recordio.MXIndexedRecordIO(idx, rec, "r")
    assert r.keys == [0, 1, 2, 3, 4]
    assert r.read_idx(3) == b"record3" * 4 and r.read_idx(0) == b"record0"
    assert r.read() == b"record1" * 2    # reading on continues after the sought record
    with pytest.raises(KeyError):
        r.read_idx(7)
    with pytest.raises(AssertionError):
        r.write_idx(9, b"x")
    # pickling (DataLoader workers) reopens the reader
    r2 = pickle.loads(pickle.dumps(r))
    assert r2.read_idx(4) == b"record4" * 5
    r.close()
    r2.close()
    rs = mx.recordio.MXIndexedRecordIO(idx, rec, "r", key_type=str)
    assert rs.keys[0] == "0" and rs.read_idx("2") == b"record2" * 3


def _read_in_child(reader, q):
    q.put(reader.read_idx(1))


def test_reader_reopens_in_another_process(tmp_path):
    rec, idx = str(tmp_path / "p.rec"), str(tmp_path / "p.idx")
    w = mx.recordio.MXIndexedRecordIO(idx, rec, "w")
    w.write_idx(0, b"zero")
    w.write_idx(1, b"one")
    w.close()
    r = mx.recordio.MXIndexedRecordIO(idx, rec, "r")
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_read_in_child, args=(r, q))
    p.start()
    assert q.get(timeout=30) == b"one"
    p.join(30)


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="Invalid flag"):
        mx.recordio.MXRecordIO(str(tmp_path / "x.rec"), "a")
    bad = tmp_path / "bad.rec"
    bad.write_bytes(b"\x01\x02\x03\x04" + _word(0, 4) + b"abcd")
    with pytest.raises(MXNetError, match="magic"):
        mx.recordio.MXRecordIO(str(bad), "r").read()
    bad.write_bytes(MAGIC + _word(0, 8) + b"abcd")
    with pytest.raises(MXNetError, match="needs 8 bytes"):
        mx.recordio.MXRecordIO(str(bad), "r").read()
    w = mx.recordio.MXRecordIO(str(tmp_path / "w.rec"), "w")
    with pytest.raises(AssertionError):
        w.read()
    with pytest.raises(MXNetError, match="not found|cannot open"):
        mx.recordio.MXRecordIO(str(tmp_path / "missing.rec"), "r")


def test_pack_unpack_irheader():
    s = recordio.pack(recordio.IRHeader(0, 3.0, 7, 0), b"payload")
    assert s == struct.pack("<IfQQ", 0, 3.0, 7, 0) + b"payload" and len(s) == 24 + 7
    header, body = recordio.unpack(s)
    assert header == (0, 3.0, 7, 0) and body == b"payload"
    s = recordio.pack((0, [1.0, 2.5], 9, 1), b"x")
    assert s[:24] == struct.pack("<IfQQ", 2, 0.0, 9, 1)
    assert s[24:32] == np.array([1.0, 2.5], np.float32).tobytes() and s[32:] == b"x"
    header, body = recordio.unpack(s)
    assert header.flag == 2 and header.label.tolist() == [1.0, 2.5] and header.id == 9 and body == b"x"


def test_pack_img_unpack_img_bgr_order():
    img = np.zeros((8, 6, 3), np.uint8)
    img[..., 0] = 200   # blue in BGR
    img[2:4, 1:3, 2] = 90
    s = recordio.pack_img((0, 1.0, 3, 0), img, img_fmt=".png")
    header, png = recordio.unpack(s)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and header.label == 1.0
    header, out = recordio.unpack_img(s)
    np.testing.assert_array_equal(out, img)
    _, gray = recordio.unpack_img(s, iscolor=0)
    assert gray.shape == (8, 6) and abs(int(gray[0, 0]) - round(0.114 * 200)) <= 1
    _, jpg = recordio.unpack_img(recordio.pack_img((0, 0, 0, 0), img, quality=100))
    assert jpg.shape == (8, 6, 3) and np.abs(jpg.astype(int) - img).max() < 40 and jpg[0, 0, 0] > 150
    _, g = recordio.unpack_img(recordio.pack_img((0, 0, 0, 0), img[..., 0], img_fmt=".png"))
    np.testing.assert_array_equal(g, img[..., 0])
    with pytest.raises(MXNetError, match="img_fmt"):
        recordio.pack_img((0, 0, 0, 0), img, img_fmt=".bmpx")
