"""The little of ELF64 the Python layer needs: a symbol's address, the bytes the file gives a
virtual address (initialized data) and the pointers stored there (relocated ones too), read
from the file, not from a process."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

ET_EXEC = 2
PT_LOAD = 1
PF_X = 1
SHT_SYMTAB, SHT_RELA, SHT_DYNSYM = 2, 4, 11
RELATIVE_RELOCATIONS = (8, 1027)  # R_X86_64_RELATIVE, R_AARCH64_RELATIVE: base + addend
_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")


class ElfError(ValueError):
    """Not a 64-bit little-endian ELF file, or a truncated one."""


@dataclass(frozen=True)
class Segment:
    """A PT_LOAD segment: file bytes [offset, offset + filesz) at vaddr."""

    vaddr: int
    offset: int
    filesz: int
    executable: bool


class ElfFile:
    """Symbols and loadable segments of one ELF64 little-endian file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._data = self.path.read_bytes()
        if len(self._data) < _HEADER.size or self._data[:4] != b"\x7fELF" or self._data[4] != 2 or self._data[5] != 1:
            raise ElfError(f"{self.path}: not a 64-bit little-endian ELF file")
        (_, self.e_type, _, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, shstrndx) = _HEADER.unpack_from(self._data)
        self.segments = [
            Segment(vaddr, offset, filesz, bool(flags & PF_X))
            for kind, flags, offset, vaddr, _, filesz, _, _ in (
                _PHDR.unpack_from(self._data, phoff + i * phentsize) for i in range(phnum))
            if kind == PT_LOAD
        ]
        self._sections = [_SHDR.unpack_from(self._data, shoff + i * shentsize) for i in range(shnum)] if shoff else []
        self._shstrndx = shstrndx
        self._symbols: dict[int, dict[str, int]] = {}
        self._relative: dict[int, int] | None = None  # slot vaddr -> the vaddr it will hold

    @property
    def is_executable(self) -> bool:
        """ET_EXEC: loaded at its link addresses (no base to add)."""
        return self.e_type == ET_EXEC

    def symbol(self, name: str) -> int | None:
        """The link-time address of a symbol: dynamic, else static if the file has them."""
        for kind in (SHT_DYNSYM, SHT_SYMTAB):
            if kind not in self._symbols:
                self._symbols[kind] = self._read_symbols(kind)
            if name in self._symbols[kind]:
                return self._symbols[kind][name]
        return None

    def section(self, name: str) -> tuple[int, bytes, int] | None:
        """(vaddr, bytes, entry size) of the section called `name`, if the file has one."""
        if self._shstrndx >= len(self._sections):
            return None
        names_at = self._sections[self._shstrndx][4]
        wanted = name.encode() + b"\0"
        for name_at, _, _, vaddr, offset, size, _, _, _, entsize in self._sections:
            if self._data[names_at + name_at:names_at + name_at + len(wanted)] == wanted:
                return vaddr, self._data[offset:offset + size], entsize
        return None

    def plt_stubs(self, symbol: str) -> set[int]:
        """Addresses of the PLT entries that jump to `symbol` (a shared object calling its own
        exported functions goes through them): entries whose `jmp *GOT(%rip)` reads the GOT
        slot the dynamic linker fills with the symbol (x86-64)."""
        dynsym, relocations, names = self.section(".dynsym"), self.section(".rela.plt"), self.section(".dynstr")
        if not (dynsym and relocations and names):
            return set()
        wanted = symbol.encode() + b"\0"
        slots = set()
        for slot, info, _ in _RELA.iter_unpack(relocations[1]):
            name_at = _SYM.unpack_from(dynsym[1], (info >> 32) * _SYM.size)[0]
            if names[1][name_at:name_at + len(wanted)] == wanted:
                slots.add(slot)
        stubs = set()
        for plt in (".plt", ".plt.sec"):
            found = self.section(plt)
            if not found:
                continue
            vaddr, code, entsize = found
            entsize = entsize or 16
            at = code.find(b"\xff\x25")
            while at >= 0:
                if vaddr + at + 6 + struct.unpack_from("<i", code, at + 2)[0] in slots:
                    stubs.add(vaddr + at - at % entsize)
                at = code.find(b"\xff\x25", at + 1)
        return stubs

    def _read_symbols(self, wanted: int) -> dict[str, int]:
        symbols: dict[str, int] = {}
        for _, kind, _, _, offset, size, link, _, _, entsize in self._sections:
            if kind != wanted or not entsize or link >= len(self._sections):
                continue
            strings_at = self._sections[link][4]
            for at in range(offset, offset + size - entsize + 1, entsize):
                name_at, _, _, shndx, value, _ = _SYM.unpack_from(self._data, at)
                if not value or not shndx or not name_at:
                    continue
                end = self._data.find(b"\0", strings_at + name_at)
                symbols.setdefault(self._data[strings_at + name_at:end].decode("ascii", "replace"), value)
        return symbols

    def read(self, vaddr: int, size: int) -> bytes | None:
        """The file's bytes at a virtual address (None outside the file's initialized data)."""
        for seg in self.segments:
            if seg.vaddr <= vaddr and vaddr + size <= seg.vaddr + seg.filesz:
                start = seg.offset + vaddr - seg.vaddr
                return self._data[start:start + size]
        return None

    def read_to_segment_end(self, vaddr: int, limit: int) -> bytes:
        """Up to `limit` of the file's bytes from a virtual address, not past its segment."""
        for seg in self.segments:
            if seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
                start = seg.offset + vaddr - seg.vaddr
                return self._data[start:min(start + limit, seg.offset + seg.filesz)]
        return b""

    def find(self, needle: bytes) -> int | None:
        """The virtual address of the first loaded occurrence of `needle`."""
        at = self._data.find(needle)
        while at >= 0:
            for seg in self.segments:
                if seg.offset <= at and at + len(needle) <= seg.offset + seg.filesz:
                    return seg.vaddr + at - seg.offset
            at = self._data.find(needle, at + 1)
        return None

    def _relocated(self) -> dict[int, int]:
        if self._relative is None:
            self._relative = {}
            for _, kind, _, _, offset, size, _, _, _, entsize in self._sections:
                if kind != SHT_RELA or entsize != _RELA.size:
                    continue
                for slot, info, addend in _RELA.iter_unpack(self._data[offset:offset + size]):
                    if info & 0xFFFFFFFF in RELATIVE_RELOCATIONS:
                        self._relative[slot] = addend
        return self._relative

    def pointer_at(self, vaddr: int) -> int | None:
        """The address a pointer at `vaddr` holds once loaded (relative to the load base in a
        shared object or PIE: the relocation's addend)."""
        relocated = self._relocated().get(vaddr)
        if relocated is not None:
            return relocated
        raw = self.read(vaddr, 8)
        return int.from_bytes(raw, "little") if raw else None

    def pointers_to(self, target: int) -> list[int]:
        """Addresses of the pointers that will hold `target`: relocated slots, and the plain
        8-byte values of a file loaded at its link addresses."""
        slots = [slot for slot, addend in self._relocated().items() if addend == target]
        if self.is_executable:
            needle, at = target.to_bytes(8, "little"), 0
            while (at := self._data.find(needle, at)) >= 0:
                slots += [seg.vaddr + at - seg.offset for seg in self.segments if seg.offset <= at < seg.offset + seg.filesz]
                at += 1
        return slots

    def first_vaddr(self) -> int:
        """The lowest loaded address: a shared object's mappings start there plus its base."""
        return min((seg.vaddr - seg.offset for seg in self.segments), default=0)

    def text(self) -> Segment | None:
        """The first executable segment (the kernel's mm->start_code lies at its vaddr)."""
        return min((seg for seg in self.segments if seg.executable), key=lambda seg: seg.vaddr, default=None)
