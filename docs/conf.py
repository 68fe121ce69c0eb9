"""The documentation site: Sphinx with MyST (Markdown pages), Furo's theme. Built with warnings
as errors by the suite (tests/unit/test_docs.py) and by `make docs` into docs/_build/html."""

project = "ioobserve"
author = "the ioobserve developers"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3  # links to a page's sections by their titles (#the-trace)
nitpicky = True  # a reference to nothing is a warning, so an error in the build
html_theme = "furo"
html_title = "ioobserve"
html_static_path: list[str] = []
