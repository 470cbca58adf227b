"""MXNet's binary NDArray file format (`.params`): `save`, `load`, `load_frombuffer`.

The layout is the one MXNet 1.x writes with `mx.nd.save` (all integers little-endian):

    file    := u64 0x112 (list magic) | u64 0 (reserved)
               | u64 n | array * n
               | u64 m | name * m              (m == 0 for a list, m == n for a dict)
    name    := u64 len | len bytes (UTF-8)
    array   := u32 0xF993FAC9 (V2 magic) | i32 stype (0 = dense)
               | shape | context | i32 type_flag | data
    shape   := i32 ndim | i64 dim * ndim
    context := i32 dev_type (1 cpu, 2 gpu, 3 cpu_pinned, 5 cpu_shared) | i32 dev_id
    data    := prod(shape) * itemsize raw bytes, C order

`save` writes exactly this (V2, dense), byte for byte as MXNet 1.9.1 does; with numpy shape
semantics on (`mx.np_shape()`) it writes V3 arrays (magic 0xF993FACA, same layout, ndim 0 for
a scalar), which load only with them on, and a V2 array with a 0 (legacy: unknown) dimension
does not load with them on, as in MXNet. `load`
also reads what MXNet's loader reads: V1 arrays (magic 0xF993FAC8, no storage
type) and pre-V1 arrays (no magic; the first u32 is ndim and dims are u32).

Invariants: a malformed input never crashes, hangs or allocates more than the
input's own size: every count, ndim and byte size is checked against the bytes
that remain before anything is allocated, and every problem raises MXNetError
naming what was wrong and where (byte offset). Loaded arrays live on cpu(0), as
in a CPU build of MXNet.
"""
from __future__ import annotations

import mmap
import os
import struct
from typing import Mapping, Sequence, Union

import numpy as np

from ..base import MXNetError
from ..util import is_np_shape
from ..context import Context, cpu
from .ndarray import NDArray

__all__ = ["save", "load", "load_frombuffer"]

#: header of a list of NDArrays (`kMXAPINDArrayListMagic` in MXNet)
LIST_MAGIC = 0x112
#: per-array magics
NDARRAY_V1_MAGIC = 0xF993FAC8  # int64 shape, no storage type
NDARRAY_V2_MAGIC = 0xF993FAC9  # storage type added; what MXNet 1.x writes
NDARRAY_V3_MAGIC = 0xF993FACA  # numpy shape semantics (written under `npx.set_np()`)

#: mshadow type flags -> numpy dtypes
TYPE_FLAGS: dict[int, np.dtype] = {
    0: np.dtype("<f4"), 1: np.dtype("<f8"), 2: np.dtype("<f2"), 3: np.dtype("u1"),
    4: np.dtype("<i4"), 5: np.dtype("i1"), 6: np.dtype("<i8"), 7: np.dtype("?"),
    8: np.dtype("<i2"), 9: np.dtype("<u2"), 10: np.dtype("<u4"), 11: np.dtype("<u8"),
}
_FLAG_OF_DTYPE: dict[str, int] = {dt.name: flag for flag, dt in TYPE_FLAGS.items()}
_UNSUPPORTED_FLAGS = {12: "bfloat16"}

#: storage types (NDArrayStorageType)
_STYPE_DEFAULT = 0
_SPARSE_STYPES = {1: "row_sparse", 2: "csr"}

_MAX_NDIM = 32  # numpy's own limit is 64; no MXNet array has more than a handful of axes
_MAX_ELEMENTS = 2 ** 48  # far beyond any real array; keeps numpy's size arithmetic from overflowing

ArrayData = Union[NDArray, Sequence[NDArray], Mapping[str, NDArray]]


# ----------------------------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------------------------

