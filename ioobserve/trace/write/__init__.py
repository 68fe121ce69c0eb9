"""Writing traces: the writer sink, its threads, its parts on disk, and finishing closed files."""
