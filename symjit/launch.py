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
* `--rank0-output` keeps only rank 0's output on the terminal; the other ranks' output goes to
  files and is printed for a rank that fails.

The exit status is 0 when every worker exits 0, else the first failing worker's status
(128 + signal for a signal). This file uses only the standard library: the supervisor runs it
as a script without importing symjit.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
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


def _worker(launch_dir: str, rank0_output: bool, cmd: list[str]) -> int:
    """Supervise one rank: run `cmd`, forward signals, leave a note if it fails."""
    rank = _rank_from_env()
    out = None
    if rank0_output and rank != 0:
        out = open(os.path.join(launch_dir, f"output.{rank}"), "wb")
    # Hydra (with auto-cleanup off) signals SIGUSR1 to a rank's process group when another rank
    # finishes; neither the supervisor nor the worker must die of it (ignoring survives exec)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        child = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT if out else None, close_fds=False)
    except OSError as e:
        rc, why = 127, f"could not be started: {e}"
    else:
        def forward(signum, _frame):
            try:
                child.send_signal(signum)
            except OSError:
                pass
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, forward)
        rc = child.wait()
        why = _describe(rc)
    if out is not None:
        out.close()
    if rc != 0:
        note = f"worker rank {rank} (pid {getattr(locals().get('child'), 'pid', '?')}) {why}"
        tmp = os.path.join(launch_dir, f".failed.{rank}")
        with open(tmp, "w") as f:
            f.write(note)
        os.replace(tmp, os.path.join(launch_dir, f"failed.{rank}"))
        print(f"symjit launch: {note}", file=sys.stderr, flush=True)
    return 128 - rc if rc < 0 else rc


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


def _report(launch_dir: str, n: int, rc: int) -> int:
    """Print the output files of failed ranks; the job's exit status."""
    failed = sorted(int(f.split(".")[1]) for f in os.listdir(launch_dir) if f.startswith("failed."))
    for rank in failed:
        path = os.path.join(launch_dir, f"output.{rank}")
        if os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read()
            sys.stdout.write(f"---- output of worker rank {rank} ----\n")
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
    if rc < 0:
        return 128 - rc
    if rc == 0 and failed:
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
