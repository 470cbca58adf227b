"""Start N worker processes of a distributed symjit program on this machine:

    python -m symjit.launch -n 2 -- python train.py [args...]

Wraps `mpiexec` (from the `mpich` wheel of `pip install 'symjit[mpi]'`, or any MPI on PATH).
Differences from a bare `mpiexec -n N cmd`:

* A worker that dies (a signal, an uncaught exception, a non-zero exit) is reported by name
  (`worker rank 1 was killed by signal SIGKILL`), and the other workers' pending KVStore or
  `symjit.distributed` operations fail at once with that message instead of waiting for
  SYMJIT_KV_TIMEOUT (each worker runs under a small supervisor that leaves a note in a launch
  directory; MPICH's own cleanup, which would kill them silently, is turned off).
* If workers are still running `--timeout` seconds (default: SYMJIT_KV_TIMEOUT + 30) after a
  worker failed, the launcher ends them: a job never hangs.
* Every line a worker prints (stdout and stderr) is prefixed with its rank (`[rank 1] ...`)
  and written whole, so the ranks' lines never interleave mid-line (workers run with
  PYTHONUNBUFFERED=1 unless it is set, so their lines appear as they are printed).
* `--rank0-output` keeps only rank 0's output on the terminal; the other ranks' output goes to
  files and is printed for a rank that fails.

The exit status is 0 when every worker exits 0, else the status of the worker that failed
first (128 + signal for a signal), also when the launcher had to end stalled workers after it. This file uses only the standard library: the supervisor runs it
as a script without importing symjit.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

__all__ = ["main", "find_mpiexec", "build_command"]

_WORKER_FLAG = "--symjit-worker"


def find_mpiexec(explicit: str | None = None) -> str | None:
    """mpiexec of this Python environment (the mpich wheel installs it next to python), else PATH."""
    if explicit:
        return shutil.which(explicit) or (explicit if os.path.exists(explicit) else None)
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.exists(here):
        return here
    return shutil.which("mpiexec") or shutil.which("mpirun")


def _is_hydra(mpiexec: str) -> bool:
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "HYDRA" in (out.stdout + out.stderr)


def build_command(mpiexec: str, n: int, launch_dir: str, cmd: list[str], rank0_output: bool,
                  hydra: bool) -> list[str]:
    """The mpiexec command line that runs `cmd` under the worker supervisor on `n` ranks."""
    full = [mpiexec, "-n", str(n)]
    if hydra:
        full.append("-disable-auto-cleanup")
    # run the supervisor as a module: running this file by path would put symjit/ first on
    # sys.path, where symjit/random.py shadows the standard library's `random`
    full += [sys.executable, "-m", "symjit.launch", _WORKER_FLAG, launch_dir,
             "1" if rank0_output else "0", "--", *cmd]
    return full


def _rank_from_env() -> int:
    for var in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0


def _describe(rc: int) -> str:
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = str(-rc)
        return f"was killed by signal {name}"
    return f"exited with status {rc}"


def _status(rc: int) -> int:
    """A Popen return code as an exit status (128 + signal for a signal)."""
    return 128 - rc if rc < 0 else rc


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


def _relay(pipe, fd: int, prefix: bytes, lock: threading.Lock) -> None:
    """Copy `pipe` to `fd` line by line, each line prefixed and written in one piece."""
    for line in iter(pipe.readline, b""):
        if not line.endswith(b"\n"):
            line += b"\n"
        with lock:
            try:
                _write_all(fd, prefix + line)
            except OSError:
                pass
    pipe.close()


def _worker(launch_dir: str, rank0_output: bool, cmd: list[str]) -> int:
    """Supervise one rank: run `cmd` with its output prefixed by the rank, forward signals,
    leave a note (status, time, message) if it fails."""
    rank = _rank_from_env()
    out = None
    if rank0_output and rank != 0:
        out = open(os.path.join(launch_dir, f"output.{rank}"), "wb")
    # Hydra (with auto-cleanup off) signals SIGUSR1 to a rank's process group when another rank
    # finishes; neither the supervisor nor the worker must die of it (ignoring survives exec)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")    # lines reach the terminal as they are printed
    relays = []
    try:
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=False, env=env)
    except OSError as e:
        rc, why, pid = 127, f"could not be started: {e}", "?"
    else:
        pid = child.pid
        lock = threading.Lock()
        prefix = f"[rank {rank}] ".encode()
        targets = (out.fileno(), out.fileno()) if out is not None else (sys.stdout.fileno(), sys.stderr.fileno())
        for pipe, fd in zip((child.stdout, child.stderr), targets):
            t = threading.Thread(target=_relay, args=(pipe, fd, prefix, lock), daemon=True)
            t.start()
            relays.append(t)

        def forward(signum, _frame):
            try:
                child.send_signal(signum)
            except OSError:
                pass
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, forward)
        rc = child.wait()
        why = _describe(rc)
    for t in relays:        # the rest of the output (a grandchild holding the pipes open is not waited for)
        t.join(timeout=2.0)
    if out is not None:
        out.close()
    status = _status(rc)
    if rc != 0:
        note = f"worker rank {rank} (pid {pid}) {why}"
        tmp = os.path.join(launch_dir, f".failed.{rank}")
        with open(tmp, "w") as f:
            json.dump({"status": status, "time": time.time(), "message": note}, f)
        os.replace(tmp, os.path.join(launch_dir, f"failed.{rank}"))
        print(f"symjit launch: {note}", file=sys.stderr, flush=True)
    return status


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="symjit launch", description="Run a distributed symjit program "
                                "on N local worker processes (MPI).")
    p.add_argument("-n", "--num-workers", type=int, required=True, help="number of worker processes")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds after a worker failure before the remaining workers are ended "
                        "(default: SYMJIT_KV_TIMEOUT + 30)")
    p.add_argument("--kv-timeout", type=float, default=None,
                   help="set SYMJIT_KV_TIMEOUT (seconds a worker waits for the others) for the job")
    p.add_argument("--mpiexec", default=None, help="the mpiexec to use")
    p.add_argument("--rank0-output", action="store_true",
                   help="show only rank 0's output; other ranks' output is shown if they fail")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- program and arguments")
    args = p.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        p.error("missing the program to run (after --)")
    if args.num_workers < 1:
        p.error("-n must be at least 1")
    args.command = cmd
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point of `symjit launch` / `python -m symjit.launch`; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [_WORKER_FLAG]:
        sep = argv.index("--")
        return _worker(argv[1], argv[2] == "1", argv[sep + 1:])
    args = _parse(argv)
    mpiexec = find_mpiexec(args.mpiexec)
    if mpiexec is None:
        print("symjit launch: mpiexec not found; install MPI with: pip install 'symjit[mpi]'",
              file=sys.stderr)
        return 2
    env = dict(os.environ)
    if args.kv_timeout is not None:
        env["SYMJIT_KV_TIMEOUT"] = str(args.kv_timeout)
    try:
        kv_timeout = float(env.get("SYMJIT_KV_TIMEOUT") or 300)
    except ValueError:
        kv_timeout = 300.0
    grace = args.timeout if args.timeout is not None else kv_timeout + 30
    launch_dir = tempfile.mkdtemp(prefix="symjit-launch-")
    env["SYMJIT_LAUNCH_DIR"] = launch_dir
    cmd = build_command(mpiexec, args.num_workers, launch_dir, args.command, args.rank0_output,
                        _is_hydra(mpiexec))
    try:
        proc = subprocess.Popen(cmd, env=env, start_new_session=True)
        failed_at = None
        while True:
            try:
                rc = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            except KeyboardInterrupt:
                os.killpg(proc.pid, signal.SIGINT)
                continue
            if failed_at is None and any(f.startswith("failed.") for f in os.listdir(launch_dir)):
                failed_at = time.monotonic()
            if failed_at is not None and time.monotonic() - failed_at > grace:
                print(f"symjit launch: workers still running {grace:g} s after a worker failed; "
                      "ending them", file=sys.stderr, flush=True)
                _end_group(proc)
        return _report(launch_dir, args.num_workers, rc)
    finally:
        shutil.rmtree(launch_dir, ignore_errors=True)


def _end_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except OSError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _failures(launch_dir: str) -> list[tuple[float, int, int]]:
    """(time, rank, exit status) of each failed rank's note, earliest first."""
    found = []
    for f in os.listdir(launch_dir):
        if not f.startswith("failed."):
            continue
        rank = int(f.split(".")[1])
        try:
            with open(os.path.join(launch_dir, f)) as fh:
                note = json.load(fh)
            found.append((float(note["time"]), rank, int(note["status"])))
        except (OSError, ValueError, KeyError, TypeError):
            found.append((float("inf"), rank, 1))
    return sorted(found)


def _report(launch_dir: str, n: int, rc: int) -> int:
    """Print the output files of failed ranks; the job's exit status: that of the rank that
    failed first (not the launcher's signal to stalled ranks after it), else mpiexec's."""
    failed = _failures(launch_dir)
    for _, rank, _ in sorted(failed, key=lambda f: f[1]):
        path = os.path.join(launch_dir, f"output.{rank}")
        if os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read()
            sys.stdout.write(f"---- output of worker rank {rank} ----\n")
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
    if failed:
        return failed[0][2] or 1
    return _status(rc)


if __name__ == "__main__":
    sys.exit(main())
