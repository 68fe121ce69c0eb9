"""Bad input: one clear line on stderr, a non-zero exit, nothing attached, nothing written."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.cli.cli_run import IOOBSERVE, assert_one_line_error, run


@pytest.mark.parametrize(
    "args, words",
    [
        (["--pid", "999999999"], ["--pid 999999999", "no such process"]),
        (["--comm", "a-name-longer-than-15"], ["--comm"]),
        (["--path-prefix", "/no/such/dir"], ["--path-prefix", "no such"]),
        (["--path-prefix", "/"] * 8, ["--path-prefix", "at most 7"]),  # one slot keeps tags visible
        (["--cgroup", "no-such-cgroup-xyz"], ["cgroup"]),
        (["--ring-pages", "3"], ["power of two"]),
        (["--backlog-mb", "0.5"], ["--backlog-mb 0.5", "at least 1"]),
        (["--job", "abc"], ["--job 'abc'", "number"]),
        (["--job", "987654321"], ["--job 987654321", "no cgroup"]),
        (["--unit", ""], ["--unit ''"]),
        (["--unit", "../x"], ["--unit '../x'"]),
        (["--unit", "no-such-unit-xyz"], ["--unit no-such-unit-xyz", "no cgroup"]),
        (["--py-stacks", "some"], ["--py-stacks some", "all, off or a number"]),
        (["--py-stacks", "0"], ["--py-stacks 0"]),
        (["--py-depth", "33"], ["--py-depth 33", "between 1 and 32"]),
        (["--precision", "ms"], ["--precision ms", "us, ns"]),
        (["--writer-threads", "0"], ["--writer-threads", "greater than or equal to 1"]),
    ],
)
def test_bad_filters_are_refused_before_anything_is_attached(tmp_path, args, words, root_required):
    result = run("record", "-o", str(tmp_path / "out"), *args)
    assert_one_line_error(result, *words)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_symlinked_output_directory(tmp_path, root_required):
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert_one_line_error(run("record", "-o", str(tmp_path / "link"), "--duration", "0"), "symlink")


def test_output_directory_writable_by_others(tmp_path, root_required):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    assert_one_line_error(run("record", "-o", str(shared), "--duration", "0"), "writable by other users")
    assert list(shared.iterdir()) == []


def test_unknown_command(tmp_path, root_required):
    assert_one_line_error(run("record", "-o", str(tmp_path), "--", "no-such-program-xyz"), "command not found")


@pytest.mark.parametrize("command", [["record", "-o", "/tmp"], ["top"]])
def test_not_root_is_told_what_is_needed(command):
    if os.geteuid() != 0:
        result = run(*command)
    else:  # drop to nobody for this one call
        result = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", IOOBSERVE, *command],
                                capture_output=True, text=True, timeout=120)
    assert_one_line_error(result, "privileges", "root")


def test_top_replays_only_traces(tmp_path):
    junk = tmp_path / "junk.pfw.gz"
    junk.write_bytes(b"not gzip")
    assert_one_line_error(run("top", "--trace", str(junk)), "not a gzip trace")
    assert_one_line_error(run("top", "--trace", str(tmp_path / "none.pfw.gz")), "no such trace file")


def test_help_has_examples():
    for command in ("record", "doctor", "top", "analyze", "report", "export", "index", "serve", "job"):
        result = run(command, "--help")
        assert result.returncode == 0
        assert "Examples" in result.stdout


def test_usage_errors_are_one_line():
    assert_one_line_error(run("record", "--no-such-option"), "--no-such-option")
    assert_one_line_error(run("analyze", "--memory", "10", "t.pfw.gz"), "--memory", "greater than or equal to 256")
    assert_one_line_error(run("record", "--duration", "soon"), "--duration")
    assert_one_line_error(run("no-such-command"), "no-such-command")


def test_index_rebuilds_and_reports_damage(tmp_path):
    from ioobserve.trace.members import build_index, index_path, read_index
    from ioobserve.trace.write.writer import TraceWriter
    from tests.batches import Batches
    from tests.sample_trace import sample_frame

    writer = TraceWriter(tmp_path, "t.pfw.gz", {})
    writer.events(*Batches()(sample_frame()))
    writer.close()
    index_path(writer.path).unlink()
    done = run("index", str(writer.path))
    assert done.returncode == 0 and f"{sample_frame().height} events" in done.stdout
    assert read_index(writer.path) == build_index(writer.path)[0]
    writer.path.write_bytes(writer.path.read_bytes()[:-10])  # truncated: killed mid-write
    damaged = run("index", str(writer.path))
    assert damaged.returncode == 1 and "incomplete" in damaged.stderr and "Traceback" not in damaged.stderr


def test_index_of_something_that_is_not_a_trace(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    assert_one_line_error(run("index", str(tmp_path / "notes.txt")), "not a gzip trace")
    assert_one_line_error(run("index", str(tmp_path / "missing.pfw.gz")), "no such trace file")


def test_a_negative_flood_limit_is_refused(tmp_path, root_required):
    assert_one_line_error(run("record", "-o", str(tmp_path / "out"), "--flood-limit", "-1", "--", "true"), "--flood-limit")


@pytest.mark.parametrize("flag", ["--rotate-mb", "--rotate-s"])
def test_rotation_needs_a_positive_size_or_age(tmp_path, flag, root_required):
    assert_one_line_error(run("record", "-o", str(tmp_path / "out"), flag, "0"), flag)


def _serve(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return run("serve", "--socket", str(tmp_path / "run" / "ev.sock"), "--record-dir", str(tmp_path / "traces"), *args)


@pytest.mark.parametrize(
    "config, words",
    [
        ('listen = "127.0.0.1:9464"\nlisten-port = 1\n', ["unknown key 'listen-port'", "known:"]),
        ("record-job = 5\n", ["record-job", "wrong type"]),
        ("listen = \n", ["not valid TOML"]),
        ('listen = "nowhere"\n', ["listen 'nowhere'", "HOST:PORT"]),
        ('socket-group = "no-such-group-xyz"\n', ["socket-group", "no such group"]),
        ('record-job = ["12;rm"]\n', ["job '12;rm'"]),
        ("stop-timeout = -1\n", ["stop-timeout -1", "0 or more"]),
        ("flood-limit = -5\n", ["flood-limit -5", "0 (no limit) or more"]),
        ('probe-stats = "yes"\n', ["probe-stats", "wrong type"]),
        ("flood-limit = true\n", ["flood-limit", "wrong type"]),
    ],
)
def test_serve_refuses_a_bad_config_naming_the_key(tmp_path, config, words):
    path = tmp_path / "serve.toml"
    path.write_text(config)
    assert_one_line_error(_serve(tmp_path, "--config", str(path)), *words)


def test_serve_refuses_an_unreadable_config(tmp_path):
    assert_one_line_error(_serve(tmp_path, "--config", str(tmp_path / "missing.toml")), "missing.toml", "cannot read")


def test_serve_refuses_a_port_in_use(tmp_path, root_required):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = _serve(tmp_path, "--listen", f"127.0.0.1:{port}")
    assert_one_line_error(result, f"listen 127.0.0.1:{port}", "in use")
    assert not (tmp_path / "run" / "ev.sock").exists()  # nothing left behind


def test_serve_refuses_a_socket_path_taken(tmp_path, root_required):
    import socket

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "ev.sock").write_text("not a socket")
    assert_one_line_error(_serve(tmp_path), "ev.sock", "not a socket")
    (tmp_path / "run" / "ev.sock").unlink()
    with socket.socket(socket.AF_UNIX) as live:  # another daemon listening there
        live.bind(str(tmp_path / "run" / "ev.sock"))
        live.listen(1)
        assert_one_line_error(_serve(tmp_path), "ev.sock", "another ioobserve serve")


def test_top_attach_to_no_daemon(tmp_path):
    assert_one_line_error(run("top", "--attach", str(tmp_path / "none.sock")), "none.sock", "no such socket")
    assert_one_line_error(run("top", "--attach", str(tmp_path / "none.sock"), "--pid", "1"), "--attach")


def test_job_command_without_a_daemon(tmp_path):
    assert_one_line_error(run("job", "start", "42", "--socket", str(tmp_path / "none.sock")), "no ioobserve serve listens")
    assert_one_line_error(run("job", "pause", "42"), "'pause'", "start or stop")
