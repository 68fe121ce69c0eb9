#!/usr/bin/env bash
# The root file systems the tests run jobs in, as a container or an Apptainer image brings one:
# Debian's unstable suite with its own libc, CPython 3.13, 3.14 and 3.15 (their headers too, to
# check the Python layer's tables), h5py with its libhdf5, and MPICH (mmdebstrap), plus CPython
# 3.13's free-threaded build (--disable-gil) made from Debian 13's source, under
# /opt/python3.13t in it. Built once per machine under
# /var/cache/ioobserve/roots (IOOBSERVE_ROOTS) and built again only when the suite's versions
# of these packages (or this script) change. Needs root; safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${IOOBSERVE_ROOTS:-/var/cache/ioobserve/roots}
ROOT=$CACHE/unstable
FREE_THREADED=$CACHE/python3.13t
PACKAGES=(python3.13-minimal libpython3.13-stdlib libpython3.13-dev python3.14-minimal libpython3.14-stdlib
          libpython3.14-dev python3.15-minimal libpython3.15-stdlib libpython3.15-dev python3-h5py
          mpich)
NO_DATE_CHECK=(-o 'Acquire::Check-Valid-Until=false')  # the unstable suite's Release file is past its date here

if [ "$(id -u)" -ne 0 ]; then
    # The tests that use it are kernel tests, which need root too: they skip (CI runs as root).
    echo "ci/roots.sh: not root: the test root is not built, and the tests in it skip" >&2
    exit 0
fi
for tool in mmdebstrap; do
    command -v "$tool" >/dev/null || { echo "ci/roots.sh: $tool is missing: run make setup" >&2; exit 1; }
done

# A private apt configuration: the unstable suite's packages and Debian 13's sources, without
# touching the machine's own.
apt_dir=$CACHE/apt
mkdir -p "$apt_dir/lists/partial"
cat > "$apt_dir/unstable.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
APT=(-o Dir::Etc::sourcelist=/dev/null -o "Dir::Etc::sourceparts=$apt_dir" -o "Dir::State::Lists=$apt_dir/lists"
     -o Dir::State::status=/dev/null -o "Dir::Cache=$apt_dir/cache" "${NO_DATE_CHECK[@]}")
mkdir -p "$apt_dir/cache/archives/partial"

if ! apt-get -qq "${APT[@]}" update 2>/dev/null; then
    if [ -f "$ROOT/.ioobserve-key" ]; then
        echo "ci/roots.sh: Debian's archive cannot be reached; keeping the test root built before" >&2
        exit 0
    fi
    echo "ci/roots.sh: Debian's archive cannot be reached, and no test root was built before" >&2
    exit 1
fi
versions=$(apt-cache "${APT[@]}" show --no-all-versions "${PACKAGES[@]}" | awk '/^Package:|^Version:/ {print $2}' | paste -sd' ')
source_version=$(apt-cache "${APT[@]}" showsrc --only-source python3.13 | awk '/^Version:/ {print $2; exit}')
key="$(sha256sum "$0" | cut -c1-16) $versions python3.13t=$source_version"

# CPython 3.13t from Debian 13's python3.13 source (upstream's tarball; Debian's patches are
# for its packaging), kept beside the root so that a new root does not rebuild it.
if [ ! -x "$FREE_THREADED/opt/python3.13t/bin/python3.13t" ] || [ "$(cat "$FREE_THREADED/.ioobserve-key" 2>/dev/null)" != "$source_version" ]; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    echo "ci/roots.sh: building CPython 3.13t from Debian 13's python3.13 $source_version (a few minutes)" >&2
    (cd "$work" && apt-get -qq "${APT[@]}" source --download-only python3.13 >/dev/null 2>&1)
    tar -xf "$work"/python3.13_*.orig.tar.xz -C "$work"
    (cd "$work"/Python-3.13.* &&
        ./configure -q --disable-gil --prefix=/opt/python3.13t --without-ensurepip --disable-test-modules >/dev/null &&
        make -s -j"$(nproc)" >/dev/null 2>&1 &&
        make -s install DESTDIR="$work/installed" >/dev/null 2>&1)
    rm -rf "$FREE_THREADED"
    mv "$work/installed" "$FREE_THREADED"
    echo "$source_version" > "$FREE_THREADED/.ioobserve-key"
fi

if [ "$(cat "$ROOT/.ioobserve-key" 2>/dev/null)" = "$key" ]; then
    exit 0
fi
echo "ci/roots.sh: making the unstable suite's root with mmdebstrap" >&2
unmount_below() {  # what tests (or an interrupted run) left mounted in a root: /proc, stacked too
    awk -v root="$1/" 'index($2, root) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r target; do
        umount -l "$target"
    done
}
unmount_below "$ROOT"
unmount_below "$ROOT.new"
rm -rf "$ROOT.new"
include=$(IFS=,; echo "${PACKAGES[*]}")
mmdebstrap -q --variant=essential --aptopt='Acquire::Check-Valid-Until "false"' --include="$include" sid "$ROOT.new" \
    >/dev/null
cp -a "$FREE_THREADED/opt/python3.13t" "$ROOT.new/opt/"
echo "$key" > "$ROOT.new/.ioobserve-key"
rm -rf "$ROOT"
mv "$ROOT.new" "$ROOT"
