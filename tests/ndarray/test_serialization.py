"""MXNet's binary NDArray format: nd.save / nd.load / nd.load_frombuffer.

Reference data: the .params files MXNet 1.9.1 wrote for the reference models (tests/shared_data.py)
and the npz of the mlp's initial weights written by numpy from the same run. Expected bytes
in the format tests are assembled here with `struct`, independently of the code under test.
"""
from __future__ import annotations

import os
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import symjit as mx
from symjit.base import MXNetError

from shared_data import model_path

#: the reference models' weights as MXNet 1.9.1 saved them
PARAMS = ["lenet-0000.params", "mlp-0000.params", "mobilenet1.0-0000.params", "resnet18_v1-0000.params"]

V1, V2, V3 = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
FLAGS = {"float32": 0, "float64": 1, "float16": 2, "uint8": 3, "int32": 4, "int8": 5, "int64": 6,
         "bool": 7}


def v2_array(a: np.ndarray, dev_type: int = 1, dev_id: int = 0, stype: int = 0) -> bytes:
    """One dense array in MXNet's V2 layout, assembled by hand."""
    return (struct.pack("<Iii", V2, stype, a.ndim) + struct.pack(f"<{a.ndim}q", *a.shape)
            + struct.pack("<iii", dev_type, dev_id, FLAGS[a.dtype.name])
            + np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes())


def list_file(arrays: list[bytes], names: list[str] | None = None) -> bytes:
    out = struct.pack("<QQQ", 0x112, 0, len(arrays)) + b"".join(arrays)
    names = names or []
    out += struct.pack("<Q", len(names))
    for n in names:
        raw = n.encode()
        out += struct.pack("<Q", len(raw)) + raw
    return out


# ------------------------------------------------------------------------------------------
# Real MXNet files
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", PARAMS)
def test_shared_params_load_as_dict(name):
    d = mx.nd.load(str(model_path(name)))
    assert isinstance(d, dict) and d
    for key, arr in d.items():
        assert key.startswith(("arg:", "aux:")), key
        assert isinstance(arr, mx.nd.NDArray)
        assert arr.dtype == np.float32
        assert arr.context == mx.cpu(0)
        assert all(dim > 0 for dim in arr.shape)
        assert np.all(np.isfinite(arr.asnumpy()))


@pytest.mark.parametrize("name", PARAMS)
def test_shared_params_resave_byte_identical(name, tmp_path):
    path = model_path(name)
    out = tmp_path / "resaved.params"
    mx.nd.save(str(out), mx.nd.load(str(path)))
    assert out.read_bytes() == path.read_bytes()


def test_resnet_shapes():
    d = mx.nd.load(str(model_path("resnet18_v1-0000.params")))
    assert d["arg:resnetv10_conv0_weight"].shape == (64, 3, 7, 7)
    assert d["arg:resnetv10_dense0_weight"].shape == (1000, 512)
    assert d["aux:resnetv10_batchnorm0_running_mean"].shape == (64,)
    assert sum(k.startswith("aux:") for k in d) > 0


def test_lenet_shapes_and_order():
    d = mx.nd.load(str(model_path("lenet-0000.params")))
    assert list(d)[:2] == ["arg:lenet_conv0_weight", "arg:lenet_conv0_bias"]
    assert d["arg:lenet_conv0_weight"].shape == (16, 1, 5, 5)
    assert d["arg:lenet_dense0_weight"].shape == (64, 1568)
    # first float of the file (offset 0x50 in a hexdump) is 6a2a45bd
    assert d["arg:lenet_conv0_weight"].asnumpy().reshape(-1)[0] == np.frombuffer(
        bytes.fromhex("6a2a45bd"), "<f4")[0]


def test_mlp_values_match_numpy_reference():
    """The mlp's .params hold its initial weights, which MXNet's run also wrote to an npz."""
    d = mx.nd.load(str(model_path("mlp-0000.params")))
    ref = np.load(model_path("mlp-train-reference.npz"))
    for key, arr in d.items():
        np.testing.assert_array_equal(arr.asnumpy(), ref["init:" + key.split(":", 1)[1]])


def test_load_frombuffer_of_shared_file():
    raw = (model_path("lenet-0000.params")).read_bytes()
    a = mx.nd.load_frombuffer(raw)
    b = mx.nd.load(str(model_path("lenet-0000.params")))
    assert list(a) == list(b)
    for k in a:
        np.testing.assert_array_equal(a[k].asnumpy(), b[k].asnumpy())


# ------------------------------------------------------------------------------------------
# Format and round trips
# ------------------------------------------------------------------------------------------

def _sample(dtype: str, shape=(2, 3)) -> np.ndarray:
    rng = np.random.default_rng(7)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", list(FLAGS))
