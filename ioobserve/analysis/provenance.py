"""A closed trace's lineage (ioobserve.analysis.lineage) written into it as DFTracer's provenance
records, one member appended by the finisher (ioobserve.cli.finisher), so that DFTracer's
provenance readers (dftracer-utils' graph extractor) find what the job used and generated
without the application calling DFTracer's entity API.

The records, in DFTracer's entity API's layout:
- an `EH` metadata line per data file or object: args id (FNV-1a-64 of type, 0x1f and the
  path, 16 hex digits), type ("file" or "object"), store (DFTracer's enum: local disk,
  parallel file system, network, memory or object store, from the file's mount) and uri
  (the path, or the object's address);
- a `lineage` record (ph 1, in our metadata category: no reader takes it for I/O) per process
  and Python function that read or wrote them, its args' `relations` listing the entities it
  used and generated, with the process's command name and the function;
- an `ER` metadata line per derived-from link (relation 16: subject derived from object).

Our readers skip them (metadata they do not know); `analyze --lineage` computes the same from
the events. The member holds no event, so the trace's columnar copy stays valid.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import polars as pl

from ioobserve.analysis import frame_aggregates as a
from ioobserve.analysis.lineage import (
    BYTES_READ,
    FIRST_READ,
    FIRST_WRITE,
    GENERATED,
    SOURCE,
    TARGET,
    Lineage,
    derived_links,
    lineage_rows,
)
from ioobserve.analysis.trace_partial import trace_partial
from ioobserve.data import schema as s
from ioobserve.trace.lines import complete_line, metadata_line
from ioobserve.trace.members import Damage, gzip_member, iter_members, member_entry, read_index, write_index
from ioobserve.trace.read.columnar import restamp_copy, source_key
from ioobserve.trace.read.tables import FSTYPE

ENTITY, RELATION, ACTIVITY = "EH", "ER", "lineage"
DERIVED_FROM = 16  # DFTracer's entity relation "derived_from"
# DFTracer's storage enum: memory 0, gpu_memory 1, local_disk 2, parallel_fs 3, burst_buffer 4,
# object_store 5, database 6, network 7, other 8.
MEMORY, LOCAL_DISK, PARALLEL_FS, OBJECT_STORE, NETWORK = 0, 2, 3, 5, 7
FILE_SYSTEM_STORES = {
    **dict.fromkeys(("lustre", "gpfs", "beegfs", "ceph", "cephfs", "wekafs", "panfs", "orangefs", "pvfs2", "glusterfs",
                     "fuse.glusterfs", "fuse.cephfs"), PARALLEL_FS),
    **dict.fromkeys(("nfs", "nfs4", "cifs", "smb3", "9p", "fuse.sshfs"), NETWORK),
    **dict.fromkeys(("tmpfs", "ramfs"), MEMORY),
}
_FNV_OFFSET, _FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


def entity_id(kind: str, key: str) -> str:
    """DFTracer's entity id: FNV-1a-64 of the type, 0x1f and the key (UTF-8), in 16 hex digits."""
    value = _FNV_OFFSET
    for byte in f"{kind}\x1f{key}".encode("utf-8", "surrogateescape"):
        value = ((value ^ byte) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


def _kind(path: str) -> str:
    return "object" if path.startswith(("http://", "https://")) else "file"


def provenance_text(rows: pl.DataFrame, links: pl.DataFrame, stores: dict[str, int]) -> bytes:
    """The records of a trace's lineage: `rows` from lineage_rows, `links` from derived_links,
    `stores` the store of each path on a file system (others: local disk, or object store)."""
    lines, ids = [], {}
    for path, pid in rows.group_by(s.PATH).agg(pl.col(s.PID).first()).sort(s.PATH).iter_rows():
        kind = _kind(path)
        ids[path] = entity_id(kind, path)
        store = OBJECT_STORE if kind == "object" else stores.get(path, LOCAL_DISK)
        lines.append(metadata_line(ENTITY, pid, pid, {"id": ids[path], "type": kind, "store": store, "uri": path}))
    first = pl.min_horizontal(FIRST_READ, FIRST_WRITE)
    activities = (rows.group_by(s.PID, s.COMM, s.PY_FUNCTION, maintain_order=True)
                  .agg(pl.col(s.PATH).filter(pl.col(BYTES_READ) > 0).unique().sort().alias("used"),
                       pl.col(s.PATH).filter(pl.col(GENERATED)).unique().sort().alias("generated"),
                       first.min().alias("first"))
                  .sort("first", s.PID, s.PY_FUNCTION, nulls_last=True))
    for number, row in enumerate(activities.iter_rows(named=True), 1):
        args = {"activity": row[s.PY_FUNCTION] or row[s.COMM] or "process", "comm": row[s.COMM],
                "function": row[s.PY_FUNCTION],
                "relations": {"used": [ids[p] for p in row["used"]], "generated": [ids[p] for p in row["generated"]]}}
        lines.append(complete_line(number, ACTIVITY, row[s.PID], row[s.PID], (row["first"] or 0) // 1000, args))
    for pid, source, target in links.select(s.PID, SOURCE, TARGET).unique().sort(SOURCE, TARGET, s.PID).iter_rows():
        lines.append(metadata_line(RELATION, pid, pid, {"relation": DERIVED_FROM, "subject": ids[target], "object": ids[source]}))
    return b"".join(lines)


def _stores(part) -> dict[str, int]:
    """The store of each data file whose mount's file system names one."""
    mounts = part.mounts.select(s.DEV, pl.col(FSTYPE).replace_strict(FILE_SYSTEM_STORES, default=None, return_dtype=pl.Int64))
    found = part.files.select(pl.col(s.PATH).cast(pl.String), s.DEV).join(mounts, on=s.DEV, how="inner").drop_nulls(FSTYPE)
    return dict(found.select(s.PATH, FSTYPE).iter_rows())


def add_provenance(trace: Path) -> int:
    """Append a closed trace's lineage to it as provenance records (one member, and its index
    entry); its copy, built before, stays valid. The entities written (0: nothing appended)."""
    trace = Path(trace)
    part = trace_partial(trace, aggregates=[Lineage(), a.OWNERS, a.FILES, a.MOUNTS, a.PROCESSES])
    rows = lineage_rows(part.lineage, part.files, part.owners, part.processes)
    if not rows.height:
        return 0
    text = provenance_text(rows, derived_links(rows), _stores(part))
    before = source_key(trace)
    entries = read_index(trace)
    member = gzip_member(text)
    fd = os.open(trace, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        offset = os.fstat(fd).st_size
        try:
            if os.write(fd, member) != len(member):
                raise OSError(errno.ENOSPC, "short write")
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, offset)  # a full disk: the trace as it was, not a cut member
            raise
    finally:
        os.close(fd)
    if entries is not None:
        write_index(trace, [*entries, member_entry(offset, len(member), text)])
    restamp_copy(trace, before)
    return rows.get_column(s.PATH).n_unique()


def provenance_records(text: bytes) -> dict[str, list[dict]]:
    """The provenance records among a member's lines, by name (for checks and tests)."""
    found: dict[str, list[dict]] = {ENTITY: [], RELATION: [], ACTIVITY: []}
    for line in text.splitlines():
        record = json.loads(line)
        if record.get("name") in found:
            found[record["name"]].append(record)
    return found


def trace_provenance(trace: Path) -> dict[str, list[dict]]:
    """Every provenance record of a trace, by name."""
    found: dict[str, list[dict]] = {ENTITY: [], RELATION: [], ACTIVITY: []}
    for _, _, text in iter_members(Path(trace), Damage(Path(trace))):
        if text and b'"args":{"id":' in text or b'"relations":' in text:
            for name, records in provenance_records(text).items():
                found[name] += records
    return found
