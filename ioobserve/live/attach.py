"""`top --attach SOCKET`: a running `serve`'s event stream as a live source, so the TUI
watches the node without a second set of probes."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import BinaryIO

import polars as pl

from ioobserve.data import schema as s
from ioobserve.live.source import Outcome
from ioobserve.live.window_totals import Snapshot, WindowAggregator
from ioobserve.serve.stream import STREAMING

ANSWER_TIMEOUT_S = 30.0  # the daemon answers at once; a busy node may be slow to schedule it


class AttachError(Exception):
    """The daemon's socket cannot be read; the message says why."""


def batch_frame(line: bytes) -> tuple[pl.DataFrame, int]:
    """One stream line (ioobserve.serve.stream.batch_line) as (events in schema types, lost)."""
    batch = pl.read_json(line, infer_schema_length=None)
    lost = int(batch.get_column("lost")[0])
    events = batch.select("events").explode("events").drop_nulls().unnest("events")
    return events.cast({c: s.BATCH_SCHEMA[c] for c in events.columns if c in s.BATCH_SCHEMA}, strict=False), lost


class AttachedSource:
    """Batches from the socket, folded into window aggregates on a reader thread."""

    live = True

    def __init__(self, path: Path) -> None:
        self.aggregator = WindowAggregator(time.time_ns())
        self.unavailable: dict[str, str] = {}
        self.ready = threading.Event()
        self.outcome = Outcome()
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._lines = self._subscribe(path)
        except BaseException:
            self._socket.close()
            raise
        self._thread = threading.Thread(target=self._read, name="ioobserve-attach", daemon=True)

    def _subscribe(self, path: Path) -> BinaryIO:
        """Ask for the stream and wait for the daemon's `ok streaming`: from then on events flow."""
        try:
            self._socket.settimeout(ANSWER_TIMEOUT_S)
            self._socket.connect(str(path))
            self._socket.sendall(b"stream\n")
            lines = self._socket.makefile("rb")  # kept: it may have read the first batches already
            answer = lines.readline(256)
            self._socket.settimeout(None)
        except FileNotFoundError:
            raise AttachError(f"{path}: no such socket (is ioobserve serve running? see its --socket)") from None
        except PermissionError:
            raise AttachError(f"{path}: permission denied (root, or the daemon's socket-group, may read it)") from None
        except TimeoutError:
            raise AttachError(f"{path}: the daemon did not answer within {ANSWER_TIMEOUT_S:g} s") from None
        except OSError as exc:
            raise AttachError(f"{path}: {exc.strerror or exc}") from None
        if answer != STREAMING:
            said = answer.decode(errors="replace").strip() or "nothing"
            raise AttachError(f"{path}: the daemon answered {said!r}, not {STREAMING.decode().strip()!r}")
        return lines

    def start(self) -> None:
        """Read the stream until stop() or the daemon goes."""
        self._thread.start()
        self.ready.set()

    def _read(self) -> None:
        try:
            for line in self._lines:
                frame, lost = batch_frame(line)
                if lost:
                    self.aggregator.lost(lost)
                if frame.height:
                    self.aggregator.add(frame)
            self.unavailable = {"stream": "the daemon closed it"}
        except (OSError, ValueError) as exc:  # closed by stop(), or a line that is not a batch
            if not isinstance(exc, OSError):
                self.outcome.error = exc

    def snapshot(self) -> Snapshot:
        """What arrived since the last call."""
        return self.aggregator.take(time.time_ns())

    def stop(self) -> None:
        """Disconnect (the daemon stops letting events out when its last client goes)."""
        try:
            self._socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._socket.close()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
