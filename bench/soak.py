"""Soak: `ioobserve record` system-wide for a long time at a steady event rate, with rotation.

Issue 23's acceptance: 30 minutes system-wide at 100k events/s with rotation; the recorder's
memory flat after the first minutes, zero loss, every rotated part loads.

1. `ioobserve record -o DIR --rotate-s S` (or --rotate-mb) runs with no filter and no command.
2. bench/flood.c issues pread(64 B) on one warm file, paced to --rate calls/s in all from
   --procs processes, for --minutes (one event per call at the syscall layer).
3. Every --sample-s the recorder's processes are sampled: the main process, its capture child
   (forked, same cmdline) and its disk process (`python -m ioobserve.trace.write.disk`), i.e. every
   descendant whose cmdline names ioobserve. RSS (summed; PSS beside it, since the forked
   child shares pages with its parent) and CPU (user+system, share of one core) go to
   bench/results/soak-<time>.csv as they come.
4. After the flood, SIGTERM; then every part is loaded on its own with `ioobserve.load`
   (failures and damage reported), the flood's preads on its file are counted, and the losses
   are read from the last part's end record (kernel ring losses per op and "unwritten": all loss)
   and from the recorder's closing warning (which also counts what a stop deadline dropped).

Passes (exit 0) when nothing was lost, every part loaded whole, and every pread issued was found.
The RSS curve (min/median/max per minute) and its slope after --settle-minutes are reported,
not judged. Other processes on the node are recorded too: their events count in the parts'
totals and in any loss, not in the flood's preads.

  sudo .venv/bin/python bench/soak.py                                   # 30 min at 100k/s, a part a minute
  sudo .venv/bin/python bench/soak.py --minutes 3 --rotate-s 30         # a short check
  sudo .venv/bin/python bench/soak.py --rate 300000 --rotate-mb 50 --out /var/tmp/soak   # keep the trace
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import harness
from harness import BENCH, PAGE, build, cmdline, cpu_of, start_record, stat_fields, tree

RESULTS = BENCH / "results"
PAGE_MIB = PAGE / (1 << 20)
STOP_WAIT_S = 600  # the recorder's own stop deadline is 10 s; beyond this it is hung
CSV_COLUMNS = ["elapsed_s", "rss_mib", "cpu_percent", "pss_mib", "main_rss_mib", "capture_rss_mib", "disk_rss_mib", "processes"]


def _pss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Recorder:
    """`ioobserve record` running system-wide in the background, its output kept."""

    def __init__(self, out: Path, rotate: list[str]):
        self.options = ["-o", str(out), *rotate]
        self.proc, self.stderr = start_record(self.options)
        self.stdout: list[str] = []
        # Drained all along: a full pipe would stall the recorder at its first warning.
        self._drains = [threading.Thread(target=lambda f=f, keep=keep: keep.extend(f), daemon=True)
                        for f, keep in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr))]
        for drain in self._drains:
            drain.start()
        self._cpu: dict[int, float] = {}

    def processes(self) -> dict[int, str]:
        """pid -> role of the recorder and its descendants whose cmdline names ioobserve."""
        main_cmdline, cmdlines = cmdline(self.proc.pid), {}

        def names_ioobserve(child: int) -> bool:
            try:
                cmdlines[child] = cmdline(child)
            except OSError:
                return False
            return any("ioobserve" in arg for arg in cmdlines[child])

        found = {self.proc.pid: "main"}
        for pid in tree(self.proc.pid, names_ioobserve)[1:]:
            found[pid] = ("capture" if cmdlines[pid] == main_cmdline else
                          "disk" if "ioobserve.trace.write.disk" in cmdlines[pid] else "other")
        return found

    def sample(self, interval_s: float) -> dict:
        """RSS, PSS and the CPU used since the last sample (percent of one core) of every process."""
        row = {"rss_mib": 0.0, "pss_mib": 0.0, "main_rss_mib": 0.0, "capture_rss_mib": 0.0, "disk_rss_mib": 0.0, "cpu_s": 0.0}
        seen = {}
        for pid, role in self.processes().items():
            try:
                fields = stat_fields(pid)
                pss = _pss_mib(pid)
            except OSError:
                continue
            rss = int(fields[21]) * PAGE_MIB
            seen[pid] = cpu_of(fields)
            row["rss_mib"] += rss
            row["pss_mib"] += pss
            row[f"{role}_rss_mib"] = row.get(f"{role}_rss_mib", 0.0) + rss
            row["cpu_s"] += seen[pid] - self._cpu.get(pid, 0.0)  # a process new since the last sample: all its CPU
        self._cpu = seen
        row["cpu_percent"] = 100 * row["cpu_s"] / interval_s if interval_s > 0 else 0.0
        row["processes"] = len(seen)
        return row

    def stop(self) -> tuple[int, float]:
        """SIGTERM, then wait for it to write everything out; its exit code and the seconds it took."""
        started = time.monotonic()
        try:
            code = harness.stop(self.proc, STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
            self.stderr.append(f"soak: the recorder was still running {STOP_WAIT_S} s after SIGTERM: killed\n")
        for drain in self._drains:
            drain.join(timeout=10)
        return code, time.monotonic() - started


def drive(recorder: Recorder, flood_argv: list[str], sample_s: float, csv_path: Path) -> tuple[dict, list[dict]]:
    """Run the flood to its end, sampling the recorder into the CSV meanwhile; the flood's own report and the samples."""
    samples = []
    with open(csv_path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        recorder.sample(0)  # the CPU used while starting is not the flood's
        started = last = time.monotonic()
        flood = subprocess.Popen(flood_argv, stdout=subprocess.PIPE, text=True)
        while True:
            try:
                flood.wait(timeout=max(0.0, last + sample_s - time.monotonic()))
                done = True
            except subprocess.TimeoutExpired:
                done = False
            now = time.monotonic()
            row = recorder.sample(now - last) | {"elapsed_s": now - started}
            last = now
            samples.append(row)
            writer.writerow({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()})
            handle.flush()  # a long run's curve survives whatever ends it
            if done:
                break
    output = flood.stdout.read()
    if flood.returncode != 0:
        raise RuntimeError(f"flood failed (exit {flood.returncode}): {output}")
    return json.loads(output), samples


def check_parts(out: Path, flood_file: Path) -> list[dict]:
    """Load every part on its own: events, the flood's preads, damage, its end record."""
    import polars as pl

    import ioobserve
    from ioobserve.data import schema as s
    from ioobserve.trace.read.reader import own_records

    results = []
    for path in sorted(out.glob("*.pfw.gz"), key=lambda p: (len(p.name), p.name)):  # -9 before -10
        part = {"path": path, "bytes": path.stat().st_size, "error": None, "damage": None, "events": 0, "flood": 0}
        damage = []
        started = time.monotonic()
        try:
            events = ioobserve.load(path, damage=damage, progress=False)
            part["events"] = events.height
            part["flood"] = events.filter((pl.col(s.PATH) == str(flood_file)) & (pl.col(s.OP) == "pread64")).height
            if events.height:
                part["span_s"] = (events.get_column(s.TS).max() - events.get_column(s.TS).min()) / 1e9
            del events
            ends = own_records(path, "end")
            part["end"] = ends[-1]["args"] if ends else None
            part["lost_records"] = sum(sum(v for v in r["args"]["lost"].values()) for r in own_records(path, "lost"))
        except Exception as exc:  # noqa: BLE001  any failure to load is the finding
            part["error"] = f"{type(exc).__name__}: {exc}"
        part["load_s"] = time.monotonic() - started
        if damage:
            part["damage"] = "; ".join(d.describe() + "".join(f" ({n})" for n in d.notes) for d in damage)
        results.append(part)
    return results


def per_minute(samples: list[dict]) -> list[tuple[int, float, float, float]]:
    """(minute, min, median, max) of the RSS samples taken in each minute of the flood."""
    minutes: dict[int, list[float]] = {}
    for row in samples:
        minutes.setdefault(int(row["elapsed_s"] // 60), []).append(row["rss_mib"])
    return [(m, min(v), statistics.median(v), max(v)) for m, v in sorted(minutes.items())]


def slope(samples: list[dict], settle_s: float, key: str = "rss_mib") -> tuple[float, float] | None:
    """Least-squares slope of `key` in MiB/min over the samples after `settle_s` (or the
    run's second half, if it is shorter than that); and where that window starts."""
    end = samples[-1]["elapsed_s"] if samples else 0
    start = settle_s if end - settle_s >= 60 else end / 2
    window = [row for row in samples if row["elapsed_s"] >= start]
    if len(window) < 3:
        return None
    fit = statistics.linear_regression([r["elapsed_s"] for r in window], [r[key] for r in window])
    return fit.slope * 60, start


def report(args, flood: dict, issued: int, samples: list[dict], parts: list[dict], stop: tuple[int, float],
           recorder: Recorder, csv_path: Path) -> list[str]:
    """Print the summary; returns what failed (empty: a pass)."""
    failures = []
    print(f"\nflood: {issued:,} preads in {flood['seconds']:.1f} s, {flood['rate']:,.0f}/s (asked {args.rate:,}/s)")
    code, stop_s = stop
    print(f"recorder: exit {code}, stopped {stop_s:.1f} s after SIGTERM")
    warnings = [line.rstrip() for line in recorder.stderr if "warning" in line or "soak:" in line]
    for line in warnings:
        print(f"  {line}")

    print(f"\nparts: {len(parts)}  (rotation {' '.join(recorder.options[2:])})")
    print("| part | MB | events | flood preads | span s | end num_events | lost records | load s | problem |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i, part in enumerate(parts):
        end = part.get("end")
        problem = part["error"] or part["damage"] or ("no end record" if end is None else "")
        if problem:
            failures.append(f"part {i} ({part['path'].name}): {problem}")
        said = f"{end['num_events']:,}" if end and "num_events" in end else "-"
        print(f"| {i} | {part['bytes'] / 1e6:.1f} | {part['events']:,} | {part['flood']:,} | {part.get('span_s', 0):.1f} | "
              f"{said} | {part.get('lost_records', 0):,} | {part['load_s']:.1f} | {problem} |")

    finals = [p["end"] for p in parts if p.get("end") and "next" not in p["end"]]
    final = finals[-1] if finals else None
    if final is None:
        failures.append("no part holds the recording's final end record")
        lost, lost_total = {}, 0
    else:
        lost = final.get("lost", {})
        lost_total = final.get("lost_total", sum(lost.values()))
    events = sum(p["events"] for p in parts)
    found = sum(p["flood"] for p in parts)
    handed = final.get("recording_events") if final else None
    print(f"\nevents: {events:,} in all parts ({events / max(flood['seconds'], 1e-9):,.0f}/s over the flood); "
          f"the end record: {handed if handed is None else f'{handed:,}'} handed to the writer, {lost.get('unwritten', 0):,} of them unwritten")
    if handed is not None and events + lost.get("unwritten", 0) != handed:
        failures.append(f"{handed - events - lost.get('unwritten', 0):,} events handed to the writer neither load nor count as unwritten")
    print(f"loss: {lost_total:,} in the end record {json.dumps(lost) if lost else ''}")
    # The recorder's closing warning also counts what the stop deadline dropped before the writer.
    missing = [int(m.group(1).replace(",", "")) for line in recorder.stderr
               if (m := re.search(r"the trace misses ([\d,]+) events", line))]
    if missing:
        print(f"  the recorder's warning: {missing[-1]:,} events missing")
        failures.append(f"the recorder says the trace misses {missing[-1]:,} events")
    print(f"flood preads: issued {issued:,}, found {found:,}, lost (all processes) {lost_total:,}, "
          f"issued - found = {issued - found:,}")
    if lost_total:
        failures.append(f"{lost_total:,} events lost: {json.dumps(lost)}")
    if found != issued:
        failures.append(f"found {found:,} of {issued:,} flood preads")
    if issued - found > lost_total:  # the end record's loss covers every process, so this is a lower bound
        print(f"  at least {issued - found - lost_total:,} missing preads are not counted as lost in the end record")
        failures.append(f"at least {issued - found - lost_total:,} preads missing and not counted as lost")

    print(f"\nRSS of the recorder's processes, MiB, per minute of the flood (CSV: {csv_path}):")
    print("| minute | min | median | max |")
    print("|---|---|---|---|")
    for minute, low, mid, high in per_minute(samples):
        print(f"| {minute} | {low:.0f} | {mid:.0f} | {high:.0f} |")
    for key in ("rss_mib", "pss_mib"):
        fit = slope(samples, args.settle_minutes * 60, key)
        if fit:
            first = next(r[key] for r in samples if r["elapsed_s"] >= fit[1])
            print(f"{key[:3].upper()} slope from {fit[1] / 60:.1f} min to the end: {fit[0]:+.2f} MiB/min "
                  f"({first:.0f} -> {samples[-1][key]:.0f} MiB)")
    peak = max(samples, key=lambda r: r["rss_mib"])
    print(f"peak RSS {peak['rss_mib']:.0f} MiB at {peak['elapsed_s']:.0f} s "
          f"(main {peak['main_rss_mib']:.0f}, capture {peak['capture_rss_mib']:.0f}, disk {peak['disk_rss_mib']:.0f})")
    wall = samples[-1]["elapsed_s"] if samples else 0
    cpu_s = sum(r["cpu_s"] for r in samples)
    busy = sorted(r["cpu_percent"] for r in samples)
    print(f"recorder CPU: {cpu_s / max(wall, 1e-9):.0%} of one core over the flood ({cpu_s / max(wall, 1e-9) / os.cpu_count():.0%} "
          f"of the {os.cpu_count()} cores), per sample median {statistics.median(busy):.0f}% max {busy[-1]:.0f}%")
    return failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30, help="how long the flood runs (default 30)")
    parser.add_argument("--rate", type=int, default=100_000, help="preads per second, all flood processes together")
    parser.add_argument("--procs", type=int, default=1, help="flood processes sharing the rate")
    rotation = parser.add_mutually_exclusive_group()
    rotation.add_argument("--rotate-s", type=float, help="a new part every S seconds (default 60)")
    rotation.add_argument("--rotate-mb", type=float, help="a new part every M MB on disk")
    parser.add_argument("--out", type=Path, help="trace directory, kept (default: a scratch one, removed on a pass)")
    parser.add_argument("--sample-s", type=float, default=5, help="seconds between samples of the recorder")
    parser.add_argument("--settle-minutes", type=float, default=5, help="the RSS slope is fitted from here to the end")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/soak.py: run as root (the recorder attaches probes)")
    if args.out is not None and args.out.exists() and any(args.out.iterdir()):
        sys.exit(f"bench/soak.py: --out {args.out} is not empty; its other traces would be counted as parts")
    rotate = ["--rotate-mb", f"{args.rotate_mb:g}"] if args.rotate_mb else ["--rotate-s", f"{args.rotate_s or 60:g}"]
    per_proc = max(1, round(args.rate * args.minutes * 60 / args.procs))
    issued = per_proc * args.procs

    work = Path(tempfile.mkdtemp(prefix="ioobserve-soak-", dir="/var/tmp"))
    out = args.out or work / "trace"
    RESULTS.mkdir(exist_ok=True)
    csv_path = RESULTS / f"soak-{time.strftime('%Y%m%dT%H%M%S')}.csv"
    failures = ["did not finish"]
    try:
        flood_bin = build("flood.c", work)
        flood_file = work / "flood.dat"
        print(f"soak: {args.minutes:g} min at {args.rate:,} preads/s ({args.procs} x {per_proc:,}), record system-wide "
              f"{' '.join(rotate)} into {out}", flush=True)
        recorder = Recorder(out, rotate)
        try:
            flood, samples = drive(recorder, [str(flood_bin), str(flood_file), str(args.procs), str(per_proc), str(args.rate)],
                                   args.sample_s, csv_path)
        finally:
            stop = recorder.stop()
        parts = check_parts(out, flood_file)
        failures = report(args, flood, issued, samples, parts, stop, recorder, csv_path)
    finally:
        if args.out is None and failures:
            print(f"\nkept for inspection: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)  # with --out, the flood's file and binary only
    print("\nPASS" if not failures else "\nFAIL:\n  " + "\n  ".join(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
