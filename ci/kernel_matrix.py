#!/usr/bin/env python3
"""The kernel matrix: boot each kernel of ci/kernels.toml under qemu, with this machine's root
file system, record the matrix's kernel tests (pytest -m matrix) inside it, and check what it
recorded here.

    ci/kernel_matrix.py                      every kernel of the list
    ci/kernel_matrix.py --kernel debian12-6.1 -- -k ground_truth   one kernel, pytest arguments

Each test runs in two halves (tests/kernel/kernel_side.py): in the guest only its kernel side
(probes loaded, workloads run, recordings made), whose facts and traces land in the guest's
share; then, on this machine at native speed, the same test's checks read them (Polars, the
analysis), once the guest is done. Emulation (this machine's /dev/kvm runs no guest) makes
every instruction in a guest cost 10-50 times its native time, so the guest does only what
depends on its kernel.

The probes' compile (about 3 minutes of clang under emulation) is done on this machine: the
guest's ioobserve sends it here through a spool directory (ioobserve.probes.build.compile_spool),
with the guest's own BTF offsets and tracepoint formats in its flags. A guest that fails,
hangs, is silent too long or reports nothing fails the run, with its last lines printed; so
does a check that fails here.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import shlex
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HERE = REPO / "ci" / "kernels"
CACHE = Path(os.environ.get("IOOBSERVE_MATRIX_CACHE", "/var/cache/ioobserve/kernels"))
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
# Modules the initramfs loads (with what they need) to mount the root over 9p with an overlay.
INITRAMFS_MODULES = ("virtio_pci", "9pnet_virtio", "9p", "overlay")
GUEST_MEMORY = os.environ.get("IOOBSERVE_MATRIX_MEMORY", "8G")
SCRATCH_DISK = "4G"  # the guest's /var/tmp: ext4 on a virtio disk (block layer, O_DIRECT)
# Side by side, each guest took 36-39 min here with a loaded suite beside them; CI allows 90 in all.
GUEST_TIMEOUT_S = float(os.environ.get("IOOBSERVE_MATRIX_TIMEOUT", 55 * 60))
SILENCE_S = 15 * 60  # no console output for this long: the guest hangs
COMPILE_TIMEOUT_S = 900
TAIL_LINES = 40
# pytest's lines that name a failed test or give the count ("FAILED tests/...", "=== 1 failed, ...")
# (the guest's -v and the checks' -q: the count with or without its rule of "=")
OUTCOME = re.compile(r"^(FAILED|ERROR) |^(=+ )?[0-9]+ (passed|failed|error|errors|skipped|deselected)\b.* in [0-9.]+s")
MAX_OUTCOMES = 30
# Under emulation the guest's vCPUs take turns on one host thread. With qemu 7.2's multi-threaded
# TCG a 6.12 guest once died of an int3 oops in the middle of a patched fentry call site
# (RIP __x64_sys_newfstatat+0x5, as a trampoline was attached or detached): cross-modifying
# code, which text_poke_bp relies on, is where multi-threaded TCG is weakest. One thread keeps
# two vCPUs (per-CPU maps, concurrent workers) at some cost in time.
TCG_THREADING = os.environ.get("IOOBSERVE_MATRIX_TCG_THREAD", "single")
DEFAULT_TESTS = ["-m", "matrix", "tests/kernel"]
PYTEST = [str(VENV_PYTHON), "-m", "pytest", "-ra", "-p", "no:cacheprovider", "--color=no"]
# tests/kernel/kernel_side.py's names for the two halves
PHASE, RECORDINGS = "IOOBSERVE_MATRIX_PHASE", "IOOBSERVE_MATRIX_RECORDINGS"
CHECK_TIMEOUT_S = 20 * 60


@dataclass(frozen=True)
class Kernel:
    """One kernel of the list, unpacked where it can boot."""

    name: str
    release: str  # uname -r
    root: Path  # the unpacked package

    @property
    def vmlinuz(self) -> Path:
        return self.root / "boot" / f"vmlinuz-{self.release}"

    @property
    def modules(self) -> Path:
        return self.root / "lib" / "modules" / self.release

    @property
    def initramfs(self) -> Path:
        return self.root / "initramfs.cpio"


def log(message: str) -> None:
    """One line of the matrix's own, on stderr."""
    print(f"kernel-matrix: {message}", file=sys.stderr, flush=True)


