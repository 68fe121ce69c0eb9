"""The Textual UI of `ioobserve top` (app, views of snapshots, styles)."""
