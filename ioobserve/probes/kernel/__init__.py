"""What the running kernel offers the probes, asked of it rather than assumed from its version:
tracefs and its tracepoints, BTF and the struct offsets it gives, the program kinds and
verifier features a trial load accepts, tracepoint formats, the syscall table, and the bpf(2)
commands that ask. A leaf of the probes: it imports no other stage."""
