"""The compile cache loads only what this user stored: entries are authenticated with a
per-user secret (HMAC-SHA256), files are opened without following links or blocking and only
when they are regular, private and bounded, and a directory the user does not own (or others
may write) is refused with one warning. In every case the compiled result is correct and a
bad entry is never executed."""
import gc
import os
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from symjit.codegen import cache
from symjit.codegen.llvm.executable import compile_planned
from symjit.ir import GraphBuilder, TensorType
from symjit.passes.manager import compile_graph

X = np.linspace(-1, 1, 64, dtype=np.float32)
HEADER = cache._HEADER
MAC = cache._MAC_SIZE


def _graph(scale: float):
    b = GraphBuilder()
    x = b.add_input("x", TensorType((64,), "float32"))
    return b.build([b.add_node("tanh", [b.add_node("_mul_scalar", [x], {"scalar": scale})[0]])[0]])


def _run(scale: float):
    """(cache status, output) of compiling tanh(x * scale) now; the code is dropped after."""
    cg = compile_planned(compile_graph(_graph(scale))[0], "cached")
    out = cg([X])[0]
    status = cg.stats.cache
    del cg
    gc.collect()
    return status, out


def _correct(out, scale):
    np.testing.assert_allclose(out, np.tanh(X * np.float32(scale)), rtol=1e-5, atol=1e-6)


def _entries(d: Path):
    return sorted(p for p in d.glob("*.obj"))


@pytest.fixture
def cdir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("SYMJIT_CACHE_DIR", str(d))
    return d


def _stored(cdir: Path, scale: float) -> Path:
    """Compile once so the entry of tanh(x * scale) is on disk; returns its path."""
    before = set(_entries(cdir)) if cdir.exists() else set()
    status, out = _run(scale)
    assert status == "none"
    _correct(out, scale)
    (entry,) = set(_entries(cdir)) - before
    return entry


def test_entries_key_and_directory_are_private(cdir):
    key = cache.make_key("text")
    assert cache.put(key, b"payload") and cache.get(key) == b"payload"
    assert stat.S_IMODE(cdir.stat().st_mode) == 0o700
    for p in [cdir / f"{key}.obj", cdir / cache.KEY_NAME]:
        st = p.stat()
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
    assert len((cdir / cache.KEY_NAME).read_bytes()) == 32
    assert not list(cdir.glob(".tmp-*"))


def test_forged_entries_with_valid_headers_are_never_loaded(cdir):
    entry_a = _stored(cdir, 1.5)
    entry_b = _stored(cdir, 2.5)
    key_a = entry_a.name[:-4]
    body_b = entry_b.read_bytes()[:-MAC]
    payload_b = body_b[HEADER.size:]
    magic, fmt, _, _ = HEADER.unpack_from(body_b)
    forged_header = HEADER.pack(magic, fmt, len(payload_b), key_a.encode())
    forgeries = [
        forged_header + payload_b + body_b[-MAC:],                 # B's code, header of A, B's MAC
        forged_header + payload_b + entry_b.read_bytes()[-MAC:],   # same with the MAC of B's entry
        forged_header + payload_b + bytes(MAC),                    # zero MAC
        forged_header + payload_b,                                 # no MAC at all
        entry_b.read_bytes(),                                      # B's whole valid entry renamed to A
    ]
    for forged in forgeries:
        entry_a.write_bytes(forged)
        assert cache.get(key_a) is None
        status, out = _run(1.5)               # recompiled: the forged code never ran
        assert status == "none"
        _correct(out, 1.5)
        status, out = _run(1.5)               # and the entry was rewritten with a valid one
        assert status == "disk"
        _correct(out, 1.5)


def test_entry_signed_with_another_users_secret_is_rejected(cdir, tmp_path, monkeypatch):
    entry = _stored(cdir, 1.25)
    other = tmp_path / "other"
    monkeypatch.setenv("SYMJIT_CACHE_DIR", str(other))
    key = entry.name[:-4]
    assert cache.put(key, entry.read_bytes()[HEADER.size:-MAC])  # same payload, other secret
    foreign = (other / entry.name).read_bytes()
    monkeypatch.setenv("SYMJIT_CACHE_DIR", str(cdir))
    entry.write_bytes(foreign)
    assert cache.get(key) is None
    status, out = _run(1.25)
    assert status == "none"
    _correct(out, 1.25)


@pytest.mark.parametrize("cut", [0, 10, HEADER.size, HEADER.size + 100, -MAC, -1])
def test_truncated_entries_recompile(cdir, cut):
    entry = _stored(cdir, 1.75)
    data = entry.read_bytes()
    entry.write_bytes(data[:cut])
    assert cache.get(entry.name[:-4]) is None
    status, out = _run(1.75)
    assert status == "none"
    _correct(out, 1.75)


def test_oversized_entries_are_rejected_before_reading(cdir, monkeypatch):
    entry = _stored(cdir, 0.5)
    key = entry.name[:-4]
    with open(entry, "r+b") as f:          # sparse: a huge size without writing it
        f.truncate(cache.MAX_ENTRY_BYTES + 1)
    assert cache.get(key) is None
    monkeypatch.setattr(cache, "MAX_ENTRY_BYTES", 1000)
    assert not cache.put(cache.make_key("big"), bytes(2000))
    assert not (cdir / f"{cache.make_key('big')}.obj").exists()


