"""Inter-process communication for the distributed KVStores and `symjit.distributed`.

`get()` returns the process's one `Communicator`:

* `MPIComm` when the process was started by an MPI launcher (`mpiexec`, `symjit launch`):
  collectives over a duplicate of MPI_COMM_WORLD through mpi4py (imported only then);
* `LocalComm` otherwise: a 1-process group whose collectives return their input.

Never hang forever. Every MPI operation is a non-blocking one into the caller's buffers,
started and completed by the calling thread (so collectives keep the program's order; and MPI
never matches a blocking collective with a non-blocking one, so none may be blocking). `_wait`
polls its requests: without pause at first (MPI progresses only inside the polls; most
collectives complete within the spin), then with short sleeps, so a worker that waits for a
late or stalled peer leaves its core to others. An operation still pending `SYMJIT_KV_TIMEOUT`
seconds (default 300) after its start raises MXNetError naming it, and the communicator becomes
unusable (every later operation raises at once: the workers' collective sequences can no longer
be matched). Under `symjit launch` a worker that dies leaves a note in the launch directory and
the others fail as soon as they see it, not at the deadline. A watchdog thread ends the process
(exit status 1, with a message on stderr) if an operation outlives its deadline by a grace
period anyway; at exit a polled barrier precedes MPI_Finalize (itself under faulthandler's
C-level timer, since it holds the GIL), and a process whose group broke, or that ends with an
uncaught exception, skips both, so its peers fail fast instead of waiting.

The timeout bounds how long a worker waits for the others at one collective, so it must be
longer than the longest time workers may drift apart between two collectives.
"""
from __future__ import annotations

import atexit
import faulthandler
import hashlib
import itertools
import os
import pickle
import socket
import sys
import threading
import time

import numpy as np

from ..base import MXNetError

__all__ = ["get", "kv_timeout", "launched_size", "Communicator", "LocalComm", "MPIComm", "OPS"]

ENV_TIMEOUT = "SYMJIT_KV_TIMEOUT"
ENV_LAUNCH_DIR = "SYMJIT_LAUNCH_DIR"
DEFAULT_TIMEOUT = 300.0
#: `MPIComm._wait` polls its requests without pause for this long (seconds) ...
SPIN_S = 0.01
#: ... then sleeps between polls, starting at SLEEP_MIN_S and doubling up to SLEEP_MAX_S
SLEEP_MIN_S = 50e-6
SLEEP_MAX_S = 0.001
#: ... until two polls in a row take more CPU time than this: they moved data, so polling
#: without pause resumes (CPU time, not wall time: a poll the scheduler interrupted did not
#: move data; two: MPI's progress engine makes a lone idle poll that slow now and then, and on
#: a busy machine often enough that each sent the waiting worker back to a 10 ms spin)
BUSY_TEST_S = 50e-6
#: seconds between two looks for the launcher's notes of dead workers, while waiting
PEER_CHECK_S = 0.2
#: reduction operations by name
OPS = ("sum", "min", "max", "prod")


def kv_timeout() -> float:
    """Seconds a worker waits for the others at one operation (env SYMJIT_KV_TIMEOUT)."""
    raw = os.environ.get(ENV_TIMEOUT, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise MXNetError(f"{ENV_TIMEOUT} must be a number of seconds, got {raw!r}") from None
    if not value > 0:
        raise MXNetError(f"{ENV_TIMEOUT} must be positive, got {raw!r}")
    return value


def launched_size() -> int | None:
    """Number of processes of the MPI job this process belongs to, from the launcher's
    environment (MPICH/Hydra, Open MPI, MVAPICH, Slurm+PMI), or None when not launched."""
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "PMIX_SIZE"):
        raw = os.environ.get(var)
        if raw:
            try:
                return int(raw)
            except ValueError:
                continue
    if os.environ.get("PMI_RANK") or os.environ.get("PMIX_RANK"):
        return 0  # launched, size unknown until MPI is up
    return None


# ------------------------------------------------------------------------------------------------
# watchdog
# ------------------------------------------------------------------------------------------------

