"""Loading the probes: a compiled object's maps and programs made in the kernel (with their
loops made acceptable to older verifiers), and the loader that verifies, configures,
attaches and detaches every layer of a recording."""
