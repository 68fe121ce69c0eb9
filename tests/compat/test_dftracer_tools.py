"""DFTracer's own tools read our traces, and we read traces DFTracer wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import ioobserve
from ioobserve.data import schema as s

WORKLOAD = Path(__file__).with_name("known_io.py")


def _tool(peers: Path, name: str, *args: str) -> str:
    done = subprocess.run([str(peers / "bin" / name), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _own_records(trace: Path) -> int:
    """Our own ph=1 records (start, end, lost): DFTracer's tools count them as events too."""
    return sum(1 for line in subprocess.run(["zcat", str(trace)], capture_output=True, text=True).stdout.splitlines()
               if '"cat":"dftracer"' in line and '"ph":1' in line)


def test_dftracer_validate_passes(peers, trace):
    out = _tool(peers, "dftracer_validate", "--files", str(trace))
    assert "1 passed, 0 failed" in out


def test_event_count_matches_our_load(peers, trace, tmp_path):
    out = _tool(peers, "dftracer_event_count", "-d", str(trace.parent), "--index-dir", str(tmp_path))
    loaded = ioobserve.load(trace)
    assert loaded.height == 3506  # 3000 + 500 events, each batch with its rename and failed open, and 2 Python spans
    assert int(out.split()[-1]) == loaded.height + _own_records(trace)


def test_view_group_by_name_matches_our_load(peers, trace, tmp_path):
    out = _tool(peers, "dftracer_view", "--files", str(trace), "--index-dir", str(tmp_path), "--group-by", "name",
                "--log-level", "off")
    theirs = {row["name"]: row["count"] for row in map(json.loads, filter(None, out.splitlines()))}
    ours = dict(ioobserve.load(trace).group_by(s.OP).len().iter_rows())
    for name in ("start", "end", "lost"):  # our own records, not I/O
        theirs.pop(name, None)
    assert theirs == ours


@pytest.fixture(scope="module")
def dftracer_wrote(peers, tmp_path_factory):
    """The known workload traced by DFTracer (LD_PRELOAD): its traces, directory and own counts."""
    base = tmp_path_factory.mktemp("dftracer")
    data, out = base / "data", base / "out"
    data.mkdir()
    out.mkdir()
    preload = sorted(peers.glob("lib/python3*/site-packages/dftracer/lib64/libdftracer_preload.so"))
    assert preload, "dftracer's preload library is missing from .venv-peers"
    env = dict(os.environ, DFTRACER_ENABLE="1", DFTRACER_INIT="PRELOAD", DFTRACER_INC_METADATA="1",
               DFTRACER_DATA_DIR=str(data), DFTRACER_LOG_FILE=str(out / "trace"), LD_PRELOAD=str(preload[0]))
    done = subprocess.run(["/usr/bin/python3", str(WORKLOAD), str(data)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return sorted(out.glob("*.pfw.gz")), data, json.loads(done.stdout.splitlines()[-1])


def test_we_load_a_trace_dftracer_wrote(dftracer_wrote):
    traces, data, expected = dftracer_wrote
    frame = ioobserve.load(traces)
    mine = frame.filter(pl.col(s.PATH).cat.starts_with(str(data)))
    reads = mine.filter(pl.col(s.OP) == "read")
    writes = mine.filter(pl.col(s.OP) == "write")
    assert reads.height == expected["reads"] and writes.height == expected["writes"]
    assert reads[s.BYTES].sum() == expected["bytes_read"] and writes[s.BYTES].sum() == expected["bytes_written"]
    assert set(mine[s.PATH].unique()) >= set(expected["files"])
    assert (mine[s.TS] % 1000 == 0).all() and mine[s.TS].min() > 1_600_000_000 * 10**9  # µs epoch, as ns
    assert mine[s.LAYER].unique().to_list() == ["POSIX"]


def test_we_analyze_a_trace_dftracer_wrote(dftracer_wrote):
    from ioobserve.analysis.engine import analyze_partial
    from ioobserve.analysis.results import BYTES_READ, BYTES_WRITTEN, REREAD_BYTES, results
    from ioobserve.analysis.trace_partial import Filters

    traces, data, expected = dftracer_wrote
    analysis = results(analyze_partial(traces, Filters(path_prefixes=(str(data),))))
    assert analysis.layer == s.LAYER_POSIX  # DFTracer's traces have no syscall layer
    o = analysis.overview
    assert (o["read_calls"], o["write_calls"]) == (expected["reads"], expected["writes"])
    assert (o[BYTES_READ], o[BYTES_WRITTEN]) == (expected["bytes_read"], expected["bytes_written"])
    assert analysis.files.get_column(REREAD_BYTES).sum() == 0  # read() carries no offset there: nothing claimed


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))


@pytest.fixture
def with_provenance(trace, tmp_path) -> Path:
    """A copy of our trace with its lineage appended as the finisher appends it."""
    from ioobserve.analysis.provenance import add_provenance

    directory = tmp_path / "provenance"
    directory.mkdir(mode=0o700)
    copy = directory / trace.name
    for source in (trace, trace.with_name(trace.name + ".ioidx")):
        (directory / source.name).write_bytes(source.read_bytes())
    assert add_provenance(copy) == 5  # /data/file-0.bin .. file-4.bin
    return copy


def test_dftracers_provenance_extractor_reads_our_lineage(peers, trace, with_provenance, tmp_path):
    """dftracer-utils' provenance graph (its server's /api/prov/graph) finds our entities,
    activities and derived-from links whole: none dangling, none truncated."""
    import socket
    import urllib.request

    from ioobserve.analysis.provenance import ACTIVITY, ENTITY, RELATION, trace_provenance
    from tests.waiting import wait_until

    _tool(peers, "dftracer_validate", "--files", str(with_provenance))
    ours = trace_provenance(with_provenance)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([str(peers / "bin" / "dftracer_server"), "-d", str(with_provenance.parent), "-p", str(port),
                               "--index-dir", str(tmp_path / "index"), "--log-level", "error"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def graph() -> dict | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/prov/graph", timeout=30) as answer:
                return json.loads(answer.read())
        except OSError:
            assert server.poll() is None, server.stderr.read().decode()[-2000:]
            return None

    try:
        found = wait_until(graph, "dftracer_server's provenance graph", timeout=120)
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert {(e["hash"], e["uri"], e["store"]) for e in found["entities"]} == {
        (r["args"]["id"], r["args"]["uri"], "local_disk") for r in ours[ENTITY]}
    assert {(a["pid"], tuple(a["used"]), tuple(a["generated"])) for a in found["activities"]} == {
        (r["pid"], tuple(r["args"]["relations"]["used"]), tuple(r["args"]["relations"]["generated"])) for r in ours[ACTIVITY]}
    assert {(r["relation"], r["subject"], r["object"]) for r in found["entity_relations"]} == {
        ("derived_from", r["args"]["subject"], r["args"]["object"]) for r in ours[RELATION]} != set()
    stats = found["stats"]
    assert (stats["dangling_hashes"], stats["isolated_entities"], stats["truncated_activities"]) == (0, 0, 0), stats
    assert ioobserve.load(with_provenance).equals(ioobserve.load(trace))  # our readers skip the records
