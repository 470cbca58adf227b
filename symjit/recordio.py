"""symjit.recordio (`mx.recordio`): MXNet's RecordIO files, byte for byte.

A file is a sequence of records. Each record is written as
`magic (uint32 0xced7230a) | lrec (uint32) | payload | zero padding to a multiple of 4 bytes`,
little-endian, where `lrec = cflag << 29 | length` (length < 2**29). A payload containing the
magic number at a 4-byte-aligned offset is split there into parts (the magic itself is dropped
and restored on reading): cflag 0 is a whole record, 1 the first part, 2 a middle part, 3 the
last part (dmlc-core's RecordIOWriter/RecordIOReader). An index file (`.idx`) is text, one
`key<TAB>byte offset` line per record written with `write_idx`.

`pack`/`unpack` prepend MXNet's image-record header `IRHeader(flag, label, id, id2)` (struct
'IfQQ', 24 bytes; a non-scalar label is stored after it as `flag` float32 values).
`pack_img`/`unpack_img` encode and decode images with OpenCV, as MXNet does: colour arrays are
HxWx3 uint8 in BGR order, `iscolor` -1 keeps the file's channels, 0 decodes to grayscale HxW,
1 to BGR.
"""
from __future__ import annotations

import numbers
import os
import struct
import threading
from collections import namedtuple
from multiprocessing import current_process

import numpy as np

from .base import MXNetError

__all__ = ["MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "pack_img", "unpack_img",
           "RecordIOError"]

#: the number opening every record (and every part of a split record)
MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", MAGIC)
_MAX_LENGTH = 1 << 29


class RecordIOError(MXNetError, ValueError):
    """A malformed RecordIO file or a record that cannot be written."""


class RecordIOAssertionError(MXNetError, AssertionError):
    """An operation the handle's mode does not allow (MXNet asserts here)."""


def encode_lrec(cflag: int, length: int) -> int:
    """The length/flag word of a record part."""
    return (cflag << 29) | length


def decode_lrec(lrec: int) -> tuple[int, int]:
    """(cflag, length) of a length/flag word."""
    return lrec >> 29, lrec & (_MAX_LENGTH - 1)


def _padding(length: int) -> int:
    return (-length) % 4


def encode_record(buf: bytes) -> bytes:
    """The bytes dmlc-core's RecordIOWriter writes for the payload `buf`."""
    n = len(buf)
    if n >= _MAX_LENGTH:
        raise RecordIOError(f"RecordIO: records must be shorter than 2**29 bytes, got {n}")
    out = []
    start = 0
    for i in range(0, n - n % 4, 4):
        if buf[i:i + 4] == _MAGIC_BYTES:
            out.append(struct.pack("<II", MAGIC, encode_lrec(1 if start == 0 else 2, i - start)))
            out.append(buf[start:i])
            start = i + 4
    out.append(struct.pack("<II", MAGIC, encode_lrec(3 if start else 0, n - start)))
    out.append(buf[start:])
    out.append(b"\0" * _padding(n))
    return b"".join(out)


def _read_record(f, uri) -> bytes | None:
    """The next record of the binary file `f` (None at its end), parts joined with the magic."""
    parts = []
    while True:
        pos = f.tell()
        head = f.read(8)
        if not head and not parts:
            return None
        if len(head) != 8:
            raise RecordIOError(f"Invalid RecordIO File {uri}: truncated record header at byte {pos}")
        magic, lrec = struct.unpack("<II", head)
        if magic != MAGIC:
            raise RecordIOError(f"Invalid RecordIO File {uri}: expected magic 0x{MAGIC:08x} at byte {pos}, "
                                f"got 0x{magic:08x}")
        cflag, length = decode_lrec(lrec)
        upper = length + _padding(length)
        data = f.read(upper)
        if len(data) != upper:
            raise RecordIOError(f"Invalid RecordIO File {uri}: record at byte {pos} needs {upper} bytes, "
                                f"{len(data)} left")
        parts.append(data[:length])
        if cflag in (0, 3):
            return _MAGIC_BYTES.join(parts)


