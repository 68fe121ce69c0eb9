"""Finding open()'s C function without its symbol, through the _io module's method table:
on pyenv's libpythons (which keep their symbols) the table gives the symbol's address, and on
Debian's stripped python3.11 it gives a function in the text segment."""

from __future__ import annotations

import glob

import pytest

from ioobserve.python.elf import ElfFile
from ioobserve.python.methods import METHODS, interpreter_methods, method_address

LIBPYTHONS = sorted(glob.glob("/root/.pyenv/versions/3.1[0-9].*/lib/libpython3.1[0-9].so.1.0"))
DEBIAN_PYTHON = "/usr/bin/python3.11"
SYMBOL, NAME, DOC = METHODS["py_open"]


@pytest.mark.parametrize("library", LIBPYTHONS)
def test_the_method_table_agrees_with_the_symbol(library):
    elf = ElfFile(library)
    assert elf.symbol(SYMBOL) is not None
    assert method_address(elf, "no-such-symbol", NAME, DOC) == elf.symbol(SYMBOL)


def test_a_stripped_interpreter_is_found_through_its_method_table():
    elf = ElfFile(DEBIAN_PYTHON)
    assert elf.symbol(SYMBOL) is None, "Debian's python3.11 is stripped"
    (address, op), = interpreter_methods(DEBIAN_PYTHON).items()
    text = elf.text()
    assert op == "py_open" and text.vaddr <= address < text.vaddr + text.filesz


def test_pyenv_interpreters_are_there():
    assert len(LIBPYTHONS) >= 4, LIBPYTHONS  # 3.10 to 3.13 at least
