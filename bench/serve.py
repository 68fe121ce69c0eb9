"""`ioobserve serve` in aggregation-only mode: its CPU and memory under a paced event rate, and
the overhead it adds to the pread microbenchmark, beside the full-trace mode (`record`) and
the floor: empty programs on the same two tracepoints.

1. Daemon cost: bench/flood.c issues pread(64 B) paced to --rate for --seconds while the
   observer runs system-wide and /metrics is scraped every 5 s; CPU is the observer's
   user+system time over the flood as a share of one core, memory its peak RSS. serve runs
   with --probe-stats, and its own /metrics families (each program's runs and seconds, the
   agent's CPU and memory, events lost) over the flood make the second table: docs/serve.md's
   figures are these.
2. Overhead: bench/microbench.c (N x pread 4 KiB from the page cache, ns per call as it
   measures itself) with nothing, the empty probes, a record per call (the second floor: the
   entry's time per thread and one 120-byte ring record at the exit, what any tracer that
   records each call pays), serve, and record running system-wide,
   each of the two by the syscall layer's way in on this kernel and by raw tracepoints
   (IOOBSERVE_SYSCALL_PROBES=raw); configurations interleaved round by round, medians; the
   added ns also as a multiple of the floor's.

  sudo .venv/bin/python bench/serve.py --rate 100000 --seconds 10 --rounds 5
  sudo .venv/bin/python bench/serve.py --rounds 0     # the daemon's cost alone
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import harness
from harness import IOOBSERVE, PYTHON, build
from overhead import measure  # a sibling script

# Empty programs on the raw tracepoints serve uses: the cost of any probe there at all.
EMPTY_PROBES = """
import signal
from ioobserve.probes.build.compile import compile_bpf
bpf = compile_bpf(text='int on_enter(void *ctx) { return 0; } int on_exit(void *ctx) { return 0; }')
bpf.attach_raw_tracepoint(tp="sys_enter", fn_name="on_enter")
bpf.attach_raw_tracepoint(tp="sys_exit", fn_name="on_exit")
print("ready", flush=True)
signal.sigwait([signal.SIGTERM, signal.SIGINT])
"""


# The second floor: what any tracer pays to record each call with its duration. The entry's
# time kept per thread, and at the exit one 120-byte record (our event's size) built on the
# stack and copied into a ring buffer (ringbuf_output, no wake-up, as ours), drained in batches.
RECORD_PROBES = """
import signal, threading, time
from ioobserve.collect.capture import RingReader
from ioobserve.probes.build.compile import compile_bpf
PAGES = 4096
bpf = compile_bpf(text='''
BPF_RINGBUF_OUTPUT(records, %d);
BPF_HASH(entered, u32, u64, 65536);
struct record { u64 ts; u64 dur; s64 ret; u32 pid; u32 tid; u8 rest[88]; };
int on_enter(struct bpf_raw_tracepoint_args *ctx) {
    u32 tid = bpf_get_current_pid_tgid();
    u64 ts = bpf_ktime_get_ns();
    entered.update(&tid, &ts);
    return 0;
}
int on_exit(struct bpf_raw_tracepoint_args *ctx) {
    u64 id = bpf_get_current_pid_tgid();
    u32 tid = id;
    u64 *ts = entered.lookup(&tid);
    if (!ts)
        return 0;
    struct record r = {};
    r.ts = *ts;
    r.dur = bpf_ktime_get_ns() - *ts;
    r.ret = ctx->args[1];
    r.pid = id >> 32;
    r.tid = tid;
    records.ringbuf_output(&r, sizeof(r), BPF_RB_NO_WAKEUP);
    entered.delete(&tid);
    return 0;
}''' % PAGES)
bpf.attach_raw_tracepoint(tp="sys_enter", fn_name="on_enter")
bpf.attach_raw_tracepoint(tp="sys_exit", fn_name="on_exit")
reader = RingReader(bpf["records"].map_fd, PAGES * 4096)

def drain():
    while True:
        reader.read_blob()
        time.sleep(0.01)

