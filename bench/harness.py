"""What the bench scripts share: paths, /proc sampling, process trees, C builds, starting an observer."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import threading
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
IOOBSERVE = ROOT / ".venv" / "bin" / "ioobserve"
PYTHON = ROOT / ".venv" / "bin" / "python"
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

# This checkout's code ahead of the venv's editable install (a worktree run with this venv),
# and its tests/ helpers, which are not installed. Index 1: bench/ stays first.
sys.path.insert(1, str(ROOT))


def stat(pid: int | str, tid: int | str | None = None) -> tuple[str, list[str]]:
    """The comm and the fields after it of /proc/PID/stat, or of one thread's with `tid`."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    with open(path) as handle:
        head, tail = handle.read().rsplit(")", 1)  # the comm may hold spaces and parentheses
    return head.split("(", 1)[1], tail.split()


def stat_fields(pid: int | str, tid: int | str | None = None) -> list[str]:
    """The stat fields after the comm: [1] ppid, [11] utime, [12] stime, [21] rss in pages."""
    return stat(pid, tid)[1]


def cpu_of(fields: list[str]) -> float:
    """User + system CPU seconds in a stat's fields."""
    return (int(fields[11]) + int(fields[12])) / TICK


def cpu_seconds(pid: int | str, tid: int | str | None = None) -> float:
    """User + system CPU seconds of one process (its threads, not its children), or one thread."""
    return cpu_of(stat_fields(pid, tid))


def peak_rss_mb(pid: int) -> float:
    """A process's peak resident memory so far, MB (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cmdline(pid: int) -> list[str]:
    """A process's command line, argument by argument."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]


def children(pid: int) -> list[int]:
    """The children of every thread of a process; none once it has ended."""
    try:
        return [int(child) for task in os.listdir(f"/proc/{pid}/task")
                for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    except OSError:
        return []  # it ended between two reads


def tree(pid: int, follow=None) -> list[int]:
    """`pid` and its live descendants, parents first; a child for which `follow(child)` is false
    is left out with its own descendants."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        if current in found:
            continue
        found.append(current)
        todo += [child for child in children(current) if follow is None or follow(child)]
    return found


def _tree_total(pid: int, of) -> float:
    """The sum of `of(member)` over a process tree, each member that ends meanwhile left out."""
    total = 0
    for member in tree(pid):
        try:
            total += of(member)
        except (OSError, IndexError, ValueError):
            continue  # ended between the walk and the read
    return total


def _resident_bytes(pid: int) -> int:
    """A process's resident memory now, bytes (statm's second field, in pages)."""
    with open(f"/proc/{pid}/statm") as handle:
        return int(handle.read().split()[1]) * PAGE


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a process and its live descendants."""
    return float(_tree_total(pid, cpu_seconds))


def tree_rss(pid: int) -> int:
    """Bytes resident in a process and all its live descendants now."""
    return int(_tree_total(pid, _resident_bytes))


def _proportional_bytes(pid: int) -> int:
    """A process's proportional resident memory now (smaps_rollup's Pss): pages it shares with
    its fork parent counted once between them, as they are once in the node's memory."""
    with open(f"/proc/{pid}/smaps_rollup") as handle:
        for line in handle:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


class PeakMemory:
    """Samples a process tree's memory on a thread of its own until stop(): the peak of the
    tree's sum (Pss) and each member's own peak, by its name (comm)."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid, self.interval = pid, interval
        self.peak_bytes = 0
        self.by_name: dict[str, int] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.wait(self.interval):
            total = 0
            for member in tree(self.pid):
                try:
                    size, name = _proportional_bytes(member), stat(member)[0]
                except (OSError, IndexError, ValueError):
                    continue  # ended between the walk and the read
                total += size
                self.by_name[name] = max(self.by_name.get(name, 0), size)
            self.peak_bytes = max(self.peak_bytes, total)

    def stop(self) -> None:
        """End the sampling (call once the tree has ended or is about to)."""
        self._done.set()
        self._thread.join()


def build(source: str, out_dir: Path) -> Path:
    """bench/`source` (a C file) compiled with `cc -O2` into `out_dir`; the binary's path."""
    binary = out_dir / Path(source).stem
    subprocess.run(["cc", "-O2", "-o", str(binary), str(BENCH / source)], check=True)
    return binary


def dftracer_preload(venv: Path | None) -> Path | None:
    """libdftracer_preload.so inside a scratch venv, if there is one."""
    if venv is None:
        return None
    found = sorted(venv.glob("lib/python3*/site-packages/dftracer/lib64/libdftracer_preload.so"))
    return found[0] if found else None


def start(argv: list[str], ready: str, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
          env: dict | None = None) -> tuple[subprocess.Popen, list[str]]:
    """Start `argv` and read its stderr (its stdout with stderr=STDOUT) line by line until one
    holds `ready`; the process and the lines read. Raises with what it printed if it ends first."""
    proc = subprocess.Popen(argv, stdout=stdout, stderr=stderr, text=True, env=env)
    head: list[str] = []
    for line in proc.stdout if stderr == subprocess.STDOUT else proc.stderr:
        head.append(line)
        if ready in line:
            return proc, head
    proc.wait()
    raise RuntimeError(f"{' '.join(map(str, argv[:2]))} did not start (exit {proc.returncode}): {''.join(head)[-800:]}")


def start_record(options: list[str], **popen) -> tuple[subprocess.Popen, list[str]]:
    """`ioobserve record OPTIONS` started and saying "recording to" (start()'s keywords)."""
    return start([str(IOOBSERVE), "record", *options], "recording to", **popen)


def stop(proc: subprocess.Popen, timeout: float = 300) -> int:
    """SIGTERM, then the exit code once it ends (TimeoutExpired past `timeout` seconds)."""
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=timeout)


def against_plain(by_config: dict[str, list[float]], plain: str = "plain") -> list[tuple[str, float, float, float, float | None, float]]:
    """Per configuration: (name, median, min, max, median added to `plain`'s or None for it,
    ratio of the medians)."""
    base = statistics.median(by_config[plain])
    rows = []
    for config, values in by_config.items():
        med = statistics.median(values)
        rows.append((config, med, min(values), max(values), None if config == plain else med - base, med / base))
    return rows
