"""One recording from start to clean stop: probes, optional command, collector, sinks."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field

from ioobserve.collect.accounting import AccountingError, ExitAccounting, TaskstatsLayout
from ioobserve.collect.collector import Collector
from ioobserve.collect.options import RecordingOptions
from ioobserve.collect.priority import restore_priority
from ioobserve.context.cgroups import CgroupTable
from ioobserve.plumbing.deadline import StopDeadline
from ioobserve.probes.attach.exec_gate import ExecGate
from ioobserve.probes.attach.python import PythonOptions
from ioobserve.probes.attach.syscall import MechanismUnavailable
from ioobserve.probes.attach.syscall import choose as choose_syscall_entry
from ioobserve.probes.build.compile import HostNotReady, ProbeError
from ioobserve.probes.build.headers import HeadersMissing, find_headers
from ioobserve.probes.kernel.bpf_syscall import enable_run_stats
from ioobserve.probes.kernel.btf import Btf, BtfError
from ioobserve.probes.kernel.features import tracefs_dir
from ioobserve.probes.kernel.kernel_layout import layout_from_btf
from ioobserve.probes.layers import DEFAULT as DEFAULT_LAYERS
from ioobserve.probes.load.loader import Probes, ProbeSizes
from ioobserve.probes.maps.filters import KernelFilters
from ioobserve.sinks.base import Sinks


@dataclass
class RecordingResult:
    """How a recording ended."""

    duration_s: float
    command_status: int | None = None  # exit code (or -signal) of `-- CMD`, if one ran
    stopped_by: str = "end"
    lost: dict[str, int] = field(default_factory=dict)
    accounting_note: str | None = None  # why the kernel's accounting could not be set beside the trace
    layers: dict[str, str] = field(default_factory=dict)  # layer -> how it was probed
    dropped_at_stop: int = 0  # events captured but not handed on: the stop deadline passed
    stop_overran: bool = False  # the stop deadline passed (or a second signal hurried it)
    frames_not_walked: dict[int, str] = field(default_factory=dict)  # pid -> why its Python frames were not read
    exec_gate: str | None = None  # what the exec gate did, or why it was off (None: not asked for)


class GatedCommand:
    """A child forked now that execs only when released, so its pid can be traced first."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None, nice: int | None = None):
        read_end, self._go = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # child: wait for the go byte, then become the command
            os.close(self._go)
            if nice is not None:
                restore_priority(nice)  # the command runs as it would without us
            os.read(read_end, 1)
            try:
                os.execvpe(argv[0], argv, os.environ if env is None else env)
            except OSError as exc:
                print(f"ioobserve: error: cannot run {argv[0]}: {exc.strerror}", file=sys.stderr)
            os._exit(127)
        os.close(read_end)

    def release(self) -> None:
        """Let the command exec."""
        os.write(self._go, b"x")
        os.close(self._go)
        self._go = -1

    def abort(self) -> None:
        """Kill a command that was never released (recording failed to start)."""
        if self._go >= 0:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            os.close(self._go)
            self._go = -1

    def poll(self) -> int | None:
        """Exit code (negative signal number) if the command has ended."""
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            return None
        return os.waitstatus_to_exitcode(status)


def kernel_btf() -> Btf:
    """The running kernel's BTF; HostNotReady, saying what is needed, where it has none."""
    try:
        return Btf.load()
    except BtfError as exc:
        raise HostNotReady(f"kernel BTF: {exc}; ioobserve needs a kernel built with CONFIG_DEBUG_INFO_BTF=y"
                           " (and /sys mounted, in a container)") from None


def load_probes(sizes: ProbeSizes = ProbeSizes(), btf: Btf | None = None,
                layers: frozenset[str] = DEFAULT_LAYERS, python: PythonOptions = PythonOptions()) -> Probes:
    """Compile the probes of these layers for the running kernel (struct layouts from BTF)."""
    tracefs_dir()  # mounts tracefs if needed
    btf = btf or kernel_btf()
    try:
        headers = find_headers()
    except HeadersMissing as exc:
        raise HostNotReady(str(exc)) from None
    try:
        entry = choose_syscall_entry(btf)
    except MechanismUnavailable as exc:
        raise ProbeError(str(exc)) from exc
    return Probes(layout_from_btf(btf), headers, entry, sizes, layers, python, btf)