class _Watchdog:
    """Ends the process when a guarded operation outlives its deadline by a grace period.

    Guarded operations normally raise by themselves at their deadline; the watchdog is the
    last resort for code that cannot poll (a blocking MPI call inside MPI_Finalize).
    Every operation arms it, so `arm` and `disarm` take no lock (one dict operation each,
    atomic under the GIL); the lock only starts the thread once."""

    def __init__(self):
        self._lock = threading.Lock()
        self._active: dict[int, tuple[float, str]] = {}
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, what: str, timeout: float) -> int:
        """Watch the operation `what` from now on; the token to `disarm` it with."""
        if self._thread is None:
            self._start()
        token = next(self._tokens)
        self._active[token] = (time.monotonic() + timeout + max(5.0, 0.25 * timeout), what)
        return token

    def disarm(self, token: int) -> None:
        self._active.pop(token, None)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="symjit-kv-watchdog", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(0.25)
            now = time.monotonic()
            late = [what for deadline, what in list(self._active.values()) if now > deadline]
            if late:
                try:
                    sys.stdout.flush()
                except Exception:  # noqa: BLE001 - stdout may be gone; the message goes to stderr
                    pass
                os.write(2, (f"symjit.kvstore: {late[0]} is stuck past its deadline "
                             f"({ENV_TIMEOUT}); a peer worker died or stalled. Exiting.\n").encode())
                os._exit(1)


WATCHDOG = _Watchdog()


# ------------------------------------------------------------------------------------------------
# communicators
# ------------------------------------------------------------------------------------------------

class Communicator:
    """A group of worker processes; collective operations on numpy arrays and Python objects.

    Every worker must call the same collectives in the same order. Arrays are C-contiguous."""

    rank = 0
    size = 1
    local_rank = 0
    local_size = 1

    def allreduce(self, sends: list[np.ndarray], recvs: list[np.ndarray], op: str = "sum",
                  what: str = "allreduce") -> None:
        """recvs[i] = reduction of sends[i] over all workers (sends[i] may be recvs[i])."""
        raise NotImplementedError

    def bcast(self, arrays: list[np.ndarray], root: int = 0, what: str = "broadcast") -> None:
        """Overwrite `arrays` on every worker with root's."""
        raise NotImplementedError

    def bcast_obj(self, obj, root: int = 0, what: str = "broadcast"):
        raise NotImplementedError

    def allgather_obj(self, obj, what: str = "allgather") -> list:
        raise NotImplementedError

    def allgather(self, array: np.ndarray, what: str = "allgather") -> np.ndarray:
        """Concatenation along axis 0 of every worker's array (first dimensions may differ)."""
        raise NotImplementedError

    def barrier(self, what: str = "barrier") -> None:
        raise NotImplementedError

    def check(self) -> None:
        """Raise if this communicator is unusable."""


class LocalComm(Communicator):
    """The 1-worker group of a process that was not started by an MPI launcher."""

    def allreduce(self, sends, recvs, op="sum", what="allreduce"):
        _check_op(op)
        for s, r in zip(sends, recvs):
            if s is not r:
                r[...] = s

    def bcast(self, arrays, root=0, what="broadcast"):
        _check_root(root, 1)

    def bcast_obj(self, obj, root=0, what="broadcast"):
        _check_root(root, 1)
        return obj

    def allgather_obj(self, obj, what="allgather"):
        return [obj]

    def allgather(self, array, what="allgather"):
        return np.array(array, copy=True)

    def barrier(self, what="barrier"):
        pass


def _check_op(op: str) -> None:
    if op not in OPS:
        raise MXNetError(f"unknown reduction {op!r}; expected one of {OPS}")


def _check_root(root: int, size: int) -> None:
    if not isinstance(root, (int, np.integer)) or not 0 <= root < size:
        raise MXNetError(f"root rank must be in [0, {size}), got {root!r}")


