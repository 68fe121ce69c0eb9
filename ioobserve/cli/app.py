"""The `ioobserve` command line: one module per command, registered here."""

from __future__ import annotations

import sys

import typer

try:  # typer >= 0.22 carries its own copy of click
    from typer._click.exceptions import UsageError
except ImportError:  # older typer uses click itself
    from click.exceptions import UsageError

from ioobserve import __version__
from ioobserve.cli import analyze, diff, doctor, export, index, job, record, report, serve, top

app = typer.Typer(
    name="ioobserve",
    help="System-wide file I/O observer for HPC and AI nodes (eBPF).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(asked: bool) -> None:
    if asked:
        print(f"ioobserve {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """System-wide file I/O observer for HPC and AI nodes (eBPF)."""


app.command("analyze", epilog=analyze.EPILOG)(analyze.analyze)
app.command("diff", epilog=diff.EPILOG)(diff.diff)
app.command("doctor", epilog=doctor.EPILOG)(doctor.doctor)
app.command("export", epilog=export.EPILOG)(export.export)
app.command("index", epilog=index.EPILOG)(index.index)
app.command("job", epilog=job.EPILOG)(job.job)
app.command("report", epilog=report.EPILOG)(report.report)
app.command("serve", epilog=serve.EPILOG)(serve.serve)
app.command("top", epilog=top.EPILOG)(top.top)
app.command(
    "record", epilog=record.EPILOG, context_settings={"allow_interspersed_args": False}
)(record.record)


def main() -> None:
    """Console-script entry point: usage errors become one line, exit 2."""
    try:
        code = app(standalone_mode=False)
    except UsageError as exc:
        if not exc.format_message():  # bare `ioobserve`: the help was the answer
            sys.exit(0)
        where = exc.ctx.command_path if exc.ctx else "ioobserve"
        print(f"ioobserve: error: {exc.format_message()} (see '{where} --help')", file=sys.stderr)
        sys.exit(2)
    except typer.Abort:
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
