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
