#!/usr/bin/env python3
"""The kernel matrix: boot each kernel of ci/kernels.toml under qemu, with this machine's root
file system, and run the matrix's kernel tests (pytest -m matrix) inside it.

    ci/kernel_matrix.py                      every kernel of the list
    ci/kernel_matrix.py --kernel debian12-6.1 -- -k ground_truth   one kernel, pytest arguments

The probes' compile (about 3 minutes of clang under emulation) is done on this machine: the
guest's ioobserve sends it here through a spool directory (ioobserve.probes.build.compile_spool),
with the guest's own BTF offsets and tracepoint formats in its flags. A guest that fails,
hangs, is silent too long or reports nothing fails the run, with its last lines printed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
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
OUTCOME = re.compile(r"^(FAILED|ERROR) |^=+ .*\b(passed|failed|error|errors)\b.* in [0-9.]+s")
MAX_OUTCOMES = 30
# Under emulation the guest's vCPUs take turns on one host thread. With qemu 7.2's multi-threaded
# TCG a 6.12 guest once died of an int3 oops in the middle of a patched fentry call site
# (RIP __x64_sys_newfstatat+0x5, as a trampoline was attached or detached): cross-modifying
# code, which text_poke_bp relies on, is where multi-threaded TCG is weakest. One thread keeps
# two vCPUs (per-CPU maps, concurrent workers) at some cost in time.
TCG_THREADING = os.environ.get("IOOBSERVE_MATRIX_TCG_THREAD", "single")
DEFAULT_TESTS = "-m matrix tests/kernel"


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
    """kvm where /dev/kvm runs a guest (its kernel prints within 20 s), else tcg (software)."""
    wanted = os.environ.get("IOOBSERVE_MATRIX_ACCEL")
    if wanted:
        return wanted
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg"
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
        subprocess.run([str(VENV_PYTHON), "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                        f"polars-runtime-compat=={version}"], check=True)
        (target / ".ready").touch()
    return {"PYTHONPATH": str(target), "POLARS_FORCE_PKG": "compat"}


class CompileSpool(threading.Thread):
    """Compiles the guest asks for, on this machine (ioobserve.probes.build.compile_spool answers each)."""

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
                started = time.monotonic()
                result = subprocess.run([str(VENV_PYTHON), "-m", "ioobserve.probes.build.compile_spool", "answer", str(request)],
                                        capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
                self.compiles += 1
                what = "compiled" if result.returncode == 0 else f"failed: {result.stderr.strip()[-300:]}"
                log(f"{self.name}: the probes {what} for the guest in {time.monotonic() - started:.0f} s")
            self.done.wait(0.5)


@dataclass
class GuestRun:
    """What one guest did."""

    kernel: str
    status: int | None  # the job's exit status, None if it reported none
    wall_s: float
    compiles: int
    tail: list[str]
    outcomes: list[str]  # pytest's FAILED/ERROR lines and its final count
    why: str = ""


def boot(kernel: Kernel, command: str, accel: str, env: dict[str, str]) -> GuestRun:
    """Boot the kernel, run `command` in the repository inside it, and collect its status."""
    share = Path(tempfile.mkdtemp(prefix=f"matrix-{kernel.name}-", dir="/var/tmp"))
    os.chmod(share, 0o700)
    spool = share / "compile"
    spool.mkdir(mode=0o700)
    shutil.copy2(HERE / "guest.sh", share / "guest.sh")
    job = {"MATRIX_REPO": str(REPO), "MATRIX_MODULES": str(kernel.modules), "MATRIX_COMMAND": command,
           "CI": "true", "IOOBSERVE_COMPILE_SPOOL": "/mnt/matrix/compile", **env}
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
    run = GuestRun(kernel.name, status, time.monotonic() - started, spooler.compiles, list(tail), outcomes, why)
    if os.environ.get("IOOBSERVE_MATRIX_KEEP"):  # what the guest left in /mnt/matrix, to look at
        log(f"{kernel.name}: its /mnt/matrix is kept in {share}")
    else:
        shutil.rmtree(share, ignore_errors=True)
    return run


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
    pytest_args = " ".join(_quote(arg) for arg in args.pytest_args) if args.pytest_args else DEFAULT_TESTS
    # -v: a line per test, so that the host sees progress (and a hang) test by test
    command = args.command or f".venv/bin/python -m pytest -v -ra -p no:cacheprovider --color=no {pytest_args}"
    passed_env = {name: value for name, value in os.environ.items() if name.startswith("IOOBSERVE_") and
                  not name.startswith("IOOBSERVE_MATRIX_")} | {"IOOBSERVE_MATRIX_GUEST": "1"}
    if "IOOBSERVE_MATRIX_FAIL" in os.environ:
        passed_env["IOOBSERVE_MATRIX_FAIL"] = os.environ["IOOBSERVE_MATRIX_FAIL"]
    accel = accelerator(kernels[0])
    if accel == "tcg":
        passed_env |= polars_compat()
    # The guests run side by side: each one's emulation is a single host thread (TCG_THREADING),
    # so on a machine of two cores or more two guests take the time of the slower, not the sum.
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(len(kernels), os.cpu_count() or 1))) as pool:
        runs = list(pool.map(lambda kernel: boot(kernel, command, accel, passed_env), kernels))
    failed = [run for run in runs if run.why or run.status != 0]
    log("summary:")
    for run in runs:
        verdict = run.why or ("passed" if run.status == 0 else f"failed (exit status {run.status})")
        log(f"  {run.kernel}: {verdict}; {run.wall_s / 60:.1f} min, {run.compiles} compile(s) done for it here")
    for run in failed:
        log(f"{run.kernel}: its last lines:")
        for line in run.tail:
            print(f"  [{run.kernel}] {line}", file=sys.stderr)
    # Last, so that a log's tail names them: the guest's last lines may be an oops's.
    for run in failed:
        log(f"{run.kernel}: {run.why or f'failed (exit status {run.status})'}; what pytest said of it:")
        for line in run.outcomes[-MAX_OUTCOMES:] or ["  (nothing: pytest did not get as far as its summary)"]:
            print(f"  [{run.kernel}] {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
