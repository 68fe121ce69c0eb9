"""Tests share their helpers through support modules (tests/kernel/serve_support.py,
tests/sample_trace.py, ...) or a conftest, never through another test module: a test file can
then be renamed, split or run alone, and its private names stay its own."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _is_test_module(name: str) -> bool:
    return name.rsplit(".", 1)[-1].startswith("test_")


def _test_modules_imported(path: Path) -> list[str]:
    """The test modules (test_*.py under tests/) that this file imports, anywhere in it."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests"):
            found += [node.module] if _is_test_module(node.module) else [
                f"{node.module}.{alias.name}" for alias in node.names if _is_test_module(alias.name)]
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("tests.") and _is_test_module(alias.name)]
    return found


def test_no_test_module_imports_another():
    offenders = {str(path.relative_to(TESTS)): imported for path in sorted(TESTS.rglob("*.py"))
                 if (imported := _test_modules_imported(path))}
    assert offenders == {}, "move the shared names into a support module or a conftest"


def test_the_check_sees_each_form_of_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from tests.kernel.test_serve import Service\nfrom tests.kernel import test_serve\n"
                      "import tests.unit.test_index\nfrom tests.kernel.serve_support import Service\n")
    assert _test_modules_imported(module) == ["tests.kernel.test_serve", "tests.kernel.test_serve", "tests.unit.test_index"]
