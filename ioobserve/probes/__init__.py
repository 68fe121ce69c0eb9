"""The kernel side from user space: BTF, headers, capabilities, loading the probes (the only bcc user)."""