def test_save_writes_mxnet_v2_bytes(dtype, tmp_path):
    a = _sample(dtype, (3, 2, 1))
    mx.nd.save(str(tmp_path / "f"), [mx.nd.array(a, dtype=dtype)])
    assert (tmp_path / "f").read_bytes() == list_file([v2_array(a)])


@pytest.mark.parametrize("dtype", list(FLAGS))
def test_round_trip_list_and_dict(dtype, tmp_path):
    a, b = _sample(dtype, (2, 3)), _sample(dtype, (5,))
    xs = [mx.nd.array(a, dtype=dtype), mx.nd.array(b, dtype=dtype)]
    mx.nd.save(str(tmp_path / "list"), xs)
    mx.nd.save(str(tmp_path / "dict"), {"a": xs[0], "b": xs[1]})
    got_list = mx.nd.load(str(tmp_path / "list"))
    got_dict = mx.nd.load(str(tmp_path / "dict"))
    assert isinstance(got_list, list) and len(got_list) == 2
    assert isinstance(got_dict, dict) and list(got_dict) == ["a", "b"]
    for got, want in [(got_list[0], a), (got_list[1], b), (got_dict["a"], a), (got_dict["b"], b)]:
        assert got.dtype == np.dtype(dtype).type
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.asnumpy(), want)


def test_dict_file_bytes_include_names(tmp_path):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((1, 4), np.float32)
    mx.nd.save(str(tmp_path / "d"), {"x": mx.nd.array(a), "y": mx.nd.array(b)})
    assert (tmp_path / "d").read_bytes() == list_file([v2_array(a), v2_array(b)], ["x", "y"])


def test_single_array_saves_as_list(tmp_path):
    mx.nd.save(str(tmp_path / "one"), mx.nd.ones((2, 2)))
    got = mx.nd.load(str(tmp_path / "one"))
    assert isinstance(got, list) and len(got) == 1
    np.testing.assert_array_equal(got[0].asnumpy(), np.ones((2, 2), np.float32))


def test_empty_list_and_dict(tmp_path):
    mx.nd.save(str(tmp_path / "l"), [])
    mx.nd.save(str(tmp_path / "d"), {})
    assert mx.nd.load(str(tmp_path / "l")) == []
    assert mx.nd.load(str(tmp_path / "d")) == []  # MXNet cannot tell an empty dict from a list


def test_unicode_names_and_pathlike(tmp_path):
    x = mx.nd.array([1.5, -2.0])
    mx.nd.save(tmp_path / "u", {"arg:wéight_日本": x})
    got = mx.nd.load(tmp_path / "u")
    assert list(got) == ["arg:wéight_日本"]
    np.testing.assert_array_equal(got["arg:wéight_日本"].asnumpy(), [1.5, -2.0])


def test_saved_context_is_recorded(tmp_path):
    x = mx.nd.array([1.0, 2.0], ctx=mx.cpu(3))
    mx.nd.save(str(tmp_path / "c"), [x])
    raw = (tmp_path / "c").read_bytes()
    assert raw == list_file([v2_array(np.array([1.0, 2.0], np.float32), dev_type=1, dev_id=3)])
    assert mx.nd.load(str(tmp_path / "c"))[0].context == mx.cpu(0)  # loads to cpu(0) as MXNet


def test_zero_size_array_round_trips(tmp_path):
    x = mx.nd.array(np.zeros((0, 3), np.float32))   # (nd.zeros refuses 0 dims outside np_shape)
    mx.nd.save(str(tmp_path / "z"), [x])
    got = mx.nd.load(str(tmp_path / "z"))[0]
    assert got.shape == (0, 3) and got.dtype == np.float32


def test_load_frombuffer_forms():
    a = np.array([[1, 2], [3, 4]], np.int32)
    raw = list_file([v2_array(a)], ["k"])
    for buf in (raw, bytearray(raw), memoryview(raw), raw.decode("latin-1")):
        got = mx.nd.load_frombuffer(buf)
        np.testing.assert_array_equal(got["k"].asnumpy(), a)
    with pytest.raises(TypeError):
        mx.nd.load_frombuffer(12)


def test_loaded_arrays_are_writable_copies():
    raw = list_file([v2_array(np.zeros(3, np.float32))])
    x = mx.nd.load_frombuffer(raw)[0]
    x[:] = 5
    np.testing.assert_array_equal(x.asnumpy(), [5, 5, 5])


