"""Automatic insights: rules with thresholds over an Analysis, each in plain language with the
numbers that raised it, the files or processes most involved, and what to try. Thresholds
follow Drishti's where it has one (small requests under 1 MiB over 10% of them and 1000 in
all, random accesses over 20% and 1000, imbalance over 30%); a clean workload raises none."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import polars as pl

from ioobserve.analysis.copies import FETCHED, MAPPED, OBJECT, READ as COPY_READ
from ioobserve.analysis.patterns import RANDOM, SEQUENTIAL, UNALIGNED
from ioobserve.analysis.results import (
    BYTES_READ,
    BYTES_WRITTEN,
    CALLS,
    META_NS,
    REREAD_BYTES,
    TIME_NS,
    UNIQUE_BYTES_READ,
    Analysis,
)
from ioobserve.analysis.sizes import BUCKET, BUCKETS, COUNT
from ioobserve.analysis.timeline import MS, rebin
from ioobserve.data import schema as s
from ioobserve.data.model import SHARED_FS
from ioobserve.data.operations import KIND, METADATA, READ, WRITE
from ioobserve.data.units import format_bytes
from ioobserve.trace.read.tables import FSTYPE, MOUNTPOINT

HIGH, WARN = "high", "warn"
TOP = 3  # files or processes cited per insight

SMALL_BYTES_BUCKETS = BUCKETS[:5]  # < 1 MiB, Drishti's small request
SMALL_SHARE, SMALL_MIN = 0.10, 1000
TINY_WRITE_BUCKETS = BUCKETS[:2]  # <= 1 KiB
TINY_WRITE_SHARE, TINY_WRITE_MIN = 0.10, 1000
UNALIGNED_SHARE, UNALIGNED_MIN = 0.10, 1000
RANDOM_SHARE, RANDOM_MIN = 0.20, 1000
METADATA_SHARE, METADATA_MIN_CALLS, METADATA_RATE = 0.30, 1000, 1000.0  # share of I/O time; calls/s at peak
STAT_OPEN_SHARE, STAT_OPEN_MIN = 0.50, 200
SMALL_FILE_BYTES, SMALL_FILES_MIN, SMALL_FILES_SHARE = 1 << 20, 200, 0.50
REREAD_SHARE, REREAD_MIN_BYTES = 0.25, 16 << 20
SYNC_MIN, SYNC_PER_WRITE = 100, 0.10
IMBALANCE, IMBALANCE_MIN_NS = 0.30, 10_000_000  # (max - mean) / max of I/O time; ignore under 10 ms in all
PEAK_EXPONENT = 10  # 2^10 ms: rates per second
EVERY_WORKER_MIN, EVERY_WORKER_BYTES = 2, 1 << 20
CODE_SUFFIXES = (".py", ".pyc", ".so", ".pth")  # imports, reported apart from data files
SHARED_CODE_FILES = 50
UNREAD_SHARE, UNREAD_MIN_BYTES = 0.50, 1 << 20  # of the bytes fetched into local copies that were read


@dataclass
class Insight:
    """One finding: what (title), the numbers (detail), where (evidence), what to try (advice)."""

    code: str
    level: str
    title: str
    detail: str
    advice: str
    evidence: list[str] = field(default_factory=list)


def _share(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def _top(frame: pl.DataFrame, label: str, value: str, describe: Callable[[dict], str]) -> list[str]:
    """The TOP rows by `value`, each as `label: describe(row)`."""
    rows = frame.filter(pl.col(value) > 0).sort(value, label, descending=[True, False]).head(TOP)
    return [f"{row[label]}: {describe(row)}" for row in rows.iter_rows(named=True)]


def _small_io(a: Analysis) -> Insight | None:
    data = a.sizes.filter(pl.col(KIND).is_in([READ, WRITE]))
    total = data.get_column(COUNT).sum() or 0
    small = data.filter(pl.col(BUCKET).cast(pl.String).is_in(SMALL_BYTES_BUCKETS)).get_column(COUNT).sum() or 0
    if small < SMALL_MIN or _share(small, total) <= SMALL_SHARE:
        return None
    per_file = a.per_process_sizes.filter(pl.col(BUCKET).cast(pl.String).is_in(SMALL_BYTES_BUCKETS)).group_by(s.PATH).agg(
        pl.col(COUNT).sum())
    return Insight(
        "small-io", HIGH if _share(small, total) > 0.5 else WARN, "Most reads and writes are small",
        f"{small:,} of {total:,} reads and writes ({_share(small, total):.0%}) asked for less than 1 MiB.",
        "Read and write in larger blocks (buffer, batch samples into shards, raise the loader's read size); "
        "on a parallel file system each small request pays a round trip.",
        _top(per_file, s.PATH, COUNT, lambda r: f"{r[COUNT]:,} small requests"))


def _random_access(a: Analysis) -> Insight | None:
    total = (a.patterns.get_column(SEQUENTIAL).sum() or 0) + (a.patterns.get_column(RANDOM).sum() or 0)
    random = a.patterns.get_column(RANDOM).sum() or 0
    if random < RANDOM_MIN or _share(random, total) <= RANDOM_SHARE:
        return None
    per_file = a.per_process_patterns.group_by(s.PATH).agg(pl.col(RANDOM).sum())
    return Insight(
        "random-access", WARN, "Random access",
        f"{random:,} of {total:,} reads and writes with an offset ({_share(random, total):.0%}) went backwards "
        "from where the previous access of their file descriptor ended.",
        "Access files in order where the format allows (sort the sample order within a shard, read whole "
        "records); random small reads defeat readahead and the file system's prefetching.",
        _top(per_file, s.PATH, RANDOM, lambda r: f"{r[RANDOM]:,} random accesses"))


def _metadata(a: Analysis) -> Insight | None:
    meta = a.ops.filter(pl.col(META_NS) > 0)
    calls = meta.get_column(CALLS).sum() or 0
    share = a.overview.get("metadata_share") or 0.0
    peak = _peak_rate(a, METADATA)
    if calls < METADATA_MIN_CALLS or (share <= METADATA_SHARE and peak <= METADATA_RATE):
        return None
    return Insight(
        "metadata-storm", HIGH if share > 0.5 else WARN, "Metadata storm",
        f"{calls:,} metadata calls (open, stat, close, readdir ...) took {share:.0%} of the I/O time; "
        f"at the busiest moment {peak:,.0f} per second.",
        "Open each file once and keep it open, cache directory listings and stat results, pack many small "
        "files into a few large ones (tar/HDF5/webdataset shards); a parallel file system serves metadata from few servers.",
        _top(meta, s.OP, CALLS, lambda r: f"{r[CALLS]:,} calls, {r[TIME_NS] / 1e6:,.1f} ms"))


def _peak_rate(a: Analysis, kind: str) -> float:
    """The most calls of a kind in one second (a bin of 1024 ms, or the timeline's if wider)."""
    exponent = max(PEAK_EXPONENT, (a.timeline_ns // MS).bit_length() - 1)
    if a.layer is None:  # no I/O layer: nothing was called
        return 0.0
    bins = rebin(a.timeline.lazy().filter((pl.col(s.LAYER) == a.layer) & (pl.col(KIND) == kind)), exponent).collect()
    return float(bins.get_column(COUNT).max() or 0) * 1e9 / (MS << exponent)


def _stat_then_open(a: Analysis) -> Insight | None:
    opens = a.opens.get_column("opens").sum() or 0
    after = a.opens.get_column("opens_after_stat").sum() or 0
    if opens < STAT_OPEN_MIN or _share(after, opens) <= STAT_OPEN_SHARE:
        return None
    return Insight(
        "stat-before-open", WARN, "A stat before every open",
        f"{after:,} of {opens:,} opens ({_share(after, opens):.0%}) came right after a stat of the same path.",
        "Open directly and handle the error instead of checking first (os.path.exists, isfile); the stat is a "
        "second metadata round trip per file.",
        _top(a.opens.with_columns(pl.format("pid {}", s.PID).alias("process")), "process", "opens_after_stat",
             lambda r: f"{r['opens_after_stat']:,} of {r['opens']:,} opens"))


def _data_files(a: Analysis) -> pl.DataFrame:
    """Files read, without the interpreter's code (imports)."""
    return a.files.filter((pl.col(BYTES_READ) > 0) & ~_is_code())


def _small_files(a: Analysis) -> Insight | None:
    # a file's size as read: its distinct bytes, or all bytes read where offsets are unknown
    read = _data_files(a).with_columns(pl.when(pl.col(UNIQUE_BYTES_READ) > 0).then(pl.col(UNIQUE_BYTES_READ))
                                       .otherwise(pl.col(BYTES_READ)).alias("_seen"))
    small = read.filter(pl.col("_seen") < SMALL_FILE_BYTES)
    if small.height < SMALL_FILES_MIN or _share(small.height, read.height) <= SMALL_FILES_SHARE:
        return None
    mean = small.get_column("_seen").mean() or 0
    return Insight(
        "many-small-files", WARN, "Many small files",
        f"{small.height:,} of the {read.height:,} data files read ({_share(small.height, read.height):.0%}) gave "
        f"less than 1 MiB each (mean {format_bytes(mean)}).",
        "Pack samples into larger shards (tar, HDF5, webdataset, TFRecord); per-file open/stat/close costs "
        "dominate when files are this small.", [])


def _rereads(a: Analysis) -> Insight | None:
    read = a.files.get_column(BYTES_READ).sum() or 0
    again = a.files.get_column(REREAD_BYTES).sum() or 0
    if again < REREAD_MIN_BYTES or _share(again, read) <= REREAD_SHARE:
        return None
    return Insight(
        "re-reads", WARN, "The same bytes are read again",
        f"{format_bytes(again)} of the {format_bytes(read)} read ({_share(again, read):.0%}) were bytes of a file already read.",
        "Cache what every epoch or every worker reads again (in memory, on local disk or node-local NVMe), "
        "or read it once and share it.",
        _top(a.files, s.PATH, REREAD_BYTES, lambda r: f"{format_bytes(r[REREAD_BYTES])} re-read of {format_bytes(r[BYTES_READ])}"))


def _writes(a: Analysis) -> Insight | None:
    writes = a.sizes.filter(pl.col(KIND) == WRITE)
    total = writes.get_column(COUNT).sum() or 0
    tiny = writes.filter(pl.col(BUCKET).cast(pl.String).is_in(TINY_WRITE_BUCKETS)).get_column(COUNT).sum() or 0
    unaligned = a.patterns.filter(pl.col(KIND) == WRITE).get_column(UNALIGNED).sum() or 0
    if tiny >= TINY_WRITE_MIN and _share(tiny, total) > TINY_WRITE_SHARE:
        what = f"{tiny:,} of {total:,} writes ({_share(tiny, total):.0%}) wrote 1 KiB or less"
    elif unaligned >= UNALIGNED_MIN and _share(unaligned, total) > UNALIGNED_SHARE:
        what = f"{unaligned:,} of {total:,} writes ({_share(unaligned, total):.0%}) were not aligned to 4 KiB"
    else:
        return None
    per_file = a.per_process_sizes.filter((pl.col(KIND) == WRITE) & pl.col(BUCKET).cast(pl.String).is_in(
        TINY_WRITE_BUCKETS)).group_by(s.PATH).agg(pl.col(COUNT).sum())
    return Insight(
        "tiny-writes", WARN, "Tiny or unaligned writes", f"{what}.",
        "Buffer output (a larger buffer in open(), batch log lines, write whole records); small and unaligned "
        "writes make the file system read-modify-write pages and stripes.",
        _top(per_file, s.PATH, COUNT, lambda r: f"{r[COUNT]:,} tiny writes"))


def _syncs(a: Analysis) -> Insight | None:
    syncs = a.ops.filter(pl.col(s.OP).is_in(["fsync", "fdatasync", "sync_file_range", "syncfs", "msync"]))
    calls = syncs.get_column(CALLS).sum() or 0
    writes = a.overview.get("write_calls") or 0
    if calls < SYNC_MIN or _share(calls, writes) <= SYNC_PER_WRITE:
        return None
    sync_ns = syncs.get_column(TIME_NS).sum() or 0
    return Insight(
        "fsync-storm", WARN, "Frequent fsync",
        f"{calls:,} syncs for {writes:,} writes (one per {_share(writes, calls):.1f} writes), "
        f"{sync_ns / 1e6:,.1f} ms waiting on them.",
        "Sync once at a checkpoint's end instead of after each write; write to a temporary file, fsync it "
        "once, then rename.",
        _top(syncs, s.OP, CALLS, lambda r: f"{r[CALLS]:,} calls"))


def _imbalance(a: Analysis) -> Insight | None:
    for frame, what in ((a.ranks, "ranks"), (a.workers, "workers")):
        if frame.height < 2 or (frame.get_column(TIME_NS).sum() or 0) < IMBALANCE_MIN_NS:
            continue
        times = frame.get_column(TIME_NS)
        most, mean = times.max(), times.mean()
        if most and (most - mean) / most > IMBALANCE:
            labels = frame.with_columns(pl.format(f"{what[:-1]} {{}}", pl.col(s.RANK if what == "ranks" else s.WORKER))
                                        .alias("who"))
            return Insight(
                "imbalance", WARN, f"I/O imbalance across {what}",
                f"The busiest of {frame.height} {what} spent {most / 1e6:,.1f} ms in I/O, the mean {mean / 1e6:,.1f} ms "
                f"({(most - mean) / most:.0%} above the mean).",
                "Even out the work (shard sizes, sampler, file assignment); the slowest one sets the pace.",
                _top(labels, "who", TIME_NS, lambda r: f"{r[TIME_NS] / 1e6:,.1f} ms, {format_bytes(r[BYTES_READ] + r[BYTES_WRITTEN])}"))
    return None


def _every_worker(a: Analysis) -> Insight | None:
    workers = a.processes.filter(pl.col(s.WORKER).is_not_null()).height
    if workers < EVERY_WORKER_MIN:
        return None
    shared = _data_files(a).filter((pl.col("readers") >= workers) & (pl.col(BYTES_READ) >= EVERY_WORKER_BYTES))
    if not shared.height:
        return None
    return Insight(
        "read-by-every-worker", WARN, "Every worker reads the same file",
        f"{shared.height:,} file(s) were read by all {workers} worker processes.",
        "Read shared files (index, vocabulary, metadata) once in the main process and pass them to the workers, "
        "or memory-map them.",
        _top(shared, s.PATH, BYTES_READ, lambda r: f"read by {r['readers']} processes, {format_bytes(r[BYTES_READ])} in all"))


def _is_code() -> pl.Expr:
    """Paths of the interpreter's code: what imports read."""
    path = pl.col(s.PATH)
    return (pl.any_horizontal(path.str.ends_with(x) for x in CODE_SUFFIXES) | path.str.contains(r"\.so\.")
            | path.str.contains("/site-packages/|/dist-packages/"))


def _shared_imports(a: Analysis) -> Insight | None:
    code = a.files.filter(_is_code() & pl.col(FSTYPE).is_in(sorted(SHARED_FS)))
    calls = code.get_column(CALLS).sum() or 0
    if code.height < SHARED_CODE_FILES:
        return None
    per_mount = code.group_by(MOUNTPOINT, FSTYPE).agg(pl.len().alias("files"), pl.col(CALLS).sum(), pl.col(TIME_NS).sum())
    return Insight(
        "shared-fs-imports", WARN, "Python imports from a shared file system",
        f"{code.height:,} code files (.py, .pyc, .so) came from a shared file system: {calls:,} calls, "
        f"{(code.get_column(TIME_NS).sum() or 0) / 1e6:,.1f} ms; every process of every node repeats them.",
        "Install the environment on node-local storage or in a container image, or pack it (squashfs, conda-pack) "
        "so that a node reads one file instead of thousands of small ones on the shared servers.",
        _top(per_mount.with_columns(pl.format("{} ({})", MOUNTPOINT, FSTYPE).alias("mount")), "mount", CALLS,
             lambda r: f"{r['files']:,} files, {r[CALLS]:,} calls"))


def _fetched_unread(a: Analysis) -> Insight | None:
    # Copies never read in the trace are left out: a staging step's copies are read by a later job.
    read = a.copies.filter((pl.col(COPY_READ) > 0) & ~pl.col(MAPPED))
    fetched = read.get_column(FETCHED).sum() or 0
    used = read.get_column(COPY_READ).sum() or 0
    unread = max(fetched - used, 0)
    if fetched < UNREAD_MIN_BYTES or _share(unread, fetched) <= UNREAD_SHARE:
        return None
    wasteful = read.with_columns((pl.col(FETCHED).cast(pl.Int64) - pl.col(COPY_READ).cast(pl.Int64)).alias("_unread")).filter(
        pl.col("_unread") > pl.col(FETCHED) * UNREAD_SHARE)
    return Insight(
        "fetched-unread", HIGH if _share(unread, fetched) > 0.9 else WARN, "Most of what was fetched was never read",
        f"Of {format_bytes(fetched)} fetched from object storage into local copies, the application read "
        f"{format_bytes(used)} ({_share(used, fetched):.0%}); {format_bytes(unread)} ({_share(unread, fetched):.0%}) "
        "was fetched for nothing.",
        "Fetch what is read instead of whole objects: ranged reads (fsspec's blockcache or a smaller block size, "
        "boto3 get_object with Range), smaller shards, or read each shard whole (sort the samples by shard).",
        _top(wasteful, OBJECT, "_unread",
             lambda r: f"{format_bytes(r[FETCHED])} fetched, {format_bytes(r[COPY_READ])} read from its copy"))


def _throttled(a: Analysis) -> Insight | None:
    """Flood control held back a cgroup's events: the figures above lack them."""
    if a.throttles is None or not a.throttles.height:
        return None
    dropped = int(a.throttles.get_column("dropped").sum())
    evidence = [f"{row['job'] and 'job ' + row['job'] + ' (' + row['cgroup'] + ')' or row['cgroup']}: "
                f"{(row['end_ns'] - row['start_ns']) / 1e9:.1f} s, {row['dropped']:,} events held back "
                f"(limit {row['limit']:,}/s)" for row in a.throttles.head(TOP).iter_rows(named=True)]
    cgroups = a.throttles.get_column("cgroup").n_unique()
    return Insight("throttled", HIGH, f"Flood control held back {dropped:,} events of {cgroups} cgroup(s)",
                   "Past its events-a-second limit a cgroup's events were counted in the kernel instead of "
                   "recorded: this analysis lacks them, so its counts, bytes and times are low for those jobs.",
                   "Record again with a higher --flood-limit (0: none) if that job's I/O is what you are after; "
                   "its call rate alone may be the problem to look at.", evidence)


RULES: tuple[Callable[[Analysis], Insight | None], ...] = (
    _small_io, _random_access, _metadata, _stat_then_open, _small_files, _rereads, _writes, _syncs, _imbalance,
    _every_worker, _shared_imports, _fetched_unread, _throttled,
)


def insights(analysis: Analysis) -> list[Insight]:
    """Every rule's insight that fires, most severe first."""
    found = [insight for rule in RULES if (insight := rule(analysis)) is not None]
    return sorted(found, key=lambda insight: insight.level != HIGH)