def exit_accounting(btf: Btf) -> tuple[ExitAccounting | None, str | None]:
    """A taskstats listener for the kernel's accounting of exiting tasks, or None and why not."""
    try:
        return ExitAccounting(TaskstatsLayout.from_btf(btf)), None
    except AccountingError as exc:
        return None, str(exc)


@dataclass
class _Running:
    """What a recording started, for its stop to end."""

    collector: Collector | None = None
    gate: ExecGate | None = None  # the exec gate, while it holds execs
    gate_off: str | None = None  # why the gate did not start
    stats: int | None = None  # the fd that keeps the kernel's BPF stats on
    lost: dict[str, int] = field(default_factory=dict)


class Recording:
    """Runs probes and collector until the duration passes, the command ends, or a signal."""

    def __init__(self, probes: Probes, filters: KernelFilters, sinks: Sinks,
                 options: RecordingOptions = RecordingOptions()):
        """`probes`: compiled for this recording (load_probes); `sinks`: every one, given once."""
        self.probes = probes
        self.filters = filters
        self.sinks = sinks
        self.options = options
        self.deadline = StopDeadline(options.stop_timeout)
        self.cgroups = CgroupTable()  # the enrichment's, learning each cgroup made; serve's metrics share it
        self.accounting, self.accounting_note = exit_accounting(probes.btf)
        self._stop = threading.Event()
        self._stopped_by = "end"

    def request_stop(self, reason: str) -> None:
        """Ask the recording to end (from a signal handler or another thread)."""
        self._stopped_by = reason
        self._stop.set()

    def hurry(self) -> None:
        """End the stop now: what is not written yet is counted as lost (a second Ctrl-C)."""
        self.deadline.hurry()
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """Whether a stop was asked for."""
        return self._stop.is_set()

    def run(self, duration: float | None = None, command: list[str] | None = None,
            command_env: dict[str, str] | None = None, trace_command: bool = True, on_start=None) -> RecordingResult:
        """Record; returns after every probe is detached and the sinks are closed. With
        trace_command, only the command's process tree is traced (plus any other filters)."""
        child = GatedCommand(command, command_env, self.options.original_nice) if command else None
        if child and trace_command:
            self.filters.pids.add(child.pid)
            self.filters.filter_pid = True
        running = self._attach(child)
        started = time.monotonic()
        status = None
        try:
            running.collector.start()
            # Before saying it records, and before the command starts: the library copies
            # that running processes map are probed (a test that ran its workload at once lost
            # h5py's calls under load; a command that enters a running container's root uses
            # that root's libc from its first call). A few ms for a few hundred processes.
            self.probes.scan_running()
            if running.gate is not None:
                running.gate_off = running.gate.start()
                if running.gate_off is not None:
                    running.gate = self.probes.gate = None
            if on_start:
                on_start()
            if child:
                child.release()
            status = self._wait(child, started + duration if duration is not None else None)
        finally:
            status = self._detach(running, child, status)
        gate = running.gate
        return RecordingResult(time.monotonic() - started, status, self._stopped_by, running.lost, self.accounting_note,
                               self.probes.layer_report(), running.collector.dropped_at_stop,
                               running.collector.abandoned or self.deadline.passed(),
                               dict(self.probes.python.refused) if self.probes.python is not None else {},
                               gate.describe() if gate is not None else running.gate_off and f"off: {running.gate_off}")

    def _attach(self, child: GatedCommand | None) -> _Running:
        """Configure and attach the probes, with the collector made and the exec gate's keeper
        spawned; on failure everything started is undone and the command killed unreleased."""
        running = _Running()
        try:
            self.probes.configure(self.filters)
            self._start_accounting()
            running.collector = Collector(self.probes, self.sinks, path_prefixes=self.filters.prefixes,
                                          backlog=self.options.backlog, capture_nice=self.options.original_nice,
                                          accounting=self.accounting, cgroups=self.cgroups)
            if child:
                running.collector.account_from_start(child.pid)
            running.stats = _run_stats_on() if self.options.probe_stats else None
            if self.options.exec_gate and self.probes.has_uprobe_layers():
                running.gate = self.probes.gate = ExecGate(self.probes.prepare_exec, nice=self.options.original_nice,
                                                           exclude=self.probes.tables.exclude_helper)
                running.gate.spawn()  # before the probes attach: nothing of the keeper's start is traced
            self.probes.attach()
        except BaseException:
            if running.gate is not None:
                running.gate.stop()
            if child:
                child.abort()
            if running.stats is not None:
                os.close(running.stats)
            if self.accounting is not None:
                self.accounting.stop()
            self.probes.close()
            raise
        return running

    def _wait(self, child: GatedCommand | None, deadline: float | None) -> int | None:
        """Until a stop is asked for, the command ends or the duration passes; the command's status."""
        while not self._stop.is_set():
            if child and (status := child.poll()) is not None:
                self._stopped_by = "command exited"
                return status
            if deadline is not None and time.monotonic() >= deadline:
                self._stopped_by = "duration"
                return None
            self._stop.wait(0.05)
        return None

    def _detach(self, running: _Running, child: GatedCommand | None, status: int | None) -> int | None:
        """End the recording however it ended: the gate opened, the probes detached while what
        is queued is written out by the deadline, the sinks closed; the command's status."""
        self._stop.set()  # however it ends: a signal now hurries the stop
        if running.gate is not None:
            running.gate.stop()  # before no probe may attach: nothing is held for probes that will not come
        self.probes.stop_selecting()
        # Detaching waits on the kernel (~0.4 s here, most of it for the classic tracepoints
        # and the library uprobes): done beside the drain, nothing new entering the rings.
        detaching = threading.Thread(target=self.probes.detach, name="ioobserve-detach", daemon=True)
        detaching.start()
        self.deadline.start()
        try:
            running.collector.stop(self.deadline)
        finally:
            running.lost = running.collector.lost_total()
            detaching.join()
            if running.stats is not None:
                os.close(running.stats)
            self.probes.close()
            if child and status is None:
                status = _reap(child)
        return status

    def _start_accounting(self) -> None:
        if self.accounting is None:
            return
        try:
            self.accounting.start()
        except AccountingError as exc:
            self.accounting, self.accounting_note = None, str(exc)


