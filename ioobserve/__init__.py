"""ioobserve: a system-wide file I/O observer for HPC and AI nodes (eBPF via bcc)."""
