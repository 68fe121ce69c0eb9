"""Where a recording's batches go: the base every sink derives from, and the summary."""
