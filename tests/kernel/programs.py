"""The BPF programs an observer under test holds, found through its file descriptors rather
than by name: another observer on the machine loads programs of the same names."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

_PROG_ID = re.compile(r"^prog_id:\s*(\d+)$", re.M)


def loaded() -> dict[int, str]:
    """Every BPF program loaded in the kernel: id -> name (bpftool)."""
    listing = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, check=True)
    return {prog["id"]: prog.get("name", "") for prog in json.loads(listing.stdout)}


def _tree(pid: int) -> list[int]:
    """pid and its descendants (the recorder captures in a child process)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after the command, which may hold spaces
        except OSError:  # exited meanwhile
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    return found


def held_by(pid: int) -> set[int]:
    """Ids of the BPF programs open in a process and its descendants."""
    ids = set()
    for member in _tree(pid):
        try:
            fds = list(Path(f"/proc/{member}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) != "anon_inode:bpf-prog":
                    continue
                info = Path(f"/proc/{member}/fdinfo/{fd.name}").read_text()
            except OSError:  # closed meanwhile
                continue
            ids.update(int(found) for found in _PROG_ID.findall(info))
    return ids


def program_type(fd: int) -> int | None:
    """The BPF program type (BPF_PROG_TYPE_*) behind one of this process's descriptors, None if
    it is not a loaded program."""
    if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:bpf-prog":
        return None
    found = re.search(r"^prog_type:\s*(\d+)$", Path(f"/proc/self/fdinfo/{fd}").read_text(), re.M)
    return int(found.group(1)) if found else None
