"""Local copies of fetched objects: the bytes fetched from object storage against the bytes
the application read, where both are seen. That is where it reads an object through a file
it wrote while fetching it (fsspec's simplecache and filecache, boto3's download_file,
MosaicML streaming's shards); reads served from a client's memory (s3fs's readahead) make no
call that any layer sees.

A file is a copy of an object when one process fetched the object (GETs of the HTTP layer)
and wrote the file, no more bytes than it fetched, beginning while the object's answer was
arriving and ending by COPY_LAG_NS after it ended (a downloader's writer thread lags its
reader: boto3's does). Where no answer was arriving at the file's first write, within
COPY_LAG_NS, it is the copy of the object whose answer ended last before it. The names a
file has (a download renamed into place) are one copy by their (dev, ino). Objects and
copies so joined form a group; a group's figures are exact where each object went to its own
copy, and shared where several downloads ran at once. Built from the analysis's totals
(first and last event per process, file and operation), so that partials of any chunks and
nodes give the same groups."""

from __future__ import annotations

import polars as pl

from ioobserve.data import schema as s
from ioobserve.data.operations import HTTP_READS, KIND, WRITE
from ioobserve.data.totals import BYTES, CALLS, FIRST_NS, LAST_NS
from ioobserve.data.units import format_bytes

COPY_LAG_NS = 1_000_000_000
OBJECT, OBJECTS, COPY, COPIES = "object", "objects", "copy", "copies"
FETCHED, WRITTEN, READ, MAPPED = "fetched", "written", "read", "mapped"
GROUP = "group"
COPIES_SCHEMA = {OBJECT: pl.String, OBJECTS: pl.UInt32, COPY: pl.String, COPIES: pl.UInt32, FETCHED: pl.UInt64,
                 WRITTEN: pl.UInt64, READ: pl.UInt64, MAPPED: pl.Boolean}
CELLS = ("object", "local copy", "fetched", "written", "read", "read share")  # the views' columns
_KEY = "_key"  # a copy: its (dev, ino), or its FILE_ID where the inode is unknown


def copies(named: pl.DataFrame, io: pl.DataFrame, files: pl.DataFrame, unique_reads: pl.DataFrame) -> pl.DataFrame:
    """Per group of objects and their local copies: the object (the one most fetched) and how
    many, the copy (the name it was read by most) and how many, bytes FETCHED (answers, their
    headers included), WRITTEN to the copies, READ from them (distinct bytes) and whether one
    was memory-mapped (MAPPED: its reads are not calls, READ is then a floor); most unread first.
    `named`: the totals with PATH; `io`: those of the I/O layer; `files`: FILE_ID, PATH, DEV,
    INO; `unique_reads`: FILE_ID, READ."""
    fetched = pl.col(s.OP).cast(pl.String).is_in(sorted(HTTP_READS))  # GET, or S3's GetObject
    fetches = (named.filter((pl.col(s.LAYER).cast(pl.String) == s.LAYER_HTTP) & fetched)
               .group_by(s.HOST, s.PID, s.FILE_ID)
               .agg(pl.col(BYTES).sum().alias(FETCHED), pl.col(FIRST_NS).min(), pl.col(LAST_NS).max()))
    writes = (io.filter((pl.col(KIND) == WRITE) & (pl.col(BYTES) > 0) & pl.col(s.FILE_ID).is_not_null())
              .group_by(s.HOST, s.PID, s.FILE_ID)
              .agg(pl.col(BYTES).sum().alias(WRITTEN), pl.col(FIRST_NS).min(), pl.col(LAST_NS).max()))
    # A copy's first write comes while its object's answer arrives, or (a small object, a
    # lagging writer thread) just after: then the object that ended last before it.
    started, ended = pl.col(f"{FIRST_NS}_object"), pl.col(f"{LAST_NS}_object")
    in_flight = pl.col(FIRST_NS) <= ended
    copy = [s.HOST, s.PID, s.FILE_ID]
    pairs = (writes.join(fetches, on=[s.HOST, s.PID], suffix="_object")
             .filter((pl.col(FIRST_NS) >= started) & (pl.col(FIRST_NS) <= ended + COPY_LAG_NS)
                     & (pl.col(LAST_NS) <= ended + COPY_LAG_NS) & (pl.col(WRITTEN) <= pl.col(FETCHED)))
             .filter(in_flight | (~in_flight.any().over(copy) & (ended == ended.max().over(copy)))))
    if pairs.is_empty():
        return pl.DataFrame(schema=COPIES_SCHEMA)
    keys = _copy_keys(files)
    pairs = pairs.join(keys.select(s.FILE_ID, _KEY), on=s.FILE_ID, how="left")
    fetch_groups, copy_groups = _groups(pairs)
    per_object = (fetch_groups.join(fetches.select(s.HOST, s.PID, s.FILE_ID, FETCHED), on=[s.HOST, s.PID, s.FILE_ID])
                  .join(files.select(s.FILE_ID, s.PATH), on=s.FILE_ID, how="left")
                  .group_by(GROUP).agg(pl.col(s.PATH).sort_by(FETCHED, s.PATH, descending=[True, False]).first().alias(OBJECT),
                                       pl.col(s.FILE_ID).n_unique().cast(pl.UInt32).alias(OBJECTS), pl.col(FETCHED).sum()))
    mapped = io.filter(pl.col(s.OP).cast(pl.String) == "mmap").get_column(s.FILE_ID).unique().implode()
    calls = io.group_by(s.FILE_ID).agg(pl.col(CALLS).sum().alias("_calls"))
    per_copy = (keys.join(copy_groups, on=_KEY).join(unique_reads, on=s.FILE_ID, how="left")
                .join(calls, on=s.FILE_ID, how="left")
                .with_columns(pl.col(READ).fill_null(0), pl.col(s.FILE_ID).is_in(mapped).alias(MAPPED))
                .group_by(GROUP).agg(
                    pl.col(s.PATH).sort_by(READ, "_calls", s.PATH, descending=[True, True, False], nulls_last=True)
                    .first().alias(COPY),
                    pl.col(_KEY).n_unique().cast(pl.UInt32).alias(COPIES), pl.col(READ).sum(), pl.col(MAPPED).any()))
    written = (pairs.select(_KEY, s.HOST, s.PID, s.FILE_ID, WRITTEN).unique().join(copy_groups, on=_KEY)
               .group_by(GROUP).agg(pl.col(WRITTEN).sum()))
    # A copy read under two names (before and after its rename) has its ranges counted under
    # each: what was read of it is at most what was written.
    return (per_object.join(per_copy, on=GROUP).join(written, on=GROUP)
            .with_columns(pl.min_horizontal(READ, WRITTEN).alias(READ))
            .with_columns((pl.col(FETCHED).cast(pl.Int64) - pl.col(READ).cast(pl.Int64)).alias("_unread"))
            .sort("_unread", OBJECT, descending=[True, False])
            .select(list(COPIES_SCHEMA)).cast(COPIES_SCHEMA))


