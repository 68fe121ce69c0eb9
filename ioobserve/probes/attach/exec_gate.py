"""The exec gate: a program whose exec would load a library or interpreter copy that no probe
covers yet (a container's own libc, a new root's python3.15) waits at its exec until the
probes are on that copy, so its first call is seen; at most BOUND_S, then it goes on and the
summary says which program ran on before its probes.

Uprobes go on a file (an inode); a copy new to the recording is otherwise probed only after
the kernel reports its first mapping, tens of ms late, when a short job is already done. The
wait is fanotify's (ioobserve.probes.kernel.fanotify): the kernel holds the exec before the
program is loaded, which the job's signal handlers, its threads and its parent's waitpid()
cannot see (a SIGSTOP would be seen by all three). Each exec'd file is looked at once: once
answered it is ignored (an evictable mark), so later execs of it do not wait at all.

Covered: the program, its ELF interpreter and its DT_NEEDED closure (linked_files.py), on the
file systems this mount namespace sees, and those mounted later (a pod's overlay root is
mounted here before its container starts). Not covered, and probed at first mapping as
before: a library a running program dlopen()s (h5py's libhdf5), and files on a file system
only another mount namespace sees (an Apptainer image).
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from ioobserve.collect.priority import restore_priority
from ioobserve.mappings import MappedFile, inside_root, kernel_dev, opened_ident, process_root, root_shown
from ioobserve.probes.attach.linked_files import linked_files, openat2_available
from ioobserve.probes.kernel.fanotify import ExecEvent, ExecPermissions

BOUND_S = 0.2  # the longest an exec waits for its probes
# File systems no program is exec'd from (or that fanotify cannot mark).
PSEUDO_FILESYSTEMS = frozenset({
    "proc", "sysfs", "cgroup", "cgroup2", "devpts", "devtmpfs", "mqueue", "tracefs", "debugfs", "securityfs",
    "pstore", "bpf", "configfs", "fusectl", "hugetlbfs", "autofs", "binfmt_misc", "efivarfs", "rpc_pipefs", "nsfs",
})
# Prepares the copies process `pid` will load (the files it execs and links, with the program
# first); True if it probed one that no probe covered yet.
Prepare = Callable[[int, list[MappedFile]], bool]


@dataclass
class GateReport:
    """What the gate did during a recording, for the summary and the end record."""

    held: int = 0  # execs held until a copy new to the recording was probed
    longest_s: float = 0.0  # the longest of those holds
    ran_on: list[str] = field(default_factory=list)  # programs let go at BOUND_S before their probes were on
    unmarked: list[str] = field(default_factory=list)  # file systems (by mount point) the gate cannot hear
    failures: int = 0  # execs whose files could not be read (let go at once)


def filesystems(mountinfo: str) -> dict[int, list[str]]:
    """{kernel dev_t: [mount points]} of the file systems programs may be exec'd from, as a
    /proc/PID/mountinfo text lists them."""
    found: dict[int, list[str]] = {}
    for line in mountinfo.splitlines():
        fields = line.split()
        try:
            separator = fields.index("-")
            kind, (major, minor) = fields[separator + 1], fields[2].split(":")
        except (ValueError, IndexError):
            continue
        if kind in PSEUDO_FILESYSTEMS:
            continue
        point = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
        found.setdefault((int(major) << 20) | int(minor), []).append(point)
    return found


def program_files(pid: int, program_fd: int) -> list[tuple[MappedFile, int]]:
    """The files process `pid` will load by exec'ing the file at `program_fd`: the program,
    then its interpreter and libraries, each as (MappedFile, an fd of it that the caller
    closes); [] if its root cannot be read."""
    root = process_root(pid)
    try:
        root_fd = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        program = inside_root(os.readlink(f"/proc/self/fd/{program_fd}"), root)
        linked = linked_files(root_fd, program_fd, program)
    except OSError:
        return []
    finally:
        os.close(root_fd)
    shown = root_shown(pid, root)
    found = []
    for inside, fd in [(program, os.dup(program_fd)), *((file.inside, file.fd) for file in linked)]:
        try:
            info = os.fstat(fd)
        except OSError:
            os.close(fd)
            continue
        ident = (kernel_dev(info.st_dev), info.st_ino)
        idents = {ident}
        opened = opened_ident(pid, inside)
        if opened is not None and opened[1] == ident[1]:  # overlayfs: the overlay's inode, as exec and mmap see it
            idents.add(opened)
        found.append((MappedFile(pid, inside, inside, f"/proc/self/fd/{fd}", ident, frozenset(idents), 0, shown), fd))
    return found


class ExecGate:
    """Holds each exec of a file not seen yet until `prepare` has probed what it will load
    (or BOUND_S has passed), on a thread of its own; start() says why it cannot, stop()
    lets every held exec go."""

    def __init__(self, prepare: Prepare, bound_s: float = BOUND_S, nice: int | None = None):
        self.prepare = prepare
        self.bound_s = bound_s
        # The gate's threads run at the jobs' priority (`nice`), not the recorder's: a held exec
        # waits on them, and a niced worker under busy cores ran past the bound here.
        self.nice = nice
        self.report = GateReport()
        self._group: ExecPermissions | None = None
        self._marked: set[int] = set()
        self._wake_r, self._wake_w = -1, -1
        self._thread: threading.Thread | None = None
        self._worker: ThreadPoolExecutor | None = None

    def start(self) -> str | None:
        """Mark the file systems and start answering; None, or why the gate is off."""
        if not openat2_available():
            return "the kernel has no openat2 (Linux 5.6+), which finds a root's libraries inside it"
        try:
            self._group = ExecPermissions()
        except OSError as exc:
            return f"fanotify is unavailable ({exc.strerror}; the kernel needs CONFIG_FANOTIFY_ACCESS_PERMISSIONS)"
        self._marked = set()
        self._mark_new()
        if not self._marked:
            self._group.close()
            self._group = None
            return "no file system could be marked"
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        # One worker: preparing takes the probes' attach lock anyway; an exec waits its own bound.
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ioobserve-gate-prepare",
                                          initializer=self._unniced)
        self._thread = threading.Thread(target=self._run, name="ioobserve-exec-gate", daemon=True)
        self._thread.start()
        return None

    def _mark_new(self) -> None:
        """Mark each file system of our mount namespace not marked yet."""
        try:
            with open("/proc/self/mountinfo") as info:
                found = filesystems(info.read())
        except OSError:
            return
        for device, points in found.items():
            if device in self._marked:
                continue
            for point in points:
                try:
                    self._group.mark_filesystem(point)
                except OSError:
                    continue
                self._marked.add(device)
                break
            else:
                self.report.unmarked.append(points[0])

    def _unniced(self) -> None:
        if self.nice is not None:
            restore_priority(self.nice)

    def _run(self) -> None:
        self._unniced()
        poller = select.poll()
        poller.register(self._group.fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        with contextlib.suppress(OSError), open("/proc/self/mountinfo") as mounts:
            poller.register(mounts.fileno(), select.POLLPRI)  # a mount or unmount in our namespace
            while True:
                ready = {fd: what for fd, what in poller.poll()}
                if self._wake_r in ready:
                    return
                if mounts.fileno() in ready:
                    mounts.seek(0)
                    mounts.read()  # re-arms POLLPRI
                    self._mark_new()
                for event in self._group.read():
                    self._answer(event)

    def _answer(self, event: ExecEvent) -> None:
        """Prepare what the exec will load, wait for it up to the bound, then let it go on."""
        started = time.monotonic()
        held = done = False
        try:
            future = self._worker.submit(self._prepare, event.pid, os.dup(event.fd))
            try:
                held, done = future.result(timeout=self.bound_s), True
            except FutureTimeout:
                self.report.ran_on.append(self._name(event))
                held = True
        except Exception:  # noqa: BLE001 (the exec must go on whatever failed here)
            self.report.failures += 1
        finally:
            if held:
                self.report.held += 1
                self.report.longest_s = max(self.report.longest_s, time.monotonic() - started)
            if done:
                self._group.ignore(event.fd)  # all it loads is probed now: its later execs go straight on
            self._group.allow(event)

    def _prepare(self, pid: int, program_fd: int) -> bool:
        files = []
        try:
            files = program_files(pid, program_fd)
            return self.prepare(pid, [mapped for mapped, _ in files])
        finally:
            os.close(program_fd)
            for _, fd in files:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def describe(self) -> str:
        """What the gate did, for the summary."""
        report = self.report
        what = (f"held {report.held} exec(s) until the copies they load were probed (longest {report.longest_s * 1000:.0f} ms)"
                if report.held else "no exec loaded a copy new to the recording")
        if report.ran_on:
            shown = ", ".join(sorted(set(report.ran_on))[:4])
            what += (f"; {len(report.ran_on)} ran on at the {self.bound_s * 1000:.0f} ms bound before their probes"
                     f" (their first calls may be missing): {shown}")
        if report.failures:
            what += f"; {report.failures} could not be read (let go at once)"
        if report.unmarked:
            what += f"; not watched: execs from {', '.join(report.unmarked[:4])}"
        return what

    @staticmethod
    def _name(event: ExecEvent) -> str:
        try:
            return os.readlink(f"/proc/self/fd/{event.fd}")
        except OSError:
            return f"a program of pid {event.pid}"

    def stop(self) -> None:
        """Let every held exec go on and stop hearing them (safe to call twice)."""
        if self._thread is not None:
            os.write(self._wake_w, b"x")
            self._thread.join()
            self._thread = None
            os.close(self._wake_r)
            os.close(self._wake_w)
        if self._group is not None:
            self._group.close()  # the kernel lets what it still holds go on
            self._group = None
        if self._worker is not None:
            self._worker.shutdown(wait=False, cancel_futures=True)
            self._worker = None