class MPIComm(Communicator):
    """Workers of an MPI job (mpi4py), with deadline-polled non-blocking operations."""

    def __init__(self):
        try:
            import mpi4py
        except ImportError:
            raise MXNetError("this process was started by an MPI launcher but mpi4py is not installed; "
                             "install the MPI extra: pip install 'symjit[mpi]'") from None
        if "mpi4py.MPI" not in sys.modules:
            mpi4py.rc.finalize = False  # finalized by _finalize, which skips it after a failure
            self._own_finalize = True
        else:
            self._own_finalize = False
        from mpi4py import MPI
        self.MPI = MPI
        self.timeout = kv_timeout()
        self._broken: str | None = None
        self._launch_dir = os.environ.get(ENV_LAUNCH_DIR) or None
        self._next_peer_check = 0.0
        self._abandoned: list = []  # requests of failed operations (see _wait)
        world = MPI.COMM_WORLD
        world.Set_errhandler(MPI.ERRORS_RETURN)
        self.rank = world.Get_rank()
        self.size = world.Get_size()
        comm, req = world.Idup()
        self._wait([req], "creating the worker group")
        comm.Set_errhandler(MPI.ERRORS_RETURN)
        self.comm = comm
        self._ops = {"sum": MPI.SUM, "min": MPI.MIN, "max": MPI.MAX, "prod": MPI.PROD}
        host = int.from_bytes(hashlib.sha1(socket.gethostname().encode()).digest()[:8], "little") >> 1
        hosts = np.empty(self.size, np.int64)
        self._wait([comm.Iallgather(np.array([host], np.int64), hosts)], "exchanging host names")
        self.local_rank = int(np.sum(hosts[: self.rank] == host))
        self.local_size = int(np.sum(hosts == host))
        atexit.register(self._finalize)

    # ---- failure handling ----------------------------------------------------------------------
    def check(self) -> None:
        if self._broken is not None:
            raise MXNetError(f"the worker group is unusable after an earlier failure: {self._broken}")

    def _fail(self, message: str) -> None:
        self._broken = message
        raise MXNetError(message)

    def dup(self):
        """A new MPI communicator over the same workers (collective)."""
        self.check()
        comm, req = self.comm.Idup()
        self._wait([req], "creating a communicator")
        comm.Set_errhandler(self.MPI.ERRORS_RETURN)
        return comm

    def _dead_peers(self) -> list[str]:
        """Notes left by `symjit launch` for workers that died or failed."""
        if self._launch_dir is None:
            return []
        try:
            names = os.listdir(self._launch_dir)
        except OSError:
            return []
        notes = []
        for name in sorted(names):
            if name.startswith("failed.") and name != f"failed.{self.rank}":
                try:
                    with open(os.path.join(self._launch_dir, name)) as f:
                        notes.append(f.read().strip())
                except OSError:
                    continue
        return notes

    def _wait(self, reqs: list, what: str) -> None:
        """Complete the requests `reqs` (started by this thread); MXNetError at the deadline, on
        an MPI error, or when a peer worker is known to have died.

        Invariants: returns only once every request completed. Otherwise the group is broken
        (`check` raises from then on: the workers' sequences of operations no longer match),
        and the pending requests stay referenced by `_abandoned`, so neither they nor their
        buffers are freed while MPI may still use them."""
        self.check()
        MPI = self.MPI
        test = reqs[0].Test if len(reqs) == 1 else (lambda: MPI.Request.Testall(reqs))
        token = WATCHDOG.arm(what, self.timeout)
        try:
            self._poll(test, what)
        except BaseException as e:  # a failure, or an interruption (KeyboardInterrupt)
            self._abandoned.append(reqs)
            if isinstance(e, MPI.Exception):
                self._fail(f"{what} failed on rank {self.rank}: MPI error: {e.Get_error_string()}")
            if self._broken is None:
                self._broken = f"{what} was interrupted on rank {self.rank}"
            raise
        finally:
            WATCHDOG.disarm(token)

    def _poll(self, test, what: str) -> None:
        """Call `test()` until it returns True: without pause (`_spin`), then with sleeps in
        between (`_doze`) until data moves again, and so on."""
        start = time.monotonic()
        while not _spin(test):
            if self._doze(test, what, start):
                return

    def _doze(self, test, what: str, start: float) -> bool:
        """Call `test()` with sleeps in between (SLEEP_MIN_S, doubling up to SLEEP_MAX_S), so a
        worker that waits for a late or stalled peer leaves its core to others. True once
        `test()` returned True; False as soon as two calls in a row took over BUSY_TEST_S (after
        a slow one the next comes after SLEEP_MIN_S): they moved data, the peers are in, and the
        caller should spin again. MXNetError (`_check_deadline`) when
        the operation begun at `start` cannot complete."""
        nap = SLEEP_MIN_S
        busy = False
        while True:
            self._check_deadline(what, start, time.monotonic())
            time.sleep(nap)
            nap = min(2 * nap, SLEEP_MAX_S)
            t = time.thread_time()   # CPU time: a poll descheduled on a busy machine moved nothing
            if test():
                return True
            if time.thread_time() - t <= BUSY_TEST_S:
                busy = False
            elif busy:
                return False
            else:   # one slow poll: look again soon, spin if that one is slow too
                busy, nap = True, SLEEP_MIN_S

    def _check_deadline(self, what: str, start: float, now: float) -> None:
        """Raise MXNetError (breaking the group) when the launcher reports a dead peer worker
        (looked for at most every PEER_CHECK_S) or when the operation begun at `start` is
        past its deadline."""
        if now >= self._next_peer_check:
            self._next_peer_check = now + PEER_CHECK_S
            dead = self._dead_peers()
            if dead:
                self._fail(f"{what} failed on rank {self.rank}: {'; '.join(dead)}")
        if now - start > self.timeout:
            self._fail(f"{what} did not complete within {self.timeout:g} s on rank {self.rank} "
                       f"of {self.size}: a peer worker died, stalled or skipped the operation "
                       f"(timeout set by {ENV_TIMEOUT})")

    def _run(self, what: str, start, items) -> None:
        """`start(item)` (a non-blocking operation; returns its request) for each item, then
        complete them all (`_wait`). An error while starting breaks the group, as a failure
        in `_wait` does: the other workers may have started operations this one never will."""
        self.check()
        reqs = []
        try:
            for item in items:
                reqs.append(start(item))
        except Exception as e:  # noqa: BLE001 - reported as the operation's failure
            self._abandoned.append(reqs)
            text = (f"MPI error: {e.Get_error_string()}" if isinstance(e, self.MPI.Exception)
                    else f"{type(e).__name__}: {e}")
            self._fail(f"{what} failed on rank {self.rank}: {text}")
        self._wait(reqs, what)

    # ---- collectives -----------------------------------------------------------------------------
    def allreduce(self, sends, recvs, op="sum", what="allreduce"):
        _check_op(op)
        for r in recvs:
            if r.dtype == np.bool_:
                raise MXNetError(f"{what}: bool arrays cannot be reduced")
        mop, in_place, comm = self._ops[op], self.MPI.IN_PLACE, self.comm

        def start(pair):  # into the receive buffer itself: no copies
            s, r = pair
            return comm.Iallreduce(in_place if s is r else s, r, mop)
        self._run(what, start, zip(sends, recvs))

    def bcast(self, arrays, root=0, what="broadcast"):
        _check_root(root, self.size)
        self.check()
        reqs = [self.comm.Ibcast(_bytes_view(a), root=root) for a in arrays]
        self._wait(reqs, what)

    def bcast_obj(self, obj, root=0, what="broadcast"):
        _check_root(root, self.size)
        data = np.frombuffer(pickle.dumps(obj), np.uint8) if self.rank == root else None
        n = np.array([0 if data is None else data.size], np.int64)
        self.bcast([n], root, what)
        buf = data if data is not None else np.empty(int(n[0]), np.uint8)
        self.bcast([buf], root, what)
        return obj if self.rank == root else pickle.loads(buf.tobytes())

    def allgather_obj(self, obj, what="allgather"):
        data = np.frombuffer(pickle.dumps(obj), np.uint8)
        sizes = self._gather_counts(data.size, what)
        out = np.empty(int(sizes.sum()), np.uint8)
        self.check()
        self._wait([self.comm.Iallgatherv(data, [out, sizes])], what)
        offs = np.concatenate([[0], np.cumsum(sizes)])
        return [pickle.loads(out[offs[i]:offs[i + 1]].tobytes()) for i in range(self.size)]

    def _gather_counts(self, n: int, what: str) -> np.ndarray:
        counts = np.empty(self.size, np.int64)
        self.check()
        self._wait([self.comm.Iallgather(np.array([n], np.int64), counts)], what)
        return counts

    def allgather(self, array, what="allgather"):
        array = np.ascontiguousarray(array)
        metas = self.allgather_obj((array.shape[1:], array.dtype.str, array.ndim), what)
        for r, m in enumerate(metas):
            if m != metas[0]:
                raise MXNetError(f"{what}: workers disagree on the array: rank 0 has trailing shape "
                                 f"{metas[0][0]} dtype {np.dtype(metas[0][1]).name}, rank {r} has "
                                 f"{m[0]} {np.dtype(m[1]).name}")
        if array.ndim == 0:
            array = array.reshape(1)
        counts = self._gather_counts(array.nbytes, what)
        out = np.empty(int(counts.sum()), np.uint8)
        self._wait([self.comm.Iallgatherv(_bytes_view(array), [out, counts])], what)
        return out.view(array.dtype).reshape((-1,) + array.shape[1:])

    def barrier(self, what="barrier"):
        self.check()
        self._wait([self.comm.Ibarrier()], what)

    # ---- exit ----------------------------------------------------------------------------------
    def _finalize(self) -> None:
        """At interpreter exit: a polled exit barrier, then MPI_Finalize (which would wait
        forever for a lost peer). Both are skipped when the group broke or the program is
        ending with an uncaught exception (its workers then fail fast instead of waiting)."""
        MPI = self.MPI
        failing = self._broken is not None or hasattr(sys, "last_value") or hasattr(sys, "last_exc")
        if not failing:
            try:
                self.barrier("the exit barrier (all workers finishing)")
            except MXNetError as e:
                print(f"symjit.kvstore: {e}", file=sys.stderr, flush=True)
                failing = True
        if failing:
            if not self._own_finalize:  # mpi4py would call MPI_Finalize and wait for the lost peer
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(1)
            return
        if self._own_finalize and MPI.Is_initialized() and not MPI.Is_finalized():
            # MPI_Finalize holds the GIL: faulthandler's C-level timer is the watchdog here
            faulthandler.dump_traceback_later(self.timeout + 5.0, exit=True)
            try:
                MPI.Finalize()
            finally:
                faulthandler.cancel_dump_traceback_later()


#: gives the core to another runnable process, if any (cheap when there is none)
_yield_core = getattr(os, "sched_yield", lambda: time.sleep(0))


def _spin(test) -> bool:
    """Call `test()` without pause for up to SPIN_S seconds (MPI moves data only inside it:
    there is no progress thread); whether it returned True. Each unsuccessful poll yields the
    core, as MPICH's own blocking waits do: on an oversubscribed machine a peer sharing this
    core then runs at once, instead of at the end of this process's time slice."""
    end = time.monotonic() + SPIN_S
    while not test():
        if time.monotonic() >= end:
            return False
        _yield_core()
    return True


def _bytes_view(a: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous array (so any dtype, bool and float16 included, travels)."""
    if not a.flags.c_contiguous:
        raise MXNetError("internal error: communication buffers must be C-contiguous")
    return a.reshape(-1).view(np.uint8)


_COMM: Communicator | None = None
_COMM_LOCK = threading.Lock()


def get() -> Communicator:
    """The process's communicator (created on first use; under a launcher, collectively)."""
    global _COMM
    with _COMM_LOCK:
        if _COMM is None:
            _COMM = MPIComm() if launched_size() is not None else LocalComm()
        return _COMM
