"""deploy/kubernetes/ validates offline against the Kubernetes schemas (kubernetes-validate,
strict: no unknown field) of the oldest and newest releases it carries, and its pieces agree:
the agent's arguments are serve's options, the Service and ServiceMonitor select the
DaemonSet's pods and name its metrics port, the host's root is mounted where the agent is told."""

from __future__ import annotations

import kubernetes_validate
import pytest
import typer.main
import yaml
from kubernetes_validate.utils import all_versions, latest_version

from ioobserve.cli.app import app
from ioobserve.probes.host import HOST_ROOT_VARIABLE
from tests.conftest import ROOT

DEPLOY = ROOT / "deploy" / "kubernetes"
OLDEST = min(all_versions(), key=lambda version: [int(part) for part in version.split(".")])
CUSTOM = {"monitoring.coreos.com/v1"}  # the Prometheus Operator's CRDs: not in the schemas


def _documents() -> dict[str, dict]:
    listed = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(path.name for path in DEPLOY.glob("*.yaml") if path.name != "kustomization.yaml")
    return {doc["kind"]: doc for name in listed for doc in yaml.safe_load_all((DEPLOY / name).read_text())}


@pytest.mark.parametrize("version", [OLDEST, latest_version()])
def test_every_manifest_validates_strictly(version):
    checked = 0
    for kind, doc in _documents().items():
        if doc["apiVersion"] in CUSTOM:
            continue
        kubernetes_validate.validate(doc, version, strict=True)  # raises on an error
        checked += 1
    assert checked == 3  # Namespace, DaemonSet, Service


def test_the_agents_arguments_are_serves_options_and_its_mounts_its_settings():
    agent = _documents()["DaemonSet"]["spec"]["template"]["spec"]
    assert agent["hostPID"] is True
    container = agent["containers"][0]
    assert container["command"] == ["ioobserve", "serve"]
    options = {opt for param in typer.main.get_command(app).commands["serve"].params for opt in param.opts}
    given = {arg.split("=", 1)[0] for arg in container["args"]}
    assert given <= options, given - options
    mounts = {mount["name"]: mount for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in agent["volumes"]}
    assert mounts.keys() == volumes.keys()
    env = {item["name"]: item.get("value") for item in container["env"]}
    host = next(name for name, volume in volumes.items() if volume["hostPath"]["path"] == "/")
    assert mounts[host]["mountPath"] == env[HOST_ROOT_VARIABLE] and mounts[host]["readOnly"] is True
    record_dir = next(arg.split("=", 1)[1] for arg in container["args"] if arg.startswith("--record-dir="))
    assert any(mount["mountPath"] == record_dir for mount in mounts.values())


def test_the_service_and_monitor_find_the_agents_metrics():
    docs = _documents()
    pods = docs["DaemonSet"]["spec"]["template"]["metadata"]["labels"]
    assert docs["DaemonSet"]["spec"]["selector"]["matchLabels"].items() <= pods.items()
    service = docs["Service"]
    assert service["spec"]["selector"].items() <= pods.items()
    ports = {port["name"] for port in docs["DaemonSet"]["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert {port["targetPort"] for port in service["spec"]["ports"]} <= ports
    monitor = docs["ServiceMonitor"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert {endpoint["port"] for endpoint in monitor["spec"]["endpoints"]} <= {port["name"] for port in service["spec"]["ports"]}
    assert {doc["metadata"].get("namespace", doc["metadata"]["name"]) for doc in docs.values()} == {"ioobserve"}
