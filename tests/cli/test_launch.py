"""`symjit launch`: the failing rank's exit status, whole prefixed lines, and the note a
distributed store gives when no launcher started the process. The launcher runs under a small
stand-in for mpiexec (N processes with PMI_RANK/PMI_SIZE set), so no MPI is needed."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

FAKE_MPIEXEC = f"""#!{sys.executable}
import os, subprocess, sys
args = sys.argv[1:]
if args[:1] == ["--version"]:
    print("stand-in mpiexec")
    sys.exit(0)
n = int(args[args.index("-n") + 1])
cmd = args[args.index("-n") + 2:]
procs = [subprocess.Popen(cmd, env={{**os.environ, "PMI_RANK": str(r), "PMI_SIZE": str(n)}}) for r in range(n)]
codes = [p.wait() for p in procs]
sys.exit(next((c for c in codes if c), 0) % 256)
"""


@pytest.fixture
def mpiexec(tmp_path) -> str:
    path = tmp_path / "mpiexec"
    path.write_text(FAKE_MPIEXEC)
    path.chmod(0o755)
    return str(path)


def _launch(mpiexec: str, script: Path, n: int = 2, *extra: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX_", "SYMJIT_LAUNCH"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    cmd = [sys.executable, "-m", "symjit.launch", "-n", str(n), "--mpiexec", mpiexec, *extra, "--",
           sys.executable, str(script)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def test_status_of_the_failing_rank_after_ending_a_stalled_one(tmp_path, mpiexec):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import os, sys, time
        if os.environ["PMI_RANK"] == "1":
            sys.exit(3)
        time.sleep(120)          # rank 0 stalls
    """))
    res = _launch(mpiexec, script, 2, "--timeout", "1")
    assert "ending them" in res.stderr, res.stderr
    assert "worker rank 1" in res.stderr and "exited with status 3" in res.stderr
    assert res.returncode == 3, (res.returncode, res.stderr)


def test_output_lines_are_whole_and_prefixed_with_the_rank(tmp_path, mpiexec):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import os, sys, time
        r = os.environ["PMI_RANK"]
        for i in range(40):
            sys.stdout.write(f"r{r}-")     # a line written in pieces
            sys.stdout.flush()
            time.sleep(0.002)
            sys.stdout.write(f"line{i}\\n")
            sys.stdout.flush()
        print(f"to stderr from {r}", file=sys.stderr)
        sys.stdout.write("no newline at the end")
    """))
    res = _launch(mpiexec, script, 2)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 2 * 41
    for line in lines:
        m = re.fullmatch(r"\[rank (\d)\] (?:r(\d)-line\d+|no newline at the end)", line)
        assert m and (m.group(2) is None or m.group(1) == m.group(2)), line
    assert "[rank 0] to stderr from 0" in res.stderr and "[rank 1] to stderr from 1" in res.stderr


def test_dist_store_without_a_launcher_says_it_trains_alone():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX_", "SYMJIT_LAUNCH"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    code = ("import symjit as mx\n"
            "a = mx.kv.create('dist_sync'); b = mx.kv.create('dist_sync')\n"
            "print(a.num_workers, b.num_workers)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["1", "1"]
    notes = [l for l in res.stderr.splitlines() if "not started by a launcher" in l]
    assert len(notes) == 1 and "single worker" in notes[0] and "symjit launch" in notes[0]
