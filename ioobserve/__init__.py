"""ioobserve: a system-wide file I/O observer for HPC and AI nodes (eBPF).

`ioobserve.load(paths)` reads traces into a Polars DataFrame and `ioobserve.scan(paths)`
into a LazyFrame, with the columns of ioobserve.data.schema; `ioobserve.tag("epoch")` is the
expression for one application tag's value; `ioobserve.accounting(paths)` sets each exited
process's traced calls and bytes beside the kernel's own accounting; `ioobserve.throttles(paths)`
lists the throttles flood control marked (whose events the traces lack). They raise
`ioobserve.TraceError` for a file that is not a readable trace; damaged members of a trace
are skipped and reported, naming the file, the member and the line.
"""

__version__ = "0.1.0"
__all__ = ["TraceError", "accounting", "load", "scan", "tag", "throttles"]


def tag(key: str):
    """A Polars expression: the value of application tag `key` on each event (null if unset)."""
    import polars as pl

    from ioobserve.data import schema as s

    entry = pl.element()
    found = pl.col(s.TAGS).list.eval(entry.filter(entry.struct.field("key") == key).struct.field("value"))
    return found.list.first().alias(key)


def __getattr__(name: str):
    # Imported on first use: the command line should not pay for Polars to print --help.
    if name in ("load", "scan", "accounting", "throttles"):
        from ioobserve.trace.read import reader

        return getattr(reader, name)
    if name == "TraceError":  # what load and scan raise for a file that is not a readable trace
        from ioobserve.trace.read.inflate import TraceError

        return TraceError
    raise AttributeError(f"module 'ioobserve' has no attribute {name!r}")
