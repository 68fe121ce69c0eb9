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
