"""Objects read through local copies (ioobserve.analysis.copies): which files are copies of
which fetched objects, the bytes fetched against those read, and the fetched-unread insight,
on synthetic traces analysed whole and in chunks."""

from __future__ import annotations

from ioobserve.analysis import results as r
from ioobserve.analysis.copies import COPIES_SCHEMA, cells
from ioobserve.analysis.insights import insights
from ioobserve.analysis.trace_partial import ChunkPlan, trace_partial
from ioobserve.data import schema as s
from tests.unit.synthetic_traces import Proc, io, write_trace

MiB = 1 << 20
FETCHER, LOADER, OTHER = Proc(10), Proc(11, ppid=10, worker=0), Proc(12)
SHARD = "https://s3.local/train/shard-0.tar"
HEADERS = 300  # an answer's status line and headers: the HTTP layer counts them with its bytes


def _get(proc: Proc, tid: int, start_ms: float, end_ms: float, path: str, size: int) -> dict:
    return io(proc, tid, start_ms * 1000, end_ms * 1000, "GET", path, ret=size + HEADERS, layer=s.LAYER_HTTP)


def _write(proc: Proc, tid: int, at_ms: float, path: str, offset: int, size: int, ino: int = 0) -> dict:
    return io(proc, tid, at_ms * 1000, at_ms * 1000 + 50, "write", path, fd=5, offset=offset, size=size, ino=ino)


def _read(proc: Proc, at_ms: float, path: str, offset: int, size: int, ino: int = 0) -> dict:
    return io(proc, proc.pid, at_ms * 1000, at_ms * 1000 + 50, "read", path, fd=6, offset=offset, size=size, ino=ino)


def _download(proc: Proc, start_ms: float, path: str, copy: str, size: int, ino: int = 0, writer_tid: int = 0,
              chunk: int = MiB, lag_ms: float = 0.5) -> list[dict]:
    """One GET of a whole object, written to `copy` in chunks as it arrives (by another thread
    of the process when writer_tid is given, lagging it)."""
    chunks = range(0, size, chunk)
    end_ms = start_ms + 2 * len(chunks)
    return [_get(proc, proc.pid + 100, start_ms, end_ms, path, size)] + [
        _write(proc, writer_tid or proc.pid + 100, start_ms + 2 * (i + 1) + lag_ms, copy, offset, min(chunk, size - offset), ino)
        for i, offset in enumerate(chunks)]


def _analysis(tmp_path, rows: list[dict], procs=(FETCHER, LOADER, OTHER), rows_per_chunk: int | None = None) -> r.Analysis:
    trace = write_trace(tmp_path, list(procs), [sorted(rows, key=lambda e: e[s.TS])])
    plan = ChunkPlan(rows=rows_per_chunk) if rows_per_chunk else ChunkPlan()
    return r.results(trace_partial(trace, plan=plan))


def test_a_copy_read_in_part_raises_the_insight_and_a_renamed_copy_read_whole_does_not(tmp_path):
    rows = _download(FETCHER, 0, SHARD, "/cache/3f9a", 8 * MiB, ino=21)
    rows += [_read(LOADER, 100 + i, "/cache/3f9a", i * 2 * MiB, 512 * 1024, ino=21) for i in range(3)]
    rows += [_read(LOADER, 110, "/cache/3f9a", 0, 4096, ino=21)]  # read again: counts once
    # boto3's download_file: its writer thread, a temporary name renamed into place, then read whole
    rows += _download(FETCHER, 200, "https://s3.local/train/index.json", "/data/index.json.1a2b", 2 * MiB, ino=22,
                      writer_tid=15, lag_ms=30)
    rows += [_read(FETCHER, 300 + i, "/data/index.json", i * MiB, MiB, ino=22) for i in range(2)]
    rows += [_read(FETCHER, 250, "/data/index.json.1a2b", 0, MiB, ino=22)]  # before its rename: counted once
    analysis = _analysis(tmp_path, rows)
    assert analysis.copies.schema == COPIES_SCHEMA
    assert analysis.copies.select("object", "objects", "copy", "copies", "fetched", "written", "read", "mapped").rows() == [
        (SHARD, 1, "/cache/3f9a", 1, 8 * MiB + HEADERS, 8 * MiB, 3 * 512 * 1024, False),
        ("https://s3.local/train/index.json", 1, "/data/index.json", 1, 2 * MiB + HEADERS, 2 * MiB, 2 * MiB, False)]
    found = {i.code: i for i in insights(analysis)}
    unread = found["fetched-unread"]
    assert unread.level == "warn" and "fetched" in unread.detail and "(35%)" in unread.detail
    assert unread.evidence == [f"{SHARD}: 8.0 MiB fetched, 1.5 MiB read from its copy"]
    assert cells(analysis.copies.row(0, named=True))[-1] == "19%"


