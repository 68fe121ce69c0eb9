#!/usr/bin/env bash
# The whole suite. As root (CI), kernel tests attach real probes and must run, not skip.
# In CI (CI=true), or with IOOBSERVE_KERNEL_MATRIX=1, the kernel matrix follows: the matrix's
# tests inside each of Debian's kernels under qemu (ci/kernel_matrix.py, `make test-kernels`).
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest -q -ra "$@"
status=$?
matrix="${IOOBSERVE_KERNEL_MATRIX:-0}"
case "${CI:-}" in 1|true|yes) matrix=1 ;; esac
if [ "$matrix" = 1 ] && [ $# -eq 0 ]; then
    .venv/bin/python ci/kernel_matrix.py || status=1
fi
exit $status
