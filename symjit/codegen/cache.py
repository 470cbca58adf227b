"""The on-disk cache of compiled code: object files keyed by what they were compiled from.

Directory: `SYMJIT_CACHE_DIR`, else `$XDG_CACHE_HOME/symjit`, else `~/.cache/symjit`.
Each entry is one file `<key>.obj` holding a header (magic, format version, payload length,
SHA-256 of the payload, the key) followed by the payload. Guarantees:
  * writes are atomic (temporary file in the same directory, then `os.replace`), so a
    concurrent reader sees either no entry or a complete one, and concurrent writers of the
    same key both leave a valid entry;
  * a truncated, corrupt or foreign file (wrong magic, version, key, length or checksum) is
    never returned: `get` reports a miss, and the caller recompiles and overwrites it;
  * nothing is written outside the cache directory; an unwritable directory disables the
    disk cache for the process (compiling still works).
"""
from __future__ import annotations

import hashlib
import os
import struct
import tempfile
from pathlib import Path

__all__ = ["cache_dir", "get", "put", "make_key"]

_MAGIC = b"SJOBJ\x00"
_FORMAT = 1
_HEADER = struct.Struct("<6sHQ32s64s")  # magic, format, payload length, sha256, key (hex, padded)
_DISABLED = False


def cache_dir() -> Path:
    env = os.environ.get("SYMJIT_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "symjit"


def make_key(*parts: str) -> str:
    """A 64-hex-digit key from the texts that determine the compiled code."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\x00")
    return h.hexdigest()


def _path(key: str) -> Path:
    if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
        raise ValueError(f"invalid cache key {key!r}")
    return cache_dir() / f"{key}.obj"


def get(key: str) -> bytes | None:
    """The payload stored under `key`, or None (missing, unreadable, corrupt or foreign)."""
    if os.environ.get("SYMJIT_CACHE", "1") == "0":
        return None
    try:
        data = _path(key).read_bytes()
    except OSError:
        return None
    if len(data) < _HEADER.size:
        return None
    magic, fmt, length, digest, stored_key = _HEADER.unpack_from(data)
    payload = data[_HEADER.size:]
    if (magic != _MAGIC or fmt != _FORMAT or stored_key.rstrip(b"\x00").decode(errors="replace") != key
            or length != len(payload) or hashlib.sha256(payload).digest() != digest):
        return None
    return payload


def put(key: str, payload: bytes) -> bool:
    """Store `payload` under `key` atomically; returns False if the cache is not writable."""
    global _DISABLED
    if _DISABLED or os.environ.get("SYMJIT_CACHE", "1") == "0":
        return False
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        header = _HEADER.pack(_MAGIC, _FORMAT, len(payload), hashlib.sha256(payload).digest(),
                              key.encode().ljust(64, b"\x00"))
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".obj", dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(header + payload)
            os.replace(tmp, _path(key))
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        _DISABLED = True
        return False
    return True
