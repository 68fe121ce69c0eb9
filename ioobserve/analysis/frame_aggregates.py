"""The aggregates of an analysis made of frames: totals, access sizes and patterns, opens
after a stat, the timeline, process lanes, calls' and HTTP requests' latency, the Python
functions that made I/O calls, and the trace's tables; each declared once, with its keys, its
step over a chunk and its combination (ioobserve.analysis.aggregation)."""

from __future__ import annotations

from typing import NamedTuple

import polars as pl

from ioobserve.analysis.aggregation import LANE_DETAIL, Aggregate, ChunkInputs, Latest, Summed, local, stacked, summed
from ioobserve.analysis.call_latency import LATENCY_KEYS, call_latencies
from ioobserve.analysis.files import OPENS, OPENS_AFTER_STAT, call_edges, seam_opens, stat_then_open
from ioobserve.analysis.intervals import END, START, merge_now
from ioobserve.analysis.patterns import CONSECUTIVE, RANDOM, SEQUENTIAL, UNALIGNED, access_patterns
from ioobserve.analysis.requests import LATENCY, STATUS_KEYS, request_latencies, request_statuses
from ioobserve.analysis.sizes import BUCKET, COUNT, access_sizes
from ioobserve.analysis.timeline import BIN, MAX_BINS, MS, bin_exponent, binned, lanes, rebin
from ioobserve.data import schema as s
from ioobserve.data.operations import DATA_KINDS, IO_LAYERS, KIND
from ioobserve.data.totals import BYTES, CALLS, ERRORS, FIRST_NS, LAST_NS, PLACED_BYTES, TIME_NS, combined, over_events
from ioobserve.trace.read.tables import frames_of

TOTAL_SUMS = [CALLS, BYTES, TIME_NS, ERRORS, PLACED_BYTES, FIRST_NS, LAST_NS]  # ioobserve.data.totals
TOTAL_KEYS = [s.HOST, s.PID, s.CGROUP, s.LAYER, s.OP, KIND, s.FILE_ID]
SIZE_KEYS = [s.HOST, s.PID, s.LAYER, s.FILE_ID, KIND, BUCKET]
PATTERN_KEYS = [s.HOST, s.PID, s.LAYER, s.FILE_ID, KIND]
STREAM = [s.HOST, s.PID, s.LAYER, s.FILE_ID, s.FD, KIND]  # one descriptor's accesses of one file
OPEN_KEYS = [s.HOST, s.PID, s.LAYER]
LANE_KEYS = [s.HOST, s.PID]
FUNCTION_KEYS = [s.PY_FUNCTION, s.PY_FILE, KIND]


class Totals(Aggregate):
    """Calls, bytes, time, errors and first and last event per TOTAL_KEYS, every layer's."""

    name, keys = "totals", tuple(TOTAL_KEYS)

    def chunk(self, inputs: ChunkInputs) -> dict[str, pl.LazyFrame]:
        """The chunk's sums per key."""
        return {"totals": inputs.by_layer.group_by(local(TOTAL_KEYS)).agg(over_events(*TOTAL_SUMS)).with_columns(inputs.on_host)}

    def combine(self, values: list[pl.DataFrame]) -> pl.DataFrame:
        """The sums of every partial per key."""
        return stacked(values).group_by(TOTAL_KEYS).agg(combined(*TOTAL_SUMS))


class AccessPatterns(NamedTuple):
    """Counts per PATTERN_KEYS, and each descriptor stream's first access and where its last
    one ended: the next partial's first access of the stream is classified against it."""

    counts: pl.DataFrame  # PATTERN_KEYS: CONSECUTIVE, SEQUENTIAL, RANDOM, UNALIGNED
    streams: pl.DataFrame  # STREAM: FIRST_NS, first_offset, last_end


