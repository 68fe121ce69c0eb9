"""`ioobserve export`: Chrome trace JSON for Perfetto and Parquet that other readers open."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import ioobserve
from ioobserve.data import schema as s

IOOBSERVE = Path(sys.executable).with_name("ioobserve")


def _export(trace: Path, fmt: str, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(IOOBSERVE), "export", str(trace), "--to", fmt, "-o", str(out)],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def out_dir(tmp_path) -> Path:
    directory = tmp_path / "out"
    directory.mkdir(mode=0o700)
    return directory


def test_perfetto_export_is_chrome_trace_json_with_every_event(trace, out_dir):
    out = out_dir / "t.json"
    done = _export(trace, "perfetto", out)
    assert done.returncode == 0, done.stderr
    assert (out.stat().st_mode & 0o777) == 0o600
    document = json.loads(out.read_text())
    loaded = ioobserve.load(trace)
    slices = [e for e in document["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == loaded.height
    # pid 100 reads from Loader.read, called at <module>: the two Python calls are slices too
    python = sorted(e["name"] for e in slices if e["cat"] == s.LAYER_PYTHON)
    assert python == ["<module>", "Loader.read"]
    names = {e["pid"]: e["args"]["name"] for e in document["traceEvents"] if e["ph"] == "M"}
    assert names == {100: "w", 101: "w", 102: "w"}
    epoch = document["metadata"]["epoch_ns"]
    first = min(slices, key=lambda e: e["ts"])
    row = loaded.row(0, named=True)
    assert epoch == row[s.TS] and first["ts"] == 0 and first["dur"] == pytest.approx(row[s.DUR] / 1000)
    assert first["args"]["path"] == row[s.PATH] and first["name"] == row[s.OP] and first["cat"] == row[s.LAYER]
    assert sorted(e["ts"] for e in slices) == pytest.approx(((loaded[s.TS] - epoch) / 1000).to_list())


def test_perfettos_trace_processor_loads_the_export(trace, out_dir):
    shell = os.environ.get("PERFETTO_TRACE_PROCESSOR") or shutil.which("trace_processor_shell")
    if not shell:
        pytest.skip("Perfetto's trace_processor_shell is not on this machine (the PyPI package downloads it "
                    "from Google's servers on first use; set PERFETTO_TRACE_PROCESSOR to a local copy)")
    out = out_dir / "t.json"
    assert _export(trace, "perfetto", out).returncode == 0
    query = out_dir / "q.sql"
    query.write_text("select count(*) as n from slice;")
    done = subprocess.run([shell, "-q", str(query), str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == str(ioobserve.load(trace).height)


def test_parquet_round_trip_keeps_types_and_values(trace, out_dir):
    out = out_dir / "t.parquet"
    done = _export(trace, "parquet", out)
    assert done.returncode == 0, done.stderr
    back = pl.read_parquet(out)
    assert back.schema == pl.Schema(s.EVENT_SCHEMA)
    assert_frame_equal(back, ioobserve.load(trace))


def test_pyarrow_and_duckdb_read_the_parquet(peers, trace, out_dir):
    out = out_dir / "t.parquet"
    assert _export(trace, "parquet", out).returncode == 0
    code = (
        "import sys, pyarrow.parquet as pq, duckdb; t = pq.read_table(sys.argv[1]);"
        "n = duckdb.sql(f\"select count(*) from read_parquet('{sys.argv[1]}') where op = 'read'\").fetchall()[0][0];"
        "print(t.num_rows, n, t.schema.field('ts').type)"
    )
    done = subprocess.run([str(peers / "bin" / "python"), "-c", code, str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = ioobserve.load(trace)
    reads = loaded.filter(pl.col(s.OP) == "read").height
    assert done.stdout.split() == [str(loaded.height), str(reads), "uint64"]


def test_export_refuses_to_overwrite_and_writes_nothing_on_bad_input(trace, out_dir, tmp_path):
    out = out_dir / "t.parquet"
    assert _export(trace, "parquet", out).returncode == 0
    again = _export(trace, "parquet", out)
    assert again.returncode == 2 and "exists" in again.stderr and "Traceback" not in again.stderr
    junk = tmp_path / "junk.pfw.gz"
    junk.write_text("not a trace\n")
    bad = _export(junk, "perfetto", out_dir / "j.json")
    assert bad.returncode == 2 and "not a gzip trace" in bad.stderr and "Traceback" not in bad.stderr
    into_dir = _export(trace, "perfetto", out_dir)
    assert into_dir.returncode == 2 and "is a directory" in into_dir.stderr
    assert sorted(p.name for p in out_dir.iterdir()) == ["t.parquet"]  # no half-written or temp files
