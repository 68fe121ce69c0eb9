"""Make a program's loops acceptable to older verifiers, whatever block layout clang chose.

The verifier's first pass (check_cfg) walks the program depth first. Kernels with bounded
loops but before the rework of that pass (5.3 up to at least 6.1, so RHEL 8/9, Ubuntu 22.04,
SLES 15 and Debian 12) accept a back-edge only when it is a jump: a loop that clang closes by
falling through an ordinary instruction or a call into an instruction already on the walk's
stack is refused ("back-edge from insn N to N+1"). Putting a `goto +0` on such an edge makes
it a jump; it costs one instruction per loop and every kernel runs the same code.
"""

from __future__ import annotations

import numpy as np

INSN = np.dtype([("code", "u1"), ("regs", "u1"), ("off", "<i2"), ("imm", "<i4")])
BPF_JMP, BPF_JMP32 = 0x05, 0x06
OP_JA, OP_CALL, OP_EXIT = 0x00, 0x80, 0x90
BPF_PSEUDO_CALL, BPF_PSEUDO_FUNC = 1, 4
LD_IMM64 = 0x18
GOTO_NEXT = (BPF_JMP | OP_JA, 0, 0, 0)
MAX_ROUNDS = 64


def _successors(insns: np.ndarray, t: int) -> list[tuple[int, bool]]:
    """(next instruction, whether check_cfg lets it close a loop) for each edge out of t, in
    the order check_cfg takes them."""
    code = int(insns["code"][t])
    if code & 0x07 not in (BPF_JMP, BPF_JMP32):
        return [(t + 1, False)]  # both halves of a 64-bit load too: the kernel walks each
    op = code & 0xF0
    if op == OP_EXIT:
        return []
    if op == OP_CALL:
        edges = [(t + 1, False)]
        if int(insns["regs"][t]) >> 4 == BPF_PSEUDO_CALL:
            edges.append((t + int(insns["imm"][t]) + 1, False))
        return edges
    if op == OP_JA:
        return [(t + int(insns["off"][t]) + 1, True)]
    return [(t + 1, True), (t + int(insns["off"][t]) + 1, True)]


def refused_edges(insns: np.ndarray) -> list[tuple[int, int]]:
    """The (from, to) edges an older check_cfg refuses as back-edges, walking as it does."""
    count = len(insns)
    on_stack = np.zeros(count, dtype=bool)
    done = np.zeros(count, dtype=bool)
    next_edge = np.zeros(count, dtype=np.int32)
    refused = []
    stack = [0]
    on_stack[0] = True
    while stack:
        t = stack[-1]
        edges = _successors(insns, t)
        pushed = False
        while next_edge[t] < len(edges):
            w, loop_ok = edges[next_edge[t]]
            next_edge[t] += 1
            if not 0 <= w < count:
                raise ValueError(f"instruction {t} jumps out of the program (to {w})")
            if not on_stack[w] and not done[w]:
                on_stack[w] = True
                stack.append(w)
                pushed = True
                break
            if on_stack[w] and not loop_ok:
                refused.append((t, w))
        if not pushed:
            on_stack[t] = False
            done[t] = True
            stack.pop()
    return refused


def _insert_gotos(insns: np.ndarray, before: list[int]) -> np.ndarray:
    """The program with a `goto +0` inserted before each of these instructions, reached only
    by falling through; every jump, call and function reference is moved with its target."""
    before = sorted(set(before))
    count = len(insns)
    shift = np.zeros(count + 1, dtype=np.int64)
    np.add.at(shift, np.array(before), 1)
    new_index = np.arange(count + 1) + np.cumsum(shift)  # an old instruction's place after the insertions
    out = np.zeros(count + len(before), dtype=INSN)
    out[new_index[:count]] = insns
    for b in before:
        out[new_index[b] - 1] = GOTO_NEXT
    for old in range(count):
        code, regs = int(insns["code"][old]), int(insns["regs"][old])
        new = int(new_index[old])
        is_jump = code & 0x07 in (BPF_JMP, BPF_JMP32)
        op = code & 0xF0
        if is_jump and op not in (OP_CALL, OP_EXIT):
            target = old + int(insns["off"][old]) + 1
            offset = int(new_index[target]) - new - 1
            if not -32768 <= offset < 32768:
                raise ValueError(f"a jump at instruction {old} would go out of range")
            out["off"][new] = offset
        elif (is_jump and op == OP_CALL and regs >> 4 == BPF_PSEUDO_CALL) or (code == LD_IMM64 and regs >> 4 == BPF_PSEUDO_FUNC):
            target = old + int(insns["imm"][old]) + 1
            out["imm"][new] = int(new_index[target]) - new - 1
    return out


def jump_closed_loops(code: bytes) -> bytes:
    """The program with every loop closed by a jump (unchanged if it already was)."""
    insns = np.frombuffer(code, dtype=INSN).copy()
    for _ in range(MAX_ROUNDS):
        refused = refused_edges(insns)
        if not refused:
            return insns.tobytes()
        if any(to != at + 1 for at, to in refused):
            raise ValueError("the program calls itself (a refused back-edge that is no fall-through)")
        insns = _insert_gotos(insns, [to for _, to in refused])
    raise ValueError("the program's loops could not all be closed by jumps")
