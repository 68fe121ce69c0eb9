"""What the VFS does that no read or write syscall carries, with the counts it made: copies
by sendfile, copy_file_range and splice (through a pipe), and the exec of a copy of a binary,
whose first bytes, program headers and interpreter's name the kernel reads itself.

    vfs_workload.py DIR BINARY

Prints one JSON line: {"pid", "src", "dst", "copies": {call: [count, bytes]}, "reads": [count,
bytes], "exec": {"path", "reads": [[offset, bytes], ...]}}; "exec" reads are what the ELF
file says the kernel's loader reads (x86_64 and aarch64: no property notes read there).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

CHUNK = 64 * 1024
COPIES = 3
BINPRM_BUF_SIZE = 256  # the kernel's first read of any executable
PT_INTERP = 3


def elf_reads(path: Path) -> list[list[int]]:
    """[offset, bytes] of each kernel_read exec makes of an ELF64 file: its first bytes, its
    program headers, and its interpreter's name."""
    data = path.read_bytes()
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    reads = [[0, min(BINPRM_BUF_SIZE, len(data))], [phoff, phentsize * phnum]]
    for index in range(phnum):
        p_type, _flags, p_offset, _vaddr, _paddr, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + index * phentsize)
        if p_type == PT_INTERP:
            reads.append([p_offset, p_filesz])
    return reads


def main() -> None:
    work, binary = Path(sys.argv[1]), Path(sys.argv[2])
    src, dst = work / "src.bin", work / "dst.bin"
    src.write_bytes(os.urandom(COPIES * 3 * CHUNK))
    copies = {name: [0, 0] for name in ("sendfile", "copy_file_range", "splice")}

    def count(name: str, moved: int) -> None:
        copies[name][0] += 1
        copies[name][1] += moved

    fd_in = os.open(src, os.O_RDONLY)
    fd_out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for i in range(COPIES):
        count("sendfile", os.sendfile(fd_out, fd_in, i * CHUNK, CHUNK))
    for i in range(COPIES):
        count("copy_file_range", os.copy_file_range(fd_in, fd_out, CHUNK, (COPIES + i) * CHUNK))
    read_end, write_end = os.pipe()
    for i in range(COPIES):  # file -> pipe -> file: two splice calls, each with one file side
        count("splice", os.splice(fd_in, write_end, CHUNK, offset_src=(2 * COPIES + i) * CHUNK))
        count("splice", os.splice(read_end, fd_out, CHUNK))
    os.close(read_end)
    os.close(write_end)
    os.lseek(fd_in, 0, os.SEEK_SET)
    reads = [0, 0]
    while chunk := os.read(fd_in, CHUNK):
        reads[0] += 1
        reads[1] += len(chunk)
    reads[0] += 1  # the last read, at end of file
    os.close(fd_in)
    os.close(fd_out)
    program = work / "exec-me"
    shutil.copy(binary, program)
    subprocess.run([str(program)], check=True)
    print(json.dumps({"pid": os.getpid(), "src": str(src), "dst": str(dst), "copies": copies, "reads": reads,
                      "exec": {"path": str(program), "reads": elf_reads(program)}}), flush=True)


if __name__ == "__main__":
    main()
