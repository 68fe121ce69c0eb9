"""`ioobserve job start|stop ID`: tell a running `serve` that a job started or ended (the
scheduler's prolog and epilog call it)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated

import typer

from ioobserve.cli.errors import EXIT_FAILURE, fail

EPILOG = """Examples:

  sudo ioobserve job start 81234      # from the Slurm prolog: record job 81234's trace
  sudo ioobserve job stop 81234       # from the epilog: close it
"""
ANSWER_TIMEOUT_S = 30.0


def job(
    action: Annotated[str, typer.Argument(help="start or stop")],
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job id (e.g. $SLURM_JOB_ID).")],
    socket_path: Annotated[Path, typer.Option("--socket", help="The daemon's socket.")] = Path("/run/ioobserve/events.sock"),
) -> None:
    """Start or stop the recording of one job's trace by the running `ioobserve serve`."""
    if action not in ("start", "stop"):
        fail(f"{action!r}: expected start or stop")
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(ANSWER_TIMEOUT_S)
    try:
        client.connect(str(socket_path))
        client.sendall(f"{action} {job_id}\n".encode())
        answer = client.makefile("rb").readline().decode(errors="replace").strip()
    except (FileNotFoundError, ConnectionRefusedError):
        fail(f"no ioobserve serve listens on {socket_path} (is the service running?)", EXIT_FAILURE)
    except OSError as exc:
        fail(f"{socket_path}: {exc.strerror or exc}", EXIT_FAILURE)
    finally:
        client.close()
    if not answer.startswith("ok"):
        fail(f"serve says: {answer.removeprefix('error: ') or 'nothing (it stopped?)'}", EXIT_FAILURE)
    print(f"ioobserve: {answer.removeprefix('ok ')}")
