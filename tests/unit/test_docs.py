"""The documentation site (docs/, Sphinx with MyST) builds with warnings as errors: a page out
of the table of contents, a link to a missing page or section, a broken heading order each
fail it. The README stays what a newcomer reads first, the event's path names files that
exist, and every design rule a test cites is a section of docs/design.md."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README_MAX_LINES = 250


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    if importlib.util.find_spec("sphinx") is None:
        pytest.fail("Sphinx is missing: make setup installs it with MyST and Furo (the dev extras)")
    built = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(tmp_path)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "index.html").is_file() and (tmp_path / "how-it-works.html").is_file()


def test_the_readme_is_short_and_links_every_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", readme))
    pages = {page.name for page in DOCS.glob("*.md")} - {"index.md"}
    assert linked == pages, f"pages the README does not link: {pages - linked}; links to no page: {linked - pages}"
    assert "make demo" in readme and "make test" in readme


def _event_path() -> list[str]:
    """The files of the event's path, in the order docs/how-it-works.md lists them."""
    text = (DOCS / "how-it-works.md").read_text()
    section = text.split("## The event's path", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| `([^`]+)` \|", section, flags=re.M)
    assert [int(number) for number, _ in rows] == list(range(1, len(rows) + 1)), "the rows are numbered in order"
    return [path for _, path in rows]


def test_the_event_path_names_files_that_exist_and_says_how_many():
    path = _event_path()
    assert len(path) > 10 and len(set(path)) == len(path)
    assert [name for name in path if not (ROOT / name).is_file()] == []
    section = (DOCS / "how-it-works.md").read_text().split("## The event's path", 1)[1]
    assert f"It is {len(path)} files today" in section


def test_every_design_rule_a_test_cites_is_a_section_of_the_rules():
    sections = set(re.findall(r"^## (.+)$", (DOCS / "design.md").read_text(), flags=re.M))
    cited = set()
    for test in (ROOT / "tests").rglob("*.py"):
        cited.update(re.findall(r'docs/design\.md, "([^"]+)"', " ".join(test.read_text().split())))
    assert cited, "no test cites docs/design.md"
    assert cited <= sections, f"cited, but not a section of docs/design.md: {cited - sections}"