def test_entries_owned_by_others_or_writable_by_others_are_ignored(cdir):
    entry = _stored(cdir, 0.75)
    key = entry.name[:-4]
    entry.chmod(0o622)
    assert cache.get(key) is None
    entry.chmod(0o600)
    assert cache.get(key) is not None
    if os.geteuid() == 0:
        os.chown(entry, 12345, -1)
        assert cache.get(key) is None
        status, out = _run(0.75)
        assert status == "none"
        _correct(out, 0.75)
        assert entry.stat().st_uid == 0


def test_key_file_missing_or_corrupt(cdir):
    entry = _stored(cdir, 3.0)
    key_file = cdir / cache.KEY_NAME
    secret = key_file.read_bytes()
    for sabotage in ["missing", "short", "readable", "symlink", "directory"]:
        if key_file.is_dir():
            key_file.rmdir()
        elif key_file.exists() or key_file.is_symlink():
            key_file.unlink()
        if sabotage == "short":
            key_file.write_bytes(secret[:16])
            key_file.chmod(0o600)
        elif sabotage == "readable":           # a secret others can read may have signed forgeries
            key_file.write_bytes(secret)
            key_file.chmod(0o644)
        elif sabotage == "symlink":
            other = cdir.parent / "planted-key"
            other.write_bytes(secret)
            other.chmod(0o600)
            key_file.symlink_to(other)
        elif sabotage == "directory":
            key_file.mkdir()
        assert cache.get(entry.name[:-4]) is None, sabotage
        status, out = _run(3.0)
        _correct(out, 3.0)
        if sabotage == "directory":             # cannot be replaced: compiled without storing
            assert status == "none"
            continue
        assert status == "none", sabotage
        st = os.stat(key_file, follow_symlinks=False)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_size == 32
        assert key_file.read_bytes() != secret
        secret = key_file.read_bytes()
        assert _run(3.0)[0] == "disk"


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [w for w in caught if issubclass(w.category, RuntimeWarning) and "compile cache" in str(w.message)]


def _refused_with_one_warning(cdir, scale, why):
    before = sorted(os.listdir(cdir))

    def twice():
        for _ in range(2):
            status, out = _run(scale)
            assert status == "none"
            _correct(out, scale)
    caught = _warnings_of(twice)
    assert len(caught) == 1 and why in str(caught[0].message), [str(w.message) for w in caught]
    assert sorted(os.listdir(cdir)) == before       # nothing read, nothing written


def test_directory_writable_by_others_is_refused(cdir):
    _stored(cdir, 4.0)
    cdir.chmod(0o777)
    _refused_with_one_warning(cdir, 4.0, "writable by group or others")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the directory to another uid needs root (os.chown)")
def test_directory_owned_by_another_user_is_refused(cdir):
    _stored(cdir, 5.0)
    os.chown(cdir, 12345, 12345)
    _refused_with_one_warning(cdir, 5.0, "owned by uid 12345")


_SPECIAL = r"""
import gc, os, sys
import numpy as np
from symjit.codegen import cache
from symjit.codegen.llvm.executable import compile_planned
from symjit.ir import GraphBuilder, TensorType
from symjit.passes.manager import compile_graph
X = np.linspace(-1, 1, 64, dtype=np.float32)
def run():
    b = GraphBuilder()
    x = b.add_input("x", TensorType((64,), "float32"))
    g = b.build([b.add_node("tanh", [b.add_node("_mul_scalar", [x], {"scalar": 1.125})[0]])[0]])
    cg = compile_planned(compile_graph(g)[0], "special")
    out = cg([X])[0]
    assert np.allclose(out, np.tanh(X * np.float32(1.125)), atol=1e-6)
    status = cg.stats.cache
    del cg; gc.collect()
    return status
d = os.environ["SYMJIT_CACHE_DIR"]
assert run() == "none"
(entry,) = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".obj")]
key_file = os.path.join(d, cache.KEY_NAME)
for what in sys.argv[1:]:
    os.unlink(entry)
    if what == "fifo":
        os.mkfifo(entry, 0o600)
    elif what == "devzero":
        os.symlink("/dev/zero", entry)
    elif what == "key-fifo":
        os.unlink(key_file)
        os.mkfifo(key_file, 0o600)
    elif what == "key-devzero":
        os.unlink(key_file)
        os.symlink("/dev/zero", key_file)
    assert cache.get(os.path.basename(entry)[:-4]) is None, what
    assert run() == "none", what
    assert os.path.isfile(entry) and not os.path.islink(entry), what
    assert run() == "disk", what
print("ok")
"""


def test_fifo_and_device_links_neither_hang_nor_exhaust_memory(cdir):
    # run in a child with a deadline: a blocking open of the FIFO would hang forever, and
    # reading /dev/zero would fill memory
    env = dict(os.environ, SYMJIT_CACHE_DIR=str(cdir))
    proc = subprocess.run([sys.executable, "-c", _SPECIAL, "fifo", "devzero", "key-fifo", "key-devzero"],
                          env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
