"""The sizes a newcomer can read in one sitting (docs/design.md, "Code shape"): no module of the
package over 400 lines, no class over 20 methods, no function body over 60 lines. A command's
options are declarations, one a line, so a function is measured from its body's first
statement after the docstring."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_MODULE_LINES, MAX_METHODS, MAX_BODY_LINES = 400, 20, 60


def _sources() -> list[Path]:
    return sorted(path for package in ("ioobserve", "tui") for path in (ROOT / package).rglob("*.py"))


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = node.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return node.end_lineno - body[0].lineno + 1


def _oversized(path: Path) -> list[str]:
    text = path.read_text()
    where = path.relative_to(ROOT)
    found = []
    if len(text.splitlines()) > MAX_MODULE_LINES:
        found.append(f"{where}: {len(text.splitlines())} lines")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef):
            methods = [item for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))]
            if len(methods) > MAX_METHODS:
                found.append(f"{where}: class {node.name} has {len(methods)} methods")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _body_lines(node) > MAX_BODY_LINES:
            found.append(f"{where}:{node.lineno}: {node.name}'s body is {_body_lines(node)} lines")
    return found


def test_no_module_class_or_function_is_too_big_to_read():
    assert len(_sources()) > 100, "the package's sources were not found"
    found = [problem for path in _sources() for problem in _oversized(path)]
    assert not found, "split these (a module by job, a class by role, a function by step):\n" + "\n".join(found)


def test_the_measure_sees_an_oversized_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_BODY_LINES + 1))
    source = tmp_path / "big.py"
    source.write_text(f'def big():\n    """A docstring."""\n{body}\n')
    tree = ast.parse(source.read_text())
    assert _body_lines(tree.body[0]) == MAX_BODY_LINES + 1
