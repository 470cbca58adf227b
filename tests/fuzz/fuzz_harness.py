"""Run fuzz cases in a worker subprocess that survives nothing: when it dies (a signal) or
stops answering (a hang), the case it was running is recorded and a fresh worker continues
with the next case. See fuzz_worker.py for the protocol."""
from __future__ import annotations

import os
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz_worker.py")


@dataclass
class Finding:
    """A case that crashed, hung or raised something other than MXNetError."""
    kind: str
    seed: int
    index: int
    what: str

    def __str__(self) -> str:
        return (f"{self.kind} case {self.index} (seed {self.seed}): {self.what}  "
                f"[replay: python tests/fuzz/fuzz_worker.py --replay {self.kind} {self.seed} {self.index}]")


@dataclass
class Report:
    cases: int = 0
    findings: list = field(default_factory=list)
    restarts: int = 0
    outcomes: dict = field(default_factory=dict)   # "ran" / "refused" -> count of normal endings


def _no_core_dumps() -> None:
    """In the worker: a crash must not write a core file (thousands of cases may crash)."""
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class _Worker:
    def __init__(self):
        self.log = tempfile.TemporaryFile()
        env = dict(os.environ)
        here = os.path.dirname(WORKER)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen([sys.executable, WORKER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, env=env,
                                     preexec_fn=_no_core_dumps)
        self.buf = b""
        self.eof = False

    def send(self, line: str) -> None:
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def read_line(self, timeout: float) -> str | None:
        """The next protocol line, or None when the worker died or `timeout` passed."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                self.eof = True
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode("utf-8", "replace")

    def death(self) -> str:
        """Why the worker stopped: its signal or status, and the last line of its stderr."""
        if self.eof:   # it closed its pipe: let it finish dying to learn its signal
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        try:
            self.proc.kill()
        except OSError:
            pass
        rc = self.proc.wait()
        self.log.seek(0)
        tail = [ln for ln in self.log.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        how = f"killed by signal {-rc}" if rc < 0 else f"exited with status {rc}"
        return how + (f" ({tail[-1].strip()[:200]})" if tail else "")

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def run_cases(kind: str, seed: int, count: int, case_timeout: float = 60.0,
              start_timeout: float = 180.0) -> Report:
    """Run cases [0, count) of `kind` with `seed`; every crash, hang or non-MXNetError
    exception becomes a Finding and the run goes on with the next case."""
    report = Report()
    index = 0
    while index < count:
        worker = _Worker()
        if worker.read_line(start_timeout) != "READY":
            raise RuntimeError(f"fuzz worker did not start: {worker.death()}")
        worker.send(f"{kind} {seed} {index} {count}")
        current = None
        while True:
            line = worker.read_line(case_timeout)
            if line is None:
                if current is None:
                    raise RuntimeError(f"fuzz worker stopped between cases: {worker.death()}")
                timed_out = not worker.eof
                why = worker.death()
                what = f"hang (no result within {case_timeout:.0f} s)" if timed_out else f"crash: {why}"
                report.findings.append(Finding(kind, seed, current, what))
                report.cases += 1
                report.restarts += 1
                index = current + 1
                break
            if line == "DONE":
                worker.close()
                index = count
                break
            tag, _, rest = line.partition(" ")
            if tag == "BEGIN":
                current = int(rest.split()[1])
            elif tag == "END":
                parts = rest.split(" ", 3)
                report.cases += 1
                detail = parts[3] if len(parts) > 3 else ""
                if parts[2] == "bad":
                    report.findings.append(Finding(kind, seed, int(parts[1]), detail))
                else:
                    report.outcomes[detail] = report.outcomes.get(detail, 0) + 1
                current = None
    return report
