"""The dependency rules of DESIGN.md §3 that code review keeps forgetting: the trace package
reads and writes traces without any capture code, and the shared leaves import nothing of ours
but the schema."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "ioobserve"
CAPTURE = ("ioobserve.collect", "ioobserve.context", "ioobserve.python", "ioobserve.probes", "ioobserve.live")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "ioobserve":  # from ioobserve import schema
            found.update(f"ioobserve.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("module", sorted((PACKAGE / "trace").glob("*.py")), ids=lambda p: p.name)
def test_the_trace_package_imports_no_capture_code(module):
    assert not {name for name in _imports(module) if name.startswith(CAPTURE)}


@pytest.mark.parametrize("leaf", ["schema.py", "events.py", "model.py", "operations.py"])
def test_the_leaves_import_only_the_schema_and_the_event_layout(leaf):
    ours = {name for name in _imports(PACKAGE / leaf) if name.startswith("ioobserve")}
    assert ours <= {"ioobserve.schema", "ioobserve.events"}, ours


ABOVE_PROBES = ("ioobserve.collect", "ioobserve.cli", "ioobserve.serve", "ioobserve.live", "ioobserve.analysis", "tui")


@pytest.mark.parametrize("module", sorted((PACKAGE / "probes").rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_probes_import_nothing_above_them(module):
    """probes sits under collect (DESIGN.md §3): an import back up made the circle
    collect.recording -> probes.loader -> probes.capabilities -> collect.recording."""
    assert not {name for name in _imports(module) if name.startswith(ABOVE_PROBES)}


@pytest.mark.parametrize("module", ["kernel.py", "program_kind.py"])
def test_the_kernel_facts_are_a_leaf_of_the_probes(module):
    """Every layer's attach module, the doctor and the context ask probes.kernel; it asks none of them."""
    ours = {name for name in _imports(PACKAGE / "probes" / module) if name.startswith("ioobserve")}
    assert ours <= {"ioobserve.probes.bpf_syscall", "ioobserve.probes.host"}, ours


def test_the_host_view_is_a_leaf():
    """Where the host's root is (a container's mount of it): kernel facts and headers ask it."""
    assert not {name for name in _imports(PACKAGE / "probes" / "host.py") if name.startswith("ioobserve")}
