"""The `ioobserve` command line: one module per command, registered here."""

from __future__ import annotations

import typer

from ioobserve.cli import doctor, record

app = typer.Typer(
    name="ioobserve",
    help="System-wide file I/O observer for HPC and AI nodes (eBPF).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("doctor", epilog=doctor.EPILOG)(doctor.doctor)
app.command(
    "record", epilog=record.EPILOG, context_settings={"allow_interspersed_args": False}
)(record.record)


def main() -> None:
    """Console-script entry point."""
    app()
