"""Process lineage (lineage.bpf.c): fork, exec and exit, and the cgroups made (what names a
container's events), by raw tracepoints every kernel with BPF has. Attached before every other
layer, so that no process or container is born unseen."""

from __future__ import annotations

from ioobserve.probes.attach import Attachments
from ioobserve.probes.build.compile import ProbeError
from ioobserve.probes.kernel.program_kind import RAW, ProgramKind

# (raw tracepoint, program), attached in this order and detached in reverse
ATTACHMENTS = (
    ("sched_process_fork", "on_fork"),
    ("sched_process_exec", "on_exec"),
    ("sched_process_exit", "on_exit"),
    ("cgroup_mkdir", "on_cgroup_mkdir"),
)


class LineageLayer:
    """The process-lineage programs."""

    name = "lineage"
    unavailable = None

    def __init__(self) -> None:
        self._attached: Attachments | None = None

    def programs(self) -> list[tuple[str, ProgramKind]]:
        """What attach() loads."""
        return [(program, RAW) for _, program in ATTACHMENTS]

    def attach(self, probes) -> str:
        """Attach the programs; ProbeError if one does not attach."""
        self._attached = Attachments(probes.bpf)
        for tracepoint, program in ATTACHMENTS:
            try:
                self._attached.raw_tracepoint(tracepoint, program)
            except Exception as exc:  # bcc raises bare Exceptions
                self.detach()
                raise ProbeError(f"attaching {program} to raw tracepoint {tracepoint} failed: {exc}") from exc
        return "raw tracepoints " + ", ".join(tracepoint for tracepoint, _ in ATTACHMENTS)

    def detach(self) -> None:
        """Detach (safe to call twice)."""
        if self._attached is not None:
            self._attached.detach()
