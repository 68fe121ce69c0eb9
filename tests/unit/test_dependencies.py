"""The dependency rules (docs/design.md, "Dependencies") that code review keeps forgetting, checked on the
closure of imports (an import of an import counts, lazy ones inside functions too): the trace
package reads and writes traces without any capture code, analysis needs no context code,
context needs no probes, the probes nothing above them, and the shared leaves import nothing
of ours but the schema."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ioobserve"
CAPTURE = ("ioobserve.collect", "ioobserve.context", "ioobserve.python", "ioobserve.live", "ioobserve.probes")
ABOVE_PROBES = ("ioobserve.collect", "ioobserve.cli", "ioobserve.serve", "ioobserve.live", "ioobserve.analysis", "ioobserve.tui")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[0] == "tui":  # installed as ioobserve.tui (setup.py)
        parts = ("ioobserve", *parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for package in ("ioobserve", "tui") for path in (ROOT / package).rglob("*.py")}


def _imports(path: Path) -> set[str]:
    """The names a module imports, anywhere in it; `from a import b` counts a.b where b is a module.
    A package's __init__ counts at its top level only: importing a submodule runs no more of it
    (ioobserve's own imports the reader lazily, for `ioobserve.load`)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if path.name == "__init__.py" else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names if f"{node.module}.{alias.name}" in MODULES)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@functools.cache
def _reached(module: str) -> frozenset[str]:
    """Every module of ours that importing `module` may import, its packages' __init__ included."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        for name in _imports(MODULES[todo.pop()]):
            parts = name.split(".")
            for package in (".".join(parts[:i]) for i in range(1, len(parts) + 1)):
                if package in MODULES and package not in seen:
                    seen.add(package)
                    todo.append(package)
    return frozenset(seen)


def _under(package: str) -> list[str]:
    return sorted(name for name in MODULES if name == package or name.startswith(package + "."))


def _crossing(module: str, forbidden: tuple[str, ...]) -> set[str]:
    return {name for name in _reached(module) if name.startswith(forbidden)}


@pytest.mark.parametrize("module", _under("ioobserve.trace"))
def test_the_trace_package_reaches_no_capture_code(module):
    assert not _crossing(module, CAPTURE)


@pytest.mark.parametrize("module", _under("ioobserve.analysis"))
def test_the_analysis_reaches_no_capture_code(module):
    """It reads traces; a constant taken from context/ once pulled the cgroup code and the probes in."""
    assert not _crossing(module, CAPTURE)


@pytest.mark.parametrize("module", _under("ioobserve.context"))
def test_the_context_reaches_no_probes(module):
    assert not _crossing(module, ("ioobserve.probes", "ioobserve.collect", "ioobserve.live"))


@pytest.mark.parametrize("module", _under("ioobserve.probes"))
def test_the_probes_reach_nothing_above_them(module):
    """probes sits under collect (docs/design.md, "Dependencies"): an import back up made the circle
    collect.recording -> probes.load.loader -> probes.capabilities -> collect.recording."""
    assert not _crossing(module, ABOVE_PROBES)


@pytest.mark.parametrize("leaf", ["data.schema", "data.events", "data.model", "data.operations", "plumbing.host"])
def test_the_leaves_import_only_the_schema_and_the_event_layout(leaf):
    assert _reached(f"ioobserve.{leaf}") <= {"ioobserve", "ioobserve.data", "ioobserve.data.schema", "ioobserve.data.events",
                                             "ioobserve.plumbing"}


@pytest.mark.parametrize("module", ["kernel.features", "kernel.program_kind"])
def test_the_kernel_facts_are_a_leaf_of_the_probes(module):
    """Every layer's attach module and the doctor ask probes.kernel.features; it asks none of them."""
    assert _reached(f"ioobserve.probes.{module}") <= {"ioobserve", "ioobserve.data", "ioobserve.data.events", "ioobserve.probes", "ioobserve.probes.kernel",
                                                      "ioobserve.probes.kernel.bpf_syscall", "ioobserve.probes.kernel.syscall_table"}


def test_an_import_of_an_import_is_followed():
    """The check itself: trace.reader does not import naming, but what it imports does."""
    assert "ioobserve.data.naming" not in _imports(MODULES["ioobserve.trace.read.reader"])
    assert "ioobserve.data.naming" in _reached("ioobserve.trace.read.reader")


def _unit(module: str) -> str:
    """The unit an import cycle is judged between: a subpackage of ioobserve (ioobserve.collect),
    or one of its top-level modules (ioobserve.cli.app is in ioobserve.cli)."""
    return ".".join(module.split(".")[:2])


def _unit_imports() -> dict[str, set[str]]:
    """Which units each unit's modules import (directly), itself left out."""
    edges: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        targets = {_unit(name) for name in _imports(path) if name in MODULES or name.rsplit(".", 1)[0] in MODULES}
        edges.setdefault(_unit(module), set()).update(targets - {_unit(module), "ioobserve"})
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of units that import each other round a circle (strongly connected, 2 or more)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups = []

    def visit(unit: str) -> None:  # Tarjan's algorithm
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        for other in sorted(edges.get(unit, ())):
            if other not in index:
                visit(other)
                low[unit] = min(low[unit], low[other])
            elif other in stack:
                low[unit] = min(low[unit], index[other])
        if low[unit] == index[unit]:
            group = []
            while (member := stack.pop()) != unit:
                group.append(member)
            group.append(unit)
            if len(group) > 1:
                groups.append(sorted(group))

    for unit in sorted(edges):
        if unit not in index:
            visit(unit)
    return groups


def test_no_import_cycle_between_packages():
    """collect and net once imported each other for three column names, and decode and net too."""
    assert _cycles(_unit_imports()) == []


def test_the_cycle_check_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
