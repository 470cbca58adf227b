"""The on-disk cache of compiled code: objects keyed by what they were compiled from.

Directory: `SYMJIT_CACHE_DIR`, else `$XDG_CACHE_HOME/symjit`, else `~/.cache/symjit`
(`SYMJIT_CACHE=0` turns the disk cache off). Everything stored here is executable code
(JIT objects, AOT objects, the runtime's C objects), so nothing is loaded unless it was
written by this user through `put`:

  * trust: the directory must be a real directory owned by the effective user and not
    writable by group or others; otherwise the cache is refused (one warning per directory
    and process) and callers compile without it. Entry and key files are opened relative to
    the directory's descriptor (`dir_fd`), never following symlinks (`O_NOFOLLOW`), without
    blocking (`O_NONBLOCK`: a FIFO opens at once), and used only when `fstat` says they are
    regular files owned by the user, not writable by group or others;
  * bounded: an entry larger than `MAX_ENTRY_BYTES` is rejected before it is read, and
    never written;
  * authenticated: each entry is `header + payload + HMAC-SHA256(secret, header + payload)`
    with a per-user secret (`KEY_NAME` in the directory: 32 random bytes, mode 0600, created
    once and atomically with a no-clobber link; a missing, short, foreign or non-private key
    file is replaced by a fresh one, which invalidates every entry). The header carries the
    key the entry was stored under, so an entry renamed to another key is rejected too;
  * atomic writes: a temporary file (mode 0600, `O_EXCL`) in the directory, then `rename`,
    so a concurrent reader sees no entry or a complete one;
  * failures are misses: a truncated, forged, foreign, oversized or unreadable entry is
    never returned; `get` reports a miss and the caller recompiles and overwrites it.

Blobs (`put_blob`, `map_blob`): large data (the constants of cached plans, codegen/plan_cache.py)
stored beside the entries under the same trust and atomicity rules but without a MAC (hashing
hundreds of megabytes with SHA-256 would cost more than the cache saves): their users keep a
fingerprint of the content in an authenticated entry and check it after mapping. They are
bounded in total (`trim_blobs`, least recently used first).
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
import struct
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

__all__ = ["cache_dir", "get", "put", "make_key", "put_blob", "map_blob", "touch_blob", "trim_blobs",
           "MAX_ENTRY_BYTES", "MAX_BLOB_BYTES", "KEY_NAME"]

_MAGIC = b"SJOBJ\x00"
_FORMAT = 2
_HEADER = struct.Struct("<6sHQ64s")  # magic, format, payload length, key (hex)
_MAC_SIZE = hashlib.sha256().digest_size
_SECRET_SIZE = 32

#: entries (header + payload + MAC) larger than this are never read or written
MAX_ENTRY_BYTES = 64 << 20
#: data blobs (`put_blob`: not authenticated here, their users check their content) larger than this
MAX_BLOB_BYTES = 16 << 30
#: the per-user secret's file name inside the cache directory
KEY_NAME = "hmac-sha256.key"

_O_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WARNED: set[str] = set()
_WARN_LOCK = threading.Lock()


class _Untrusted(Exception):
    """The cache directory may not be used (the message says why)."""


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


def _entry_name(key: str) -> str:
    if not isinstance(key, str) or len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
        raise ValueError(f"invalid cache key {key!r}")
    return f"{key}.obj"


def _enabled() -> bool:
    return os.environ.get("SYMJIT_CACHE", "1") != "0"


def _private_problem(st: os.stat_result) -> str | None:
    """Why a file or directory with this status may not be trusted (None: it may)."""
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not by the current user (uid {os.geteuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _warn_once(d: Path, why: str) -> None:
    with _WARN_LOCK:
        if str(d) in _WARNED:
            return
        _WARNED.add(str(d))
    warnings.warn(f"symjit: not using the compile cache {str(d)!r}: {why}; compiling without a cache "
                  "(fix it, or set SYMJIT_CACHE_DIR to a private directory)", RuntimeWarning, stacklevel=3)


@contextmanager
def _open_dir(create: bool) -> Iterator[int | None]:
    """A descriptor of the verified cache directory (None: it does not exist and `create` is
    False). Raises _Untrusted when it exists but may not be used."""
    d = cache_dir()
    if create:
        try:
            d.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise _Untrusted(f"cannot create it ({e.strerror})") from None
    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        if create:
            raise _Untrusted("it vanished while being created") from None
        yield None
        return
    except OSError as e:
        raise _Untrusted(f"cannot open it ({e.strerror})") from None
    try:
        why = _private_problem(os.fstat(fd))
        if why is not None:
            raise _Untrusted(why)
        yield fd
    finally:
        os.close(fd)


def _read_regular(dfd: int, name: str, limit: int, private: bool = False) -> bytes | None:
    """The bytes of `name` in the directory if it is a regular file owned by the user, not
    writable by others (`private`: no group or other permission at all), and at most `limit`
    bytes; else None. Never follows a symlink and never blocks (FIFOs, devices and sockets
    are refused after a non-blocking open, before any read)."""
    try:
        fd = os.open(name, _O_READ, dir_fd=dfd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or _private_problem(st) is not None or st.st_size > limit
                or private and st.st_mode & 0o077):
            return None
        chunks, left = [], st.st_size + 1      # one byte more: a file that grew is rejected
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return data if len(data) == st.st_size else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _write_atomic(dfd: int, name: str, data, replace: bool = True) -> bool:
    """Write `data` (bytes, or a list of buffers written one after another) to `name` in the
    directory through a 0600 temporary file and a rename (`replace=False`: a no-clobber link,
    so an existing file wins). Returns whether `name` now holds `data`."""
    tmp = f".tmp-{secrets.token_hex(8)}-{name}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
    try:
        try:
            os.fchmod(fd, 0o600)
            for part in (data if isinstance(data, list) else [data]):
                view = memoryview(part).cast("B")
                while view:
                    view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        if replace:
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            return True
        try:
            os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
            return True
        except FileExistsError:
            return False
    finally:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass


def _secret(dfd: int, create: bool) -> bytes | None:
    """The per-user secret of the directory. A missing or untrustworthy key file is replaced
    by a fresh secret when `create` (None otherwise: every entry is then a miss)."""
    for _ in range(3):
        key = _read_regular(dfd, KEY_NAME, _SECRET_SIZE, private=True)
        if key is not None and len(key) == _SECRET_SIZE:
            return key
        if not create:
            return None
        fresh = secrets.token_bytes(_SECRET_SIZE)
        try:
            os.stat(KEY_NAME, dir_fd=dfd, follow_symlinks=False)
            exists = True
        except FileNotFoundError:
            exists = False
        if _write_atomic(dfd, KEY_NAME, fresh, replace=exists):
            return fresh
        # another process created the key first: read theirs
    return None


def _mac(secret: bytes, body: bytes) -> bytes:
    return hmac.new(secret, body, hashlib.sha256).digest()


def get(key: str) -> bytes | None:
    """The payload stored under `key`, or None (missing, unreadable, forged, corrupt,
    oversized or foreign; or the cache is off or untrusted)."""
    name = _entry_name(key)
    if not _enabled():
        return None
    try:
        with _open_dir(create=False) as dfd:
            if dfd is None:
                return None
            secret = _secret(dfd, create=False)
            if secret is None:
                return None
            data = _read_regular(dfd, name, MAX_ENTRY_BYTES)
    except _Untrusted as e:
        _warn_once(cache_dir(), str(e))
        return None
    if data is None or len(data) < _HEADER.size + _MAC_SIZE:
        return None
    body, mac = data[:-_MAC_SIZE], data[-_MAC_SIZE:]
    if not hmac.compare_digest(_mac(secret, body), mac):
        return None
    magic, fmt, length, stored_key = _HEADER.unpack_from(body)
    if magic != _MAGIC or fmt != _FORMAT or stored_key != key.encode() or length != len(body) - _HEADER.size:
        return None
    return body[_HEADER.size:]


def put(key: str, payload: bytes) -> bool:
    """Store `payload` under `key` atomically; returns False when it was not stored (cache off,
    untrusted or unwritable, or the entry would exceed MAX_ENTRY_BYTES)."""
    name = _entry_name(key)
    if not _enabled() or _HEADER.size + len(payload) + _MAC_SIZE > MAX_ENTRY_BYTES:
        return False
    try:
        with _open_dir(create=True) as dfd:
            secret = _secret(dfd, create=True)
            if secret is None:
                return False
            body = _HEADER.pack(_MAGIC, _FORMAT, len(payload), key.encode()) + bytes(payload)
            return _write_atomic(dfd, name, body + _mac(secret, body))
    except _Untrusted as e:
        _warn_once(cache_dir(), str(e))
        return False
    except OSError:
        return False


def _blob_name(name: str) -> str:
    if (not isinstance(name, str) or not 1 <= len(name) <= 128
            or any(c not in "0123456789abcdef-" for c in name)):
        raise ValueError(f"invalid blob name {name!r}")
    return f"{name}.blob"


def put_blob(name: str, parts: list) -> bool:
    """Store the buffers `parts`, one after another, as blob `name` (hex digits and dashes)
    atomically. Blobs are data, not code, and carry no MAC: whoever stores one keeps a check of
    its content in an authenticated entry (`put`) and verifies it after `map_blob`. Returns
    False when it was not stored (cache off, untrusted or unwritable, or too large)."""
    fname = _blob_name(name)
    if not _enabled() or sum(memoryview(p).nbytes for p in parts) > MAX_BLOB_BYTES:
        return False
    try:
        with _open_dir(create=True) as dfd:
            return _write_atomic(dfd, fname, list(parts))
    except _Untrusted as e:
        _warn_once(cache_dir(), str(e))
        return False
    except OSError:
        return False


#: madvise(MADV_POPULATE_READ) (Linux 5.14): map every page of the file now, without copying
_MADV_POPULATE_READ = 22


def _read_ahead(m) -> None:
    """Fault a private file mapping's pages in now (read-only: pages stay shared with the page
    cache until written), else ask the kernel to read ahead."""
    import mmap
    for advice in (_MADV_POPULATE_READ, getattr(mmap, "MADV_WILLNEED", None)):
        if advice is None:
            continue
        try:
            m.madvise(advice)
            return
        except (OSError, ValueError):
            continue


def map_blob(name: str, size: int):
    """Blob `name` mapped copy-on-write (an `mmap`: writes stay private to this process; its
    pages are faulted in, `_read_ahead`), or None when it is missing, not exactly `size` bytes, or not a regular
    file owned by the user and not writable by others (the same rules as entries). The caller
    verifies the content. The mapping stays valid when the file is replaced or removed."""
    import mmap
    fname = _blob_name(name)
    if not _enabled() or not 0 < size <= MAX_BLOB_BYTES:
        return None
    try:
        with _open_dir(create=False) as dfd:
            if dfd is None:
                return None
            try:
                fd = os.open(fname, _O_READ, dir_fd=dfd)
            except OSError:
                return None
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or _private_problem(st) is not None or st.st_size != size:
                    return None
                m = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
                _read_ahead(m)
                return m
            except (OSError, ValueError):
                return None
            finally:
                os.close(fd)
    except _Untrusted as e:
        _warn_once(cache_dir(), str(e))
        return None


def touch_blob(name: str) -> None:
    """Mark blob `name` as used now (its modification time orders `trim_blobs`)."""
    try:
        with _open_dir(create=False) as dfd:
            if dfd is not None:
                os.utime(_blob_name(name), dir_fd=dfd, follow_symlinks=False)
    except (OSError, _Untrusted, ValueError, NotImplementedError):
        pass


def trim_blobs(limit: int, keep: str | None = None) -> int:
    """Remove the least recently used blobs (oldest modification time first) until those left
    take at most `limit` bytes, never blob `keep`; returns the bytes removed. A reader that
    mapped a removed blob keeps its mapping; one that had not yet opened it sees a miss."""
    removed = 0
    try:
        with _open_dir(create=False) as dfd:
            if dfd is None:
                return 0
            blobs = []
            with os.scandir(dfd) as it:
                for e in it:
                    if e.name.endswith(".blob") and not e.name.startswith("."):
                        try:
                            st = e.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        blobs.append((st.st_mtime_ns, st.st_size, e.name))
            total = sum(size for _, size, _ in blobs)
            for _, size, name in sorted(blobs):
                if total <= limit:
                    break
                if keep is not None and name == _blob_name(keep):
                    continue
                try:
                    os.unlink(name, dir_fd=dfd)
                except OSError:
                    continue
                total -= size
                removed += size
    except (OSError, _Untrusted):
        pass
    return removed