class MXRecordIO:
    """Reads (`flag='r'`) or writes (`flag='w'`) a RecordIO file sequentially.

    A handle belongs to the process that opened it: a reader used in another process (e.g. a
    forked DataLoader worker) reopens the file; a writer refuses (RuntimeError, as MXNet)."""

    def __init__(self, uri, flag):
        self.uri = os.fspath(uri)
        self.flag = flag
        self._lock = threading.Lock()   # makes read_idx's seek + read one step across threads
        self.handle = None
        self.pid = None
        self.is_open = False
        self.writable = None
        self.open()

    def open(self):
        """Open the file (truncating it for writing)."""
        if self.flag == "w":
            self.handle = open(self.uri, "wb")
            self.writable = True
        elif self.flag == "r":
            try:
                self.handle = open(self.uri, "rb")
            except OSError as err:
                raise MXNetError(f"MXRecordIO: cannot open {self.uri!r} for reading: {err}") from err
            self.writable = False
        else:
            raise ValueError("Invalid flag %s" % self.flag)
        self.pid = current_process().pid
        self.is_open = True

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getstate__(self):
        """Pickled without the file handle; reopened (a reader at its start) when unpickled."""
        is_open = self.is_open
        self.close()
        d = dict(self.__dict__)
        d["is_open"] = is_open
        d["handle"] = None
        d.pop("_lock", None)
        return d

    def __setstate__(self, d):
        self.__dict__ = d
        self._lock = threading.Lock()
        is_open = d["is_open"]
        self.is_open = False
        if is_open:
            self.open()

    def _check_pid(self, allow_reset=False):
        if self.pid != current_process().pid:
            if allow_reset:
                self.reset()
            else:
                raise RuntimeError("Forbidden operation in multiple processes")

    def close(self):
        """Close the file (flushing what was written)."""
        if not getattr(self, "is_open", False):
            return
        self.handle.close()
        self.handle = None
        self.is_open = False
        self.pid = None

    def reset(self):
        """Close and reopen: a reader starts again at the first record; a writer truncates."""
        self.close()
        self.open()

    def _check_mode(self, writing: bool, what: str):
        if not self.is_open:
            raise MXNetError(f"MXRecordIO.{what}: {self.uri!r} is closed")
        if self.writable != writing:
            raise RecordIOAssertionError(f"MXRecordIO.{what}: {self.uri!r} was opened with flag "
                                         f"'{self.flag}'")

    def write(self, buf):
        """Append the record `buf` (bytes)."""
        self._check_mode(True, "write")
        self._check_pid(allow_reset=False)
        if not isinstance(buf, (bytes, bytearray, memoryview)):
            raise MXNetError(f"MXRecordIO.write: buf must be bytes, got {type(buf).__name__}")
        self.handle.write(encode_record(bytes(buf)))

    def read(self):
        """The next record as bytes, or None after the last one."""
        self._check_mode(False, "read")
        self._check_pid(allow_reset=True)
        return _read_record(self.handle, self.uri)


class MXIndexedRecordIO(MXRecordIO):
    """A RecordIO file with an index file (`key\\toffset` lines) for random access by key;
    `key_type` converts the keys read from the index (int by default)."""

    def __init__(self, idx_path, uri, flag, key_type=int):
        self.idx_path = os.fspath(idx_path)
        self.idx = {}
        self.keys = []
        self.key_type = key_type
        self.fidx = None
        super().__init__(uri, flag)

    def open(self):
        super().open()
        self.idx = {}
        self.keys = []
        self.fidx = open(self.idx_path, self.flag)
        if not self.writable:
            for lineno, line in enumerate(iter(self.fidx.readline, ""), 1):
                fields = line.strip().split("\t")
                if len(fields) < 2:
                    raise RecordIOError(f"MXIndexedRecordIO: {self.idx_path}:{lineno}: expected "
                                        f"'key<TAB>offset', got {line.strip()!r}")
                key = self.key_type(fields[0])
                self.idx[key] = int(fields[1])
                self.keys.append(key)

    def close(self):
        if not getattr(self, "is_open", False):
            return
        super().close()
        self.fidx.close()

    def __getstate__(self):
        d = super().__getstate__()
        d["fidx"] = None
        return d

    def seek(self, idx):
        """Position the reader at the record with key `idx`."""
        self._check_mode(False, "seek")
        self._check_pid(allow_reset=True)
        if idx not in self.idx:
            raise KeyError(idx)
        self.handle.seek(self.idx[idx])

    def tell(self):
        """The byte offset the next record will be written at."""
        self._check_mode(True, "tell")
        return self.handle.tell()

    def read_idx(self, idx):
        """The record with key `idx` (safe to call from several threads at once)."""
        with self._lock:
            self.seek(idx)
            return self.read()

    def write_idx(self, idx, buf):
        """Append the record `buf` under key `idx` (also written to the index file)."""
        key = self.key_type(idx)
        pos = self.tell()
        self.write(buf)
        self.fidx.write("%s\t%d\n" % (str(key), pos))
        self.idx[key] = pos
        self.keys.append(key)


