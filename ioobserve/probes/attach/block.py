"""The block layer (block.bpf.c): a request from its first bio's submission to its
completion, by raw tracepoints; the request's fields are read at offsets from BTF. Kernels
before 6.5 lack block_io_start (a request, in its submitter's context): there the bio's
queueing stands in."""

from __future__ import annotations

from ioobserve.probes import layers as ly
from ioobserve.probes.attach import RawTracepointLayer
from ioobserve.probes.kernel.features import first_tracepoint

# Each step's candidates, (tracepoint, program), the first the kernel has taken; completion
# first, so that no request is issued unseen.
STEPS = (
    (("block_rq_complete", "on_block_rq_complete"),),
    (("block_rq_issue", "on_block_rq_issue"),),
    (("block_io_start", "on_block_io_start"), ("block_bio_queue", "on_block_bio_queue")),
)
# Steps the layer does without where the kernel lacks them: a merged request's note is then
# left to be replaced by the next request's at its address.
OPTIONAL_STEPS = ((("block_rq_merge", "on_block_rq_merge"),),)


def choose_tracepoints(has_tracepoint=first_tracepoint) -> tuple[list[tuple[str, str]], str | None]:
    """([(tracepoint, program)] for each step, None), or ([], why the kernel cannot give it)."""
    chosen = []
    for required, steps in ((True, STEPS), (False, OPTIONAL_STEPS)):
        for candidates in steps:
            found = has_tracepoint(*(f"block/{name}" for name, _ in candidates))
            if found is None and required:
                return [], f"no block tracepoint {' or '.join(name for name, _ in candidates)}"
            if found is not None:
                chosen.append(next(pair for pair in candidates if pair[0] == found.split("/")[1]))
    return chosen, None


class BlockLayer(RawTracepointLayer):
    """The block layer's tracepoints, chosen for this kernel (the syscall layer stays whole
    without them)."""

    name = ly.BLOCK

    def __init__(self) -> None:
        self.tracepoints, self.unavailable = choose_tracepoints()