threading.Thread(target=drain, daemon=True).start()
print("ready", flush=True)
signal.sigwait([signal.SIGTERM, signal.SIGINT])
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


RAW = " (raw tracepoints)"  # a configuration's suffix: the syscall layer by raw tracepoints


class Observer:
    """One observer running system-wide in the background until stop()."""

    def __init__(self, kind: str, work: Path):
        env = {**os.environ, "IOOBSERVE_SYSCALL_PROBES": "raw"} if kind.endswith(RAW) else None
        kind = kind.removesuffix(RAW)
        self.kind, self.port = kind, _free_port()
        if kind == "serve":
            argv = [str(IOOBSERVE), "serve", "--listen", f"127.0.0.1:{self.port}", "--socket", str(work / "serve.sock"),
                    "--record-dir", str(work / "jobs"), "--probe-stats"]
            ready = "metrics on"
        elif kind == "record":
            argv = [str(IOOBSERVE), "record", "-o", tempfile.mkdtemp(dir=work, prefix="trace-")]
            ready = "recording to"
        elif kind == "empty probes":
            argv = [str(PYTHON), "-c", EMPTY_PROBES]
            ready = "ready"
        elif kind == "a record per call":
            argv = [str(PYTHON), "-c", RECORD_PROBES]
            ready = "ready"
        else:
            raise ValueError(kind)
        self.proc, _ = harness.start(argv, ready, stderr=subprocess.STDOUT, env=env)
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()  # drain

    def cpu_seconds(self) -> float:
        return harness.cpu_seconds(self.proc.pid)

    def peak_rss_mb(self) -> float:
        return harness.peak_rss_mb(self.proc.pid)

    def scrape(self) -> int:
        return len(self.metrics_text())

    def metrics_text(self) -> str:
        return urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=30).read().decode()

    def own_cost(self) -> dict:
        """serve's own cost as its /metrics gives it: {("program", name): (runs, seconds)},
        ("cpu",): seconds, ("rss",): bytes, ("lost",): events."""
        from prometheus_client.parser import text_string_to_metric_families

        found: dict = {}
        for family in text_string_to_metric_families(self.metrics_text()):
            for sample in family.samples:
                program = sample.labels.get("program")
                if sample.name == "ioobserve_probe_runs_total":
                    found[("program", program)] = (sample.value, found.get(("program", program), (0, 0))[1])
                elif sample.name == "ioobserve_probe_seconds_total":
                    found[("program", program)] = (found.get(("program", program), (0, 0))[0], sample.value)
                elif sample.name == "ioobserve_agent_cpu_seconds_total":
                    found[("cpu",)] = found.get(("cpu",), 0) + sample.value
                elif sample.name == "ioobserve_agent_resident_bytes":
                    found[("rss",)] = sample.value
                elif sample.name == "ioobserve_lost_events_total":
                    found[("lost",)] = sample.value
        return found

    def stop(self) -> None:
        harness.stop(self.proc)


def daemon_cost(kind: str, rate: int, seconds: float, flood: Path, work: Path, observer=None) -> dict:
    """CPU share and peak memory of one observer while the flood runs (`observer`: one started
    already, with Observer's methods, e.g. serve in a container)."""
    observer = observer or Observer(kind, work)
    try:
        time.sleep(1.0)
        own0 = observer.own_cost() if kind == "serve" else {}
        cpu0, wall0 = observer.cpu_seconds(), time.perf_counter()
        generator = subprocess.Popen([str(flood), str(work / "flood.dat"), "1", str(int(rate * seconds)), str(rate)],
                                     stdout=subprocess.PIPE, text=True)
        scraped = 0
        while generator.poll() is None:
            time.sleep(5.0 if kind == "serve" else 0.5)
            if kind == "serve" and generator.poll() is None:
                scraped = observer.scrape()
        achieved = json.loads(generator.stdout.read())["rate"]
        wall = time.perf_counter() - wall0
        cpu = (observer.cpu_seconds() - cpu0) / wall
        own = _delta(own0, observer.own_cost(), wall) if kind == "serve" else {}
        rss = observer.peak_rss_mb()
    finally:
        observer.stop()
    return {"kind": kind, "achieved": achieved, "cpu": cpu, "peak_rss_mb": rss, "scrape_bytes": scraped, "own": own}


