"""What the Python-layer tests check of a trace, wherever the job ran: its reads, their
stacks, and the spans of the Python calls that made them."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load, own_records, records


def stacks_of(traces: list[Path]) -> dict[int, list[dict]]:
    """Stack id -> frames (innermost first) from the traces' PS records."""
    table = records(traces, "PS").select(pl.col("args").struct.field("stack"), pl.col("args").struct.field("frames"))
    return {row["stack"]: row["frames"] for row in table.iter_rows(named=True)}


def reads_of(frame: pl.DataFrame) -> pl.DataFrame:
    """The read and pread64 syscalls of a trace."""
    return frame.filter((pl.col(s.LAYER) == s.LAYER_SYSCALL) & pl.col(s.OP).is_in(["read", "pread64"]))


def why_unwalked(traces: list[Path], reads: pl.DataFrame, output: str) -> str:
    """What a failed stack check shows: the reads without a stack, the recording's counters and
    losses (lost chain or code records, unknown chains) and what its summary says of the Python layer."""
    end = [record["args"] for trace in traces for record in own_records(trace, "end")]
    summary = " ".join(line.strip() for line in output.splitlines())
    start = summary.find("python: ")
    python = summary[start:summary.find(" lost ", start)] if start >= 0 else "no Python layer in the summary"
    unwalked = reads.filter(pl.col(s.PY_STACK).is_null()).select(s.PID, s.TS, s.PATH)
    return f"without a stack: {unwalked}\nend records: {end}\nsummary: {python}"


def check_item_spans(traces: list[Path], workers: list[int], files: list[str], function: str) -> None:
    """One `function` span per item (a Dataset's __getitem__), holding the reads of that
    item's file only, each called from a worker's generator expression or comprehension."""
    frame = load(traces, pids=workers)  # the spans were written as the recording went
    spans = frame.filter(pl.col(s.LAYER) == s.LAYER_PYTHON)
    items = spans.filter(pl.col(s.OP) == function)
    assert items.height == len(files), items
    reads = reads_of(frame).filter(pl.col(s.PATH).is_in(files))
    for span in items.iter_rows(named=True):
        inside = reads.filter((pl.col(s.TID) == span[s.TID]) & (pl.col(s.TS) >= span[s.TS])
                              & (pl.col(s.TS) + pl.col(s.DUR) <= span[s.TS] + span[s.DUR]))
        assert inside.height > 0 and inside.get_column(s.PATH).n_unique() == 1, (span, inside)


def check_imports(frame: pl.DataFrame, report: dict, traced_path=lambda path: path) -> None:
    """tests/workloads/python_imports.py: `outer` and the `inner` it imports are PYTHON-layer
    import events, one inside the other, each holding the reads of its module's file; the
    second import of a loaded module is none. `traced_path`: how the trace names a file the
    workload names (a chroot's files carry the host's path)."""
    imports = frame.filter((pl.col(s.LAYER) == s.LAYER_PYTHON) & (pl.col(s.OP) == "import"))
    mine = imports.filter(pl.col(s.PY_MODULE).is_in(["outer", "inner"]))
    assert sorted(mine.get_column(s.PY_MODULE)) == ["inner", "outer"], imports
    events = {row[s.PY_MODULE]: row for row in mine.iter_rows(named=True)}
    outer, inner = events["outer"], events["inner"]
    assert inner[s.PARENT_TS] == outer[s.TS]
    assert outer[s.TS] < inner[s.TS] and inner[s.TS] + inner[s.DUR] <= outer[s.TS] + outer[s.DUR]
    assert outer[s.RET] == inner[s.RET] == 1
    for name, event in events.items():
        reads = reads_of(frame).filter(pl.col(s.PATH) == traced_path(report["files"][name]))
        assert reads.height > 0, name  # how many reads an import makes of its source is the interpreter's choice
        assert reads.get_column(s.PARENT_TS).unique().to_list() == [event[s.TS]], (name, reads)
        assert event[s.PATH].startswith(traced_path(report["dir"])), event


def check_shard_reads(traces, reads: pl.DataFrame, report: dict, output: str) -> None:
    """tests/workloads/shard_dataset.py: each worker's reads of the shards (`reads`) are all
    there, with their bytes, each with its Python stack, made at ShardDataset.__getitem__'s read
    line (`output`: the recorder's, to say why a stack is missing)."""
    for pid, counted in report["workers"].items():
        mine = reads.filter(pl.col(s.PID) == int(pid))
        assert (mine.height, mine.get_column(s.BYTES).sum()) == (counted["reads"], counted["bytes"]), pid
    assert reads.get_column(s.PY_STACK).null_count() == 0, why_unwalked(traces, reads, output)
    assert reads.select(s.PY_FUNCTION, s.PY_FILE, s.PY_LINE).unique().rows() == [
        ("ShardDataset.__getitem__", report["file"], report["read_line"])]
