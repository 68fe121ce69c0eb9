"""The exec gate: a program whose exec would load a library or interpreter copy that no probe
covers yet (a container's own libc, a new root's python3.15) waits at its exec until the
probes are on that copy, so its first call is seen; at most BOUND_S, then it goes on and the
summary says which program ran on before its probes.

Uprobes go on a file (an inode); a copy new to the recording is otherwise probed only after
the kernel reports its first mapping, tens of ms late, when a short job is already done. The
wait is fanotify's (ioobserve.probes.kernel.fanotify): the kernel holds the exec before the
program is loaded, which the job's signal handlers, its threads and its parent's waitpid()
cannot see (a SIGSTOP would be seen by all three). A keeper process of its own
(ioobserve/probes/kernel/exec_keeper.py) holds the group and keeps the bound, so a recorder that is busy, stopped or
wedged (a vfork of its own holds its GIL until the child's exec, which the gate holds) delays
an exec by the bound at most. Each exec'd file is looked at once: once answered it is ignored
(an evictable mark), so later execs of it do not wait at all.

Covered: the program, its ELF interpreter and its DT_NEEDED closure (linked_files.py), on the
file systems this mount namespace sees, and those mounted later (a pod's overlay root is
mounted here before its container starts). Not covered, and probed at first mapping as
before: a library a running program dlopen()s (h5py's libhdf5), and files on a file system
only another mount namespace sees (an Apptainer image).
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ioobserve.context.mappings import MappedFile, inside_root, kernel_dev, opened_ident, process_root, root_shown
from ioobserve.probes.attach.linked_files import linked_files, openat2_available
from ioobserve.probes.kernel.exec_keeper import ANSWER, FROM_RECORDER, HELD, TO_RECORDER, UNMARKED

# The longest an exec waits for its probes. IOOBSERVE_EXEC_GATE_BOUND_S raises it where every
# instruction is emulated (the kernel matrix's guests, 10-50 times slower): never on a node.
BOUND_S = float(os.environ.get("IOOBSERVE_EXEC_GATE_BOUND_S", "0.2"))
KEEPER_START_S = 10.0  # the keeper says what it marked within this, and ends within it when asked
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


def program_files(pid: int, program_fd: int) -> list[tuple[MappedFile, int]]:
    """The files process `pid` will load by exec'ing the file at `program_fd`: the program,
    then its interpreter and libraries, each as (MappedFile, an fd of it that the caller
    closes); [] if its root cannot be read."""
    root = process_root(pid)
    try:
        root_fd = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        with open(f"/proc/{pid}/mountinfo") as info:
            mounts = info.read()  # once for all its files
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
        opened = opened_ident(pid, inside, mounts)
        if opened is not None and opened[1] == ident[1]:  # overlayfs: the overlay's inode, as exec and mmap see it
            idents.add(opened)
        found.append((MappedFile(pid, inside, inside, f"/proc/self/fd/{fd}", ident, frozenset(idents), 0, shown), fd))
    return found


class ExecGate:
    """Holds each exec of a file not seen yet until `prepare` has probed what it will load,
    or BOUND_S has passed: the keeper process (probes/kernel/exec_keeper.py) holds and answers the execs,
    this side prepares them on a thread of its own. start() says why it cannot; stop() lets
    every held exec go."""

    def __init__(self, prepare: Prepare, bound_s: float = BOUND_S, nice: int | None = None,
                 exclude: Callable[[int], None] | None = None):
        self.prepare = prepare
        self.bound_s = bound_s
        # The keeper and the worker run at the jobs' priority (`nice`), not the recorder's: a
        # held exec waits on them, and a niced worker under busy cores ran past the bound here.
        self.nice = nice
        self.exclude = exclude  # the keeper is ours: its reads of /proc are not the node's I/O
        self.report = GateReport()
        self._keeper: subprocess.Popen | None = None
        self._channel: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._new: dict[int, tuple[bool, str]] = {}  # event id -> (a copy was new, the program's name)

    def spawn(self) -> None:
        """Start the keeper, idle (before the probes attach: its own start is not traced)."""
        if self._keeper is not None or not openat2_available():
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        nice = self.nice if self.nice is not None else os.getpriority(os.PRIO_PROCESS, 0)
        # A session of its own: a terminal's Ctrl-Z, which stops the recorder, must not stop it.
        self._keeper = subprocess.Popen([sys.executable, "-m", "ioobserve.probes.kernel.exec_keeper", str(theirs.fileno()),
                                         str(int(self.bound_s * 1000)), str(nice)],
                                        pass_fds=[theirs.fileno()], start_new_session=True)
        theirs.close()
        self._channel = ours
        if self.exclude is not None:
            self.exclude(self._keeper.pid)

    def start(self) -> str | None:
        """Have the keeper mark the file systems and answer what it holds (spawn() first, or
        now); None, or why the gate is off."""
        if not openat2_available():
            return "the kernel has no openat2 (Linux 5.6+), which finds a root's libraries inside it"
        self.spawn()
        ours = self._channel
        ours.settimeout(KEEPER_START_S)
        try:
            ours.send(b"g")
            kind, marked, error, _ = TO_RECORDER.unpack(ours.recv(TO_RECORDER.size))
        except (OSError, struct.error):
            self.stop()
            return "its keeper process did not start"
        ours.settimeout(None)
        if not marked:
            self.stop()
            if error:
                return f"fanotify is unavailable ({os.strerror(error)}; the kernel needs CONFIG_FANOTIFY_ACCESS_PERMISSIONS)"
            return "no file system could be marked"
        self._thread = threading.Thread(target=self._run, name="ioobserve-exec-gate", daemon=True)
        self._thread.start()
        return None

    def _run(self) -> None:
        """The keeper's messages: execs to prepare (one at a time: preparing takes the probes'
        attach lock anyway, and the keeper keeps each exec's bound), answers to count."""
        if self.nice is not None:
            with contextlib.suppress(OSError):  # stays niced: slower, never wrong
                os.setpriority(os.PRIO_PROCESS, 0, self.nice)  # this thread only
        channel = self._channel
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(channel, 4096, 1)
            except OSError:
                return
            if not data:
                return  # the keeper ended (stop())
            kind, event_id, first, second = TO_RECORDER.unpack_from(data)
            if kind == UNMARKED:
                self.report.unmarked.append(os.fsdecode(data[TO_RECORDER.size:]))
            elif kind == HELD and fds:
                self._prepare(event_id, first, fds[0])
            elif kind == HELD:  # its fd did not come: it goes on at its bound
                self._new[event_id] = (False, f"a program of pid {first}")
            elif kind == ANSWER:
                self._answered(event_id, first / 1e6, bool(second))
            for fd in fds[1:]:
                os.close(fd)

    def _prepare(self, event_id: int, pid: int, program_fd: int) -> None:
        files, new, done = [], False, False
        name = _name(program_fd, pid)
        try:
            files = program_files(pid, program_fd)
            new = self.prepare(pid, [mapped for mapped, _ in files])
            done = True
        except Exception:  # noqa: BLE001 (the exec goes on at its bound whatever failed here)
            self.report.failures += 1
        finally:
            os.close(program_fd)
            for _, fd in files:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._new[event_id] = (new, name)
        with contextlib.suppress(OSError):
            # all it loads is probed now: its later execs need not wait (the keeper's ignore mark)
            self._channel.send(FROM_RECORDER.pack(event_id, int(done)))

    def _answered(self, event_id: int, held_s: float, ran_on: bool) -> None:
        new, name = self._new.pop(event_id, (False, None))
        if ran_on:
            self.report.ran_on.append(name or "a program")
        if new or ran_on:
            self.report.held += 1
            self.report.longest_s = max(self.report.longest_s, held_s)

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

    def stop(self) -> None:
        """Let every held exec go on and stop hearing them (safe to call twice)."""
        if self._keeper is not None:
            with contextlib.suppress(OSError):
                self._channel.shutdown(socket.SHUT_RDWR)  # the keeper reads its end: it exits
            try:
                self._keeper.wait(timeout=KEEPER_START_S)
            except subprocess.TimeoutExpired:
                self._keeper.kill()  # closing its group lets what it holds go on
                self._keeper.wait()
            self._keeper = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._channel is not None:
            self._channel.close()
            self._channel = None


def _name(fd: int, pid: int) -> str:
    """The exec'd file's path, as this process sees it."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return f"a program of pid {pid}"
