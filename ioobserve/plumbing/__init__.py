"""The recorder's plumbing: hand-offs between threads, deadlines, thread names, memory, the host's root."""