class Patterns(Aggregate):
    """Consecutive, sequential, random and unaligned accesses per file and process."""

    name, keys = "patterns", tuple(PATTERN_KEYS)

    def chunk(self, inputs: ChunkInputs) -> dict[str, pl.LazyFrame]:
        """The chunk's counts (each stream's first access taken as following offset 0) and streams."""
        data = inputs.io.filter(pl.col(KIND).is_in(DATA_KINDS) & (pl.col(s.OFFSET) >= 0)).sort(s.TS)
        streams = data.group_by(local(STREAM)).agg(
            pl.col(s.TS).first().alias(FIRST_NS), pl.col(s.OFFSET).first().alias("first_offset"),
            (pl.col(s.OFFSET) + pl.col(s.BYTES).cast(pl.Int64)).last().alias("last_end"))
        return {"counts": access_patterns(inputs.io, [s.PID, s.LAYER, s.FILE_ID]).with_columns(inputs.on_host),
                "streams": streams.with_columns(inputs.on_host)}

    def finish(self, frames: dict[str, pl.DataFrame], inputs: ChunkInputs) -> AccessPatterns:
        """The counts and streams."""
        return AccessPatterns(**frames)

    def combine(self, values: list[AccessPatterns]) -> AccessPatterns:
        """Counts summed, each later partial's first access of a stream re-classified against
        where the earlier one left it (each partial took 0)."""
        ordered = stacked([v.streams for v in values]).sort(FIRST_NS).with_columns(
            pl.col("last_end").shift(1).over(STREAM).alias("_before"))
        # the partial counted a first access consecutive at offset 0, and sequential in any case
        fixes = ordered.filter(pl.col("_before").is_not_null()).select(
            *STREAM,
            ((pl.col("first_offset") == pl.col("_before")).cast(pl.Int64) - (pl.col("first_offset") == 0).cast(pl.Int64))
            .alias(CONSECUTIVE),
            ((pl.col("first_offset") >= pl.col("_before")).cast(pl.Int64) - 1).alias(SEQUENTIAL),
        )
        adjust = fixes.group_by(PATTERN_KEYS).agg(pl.col(CONSECUTIVE).sum(), pl.col(SEQUENTIAL).sum())
        counts = stacked([v.counts for v in values]).group_by(PATTERN_KEYS).agg(
            pl.col(c).sum().cast(pl.Int64) for c in (CONSECUTIVE, SEQUENTIAL, RANDOM, UNALIGNED))
        fixed = counts.join(adjust, on=PATTERN_KEYS, how="left", suffix="_fix").with_columns(
            (pl.col(CONSECUTIVE) + pl.col(f"{CONSECUTIVE}_fix").fill_null(0)).cast(pl.UInt64).alias(CONSECUTIVE),
            (pl.col(SEQUENTIAL) + pl.col(f"{SEQUENTIAL}_fix").fill_null(0)).cast(pl.UInt64).alias(SEQUENTIAL),
            (pl.col(RANDOM) - pl.col(f"{SEQUENTIAL}_fix").fill_null(0)).cast(pl.UInt64).alias(RANDOM),
            pl.col(UNALIGNED).cast(pl.UInt64),
        ).select(*PATTERN_KEYS, CONSECUTIVE, SEQUENTIAL, RANDOM, UNALIGNED)
        streams = ordered.group_by(STREAM).agg(pl.col(FIRST_NS).first(), pl.col("first_offset").first(),
                                               pl.col("last_end").last())
        return AccessPatterns(fixed, streams)


class StatOpens(NamedTuple):
    """Opens and those right after a stat of the same path, per OPEN_KEYS; and each thread's
    first and last metadata call, to pair a stat and an open across partials."""

    counts: pl.DataFrame  # OPEN_KEYS: OPENS, OPENS_AFTER_STAT
    edges: pl.DataFrame  # OPEN_KEYS, TID: TS, first_open, first_path, last_stat, last_path


class Opens(Aggregate):
    """Opens that a stat of the same path came just before (a metadata round trip per file)."""

    name, keys = "opens", tuple(OPEN_KEYS)

    def chunk(self, inputs: ChunkInputs) -> dict[str, pl.LazyFrame]:
        """The chunk's counts and its threads' edges."""
        return {"counts": stat_then_open(inputs.metadata, local(OPEN_KEYS)).with_columns(inputs.on_host),
                "edges": call_edges(inputs.metadata, local(OPEN_KEYS)).with_columns(inputs.on_host)}

    def finish(self, frames: dict[str, pl.DataFrame], inputs: ChunkInputs) -> StatOpens:
        """The counts and edges."""
        return StatOpens(**frames)

    def combine(self, values: list[StatOpens]) -> StatOpens:
        """Counts summed with the pairs the seams between partials hid."""
        edges = stacked([v.edges for v in values])
        counts = summed(stacked([stacked([v.counts for v in values]), seam_opens(edges, OPEN_KEYS)])
                        .with_columns(pl.col(OPENS).fill_null(0)), OPEN_KEYS, [OPENS, OPENS_AFTER_STAT])
        return StatOpens(counts, edges.sort(s.TS).group_by(*OPEN_KEYS, s.TID).agg(
            pl.col(s.TS).first(), pl.col("first_open").first(), pl.col("first_path").first(), pl.col("last_stat").last(),
            pl.col("last_path").last()))


class Bins(NamedTuple):
    """Events over time: COUNT and BYTES per LAYER, KIND and BIN of 2^exponent ms."""

    frame: pl.DataFrame
    exponent: int


