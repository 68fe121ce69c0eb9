"""`ioobserve doctor`: what this kernel and machine allow, and what ioobserve will use."""

from __future__ import annotations

from typing import Annotated

import typer

EPILOG = """Examples:

  sudo ioobserve doctor            # full table; exit 0 when recording can work

  sudo ioobserve doctor --quick    # skip the fentry load test (saves a compile)

The probes check compiles them the first time on a kernel or ioobserve version (~5 s) and
keeps the result, so that recordings start without a compile (make setup runs the doctor).
"""


def doctor(quick: Annotated[bool, typer.Option("--quick", help="Skip the fentry load test.")] = False) -> None:
    """Check privileges, BTF, headers, tracefs, tracepoints, kprobes, fentry, uprobes, ring buffer, cgroup v2, and that the probes load; list the interpreters and libraries running processes map."""
    from rich.console import Console
    from rich.table import Table

    from ioobserve.probes.capabilities import layer_plan, run_checks

    checks = run_checks(try_fentry=not quick)
    refused: dict[str, str] = {}  # layers whose programs this kernel's verifier refused
    if all(check.ok for check in checks if check.required):
        check, refused = probes_check()
        checks.append(check)
    table = Table(title="ioobserve doctor", title_justify="left")
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    for check in checks:
        status = "[green]ok[/]" if check.ok else ("[red]FAIL[/]" if check.required else "[yellow]absent[/]")
        table.add_row(check.name, status, check.detail)
    console = Console()
    console.print(table)
    plan = Table(title="layers", title_justify="left")
    plan.add_column("layer")
    plan.add_column("mechanism", overflow="fold")
    for layer, mechanism in {**layer_plan(checks), **{layer: f"unavailable: {why}" for layer, why in refused.items()}}.items():
        plan.add_row(layer, mechanism)
    console.print(plan)
    console.print(running_table())
    failed = [c for c in checks if c.required and not c.ok]
    if failed:
        console.print(f"[red]recording cannot work here:[/] {failed[0].name}: {failed[0].detail}")
        raise typer.Exit(1)
    console.print("[green]recording can work here[/]")


def running_table():
    """The interpreter and library files running processes map, as the uprobe layers see them."""
    from rich.table import Table

    from ioobserve.probes.attach.inventory import running_files

    table = Table(title="interpreters and libraries running now (paths inside their roots)", title_justify="left")
    for column in ("layer", "file", "processes", "status"):
        table.add_column(column, overflow="fold")
    for found in running_files():
        table.add_row(found.layer, found.shown, str(found.processes), found.status)
    return table


def probes_check():
    """Load the default layers' probes and verify their programs: the first time on a kernel
    (or ioobserve version) this compiles them, and keeps the result for every recording.
    The check, and the default layers unavailable here with why."""
    from ioobserve.collect.recording import load_probes
    from ioobserve.probes.build.compile import ProbeError
    from ioobserve.probes.build.headers import HeadersMissing
    from ioobserve.probes.build.object_cache import cache_dir
    from ioobserve.probes.capabilities import Check
    from ioobserve.probes.kernel.btf import BtfError

    try:
        probes = load_probes()
    except (ProbeError, HeadersMissing, BtfError, OSError) as exc:
        return Check("probes", False, str(exc), True), {}
    try:
        programs = probes.verify()
    except ProbeError as exc:
        return Check("probes", False, str(exc), True), {}
    finally:
        probes.close()
    how = "loaded from the compile kept" if probes.from_cache else "compiled, and the compile kept"
    return Check("probes", True, f"{how} in {cache_dir()}; {programs} programs pass the verifier "
                                 f"(syscall layer: {probes.entry.mechanism})", True), dict(probes.unavailable_layers)
