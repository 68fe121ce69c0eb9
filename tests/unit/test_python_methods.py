"""Finding open()'s C function without its symbol, through the _io module's method table:
on pyenv's libpythons (which keep their symbols) the table gives the symbol's address, and on
Debian's stripped python3.11 it gives a function in the text segment."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest

from ioobserve.python.elf import ElfFile
from ioobserve.python.methods import METHODS, interpreter_methods, method_address

LIBPYTHONS = sorted(glob.glob("/root/.pyenv/versions/3.1[0-9].*/lib/libpython3.1[0-9].so.1.0"))
DEBIAN_PYTHON = "/usr/bin/python3.11"
SYMBOL, NAME, DOC = METHODS["py_open"]


@pytest.mark.parametrize("library", LIBPYTHONS)
def test_the_method_table_agrees_with_the_symbol(library):
    elf = ElfFile(library)
    address, text = elf.symbol(SYMBOL), elf.text()
    assert address is not None and text.vaddr <= address < text.vaddr + text.filesz, address  # pyenv keeps its symbols
    assert method_address(elf, "no-such-symbol", NAME, DOC) == address


def test_a_stripped_interpreter_is_found_through_its_method_table():
    elf = ElfFile(DEBIAN_PYTHON)
    assert elf.symbol(SYMBOL) is None, "Debian's python3.11 is stripped"
    (address, op), = interpreter_methods(DEBIAN_PYTHON).items()
    text = elf.text()
    assert op == "py_open" and text.vaddr <= address < text.vaddr + text.filesz


def test_pyenv_interpreters_are_there():
    versions = {Path(library).name.removeprefix("libpython").removesuffix(".so.1.0") for library in LIBPYTHONS}
    assert {"3.10", "3.11", "3.12", "3.13"} <= versions, LIBPYTHONS  # each version the Python layer supports
