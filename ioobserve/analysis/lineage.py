"""Lineage without changing the application: the data files each process (and each Python
function of it) used, by reading them, and generated, by writing them or opening them anew
(created exclusively, or truncated for writing: an empty output too), with bytes and first
and last time; and `derived_from` links where one process read a file and later wrote
another. From the kernel's view of a trace, summed exactly across chunks, traces and nodes.

A program's own code and the system's files are not its data: files under SYSTEM_PREFIXES,
named like code (CODE_SUFFIXES, or in a site-packages directory) or the scratch files of
multiprocessing (TEMPORARY) are left out, so that a Python job's imports do not make every
output derive from the interpreter.
"""

from __future__ import annotations

import polars as pl

from ioobserve.analysis.aggregation import Aggregate, ChunkInputs, stacked
from ioobserve.data import schema as s
from ioobserve.data.operations import KIND, READ, WRITE
from ioobserve.data.totals import FIRST_NS, LAST_NS
from ioobserve.trace.read.tables import frames_of

BYTES_READ, BYTES_WRITTEN = "bytes_read", "bytes_written"
FIRST_READ, LAST_READ, FIRST_WRITE, LAST_WRITE = "first_read_ns", "last_read_ns", "first_write_ns", "last_write_ns"
SOURCE, TARGET, PROCESSES, GENERATED = "source", "target", "processes", "generated"
LINEAGE_KEYS = [s.HOST, s.PID, s.CGROUP, s.FILE_ID, s.PY_FUNCTION, s.PY_FILE]
SUMS, FIRSTS, LASTS = (BYTES_READ, BYTES_WRITTEN), (FIRST_READ, FIRST_WRITE), (LAST_READ, LAST_WRITE)
SYSTEM_PREFIXES = ("/usr/", "/lib/", "/lib64/", "/bin/", "/sbin/", "/etc/", "/proc/", "/sys/", "/dev/", "/run/",
                   "/var/cache/", "/var/lib/", "pipe:", "socket:", "anon_inode:")
CODE_SUFFIXES = (".py", ".pyc", ".pyi", ".pth", "._pth", "pyvenv.cfg", ".so", ".dist-info", ".egg-info")
TEMPORARY = ("/pymp-", "/torch_shm_")  # multiprocessing's and PyTorch's scratch files between processes
MAX_LINKS = 100_000  # derived_from links kept (a process that read every shard and wrote many files)
OPENS = ("open", "openat", "openat2", "open64", "creat", "creat64")
O_ACCMODE, O_CREAT, O_EXCL, O_TRUNC = 0o3, 0o100, 0o200, 0o1000  # Linux's open flags (the events' ARG)


def opened_anew() -> pl.Expr:
    """An open that made its file anew: creat, created exclusively, or truncated for writing."""
    flags = pl.col(s.ARG)
    exclusive = (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)
    truncated = ((flags & O_TRUNC) != 0) & ((flags & O_ACCMODE) != 0)
    return (pl.col(s.OP).cast(pl.String).is_in(OPENS) & (pl.col(s.RET) >= 0)
            & (pl.col(s.OP).cast(pl.String).str.starts_with("creat") | exclusive | truncated))


class Lineage(Aggregate):
    """Bytes read and written, and when, per process, cgroup, file and the Python function
    that made the calls (null without a stack)."""

    name, keys = "lineage", tuple(LINEAGE_KEYS)

    def chunk(self, inputs: ChunkInputs) -> dict[str, pl.LazyFrame]:
        """The chunk's reads and writes of files, per key."""
        moved = pl.col(KIND).is_in([READ, WRITE]) & (pl.col(s.BYTES) > 0)
        data = inputs.io.filter(pl.col(s.FILE_ID).is_not_null() & (moved | opened_anew()))
        read, write = (pl.col(KIND) == READ) & moved, (pl.col(KIND) == WRITE) & moved
        made = write | opened_anew()
        end = pl.col(s.TS) + pl.col(s.DUR)
        names = frames_of(inputs.tables.stacks).lazy().select(s.PY_STACK, s.PY_FRAME, s.PY_FUNCTION, s.PY_FILE)
        named = data.with_columns(pl.col(s.PY_FRAME).fill_null(0)).join(names, on=[s.PY_STACK, s.PY_FRAME], how="left")
        sums = named.group_by(s.PID, s.CGROUP, s.FILE_ID, s.PY_FUNCTION, s.PY_FILE).agg(
            pl.col(s.BYTES).filter(read).sum().alias(BYTES_READ), pl.col(s.BYTES).filter(write).sum().alias(BYTES_WRITTEN),
            pl.col(s.TS).filter(read).min().alias(FIRST_READ), end.filter(read).max().alias(LAST_READ),
            pl.col(s.TS).filter(made).min().alias(FIRST_WRITE), end.filter(made).max().alias(LAST_WRITE))
        return {"lineage": sums.with_columns(inputs.on_host)}

    def combine(self, values: list[pl.DataFrame]) -> pl.DataFrame:
        """Every partial's rows per key: bytes summed, first times the least, last the greatest."""
        return stacked(values).group_by(LINEAGE_KEYS).agg(
            *(pl.col(c).sum() for c in SUMS), *(pl.col(c).min() for c in FIRSTS), *(pl.col(c).max() for c in LASTS))


