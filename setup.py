"""The compiled core's build (everything else is in pyproject.toml): plain C against CPython's
API, built from source by `make setup` with the distribution's compiler; nothing downloaded."""

from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "ioobserve._core",
    sources=[f"ioobserve/csrc/{name}.c" for name in ("module", "lines", "parse", "aux", "linetable", "match", "stack_records", "stacks", "table")],
    depends=[f"ioobserve/csrc/{name}.h" for name in ("core", "linetable", "stacks", "table")],
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-fno-strict-aliasing"],
)])