def test_files_written_outside_the_fetch_or_by_another_process_or_beyond_its_bytes_are_no_copies(tmp_path):
    rows = _download(FETCHER, 0, SHARD, "/cache/a", 4 * MiB, ino=31)
    rows += [_write(FETCHER, 10, -5, "/logs/run.log", 0, 100),  # began before the fetch
             _write(FETCHER, 10, 3, "/logs/run.log", 100, 100),
             _write(FETCHER, 10, 2, "/ckpt/big", 0, 6 * MiB),  # more than was fetched
             _write(OTHER, 12, 3, "/other/x", 0, 1000),  # another process
             _write(FETCHER, 10, 2000, "/late/y", 0, 1000)]  # over a second after the answer ended
    rows += [_read(LOADER, 100, path, 0, 100) for path in ("/logs/run.log", "/ckpt/big", "/other/x", "/late/y")]
    analysis = _analysis(tmp_path, rows)
    assert analysis.copies.select("copy", "copies", "read").rows() == [("/cache/a", 1, 0)]
    # a copy never read (a staging step's: a later job reads it) raises nothing
    assert "fetched-unread" not in {i.code for i in insights(analysis)}


def test_downloads_at_once_form_one_group_and_a_mapped_copy_is_left_out_of_the_insight(tmp_path):
    rows = _download(FETCHER, 0, "https://s3.local/train/a", "/cache/a", 4 * MiB, ino=41)
    rows += _download(FETCHER, 0.2, "https://s3.local/train/b", "/cache/b", 4 * MiB, ino=42)
    rows += _download(FETCHER, 20, "https://s3.local/train/c", "/cache/c", 4 * MiB, ino=43)  # the next download
    rows += [_read(LOADER, 1000, "/cache/a", 0, 512 * 1024, ino=41), _read(LOADER, 1001, "/cache/b", 0, 1024, ino=42),
             io(LOADER, 11, 1002 * 1000, 1002 * 1000 + 10, "mmap", "/cache/c", fd=7, ino=43),
             _read(LOADER, 1003, "/cache/c", 0, 1024, ino=43)]
    analysis = _analysis(tmp_path, rows)
    groups = {row["copy"]: row for row in analysis.copies.iter_rows(named=True)}
    assert {(row["objects"], row["copies"], row["fetched"], row["read"], row["mapped"]) for row in groups.values()} == {
        (2, 2, 8 * MiB + 2 * HEADERS, 512 * 1024 + 1024, False), (1, 1, 4 * MiB + HEADERS, 1024, True)}
    assert cells(groups["/cache/c"])[4:] == ["at least 1.0 KiB", "at least 0%"]
    shared = next(row for row in groups.values() if row["objects"] == 2)
    assert cells(shared)[:2] == [f"{shared['object']} (+1 more)", f"{shared['copy']} (+1 more)"]
    unread = next(i for i in insights(analysis) if i.code == "fetched-unread")
    assert unread.level == "high" and "8.0 MiB" in unread.detail and len(unread.evidence) == 1


def test_chunks_give_the_groups_of_one_pass(tmp_path):
    rows = _download(FETCHER, 0, SHARD, "/cache/s", 8 * MiB, ino=51, chunk=256 * 1024, writer_tid=15)
    rows += [_read(LOADER, 100 + i, "/cache/s", i * MiB, 256 * 1024, ino=51) for i in range(8)]
    (tmp_path / "whole").mkdir()
    (tmp_path / "chunked").mkdir()
    whole = _analysis(tmp_path / "whole", rows)
    chunked = _analysis(tmp_path / "chunked", rows, rows_per_chunk=5)
    assert whole.copies.height == 1 and whole.copies.rows() == chunked.copies.rows()