def cells(row: dict) -> list[str]:
    """A group's row as `analyze` and `report` show it (CELLS)."""
    def more(name: str, count: int) -> str:
        return name if count < 2 else f"{name} (+{count - 1:,} more)"

    at_least = "at least " if row[MAPPED] else ""  # a mapped copy's reads are page faults, not calls
    share = f"{at_least}{row[READ] / row[FETCHED]:.0%}" if row[FETCHED] else "-"
    return [more(row[OBJECT], row[OBJECTS]), more(row[COPY], row[COPIES]), format_bytes(row[FETCHED]),
            format_bytes(row[WRITTEN]), at_least + format_bytes(row[READ]), share]


def _copy_keys(files: pl.DataFrame) -> pl.DataFrame:
    """FILE_ID, PATH, _KEY: each name of a file with its copy's key, (dev, ino) where known."""
    known = (pl.col(s.INO).fill_null(0) > 0)
    return files.select(s.FILE_ID, s.PATH, pl.when(known).then(pl.format("{}:{}", s.DEV, s.INO))
                        .otherwise(pl.format("id:{}", s.FILE_ID)).alias(_KEY))


def _groups(pairs: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The connected groups that the pairs join: (HOST, PID, FILE_ID: the object fetched, GROUP)
    and (_KEY: the copy, GROUP). Union-find in Python: a recording has a few copies per object."""
    parent: dict[tuple, tuple] = {}

    def root(node: tuple) -> tuple:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    edges = pairs.select(s.HOST, s.PID, f"{s.FILE_ID}_object", _KEY).unique().rows()
    for host, pid, obj, key in edges:
        parent[root(("fetch", host, pid, obj))] = root(("copy", key))
    numbers: dict[tuple, int] = {}

    def group(node: tuple) -> int:
        return numbers.setdefault(root(node), len(numbers))

    fetched = {(host, pid, obj) for host, pid, obj, _ in edges}
    copied = {key for *_, key in edges}
    fetch_schema = {s.HOST: pairs.schema[s.HOST], s.PID: pairs.schema[s.PID], s.FILE_ID: pairs.schema[s.FILE_ID],
                    GROUP: pl.UInt32}
    return (pl.DataFrame([(*node, group(("fetch", *node))) for node in sorted(fetched)], schema=fetch_schema, orient="row"),
            pl.DataFrame([(key, group(("copy", key))) for key in sorted(copied)], schema={_KEY: pl.String, GROUP: pl.UInt32},
                         orient="row"))