class _Reader:
    """Bounds-checked little-endian reads over an immutable byte buffer."""

    def __init__(self, buf: bytes, source: str):
        self.buf = memoryview(buf).cast("B")
        self.pos = 0
        self.source = source

    @property
    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def fail(self, what: str) -> MXNetError:
        return MXNetError(f"Invalid NDArray file format in {self.source}: {what} (at byte {self.pos})")

    def take(self, n: int, what: str) -> memoryview:
        if n < 0 or n > self.remaining:
            raise self.fail(f"truncated while reading {what}: need {n} bytes, "
                            f"{self.remaining} remain")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str, what: str):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size, what))[0]

    def u32(self, what: str) -> int:
        return self.unpack("<I", what)

    def i32(self, what: str) -> int:
        return self.unpack("<i", what)

    def u64(self, what: str) -> int:
        return self.unpack("<Q", what)


def _read_shape(r: _Reader, dim_fmt: str, ndim: int, what: str) -> tuple:
    """Read `ndim` dims of struct format `dim_fmt`, after checking they fit in the buffer."""
    if ndim < 0:
        raise r.fail(f"{what} has an unknown shape (ndim={ndim})")
    if ndim > _MAX_NDIM:
        raise r.fail(f"{what} has an implausible ndim {ndim} (at most {_MAX_NDIM} supported)")
    size = struct.calcsize(dim_fmt)
    raw = r.take(size * ndim, f"the shape of {what}")
    dims = struct.unpack(f"<{ndim}{dim_fmt}", raw)
    if any(d < 0 for d in dims):
        raise r.fail(f"{what} has an unknown or negative dimension in shape {dims}")
    return tuple(int(d) for d in dims)


def _extent(shape: tuple) -> int:
    """Elements of `shape` with its zero dims counted as 1 (what numpy's size checks see)."""
    n = 1
    for d in shape:
        n *= max(d, 1)
    return n


def _read_body(r: _Reader, shape: tuple, what: str) -> NDArray:
    """Read context, type flag and data of one dense array of the given shape."""
    r.i32(f"the device type of {what}")
    r.i32(f"the device id of {what}")
    flag = r.i32(f"the dtype flag of {what}")
    if flag in _UNSUPPORTED_FLAGS:
        raise r.fail(f"{what} has dtype {_UNSUPPORTED_FLAGS[flag]} (type flag {flag}), "
                     "which symjit cannot hold")
    if flag not in TYPE_FLAGS:
        raise r.fail(f"{what} has an unknown dtype flag {flag}; expected one of "
                     + ", ".join(f"{k} ({v.name})" for k, v in TYPE_FLAGS.items()))
    dtype = TYPE_FLAGS[flag]
    count = 1
    for d in shape:
        count *= d
    nbytes = count * dtype.itemsize  # Python int: no overflow; checked before allocating
    if count == 0 and _extent(shape) > _MAX_ELEMENTS:  # no data bytes to bound a zero-size shape
        raise r.fail(f"{what} has an implausible shape {shape} (more than {_MAX_ELEMENTS} elements "
                     "besides its zero dimension)")
    raw = r.take(nbytes, f"the data of {what} (shape {shape}, {dtype.name})")
    data = np.frombuffer(raw, dtype=dtype, count=count).reshape(shape)
    if dtype.kind == "b":  # a bool byte other than 0/1 still means True
        data = np.frombuffer(raw, dtype=np.uint8, count=count).reshape(shape) != 0
    return NDArray(np.array(data, dtype=dtype.newbyteorder("=")), cpu(0))