def is_data(path: pl.Expr) -> pl.Expr:
    """Whether a path is a job's data, not its code or the system's files."""
    code = path.str.ends_with(CODE_SUFFIXES[0])
    for suffix in CODE_SUFFIXES[1:]:
        code = code | path.str.ends_with(suffix)
    system = pl.any_horizontal(path.str.starts_with(prefix) for prefix in SYSTEM_PREFIXES)
    scratch = pl.any_horizontal(path.str.contains(part, literal=True) for part in ("/site-packages/", *TEMPORARY))
    return path.is_not_null() & ~code & ~system & ~scratch & ~path.str.contains(r"\.so\.\d")


def lineage_rows(lineage: pl.DataFrame, files: pl.DataFrame, owners: pl.DataFrame, processes: pl.DataFrame) -> pl.DataFrame:
    """Per job, process, Python function and data file: bytes read and written, first and last
    time of each, and whether it GENERATED the file (wrote it or opened it anew; JOB from the
    owners, COMM from the processes); the most bytes first."""
    named = (lineage.join(files.select(s.FILE_ID, pl.col(s.PATH).cast(pl.String)), on=s.FILE_ID, how="left")
             .filter(is_data(pl.col(s.PATH)))
             .join(owners.select(s.HOST, s.PID, s.CGROUP, s.JOB), on=[s.HOST, s.PID, s.CGROUP], how="left")
             .join(processes.select(s.HOST, s.PID, s.COMM), on=[s.HOST, s.PID], how="left"))
    return (named.group_by(s.JOB, s.HOST, s.PID, s.COMM, s.PY_FUNCTION, s.PY_FILE, s.PATH)
            .agg(*(pl.col(c).sum() for c in SUMS), *(pl.col(c).min() for c in FIRSTS), *(pl.col(c).max() for c in LASTS))
            .with_columns(pl.col(LAST_WRITE).is_not_null().alias(GENERATED))
            .sort(pl.col(BYTES_READ) + pl.col(BYTES_WRITTEN), s.PATH, s.HOST, s.PID, descending=[True, False, False, False],
                  nulls_last=True))


def derived_links(rows: pl.DataFrame) -> pl.DataFrame:
    """(JOB, HOST, PID, SOURCE, TARGET): a process read SOURCE before it last wrote TARGET, so
    TARGET may derive from it (the first MAX_LINKS, by process and path)."""
    per_file = rows.group_by(s.JOB, s.HOST, s.PID, s.PATH).agg(pl.col(FIRST_READ).min(), pl.col(LAST_WRITE).max())
    sources = per_file.filter(pl.col(FIRST_READ).is_not_null()).select(s.HOST, s.PID, pl.col(s.PATH).alias(SOURCE), FIRST_READ)
    targets = per_file.filter(pl.col(LAST_WRITE).is_not_null()).select(s.JOB, s.HOST, s.PID, pl.col(s.PATH).alias(TARGET),
                                                                         LAST_WRITE)
    return (targets.join(sources, on=[s.HOST, s.PID], how="inner")
            .filter((pl.col(SOURCE) != pl.col(TARGET)) & (pl.col(FIRST_READ) < pl.col(LAST_WRITE)))
            .select(s.JOB, s.HOST, s.PID, SOURCE, TARGET, FIRST_READ, LAST_WRITE)
            .sort(s.HOST, s.PID, TARGET, SOURCE).head(MAX_LINKS))


def role(read: int, generated: bool) -> str:
    """How a job or process touched a file: used (read), generated (written or made anew), or both."""
    return "used and generated" if read and generated else "generated" if generated else "used"


def per_job(lineage: pl.DataFrame) -> pl.DataFrame:
    """Per job and file: bytes read and written, whether generated, processes, first and last
    time; the most bytes first."""
    return (lineage.group_by(s.JOB, s.PATH).agg(
        pl.col(BYTES_READ).sum(), pl.col(BYTES_WRITTEN).sum(), pl.col(GENERATED).any(), pl.struct(s.HOST, s.PID).n_unique().alias(PROCESSES),
        pl.min_horizontal(pl.col(FIRST_READ).min(), pl.col(FIRST_WRITE).min()).alias(FIRST_NS),
        pl.max_horizontal(pl.col(LAST_READ).max(), pl.col(LAST_WRITE).max()).alias(LAST_NS))
        .sort(pl.col(BYTES_READ) + pl.col(BYTES_WRITTEN), s.PATH, descending=[True, False], nulls_last=True))


def per_process(lineage: pl.DataFrame) -> pl.DataFrame:
    """Per process: how many data files it read and wrote, and the bytes; the most bytes first."""
    return (lineage.group_by(s.JOB, s.HOST, s.PID, s.COMM).agg(
        pl.col(s.PATH).filter(pl.col(BYTES_READ) > 0).n_unique().alias("files_read"), pl.col(BYTES_READ).sum(),
        pl.col(s.PATH).filter(pl.col(GENERATED)).n_unique().alias("files_written"), pl.col(BYTES_WRITTEN).sum())
        .sort(pl.col(BYTES_READ) + pl.col(BYTES_WRITTEN), s.HOST, s.PID, descending=[True, False, False]))
