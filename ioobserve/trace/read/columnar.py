"""The columnar copy of a trace, `<trace>.parquet`: its events as `load` gives them, sorted
by time, with each one's FILE_ID (for the analyses), so that reading is fast and lazy
(projection and predicates reach the Parquet reader).

The `.pfw.gz` is the record of truth; the copy is a cache anyone may delete. Its key,
`<trace>.parquet.key`, says which state of the trace it was built from (size, members and a
checksum of the index; size and a checksum of both ends for a trace without an index), the
Polars version (FILE_ID is its hash), the copy's own size and checksum (read again in full
when the copy is not the file written then: another inode, or modified since), and the damage
found while building it, and the columns that are the same in every event (all null, or one
value): those are read as a constant, which Polars holds as one value, not a column per
event (most of a trace's context columns: a node's events share a user, a job, no rank).
The columns the trace's tables leave null in every event are not in the copy at all (the
key names the columns that are): Parquet's cost is per column, however empty. A copy whose key
does not match is stale or corrupt: it is never read, and is rebuilt. Copies are written, and
read, only in a directory safe to write in as we are (ioobserve.trace.output); elsewhere, and
while a recorder is still writing the trace (it holds a lock on it), a trace is read from its
members every time. A crashed recording's lock went with it: its trace gets a copy.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import deflate
import polars as pl
from polars.io.plugins import register_io_source

from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.plumbing.memory import release_freed_buffers
from ioobserve.trace.members import Damage, index_path, parse_index
from ioobserve.trace.output import OutputError, check_output_dir
from ioobserve.trace.read.inflate import Selection, TraceError, read_lines, run_chunks
from ioobserve.trace.read.named import TraceNames

COPY_SUFFIX = ".parquet"
KEY_SUFFIX = ".parquet.key"
def copy_version(schema: dict[str, pl.DataType]) -> str:
    """The version a copy of these columns is written with: a copy of another version is
    rebuilt. The number counts changes of meaning (2: FILE_ID; 3: labels Categorical, uniform
    columns; 4: columns null by the tables left out); the digests, any change of the columns
    and of the ops whose return is the BYTES a copy derives (a copy an older ioobserve made)."""
    return (f"4-{zlib.crc32(repr(list(schema.items())).encode()):08x}"
            f"-{zlib.crc32(repr(sorted(ev.BYTES_OPS)).encode()):08x}")


VERSION = copy_version(s.COPY_SCHEMA)
# Of trace text named at a time while building: about 40 k events (a copy of 100 M events
# builds flat at 450-530 MB).
BUILD_CHUNK_BYTES = 8 << 20
# LZ4 reads 1.5x faster than zstd here, for a copy 1.7x larger (a cache, beside a trace that
# is larger still). Polars' Parquet sink keeps about 100 KB per row group until the end: with
# 512 Ki-row groups that is 20 MB for 100 M events (80 MB with 128 Ki).
COMPRESSION = "lz4"
ROW_GROUP_ROWS = 1 << 19
_ENDS = 64 << 10  # bytes at each end of an unindexed trace that its key checks


def copy_path(trace: Path) -> Path:
    """Where a trace's copy lives."""
    return Path(trace).with_name(Path(trace).name + COPY_SUFFIX)


def key_path(trace: Path) -> Path:
    """Where a trace's copy key lives."""
    return Path(trace).with_name(Path(trace).name + KEY_SUFFIX)


