"""The whole-plan cache (codegen/plan_cache.py): a plan loaded in a fresh process gives the
bytes a fresh compile gives; a changed weight value, shape, attribute, option or code stamp
misses; a truncated, corrupt, missing or other-format entry or blob is a miss that compiles
and stores again, never a crash or a wrong result; concurrent writers are safe; the
hybridize path (bound-parameter plans) uses it too."""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import symjit as mx
from symjit import _runtime, gluon
from symjit.codegen import plan_cache

ROOT = Path(__file__).resolve().parents[2]
SHAPE = (2, 3, 16, 16)


def _model(seed: int = 0, pad: int = 1, act: str = "relu"):
    """(Symbol, params): conv + BatchNorm (folded) + activation, conv, pooling, dense head."""
    data = mx.sym.var("data")
    y = mx.sym.Convolution(data, num_filter=32, kernel=(3, 3), pad=(pad, pad), name="c0")
    y = mx.sym.BatchNorm(y, name="bn0")
    y = mx.sym.Activation(y, act_type=act, name="a0")
    y = mx.sym.Convolution(y, num_filter=32, kernel=(1, 1), name="c1")
    y = mx.sym.Pooling(y, kernel=(2, 2), stride=(2, 2), pool_type="max", name="p0")
    y = mx.sym.FullyConnected(y, num_hidden=10, name="fc")
    rng = np.random.default_rng(seed)
    shapes, _, aux = y.infer_shape(data=SHAPE)
    params = {}
    for name, s in zip(y.list_arguments(), shapes):
        if name != "data":
            params[f"arg:{name}"] = mx.nd.array(rng.standard_normal(s).astype(np.float32) * 0.2)
    for name, s in zip(y.list_auxiliary_states(), aux):
        v = rng.uniform(0.5, 1.5, s) if name.endswith("var") else rng.standard_normal(s) * 0.1
        params[f"aux:{name}"] = mx.nd.array(v.astype(np.float32))
    return y, params


X = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)


@pytest.fixture
def cdir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("SYMJIT_CACHE_DIR", str(d))
    monkeypatch.delenv("SYMJIT_PLAN_CACHE", raising=False)
    return d


def _compile(sym, params, **kw):
    m = mx.compile(sym, shapes={"data": SHAPE}, params=params, **kw)
    plan_cache.flush()      # the files are written (in the background) before the test looks
    return m, m(data=X)[0]


def _fresh(sym, params):
    return _compile(sym, params, cache=False)[1]


def _blobs(d: Path):
    return sorted(d.glob("*.blob"))


def test_fingerprint_sees_every_byte():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(100_003).astype(np.float32)
    base = _runtime.fingerprint(a)
    assert len(base) == 16 and _runtime.fingerprint(a.copy()) == base
    for i in (0, 1, 64, 4095, 50_000, a.size - 1):      # stripes, tail, last element
        b = a.copy()
        b[i] = np.nextafter(b[i], np.float32(np.inf))
        assert _runtime.fingerprint(b) != base, i
    raw = a.view(np.uint8)
    assert _runtime.fingerprint(raw[:-1]) != base                   # length
    assert _runtime.fingerprint(a, 1) != base                       # seed
    assert _runtime.fingerprint(b"") != _runtime.fingerprint(b"\0")
    with pytest.raises(TypeError):
        _runtime.fingerprint(12)


def test_hit_equals_fresh_compile_in_process(cdir):
    sym, params = _model()
    m1, y1 = _compile(sym, params)
    assert m1.compiled.stats.cache != "plan" and _blobs(cdir)
    m2, y2 = _compile(sym, params)
    assert m2.compiled.stats.cache == "plan"
    np.testing.assert_array_equal(y2, y1)
    np.testing.assert_array_equal(y2, _fresh(sym, params))
    # what a cached plan does not carry is rebuilt on demand
    assert "BatchNorm" not in {n.op.name for n in m2.graph.nodes}
    assert m2.report() and m2.compiled.module.ir.startswith(m1.compiled.module.ir[:20])
    assert [n for n, _ in m2.compiled.module.placement.params] == [n for n, _ in m1.compiled.module.placement.params]


