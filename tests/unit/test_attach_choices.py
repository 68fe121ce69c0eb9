"""Pure logic of the per-kernel choices (probes/attach/, portable_cfg, tail calls): each layer's
way in from what a kernel's tracefs and BTF say, here with fixtures shaped like Debian's 6.1
and newer kernels; the loop rewrite older verifiers need; the prototype groups of fentry."""

from __future__ import annotations

import struct

import numpy as np

from ioobserve.probes.attach import block, io_uring, vfs
from ioobserve.probes.attach.syscall import SyscallEntry
from ioobserve.probes.kernel.features import lockdown_mode
from ioobserve.probes.kernel.program_kind import BPF_PROG_TYPE_TRACING, fentry_kind
from ioobserve.probes.load.portable_cfg import INSN, jump_closed_loops, refused_edges

FILE, POS = "struct file *", "long long int *"


class FakeBtf:
    """Tracepoint and function prototypes, as Btf reports them."""

    def __init__(self, tracepoints: dict[str, list[str]], functions: dict[str, list[str]] | None = None):
        self.tracepoints, self.functions = tracepoints, functions or {}

    def tracepoint_args(self, name: str) -> list[str] | None:
        return self.tracepoints.get(name)

    def function_args(self, name: str) -> list[str] | None:
        return self.functions.get(name)

    def named_ids(self, kind: str, names: list[str]) -> dict[str, int]:
        return {name: 100 + i for i, name in enumerate(sorted(self.functions)) if name in names}


def _has(*present: str):
    return lambda *names: next((name for name in names if name in present), None)


URING_61 = {"io_uring_submit_sqe": ["struct io_kiocb *", "_Bool"],
            "io_uring_complete": ["void *", "void *", "long long unsigned int", "int", "unsigned int",
                                  "long long unsigned int", "long long unsigned int"],
            "io_uring_create": ["int", "void *", "unsigned int", "unsigned int", "unsigned int"]}
URING_NEW = {"io_uring_submit_req": ["struct io_kiocb *"],
             "io_uring_complete": ["struct io_ring_ctx *", "void *", "struct io_uring_cqe *"],
             "io_uring_create": ["int", "void *", "unsigned int", "unsigned int", "unsigned int"]}


def test_io_uring_takes_6_1s_submit_tracepoint_and_the_newer_one():
    old = _has("io_uring/io_uring_complete", "io_uring/io_uring_submit_sqe", "io_uring/io_uring_create")
    chosen, why = io_uring.choose_tracepoints(FakeBtf(URING_61), old)
    assert why is None and dict(chosen)["io_uring_submit_sqe"] == "on_uring_submit"
    new = _has("io_uring/io_uring_complete", "io_uring/io_uring_submit_req", "io_uring/io_uring_create")
    chosen, why = io_uring.choose_tracepoints(FakeBtf(URING_NEW), new)
    assert why is None and [name for name, _ in chosen] == ["io_uring_complete", "io_uring_submit_req", "io_uring_create"]


def test_io_uring_is_unavailable_without_its_tracepoints_or_where_an_argument_moved():
    chosen, why = io_uring.choose_tracepoints(FakeBtf(URING_NEW), _has("io_uring/io_uring_submit_req"))
    assert chosen == [] and "io_uring_complete" in why
    moved = {**URING_NEW, "io_uring_submit_req": ["struct io_ring_ctx *", "struct io_kiocb *"]}
    every = _has("io_uring/io_uring_complete", "io_uring/io_uring_submit_req", "io_uring/io_uring_create")
    chosen, why = io_uring.choose_tracepoints(FakeBtf(moved), every)
    assert chosen == [] and "io_uring_submit_req's argument 0 is struct io_ring_ctx *" in why


def test_block_takes_the_bios_queueing_where_block_io_start_is_missing():
    chosen, why = block.choose_tracepoints(_has("block/block_rq_complete", "block/block_rq_issue", "block/block_bio_queue"))
    assert why is None and chosen[-1] == ("block_bio_queue", "on_block_bio_queue")
    chosen, why = block.choose_tracepoints(_has("block/block_rq_complete", "block/block_rq_issue",
                                                "block/block_io_start", "block/block_bio_queue"))
    assert chosen[-1] == ("block_io_start", "on_block_io_start")
    chosen, why = block.choose_tracepoints(_has("block/block_rq_complete", "block/block_rq_issue",
                                                "block/block_io_start", "block/block_rq_merge"))
    assert why is None and chosen[-2:] == [("block_io_start", "on_block_io_start"), ("block_rq_merge", "on_block_rq_merge")]
    assert block.choose_tracepoints(_has("block/block_rq_issue"))[1].startswith("no block tracepoint block_rq_complete")


