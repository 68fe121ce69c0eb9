#!/usr/bin/env bash
# `make image`: an OCI image of ioobserve built only from Debian's packages and PyPI (no base
# image: no registry is needed). mmdebstrap makes a Debian root of the host's own release with
# bcc (python3-bpfcc); the project and its Python dependencies go in a venv at /opt/ioobserve
# as wheels built here (the host's release and Python are the image's, so the compiled core
# built here runs there); podman imports the root as the image. Its default command is
# `ioobserve serve`. No compiler, pip cache, apt lists or documentation are kept.
#
#   deploy/image/build.sh [TAG]           default TAG: localhost/ioobserve:<version>, also :latest
#   IOOBSERVE_IMAGE_ARCHIVE=FILE ...      also save it as an OCI archive (for `ctr images import`)
set -euo pipefail
cd "$(dirname "$0")/../.."

fail() { echo "deploy/image/build.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "building the root needs root (sudo make image)"
for tool in mmdebstrap podman; do
    command -v "$tool" >/dev/null || fail "$tool is missing: run 'make setup'"
done
[ -x .venv/bin/python ] || fail ".venv is missing: run 'make setup'"

. /etc/os-release
suite="${VERSION_CODENAME:?/etc/os-release names no release}"
version="$(.venv/bin/python -c 'import ioobserve; print(ioobserve.__version__)')"
tag="${1:-localhost/ioobserve:$version}"
work="$(mktemp -d /var/tmp/ioobserve-image.XXXXXX)"   # 0700
trap 'rm -rf "$work"' EXIT

# The project's wheel (the compiled core and the probes' sources in it) and every dependency's,
# through the host's own pip settings (its index and constraints).
echo "image: wheels for Python $(.venv/bin/python -c 'import platform; print(platform.python_version())')"
.venv/bin/python -m pip wheel -q -w "$work/wheels" . 2> "$work/pip.log" || { cat "$work/pip.log" >&2; exit 1; }
# pip itself runs from its wheel in the root, so that neither pip nor python3-venv stays in the image.
.venv/bin/python -m pip download -q --no-deps -d "$work/wheels" pip 2> "$work/pip.log" || { cat "$work/pip.log" >&2; exit 1; }
pip_wheel="$(cd "$work/wheels" && ls pip-*.whl | head -n 1)"

# bcc (the kernel headers come from the host, by a mount), and mount(8): ioobserve mounts
# tracefs where the host has not.
packages=python3-bpfcc,libbpfcc,mount
echo "image: a Debian $suite root with $packages"
# merged-usr: /usr merged by the hook, not by the usrmerge package (which brings perl).
# The chroot's commands get a clean environment: the host's PIP_* settings name its own paths.
in_root='chroot "$1" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin'
mmdebstrap --quiet --variant=essential --include="$packages" \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --customize-hook='mkdir "$1/tmp/wheels"' \
    --customize-hook="copy-in $work/wheels/. /tmp/wheels" \
    --customize-hook="$in_root python3 -m venv --without-pip --system-site-packages /opt/ioobserve" \
    --customize-hook="$in_root /opt/ioobserve/bin/python /tmp/wheels/$pip_wheel/pip install -q --no-index --no-cache-dir --find-links /tmp/wheels ioobserve" \
    --customize-hook='rm -rf "$1/tmp/wheels" "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*' \
    --customize-hook='mkdir -p "$1/var/cache/ioobserve" "$1/traces" && chmod 0700 "$1/traces"' \
    "$suite" "$work/root.tar" > "$work/mmdebstrap.log" 2>&1 || { tail -n 40 "$work/mmdebstrap.log" >&2; exit 1; }

echo "image: importing it as $tag"
podman import --quiet \
    --change 'ENV PATH=/opt/ioobserve/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV PYTHONDONTWRITEBYTECODE=1' \
    --change 'WORKDIR /traces' \
    --change 'CMD ["ioobserve", "serve"]' \
    --change "LABEL org.opencontainers.image.title=ioobserve org.opencontainers.image.version=$version" \
    "$work/root.tar" "$tag" >/dev/null
latest="${tag%:*}:latest"
[ "$latest" = "$tag" ] || podman tag "$tag" "$latest"
if [ -n "${IOOBSERVE_IMAGE_ARCHIVE:-}" ]; then
    podman save --quiet --format oci-archive -o "$IOOBSERVE_IMAGE_ARCHIVE" "$tag"
    echo "image: saved as $IOOBSERVE_IMAGE_ARCHIVE"
fi
size="$(podman image inspect --format '{{.Size}}' "$tag")"
echo "image: $tag, $((size / 1024 / 1024)) MiB"
