"""Building the probes: kernel headers for bcc, the compile, the compiled objects kept on disk
and compiles done by another machine (a spool)."""
