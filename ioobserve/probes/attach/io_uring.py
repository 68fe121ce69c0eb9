"""The IO_URING layer (io_uring.bpf.c): each request from its submission to its completion,
by raw tracepoints. Which tracepoints, and where their request argument is, come from the
kernel's tracefs and BTF: 6.1 submits by io_uring_submit_sqe(req, force_nonblock), newer
kernels by io_uring_submit_req(req); io_uring_complete's request is its second argument on
both (a void * on 6.1). A kernel without them still has io_uring_enter in the syscall layer."""

from __future__ import annotations

from pathlib import Path

from ioobserve.probes import layers as ly
from ioobserve.probes.attach import RawTracepointLayer
from ioobserve.probes.kernel.btf import Btf, BtfError
from ioobserve.probes.kernel.features import first_tracepoint
from ioobserve.probes.kernel.kernel_layout import KernelLayout, uring_layout_ok

REQUEST = "struct io_kiocb *"
# (candidate tracepoints, the argument index the probe reads the request or ring from, the
# C types that argument may have there, program); completion first, so that no request is
# submitted unseen
TRACEPOINTS = (
    (("io_uring_complete",), 1, (REQUEST, "void *"), "on_uring_complete"),
    (("io_uring_submit_req", "io_uring_submit_sqe"), 0, (REQUEST,), "on_uring_submit"),
    (("io_uring_create",), 1, ("void *", "struct io_ring_ctx *"), "on_uring_create"),
)
URING_DISABLED = Path("/proc/sys/kernel/io_uring_disabled")


def choose_tracepoints(btf: Btf | None, has_tracepoint=first_tracepoint) -> tuple[list[tuple[str, str]], str | None]:
    """([(tracepoint, program)], None), or ([], why this kernel cannot give the layer)."""
    chosen = []
    for names, index, types, program in TRACEPOINTS:
        found = has_tracepoint(*(f"io_uring/{name}" for name in names))
        if found is None:
            return [], (f"no io_uring tracepoint {' or '.join(names)}: a kernel before 5.5, or built without "
                        "io_uring")
        name = found.split("/")[1]
        try:
            args = btf.tracepoint_args(name) if btf is not None else None
        except BtfError as exc:
            return [], str(exc)
        if args is None or len(args) <= index or args[index] not in types:
            got = args[index] if args and len(args) > index else "nothing"
            return [], f"{name}'s argument {index} is {got} in this kernel's BTF, not {' or '.join(types)}"
        chosen.append((name, program))
    return chosen, None


class UringLayer(RawTracepointLayer):
    """The IO_URING layer's tracepoints, chosen for this kernel."""

    name = ly.IO_URING

    def __init__(self, btf: Btf | None, layout: KernelLayout):
        self.tracepoints, self.unavailable = choose_tracepoints(btf)
        if self.unavailable is None and not uring_layout_ok(layout):
            self.tracepoints, self.unavailable = [], ("BTF lacks the io_uring request fields the probes read "
                                                      "(io_kiocb, io_rw, io_sync)")

    def describe(self) -> str:
        """How the layer is probed here (the doctor's line)."""
        what = super().describe()
        try:
            if URING_DISABLED.read_text().strip() == "2":
                what += " (kernel.io_uring_disabled=2: no process can use io_uring here)"
        except OSError:
            pass
        return what
