"""One clear line and a non-zero exit for a user's mistake; never a traceback."""

from __future__ import annotations

import sys
from typing import NoReturn

import typer

EXIT_USAGE = 2
EXIT_FAILURE = 1
EXIT_INCOMPLETE = 3  # `record` without a command: the trace misses events the disk did not take


class UserError(Exception):
    """Bad input or an unmet precondition; the message says what is wrong and what to do."""


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print `ioobserve: error: message` and exit."""
    print(f"ioobserve: error: {message}", file=sys.stderr)
    raise typer.Exit(code)


def fail_probes(exc: Exception) -> NoReturn:
    """The probes' failure as one line: a host that is not ready is the user's to fix (exit 2,
    the message says how); anything else points to the doctor (exit 1)."""
    from ioobserve.probes.build.compile import HostNotReady

    if isinstance(exc, HostNotReady):
        fail(str(exc))
    fail(f"{exc} (run 'ioobserve doctor' to see what this kernel allows)", EXIT_FAILURE)
