"""The `symjit` command keeps its promises under bad input: a damaged library is refused
before it is loaded, destinations are checked before the compile, all outputs or none, umask
permissions, no silent casts, ranged options, one-line errors. A tiny model built here (two
dense layers) keeps these tests independent of the shared models."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import numpy as np
import pytest

import symjit as mx
from symjit import cli
from cli_util import one_line_error as _one_line_error, run_cli as _run
from symjit.cli import main


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> list[str]:
    """[symbol.json, params]: data (2, 5) -> dense 8 -> relu -> dense 3."""
    d = tmp_path_factory.mktemp("tiny")
    data = mx.sym.var("data")
    net = mx.sym.FullyConnected(data, num_hidden=8, name="fc1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.FullyConnected(net, num_hidden=3, name="fc2")
    net.save(str(d / "tiny-symbol.json"))
    rng = np.random.default_rng(0)
    shapes = {"fc1_weight": (8, 5), "fc1_bias": (8,), "fc2_weight": (3, 8), "fc2_bias": (3,)}
    mx.nd.save(str(d / "tiny-0000.params"),
               {f"arg:{k}": mx.nd.array(rng.standard_normal(s).astype(np.float32)) for k, s in shapes.items()})
    return [str(d / "tiny-symbol.json"), str(d / "tiny-0000.params")]


@pytest.fixture(scope="module")
def tiny_lib(tiny, tmp_path_factory) -> Path:
    """tiny.so (with tiny.h and tiny.json) built by `symjit compile` under umask 022."""
    if shutil.which("cc") is None:
        pytest.skip("needs the system C compiler `cc`")
    d = tmp_path_factory.mktemp("tinylib")
    old = os.umask(0o022)
    try:
        assert main(["compile", *tiny, "-i", "data:2x5", "-q", "-o", str(d / "tiny")]) == 0
    finally:
        os.umask(old)
    return d / "tiny.so"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ------------------------------------------------------------------------ damaged libraries

def test_a_truncated_or_altered_library_is_refused_before_loading(tiny_lib, tmp_path, capsys, run_model_exe):
    np.save(tmp_path / "x.npy", np.ones((2, 5), np.float32))
    whole = tiny_lib.read_bytes()
    lib = tmp_path / "tiny.so"
    shutil.copy(tiny_lib.with_suffix(".json"), tmp_path / "tiny.json")
    # truncated, with and without the manifest beside it
    for manifest in (True, False):
        if not manifest:
            (tmp_path / "tiny.json").unlink()
        lib.write_bytes(whole[: len(whole) // 2])
        for argv in (["run", str(lib), "-i", str(tmp_path / "x.npy")], ["bench", str(lib), "--min-time", "0"]):
            rc, _, err = _run(capsys, argv)
            line = _one_line_error(err, argv[0])
            assert rc == 1 and "truncated" in line and str(lib) in line
        proc = subprocess.run([run_model_exe, str(lib), str(tmp_path / "x.npy")], capture_output=True, text=True)
        assert proc.returncode == 1 and "truncated" in proc.stderr, proc.stderr
    # same size, one byte changed: the manifest's library_sha256 tells
    shutil.copy(tiny_lib.with_suffix(".json"), tmp_path / "tiny.json")
    altered = bytearray(whole)
    altered[len(altered) // 2] ^= 0xFF
    lib.write_bytes(bytes(altered))
    with pytest.raises(mx.MXNetError, match="does not match its manifest"):
        mx.runtime.load(str(lib))
    # the intact library loads and runs
    lib.write_bytes(whole)
    rc, out, _ = _run(capsys, ["run", str(lib), "-i", str(tmp_path / "x.npy")])
    assert rc == 0 and "output 0: shape (2, 3) float32" in out


# ------------------------------------------------------------------------ destinations, atomicity

def test_an_unwritable_destination_is_reported_before_compiling(tiny, tmp_path, capsys, monkeypatch):
    def no_compile(*_a, **_k):
        raise AssertionError("compiled before checking the destination")
    monkeypatch.setattr(cli, "_compile_model", no_compile)
    nodir = tmp_path / "nodir"
    for out, why in (("/proc/x", "cannot write in directory '/proc'"),
                     (str(nodir / "m"), f"directory '{nodir}' does not exist")):
        rc, _, err = _run(capsys, ["compile", *tiny, "-i", "data:2x5", "-q", "-o", out])
        line = _one_line_error(err, "compile")
        assert rc == 1 and f"-o '{out}': {why}" in line, line
        assert "Error" not in line.split("error:", 1)[1] and ".so." not in line, line
    monkeypatch.setattr(cli, "_load_library", no_compile)
    rc, _, err = _run(capsys, ["run", "lib.so", "-i", "x.npy", "-o", "/proc/y.npy"])
    assert rc == 1 and "'/proc/y.npy'" in _one_line_error(err, "run")
    rc, _, err = _run(capsys, ["viz", tiny[0], "-o", "/proc/net.dot"])
    assert rc == 1 and "'/proc/net.dot'" in _one_line_error(err, "viz")


def test_a_huge_declared_input_is_one_line(tiny, tmp_path, capsys):
    rc, _, err = _run(capsys, ["compile", *tiny, "-i", "data:100000000000x784", "-q", "-o", str(tmp_path / "m")])
    line = _one_line_error(err, "compile")
    assert rc == 1 and "313600000000000 bytes" in line
    assert list(tmp_path.iterdir()) == []


def test_viz_writes_both_pictures_or_neither(tiny, tmp_path, capsys, monkeypatch):
    from symjit import visualization

    def broken(*_a, **_k):
        raise mx.MXNetError("memory plan: cannot draw")
    monkeypatch.setattr(visualization, "plot_memory_plan", broken)
    rc, _, err = _run(capsys, ["viz", *tiny, "-i", "data:2x5", "-o", str(tmp_path / "net.dot"),
                               "--memory-plan", str(tmp_path / "plan.svg")])
    assert rc == 1 and "cannot draw" in _one_line_error(err, "viz")
    assert list(tmp_path.iterdir()) == []          # not net.dot, no temporary file either
    monkeypatch.undo()
    rc, out, _ = _run(capsys, ["viz", *tiny, "-i", "data:2x5", "-o", str(tmp_path / "net.dot"),
                               "--memory-plan", str(tmp_path / "plan.svg"), "--json"])
    assert rc == 0 and json.loads(out)["files"] == [str(tmp_path / "net.dot"), str(tmp_path / "plan.svg")]


def test_output_permissions_follow_the_umask(tiny, tiny_lib, tmp_path, capsys):
    assert _mode(tiny_lib) == 0o755
    assert _mode(tiny_lib.with_suffix(".h")) == _mode(tiny_lib.with_suffix(".json")) == 0o644
    np.save(tmp_path / "x.npy", np.ones((2, 5), np.float32))
    old = os.umask(0o027)
    try:
        assert main(["compile", *tiny, "-i", "data:2x5", "-q", "-o", str(tmp_path / "t")]) == 0
        assert main(["run", str(tiny_lib), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")]) == 0
        assert main(["viz", *tiny, "-o", str(tmp_path / "net.dot")]) == 0
    finally:
        os.umask(old)
    capsys.readouterr()
    assert _mode(tmp_path / "t.so") == 0o750
    for name in ("t.h", "t.json", "y.npy", "net.dot"):
        assert _mode(tmp_path / name) == 0o640, name


# ------------------------------------------------------------------------ inputs and options

@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.bool_, np.float16])
def test_run_refuses_an_input_of_another_dtype(tiny_lib, tmp_path, capsys, dtype):
    np.save(tmp_path / "x.npy", np.ones((2, 5), dtype))
    rc, _, err = _run(capsys, ["run", str(tiny_lib), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")])
    line = _one_line_error(err, "run")
    assert rc == 1 and f"has dtype {np.dtype(dtype).name}, the library expects float32" in line
    assert not (tmp_path / "y.npy").exists()


@pytest.mark.parametrize("option", [["--repeat", "-5"], ["--repeat", "0"], ["--warmup", "-1"],
                                    ["--min-time", "-1"], ["--min-time", "nan"], ["--profile", "-2"]])
def test_bench_rejects_out_of_range_counts(tiny_lib, capsys, option):
    with pytest.raises(SystemExit) as e:
        main(["bench", str(tiny_lib), *option])
    assert e.value.code == 2 and f"argument {option[0]}: expected" in capsys.readouterr().err


def test_missing_input_names_only_the_data_inputs(tiny, tmp_path, capsys):
    for files in (tiny[:1], tiny):      # without the params file the weights are free too
        rc, _, err = _run(capsys, ["compile", *files, "-q", "-o", str(tmp_path / "m")])
        assert rc == 1 and "missing --input for ['data'] " in _one_line_error(err, "compile")


def test_inspect_summarizes_the_params(tiny, capsys):
    rc, out, _ = _run(capsys, ["inspect", *tiny, "-i", "data:2x5"])
    nbytes = 4 * (40 + 8 + 24 + 3)
    assert rc == 0 and f"parameters: 4 arrays, {nbytes} B (--list-params lists them)" in out
    assert "  fc1_weight: float32[8, 5] 160 B" not in out and "<float32[8,5], 160 B>" in out   # no values
    rc, out, _ = _run(capsys, ["inspect", *tiny, "-i", "data:2x5", "--list-params"])
    assert rc == 0 and "  fc1_weight: float32[8, 5] 160 B" in out and "  fc2_bias: float32[3] 12 B" in out
    rc, out, _ = _run(capsys, ["inspect", *tiny, "-i", "data:2x5", "--json"])
    assert rc == 0 and json.loads(out)["params"] == {"count": 4, "bytes": nbytes}


def test_header_macros_say_elements_or_bytes(tiny_lib):
    header = tiny_lib.with_suffix(".h").read_text()
    manifest = json.loads(tiny_lib.with_suffix(".json").read_text())
    for line in ("#define TINY_INPUT0_ELEMS 10", "#define TINY_INPUT0_BYTES 40", "#define TINY_OUTPUT0_ELEMS 6",
                 "#define TINY_OUTPUT0_BYTES 24", f"#define TINY_WORKSPACE_BYTES {manifest['workspace_bytes']}"):
        assert line in header
    assert "_SIZE " not in header


def test_compile_json_prints_absolute_paths(tiny, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    rc, out, _ = _run(capsys, ["compile", *tiny, "-i", "data:2x5", "-q", "--json", "-o", "out/t"])
    data = json.loads(out)
    assert rc == 0
    for key, name in (("library", "t.so"), ("header", "t.h"), ("manifest", "t.json")):
        assert data[key] == str(tmp_path / "out" / name)
    assert json.loads((tmp_path / "out" / "t.json").read_text())["library"] == "t.so"   # relative to itself


# ------------------------------------------------------------------------ the one error line

def test_unexpected_failures_are_one_line_and_traceback_on_request(tiny, capsys, monkeypatch):
    def boom(_args):
        raise RuntimeError("kaboom")
    monkeypatch.setattr(cli, "cmd_inspect", boom)
    rc, _, err = _run(capsys, ["inspect", *tiny])
    assert rc == 1 and _one_line_error(err, "inspect").endswith(
        "RuntimeError: kaboom (SYMJIT_DEBUG=1 shows the traceback)")
    monkeypatch.setenv("SYMJIT_DEBUG", "1")
    rc, _, err = _run(capsys, ["inspect", *tiny])
    assert rc == 1 and "Traceback" in err and err.rstrip().endswith("kaboom (SYMJIT_DEBUG=1 shows the traceback)")


def test_os_errors_name_the_path_not_the_class():
    assert cli.error_line(PermissionError(13, "Permission denied", "/data/out.npy")) == \
        "/data/out.npy: Permission denied"
    assert cli.error_line(MemoryError()).startswith("out of memory")
