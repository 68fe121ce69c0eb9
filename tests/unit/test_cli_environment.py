"""What the command line sets in its environment before Polars loads: a thread cap for the
commands that watch a node, a fast-decaying allocator for those bound by --memory, neither
passed on to a traced command nor set over what the user gave."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ALLOCATOR = "_RJEM_MALLOC_CONF"
PROBE = """
import json, os, sys
sys.argv = ["ioobserve", *sys.argv[1:]]
import ioobserve.cli as cli
assert "polars" not in sys.modules, "Polars loaded before the command line set its environment"
ours = ("POLARS_MAX_THREADS", cli.POLARS_ALLOCATOR_CONF)
print(json.dumps({"threads": os.environ.get(ours[0]), "allocator": os.environ.get(ours[1]),
                  "given": sorted(k for k in cli.environment_given() if k in ours)}))
"""


def _environment(*argv: str, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("POLARS_MAX_THREADS", ALLOCATOR)} | extra
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout)


def test_each_command_gets_its_settings_and_a_traced_command_none():
    fast = "dirty_decay_ms:500,muzzy_decay_ms:500"
    assert _environment("analyze", "t.pfw.gz") == {"threads": None, "allocator": fast, "given": []}
    assert _environment("report", "t.pfw.gz")["allocator"] is not None
    assert _environment("record", "--", "true") == {"threads": "2", "allocator": None, "given": []}
    assert _environment("export", "t.pfw.gz") == {"threads": None, "allocator": None, "given": []}


def test_what_the_user_set_is_kept_and_passed_on():
    got = _environment("analyze", "t.pfw.gz", **{ALLOCATOR: "dirty_decay_ms:0"})
    assert got == {"threads": None, "allocator": "dirty_decay_ms:0", "given": [ALLOCATOR]}