IRHeader = namedtuple("HEADER", ["flag", "label", "id", "id2"])
IRHeader.__doc__ = """Image-record header: `flag` (0, or the number of float32 labels stored
after the header), `label` (a number, or an array of `flag` labels), `id`, `id2` (uint64)."""
_IR_FORMAT = "IfQQ"
_IR_SIZE = struct.calcsize(_IR_FORMAT)


def pack(header, s):
    """The record bytes of `header` (an IRHeader or a 4-tuple) followed by the payload `s`."""
    header = IRHeader(*header)
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
    else:
        label = np.asarray(header.label, dtype=np.float32)
        header = header._replace(flag=label.size, label=0)
        s = label.tobytes() + s
    return struct.pack(_IR_FORMAT, *header) + s


def unpack(s):
    """(IRHeader, payload) of a record made by `pack`; a multi-label header's label is a
    float32 array."""
    if len(s) < _IR_SIZE:
        raise RecordIOError(f"unpack: a packed record has at least {_IR_SIZE} bytes, got {len(s)}")
    header = IRHeader(*struct.unpack(_IR_FORMAT, s[:_IR_SIZE]))
    s = s[_IR_SIZE:]
    if header.flag > 0:
        header = header._replace(label=np.frombuffer(s, np.float32, header.flag))
        s = s[header.flag * 4:]
    return header, s


def _opencv():
    from .ops.image_kernels import opencv
    return opencv()


def unpack_img(s, iscolor=-1):
    """(IRHeader, image) of a record made by `pack_img`: the image as a uint8 numpy array, BGR
    channel order (OpenCV's, as MXNet); `iscolor` -1 keeps the file's channels, 0 grayscale
    (HxW), 1 colour (HxWx3)."""
    header, s = unpack(s)
    cv2 = _opencv()
    img = cv2.imdecode(np.frombuffer(s, dtype=np.uint8), int(iscolor))
    if img is None:
        raise MXNetError("unpack_img: the record's payload is not a decodable image")
    return header, img


def pack_img(header, img, quality=95, img_fmt=".jpg"):
    """`pack(header, encoded image)`: `img` is a uint8 HxW or HxWxC (BGR) array, encoded by
    OpenCV in the format of the extension `img_fmt` (JPEG: `quality` 0-100; PNG: `quality` is
    the compression level, clamped to 0-9)."""
    cv2 = _opencv()
    img = np.asarray(img)
    if img.dtype != np.uint8:
        raise MXNetError(f"pack_img: img must be uint8, got {img.dtype}")
    if img.ndim not in (2, 3) or (img.ndim == 3 and img.shape[2] not in (1, 3, 4)):
        raise MXNetError(f"pack_img: img must be HxW, HxWx1, HxWx3 or HxWx4, got shape {img.shape}")
    fmt = img_fmt.upper()
    if fmt in (".JPG", ".JPEG"):
        params = [cv2.IMWRITE_JPEG_QUALITY, int(quality)]
    elif fmt == ".PNG":
        params = [cv2.IMWRITE_PNG_COMPRESSION, min(max(int(quality), 0), 9)]
    else:
        params = []
    try:
        ok, buf = cv2.imencode(img_fmt, np.ascontiguousarray(img), params)
    except cv2.error as err:
        raise MXNetError(f"pack_img: cannot encode as img_fmt {img_fmt!r}: {err}") from None
    if not ok:
        raise MXNetError(f"pack_img: failed to encode the image as {img_fmt!r}")
    return pack(header, buf.tobytes())
