#!/usr/bin/env bash
# The peer tools our compatibility tests run against, in their own venv (.venv-peers), never
# in the project's: dftracer 2.2.0 (writes traces through LD_PRELOAD) and dftracer-utils
# 0.0.14 (dftracer_validate, dftracer_event_count, dftracer_view, TraceViewer), and pyarrow and
# DuckDB to read our Parquet exports. Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

PEERS=.venv-peers
PINS=(dftracer==2.2.0 dftracer-utils==0.0.14 pyarrow==26.0.1 duckdb==2.0.0)
stamp=$PEERS/.peers-installed
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${PINS[*]}" ]; then
    exit 0
fi
rm -rf "$PEERS"
/usr/bin/python3 -m venv "$PEERS"
"$PEERS/bin/python" -m pip install -q --upgrade pip 2> >(grep -v "is ignored" >&2)
"$PEERS/bin/python" -m pip install -q "${PINS[@]}" 2> >(grep -v "is ignored" >&2)
echo "${PINS[*]}" > "$stamp"
