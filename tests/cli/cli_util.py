"""Helpers of the CLI tests: run `symjit` in-process and check its one-line errors."""
from __future__ import annotations

from symjit.cli import main


def run_cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `symjit ARGV`."""
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def one_line_error(err: str, command: str) -> str:
    """The error line of `symjit COMMAND`, after checking that it is the only line."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"symjit {command}: error: "), err
    assert "Traceback" not in err
    return lines[0]