def declared() -> list[dict]:
    """The kernels of ci/kernels.toml."""
    with open(HERE / "kernels.toml", "rb") as source:
        return tomllib.load(source)["kernel"]


def _apt(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["apt-cache" if args[0] in ("show", "pkgnames", "policy") else "apt-get", *args],
                          cwd=cwd, check=True, capture_output=True, text=True).stdout


def _available(package: str, version: str) -> bool:
    return subprocess.run(["apt-cache", "show", f"{package}={version}"], capture_output=True).returncode == 0


def _newest_of_series(series: str) -> tuple[str, str]:
    """(package, version) of the newest package whose name matches the series' pattern."""
    names = [name for name in _apt("pkgnames", "linux-image-").split() if re.match(series, name)]
    if not names:
        raise SystemExit(f"kernel-matrix: no package of the series {series} in the archive (apt-get update?)")
    key = lambda name: [int(part) if part.isdigit() else part for part in re.split(r"[.+~-]", name)]
    package = max(names, key=key)
    version = re.search(r"^Version: (.+)$", _apt("show", package), re.M).group(1)
    return package, version


def prepare(entry: dict) -> Kernel:
    """Download and unpack the kernel package (once), index its modules, build its initramfs."""
    package, version = entry["package"], entry["version"]
    release = package.removeprefix("linux-image-")
    root = CACHE / f"{package}_{version}"
    if not (root / ".ready").exists():
        if not _available(package, version):
            subprocess.run(["apt-get", "update", "-qq"], check=True)  # a machine whose package lists are stale
        if not _available(package, version):
            pinned = f"{package}={version}"
            package, version = _newest_of_series(entry["series"])
            release = package.removeprefix("linux-image-")
            root = CACHE / f"{package}_{version}"
            log(f"{entry['name']}: {pinned} is no longer in the archive; using {package}={version}")
    kernel = Kernel(entry["name"], release, root)
    if (root / ".ready").exists():
        return kernel
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as download:
        log(f"{kernel.name}: downloading {package}={version}")
        _apt("download", f"{package}={version}", cwd=Path(download))
        deb = next(Path(download).glob("*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    subprocess.run(["depmod", "-b", str(root), release], check=True)
    _build_initramfs(kernel)
    (root / ".ready").touch()
    return kernel


def _module_files(kernel: Kernel) -> list[Path]:
    """The initramfs's modules, each after those it needs (built-in ones are left out)."""
    files: list[Path] = []
    for module in INITRAMFS_MODULES:
        shown = subprocess.run(["modprobe", "-d", str(kernel.root), "-S", kernel.release, "--show-depends", module],
                               check=True, capture_output=True, text=True).stdout
        for line in shown.splitlines():
            if line.startswith("insmod "):
                path = Path(line.split()[1])
                if path not in files:
                    files.append(path)
    return files


def _build_initramfs(kernel: Kernel) -> None:
    """A cpio with busybox, the init script and the modules to mount the root (decompressed:
    busybox's insmod reads plain .ko files)."""
    with tempfile.TemporaryDirectory() as staging:
        tree = Path(staging)
        for sub in ("bin", "modules", "proc", "sys", "dev"):
            (tree / sub).mkdir()
        shutil.copy2("/bin/busybox", tree / "bin" / "busybox")
        shutil.copy2(HERE / "initramfs-init", tree / "init")
        (tree / "init").chmod(0o755)
        order = []
        for path in _module_files(kernel):
            name = path.name.removesuffix(".xz")
            if path.suffix == ".xz":
                with open(tree / "modules" / name, "wb") as out:
                    subprocess.run(["xz", "-dc", str(path)], stdout=out, check=True)
            else:
                shutil.copy2(path, tree / "modules" / name)
            order.append(name)
        (tree / "modules.order").write_text("\n".join(order) + "\n")
        listing = subprocess.run(["find", "."], cwd=tree, check=True, capture_output=True).stdout
        with open(kernel.initramfs, "wb") as out:
            subprocess.run(["busybox", "cpio", "-o", "-H", "newc"], cwd=tree, input=listing, stdout=out, check=True)


def accelerator(kernel: Kernel) -> str:
    """kvm where /dev/kvm runs a guest (its kernel prints within 20 s), else tcg (software);
    the answer is kept for this machine's kernel and qemu (the probe costs 20 s a run here)."""
    wanted = os.environ.get("IOOBSERVE_MATRIX_ACCEL")
    if wanted:
        return wanted
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg"
    qemu = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    machine = f"{os.uname().release} {qemu}"
    known = CACHE / "accelerator"
    if known.is_file() and known.read_text().partition("\n")[2] == machine:
        found = known.read_text().partition("\n")[0]
        log(f"{'kvm' if found == 'kvm' else 'software emulation (tcg)'}, as found before on this machine ({known})")
        return found
    found = _probe_kvm(kernel)
    known.write_text(f"{found}\n{machine}")
    return found


def _probe_kvm(kernel: Kernel) -> str:
    """Boot the kernel with kvm for at most 20 s: kvm if it printed, else tcg."""
    probe = subprocess.Popen(["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-m", "512M", "-display", "none",
                              "-monitor", "none", "-serial", "stdio", "-no-reboot", "-kernel", str(kernel.vmlinuz),
                              "-append", "console=ttyS0 panic=-1 rdinit=/nothing"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    seen = threading.Event()

    def watch() -> None:
        for line in probe.stdout:
            if b"Linux version" in line:
                seen.set()
                return

    threading.Thread(target=watch, daemon=True).start()
    usable = seen.wait(20)
    probe.kill()
    probe.wait()
    log(f"/dev/kvm {'runs a guest: kvm' if usable else 'runs no guest here (nothing printed in 20 s): software emulation (tcg)'}")
    return "kvm" if usable else "tcg"


def polars_compat() -> dict[str, str]:
    """The environment that has the guest's Polars run its build for older CPUs, installed
    beside the venv (once): under software emulation (qemu 7.2's TCG) Polars' AVX2 build
    crashes in pl.concat, which the same build does not on real hardware."""
    version = subprocess.run([str(VENV_PYTHON), "-c", "import importlib.metadata as m; print(m.version('polars'))"],
                             check=True, capture_output=True, text=True).stdout.strip()
    target = CACHE / f"polars-runtime-compat-{version}"
    if not (target / ".ready").exists():
        shutil.rmtree(target, ignore_errors=True)
        installed = subprocess.run([str(VENV_PYTHON), "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                                    f"polars-runtime-compat=={version}"])
        if installed.returncode != 0:
            sys.exit(f"kernel-matrix: polars-runtime-compat=={version} (the guests' Polars for older CPUs) could not be "
                     f"installed: keep pyproject.toml's polars at a version that has its compat build")
        (target / ".ready").touch()
    return {"PYTHONPATH": str(target), "POLARS_FORCE_PKG": "compat"}


COMPILED = CACHE / "compiled"  # the objects compiled for guests, by their key (a digest of text and flags)


class CompileSpool(threading.Thread):
    """Compiles the guest asks for, on this machine (ioobserve.probes.build.compile_spool answers
    each), kept for the next runs: a request's key is the digest of its text and flags, the
    guest's kernel layout among them, so an object kept for a key is the one a compile makes."""

    def __init__(self, directory: Path, name: str):
        super().__init__(daemon=True, name=f"compile-{name}")
        self.directory = directory
        self.done = threading.Event()
        self.compiles = 0

    def run(self) -> None:
        answered: set[Path] = set()
        while not self.done.is_set():
            for request in sorted(self.directory.glob("*.request")):
                if request in answered:
                    continue
                answered.add(request)
                entry = request.with_suffix(".json")
                kept = COMPILED / entry.name
                if kept.is_file():
                    shutil.copy2(kept, request.with_name(f".staging-{entry.name}"))
                    os.replace(request.with_name(f".staging-{entry.name}"), entry)
                    log(f"{self.name}: the probes the guest asked for were compiled before: {kept}")
                    continue
                started = time.monotonic()
                result = subprocess.run([str(VENV_PYTHON), "-m", "ioobserve.probes.build.compile_spool", "answer", str(request)],
                                        capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
                self.compiles += 1
                what = "compiled" if result.returncode == 0 else f"failed: {result.stderr.strip()[-300:]}"
                log(f"{self.name}: the probes {what} for the guest in {time.monotonic() - started:.0f} s")
                if result.returncode == 0 and entry.is_file():
                    COMPILED.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(entry, COMPILED / f".staging-{entry.name}")
                    os.replace(COMPILED / f".staging-{entry.name}", kept)
            self.done.wait(0.5)


@dataclass
class Checks:
    """What the checks of one guest's recordings said, here."""

    status: int
    wall_s: float
    tail: list[str]
    outcomes: list[str]  # pytest's FAILED/ERROR lines and its final count


@dataclass
class GuestRun:
    """What one guest did, and what its checks said."""

    kernel: str
    status: int | None  # the job's exit status, None if it reported none
    wall_s: float
    compiles: int
    tail: list[str]
    outcomes: list[str]  # pytest's FAILED/ERROR lines and its final count
    why: str = ""
    boot_s: float | None = None  # from qemu's start to the guest's job starting
    checks: Checks | None = None

    @property
    def failed(self) -> bool:
        """Whether the guest or its checks failed."""
        return bool(self.why) or self.status != 0 or (self.checks is not None and self.checks.status != 0)


def boot(kernel: Kernel, command: str, accel: str, env: dict[str, str], checks: list[str] | None) -> GuestRun:
    """Boot the kernel, run `command` in the repository inside it, and collect its status;
    then, given `checks` (pytest's arguments), check here what its tests recorded."""
    share = Path(tempfile.mkdtemp(prefix=f"matrix-{kernel.name}-", dir="/var/tmp"))
    os.chmod(share, 0o700)
    spool = share / "compile"
    spool.mkdir(mode=0o700)
    recordings = share / "recordings"
    recordings.mkdir(mode=0o700)
    shutil.copy2(HERE / "guest.sh", share / "guest.sh")
    # The guest mounts its share at this same path, so that the recordings' paths hold here too.
    job = {"MATRIX_REPO": str(REPO), "MATRIX_MODULES": str(kernel.modules), "MATRIX_COMMAND": command,
           "MATRIX_SHARE": str(share), "CI": "true", "IOOBSERVE_COMPILE_SPOOL": "/mnt/matrix/compile",
           PHASE: "record", RECORDINGS: str(recordings), **env}
    (share / "job.env").write_text("".join(f"export {k}={_quote(v)}\n" for k, v in job.items()))
    disk = share / "scratch.img"
    subprocess.run(["truncate", "-s", SCRATCH_DISK, str(disk)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(disk)], check=True)
    cpu = ["-cpu", "host" if accel == "kvm" else os.environ.get("IOOBSERVE_MATRIX_CPU", "max")]
    argv = ["qemu-system-x86_64", "-accel", accel if accel == "kvm" else f"tcg,thread={TCG_THREADING}", *cpu,
            "-smp", str(os.cpu_count() or 2), "-m", GUEST_MEMORY, "-display", "none", "-monitor", "none",
            "-serial", "stdio", "-no-reboot", "-kernel", str(kernel.vmlinuz), "-initrd", str(kernel.initramfs),
            "-append", "console=ttyS0 panic=-1 loglevel=4 rdinit=/init",
            "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
            "-virtfs", f"local,path={share},mount_tag=matrix,security_model=none",
            "-drive", f"file={disk},if=virtio,format=raw"]
    spooler = CompileSpool(spool, kernel.name)
    spooler.start()
    started = time.monotonic()
    tail: list[str] = []
    outcomes: list[str] = []
    last_line = [time.monotonic()]
    job_started: list[float] = []
    qemu = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def read() -> None:
        pending = b""
        while chunk := os.read(qemu.stdout.fileno(), 65536):
            last_line[0] = time.monotonic()  # any output is a sign of life, a test's dot too
            *lines, pending = (pending + chunk).split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace").rstrip("\r")
                tail.append(line)
                del tail[:-TAIL_LINES]
                if OUTCOME.match(line):
                    outcomes.append(line)
                if line.startswith("matrix-guest:") and " up in " in line and not job_started:
                    job_started.append(time.monotonic() - started)
                print(f"[{kernel.name}] {line}", flush=True)
        if pending:
            tail.append(pending.decode(errors="replace"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    why = ""
    while qemu.poll() is None:
        now = time.monotonic()
        if now - started > GUEST_TIMEOUT_S:
            why = f"the guest ran past {GUEST_TIMEOUT_S:.0f} s"
        elif now - last_line[0] > SILENCE_S:
            why = f"the guest printed nothing for {SILENCE_S:.0f} s"
        if why:
            qemu.kill()
            break
        time.sleep(1)
    qemu.wait()
    reader.join(10)
    spooler.done.set()
    spooler.join()
    status_file = share / "status"
    status = int(status_file.read_text()) if status_file.exists() else None
    if status is None and not why:
        panicked = any("Kernel panic" in line for line in tail)
        why = ("the guest's kernel panicked (its oops is in the lines above)" if panicked else
               f"the guest reported no exit status (qemu exited with {qemu.returncode})")
    run = GuestRun(kernel.name, status, time.monotonic() - started, spooler.compiles, list(tail), outcomes, why,
                   job_started[0] if job_started else None)
    if checks is not None and status is not None:  # whatever it recorded is checked, even after a failure
        run.checks = check(kernel, checks, recordings)
    if os.environ.get("IOOBSERVE_MATRIX_KEEP"):  # what the guest left in /mnt/matrix, to look at
        log(f"{kernel.name}: its /mnt/matrix is kept in {share}")
    else:
        shutil.rmtree(share, ignore_errors=True)
    return run


def check(kernel: Kernel, pytest_args: list[str], recordings: Path) -> Checks:
    """The tests' checks, here, on what the guest recorded (tests/kernel/kernel_side.py)."""
    env = {**os.environ, PHASE: "check", RECORDINGS: str(recordings)}
    started = time.monotonic()
    try:
        done = subprocess.run([*PYTEST, "-q", *pytest_args], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=CHECK_TIMEOUT_S)
        status, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as expired:
        status, output = 1, f"{expired.stdout or ''}\nthe checks ran past {CHECK_TIMEOUT_S} s"
    lines = output.splitlines()
    for line in lines:
        print(f"[{kernel.name} checks] {line}", flush=True)
    return Checks(status, time.monotonic() - started, lines[-TAIL_LINES:], [line for line in lines if OUTCOME.match(line)])


def matrix_files(pytest_args: list[str]) -> list[str]:
    """The test files that hold the tests these arguments select (collected here, in seconds):
    the guest collects only those, as importing every kernel test module under emulation took a minute."""
    done = subprocess.run([*PYTEST, "--collect-only", "-q", *pytest_args], cwd=REPO, capture_output=True, text=True)
    files = sorted({line.split("::", 1)[0] for line in done.stdout.splitlines() if "::" in line})
    if done.returncode != 0 or not files:
        raise SystemExit(f"kernel-matrix: pytest {' '.join(pytest_args)} selects no test here:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return files


def _quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


def main(argv: list[str] | None = None) -> int:
    """Run the matrix; 0 only if every guest ran its tests and they passed."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernel", action="append", help="only this kernel of the list (repeatable)")
    parser.add_argument("--prepare-only", action="store_true", help="download and unpack the kernels, then stop")
    parser.add_argument("--command", help="run this shell command in the guest instead of the tests")
    parser.add_argument("pytest_args", nargs="*", help=f"pytest's arguments in the guest (default: {DEFAULT_TESTS})")
    args = parser.parse_args(argv)
    entries = declared()
    unknown = set(args.kernel or ()) - {entry["name"] for entry in entries}
    if unknown:
        parser.error(f"no kernel {', '.join(sorted(unknown))} in ci/kernels/kernels.toml "
                     f"(known: {', '.join(entry['name'] for entry in entries)})")
    if os.geteuid() != 0:
        parser.error("the matrix needs root (its guests' compiles load BPF here): sudo make test-kernels")
    kernels = [prepare(entry) for entry in entries if not args.kernel or entry["name"] in args.kernel]
    if args.prepare_only:
        return 0
    pytest_args = args.pytest_args or DEFAULT_TESTS
    checks = None if args.command else pytest_args
    if args.command:
        command = args.command
    else:
        # The same selection from only the files that hold its tests: the arguments that name no
        # file (options, their values) as given, the directories replaced by those files.
        options = [arg for arg in pytest_args if not (REPO / arg.split("::")[0]).exists()]
        named = [arg for arg in pytest_args if arg not in options and (REPO / arg.split("::")[0]).is_file()]
        files = named + [path for path in matrix_files(pytest_args) if not any(arg.split("::")[0] == path for arg in named)]
        # -v: a line per test, so that the host sees progress (and a hang) test by test
        command = shlex.join([".venv/bin/python", *PYTEST[1:], "-v", *options, *files])
    passed_env = {name: value for name, value in os.environ.items() if name.startswith("IOOBSERVE_") and
                  not name.startswith("IOOBSERVE_MATRIX_")} | {"IOOBSERVE_MATRIX_GUEST": "1"}
    if "IOOBSERVE_MATRIX_FAIL" in os.environ:
        passed_env["IOOBSERVE_MATRIX_FAIL"] = os.environ["IOOBSERVE_MATRIX_FAIL"]
    accel = accelerator(kernels[0])
    if accel == "tcg":
        passed_env |= polars_compat()
        # The exec gate's 0.2 s is a real node's; emulated, preparing a root's libc takes seconds.
        passed_env.setdefault("IOOBSERVE_EXEC_GATE_BOUND_S", "10")
    # The guests run side by side: each one's emulation is a single host thread (TCG_THREADING),
    # so on a machine of two cores or more two guests take the time of the slower, not the sum.
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(len(kernels), os.cpu_count() or 1))) as pool:
        runs = list(pool.map(lambda kernel: boot(kernel, command, accel, passed_env, checks), kernels))
    failed = [run for run in runs if run.failed]
    log("summary (time per guest: booting, its kernel sides, then their checks here):")
    for run in runs:
        log(f"  {run.kernel}: {_verdict(run)}; guest {run.wall_s / 60:.1f} min (booted in "
            f"{run.boot_s or 0:.0f} s), {run.compiles} compile(s) done for it here"
            + (f"; checks {run.checks.wall_s:.0f} s" if run.checks else ""))
    for run in failed:
        log(f"{run.kernel}: its last lines:")
        for line in run.tail:
            print(f"  [{run.kernel}] {line}", file=sys.stderr)
        if run.checks and run.checks.status != 0:
            log(f"{run.kernel}: its checks' last lines:")
            for line in run.checks.tail:
                print(f"  [{run.kernel} checks] {line}", file=sys.stderr)
    # Last, so that a log's tail names them: the guest's last lines may be an oops's.
    for run in failed:
        log(f"{run.kernel}: {_verdict(run)}; what pytest said of it:")
        said = run.outcomes[-MAX_OUTCOMES:] + (run.checks.outcomes[-MAX_OUTCOMES:] if run.checks else [])
        for line in said or ["  (nothing: pytest did not get as far as its summary)"]:
            print(f"  [{run.kernel}] {line}", file=sys.stderr)
    return 1 if failed else 0


def _verdict(run: GuestRun) -> str:
    if run.why:
        return run.why
    if run.status != 0:
        return f"failed in the guest (exit status {run.status})"
    if run.checks and run.checks.status != 0:
        return f"failed in the checks here (exit status {run.checks.status})"
    return "passed"


if __name__ == "__main__":
    sys.exit(main())
