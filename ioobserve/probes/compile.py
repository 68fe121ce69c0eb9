"""Compiling BPF C with bcc against the chosen headers, with clang's noise kept aside."""

from __future__ import annotations

import contextlib
import os
import tempfile

from ioobserve.probes.headers import Headers, find_headers


class ProbeError(Exception):
    """The probes could not be compiled, loaded or attached."""


@contextlib.contextmanager
def _captured_stderr():
    """Keep clang's warnings about mismatched headers off the terminal; yields a function
    returning what was written, for error messages."""
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+") as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield lambda: (capture.seek(0), capture.read().splitlines())[1]
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def compile_bpf(*, src_file: str | None = None, text: str | None = None, cflags: list[str] | None = None,
                headers: Headers | None = None):
    """A bcc BPF object; raises ProbeError with clang's first errors."""
    headers = headers or find_headers()
    os.environ.update(headers.environment())
    from bcc import BPF  # deferred: only probes import bcc

    with _captured_stderr() as diagnostics:
        try:
            if src_file:
                return BPF(src_file=src_file.encode(), cflags=cflags or [])
            return BPF(text=(text or "").encode(), cflags=cflags or [])
        except Exception as exc:  # bcc raises bare Exception on compile/load errors
            errors = [line for line in diagnostics() if "error" in line.lower()]
            raise ProbeError("; ".join(errors[:3]) or str(exc)) from exc
