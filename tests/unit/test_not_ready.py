"""What stops record, top and serve before any probe loads, in one line each: a missing
capability (named, and how to give it, on the host or in a container) and kernel lockdown."""

from __future__ import annotations

from ioobserve.probes import capabilities as c

ALL = (1 << c.CAP_SYS_ADMIN) | (1 << c.CAP_PERFMON) | (1 << c.CAP_BPF)


def _host(monkeypatch, caps: int, lockdown: str | None = None) -> None:
    monkeypatch.setattr(c, "effective_caps", lambda: caps)
    monkeypatch.setattr(c, "lockdown_mode", lambda: lockdown)


def test_a_ready_host_says_nothing(monkeypatch):
    _host(monkeypatch, ALL, "integrity")
    assert c.not_ready("recording") is None


def test_a_missing_capability_is_named_with_the_way_to_give_it(monkeypatch):
    _host(monkeypatch, ALL & ~(1 << c.CAP_PERFMON))
    assert c.not_ready("recording") == ("recording needs privileges: missing CAP_PERFMON: run as root (sudo ioobserve ...); "
                                        "in a container, add the capabilities (securityContext.capabilities.add) or run "
                                        "it privileged")
    _host(monkeypatch, 1 << c.CAP_BPF)
    assert c.not_ready("serve").startswith("serve needs privileges: missing CAP_PERFMON, CAP_SYS_ADMIN: ")


def test_confidentiality_lockdown_is_told_in_one_line(monkeypatch):
    _host(monkeypatch, ALL, "confidentiality")
    problem = c.not_ready("serve")
    assert problem.startswith("serve cannot run under kernel lockdown: confidentiality:") and "\n" not in problem
    assert "lockdown=integrity" in problem


def test_a_recorder_without_cap_sys_ptrace_is_warned_of_what_it_misses(monkeypatch):
    _host(monkeypatch, ALL | (1 << c.CAP_SYS_PTRACE))
    assert c.capability_warnings() == []
    _host(monkeypatch, ALL)  # enough to record: the syscall layer's counts are exact (tests/container)
    [warning] = c.capability_warnings()
    assert warning.startswith("without CAP_SYS_PTRACE, other users' processes get no Python stacks")
