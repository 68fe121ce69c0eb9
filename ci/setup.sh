#!/usr/bin/env bash
# Idempotent set-up: Debian packages bcc needs, kernel headers, and .venv with the project.
set -euo pipefail
cd "$(dirname "$0")/.."

SYSTEM_PYTHON=/usr/bin/python3   # the interpreter Debian's python3-bpfcc is built for
# chromium: the HTML report is checked in a headless browser with the network shut.
# systemd: its systemd-analyze checks the service unit in deploy/systemd.
# fuse3: the fault tests' file system (libfuse3 for mfusepy) that is slow, fails or hangs.
# libmpich-dev: MPICH's headers, for the C MPI-IO workload run in the test root (ci/roots.sh).
# mmdebstrap: the test root of Debian's unstable suite (ci/roots.sh).
# qemu-system-x86, busybox-static, kmod: the kernel matrix's guests (ci/kernel_matrix.py).
# podman, runc: the container image (make image) and the tests that run it (runc: crun, podman's
# default runtime, refuses hybrid cgroups).
PACKAGES=(python3-bpfcc libbpfcc bpfcc-tools python3-venv python3-dev strace bpftool gcc make mpich libmpich-dev mmdebstrap chromium systemd fuse3 fio
          qemu-system-x86 busybox-static kmod e2fsprogs podman runc)

need_root() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "ci/setup.sh: installing system packages needs root (sudo make setup)" >&2
        exit 1
    fi
}

missing=()
for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
# Headers: the running kernel's own when the distribution has them, else the generic package
# (bcc needs a build tree only for its bootstrap headers; struct layouts come from BTF).
release="$(uname -r)"
if [ ! -e "/lib/modules/$release/build/include/linux/kconfig.h" ] && ! ls -d /usr/src/linux-headers-*-common >/dev/null 2>&1; then
    missing+=("__headers__")
fi

if [ "${#missing[@]}" -gt 0 ]; then
    need_root
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    pkgs=()
    for pkg in "${missing[@]}"; do
        [ "$pkg" = "__headers__" ] || pkgs+=("$pkg")
    done
    if [[ " ${missing[*]} " == *" __headers__ "* ]]; then
        if apt-cache show "linux-headers-$release" >/dev/null 2>&1; then
            pkgs+=("linux-headers-$release")
        else
            case "$(uname -m)" in
                x86_64) pkgs+=(linux-headers-amd64) ;;
                aarch64) pkgs+=(linux-headers-arm64) ;;
                *) echo "ci/setup.sh: no generic kernel headers package known for $(uname -m)" >&2; exit 1 ;;
            esac
        fi
    fi
    apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import bcc" 2>/dev/null; then
    rm -rf .venv
    "$SYSTEM_PYTHON" -m venv --system-site-packages .venv
fi
stamp=.venv/.ioobserve-installed
# Installing builds the compiled core (ioobserve/csrc) in place: again when its sources change.
core_built() { ls ioobserve/_core.*.so >/dev/null 2>&1 && [ -z "$(find ioobserve/csrc -newer "$stamp" 2>/dev/null)" ]; }
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] || ! core_built; then
    .venv/bin/python -m pip install -q --upgrade pip
    # The build's own chatter (setuptools' notes on editable installs) only if it fails.
    if ! .venv/bin/python -m pip install -q -e ".[dev]" 2> .venv/pip-install.log; then
        cat .venv/pip-install.log >&2
        exit 1
    fi
    touch "$stamp"
fi
# The kernel matrix's kernels (Debian's packages, unpacked under /var/cache/ioobserve/kernels),
# where make test runs the matrix: in CI, or when asked for.
case "${CI:-}" in 1|true|yes) IOOBSERVE_KERNEL_MATRIX=1 ;; esac
if [ "${IOOBSERVE_KERNEL_MATRIX:-0}" = 1 ] && [ "$(id -u)" -eq 0 ]; then
    .venv/bin/python ci/kernel_matrix.py --prepare-only
fi
# Prepare the merged header tree and check the machine (mounts tracefs when needed).
if [ "$(id -u)" -eq 0 ]; then
    .venv/bin/ioobserve doctor --quick >/dev/null || .venv/bin/ioobserve doctor --quick
fi
