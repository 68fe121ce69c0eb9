#!/usr/bin/env bash
# The peer tools our compatibility tests run against, in their own venv (.venv-peers), never
# in the project's: dftracer 2.2.0 (writes traces through LD_PRELOAD) and dftracer-utils
# 0.0.14 (dftracer_validate, dftracer_event_count, dftracer_view, TraceViewer). Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

PEERS=.venv-peers
PINS=(dftracer==2.2.0 dftracer-utils==0.0.14)
stamp=$PEERS/.peers-installed
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${PINS[*]}" ]; then
    exit 0
fi
rm -rf "$PEERS"
/usr/bin/python3 -m venv "$PEERS"
"$PEERS/bin/python" -m pip install -q --upgrade pip
"$PEERS/bin/python" -m pip install -q "${PINS[@]}"
echo "${PINS[*]}" > "$stamp"
