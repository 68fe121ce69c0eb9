"""`ioobserve analyze` and `ioobserve report` as a user runs them: JSON for machines, a report
that opens in a browser with the network shut, and one clear line for each mistake."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess

import pytest

from tests.cli.cli_run import assert_one_line_error, run
from tests.conftest import in_ci
from ioobserve.data import schema as s
from tests.unit.synthetic_traces import Proc, io, write_trace

A, B = Proc(100, rank=0), Proc(200, ppid=100, rank=0, worker=0)
HOSTILE = "/d/<script>alert(1)</script>&.bin"  # any user on the node chooses file names
ROWS = [io(A, 100, i * 100, i * 100 + 40, "read", "/d/a.bin", 3, i * 4096, 4096) for i in range(50)]
ROWS += [io(B, 200, i * 100 + 50, i * 100 + 90, "read", HOSTILE, 4, 0, 100) for i in range(30)]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-sync",
                  "--disable-component-update", "--no-first-run", "--host-resolver-rules=MAP * ~NOTFOUND",
                  "--proxy-server=127.0.0.1:9"]  # nothing may load from the network


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return write_trace(tmp_path_factory.mktemp("cli"), [A, B], [ROWS])


def test_analyze_json_has_every_table(trace):
    result = run("analyze", str(trace), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["overview"]["calls"] == 80 and data["layer"] == "SYSCALL"
    assert {row["pid"] for row in data["processes"]} == {100, 200}
    assert {"jobs", "ranks", "workers", "files", "sizes", "patterns", "overlap", "insights", "timeline"} <= set(data)


def test_analyze_filters_and_screen(trace):
    only_b = json.loads(run("analyze", str(trace), "--json", "--pid", "200").stdout)
    assert only_b["overview"]["calls"] == 30
    screen = run("analyze", str(trace), "--path-prefix", "/d/a", "--since", "0", "--until", "1h")
    assert screen.returncode == 0, screen.stderr
    assert "50 (50 reads, 0 writes, 0 failed)" in screen.stdout
    nothing = run("analyze", str(trace), "--job", "12345")
    assert nothing.returncode == 1 and "no events match" in nothing.stderr


@pytest.mark.parametrize("args, words", [
    (["analyze", "/no/such.pfw.gz"], ["/no/such.pfw.gz", "no such trace"]),
    (["analyze", "TRACE", "--since", "yesterday"], ["--since 'yesterday'", "seconds after the start"]),
    (["analyze", "TRACE", "--since", "10", "--until", "5"], ["--until 5 is not after --since 10"]),
    (["analyze", "TRACE", "--scheduler", "tcp://127.0.0.1:9"], ["cannot reach the Dask scheduler"]),
    (["report", "TRACE", "-o", "EXISTING"], ["exists", "--force"]),
    (["report", "TRACE", "-o", "DIR"], ["is a directory"]),
])
def test_bad_input(trace, tmp_path, args, words):
    existing = tmp_path / "old.html"
    existing.write_text("keep me")
    swap = {"TRACE": str(trace), "EXISTING": str(existing), "DIR": str(tmp_path)}
    assert_one_line_error(run(*[swap.get(arg, arg) for arg in args]), *words)
    assert existing.read_text() == "keep me"


def test_not_a_trace(tmp_path):
    junk = tmp_path / "junk.pfw.gz"
    junk.write_bytes(b"not gzip at all")
    assert_one_line_error(run("analyze", str(junk)), str(junk), "not a gzip trace")


@pytest.fixture(scope="module")
def report(trace, tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report.html"
    result = run("report", str(trace), "-o", str(out))
    assert result.returncode == 0, result.stderr
    return out


def test_report_is_private_self_contained_and_escaped(report):
    assert stat.S_IMODE(os.stat(report).st_mode) == 0o600  # it names every user's files
    page = report.read_text()
    assert not re.search(r"https?://|src=|href=|@import|url\(", page)  # nothing to fetch
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;&amp;.bin" in page
    assert page.count("<svg") == 7 and page.count("<polyline") == 2  # one layer: a line in each of the two time charts
    lineage = page[page.index("<h2>Lineage</h2>"):page.index("<h2>Access sizes</h2>")]
    assert "<td>/d/a.bin</td><td>used</td><td>200.0 KiB</td>" in lineage  # the 50 reads of 4 KiB
    assert "Insights (" in page and "/d/a.bin" in page
    assert "Object storage" not in page  # no HTTP request was recorded


def test_report_shows_object_storage_requests_per_endpoint_and_object(tmp_path):
    hostile = "https://s3.local/b/<img src=x>"
    rows = [io(A, 100, i * 100, i * 100 + 3000 * (i + 1), "GET", hostile if i % 2 else "https://s3.local/b/k1",
               offset=i * 4096, size=4096, layer=s.LAYER_HTTP) for i in range(6)]
    rows += [io(A, 100, 10, 20, "PUT", "http://10.0.0.9:9000/b/k2", size=100, layer=s.LAYER_HTTP)]
    # an object fetched into a local copy (written as it came), of which 4 KiB were read
    rows += [io(A, 101, 100, 9000, "GET", "https://s3.local/b/shard", size=2 << 20, layer=s.LAYER_HTTP)]
    rows += [io(A, 101, 1000 * (i + 1), 1000 * (i + 1) + 50, "write", "/cache/shard", 5, i << 19, 1 << 19) for i in range(4)]
    rows += [io(A, 100, 20_000, 20_050, "read", "/cache/shard", 6, 0, 4096)]
    trace = write_trace(tmp_path, [A], [rows + ROWS[:5]])
    out = tmp_path / "report.html"
    result = run("report", str(trace), "-o", str(out))
    assert result.returncode == 0, result.stderr
    page = out.read_text()
    section = page[page.index("<h2>Object storage</h2>"):page.index("<h2>Lineage</h2>")]
    assert section.count("<svg") == 1 and "Requests by latency, per endpoint" in section
    assert "https://s3.local" in section and "http://10.0.0.9:9000" in section and "https://s3.local/b/k1" in section
    assert "&lt;img src=x&gt;" in section and "<img" not in page
    copies = section[section.index("Objects read through a local copy"):]
    assert re.search(r"<td>https://s3.local/b/shard</td><td>/cache/shard</td><td>2.0 MiB</td><td>2.0 MiB</td>"
                     r"<td>4.0 KiB</td><td>0%</td>", copies), copies


@pytest.fixture(scope="module")
def chromium():
    found = shutil.which("chromium")
    if found is None:
        if in_ci():
            pytest.fail("chromium is missing: make setup installs it")
        pytest.skip("chromium is not installed (make setup installs it)")
    return found


def test_report_renders_in_a_browser_offline(report, chromium, tmp_path):
    profile = ["--user-data-dir=" + str(tmp_path / "profile")]
    dom = subprocess.run([chromium, *CHROMIUM_FLAGS, *profile, "--dump-dom", report.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count("<svg") == 7 and "ioobserve report" in dom.stdout
    shot = tmp_path / "report.png"
    subprocess.run([chromium, *CHROMIUM_FLAGS, *profile, "--window-size=1100,2400", f"--screenshot={shot}", report.as_uri()],
                   capture_output=True, text=True, timeout=120, check=True)
    assert shot.stat().st_size > 50_000  # a page of charts, not a blank one (a blank page is a few KB)
