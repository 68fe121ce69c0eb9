"""Traces: writing, reading and keeping them safe."""
