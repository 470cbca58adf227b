"""Fuzz worker: runs cases in this process and reports each result on a private pipe.

Protocol (driven by `fuzz_harness.run_cases`): stdin carries one request per line,
``KIND SEED START STOP``; for each index in [START, STOP) the worker writes
``BEGIN KIND INDEX`` before the case and ``END KIND INDEX STATUS DETAIL`` after it, where
STATUS is ``ok`` (DETAIL: ``ran`` or ``refused`` by an MXNetError) or ``bad`` (any other exception; DETAIL names
its type and message). The process's own stdout is redirected to stderr so nothing a case
prints can corrupt the protocol. A native crash kills the process: the harness sees the
BEGIN without its END.

Replay one case in the foreground: ``python tests/fuzz/fuzz_worker.py --replay KIND SEED INDEX``.
"""
from __future__ import annotations

import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def serve() -> None:
    report = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import warnings
    warnings.simplefilter("ignore")
    import fuzz_cases
    from symjit.base import MXNetError
    report.write("READY\n")
    for line in sys.stdin:
        kind, seed, start, stop = line.split()
        for index in range(int(start), int(stop)):
            report.write(f"BEGIN {kind} {index}\n")
            try:
                status, detail = "ok", fuzz_cases.run_case(kind, int(seed), index)
            except MXNetError:
                status, detail = "ok", "refused"
            except BaseException as e:  # noqa: BLE001 - every non-MXNetError escape is a finding
                tb = traceback.extract_tb(e.__traceback__)
                where = f"{os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else "?"
                status, detail = "bad", _one_line(f"{type(e).__name__} at {where}: {e}")
            report.write(f"END {kind} {index} {status} {detail}\n")
        report.write("DONE\n")


def replay(kind: str, seed: str, index: str) -> None:
    import fuzz_cases
    print(f"case ended normally: {fuzz_cases.run_case(kind, int(seed), int(index))}")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--replay":
        replay(*sys.argv[2:])
    else:
        serve()
