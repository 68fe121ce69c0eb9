"""What the trace writer's queues carry: a closed set of small items, each handled by one
`match` in the thread that takes it (ioobserve.trace.write.format_thread, ioobserve.trace.write.disk_thread)."""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field

import polars as pl

from ioobserve.data.model import BatchTables


@dataclass(frozen=True)
class Line:
    """A metadata line or one of our own records (start, lost)."""

    text: bytes


@dataclass(frozen=True)
class ProcessLine:
    """A PR line, with the uid and cgroup its process's events need not repeat in this part."""

    text: bytes
    pid: int
    uid: int
    cgroup: int


@dataclass(frozen=True)
class Batch:
    """A batch's events as ids (schema.ID_SCHEMA) and the tables naming them, in queue order;
    `behind`: its calls ended writer.HURRY_LAG_NS or more before it reached the writer."""

    frame: pl.DataFrame
    tables: BatchTables
    behind: bool


@dataclass(frozen=True)
class Flushed:
    """A flush made into members in the pool (a future of (hurried, members)), for the disk thread."""

    made: Future
    events: int
    meta_lines: int


@dataclass(frozen=True)
class End:
    """A part's end record: written after everything queued before it, by the disk thread,
    which alone knows by then how many events were dropped."""

    record_id: int
    args: dict
    final: bool
    ts_us: int = field(default_factory=lambda: time.time_ns() // 1000)


@dataclass(frozen=True)
class Rotate:
    """Switch to the part file of this name."""

    name: str


@dataclass(frozen=True)
class FlushNow:
    """Flush what is pending (the start record goes out on its own: the file is readable at once)."""


@dataclass(frozen=True)
class Stop:
    """Write what is left and close."""
