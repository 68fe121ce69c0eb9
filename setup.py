"""The compiled core's build and the package list (everything else is in pyproject.toml): plain
C against CPython's API, built from source by `make setup` with the distribution's compiler;
nothing downloaded. The Textual app lives at the repository's top (tui/) and installs as
ioobserve.tui. A wheel also carries the probes' C sources (ebpf_probes/) as
ioobserve/ebpf_probes, where an installed loader looks for them (a checkout's loader reads
ebpf_probes/ itself)."""

import shutil
from pathlib import Path

from setuptools import Extension, find_namespace_packages, setup
from setuptools.command.build_py import build_py

PROBES = Path(__file__).resolve().parent / "ebpf_probes"


class BuildWithProbes(build_py):
    """build_py, then the probes' sources copied into the built package."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install runs from the checkout, probes included
            return
        target = Path(self.build_lib) / "ioobserve" / "ebpf_probes"
        target.mkdir(parents=True, exist_ok=True)
        for source in sorted(PROBES.glob("*.[ch]")):
            shutil.copyfile(source, target / source.name)


setup(packages=[*find_namespace_packages(include=["ioobserve", "ioobserve.*"], exclude=["*.__pycache__"]), "ioobserve.tui"],
      package_dir={"ioobserve.tui": "tui"},
      cmdclass={"build_py": BuildWithProbes}, ext_modules=[Extension(
    "ioobserve._core",
    sources=[f"ioobserve/csrc/{name}.c" for name in ("module", "lines", "parse", "aux", "linetable", "match", "stack_records", "stacks", "table")],
    depends=[f"ioobserve/csrc/{name}.h" for name in ("core", "linetable", "stacks", "table")],
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-fno-strict-aliasing"],
)])
