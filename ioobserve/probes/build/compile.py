"""Compiling BPF C with bcc against the chosen headers, with clang's noise kept aside."""

from __future__ import annotations

import contextlib
import os
import tempfile

from ioobserve.probes.build.headers import Headers, find_headers


class ProbeError(Exception):
    """The probes could not be compiled, loaded or attached."""


class HostNotReady(ProbeError):
    """The host lacks what the probes are built from (kernel headers, BTF): the message names
    the set-up step or the mount that gives it."""


@contextlib.contextmanager
def _captured_stderr():
    """Keep clang's warnings about mismatched headers off the terminal; yields a function
    returning what was written, for error messages."""
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+") as capture:
        release = _watch_for_exit(capture.fileno(), saved)
        os.dup2(capture.fileno(), 2)
        try:
            yield lambda: (capture.seek(0), capture.read().splitlines())[1]
        finally:
            os.dup2(saved, 2)
            release()
            os.close(saved)


def _first_errors(lines: list[str]) -> str:
    return "; ".join([line for line in lines if "error" in line.lower()][:3])


def _watch_for_exit(capture_fd: int, stderr_fd: int):
    """Fork a watcher that prints the compiler's errors should this process end inside the
    compiler: LLVM exit(1)s on some errors (the BPF stack limit) and the captured message
    would be lost with it. Returns the function that dismisses the watcher."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the watcher: only os calls, then _exit
        try:
            os.close(write_end)
            if not os.read(read_end, 1):  # EOF without a byte: the compiling process is gone
                os.lseek(capture_fd, 0, os.SEEK_SET)
                chunks = []
                while chunk := os.read(capture_fd, 1 << 16):
                    chunks.append(chunk)
                errors = _first_errors(b"".join(chunks).decode(errors="replace").splitlines())
                os.write(stderr_fd, f"ioobserve: error: the BPF compiler exited: {errors or 'no message'}\n".encode())
        finally:
            os._exit(0)
    os.close(read_end)

    def release() -> None:
        os.write(write_end, b".")
        os.close(write_end)
        os.waitpid(pid, 0)

    return release


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
            raise ProbeError(_first_errors(diagnostics()) or str(exc)) from exc