def _run_stats_on() -> int | None:
    """Turn the kernel's BPF run-time stats on (until the returned fd is closed); None where
    the kernel has no such switch (before 5.8), the stats then count only if the sysctl is on."""
    try:
        return enable_run_stats()
    except OSError:
        return None


def _reap(child: GatedCommand) -> int | None:
    """Wait briefly for a command still running at stop; it keeps running if it will not end."""
    for _ in range(20):
        status = child.poll()
        if status is not None:
            return status
        time.sleep(0.05)
    return None


def install_stop_signals(recording: Recording) -> None:
    """SIGINT and SIGTERM end the recording cleanly; a second one ends the stop at once.
    SIGTSTP (Ctrl-Z) opens the exec gate before the recorder stops, and closes it again once
    continued: a stopped recorder must not hold the node's execs."""
    def handle(signum: int, _frame) -> None:
        if recording.stopping:
            recording.hurry()
        else:
            recording.request_stop(signal.Signals(signum).name)

    def suspend(_signum: int, _frame) -> None:
        gate = recording.probes.gate
        if gate is not None:
            gate.stop()
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # stopped here until SIGCONT
        signal.signal(signal.SIGTSTP, suspend)
        if gate is not None and not recording.stopping:
            gate.start()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, handle)
    signal.signal(signal.SIGTSTP, suspend)
