"""Decoded event arrays to id batches (schema.ID_BATCH_SCHEMA): epoch times, op names, file
ids, Python stack ids and the spans of the calls that did I/O; and the tables that name the
ids (model.BatchTables): the files, the job context of each cgroup, the uids' names, the
processes' context (rank, worker, tags) and the Python stacks. Names are applied only by the
sinks that show them (ioobserve.data.naming).

File ids (FileIds): one number per distinct (path, dev, ino) an event names, found from the
kernel's (dev, ino) of its open file or its path argument, so that the sinks key files by
number, never by string.

Runs per batch with joins and vectorized expressions; nothing here loops over events.
"""

from __future__ import annotations

import time

import numpy as np
import polars as pl

from ioobserve import _core
from ioobserve.collect.context_tables import ContextTables
from ioobserve.collect.http_requests import RequestBuilder
from ioobserve.context.tags import TAG_DIR, parse_tags, tag_text
from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.decode import HeadRecord, columns_of, kernel_dev_to_user
from ioobserve.data.derived import bytes_moved, errno_of
from ioobserve.data.model import FILE_ROW_SCHEMA, BatchTables
from ioobserve.data.operations import layer_of
from ioobserve.python.spans import PY_SAME, SpanBuilder

# File ids.

_NO_NUMBER = (1 << 64) - 1  # a null DEV or INO, to rows_by_file (no device or inode has it)
_SEED = 0x10B5  # any fixed seed: path hashes only find files within one batch
# The columns a batch gives its files by: the kernel's dev of an open file, and the path
# arguments (its first, and a rename's target).
KDEV, NAME, NAME2 = s.KDEV, s.NAME, s.NAME2
_ARGUMENTS = {KDEV: pl.UInt32, NAME: pl.String, NAME2: pl.String}
# Files remembered; beyond this the table starts over (a node-wide `serve` meets files without
# end). Ids keep counting, so none ever names two files: a file met again gets a new id, and
# a writer describes it again (two ids for one file read back as the same file).
MAX_FILES_KEPT = 1 << 20