def test_vfs_functions_are_probed_only_where_their_arguments_are_as_read():
    functions = {"vfs_read": [FILE, "char *", "long unsigned int", POS], "vfs_write": [FILE, "char *", "long unsigned int", POS],
                 "vfs_open": ["struct path *", FILE], "vfs_fsync_range": [FILE, "long long int", "long long int", "int"],
                 "kernel_read": [FILE, "void *", "long unsigned int", POS],
                 "do_splice": [FILE, "long long int", FILE, POS, "long unsigned int", "unsigned int"]}
    found, left_out = vfs.matching_functions(FakeBtf({}, functions))
    assert set(found) == {"vfs_read", "vfs_write", "vfs_open", "vfs_fsync_range", "kernel_read"}
    assert "not in this kernel's BTF" in left_out["vfs_copy_file_range"]
    assert left_out["do_splice"].startswith("its arguments are (struct file *, long long int,")
    assert set(vfs.matching_functions(None)[1]) == set(vfs.FUNCTIONS)


def test_the_vfs_layer_takes_fentry_then_kprobes_and_says_why(monkeypatch):
    functions = {name: [want or "int" for want in wanted] for name, wanted in vfs.FUNCTIONS.items()}
    btf = FakeBtf({}, functions)
    monkeypatch.setattr(vfs, "kprobes_available", lambda: True)
    monkeypatch.setattr(vfs, "refusal", lambda kind: "")
    layer = vfs.VfsLayer(btf, wanted="")
    assert layer.mechanism == "fentry" and not layer.left_out
    assert ("vfs_x_do_splice", fentry_kind(btf.named_ids("function", ["do_splice"])["do_splice"], True)) in layer.programs()
    monkeypatch.setattr(vfs, "refusal", lambda kind: "Operation not permitted")
    layer = vfs.VfsLayer(btf, wanted="")
    assert layer.mechanism == "kprobe" and "fentry refused: Operation not permitted" in layer.describe()
    assert (vfs.KPROBE_RETURN, vfs.KPROBE) in layer.programs()
    monkeypatch.setattr(vfs, "kprobes_available", lambda: False)
    layer = vfs.VfsLayer(btf, wanted="")
    assert layer.mechanism is None and "no kprobes" in layer.unavailable and layer.programs() == []
    assert "expected one of fentry, kprobe" in vfs.VfsLayer(btf, wanted="uprobe").unavailable


def test_fentry_prototype_groups_load_against_their_own_anchor():
    enter, exit_ = fentry_kind(10), fentry_kind(10, exit_=True)
    entry = SyscallEntry("fentry", enter, exit_, (("__x64_sys_read", 10, 10, 0), ("__x64_sys_io_submit", 20, 20, 1)),
                         ((10, 10), (30, 30)))
    assert entry.in_group(enter, 0) == enter
    assert entry.in_group(enter, 1).btf_id == 30 and entry.in_group(exit_, 1).attach_type == exit_.attach_type
    assert entry.group_of(entry.in_group(exit_, 1)) == 1 and entry.group_of(exit_) == 0
    assert entry.in_group(enter, 1).prog_type == BPF_PROG_TYPE_TRACING
    assert "2 prototypes" in entry.describe()


def _program(*insns: tuple[int, int, int, int]) -> bytes:
    return b"".join(struct.pack("<BBhi", *insn) for insn in insns)


# A loop entered at its test, as clang lays some out: older verifiers refuse the fall-through
# from the body's last instruction (3) into the test (4), which is on the walk's stack.
MOV_R1_0, MOV_R0_0, EXIT = (0xB7, 0x01, 0, 0), (0xB7, 0x00, 0, 0), (0x95, 0, 0, 0)
ROTATED_LOOP = _program(
    MOV_R1_0,                # 0: r1 = 0
    (0x05, 0, 2, 0),         # 1: goto 4 (the test)
    (0x07, 0x01, 0, 1),      # 2: r1 += 1      (the body)
    (0x07, 0x01, 0, 1),      # 3: r1 += 1      falls through into the test
    (0xA5, 0x01, -3, 10),    # 4: if r1 < 10 goto 2
    MOV_R0_0,                # 5: r0 = 0
    EXIT,                    # 6: exit
)


def test_a_loop_closed_by_a_fall_through_is_closed_by_a_jump():
    insns = np.frombuffer(ROTATED_LOOP, dtype=INSN)
    assert refused_edges(insns) == [(3, 4)]
    fixed = np.frombuffer(jump_closed_loops(ROTATED_LOOP), dtype=INSN)
    assert refused_edges(fixed) == [] and len(fixed) == len(insns) + 1
    assert tuple(fixed[4]) == (0x05, 0, 0, 0)  # the goto +0 after the body
    assert tuple(fixed[1])[2] == 3 and tuple(fixed[5])[2] == -4  # both jumps still reach the test and the body
    assert jump_closed_loops(fixed.tobytes()) == fixed.tobytes()  # a program without such loops is left alone


def test_lockdown_mode_reads_the_bracketed_choice(tmp_path):
    path = tmp_path / "lockdown"
    path.write_text("none [integrity] confidentiality\n")
    assert lockdown_mode(path) == "integrity"
    assert lockdown_mode(tmp_path / "absent") is None
