"""The deployment files: the systemd unit passes systemd-analyze, the example config loads and
documents every key, and each key is one of `serve`'s options."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess

from ioobserve.serve.config import ServeConfig, load_config
from tests.cli.cli_run import IOOBSERVE
from tests.conftest import ROOT

DEPLOY = ROOT / "deploy"
KEYS = {f.name.replace("_", "-") for f in dataclasses.fields(ServeConfig)}


def test_the_systemd_unit_passes_systemd_analyze(tmp_path):
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing (ci/setup.sh installs the systemd package)"
    unit = (DEPLOY / "systemd" / "ioobserve.service").read_text()
    assert "ExecStart=/usr/local/bin/ioobserve serve --config /etc/ioobserve/serve.toml" in unit
    # checked against this checkout's ioobserve: verify also wants the program to exist
    (tmp_path / "ioobserve.service").write_text(unit.replace("/usr/local/bin/ioobserve", str(ROOT / ".venv" / "bin" / "ioobserve")))
    done = subprocess.run([analyze, "verify", str(tmp_path / "ioobserve.service")], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stdout + done.stderr


def test_the_example_config_loads_and_documents_every_key():
    path = DEPLOY / "serve.toml"
    config = load_config(path, {})
    assert config.listen.startswith("127.0.0.1:")  # loopback unless told otherwise
    documented = set(re.findall(r"^#? ?([a-z][a-z-]*) =", path.read_text(), flags=re.MULTILINE))
    assert documented == KEYS


def test_every_config_key_is_an_option_of_serve():
    help_text = subprocess.run([IOOBSERVE, "serve", "--help"], capture_output=True, text=True, timeout=60,
                               env={**os.environ, "COLUMNS": "250"}, check=True).stdout
    for key in KEYS:
        assert f"--{key}" in help_text, key


def test_the_slurm_hooks_are_valid_shell():
    for name in ("prolog.sh", "epilog.sh"):
        subprocess.run(["sh", "-n", str(DEPLOY / "slurm" / name)], check=True)
