"""Live views of the capture: window aggregates and the sources `top` reads (live or replayed)."""
