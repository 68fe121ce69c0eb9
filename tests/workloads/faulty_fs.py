"""A file system that misbehaves on purpose, for the recorder's fault tests: an in-memory
FUSE file system (one flat directory) whose writes are slow, fail, or hang.

    faulty_fs.py MOUNTPOINT [--write-delay-ms MS] [--fail-after-bytes N [--errno NAME]]
                            [--hang-after-bytes N] [--heal-file PATH]

Every write request waits --write-delay-ms first (a slow disk); once N bytes have been
written in all, each further write fails with --errno (EIO by default: a failing disk; EROFS:
what writers see once the kernel turns a file system read-only after an error) or blocks until
the file system is unmounted (a hung server). Once the --heal-file exists, writes succeed
again. Runs in the foreground until unmounted (`umount -l MOUNTPOINT`; abort its connection first to free
hung writers)."""

from __future__ import annotations

import argparse
import errno
import os
import stat
import threading
import time

import mfusepy as fuse

BLOCK = 4096


class FaultyFs(fuse.Operations):
    """Files in memory; writes slowed, failed or held as configured."""

    use_ns = True

    def __init__(self, delay_s: float, fail_after: int | None, fail_errno: int, hang_after: int | None) -> None:
        self.delay_s, self.fail_after, self.fail_errno, self.hang_after = delay_s, fail_after, fail_errno, hang_after
        self.files: dict[str, bytearray] = {}
        self.modes: dict[str, int] = {}
        self.written = 0
        self._lock = threading.Lock()
        self.never = threading.Event()  # hung writes wait on it for good
        self.heal_file: str | None = None  # (a signal would never reach Python while libfuse runs its loop)
        now = time.time_ns()
        self.times = {"st_atime": now, "st_mtime": now, "st_ctime": now}

    def _name(self, path: str) -> str:
        name = path.lstrip("/")
        if "/" in name:
            raise fuse.FuseOSError(errno.ENOENT)
        return name

    def getattr(self, path, fh=None):
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2, **self.times}
        name = self._name(path)
        if name not in self.files:
            raise fuse.FuseOSError(errno.ENOENT)
        return {"st_mode": stat.S_IFREG | self.modes[name], "st_nlink": 1, "st_size": len(self.files[name]), **self.times}

    def readdir(self, path, fh):
        return [".", "..", *self.files]

    def create(self, path, mode, fi=None):
        name = self._name(path)
        with self._lock:
            self.files[name], self.modes[name] = bytearray(), mode & 0o7777
        return 0

    def open(self, path, flags):
        if self._name(path) not in self.files:
            raise fuse.FuseOSError(errno.ENOENT)
        return 0

    def chmod(self, path, mode):
        self.modes[self._name(path)] = mode & 0o7777
        return 0

    def chown(self, path, uid, gid):
        return 0

    def utimens(self, path, times=None):
        return 0

    def truncate(self, path, length, fh=None):
        data = self.files[self._name(path)]
        del data[length:]
        data.extend(b"\0" * (length - len(data)))
        return 0

    def read(self, path, size, offset, fh):
        return bytes(self.files[self._name(path)][offset : offset + size])

    def write(self, path, data, offset, fh):
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.heal_file and os.path.exists(self.heal_file):
            self.fail_after = self.hang_after = None
        with self._lock:
            if self.hang_after is not None and self.written >= self.hang_after:
                hang = True
            elif self.fail_after is not None and self.written >= self.fail_after:
                raise fuse.FuseOSError(self.fail_errno)
            else:
                hang = False
                target = self.files[self._name(path)]
                target[offset : offset + len(data)] = data
                self.written += len(data)
        if hang:
            self.never.wait()
            raise fuse.FuseOSError(errno.EIO)
        return len(data)

    def unlink(self, path):
        name = self._name(path)
        with self._lock:
            self.files.pop(name, None)
            self.modes.pop(name, None)
        return 0

    def rename(self, old, new):
        with self._lock:
            self.files[self._name(new)] = self.files.pop(self._name(old))
            self.modes[self._name(new)] = self.modes.pop(self._name(old))
        return 0

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        return 0

    def statfs(self, path):
        total = 1 << 18  # 1 GiB in 4 KiB blocks: room is never what fails here
        used = sum(len(d) for d in self.files.values()) // BLOCK
        return {"f_bsize": BLOCK, "f_frsize": BLOCK, "f_blocks": total, "f_bfree": total - used,
                "f_bavail": total - used, "f_files": 1 << 16, "f_ffree": (1 << 16) - len(self.files), "f_namemax": 255}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mountpoint")
    parser.add_argument("--write-delay-ms", type=float, default=0.0)
    parser.add_argument("--fail-after-bytes", type=int)
    parser.add_argument("--errno", default="EIO", choices=sorted(errno.errorcode.values()))
    parser.add_argument("--hang-after-bytes", type=int)
    parser.add_argument("--heal-file", help="once this file exists (outside the mount), writes succeed again")
    args = parser.parse_args()
    operations = FaultyFs(args.write_delay_ms / 1000, args.fail_after_bytes, getattr(errno, args.errno),
                          args.hang_after_bytes)
    operations.heal_file = args.heal_file
    os.umask(0o022)
    fuse.FUSE(operations, args.mountpoint, foreground=True, nothreads=False, fsname="faultyfs")


if __name__ == "__main__":
    main()
