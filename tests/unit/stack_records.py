"""The Python layer's auxiliary records as the kernel writes them (a code object's, a chain's),
made by hand for the stacks' unit tests and the compiled core's fuzzing."""

from __future__ import annotations

import numpy as np

from ioobserve.data import events as ev

PID, CODE = 7, 0x1000  # the process the records are of, and its first code object


def code_record(code: int, name: str, pid: int = PID, file: str = "/job/data.py", table: bytes = b"",
                first: int = 10, version: tuple[int, int] = (3, 11)) -> bytes:
    """A code object's record, sent up to its line table's end."""
    record = np.zeros(1, dtype=ev.PY_CODE_RECORD)
    record["kind"], record["code"], record["pid"], record["firstlineno"] = ev.AUX_PY_CODE, code, pid, first
    record["name_len"], record["file_len"], record["name_kind"], record["file_kind"] = len(name), len(file), 1, 1
    record["name"], record["file"] = name.encode("latin-1"), file.encode("latin-1")
    record["table_len"] = record["table_size"] = len(table)
    record["version"] = version[0] << 8 | version[1]
    raw = bytearray(record.tobytes())
    at = ev.PY_CODE_RECORD.fields["table"][1]
    raw[at : at + len(table)] = table
    return bytes(raw[: at + len(table)])


def chain_record(chain: int, codes: list[int], pid: int = PID, truncated: bool = False, instrs: list[int] | None = None) -> bytes:
    """A chain's record: frames f<code> innermost first, sent up to its last frame."""
    record = np.zeros(1, dtype=ev.PY_CHAIN_RECORD)
    record["kind"], record["chain"], record["pid"], record["depth"] = ev.AUX_PY_CHAIN, chain, pid, len(codes)
    record["flags"] = ev.PY_TRUNCATED if truncated else 0
    frames = record["frames"][0]
    frames["code"][: len(codes)] = [CODE + code for code in codes]
    frames["instance"][: len(codes)] = chain  # another call each time: not part of the stack
    frames["instr"][: len(codes)] = instrs or [0] * len(codes)
    record["frames"][0] = frames
    return record.tobytes()[: ev.PY_CHAIN_RECORD.fields["frames"][1] + len(codes) * ev.PY_FRAME.itemsize]
