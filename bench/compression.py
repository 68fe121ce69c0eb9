"""The deflate curve on a recorded trace's own text: bytes per event against CPU per event, per
level, for the members as the writer cuts them (a flush per layer and shape) and as the
finisher merges them (up to 32 MiB of text): libdeflate (the writer's), ISA-L's igzip (PyPI
`isal`, levels 0-3) and zlib-ng (PyPI `zlib-ng`) where installed, beside Python's zlib
(DFTracer's deflate). Every one writes standard gzip members.

The input is a trace recorded here (`--trace`; `record --no-compact` leaves it as written, or
any trace: its members are inflated and compressed again). Each member is deflated on its own,
as the writer does; times are CPU seconds of this process (libdeflate and zlib run on one thread).

  .venv/bin/python bench/compression.py --trace T.pfw.gz [--levels 1 2 4 6 9 12]
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from pathlib import Path

import deflate

import harness  # noqa: F401  (first: it puts this checkout's ioobserve on sys.path)
from ioobserve.trace.members import read_index
from ioobserve.trace.write.compact import GROUP_BYTES


def member_texts(trace: Path) -> tuple[list[bytes], int]:
    """The text of each member of the trace, and the events in it (from its index)."""
    entries = read_index(trace)
    if entries is None:
        sys.exit(f"{trace}: no usable index (run `ioobserve index {trace}` first)")
    data = trace.read_bytes()
    texts = [zlib.decompress(data[e.offset : e.offset + e.size], 31) for e in entries]
    return texts, sum(e.events for e in entries)


def merged(texts: list[bytes]) -> list[bytes]:
    """The texts joined into groups of up to GROUP_BYTES, as the finisher merges members."""
    groups, current, size = [], [], 0
    for text in texts:
        if size + len(text) > GROUP_BYTES and current:
            groups.append(b"".join(current))
            current, size = [], 0
        current.append(text)
        size += len(text)
    if current:
        groups.append(b"".join(current))
    return groups


def measure(texts: list[bytes], compress) -> tuple[float, int]:
    """(CPU seconds, compressed bytes) for every text deflated on its own."""
    started = time.process_time()
    size = sum(len(compress(text)) for text in texts)
    return time.process_time() - started, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3, 4, 6, 9, 12])
    args = parser.parse_args()
    texts, events = member_texts(args.trace)
    raw = sum(len(t) for t in texts)
    print(f"{args.trace.name}: {events:,} events, {len(texts):,} members, {raw / max(events, 1):.0f} B/event of text")
    print("| deflate | members | level | CPU ns/event | MB/s of text | B/event |")
    print("|---|---|---|---|---|---|")
    for cut, parts in (("as written", texts), ("merged (finisher)", merged(texts))):
        for level in args.levels:
            cpu, size = measure(parts, lambda text, level=level: deflate.gzip_compress(text, level))
            print(f"| libdeflate | {cut} | {level} | {cpu / events * 1e9:.0f} | {raw / cpu / 1e6:.0f} | {size / events:.2f} |")
        for name, compress, levels in _others():
            for level in levels:
                cpu, size = measure(parts, lambda text, level=level: compress(text, level))
                print(f"| {name} | {cut} | {level} | {cpu / events * 1e9:.0f} | {raw / cpu / 1e6:.0f} | {size / events:.2f} |")


def _others():
    """(name, gzip compress(text, level), levels) of the other deflaters installed."""
    try:
        from isal import igzip
        yield "ISA-L igzip", igzip.compress, (0, 1, 2, 3)
    except ImportError:
        print("(ISA-L: `pip install isal` to compare)")
    try:
        from zlib_ng import gzip_ng
        yield "zlib-ng", gzip_ng.compress, (1, 2, 4, 6)
    except ImportError:
        print("(zlib-ng: `pip install zlib-ng` to compare)")
    yield "zlib", lambda text, level: zlib.compress(text, level), (1, 6)


if __name__ == "__main__":
    main()
