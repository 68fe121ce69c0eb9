"""bpf(2) wrappers: a program load the verifier gave up on because a signal was pending is
tried again; any other refusal is not."""

from __future__ import annotations

import errno

import pytest

from ioobserve.probes.kernel import bpf_syscall


def _failing(times: int, code: int):
    calls = []

    def fake(cmd, attr):
        calls.append(cmd)
        if len(calls) <= times:
            raise OSError(code, "no")
        return 42

    return fake, calls


def test_a_load_interrupted_by_signals_is_tried_again(monkeypatch):
    fake, calls = _failing(bpf_syscall.LOAD_ATTEMPTS - 1, errno.EAGAIN)
    monkeypatch.setattr(bpf_syscall, "bpf", fake)
    assert bpf_syscall.prog_load(2, bytes(16), b"p", b"GPL", 0) == 42
    assert calls == [bpf_syscall.BPF_PROG_LOAD] * bpf_syscall.LOAD_ATTEMPTS


def test_a_refused_load_fails_at_once_with_the_verifiers_reason(monkeypatch):
    fake, calls = _failing(100, errno.EACCES)
    monkeypatch.setattr(bpf_syscall, "bpf", fake)
    with pytest.raises(OSError) as refused:
        bpf_syscall.prog_load(2, bytes(16), b"p", b"GPL", 0)
    assert refused.value.errno == errno.EACCES
    assert len(calls) == 2  # once, then once more with the verifier's log