def test_loaded_file_arrays_own_their_memory(tmp_path):
    """A file is read through a mapping; every loaded array is a writable copy that neither
    changes when the file is rewritten afterwards nor keeps the mapping alive."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.arange(5, dtype=np.int64)
    path = tmp_path / "two.params"
    path.write_bytes(list_file([v2_array(a), v2_array(b)], ["a", "b"]))
    loaded = mx.nd.load(str(path))
    path.write_bytes(list_file([v2_array(a * 0), v2_array(b * 0)], ["a", "b"]))
    os.remove(path)
    for name, want in (("a", a), ("b", b)):
        got = loaded[name]._data
        assert got.flags.owndata and got.flags.writeable and got.flags.aligned
        np.testing.assert_array_equal(got, want)
    loaded["a"][:] = 7
    np.testing.assert_array_equal(loaded["a"].asnumpy(), np.full((3, 4), 7, np.float32))


def test_load_from_a_pipe(tmp_path):
    """A file that cannot be mapped (a FIFO) is read instead."""
    import threading
    fifo = tmp_path / "pipe.params"
    os.mkfifo(fifo)
    raw = list_file([v2_array(np.arange(6, dtype=np.float32))])
    writer = threading.Thread(target=lambda: fifo.write_bytes(raw))
    writer.start()
    try:
        (x,) = mx.nd.load(str(fifo))
    finally:
        writer.join(timeout=10)
    np.testing.assert_array_equal(x.asnumpy(), np.arange(6, dtype=np.float32))


def test_legacy_v1_layout():
    a = np.arange(6, dtype=np.float64).reshape(3, 2)
    arr = (struct.pack("<Ii", V1, 2) + struct.pack("<2q", 3, 2) + struct.pack("<iii", 1, 0, 1)
           + a.tobytes())
    got = mx.nd.load_frombuffer(list_file([arr], ["w"]))
    np.testing.assert_array_equal(got["w"].asnumpy(), a)
    assert got["w"].dtype == np.float64


def test_legacy_pre_v1_layout():
    """Before V1 there was no magic: the first word is ndim and dims are uint32."""
    a = np.arange(4, dtype=np.float32).reshape(2, 2)
    arr = struct.pack("<I", 2) + struct.pack("<2I", 2, 2) + struct.pack("<iii", 1, 0, 0) + a.tobytes()
    got = mx.nd.load_frombuffer(list_file([arr]))
    np.testing.assert_array_equal(got[0].asnumpy(), a)


def test_gpu_context_in_file_loads_on_cpu():
    a = np.ones(2, np.float32)
    got = mx.nd.load_frombuffer(list_file([v2_array(a, dev_type=2, dev_id=1)]))
    assert got[0].context == mx.cpu(0)


def test_bool_bytes_other_than_one_mean_true():
    arr = (struct.pack("<Iii", V2, 0, 1) + struct.pack("<q", 3) + struct.pack("<iii", 1, 0, 7)
           + bytes([0, 1, 7]))
    got = mx.nd.load_frombuffer(list_file([arr]))[0].asnumpy()
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got.view(np.uint8), [0, 1, 1])


# ------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------

def _small_file() -> bytes:
    return list_file([v2_array(np.arange(6, dtype=np.float32).reshape(2, 3)),
                      v2_array(np.array([1, 2], np.int64))], ["a", "bb"])


def test_truncation_at_every_offset_raises():
    raw = _small_file()
    for cut in range(len(raw)):
        with pytest.raises(MXNetError, match="Invalid NDArray file format"):
            mx.nd.load_frombuffer(raw[:cut])


def test_wrong_list_magic():
    raw = bytearray(_small_file())
    raw[0] ^= 0xFF
    with pytest.raises(MXNetError, match="bad magic"):
        mx.nd.load_frombuffer(bytes(raw))


@pytest.mark.parametrize("name", ["resnet18_v1.onnx", "mlp-symbol.json", "mlp-input.npy"])
def test_other_files_are_rejected(name):
    with pytest.raises(MXNetError, match="bad magic"):
        mx.nd.load(str(model_path(name)))


def test_short_file_is_rejected(tmp_path):
    (tmp_path / "s").write_bytes(b"\x12\x01")
    with pytest.raises(MXNetError, match="truncated"):
        mx.nd.load(str(tmp_path / "s"))


def test_wrong_array_magic_is_rejected_without_allocating():
    raw = bytearray(_small_file())
    raw[24:28] = struct.pack("<I", 0x7FFFFFF0)  # read as a pre-V1 ndim: absurd
    with pytest.raises(MXNetError, match="implausible ndim"):
        mx.nd.load_frombuffer(bytes(raw))


@pytest.mark.parametrize("count", [2**63, 2**40, 1000])
def test_absurd_array_count(count):
    raw = struct.pack("<QQQ", 0x112, 0, count) + v2_array(np.zeros(1, np.float32))
    with pytest.raises(MXNetError, match="Invalid NDArray file format"):
        mx.nd.load_frombuffer(raw)


def test_absurd_dims_do_not_allocate():
    arr = struct.pack("<Iii", V2, 0, 3) + struct.pack("<3q", 2**40, 2**40, 2**40) + struct.pack("<iii", 1, 0, 0)
    with pytest.raises(MXNetError, match="truncated"):
        mx.nd.load_frombuffer(list_file([arr]))


@pytest.mark.parametrize("ndim,match", [(-1, "unknown shape"), (1000, "implausible ndim"),
                                        (0, "empty")])
def test_bad_ndim(ndim, match):
    arr = struct.pack("<Iii", V2, 0, ndim) + b"\0" * 64
    with pytest.raises(MXNetError, match=match):
        mx.nd.load_frombuffer(list_file([arr]))


def test_negative_dim():
    arr = struct.pack("<Iii", V2, 0, 2) + struct.pack("<2q", 2, -3) + struct.pack("<iii", 1, 0, 0)
    with pytest.raises(MXNetError, match="negative dimension"):
        mx.nd.load_frombuffer(list_file([arr + b"\0" * 24]))


@pytest.mark.parametrize("flag,match", [(99, "unknown dtype flag 99"), (-1, "unknown dtype flag"),
                                        (12, "bfloat16")])
def test_bad_dtype_flag(flag, match):
    arr = struct.pack("<Iii", V2, 0, 1) + struct.pack("<q", 2) + struct.pack("<iii", 1, 0, flag) + b"\0" * 16
    with pytest.raises(MXNetError, match=match):
        mx.nd.load_frombuffer(list_file([arr]))


@pytest.mark.parametrize("stype,match", [(1, "row_sparse"), (2, "csr"), (5, "invalid storage type"),
                                         (-1, "invalid storage type")])
def test_sparse_or_bad_storage_type(stype, match):
    arr = v2_array(np.zeros(2, np.float32), stype=stype)
    with pytest.raises(MXNetError, match=match):
        mx.nd.load_frombuffer(list_file([arr]))


def test_np_shape_v3_magic_is_refused():
    arr = struct.pack("<Ii", V3, 0) + v2_array(np.zeros(2, np.float32))[8:]
    with pytest.raises(MXNetError, match="numpy shape semantics"):
        mx.nd.load_frombuffer(list_file([arr]))


def test_name_count_mismatch_and_bad_names():
    a = v2_array(np.zeros(2, np.float32))
    with pytest.raises(MXNetError, match="names for 2 arrays"):
        mx.nd.load_frombuffer(list_file([a, a], ["only_one"]))
    bad = struct.pack("<QQQ", 0x112, 0, 1) + a + struct.pack("<QQ", 1, 2) + b"\xff\xfe"
    with pytest.raises(MXNetError, match="UTF-8"):
        mx.nd.load_frombuffer(bad)
    huge = struct.pack("<QQQ", 0x112, 0, 1) + a + struct.pack("<QQ", 1, 2**62)
    with pytest.raises(MXNetError, match="truncated"):
        mx.nd.load_frombuffer(huge)


def test_missing_and_unreadable_paths(tmp_path):
    with pytest.raises(MXNetError, match="cannot open"):
        mx.nd.load(str(tmp_path / "does_not_exist.params"))
    with pytest.raises(MXNetError, match="cannot open"):
        mx.nd.load(str(tmp_path))
    with pytest.raises(MXNetError, match="cannot write"):
        mx.nd.save(str(tmp_path / "no_such_dir" / "f.params"), [mx.nd.ones(1)])
    with pytest.raises(TypeError, match="fname required to be a string"):
        mx.nd.load(123)


def test_save_rejects_bad_data(tmp_path):
    f = str(tmp_path / "x")
    with pytest.raises(TypeError, match="save only accept"):
        mx.nd.save(f, {1: mx.nd.ones(1)})
    with pytest.raises(TypeError, match="save only accept"):
        mx.nd.save(f, {"a": np.ones(1)})
    with pytest.raises(TypeError, match="save only accept"):
        mx.nd.save(f, [mx.nd.ones(1), 3])
    with pytest.raises(ValueError, match="data needs to either be"):
        mx.nd.save(f, (mx.nd.ones(1),))
    assert not os.path.exists(f)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_random_bytes_only_raise_mxneterror(raw):
    try:
        mx.nd.load_frombuffer(raw)
    except MXNetError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0), st.integers(min_value=0, max_value=255))
def test_single_byte_corruption_loads_or_raises_mxneterror(pos, value):
    raw = bytearray(_small_file())
    raw[pos % len(raw)] = value
    try:
        out = mx.nd.load_frombuffer(bytes(raw))
    except MXNetError:
        return
    assert isinstance(out, (list, dict))
