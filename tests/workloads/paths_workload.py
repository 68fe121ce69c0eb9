"""Path and identity cases: openat with a dirfd, through a symlinked directory, an fd
inherited over fork, dup2, a file opened before recording began, and a new file given the
inode number of one read and deleted just before (ext4 hands it out again at once).

Opens the "early" file, prints READY, waits for a line on stdin, then does the rest and
prints one JSON line: {"cases": [{case, pid, fd, path, dev, ino}, ...]} where path is the
realpath and dev/ino come from os.fstat of the very descriptor read through.
"""

from __future__ import annotations

import json
import os
import sys

base = os.path.realpath(sys.argv[1])
data = os.path.join(base, "data")
os.makedirs(data, exist_ok=True)
os.symlink(data, os.path.join(base, "link"))
for name in ("early.bin", "dirfd.bin", "inherited.bin", "duped.bin", "vialink.bin"):
    with open(os.path.join(data, name), "wb") as handle:
        handle.write(os.urandom(8192))

cases = []


def note(case: str, fd: int, path: str, pid: int | None = None) -> None:
    st = os.fstat(fd)
    cases.append({"case": case, "pid": pid or os.getpid(), "fd": fd, "path": os.path.realpath(path),
                  "dev": st.st_dev, "ino": st.st_ino})


early = os.open(os.path.join(data, "early.bin"), os.O_RDONLY)
print("READY", flush=True)
sys.stdin.readline()

os.read(early, 100)
note("early", early, os.path.join(data, "early.bin"))

dirfd = os.open(data, os.O_RDONLY | os.O_DIRECTORY)
fd = os.open("dirfd.bin", os.O_RDONLY, dir_fd=dirfd)
os.read(fd, 100)
note("dirfd", fd, os.path.join(data, "dirfd.bin"))

linked = os.open(os.path.join(base, "link", "vialink.bin"), os.O_RDONLY)
os.read(linked, 100)
note("symlink", linked, os.path.join(data, "vialink.bin"))

inherited = os.open(os.path.join(data, "inherited.bin"), os.O_RDONLY)
reader, writer = os.pipe()
child = os.fork()
if child == 0:
    os.read(inherited, 100)
    os._exit(0)
os.waitpid(child, 0)
note("inherited", inherited, os.path.join(data, "inherited.bin"), pid=child)

duped = os.open(os.path.join(data, "duped.bin"), os.O_RDONLY)
os.dup2(duped, 100)
os.read(100, 100)
note("dup2", 100, os.path.join(data, "duped.bin"))

gone = os.path.join(data, "gone.bin")
with open(gone, "wb") as handle:
    handle.write(os.urandom(8192))
fd = os.open(gone, os.O_RDONLY)
os.read(fd, 100)
gone_ino = os.fstat(fd).st_ino
os.close(fd)
os.unlink(gone)
for attempt in range(100):  # the file system decides which inode a new file gets
    new = os.path.join(data, f"new-{attempt}.bin")
    fd = os.open(new, os.O_RDWR | os.O_CREAT, 0o600)
    os.write(fd, os.urandom(8192))
    if os.fstat(fd).st_ino == gone_ino:
        os.lseek(fd, 0, os.SEEK_SET)
        os.dup2(fd, 101)  # a descriptor number of its own: the deleted file was read through fd's
        os.read(101, 100)
        note("reused inode", 101, new)
        break
    os.close(fd)

print(json.dumps({"cases": cases}), flush=True)