def _delta(before: dict, after: dict, wall: float) -> dict:
    """The flood's share of serve's own figures: counters as differences, per second of it."""
    own = {key: tuple(a - b for a, b in zip(value, before.get(key, (0, 0)))) for key, value in after.items() if key[0] == "program"}
    own[("cpu",)] = (after.get(("cpu",), 0) - before.get(("cpu",), 0)) / wall
    own[("rss",)] = after.get(("rss",), 0)
    own[("lost",)] = after.get(("lost",), 0) - before.get(("lost",), 0)
    own[("wall",)] = wall
    return own


def print_own_cost(own: dict, rate: int) -> None:
    """serve's own /metrics over the flood, as docs/serve.md's table."""
    wall = own[("wall",)]
    print("\nserve's own figures over the flood, from its /metrics (--probe-stats):\n")
    print("| program | runs/s | ns per run | share of a core |")
    print("|---|---|---|---|")
    programs = sorted(((key[1], runs, seconds) for key, (runs, seconds) in
                       ((k, v) for k, v in own.items() if k[0] == "program")), key=lambda row: -row[2])
    for name, runs, seconds in programs:
        if runs:
            print(f"| {name} | {runs / wall:,.1f} | {seconds / runs * 1e9:,.0f} | {seconds / wall:.2%} |")
    total = sum(seconds for _, _, seconds in programs)
    print(f"| all programs | | | {total / wall:.1%} |")
    print(f"\nagent CPU {own[('cpu',)]:.1%} of a core, resident {own[('rss',)] / 1e6:.0f} MB, "
          f"events lost {own[('lost',)]:.0f} (at {rate:,} pread/s)")


def overhead(rounds: int, calls: int, work: Path) -> dict[str, list[float]]:
    """ns per pread under each configuration, interleaved."""
    micro = build("microbench.c", work)
    command = [str(micro), str(work / "micro.dat"), str(calls)]
    configs = ["baseline", "empty probes", "a record per call", "serve", "serve" + RAW, "record", "record" + RAW]
    results: dict[str, list[float]] = {config: [] for config in configs}
    for _ in range(rounds):
        for config in configs:
            observer = None if config == "baseline" else Observer(config, work)
            try:
                results[config].append(measure(command, "ns_per_call", config))
            finally:
                if observer:
                    observer.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=1_000_000)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/serve.py: run as root (the observers attach probes)")
    work = Path(tempfile.mkdtemp(prefix="ioobserve-bench-serve-"))
    flood = build("flood.c", work)
    print(f"Observer cost at {args.rate:,} pread/s for {args.seconds:g} s (system-wide):\n")
    print("| observer | achieved rate | CPU (share of a core) | peak RSS |")
    print("|---|---|---|---|")
    own = {}
    for kind in ("serve", "record"):
        r = daemon_cost(kind, args.rate, args.seconds, flood, work)
        own = r["own"] or own
        print(f"| {kind} | {r['achieved']:,.0f}/s | {r['cpu']:.1%} | {r['peak_rss_mb']:.0f} MB |", flush=True)
    print_own_cost(own, args.rate)
    if args.rounds < 1:
        return
    results = overhead(args.rounds, args.calls, work)
    base = statistics.median(results["baseline"])
    print(f"\npread(4 KiB) microbenchmark, {args.calls:,} calls, {args.rounds} interleaved rounds:\n")
    floor = statistics.median(results["empty probes"]) - base
    print("| running | median ns/call | min-max | added ns/call | added / floor's | ratio to baseline |")
    print("|---|---|---|---|---|---|")
    for config, values in results.items():
        med = statistics.median(values)
        times_floor = f"{(med - base) / floor:.1f}x" if config != "baseline" and floor > 0 else ""
        print(f"| {config} | {med:.0f} | {min(values):.0f}-{max(values):.0f} | {med - base:+.0f} | {times_floor} "
              f"| {med / base:.2f}x |")


if __name__ == "__main__":
    main()
