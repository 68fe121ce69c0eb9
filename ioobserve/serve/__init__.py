"""`ioobserve serve`: the node service (kernel aggregates as OpenMetrics, per-job traces, a live event stream)."""
