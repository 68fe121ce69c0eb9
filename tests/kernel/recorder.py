"""Running `ioobserve record` for kernel tests, the way a user would."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import ROOT
from tests.kernel.kernel_side import RECORD, phase

IOOBSERVE = str(ROOT / ".venv" / "bin" / "ioobserve")
READY_TIMEOUT = 90
# Tests count events exactly: on a loaded CI machine writing out a system-wide recording's
# tail may take longer than the default stop deadline, which would drop (and count) it. The
# deadline itself is tested with its own value (test_recorder_faults.py), which comes later
# on the command line and wins.
STOP = ("--stop-timeout", "300")
# How long stop() waits for the recorder to exit: its own deadline and a minute more, as a
# matrix guest under emulation once took over two minutes to write a recording's tail.
STOP_WAIT = 300 + 60
# In a matrix guest the traces' Parquet copies are left to the host's checks, which build them on
# first read: under emulation a finisher per recording (Polars in a process of its own) took CPU
# from the next test and is about no kernel.
GUEST = ("--no-compact",) if phase() == RECORD else ()


def wait_finished(directory: Path) -> None:
    """Until the background finishers of the traces in `directory` are done (ioobserve.trace.write.finish)."""
    from ioobserve.trace.write.finish import MARK_SUFFIX
    from tests.waiting import wait_until

    # The finisher runs niced: on a loaded machine it takes its time.
    wait_until(lambda: not list(Path(directory).glob(f"*{MARK_SUFFIX}")), f"the traces in {directory} finished",
               timeout=600)


def record_command(out_dir: Path, command: list[str], *options: str, timeout: float = 300,
                   env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`ioobserve record -o out_dir [options] -- command`, run to completion."""
    return subprocess.run([IOOBSERVE, "record", "-o", str(out_dir), *STOP, *GUEST, *options, "--", *command],
                          capture_output=True, text=True, timeout=timeout, env=env)


def record_in_turn(out_dir: Path, scratch: Path, commands: dict[str, list[str]], *options: str,
                   env: dict[str, str] | None = None) -> dict:
    """Several workloads recorded one after another by one `ioobserve record` (a recorder's
    start and stop are most of a kernel test's time under emulation), each one's output kept
    apart: {"record": ran(the recorder), "outputs": {name: ran(that workload)}}."""
    from tests.kernel.kernel_side import ran

    steps = []
    for name, command in commands.items():
        out, err, status = (shlex.quote(str(scratch / f"{name}.{kind}")) for kind in ("out", "err", "status"))
        steps.append(f"{shlex.join(command)} >{out} 2>{err}; echo $? >{status}")
    done = record_command(out_dir, ["sh", "-c", "\n".join(steps)], *options, env=env)
    outputs = {}
    for name in commands:
        status = scratch / f"{name}.status"
        ended = status.exists()  # the recorder may have stopped before this one ran
        outputs[name] = {"returncode": int(status.read_text()) if ended else None,
                         "stdout": (scratch / f"{name}.out").read_text() if ended else "",
                         "stderr": (scratch / f"{name}.err").read_text() if ended else ""}
    return {"record": ran(done), "outputs": outputs}


_STARTED: list[subprocess.Popen] = []  # every recorder started, for kill_leftovers


def kill_leftovers() -> None:
    """Kill the recorders a test left running (it failed before stopping them): a system-wide
    recording would go on loading the machine, and reading every later test's I/O."""
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)


class Recorder:
    """A background `ioobserve record` that tests stop with SIGTERM."""

    def __init__(self, out_dir: Path, *options: str, prefix: tuple[str, ...] = ()):
        """`prefix`: a command the recorder runs under (one that puts it in a root of its own)."""
        self.out_dir = out_dir
        self.proc = subprocess.Popen([*prefix, IOOBSERVE, "record", "-o", str(out_dir), *STOP, *GUEST, *options],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _STARTED.append(self.proc)
        deadline = time.monotonic() + READY_TIMEOUT
        self.stderr_head = ""
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            self.stderr_head += line
            if "recording to" in line:
                return
            if not line and self.proc.poll() is not None:
                break
        self.proc.kill()
        raise AssertionError(f"recorder did not start: {self.stderr_head}{self.proc.stderr.read()}")

    def stop(self) -> tuple[int, str, str]:
        """SIGTERM; returns (exit code, stdout, stderr)."""
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=STOP_WAIT)
        return self.proc.returncode, out, self.stderr_head + err

    def traces(self) -> list[Path]:
        return sorted(self.out_dir.glob("*.pfw.gz"))


def json_line(stdout: str, key: str) -> dict:
    """The workload's JSON report line containing `key`."""
    for line in stdout.splitlines():
        if line.startswith("{") and f'"{key}"' in line:
            return json.loads(line)
    raise AssertionError(f"no {key!r} report in workload output: {stdout[-2000:]}")


class Workload:
    """A workload that prints READY, waits for a line on stdin, then works."""

    def __init__(self, command: list[str], cwd: Path | None = None, env: dict[str, str] | None = None):
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, cwd=cwd, env=env)
        line = self.proc.stdout.readline()
        assert line.strip() == "READY", line + self.proc.stderr.read()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def go(self) -> str:
        """Release it and wait for it to finish; returns the rest of its stdout."""
        out, err = self.proc.communicate("go\n", timeout=120)
        assert self.proc.returncode == 0, err
        return out
