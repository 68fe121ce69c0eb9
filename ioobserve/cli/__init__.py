"""The command line: one module per command.

The commands that watch a node (record, top, serve) cap Polars' thread pool: an observer
stays small on a big node, where Polars would start a thread per CPU (and its idle threads
spin between the recorder's many small operations). Polars sizes its pool once, when it is
imported, which the command modules do: so here, before any of them.

The commands bound by `--memory` (analyze, report) ask Polars' allocator (jemalloc) to hand
freed pages back within half a second rather than ten: building a trace's copy and then
analysing it in one process held 616 MB of a 600 MB aim on 100 M events, 585 MB so."""

import os
import sys

WATCHING_COMMANDS = ("record", "top", "serve")
POLARS_THREADS = 2  # the recorder's own threads give it its parallelism (ioobserve.trace.write.writer)
BOUNDED_COMMANDS = ("analyze", "report")
POLARS_ALLOCATOR_CONF = "_RJEM_MALLOC_CONF"  # read by the jemalloc in Polars' runtime when it loads
FAST_DECAY = "dirty_decay_ms:500,muzzy_decay_ms:500"


def _command(argv: list[str]) -> str | None:
    """The command named on the command line (its first word that is not an option)."""
    return next((word for word in argv[1:] if not word.startswith("-")), None)


def environment_given() -> dict[str, str]:
    """The environment we were started with, without what was set here (for a traced command)."""
    given = dict(os.environ)
    if CAPPED_HERE:
        given.pop("POLARS_MAX_THREADS", None)
    if DECAY_HERE:
        given.pop(POLARS_ALLOCATOR_CONF, None)
    return given


CAPPED_HERE = _command(sys.argv) in WATCHING_COMMANDS and "POLARS_MAX_THREADS" not in os.environ
if CAPPED_HERE:
    os.environ["POLARS_MAX_THREADS"] = str(POLARS_THREADS)
DECAY_HERE = _command(sys.argv) in BOUNDED_COMMANDS and POLARS_ALLOCATOR_CONF not in os.environ
if DECAY_HERE:
    os.environ[POLARS_ALLOCATOR_CONF] = FAST_DECAY