def _read_array(r: _Reader, index: int) -> NDArray:
    """One array in any layout MXNet's `NDArray::Load` accepts (V2, V1, pre-V1)."""
    what = f"array {index}"
    magic = r.u32(f"the magic number of {what}")
    np_shape = is_np_shape()
    if magic == NDARRAY_V3_MAGIC:
        if not np_shape:
            raise r.fail(f"{what} was saved with numpy shape semantics (magic 0x{magic:08X}); "
                         "load it with them on (mx.np_shape() / mx.util.set_np_shape(True))")
        stype = r.i32(f"the storage type of {what}")
        if stype != _STYPE_DEFAULT:
            raise r.fail(f"{what} has storage type {stype}; only dense ('default') arrays are supported")
        ndim = r.i32(f"the ndim of {what}")
        return _read_body(r, _read_shape(r, "q", ndim, what), what)   # ndim 0: a scalar
    if magic == NDARRAY_V2_MAGIC:
        stype = r.i32(f"the storage type of {what}")
        if stype in _SPARSE_STYPES:
            raise r.fail(f"{what} has sparse storage type {_SPARSE_STYPES[stype]!r}; only dense "
                         "('default') arrays are supported")
        if stype != _STYPE_DEFAULT:
            raise r.fail(f"{what} has an invalid storage type {stype}")
        ndim = r.i32(f"the ndim of {what}")
        shape = _read_shape(r, "q", ndim, what)
    elif magic == NDARRAY_V1_MAGIC:
        ndim = r.i32(f"the ndim of {what}")
        shape = _read_shape(r, "q", ndim, what)
    else:
        # pre-V1 layout: no magic; this word is ndim and dims are uint32
        shape = _read_shape(r, "I", magic, what)
    if len(shape) == 0:
        raise r.fail(f"{what} is an empty (uninitialised) NDArray, which MXNet cannot load either")
    if np_shape and 0 in shape:
        raise r.fail(f"{what} was saved without numpy shape semantics and its shape {shape} has "
                     "unknown (0) dimensions; load it with numpy shape semantics off")
    return _read_body(r, shape, what)


def array_to_bytes(arr: NDArray) -> bytes:
    """One array in MXNet's single-array layout (what `NDArray.__getstate__` holds)."""
    return _encode_array(arr)


def array_from_bytes(buf) -> NDArray:
    """The array of `array_to_bytes` output (or MXNet's); it lives on cpu(0) (a GPU-saved
    array loads on the CPU, as MXNet does without GPUs)."""
    r = _Reader(bytes(buf), "an NDArray state")
    arr = _read_array(r, 0)
    if r.remaining:
        raise r.fail(f"{r.remaining} unexpected bytes after the array")
    return arr


def _parse(buf: bytes, source: str) -> list | dict:
    """Decode a whole NDArray-list buffer into a list (no names) or a dict (names)."""
    r = _Reader(buf, source)
    header = r.u64("the file header")
    if header != LIST_MAGIC:
        raise MXNetError(f"Invalid NDArray file format in {source}: bad magic number 0x{header:X} "
                         f"(expected 0x{LIST_MAGIC:X}); not an MXNet NDArray file")
    r.u64("the reserved header field")
    n = r.u64("the number of arrays")
    if n > r.remaining // 4:  # every array takes at least 4 bytes
        raise r.fail(f"implausible number of arrays {n} for {r.remaining} remaining bytes")
    arrays = [_read_array(r, i) for i in range(n)]
    m = r.u64("the number of names")
    if m not in (0, n):
        raise r.fail(f"{m} names for {n} arrays (expected 0 or {n})")
    names = []
    for i in range(m):
        length = r.u64(f"the length of name {i}")
        raw = r.take(length, f"name {i}")
        try:
            names.append(bytes(raw).decode("utf-8"))
        except UnicodeDecodeError:
            raise r.fail(f"name {i} is not valid UTF-8") from None
    if r.remaining:
        raise r.fail(f"{r.remaining} trailing bytes after the last name; the file is corrupt "
                     "or not a single NDArray list")
    if m == 0:
        return arrays
    return dict(zip(names, arrays))


def _check_fname(fname) -> str:
    """A str path (os.PathLike accepted too); anything else is MXNet's TypeError."""
    if isinstance(fname, os.PathLike):
        fname = os.fspath(fname)
    if not isinstance(fname, str):
        raise TypeError("fname required to be a string")
    return fname


def load(fname) -> list | dict:
    """Load the arrays saved by `save` (or by MXNet) from file `fname`.

    Returns a list of NDArrays when the file holds no names, else a dict
    name -> NDArray (file order). Arrays are placed on cpu(0).
    """
    fname = _check_fname(fname)
    try:
        with open(fname, "rb") as f:
            head = f.read(8)
            # reject a file that is not an NDArray list before reading all of it
            if len(head) == 8 and struct.unpack("<Q", head)[0] != LIST_MAGIC:
                return _parse(head, repr(fname))
            buf = _map_or_read(f, head)
    except OSError as e:
        raise MXNetError(f"load: cannot open {fname!r}: {e.strerror or e}") from None
    return _parse(buf, repr(fname))