class FileIds:
    """Gives each distinct file of a batch its recording-wide id: the path, DEV and INO of an
    open file, or of a path argument (with its DEV and INO, 0 if none), and each PATH2."""

    def __init__(self) -> None:
        self._ids: dict[tuple[str, int, int], int] = {}
        self._next_id = 1

    def assign(self, frame: pl.DataFrame, known: pl.DataFrame | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The frame (with FLAGS, KDEV, DEV, INO, NAME and NAME2) with FILE and FILE2 columns
        (null where it names no file) in place of KDEV, NAME and NAME2, and the files it names
        (FILE_ROW_SCHEMA). An event's path is the one `known` (kdev, ino, path: the paths
        learnt so far) gives its open file (FLAGS has F_FILE), else its path argument, NAME."""
        # Events made here, not drained (Python spans), name no file: they lack these columns.
        frame = frame.with_columns(pl.lit(None, dtype).alias(name) for name, dtype in _ARGUMENTS.items()
                                   if name not in frame.columns)
        opened = (_numbers(frame.get_column(s.FLAGS).fill_null(0)) & ev.F_FILE) != 0
        # Rows are grouped by the file they name in one compiled pass (a hash of the numbers
        # and the path argument's hash): only the batch's few distinct files go on from there.
        which, firsts = _core.rows_by_file(
            opened.view(np.uint8), *_with_validity(frame.get_column(KDEV), np.uint32),
            # A span (made here, not drained) has no DEV or INO: a value no file has stands for none.
            *(_numbers(frame.get_column(name).cast(pl.UInt64).fill_null(_NO_NUMBER)) for name in (s.DEV, s.INO)),
            *_with_validity(frame.get_column(NAME), np.uint64, hashed=True))
        firsts = np.frombuffer(firsts, dtype=np.uint32)
        if known is None:
            known = pl.DataFrame(schema={"kdev": pl.UInt64, "ino": pl.UInt64, "path": pl.String})
        groups = (
            frame.select(KDEV, s.DEV, s.INO, NAME)[firsts]
            .with_columns(pl.Series("_opened", opened[firsts]))
            .with_row_index("_group")
            .join(known.rename({"kdev": KDEV, "ino": s.INO, "path": "_known"}), on=[KDEV, s.INO], how="left",
                  maintain_order="left")
            .select("_group", pl.coalesce(pl.when("_opened").then("_known"), NAME).alias(s.PATH), s.DEV, s.INO)
        )
        rows: dict[int, tuple[int, str, int, int]] = {}
        group_ids = np.zeros(groups.height, dtype=np.uint32)  # 0: names no file
        for group, path, dev, ino in groups.drop_nulls(s.PATH).iter_rows():
            group_ids[group] = self._id_of(path, dev, ino, rows)
        named = frame.select(pl.exclude(KDEV, NAME, NAME2)).with_columns(
            pl.Series(s.FILE, group_ids[np.frombuffer(which, dtype=np.uint32)]).replace(0, None))
        targets = frame.get_column(NAME2)
        if targets.null_count() < frame.height:  # a rename's target
            distinct = targets.drop_nulls().unique(maintain_order=True).to_list()
            second = [self._id_of(path, 0, 0, rows) for path in distinct]
            named = named.with_columns(targets.replace_strict(distinct, second, default=None, return_dtype=pl.UInt32)
                                       .alias(s.FILE2))
        else:
            named = named.with_columns(pl.lit(None, pl.UInt32).alias(s.FILE2))
        return named, pl.DataFrame(list(rows.values()), schema=FILE_ROW_SCHEMA, orient="row")

    def _id_of(self, path: str, dev: int, ino: int, rows: dict) -> int:
        """The id of the file (path, dev, ino), given one if new; its row goes into `rows`."""
        if len(self._ids) >= MAX_FILES_KEPT:
            self._ids.clear()
        file_id = self._ids.get((path, dev, ino))
        if file_id is None:
            file_id = self._ids[(path, dev, ino)] = self._next_id
            self._next_id += 1
        rows[file_id] = (file_id, path, dev, ino)
        return file_id


def _numbers(column: pl.Series) -> np.ndarray:
    """A column without nulls as one contiguous numpy array."""
    return np.ascontiguousarray(column.to_numpy())


def _with_validity(column: pl.Series, dtype: type, hashed: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """A column's values as `dtype` (its hashes, for strings; 0 where null) and its validity
    (None: no null). A column of nulls only is all zeros: one value, as its nulls are."""
    nulls = column.null_count()
    if nulls == len(column):
        return np.zeros(len(column), dtype=dtype), None
    values = column.hash(_SEED) if hashed else column.fill_null(0) if nulls else column
    valid = _numbers(column.is_not_null()).view(np.uint8) if nulls else None
    return np.ascontiguousarray(values.to_numpy(), dtype=dtype), valid


# The enrichment.

_OPS = pl.Series("op_names", ev.OP_LABELS + ("unknown",) * (ev.MAX_OPS - len(ev.OP_NAMES)))


_LAYERS = pl.Series("layers", [layer_of(code) for code in range(ev.MAX_OPS)])
_NAME_KEYS = {"tid": pl.UInt32, "ts_ns": pl.UInt64}  # a name record and its call share the thread and entry time
_RAW_COLUMNS = [name for name in ev.EVENT.names if name != "comm"]
NAME_WAIT_NS = 10_000_000_000
# What a child does between fork and exec: not yet a worker's own I/O.
_HOUSEKEEPING = [ev.OP_CODES[op] for op in ("close", "close_range", "dup", "dup2", "dup3", "fcntl")]
RENAME_OPS = ("rename", "renameat", "renameat2")
RENAME_CUTS = 64  # a batch is named in at most this many pieces more (Enricher._named)


def monotonic_to_epoch_offset(samples: int = 5) -> int:
    """ns to add to CLOCK_MONOTONIC (bpf_ktime_get_ns) to get the Unix epoch."""
    best = None
    for _ in range(samples):
        before = time.monotonic_ns()
        wall = time.time_ns()
        after = time.monotonic_ns()
        gap = after - before
        if best is None or gap < best[0]:
            best = (gap, wall - (before + after) // 2)
    return best[1]


def _contiguous(frame: pl.DataFrame, column: str, dtype: pl.DataType) -> np.ndarray:
    """A column's values as `dtype`, in one contiguous numpy array (no copy where Polars holds
    one chunk of that type already)."""
    return np.ascontiguousarray(frame.get_column(column).cast(dtype).to_numpy())


class Enricher:
    """Joins each event batch with what the context tables know."""

    def __init__(self, context: ContextTables, clock_offset_ns: int):
        self.context = context
        self.clock_offset_ns = clock_offset_ns
        self.spans = SpanBuilder()
        self.requests = RequestBuilder(clock_offset_ns, lambda kdev, ino: context.files.by_id.get((kdev, ino)))
        self.file_ids = FileIds()
        self._names = pl.DataFrame(schema={"tid": pl.UInt32, "ts_ns": pl.UInt64, "index": pl.UInt16, "path": pl.String})

    def add_names(self, names: list[tuple]) -> None:
        """Queue path arguments (_core.aux_split's name columns) until their events arrive."""
        if names:
            self._names = pl.concat([self._names, self.context.files.names_frame(names)])

    def add_heads(self, heads: list[HeadRecord]) -> None:
        """Queue the HTTP request heads the kernel copied until their writes' events arrive."""
        self.requests.add_heads(heads)

    def frame(self, batch: np.ndarray) -> tuple[pl.DataFrame, BatchTables]:
        """The id batch of one event batch (schema.ID_BATCH_SCHEMA) and the tables naming its ids."""
        raw = pl.DataFrame(columns_of(batch, _RAW_COLUMNS))
        raw = raw.with_columns(
            pl.Series("udev", kernel_dev_to_user(batch["dev"])),
            # py_chain: the chain's id below PY_SAME_SHIFT, the levels shared with the thread's previous stack above
            (pl.col("py_chain") & ev.PY_CHAIN_MASK).alias("py_chain"),
            (pl.col("py_chain") // (1 << ev.PY_SAME_SHIFT)).cast(pl.UInt32).alias(PY_SAME),
        )
        with_names = self._join_names(raw)
        self._take_tags(with_names)
        self._confirm_workers(with_names)
        codes = pl.Series(batch["op"]).cast(pl.UInt32).clip(upper_bound=ev.MAX_OPS - 1)
        events = (
            self._with_stacks(with_names)
            .with_columns(_OPS.gather(codes).alias(s.OP), _LAYERS.gather(codes).alias(s.LAYER))
            .select(
                (pl.col("ts_ns") + self.clock_offset_ns).cast(pl.UInt64).alias(s.TS),
                pl.col("dur_ns").alias(s.DUR),
                pl.col("pid").alias(s.PID),
                pl.col("tid").alias(s.TID),
                pl.col("uid").alias(s.UID),
                pl.col(s.LAYER),
                pl.col(s.OP),
                pl.col("dev").alias(KDEV), pl.col("name_path").alias(NAME), pl.col("name_path2").alias(NAME2),
                pl.col("fd").alias(s.FD),
                pl.col("ret").alias(s.RET),
                errno_of(pl.col("ret"), pl.col(s.LAYER)).alias(s.ERRNO),
                pl.col("bytes_req").alias(s.BYTES_REQ),
                bytes_moved(pl.col(s.OP), pl.col("ret"), pl.col("bytes_req")).alias(s.BYTES),
                pl.col("offset").alias(s.OFFSET),
                pl.when((pl.col("flags") & (ev.F_FILE | ev.F_BLOCK)) != 0).then(pl.col("udev")).otherwise(0).alias(s.DEV),
                pl.col("ino").alias(s.INO),
                pl.col("cgroup_id").alias(s.CGROUP),
                pl.col("arg").alias(s.ARG),
                pl.col("flags").alias(s.FLAGS),
                ((pl.col("flags") & ev.F_REPEAT) == 0).alias(s.COUNTED),
                pl.when(pl.col("parent_ts") > 0).then(pl.col("parent_ts") + self.clock_offset_ns).cast(pl.UInt64)
                .alias(s.PARENT_TS),
                pl.col(s.PY_STACK), pl.when(pl.col(s.PY_STACK).is_not_null()).then(pl.lit(0, pl.UInt16)).alias(s.PY_FRAME),
                pl.col(s.PY_MODULE), pl.lit(None, pl.UInt16).alias(s.STATUS), pl.col(PY_SAME),
            )
        )
        requests = self.requests.add(events)
        events, spans = self.spans.add(events, self.context.stacks.levels(events.get_column(s.PY_STACK)))
        return self._with_spans(events, pl.concat([spans, requests], how="diagonal_relaxed"), int(batch["ts_ns"].min()))

    def end_spans(self, pids: list[int] | None = None) -> tuple[pl.DataFrame, BatchTables]:
        """The open Python spans and HTTP requests of these processes (all if None), ended:
        they are gone, or the recording is; enriched like the events, with their tables."""
        spans = self.spans.close(pids)
        made = pl.concat([spans, self.requests.close(pids)], how="diagonal_relaxed")
        return self._with_spans(spans.clear(), made, None)

    def _with_spans(self, events: pl.DataFrame, spans: pl.DataFrame, first_ns: int | None) -> tuple[pl.DataFrame, BatchTables]:
        """Events and the spans and requests made here, with their context (a span's from its
        start, maybe in an earlier batch)."""
        if spans.height:
            start = int(spans.get_column(s.TS).min()) - self.clock_offset_ns
            first_ns = start if first_ns is None else min(first_ns, start)
            events = pl.concat([events, spans], how="diagonal_relaxed")
        return self._with_context(events, first_ns or 0)

    def _with_stacks(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The frame with its Python stacks' ids (null where an event has none)."""
        chains = frame.get_column("py_chain")
        if chains.max():
            return frame.with_columns(self.context.stacks.ids(chains))
        return frame.with_columns(pl.lit(None, pl.UInt32).alias(s.PY_STACK))

    def _take_tags(self, frame: pl.DataFrame) -> None:
        """Apply the tag paths among the batch's path arguments, in time order, before the
        batch's events look up their context (ioobserve.context.tags)."""
        if frame.get_column("name_path").null_count() == frame.height:  # no path argument in the batch (a flood's)
            return
        tagged = frame.filter(pl.col("name_path").str.starts_with(TAG_DIR)).select("pid", "ts_ns", "name_path").sort("ts_ns")
        if tagged.is_empty():
            return
        # A process repeating its last tag (every step of a loop, say) changes nothing.
        repeated = (pl.col("name_path") == pl.col("name_path").shift(1).over("pid")).fill_null(False)
        for path, count in tagged.filter(repeated).group_by("name_path").len().iter_rows():
            if parse_tags(tag_text(path)) is None:
                self.context.timeline.tags_malformed += count
            else:
                self.context.timeline.tags_applied += count
        for pid, ts_ns, path in tagged.filter(~repeated).iter_rows():
            updates = parse_tags(tag_text(path))
            if updates is None:
                self.context.timeline.tags_malformed += 1
            else:
                self.context.timeline.tag(pid, ts_ns, updates)

    def _confirm_workers(self, frame: pl.DataFrame) -> None:
        """Rank children still pending (ioobserve.context.workers) whose first own I/O is in
        this batch become workers from its time."""
        pending = self.context.workers.pending()
        if not pending:
            return
        # Syscalls and library calls (an open() starts before its openat): not the kernel's
        # own layers, as the pages an exec faults in (CACHE) are not the program's I/O yet.
        kernel_side = (pl.col("op").is_between(ev.FIRST_BLOCK_OP, ev.FIRST_STDIO_OP - 1)
                       | pl.col("op").is_between(ev.FIRST_VFS_OP, ev.FIRST_HDF5_OP - 1) | (pl.col("op") >= ev.FIRST_MORE_VFS_OP))
        own_io = frame.filter(pl.col("pid").is_in(sorted(pending)) & ~kernel_side & ~pl.col("op").is_in(_HOUSEKEEPING))
        first = own_io.group_by("pid").agg(pl.col("ts_ns").min())
        self.context.workers.confirm(dict(first.iter_rows()))

    def _with_context(self, events: pl.DataFrame, first_ns: int) -> tuple[pl.DataFrame, BatchTables]:
        """The events' file ids, and the tables that name the batch's ids: its files, the job
        context of its cgroups, its uids' names, its processes' context rows in force during
        it and the Python stacks new to the sinks."""
        contexts = self.context.cgroups.lookup(events.get_column(s.CGROUP).unique().to_list())
        users = self.context.users.frame(events.get_column(s.UID).unique().to_list())
        pids = [pid for pid in events.get_column(s.PID).unique().to_list() if pid in self.context.timeline]
        rows = self.context.timeline.rows(pids, first_ns, self.clock_offset_ns)
        events, files = self._named(events)
        tables = BatchTables(files=files, cgroups=contexts, users=dict(users.iter_rows()), contexts=rows,
                             stacks=self.context.stacks.take_new())
        return events.select(list(s.ID_BATCH_SCHEMA)), tables

    def _named(self, events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The events with their file ids, and the files they name. The paths known by (dev, ino)
        follow each rename from its end on: a batch where a renamed file is used again after its
        rename is named in pieces cut there (at most RENAME_CUTS more), so that those calls name
        it by its new path (a download renamed into place and read at once, in the same batch)."""
        # Spans and requests made here (end_spans) are no calls of the kernel's: no path argument.
        renames = (events.filter(pl.col(s.OP).is_in(RENAME_OPS) & (pl.col(s.RET) == 0) & pl.col(NAME).is_not_null())
                   if NAME in events.columns else events.clear())
        if renames.is_empty():  # most batches: one pass
            return self.file_ids.assign(events, self.context.files.frame())
        cuts = self._rename_cuts(events, renames)
        piece = pl.Series(np.searchsorted(cuts, events.get_column(s.TS).to_numpy(), side="right"))
        named, files = [], []
        for number in piece.unique().sort().to_list():  # in time order: each after the renames before it
            part, part_files = self.file_ids.assign(events.filter(piece == number), self.context.files.frame())
            self._follow_renames(part, part_files)
            named.append(part)
            files.append(part_files)
        return pl.concat(named), pl.concat(files).unique(s.FILE, keep="first", maintain_order=True)

    def _rename_cuts(self, events: pl.DataFrame, renames: pl.DataFrame) -> np.ndarray:
        """The ends of the renames of a known file that a later call of the batch uses (its open
        file's dev and ino), in time order."""
        moved = self.context.files.frame().join(
            renames.select(pl.col(NAME).alias("path"), (pl.col(s.TS) + pl.col(s.DUR)).alias("_end")), on="path")
        if moved.is_empty():
            return np.empty(0, dtype=np.uint64)
        used_after = (events.filter((pl.col(s.FLAGS) & ev.F_FILE) != 0)
                      .select(pl.col(KDEV).alias("kdev"), pl.col(s.INO).alias("ino"), s.TS)
                      .join(moved.select("kdev", "ino", "_end"), on=["kdev", "ino"]).filter(pl.col(s.TS) >= pl.col("_end")))
        return np.unique(used_after.get_column("_end").to_numpy())[:RENAME_CUTS]

    def _follow_renames(self, events: pl.DataFrame, files: pl.DataFrame) -> None:
        """The paths known by (dev, ino) follow the renames among `events` (files: the FILE_ROW_SCHEMA
        table naming their ids)."""
        renames = events.filter(pl.col(s.OP).is_in(RENAME_OPS) & (pl.col(s.RET) == 0) & pl.col(s.FILE2).is_not_null())
        paths = dict(files.select(s.FILE, s.PATH).iter_rows()) if renames.height else {}
        for old, new in renames.select(s.FILE, s.FILE2).iter_rows():
            if paths.get(old):
                self.context.files.rename(paths[old], paths[new])

    def _join_names(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The frame with its calls' path arguments (name_path, name_path2) and import labels
        (PY_MODULE), matched to their name records by thread and entry time in one compiled
        lookup (a join would copy every column of the batch, three times)."""
        names = self._names
        if names.is_empty():  # most batches of a busy node
            return frame.with_columns(pl.lit(None, pl.String).alias(column) for column in ("name_path", "name_path2", s.PY_MODULE))
        *rows, matched = _core.match_names(*(_contiguous(frame, key, dtype) for key, dtype in _NAME_KEYS.items()),
                                           *(_contiguous(names, key, dtype) for key, dtype in _NAME_KEYS.items()),
                                           _contiguous(names, "index", pl.UInt16))
        paths = names.get_column("path")
        joined = frame.with_columns(
            paths.gather(pl.Series(np.frombuffer(row, dtype=np.int32)).replace(-1, None)).alias(column)
            for row, column in zip(rows, ("name_path", "name_path2", s.PY_MODULE), strict=True))
        # Names whose events have not been drained yet wait for the next batch; a name
        # whose event never came (lost on a full ring) is dropped after NAME_WAIT_NS.
        horizon = int(frame.get_column("ts_ns").max() or 0) - NAME_WAIT_NS
        self._names = names.filter(~pl.Series(np.frombuffer(matched, dtype=np.bool_)) & (pl.col("ts_ns") >= horizon))
        return joined
