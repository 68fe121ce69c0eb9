"""The trace sink: DFTracer-layout JSON lines, one gzip member per flush.

Each flush (at most every FLUSH_SECONDS or FLUSH_BYTES of text) appends a complete gzip
member that ends on a line boundary, so a recorder killed with SIGKILL leaves a file whose
every complete member loads.
"""

from __future__ import annotations

import os
import socket
import time
import zlib
from pathlib import Path

import polars as pl

from ioobserve import schema as s
from ioobserve.context.processes import Process
from ioobserve.trace.lines import complete_line, event_lines, metadata_line, string_hash
from ioobserve.trace.output import create_private_file

FLUSH_SECONDS = 1.0
FLUSH_BYTES = 8 << 20
GZIP_LEVEL = 3


def gzip_member(data: bytes, level: int = GZIP_LEVEL) -> bytes:
    """One complete gzip member holding `data`."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


class TraceWriter:
    """Writes one recording to <dir>/<host>-<time>-<pid>.pfw.gz."""

    def __init__(self, directory: Path, name: str, recording: dict):
        self.path = Path(directory) / name
        self._fd = create_private_file(Path(directory), name)
        self._pid = os.getpid()
        self._hhash = string_hash(socket.gethostname())
        self._fhashes: dict[str, str] = {}
        self._buffer: list[bytes] = []
        self._buffered = 0
        self._last_flush = time.monotonic()
        self._next_id = 1
        self.events_written = 0
        self.lost_counts: dict[str, int] = {}
        self._write(metadata_line("HH", self._pid, self._pid, {"hhash": self._hhash, "name": socket.gethostname(), "value": self._hhash}))
        self._write(complete_line(self._take_id(), "start", self._pid, self._pid, time.time_ns() // 1000, {"hhash": self._hhash, **recording}))
        self.flush()

    def _take_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def _write(self, data: bytes) -> None:
        self._buffer.append(data)
        self._buffered += len(data)

    def processes(self, changed: list[Process]) -> None:
        """A PR metadata line per process born, exec'd or seen."""
        for proc in changed:
            args = {
                "hhash": self._hhash, "ppid": proc.ppid, "comm": proc.comm, "exe": proc.exe,
                "cmdline": list(proc.cmdline), "uid": proc.uid, "cgroup": proc.cgroup_id,
            }
            self._write(metadata_line("PR", proc.pid, proc.pid, args))

    def _hash_paths(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Add fhash/fhash2 columns, writing an FH line for each path seen the first time."""
        paths = pl.concat([frame.get_column(s.PATH), frame.get_column(s.PATH2)]).drop_nulls().unique().to_list()
        for path in paths:
            if path not in self._fhashes:
                self._fhashes[path] = fhash = string_hash(path)
                self._write(metadata_line("FH", self._pid, self._pid, {"hhash": self._hhash, "name": path, "value": fhash}))
        lookup = pl.DataFrame({"p": paths, "h": [self._fhashes[p] for p in paths]}, schema={"p": pl.String, "h": pl.String})
        return (
            frame.join(lookup.rename({"p": s.PATH, "h": "fhash"}), on=s.PATH, how="left", nulls_equal=False)
            .join(lookup.rename({"p": s.PATH2, "h": "fhash2"}), on=s.PATH2, how="left", nulls_equal=False)
        )

    def events(self, frame: pl.DataFrame) -> None:
        """Format a batch; flush a gzip member when due."""
        hashed = self._hash_paths(frame)
        self._write(event_lines(hashed, self._next_id, self._hhash))
        self._next_id += frame.height
        self.events_written += frame.height
        if self._buffered >= FLUSH_BYTES or time.monotonic() - self._last_flush >= FLUSH_SECONDS:
            self.flush()

    def lost(self, ts_ns: int, counts: dict[str, int]) -> None:
        """A loss record for the interval, so a trace says what it misses."""
        for name, count in counts.items():
            self.lost_counts[name] = self.lost_counts.get(name, 0) + count
        self._write(complete_line(self._take_id(), "lost", self._pid, self._pid, ts_ns // 1000, {"hhash": self._hhash, "lost": counts}))

    def flush(self) -> None:
        """Append the buffered lines as one gzip member."""
        if self._buffer:
            data = gzip_member(b"".join(self._buffer))
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            self._buffer.clear()
            self._buffered = 0
        self._last_flush = time.monotonic()

    def close(self) -> None:
        """Write the end record, flush and close."""
        args = {"hhash": self._hhash, "num_events": self.events_written, "lost": self.lost_counts, "lost_total": sum(self.lost_counts.values())}
        self._write(complete_line(self._take_id(), "end", self._pid, self._pid, time.time_ns() // 1000, args))
        self.flush()
        os.fsync(self._fd)
        os.close(self._fd)