def source_key(trace: Path) -> dict:
    """What identifies the present state of a trace (raises OSError if it cannot be read)."""
    with open(trace, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        try:
            raw = index_path(trace).read_bytes()
        except OSError:
            raw = None
        entries = parse_index(raw, size) if raw is not None else None
        key = {"size": size, "members": None if entries is None else len(entries),
               "index_crc32": None if raw is None else deflate.crc32(raw)}  # a stale index: what it says is noted
        if entries is None:
            head = handle.read(_ENDS)
            handle.seek(max(0, size - _ENDS))
            key["ends_crc32"] = deflate.crc32(head + handle.read(_ENDS))
        return key


def safe_place(trace: Path) -> bool:
    """Whether the trace's directory is one to keep a copy in (ours or root's, not writable by others)."""
    directory = Path(trace).parent
    if not directory.is_dir():
        return False  # check_output_dir would create it
    try:
        check_output_dir(directory)
    except OutputError:
        return False
    return True


def being_written(trace: Path) -> bool:
    """Whether a recorder is still writing the trace (its disk process holds a lock on it): a
    copy would be stale at its next flush, so none is built."""
    try:
        fd = os.open(trace, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False  # no locks here: nothing says so
    finally:
        os.close(fd)  # and with it our lock
    return False


@dataclass(frozen=True)
class Copy:
    """A trace's copy that matches it: where it is, the damage found in the trace, the columns
    that hold one value in every event (None: all null), and those the copy holds (the others
    are all uniform)."""

    path: Path
    damage: Damage
    uniform: dict[str, object] = field(default_factory=dict)
    columns: tuple[str, ...] = tuple(s.COPY_SCHEMA)


def valid_copy(trace: Path) -> Copy | None:
    """The trace's copy if it has one that matches it now."""
    trace = Path(trace)
    copy = copy_path(trace)
    try:
        key = json.loads(key_path(trace).read_bytes())
        if (key.get("version"), key.get("polars")) != (VERSION, pl.__version__) or not safe_place(trace) or \
                key.get("source") != source_key(trace):
            return None
        built, now = key["copy"], os.lstat(copy)
        if not stat.S_ISREG(now.st_mode) or now.st_size != built["size"]:
            return None
        # Its checksum was taken as it was written: the whole copy is read again only when
        # it is not the file written then (another inode, or modified since).
        if (now.st_ino, now.st_mtime_ns) != (built["ino"], built["mtime_ns"]) and \
                file_crc32(copy) != built["crc32"]:
            return None
        uniform, columns = key["uniform"], tuple(key["columns"])
        if set(uniform) | set(columns) != set(s.COPY_SCHEMA):  # every column is in the copy or a constant
            return None
        return Copy(copy, Damage(trace, **key["damage"]), uniform, columns)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def build_copy(trace: Path, progress: bool | None = None) -> Copy | None:
    """Write a trace's copy and its key, from its members; the copy, or None where copies are
    not kept, of a trace still being written, or where the copy cannot
    be written (a full disk). Memory stays about one chunk of events."""
    trace = Path(trace)
    if not safe_place(trace) or being_written(trace):
        return None
    try:
        source = source_key(trace)  # before reading: a trace that grows meanwhile gets a copy that is stale at once
    except OSError as exc:
        raise TraceError(f"{trace}: cannot read it ({exc.strerror})") from None
    found: list[Damage] = []
    failure: list[BaseException] = []
    names = TraceNames(read_lines(trace))
    kept = {name: dtype for name, dtype in s.COPY_SCHEMA.items() if name not in names.null_columns}
    uniform = UniformColumns(kept)

    def chunks(with_columns, predicate, n_rows, batch_size):
        try:
            for parts in run_chunks([trace], Selection(lines=False), found, progress, BUILD_CHUNK_BYTES):  # names: read above
                events = names.name(parts.file_events(trace), file_ids=True).select(list(kept))
                uniform.see(events)
                yield events
        except BaseException as exc:  # Polars would wrap it: keep it to raise as it was
            failure.append(exc)
            raise

    try:
        fd, temp = tempfile.mkstemp(prefix=".ioo-copy-", suffix=COPY_SUFFIX, dir=trace.parent)  # 0600, new
    except OSError:
        return None
    os.close(fd)
    try:
        try:
            register_io_source(chunks, schema=kept).sink_parquet(
                temp, compression=COMPRESSION, row_group_size=ROW_GROUP_ROWS)
        except Exception:
            if failure:
                raise failure[0] from None
            Path(temp).unlink(missing_ok=True)
            return None  # the copy could not be written: the trace is read from its members
        crc = file_crc32(Path(temp))
        damage = found[0] if found else Damage(trace)
        os.replace(temp, copy_path(trace))
        written = os.stat(copy_path(trace))
        key = {"version": VERSION, "polars": pl.__version__, "source": source,  # Polars' version: FILE_ID's hash
               "copy": {"size": written.st_size, "crc32": crc, "ino": written.st_ino, "mtime_ns": written.st_mtime_ns},
               "damage": {"members_lost": damage.members_lost, "truncated_tail": damage.truncated_tail,
                          "notes": damage.notes},
               "uniform": uniform.columns() | dict.fromkeys(names.null_columns), "columns": list(kept)}
        _write_private(key_path(trace), json.dumps(key).encode())
    except OSError:
        Path(temp).unlink(missing_ok=True)
        return None
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    finally:
        release_freed_buffers()
    return Copy(copy_path(trace), damage, key["uniform"], tuple(kept))


class UniformColumns:
    """Which columns of the events seen so far hold one value in every event, or none."""

    def __init__(self, schema: dict[str, pl.DataType]) -> None:
        self._schema = schema
        self._values: dict[str, object] | None = None  # per column still uniform: its value (None: all null)

    def see(self, events: pl.DataFrame) -> None:
        """Take in one chunk of events (of the schema given)."""
        if not events.height:
            return
        candidates = list(self._schema) if self._values is None else list(self._values)
        firsts = events.select(candidates).head(1).row(0, named=True)
        values = {}
        for name in candidates:
            column = events.get_column(name)
            nulls = column.null_count()
            if nulls == events.height:
                value = None
            elif nulls or isinstance(column.dtype, pl.List):
                continue
            elif (physical := column.to_physical()).min() == physical.max():  # a label's id: the same text
                value = firsts[name]
            else:
                continue
            if self._values is None or self._values[name] == value:
                values[name] = value
        self._values = values

    def columns(self) -> dict[str, object]:
        """Each uniform column and its value (None: null in every event)."""
        return dict(self._values or {})


def file_crc32(path: Path) -> int:
    """The CRC-32 of a file, read a block at a time (a copy can be larger than memory)."""
    crc = 0
    with open(path, "rb") as source:
        while block := source.read(1 << 20):
            crc = deflate.crc32(block, crc)
    return crc


def scan_copy(copy: Copy, file_ids: bool = False) -> pl.LazyFrame:
    """A copy's events, lazily (with their FILE_ID if asked); uniform columns as constants."""
    columns = s.COPY_SCHEMA if file_ids else s.EVENT_SCHEMA
    return pl.scan_parquet(copy.path, schema={name: s.COPY_SCHEMA[name] for name in copy.columns}).select(
        pl.lit(copy.uniform[name], dtype).alias(name) if name in copy.uniform else pl.col(name)
        for name, dtype in columns.items())


def restamp_copy(trace: Path, before: dict) -> None:
    """Keep the copy of a trace that gained members without events (its provenance records):
    a copy that matched its state `before` (a source_key) is marked as matching it now."""
    try:
        key = json.loads(key_path(trace).read_bytes())
    except (OSError, ValueError):
        return
    if isinstance(key, dict) and key.get("source") == before:
        key["source"] = source_key(trace)
        _write_private(key_path(trace), json.dumps(key).encode())


def _write_private(target: Path, data: bytes) -> None:
    """Replace `target` with `data` through a new 0600 file renamed over it."""
    fd, temp = tempfile.mkstemp(prefix=".ioo-key-", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
