"""The address of a C function of the interpreter by its Python name, where the file has no
symbol for it (Debian's python3.x is stripped): through the module method table naming it,
found from the address of its docstring."""

from __future__ import annotations

from ioobserve.python.elf import ElfFile

_ML_METH, _ML_DOC = 8, 24  # PyMethodDef: ml_name, ml_meth, ml_flags (int, padded), ml_doc

# op -> (C symbol, Python name, how argument clinic's docstring begins)
METHODS = {
    "py_open": ("_io_open", "open", b"open($module, /, file, mode='r', buffering=-1, encoding=None,"),
}


def method_address(elf: ElfFile, symbol: str, name: str, doc_prefix: bytes) -> int | None:
    """The function's symbol if the file has one, else ml_meth of the PyMethodDef named
    `name` whose ml_doc is the docstring starting with `doc_prefix`."""
    found = elf.symbol(symbol)
    if found is not None:
        return found
    doc = elf.find(doc_prefix)
    if doc is None:
        return None
    wanted = name.encode() + b"\0"
    for slot in elf.pointers_to(doc):
        name_at = elf.pointer_at(slot - _ML_DOC)
        if name_at and elf.read(name_at, len(wanted)) == wanted:
            return elf.pointer_at(slot - _ML_DOC + _ML_METH)
    return None


def interpreter_methods(path: str) -> dict[int, str]:
    """{address: op} of the METHODS an interpreter file holds (none if it is unreadable)."""
    try:
        elf = ElfFile(path)
    except (OSError, ValueError):
        return {}
    found = {}
    for op, (symbol, name, doc_prefix) in METHODS.items():
        address = method_address(elf, symbol, name, doc_prefix)
        if address:
            found[address] = op
    return found
