"""The daemon's Unix socket: a live event stream for other tools (and `top --attach`), and
the scheduler's job commands.

A client sends one line first:
  `stream`              then reads the line `ok streaming` (sent once the daemon has the
                        client and events leave the kernel: a call made after it is in the
                        stream or counted in "lost"), then newline-delimited JSON batches:
                        {"seq": N, "lost": L, "events": [{column: value, ...}, ...]}
  `start JOB` / `stop JOB`   (root only) record a job's trace, or stop; the answer is one
                        line, `ok ...` or `error: ...`.

The socket is created 0600 (root), or 0660 for `socket-group`. A client that cannot keep up
is disconnected rather than slowing the capture (its queue holds QUEUE_BATCHES batches). Events
leave the kernel for everyone only while a client is streaming."""

from __future__ import annotations

import os
import queue
import socket
import stat
import struct
import threading
from collections.abc import Callable
from pathlib import Path

import polars as pl

from ioobserve.data import schema as s
from ioobserve.data.model import BatchTables
from ioobserve.sinks.base import NamingSink

QUEUE_BATCHES = 256
FIRST_LINE_TIMEOUT_S = 5.0
STREAMING = b"ok streaming\n"  # a stream's first line: the client is registered and events flow
STREAM_COLUMNS = [s.TS, s.DUR, s.PID, s.TID, s.PPID, s.UID, s.COMM, s.LAYER, s.OP, s.PATH, s.FD, s.RET, s.ERRNO, s.BYTES,
                  s.BYTES_REQ, s.OFFSET, s.FLAGS, s.COUNTED, s.DEV, s.INO, s.CGROUP, s.JOB, s.STEP, s.RANK, s.WORKER, s.USER]


class SocketError(Exception):
    """The socket path cannot be used; the message says why."""


def bind_socket(path: Path, gid: int | None) -> socket.socket:
    """A listening socket at path: a stale socket file is replaced, a live one or any other file is refused."""
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is not None:
        if not stat.S_ISSOCK(info.st_mode):
            raise SocketError(f"socket {path}: the path is taken by something that is not a socket; remove it or choose --socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
            raise SocketError(f"socket {path}: another ioobserve serve is listening there; stop it or choose --socket")
        except (ConnectionRefusedError, FileNotFoundError):
            os.unlink(path)  # left by a daemon that died
        finally:
            probe.close()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)  # never a moment with the socket open to others
    try:
        server.bind(str(path))
    except OSError as exc:
        server.close()
        raise SocketError(f"socket {path}: {exc.strerror}") from None
    finally:
        os.umask(old_mask)
    if gid is not None:
        os.chown(path, 0, gid)
        os.chmod(path, 0o660)
    server.listen(16)
    return server


def _peer_uid(conn: socket.socket) -> int:
    """The connecting process's uid (SO_PEERCRED)."""
    _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return uid


def batch_line(seq: int, lost: int, frame: pl.DataFrame) -> bytes:
    """One batch as a JSON line (Polars writes the events; no Python object per event)."""
    events = frame.select([c for c in STREAM_COLUMNS if c in frame.columns]).write_json()
    return f'{{"seq": {seq}, "lost": {lost}, "events": '.encode() + events.encode() + b"}\n"


class EventStream(NamingSink):
    """The socket server and, as a collector sink, the source of the stream's batches."""

    def __init__(self, server: socket.socket, commands: Callable[[str, str], str], on_streaming: Callable[[bool], None]):
        self.server = server
        self.commands = commands  # (verb, job) -> answer text; raises to answer an error
        super().__init__()  # its namer: the collector's thread only
        self.on_streaming = on_streaming  # called with True when the first client streams, False after the last
        self._clients: dict[int, queue.Queue] = {}
        self._lock = threading.Lock()
        self._seq = 0
        self._lost = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="ioobserve-socket", daemon=True)

    def start(self) -> None:
        """Accept clients on a thread of its own."""
        self._thread.start()

    @property
    def streaming(self) -> int:
        """Clients reading the stream now."""
        return len(self._clients)

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                return  # closed by stop()
            threading.Thread(target=self._serve, args=(conn,), name="ioobserve-client", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(FIRST_LINE_TIMEOUT_S)
            try:
                first = conn.makefile("rb").readline(256).decode(errors="replace").split()
            except OSError:
                return
            if first == ["stream"]:
                conn.settimeout(None)
                self._stream_to(conn)
                return
            if len(first) == 2 and first[0] in ("start", "stop"):
                if _peer_uid(conn) != 0:
                    answer = "error: only root may start or stop a job's recording"
                else:
                    try:
                        answer = "ok " + self.commands(first[0], first[1])
                    except Exception as exc:  # the answer is the error: one line back to the hook
                        answer = f"error: {exc}"
            else:
                answer = "error: expected 'stream', 'start JOB' or 'stop JOB'"
            try:
                conn.sendall(answer.encode() + b"\n")
            except OSError:
                pass

    def _stream_to(self, conn: socket.socket) -> None:
        pending: queue.Queue = queue.Queue(maxsize=QUEUE_BATCHES)
        pending.put_nowait(STREAMING)  # sent first, and only after the switch below is on
        key = id(pending)
        with self._lock:  # the switch under the lock: a client leaving as another comes cannot turn it off last
            self._clients[key] = pending
            if len(self._clients) == 1:
                self.on_streaming(True)
        try:
            while (line := pending.get()) is not None:
                conn.sendall(line)
        except OSError:
            pass  # the client went away
        finally:
            with self._lock:
                self._clients.pop(key, None)
                if not self._clients and not self._stopping.is_set():
                    self.on_streaming(False)

    def _broadcast(self, line: bytes) -> None:
        with self._lock:
            clients = list(self._clients.items())
        for key, pending in clients:
            try:
                pending.put_nowait(line)
            except queue.Full:  # too slow: disconnected, not waited for
                with self._lock:
                    self._clients.pop(key, None)
                pending.queue.clear()
                pending.put_nowait(None)

    def stop(self) -> None:
        """Stop accepting, end every client's stream and remove the socket file."""
        self._stopping.set()
        path = self.server.getsockname()
        self.server.close()
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for pending in clients:
            pending.put(None)
        try:
            os.unlink(path)
        except OSError:
            pass

    # The collector's sink calls (its thread).

    def events(self, frame: pl.DataFrame, tables: BatchTables) -> None:
        """A batch to every streaming client, by name (nothing is named or formatted when
        nobody listens)."""
        if not self._clients or not frame.height:
            self.namer.keep(tables)
            return
        self._seq += 1
        lost, self._lost = self._lost, 0
        self._broadcast(batch_line(self._seq, lost, self.namer.name(frame, tables)))

    def lost(self, ts_ns: int, counts: dict[str, int]) -> None:
        """Carried in the next batch's "lost" (losses while nobody streams are nobody's)."""
        if self._clients:
            self._lost += sum(counts.values())