def _map_or_read(f, head: bytes):
    """The whole file's bytes (`head` already read from it): a read-only mapping of a regular
    file (its pages come from the page cache; each array is then copied once, into its own
    writable array), else the bytes read."""
    try:
        if os.fstat(f.fileno()).st_size > len(head):
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):   # not a regular, mappable file (a pipe, a device)
        pass
    return head + f.read()


def load_frombuffer(buf) -> list | dict:
    """Load arrays from the bytes of a saved file (see `load`).

    `buf` is bytes-like; a str is taken as one byte per character (latin-1), as a
    Python 2 byte string was.
    """
    if isinstance(buf, str):
        try:
            buf = buf.encode("latin-1")
        except UnicodeEncodeError:
            raise TypeError("buf required to be a string or bytes; this str holds characters "
                            "beyond one byte each") from None
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise TypeError("buf required to be a string or bytes")
    return _parse(bytes(buf), "buffer")


# ----------------------------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------------------------

def _encode_array(arr: NDArray) -> bytes:
    """One array in V2 layout, as MXNet 1.9.1 writes a dense NDArray."""
    data = arr._data
    name = data.dtype.name
    if name not in _FLAG_OF_DTYPE:
        raise MXNetError(f"save: dtype {name} cannot be stored in an NDArray file")
    flag = _FLAG_OF_DTYPE[name]
    np_shape = is_np_shape()   # V3 (numpy shapes: 0-d and zero-size dims are real) or legacy V2
    shape = data.shape if data.ndim > 0 or np_shape else (1,)
    ctx: Context = arr.context
    magic = NDARRAY_V3_MAGIC if np_shape else NDARRAY_V2_MAGIC
    head = struct.pack("<Iii", magic, _STYPE_DEFAULT, len(shape))
    head += struct.pack(f"<{len(shape)}q", *shape)
    head += struct.pack("<iii", ctx.device_typeid, ctx.device_id, flag)
    body = np.ascontiguousarray(data, dtype=TYPE_FLAGS[flag]).tobytes()
    return head + body


def _normalise(data: ArrayData) -> tuple[list, list | None]:
    """MXNet's accepted forms -> (arrays, names or None), with MXNet's exceptions."""
    if isinstance(data, NDArray):
        return [data], None
    if isinstance(data, dict):
        if any(not isinstance(k, str) for k in data.keys()) or \
                any(not isinstance(v, NDArray) for v in data.values()):
            raise TypeError("save only accept dict str->NDArray or list of NDArray")
        return list(data.values()), list(data.keys())
    if isinstance(data, list):
        if any(not isinstance(v, NDArray) for v in data):
            raise TypeError("save only accept dict str->NDArray or list of NDArray")
        return list(data), None
    raise ValueError("data needs to either be a NDArray, dict of str, NDArray pairs "
                     "or a list of NDarrays.")


def dumps(data: ArrayData) -> bytes:
    """The bytes `save` writes for `data` (an NDArray, a list of them, or a dict str -> NDArray)."""
    arrays, names = _normalise(data)
    parts = [struct.pack("<QQQ", LIST_MAGIC, 0, len(arrays))]
    parts.extend(_encode_array(a) for a in arrays)
    names = names or []
    parts.append(struct.pack("<Q", len(names)))
    for name in names:
        raw = name.encode("utf-8")
        parts.append(struct.pack("<Q", len(raw)) + raw)
    return b"".join(parts)


def save(fname, data: ArrayData) -> None:
    """Save an NDArray, a list of NDArrays or a dict str -> NDArray to file `fname`.

    A list (or single array) is written without names and loads back as a list;
    a dict loads back as a dict. The bytes are MXNet 1.x's format (see module doc).
    """
    fname = _check_fname(fname)
    payload = dumps(data)
    try:
        with open(fname, "wb") as f:
            f.write(payload)
    except OSError as e:
        raise MXNetError(f"save: cannot write {fname!r}: {e.strerror or e}") from None
