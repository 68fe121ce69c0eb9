#!/usr/bin/env bash
# The whole suite. As root (CI), kernel tests attach real probes and must run, not skip.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m pytest -q -ra "$@"