class Timeline(Aggregate):
    """The timeline, in bins that widen as the span grows."""

    name, keys = "timeline", (s.LAYER, KIND, BIN)

    def chunk(self, inputs: ChunkInputs) -> dict[str, pl.LazyFrame]:
        """The chunk's bins, as narrow as its span allows."""
        return {"bins": binned(inputs.events, inputs.exponent, [s.LAYER, KIND])}

    def finish(self, frames: dict[str, pl.DataFrame], inputs: ChunkInputs) -> Bins:
        """The bins, with their width."""
        return Bins(frames["bins"], inputs.exponent)

    def combine(self, values: list[Bins]) -> Bins:
        """Every partial's bins in the widest partial's."""
        exponent = max(v.exponent for v in values)
        return Bins(rebin(stacked([v.frame for v in values]).lazy(), exponent, [s.LAYER, KIND]).collect(), exponent)

    def coarsen(self, value: Bins) -> Bins:
        """Wider bins once there are many: a long trace's partial stays about as small as a
        short one's (the report draws at most results.REPORT_BINS)."""
        if value.frame.height <= 4 * MAX_BINS:
            return value
        first, last = value.frame.get_column(BIN).min(), value.frame.get_column(BIN).max()
        exponent = bin_exponent(int(last - first) + (MS << value.exponent))
        if exponent <= value.exponent:
            return value
        return Bins(rebin(value.frame.lazy(), exponent, [s.LAYER, KIND]).collect(), exponent)


class Lanes(Aggregate):
    """Each process's busy lanes (START, END), at the detail a timeline can draw."""

    name, keys = "lanes", tuple(LANE_KEYS)

    def chunk(self, inputs: ChunkInputs) -> dict[str, pl.DataFrame]:
        """The chunk's lanes of its processes' I/O."""
        io = inputs.timing.unnamed.filter(pl.col(s.LAYER).is_in(IO_LAYERS)).with_columns(inputs.on_host)
        return {"lanes": lanes(io, inputs.lane_tolerance, LANE_KEYS)}

    def combine(self, values: list[pl.DataFrame]) -> pl.DataFrame:
        """Every partial's lanes merged."""
        return merge_now(stacked(values), LANE_KEYS)

    def coarsen(self, value: pl.DataFrame) -> pl.DataFrame:
        """Short gaps closed once there are many lanes."""
        if value.height <= 4 * LANE_DETAIL:
            return value
        span = int(value.get_column(END).max() - value.get_column(START).min())
        return lanes(value, max(span // LANE_DETAIL, 1), LANE_KEYS)


SIZES = Summed("sizes", SIZE_KEYS, [COUNT],
               lambda inputs: access_sizes(inputs.io, [s.PID, s.LAYER, s.FILE_ID]).with_columns(inputs.on_host))
REQUEST_LATENCY = Summed("request_latency", [s.HOST, s.FILE_ID, LATENCY], [COUNT],
                         lambda inputs: request_latencies(inputs.by_layer, [s.FILE_ID]).with_columns(inputs.on_host))
REQUEST_STATUS = Summed("request_status", STATUS_KEYS, [COUNT], lambda inputs: request_statuses(inputs.by_layer))
CALL_LATENCY = Summed("call_latency", LATENCY_KEYS, [COUNT], lambda inputs: call_latencies(inputs.by_layer))


def python_callers(inputs: ChunkInputs) -> pl.LazyFrame:
    """CALLS, BYTES and TIME_NS of the I/O calls per Python function that made them (the
    innermost frame of their stacks) and KIND."""
    calls = (inputs.io.filter(pl.col(s.PY_STACK).is_not_null())
             .group_by(s.PY_STACK, pl.col(s.PY_FRAME).fill_null(0), KIND).agg(over_events(CALLS, BYTES, TIME_NS)))
    names = frames_of(inputs.tables.stacks).lazy().select(s.PY_STACK, s.PY_FRAME, s.PY_FUNCTION, s.PY_FILE)
    return (calls.join(names, on=[s.PY_STACK, s.PY_FRAME], how="inner")
            .group_by(FUNCTION_KEYS).agg(pl.col(CALLS, BYTES, TIME_NS).sum()))


FUNCTIONS = Summed("functions", FUNCTION_KEYS, [CALLS, BYTES, TIME_NS], python_callers)
OWNERS = Latest("owners", [s.HOST, s.PID, s.CGROUP], lambda inputs: inputs.owners.with_columns(inputs.on_host))
FILES = Latest("files", [s.FILE_ID], lambda inputs: inputs.tables.files)
MOUNTS = Latest("mounts", [s.HOST, s.DEV], lambda inputs: inputs.tables.mounts.with_columns(inputs.on_host))
PROCESSES = Latest("processes", [s.HOST, s.PID], lambda inputs: inputs.processes)
