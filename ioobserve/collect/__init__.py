"""Draining the ring buffers, enriching batches, running a recording."""
