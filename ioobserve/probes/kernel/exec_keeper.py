"""The exec gate's keeper: a small process of its own that holds the fanotify group, marks the
file systems, and answers every held exec by its bound, whatever the recorder is doing. The
recorder (ioobserve/probes/attach/exec_gate.py) gets each exec (the file's fd, passed over a
socket) and says when what it loads is probed; if it has not said so by the bound (busy, stopped, holding its
GIL through a vfork), the exec goes on all the same. When the recorder goes, the keeper's
socket closes and it exits: the kernel lets every exec it held go on.

    python -m ioobserve.probes.kernel.exec_keeper SOCKET_FD BOUND_MS NICE

Messages on the SOCK_SEQPACKET socket, little-endian:
  recorder -> keeper  one byte, once: mark the file systems and start holding execs
  keeper -> recorder  HELD   (kind 0, id, pid, 0) with the file's fd
                      ANSWER (kind 1, id, held µs, ran on: 0/1)
                      MARKS  (kind 2, file systems marked, 0, 0), then UNMARKED (kind 3, ...) + mount point
  recorder -> keeper  (id, ignore: 0/1): what the exec loads is probed; 1: no later exec of
                      the file need wait (an evictable ignore mark)
"""

from __future__ import annotations

import array
import contextlib
import os
import select
import socket
import struct
import sys
import time

from ioobserve.probes.kernel.fanotify import ExecPermissions, filesystems

TO_RECORDER = struct.Struct("<IIII")  # kind, id, and two values
FROM_RECORDER = struct.Struct("<II")  # id, ignore
HELD, ANSWER, MARKS, UNMARKED = 0, 1, 2, 3


class Keeper:
    """The keeper's loop: events out to the recorder, answers back, the bound kept."""

    def __init__(self, channel: socket.socket, bound_ns: int):
        self.channel = channel
        self.bound_ns = bound_ns
        self.group = ExecPermissions()
        self.marked: set[int] = set()
        self.pending: dict[int, tuple[object, int]] = {}  # id -> (event, when it was read)
        self.next_id = 1

    def mark_new(self) -> list[str]:
        """Mark each file system of this mount namespace not marked yet; those refused."""
        refused = []
        with open("/proc/self/mountinfo") as info:
            found = filesystems(info.read())
        for device, points in found.items():
            if device in self.marked:
                continue
            for point in points:
                try:
                    self.group.mark_filesystem(point)
                except OSError:
                    continue
                self.marked.add(device)
                break
            else:
                refused.append(points[0])
        return refused

    def answer(self, event_id: int, ignore: bool, ran_on: bool) -> None:
        """Let the exec go on, and tell the recorder how long it was held."""
        event, read_ns = self.pending.pop(event_id)
        if ignore:
            self.group.ignore(event.fd)
        self.group.allow(event)
        held_us = (time.monotonic_ns() - read_ns) // 1000
        self.tell(TO_RECORDER.pack(ANSWER, event_id, min(held_us, 0xFFFFFFFF), int(ran_on)))

    def tell(self, message: bytes, fds: list[int] | None = None) -> None:
        """A message to the recorder, never waiting: with its socket full (the recorder stuck)
        the message is dropped, and the exec it is about goes on at its bound all the same."""
        try:
            if fds:
                self.channel.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            else:
                self.channel.send(message)
        except BlockingIOError:
            pass

    def hear_recorder(self) -> bool:
        """Let go the exec the recorder says is prepared; False once the recorder is gone."""
        try:
            data = self.channel.recv(FROM_RECORDER.size)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not data:
            return False
        event_id, ignore = FROM_RECORDER.unpack(data)
        if event_id in self.pending:
            self.answer(event_id, bool(ignore), False)
        return True

    def run(self) -> None:
        """Until the recorder goes: execs out to it, its answers back, each exec's bound kept."""
        poller = select.poll()
        poller.register(self.group.fd, select.POLLIN)
        poller.register(self.channel.fileno(), select.POLLIN)
        with open("/proc/self/mountinfo") as mounts:
            poller.register(mounts.fileno(), select.POLLPRI)  # a mount or unmount here
            while True:
                now = time.monotonic_ns()
                due = min((read_ns + self.bound_ns for _, read_ns in self.pending.values()), default=None)
                timeout = None if due is None else max(0, (due - now + 999_999) // 1_000_000)
                ready = dict(poller.poll(timeout))
                if self.channel.fileno() in ready and not self.hear_recorder():
                    return  # the recorder is gone
                if mounts.fileno() in ready:
                    mounts.seek(0)
                    mounts.read()  # re-arms POLLPRI
                    self.mark_new()
                for event in self.group.read() if self.group.fd in ready else []:
                    event_id, self.next_id = self.next_id, self.next_id % 0xFFFFFFFF + 1
                    self.pending[event_id] = (event, time.monotonic_ns())
                    try:
                        self.tell(TO_RECORDER.pack(HELD, event_id, event.pid, 0), [event.fd])
                    except OSError:
                        return  # the recorder is gone
                now = time.monotonic_ns()
                for event_id in [i for i, (_, read_ns) in self.pending.items() if now - read_ns >= self.bound_ns]:
                    self.answer(event_id, False, True)


def main() -> None:
    channel_fd, bound_ms, nice = (int(arg) for arg in sys.argv[1:4])
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, nice)  # the jobs' priority, not the recorder's: they wait on it
    channel = socket.socket(fileno=channel_fd)
    # Started before the probes attach, so that nothing of its start is traced; the recorder
    # says when to take up the gate (once it has told the kernel to leave this process out).
    if not channel.recv(1):
        return
    try:
        keeper = Keeper(channel, bound_ms * 1_000_000)
    except OSError as exc:
        channel.send(TO_RECORDER.pack(MARKS, 0, exc.errno or 0, 0))
        return
    refused = keeper.mark_new()
    channel.setblocking(False)  # from here on it never waits on the recorder
    keeper.tell(TO_RECORDER.pack(MARKS, len(keeper.marked), 0, 0))
    for point in refused:
        keeper.tell(TO_RECORDER.pack(UNMARKED, 0, 0, 0) + os.fsencode(point)[:4000])
    if keeper.marked:
        keeper.run()


if __name__ == "__main__":
    main()
