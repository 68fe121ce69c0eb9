"""The VFS layer (vfs.bpf.c, opt-in): the kernel's file operations below the syscalls, by
fentry/fexit where the kernel loads them (a trampoline: no trap), else kprobes/kretprobes.
Each function's arguments are checked against its BTF prototype before it is probed: a
function this kernel lacks, or whose arguments moved, is left out and named.
IOOBSERVE_VFS_PROBES=fentry|kprobe asks for one way (tests, benchmarks)."""

from __future__ import annotations

import os

from ioobserve.probes import layers as ly
from ioobserve.probes.attach import Attachments
from ioobserve.probes.build.compile import ProbeError
from ioobserve.probes.kernel.bpf_syscall import tracing_attach
from ioobserve.probes.kernel.btf import Btf, BtfError
from ioobserve.probes.kernel.features import kprobes_available
from ioobserve.probes.kernel.program_kind import KPROBE, ProgramKind, fentry_kind, refusal

ENV = "IOOBSERVE_VFS_PROBES"
MECHANISMS = ("fentry", "kprobe")
FILE = "struct file *"
POS = "long long int *"
# Each function and the argument types its programs read (vfs.bpf.c's <fn>_entry), in order.
FUNCTIONS = {
    "vfs_read": (FILE, None, None, POS),
    "vfs_write": (FILE, None, None, POS),
    "vfs_open": ("struct path *", FILE),
    "vfs_fsync_range": (FILE, None, None, None),
    "kernel_read": (FILE, None, None, POS),  # exec's reads of its binary and interpreter
    "vfs_copy_file_range": (FILE, None, FILE, None, None, None),
    "do_splice_direct": (FILE, POS, FILE, POS, None, None),  # sendfile's copy
    "do_splice": (FILE, POS, FILE, POS, None, None),
}
REQUIRED = ("vfs_read", "vfs_write", "vfs_open", "vfs_fsync_range")
KPROBE_RETURN = "vfs_k_return"


def matching_functions(btf: Btf | None) -> tuple[dict[str, int], dict[str, str]]:
    """({function: its BTF id} whose arguments are as the programs read them, {function: why
    it is left out})."""
    if btf is None:
        return {}, dict.fromkeys(FUNCTIONS, "no kernel BTF")
    found, left_out = {}, {}
    ids = btf.named_ids("function", list(FUNCTIONS))
    for function, wanted in FUNCTIONS.items():
        try:
            args = btf.function_args(function)
        except BtfError as exc:
            args, why = None, str(exc)
        else:
            why = "not in this kernel's BTF (inlined or renamed)"
        if args is not None:
            bad = len(args) != len(wanted) or any(want and got != want for want, got in zip(wanted, args))
            if not bad:
                found[function] = ids[function]
                continue
            why = f"its arguments are ({', '.join(args)}) here"
        left_out[function] = why
    return found, left_out


class VfsLayer:
    """The VFS functions this kernel has, probed by the cheapest way it allows."""

    name = ly.VFS

    def __init__(self, btf: Btf | None, wanted: str | None = None):
        wanted = os.environ.get(ENV, "") if wanted is None else wanted
        self.functions, self.left_out = matching_functions(btf)
        self.mechanism, self.unavailable = None, None
        missing = [function for function in REQUIRED if function not in self.functions]
        reasons = []
        if wanted and wanted not in MECHANISMS:
            self.unavailable = f"{ENV}={wanted}: expected one of {', '.join(MECHANISMS)}"
        elif missing:
            self.unavailable = f"{missing[0]}: {self.left_out[missing[0]]}"
        else:
            for mechanism in (wanted,) if wanted else MECHANISMS:
                why = self._refused(mechanism)
                if not why:
                    self.mechanism = mechanism
                    break
                reasons.append(why)
            else:
                self.unavailable = "; ".join(reasons)
        self.why = "; ".join(reasons)  # why the cheaper ways were not taken
        self._attached: Attachments | None = None

    def _refused(self, mechanism: str) -> str:
        if mechanism == "kprobe":
            return "" if kprobes_available() else "no kprobes (CONFIG_KPROBES not set)"
        refused = refusal(fentry_kind(self.functions["vfs_read"]))
        return f"fentry refused: {refused}" if refused else ""

    def programs(self) -> list[tuple[str, ProgramKind]]:
        """What attach() loads."""
        if self.mechanism == "fentry":
            return [(f"vfs_{kind}_{function}", fentry_kind(btf_id, exit_=kind == "x"))
                    for function, btf_id in self.functions.items() for kind in ("f", "x")]
        if self.mechanism == "kprobe":
            return [(f"vfs_k_{function}", KPROBE) for function in self.functions] + [(KPROBE_RETURN, KPROBE)]
        return []

    def describe(self) -> str:
        """How the layer is probed here, and what it leaves out."""
        how = {"fentry": "fentry/fexit", "kprobe": "kprobes/kretprobes"}.get(self.mechanism or "", "")
        what = f"{how} on {', '.join(self.functions)}"
        if self.why:
            what += f" ({self.why})"
        if self.left_out:
            what += "; left out: " + "; ".join(f"{function}: {why}" for function, why in self.left_out.items())
        return what

    def attach(self, probes) -> str:
        """Attach every function's entry and return; ProbeError if one does not attach."""
        if self.unavailable:
            raise ProbeError(f"the VFS layer is unavailable here: {self.unavailable}")
        attached = self._attached = Attachments(probes.bpf)
        try:
            for function, btf_id in self.functions.items():
                if self.mechanism == "fentry":  # the return first: an entry's record waits for it
                    attached.link(tracing_attach(probes.load_program(f"vfs_x_{function}", fentry_kind(btf_id, True))))
                    attached.link(tracing_attach(probes.load_program(f"vfs_f_{function}", fentry_kind(btf_id))))
                else:
                    attached.kprobe(function, KPROBE_RETURN, returns=True)
                    attached.kprobe(function, f"vfs_k_{function}")
        except Exception as exc:  # bcc raises bare Exceptions
            self.detach()
            raise ProbeError(f"the VFS layer could not attach to {function}: {exc}") from exc
        return self.describe()

    def detach(self) -> None:
        """Detach (safe to call twice)."""
        if self._attached is not None:
            self._attached.detach()
