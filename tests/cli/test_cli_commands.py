"""The `symjit` command: help, exit codes, one-line errors, --json, no partial outputs."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from cli_util import one_line_error as _one_line_error, run_cli as _run
from symjit.cli import main, parse_input_spec, CliError

from shared_data import REPO, SMALL_MODELS, model_path

MLP = [str(SMALL_MODELS / "mlp-symbol.json"), str(SMALL_MODELS / "mlp-0000.params")]
LENET = [str(SMALL_MODELS / "lenet-symbol.json"), str(SMALL_MODELS / "lenet-0000.params")]


def test_console_script_declared():
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs tomllib (Python 3.11+)")
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert data["project"]["scripts"]["symjit"] == "symjit.cli:main"


@pytest.mark.parametrize("cmd", [[], ["compile"], ["run"], ["bench"], ["inspect"], ["viz"]])
def test_help_everywhere(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        main(cmd + ["--help"])
    assert e.value.code == 0
    assert "usage: symjit" in capsys.readouterr().out


def test_usage_errors_exit_2(capsys):
    for argv in (["frobnicate"], ["compile"], ["compile", *MLP, "--input", "data:8x784", "-o", "x", "--target", "tpu"],
                 ["compile", *MLP, "--input", "data:8x784", "-o", "x", "--opt", "7"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
    capsys.readouterr()


def test_parse_input_spec():
    assert parse_input_spec("data:1x3x224x224") == ("data", (1, 3, 224, 224), "float32")
    assert parse_input_spec("ids:4x7:int32") == ("ids", (4, 7), "int32")
    for bad in ("data", "data:1xz", "data:0x3", "data:2:notatype", ":2"):
        with pytest.raises(CliError):
            parse_input_spec(bad)


def test_compile_bad_inputs_one_line_and_no_files(tmp_path, capsys, monkeypatch):
    out = str(tmp_path / "m")
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "notgraph.json").write_text('{"hello": 1}')
    (tmp_path / "bad.params").write_bytes(b"garbage")
    cases = [
        ([str(tmp_path / "missing.json")], "does not exist"),
        ([str(tmp_path / "bad.json")], "not valid JSON"),
        ([str(tmp_path / "notgraph.json")], "not an MXNet symbol file"),
        ([MLP[0], str(tmp_path / "bad.params")], "not an MXNet .params file"),
        ([MLP[0], str(tmp_path / "missing.params")], "does not exist"),
    ]
    for files, msg in cases:
        rc, _, err = _run(capsys, ["compile", *files, "--input", "data:8x784", "-o", out])
        assert rc == 1 and msg in _one_line_error(err, "compile")
    rc, _, err = _run(capsys, ["compile", *MLP, "--input", "data:8x785", "-o", out])
    assert rc == 1 and "shape" in _one_line_error(err, "compile")
    rc, _, err = _run(capsys, ["compile", *MLP, "-o", out])
    assert rc == 1 and "missing --input for ['data']" in _one_line_error(err, "compile")
    rc, _, err = _run(capsys, ["compile", *MLP, "--input", "label:8", "--input", "data:8x784", "-o", out])
    assert rc == 1 and "not inputs of the model" in _one_line_error(err, "compile")
    with monkeypatch.context() as m:      # --target cuda without a CUDA compiler
        m.setenv("SYMJIT_NVCC", str(tmp_path / "no-nvcc"))
        rc, _, err = _run(capsys, ["compile", *MLP, "--input", "data:8x784", "--target", "cuda", "-o", out])
    assert rc == 1 and "nvcc" in _one_line_error(err, "compile")
    rc, _, err = _run(capsys, ["compile", *MLP, "--input", "data:8x784", "-o", str(tmp_path / "nodir" / "m")])
    assert rc == 1
    _one_line_error(err, "compile")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "bad.params", "notgraph.json"]


def test_compile_refuses_graphs_without_native_lowering(tmp_path, capsys, monkeypatch):
    from symjit.codegen.llvm import graph as G
    G._load_lowerings()
    monkeypatch.delitem(G.LOWERINGS, "FullyConnected")
    rc, _, err = _run(capsys, ["compile", *MLP, "--input", "data:8x784", "-q", "-o", str(tmp_path / "m")])
    line = _one_line_error(err, "compile")
    assert rc == 1 and "no native lowering" in line and "FullyConnected" in line
    assert list(tmp_path.iterdir()) == []


def test_compile_json_and_run(mlp_lib, tmp_path, capsys):
    manifest = json.loads((mlp_lib.with_suffix(".json")).read_text())
    assert manifest["library"] == "mlp.so" and manifest["target"]["cpu"]
    y = tmp_path / "y.npy"
    rc, out, _ = _run(capsys, ["run", str(mlp_lib), "--input", f"data={model_path('mlp-input.npy')}", "-o", str(y),
                               "--json"])
    assert rc == 0
    summary = json.loads(out)
    assert summary["outputs"][0]["shape"] == [8, 10]
    ref = np.load(model_path("mlp-output.npy"))
    assert np.abs(np.load(y) - ref).max() < 1e-4
    # a single input may be given without its name
    rc, out, _ = _run(capsys, ["run", str(mlp_lib), "--input", str(model_path("mlp-input.npy"))])
    assert rc == 0 and "output 0: shape (8, 10) float32" in out


def test_run_bad_inputs(mlp_lib, tmp_path, capsys):
    np.save(tmp_path / "small.npy", np.zeros((3, 3), np.float32))
    np.save(tmp_path / "ints.npy", np.zeros((8, 784), np.complex64))
    (tmp_path / "junk.npy").write_bytes(b"junk")
    (tmp_path / "junk.so").write_bytes(b"junk")
    y = tmp_path / "y.npy"
    cases = [
        (["run", str(tmp_path / "missing.so"), "--input", f"data={tmp_path / 'small.npy'}"], "does not exist"),
        (["run", str(tmp_path / "junk.so"), "--input", f"data={tmp_path / 'small.npy'}"], "cannot load"),
        (["run", str(mlp_lib), "--input", f"data={tmp_path / 'small.npy'}", "-o", str(y)], "expects (8, 784)"),
        (["run", str(mlp_lib), "--input", f"data={tmp_path / 'ints.npy'}", "-o", str(y)], "dtype"),
        (["run", str(mlp_lib), "--input", f"data={tmp_path / 'junk.npy'}", "-o", str(y)], "not a .npy file"),
        (["run", str(mlp_lib), "--input", f"label={tmp_path / 'small.npy'}", "-o", str(y)], "missing ['data']"),
        (["run", str(mlp_lib), "-o", str(y)], "missing ['data']"),
    ]
    for argv, msg in cases:
        rc, _, err = _run(capsys, argv)
        assert rc == 1 and msg in _one_line_error(err, "run"), err
    assert not y.exists()


def test_bench_library_and_jit(mlp_lib, capsys):
    rc, out, _ = _run(capsys, ["bench", str(mlp_lib), "--warmup", "1", "--repeat", "3", "--min-time", "0", "--json"])
    res = json.loads(out)
    assert rc == 0 and res["aot"]["calls"] >= 3 and res["aot"]["median_ms"] > 0
    rc, out, _ = _run(capsys, ["bench", *MLP, "--input", "data:8x784", "--warmup", "1", "--repeat", "3",
                               "--min-time", "0", "--compare", "-q", "--json"])
    res = json.loads(out)
    assert rc == 0 and set(res) == {"jit", "interpreter"}
    assert res["jit"]["throughput_per_s"] == pytest.approx(8 / (res["jit"]["median_ms"] / 1e3))


def test_bench_profile_lists_every_node_slowest_first(capsys):
    rc, out, _ = _run(capsys, ["bench", *LENET, "--input", "data:4x1x28x28", "--warmup", "1", "--repeat", "3",
                               "--min-time", "0", "--profile", "-q", "--json"])
    res = json.loads(out)
    rows = res["profile"]
    assert rc == 0 and res["jit"]["calls"] >= 3
    assert [r["ms"] for r in rows] == sorted((r["ms"] for r in rows), reverse=True)
    assert abs(sum(r["share"] for r in rows) - 1.0) < 1e-6 and all(r["ms"] >= 0 for r in rows)
    assert any(r["op"].startswith(("Convolution", "_conv_blocked", "_conv_pool")) for r in rows)
    rc, out, _ = _run(capsys, ["bench", *LENET, "--input", "data:4x1x28x28", "--warmup", "1", "--repeat", "3",
                               "--min-time", "0", "--profile", "2", "-q"])
    lines = out.splitlines()
    head = next(i for i, l in enumerate(lines) if l.startswith("per-node time inside the compiled graph"))
    assert rc == 0 and f"2 of {len(rows)} nodes" in lines[head] and len(lines) == head + 3


def test_bench_profile_rejects_a_negative_count(capsys):
    with pytest.raises(SystemExit) as e:
        main(["bench", *LENET, "--input", "data:4x1x28x28", "--profile", "-1", "-q"])
    assert e.value.code == 2 and "--profile: expected an integer >= 0, got -1" in capsys.readouterr().err


def test_inspect_json_and_text(capsys):
    rc, out, _ = _run(capsys, ["inspect", *LENET, "--input", "data:4x1x28x28", "--json"])
    data = json.loads(out)
    assert rc == 0 and data["passes"][-1] == "memory_plan" and data["fusion_groups"]
    assert data["memory_plan"].startswith("arena ")
    rc, out, _ = _run(capsys, ["inspect", *LENET, "--input", "data:4x1x28x28"])
    assert rc == 0 and "fusion groups (" in out and "memory plan: arena" in out


def test_viz_writes_pictures(tmp_path, capsys):
    dot_path = tmp_path / "net.dot"
    rc, _, _ = _run(capsys, ["viz", *LENET, "-o", str(dot_path)])
    assert rc == 0 and 'label="Convolution\n5x5/1x1, 16"' in dot_path.read_text()
    rc, _, _ = _run(capsys, ["viz", *LENET, "--input", "data:4x1x28x28", "--optimized", "-o",
                             str(tmp_path / "opt.dot"), "--memory-plan", str(tmp_path / "plan.svg")])
    assert rc == 0 and "subgraph cluster_" in (tmp_path / "opt.dot").read_text()
    assert (tmp_path / "plan.svg").read_text().startswith("<svg")
    if shutil.which("dot"):
        rc, _, _ = _run(capsys, ["viz", *LENET, "-o", str(tmp_path / "net.svg")])
        assert rc == 0 and "<svg" in (tmp_path / "net.svg").read_text()
    rc, _, err = _run(capsys, ["viz", *LENET, "-o", str(tmp_path / "net.bmp")])
    assert rc == 1 and "unknown format" in _one_line_error(err, "viz")
    rc, _, err = _run(capsys, ["viz", *LENET])
    assert rc == 1 and "nothing to draw" in _one_line_error(err, "viz")
    assert not (tmp_path / "net.bmp").exists()


def test_inspect_dump_passes_json_keeps_stdout_clean(capsys):
    rc, out, _ = _run(capsys, ["inspect", *MLP, "--input", "data:8x784", "--dump-passes", "--json"])
    data = json.loads(out)   # nothing but the JSON document on stdout
    assert rc == 0
    # every pass of the pipeline that applies to the host's target, in order (the blocked layout
    # and its channel padding only where the kernel library runs its AVX-512 paths)
    from symjit.codegen.llvm.target import compile_target
    from symjit.ir.target import applies_to
    from symjit.passes.manager import PIPELINES
    target = compile_target()
    expected = [name for name, fn in PIPELINES["inference"] if applies_to(fn, target)]
    assert list(data["ir_after_pass"]) == ["bind_constants", *expected]   # the parameters bound first
    assert ("blocked_layout" in data["ir_after_pass"]) == ("avx512" in target.kernels)
    assert data["ir_after_pass"]["infer"].startswith("graph ")
    import os
    assert "SYMJIT_DUMP_PASSES" not in os.environ


@pytest.mark.parametrize("command", ["bench", "inspect", "viz"])
def test_model_commands_reject_bad_files(command, tmp_path, capsys):
    (tmp_path / "bad.json").write_text("[1, 2")
    (tmp_path / "bad.params").write_bytes(b"\x00" * 3)
    extra = ["-o", str(tmp_path / "net.dot")] if command == "viz" else []
    for files, msg in (([str(tmp_path / "missing.json")], "does not exist"),
                       ([str(tmp_path / "bad.json")], "not valid JSON"),
                       ([MLP[0], str(tmp_path / "bad.params")], "not an MXNet .params file")):
        rc, out, err = _run(capsys, [command, *files, "--input", "data:8x784", *extra])
        assert rc == 1 and msg in _one_line_error(err, command) and out == ""
    rc, _, err = _run(capsys, [command, *MLP, "--input", "data:8x7", *extra])
    assert rc == 1 and "shape" in _one_line_error(err, command)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "bad.params"]


def test_inspect_infers_weight_shapes_from_the_data_shape(tmp_path):
    """Only inputs whose shapes cannot be inferred need --input (the mlp's weights follow from data)."""
    import subprocess
    import sys
    res = subprocess.run([sys.executable, "-m", "symjit.cli", "inspect", str(SMALL_MODELS / "mlp-symbol.json"),
                          "--input", "data:8x784"], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "fusion groups" in res.stdout


def test_progress_off_a_terminal_prints_only_notices(capsys):
    """Logs (stderr not a terminal) show the first-time-only slow steps and nothing else."""
    from symjit.cli import progress
    with progress(True, "loading") as report:
        report("optimizing")
        report("building the kernel library", notice=True)
    with progress(False, "loading") as report:          # --quiet
        report("building the kernel library", notice=True)
    assert capsys.readouterr().err == "symjit: building the kernel library\n"