CHILD = r"""
import hashlib, json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from test_plan_cache import _model, _compile, _fresh
sym, params = _model()
m, y = _compile(sym, params)
print(json.dumps({"cache": m.compiled.stats.cache, "sha": hashlib.sha256(y.tobytes()).hexdigest(),
                  "fresh": hashlib.sha256(_fresh(sym, params).tobytes()).hexdigest()}))
"""


def _child(cdir: Path) -> dict:
    env = dict(os.environ, SYMJIT_CACHE_DIR=str(cdir), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", CHILD, str(Path(__file__).parent)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_hit_in_a_fresh_process_is_bit_identical(cdir):
    first = _child(cdir)
    second = _child(cdir)
    assert first["cache"] != "plan" and second["cache"] == "plan"
    assert second["sha"] == second["fresh"] == first["sha"]


def test_concurrent_writers(cdir):
    env = dict(os.environ, SYMJIT_CACHE_DIR=str(cdir), PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(Path(__file__).parent)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert len({r["sha"] for r in results} | {r["fresh"] for r in results}) == 1
    assert not list(cdir.glob(".tmp-*"))
    sym, params = _model()
    m, y = _compile(sym, params)
    assert m.compiled.stats.cache == "plan" and hashlib_hex(y) == results[0]["sha"]


def hashlib_hex(y) -> str:
    import hashlib
    return hashlib.sha256(y.tobytes()).hexdigest()


def _changed_weight(params):
    p = dict(params)
    w = p["arg:c1_weight"].asnumpy()
    w.flat[5] = np.nextafter(w.flat[5], np.float32(np.inf))   # one value, one ulp
    p["arg:c1_weight"] = mx.nd.array(w)
    return p


@pytest.mark.parametrize("change", ["weight", "bn_stat", "attribute", "act", "shape", "name", "disabled"])
def test_any_change_misses(cdir, change):
    sym, params = _model()
    _compile(sym, params)
    kw, shape = {}, SHAPE
    if change == "weight":
        params = _changed_weight(params)
    elif change == "bn_stat":
        params = dict(params)
        params["aux:bn0_moving_var"] = mx.nd.array(params["aux:bn0_moving_var"].asnumpy() * 1.5)
    elif change == "attribute":
        sym, _ = _model(pad=0)
        shapes, _, _ = sym.infer_shape(data=SHAPE)
        params = dict(params)
        params["arg:fc_weight"] = mx.nd.array(np.ones(dict(zip(sym.list_arguments(), shapes))["fc_weight"],
                                                      np.float32) * 0.01)
    elif change == "act":
        sym, _ = _model(act="tanh")
    elif change == "shape":
        shape = (1,) + SHAPE[1:]
    elif change == "name":
        kw["name"] = "other"
    elif change == "disabled":
        kw["disabled"] = ("fusion",)
    x = X[:shape[0]]
    m = mx.compile(sym, shapes={"data": shape}, params=params, **kw)
    plan_cache.flush()
    assert m.compiled.stats.cache != "plan"
    want = mx.compile(sym, shapes={"data": shape}, params=params, cache=False, **kw)(data=x)[0]
    np.testing.assert_array_equal(m(data=x)[0], want)
    again = mx.compile(sym, shapes={"data": shape}, params=params, **kw)
    assert again.compiled.stats.cache == "plan"
    np.testing.assert_array_equal(again(data=x)[0], want)


def test_code_stamp_is_part_of_the_key(cdir, monkeypatch):
    sym, params = _model()
    _compile(sym, params)
    monkeypatch.setattr(plan_cache, "_STAMP", ["another tree"])
    m, _ = _compile(sym, params)
    assert m.compiled.stats.cache != "plan"


def _corrupt_blob_byte(d):
    (b,) = _blobs(d)
    data = bytearray(b.read_bytes())
    data[len(data) // 2] ^= 0x10
    b.write_bytes(bytes(data))


def _truncate_blob(d):
    (b,) = _blobs(d)
    b.write_bytes(b.read_bytes()[:-100])


def _remove_blob(d):
    (b,) = _blobs(d)
    b.unlink()


def _corrupt_entries(d):
    for e in d.glob("*.obj"):
        data = bytearray(e.read_bytes())
        data[len(data) // 3] ^= 0xFF
        e.write_bytes(bytes(data))


def _truncate_entries(d):
    for e in d.glob("*.obj"):
        e.write_bytes(e.read_bytes()[:40])


@pytest.mark.parametrize("damage", [_corrupt_blob_byte, _truncate_blob, _remove_blob, _corrupt_entries,
                                    _truncate_entries])
def test_damaged_cache_is_a_miss(cdir, damage):
    sym, params = _model()
    _, want = _compile(sym, params)
    damage(cdir)
    m, y = _compile(sym, params)
    assert m.compiled.stats.cache != "plan"
    np.testing.assert_array_equal(y, want)
    m, y = _compile(sym, params)        # stored again
    assert m.compiled.stats.cache == "plan"
    np.testing.assert_array_equal(y, want)


def test_other_format_is_a_miss(cdir, monkeypatch):
    sym, params = _model()
    _, want = _compile(sym, params)
    monkeypatch.setattr(plan_cache, "FORMAT", plan_cache.FORMAT + 1)
    # same key text is not enough: the stored header's format differs
    monkeypatch.setattr(plan_cache, "plan_key", _old_key_of(plan_cache.plan_key))
    m, y = _compile(sym, params)
    assert m.compiled.stats.cache != "plan"
    np.testing.assert_array_equal(y, want)


def _old_key_of(plan_key):
    """plan_key as the previous format made it (so the lookup finds the old entry)."""
    def key(*args, **kwargs):
        plan_cache.FORMAT -= 1
        try:
            return plan_key(*args, **kwargs)
        finally:
            plan_cache.FORMAT += 1
    return key


def test_blob_with_bad_mode_is_refused(cdir):
    sym, params = _model()
    _, want = _compile(sym, params)
    (b,) = _blobs(cdir)
    os.chmod(b, 0o666)
    m, y = _compile(sym, params)
    assert m.compiled.stats.cache != "plan"
    np.testing.assert_array_equal(y, want)


def test_switched_off(cdir, monkeypatch):
    monkeypatch.setenv("SYMJIT_PLAN_CACHE", "0")
    sym, params = _model()
    _compile(sym, params)
    m, _ = _compile(sym, params)
    assert m.compiled.stats.cache != "plan" and not _blobs(cdir)


def test_unreadable_attributes_make_no_key():
    with pytest.raises(plan_cache.Uncacheable):
        plan_cache.canonical({"f": object()})
    assert plan_cache.canonical((1, 2.5, "a", None, np.float32(1))) == plan_cache.canonical((1, 2.5, "a", None,
                                                                                             np.float32(1)))
    assert plan_cache.canonical(0.1) != plan_cache.canonical(0.1 + 1e-17 * 2)


def _hybrid(sym, params, d: Path):
    """SymbolBlock.imports of the model saved in `d`, hybridized."""
    sym.save(str(d / "m-symbol.json"))
    mx.nd.save(str(d / "m-0000.params"), params)
    net = gluon.SymbolBlock.imports(str(d / "m-symbol.json"), ["data"], str(d / "m-0000.params"))
    net.hybridize()
    return net


@pytest.fixture
def loads(monkeypatch):
    """The plan cache's answers (True: a hit) for bound plans."""
    seen = []
    original = plan_cache.load

    def counting(key, rebuild):
        found = original(key, rebuild)
        seen.append(found is not None)
        return found
    monkeypatch.setattr(plan_cache, "load", counting)
    return seen


def test_hybridize_bound_plans_use_the_cache(cdir, loads, tmp_path):
    sym, params = _model()
    want = _fresh(sym, params)
    y1 = _hybrid(sym, params, tmp_path)(mx.nd.array(X)).asnumpy()
    assert loads and not any(loads)
    n = len(loads)
    net = _hybrid(sym, params, tmp_path)
    y2 = net(mx.nd.array(X)).asnumpy()
    assert loads[n:] == [True]           # found before the graph is even built
    np.testing.assert_array_equal(y1, want)
    np.testing.assert_array_equal(y2, want)
    # one weight changed by one ulp: its bound plan misses the cache
    changed = _changed_weight(params)
    want = _fresh(sym, changed)
    n = len(loads)
    y3 = _hybrid(sym, changed, tmp_path)(mx.nd.array(X)).asnumpy()
    assert loads[n:] and not any(loads[n:])
    np.testing.assert_array_equal(y3, want)
    # changed in place: the block's bound plan goes stale (a plan with the parameters as
    # inputs may serve a while: the same values, rounded by other kernels)
    net.collect_params()["c1_weight"].set_data(changed["arg:c1_weight"])
    for _ in range(4):
        np.testing.assert_allclose(net(mx.nd.array(X)).asnumpy(), want, rtol=1e-5, atol=1e-5)


def test_blobs_are_bounded(cdir, monkeypatch):
    """Storing a plan removes the least recently used blobs beyond SYMJIT_PLAN_CACHE_BYTES."""
    sym, params = _model()
    _compile(sym, params)
    (first,) = _blobs(cdir)
    monkeypatch.setenv("SYMJIT_PLAN_CACHE_BYTES", str(first.stat().st_size + 100))
    changed = _changed_weight(params)
    _, want = _compile(sym, changed)
    (second,) = _blobs(cdir)
    assert second != first
    m, y = _compile(sym, params)          # its blob went: compiled again, correct
    assert m.compiled.stats.cache != "plan"
    np.testing.assert_array_equal(y, _fresh(sym, params))
    _, y = _compile(sym, changed)         # the older blob went this time: one left
    np.testing.assert_array_equal(y, want)
    assert len(_blobs(cdir)) == 1


def test_constant_written_while_stored_is_never_loaded(cdir, monkeypatch):
    """A constant that aliases a buffer written after the plan was made (and before the
    background writer copied it) is stored under a fingerprint it does not match: a miss."""
    from symjit.codegen import cache
    sym, params = _model()
    m, _ = _compile(sym, params, cache=False)
    cg = m.compiled
    victim = max(cg.params, key=lambda a: a.size)
    original = cache.put_blob

    def write_then_store(name, parts):
        # written after store() took the plan (through memory: the plan's arrays are read-only)
        ctypes.memmove(victim.ctypes.data, np.full(1, 1234.5, victim.dtype).tobytes(), victim.itemsize)
        return original(name, parts)
    monkeypatch.setattr(cache, "put_blob", write_then_store)
    assert plan_cache.store("ab" * 32, cg)
    plan_cache.flush()
    assert _blobs(cdir) and plan_cache.load("ab" * 32, lambda: None) is None


def test_used_params_reads_only_entry_loads():
    """Unread parameter slots are found only when every use of the table is a slot load."""
    from types import SimpleNamespace

    def cg(ir):
        return SimpleNamespace(module=SimpleNamespace(ir=ir, segment_names=["s0"]))
    entry = ("define i32 @s0(ptr %inputs, ptr %outputs, ptr %params, ptr %ws) {\n"
             "  %t1 = getelementptr inbounds ptr, ptr %params, i64 3\n"
             "  %t2 = getelementptr inbounds ptr, ptr %params, i64 0\n}")
    assert plan_cache.used_params(cg(entry)) == {0, 3}
    assert plan_cache.used_params(cg(entry + "\n  call void @f(ptr %params)")) is None
