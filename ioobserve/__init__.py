"""ioobserve: a system-wide file I/O observer for HPC and AI nodes (eBPF).

`ioobserve.load(paths)` reads traces into a Polars DataFrame and `ioobserve.scan(paths)`
into a LazyFrame, with the columns of ioobserve.schema.
"""

__version__ = "0.1.0"
__all__ = ["load", "scan"]


def __getattr__(name: str):
    # Imported on first use: the command line should not pay for Polars to print --help.
    if name in ("load", "scan"):
        from ioobserve.trace import reader

        return getattr(reader, name)
    raise AttributeError(f"module 'ioobserve' has no attribute {name!r}")
