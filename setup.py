"""The compiled core's build (everything else is in pyproject.toml): plain C against CPython's
API, built from source by `make setup` with the distribution's compiler; nothing downloaded."""

from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "ioobserve._core",
    sources=["ioobserve/csrc/module.c", "ioobserve/csrc/lines.c", "ioobserve/csrc/parse.c"],
    depends=["ioobserve/csrc/core.h"],
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-fno-strict-aliasing"],
)])
