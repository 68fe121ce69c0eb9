"""deploy/kubernetes/ and the Helm chart (deploy/helm/ioobserve) validate offline against the
Kubernetes schemas (kubernetes-validate, strict: no unknown field) of the oldest and newest
releases it carries, and their pieces agree: the agent's arguments are serve's options, the
Service and ServiceMonitor select the DaemonSet's pods and name its metrics port, the host's
root is mounted where the agent is told. The chart is linted and rendered by Helm itself
(ci/tools.sh puts it in .tools/); with its defaults it renders deploy/kubernetes/."""

from __future__ import annotations

import subprocess

import kubernetes_validate
import pytest
import typer.main
import yaml
from kubernetes_validate.utils import all_versions, latest_version

from ioobserve.cli.app import app
from ioobserve.plumbing.host import HOST_ROOT_VARIABLE
from tests.conftest import ROOT

DEPLOY = ROOT / "deploy" / "kubernetes"
CHART = ROOT / "deploy" / "helm" / "ioobserve"
HELM = ROOT / ".tools" / "helm"
OLDEST = min(all_versions(), key=lambda version: [int(part) for part in version.split(".")])
CUSTOM = {"monitoring.coreos.com/v1"}  # the Prometheus Operator's CRDs: not in the schemas


def _documents() -> dict[str, dict]:
    listed = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(path.name for path in DEPLOY.glob("*.yaml") if path.name != "kustomization.yaml")
    return {doc["kind"]: doc for name in listed for doc in yaml.safe_load_all((DEPLOY / name).read_text())}


def _helm(*args: str, tmp_path) -> subprocess.CompletedProcess:
    assert HELM.exists(), "Helm is missing: make test runs ci/tools.sh"
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}  # no user's Helm settings or plugins
    return subprocess.run([str(HELM), *args], capture_output=True, text=True, timeout=120, env=env)


def _rendered(tmp_path, *sets: str) -> dict[str, dict]:
    done = _helm("template", "ioobserve", str(CHART), "--namespace", "ioobserve", *(f"--set={s}" for s in sets),
                 tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    return {doc["kind"]: doc for doc in yaml.safe_load_all(done.stdout) if doc}


def _validate(docs: dict[str, dict], version: str) -> int:
    checked = 0
    for doc in docs.values():
        if doc["apiVersion"] not in CUSTOM:
            kubernetes_validate.validate(doc, version, strict=True)  # raises on an error
            checked += 1
    return checked


@pytest.mark.parametrize("version", [OLDEST, latest_version()])
def test_every_manifest_validates_strictly(version):
    assert _validate(_documents(), version) == 3  # Namespace, DaemonSet, Service


def test_the_chart_lints_and_renders_the_manifests_with_its_defaults(tmp_path):
    linted = _helm("lint", "--strict", str(CHART), tmp_path=tmp_path)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    plain = {kind: doc for kind, doc in _documents().items() if kind != "Namespace"}  # helm install --create-namespace
    assert _rendered(tmp_path) == plain


@pytest.mark.parametrize("version", [OLDEST, latest_version()])
def test_the_capability_set_renders_without_privileges(tmp_path, version):
    docs = _rendered(tmp_path, "privileged=false")
    assert _validate(docs, version) == 2
    context = docs["DaemonSet"]["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert context == {"privileged": False, "capabilities": {"drop": ["ALL"], "add": values["capabilities"]}}


@pytest.mark.parametrize("version", [OLDEST, latest_version()])
def test_the_charts_values_render_valid_manifests(tmp_path, version):
    docs = _rendered(tmp_path, "port=9500", "recordJobs={*}", "extraArgs={--rotate-mb=512}",
                     "serviceMonitor.enabled=false", "recordDir=/scratch/io", "image.tag=test",
                     "layers=no-cache", "retainDays=7", "retainGB=500")
    assert docs.keys() == {"DaemonSet", "Service"} and _validate(docs, version) == 2
    agent = docs["DaemonSet"]["spec"]["template"]["spec"]
    container = agent["containers"][0]
    assert {"--listen=0.0.0.0:9500", "--record-job=*", "--rotate-mb=512", "--layers=no-cache", "--retain-days=7",
            "--retain-gb=500"} <= set(container["args"])
    assert container["ports"][0]["containerPort"] == docs["Service"]["spec"]["ports"][0]["port"] == 9500
    assert container["image"] == "localhost/ioobserve:test"
    assert next(v for v in agent["volumes"] if v["name"] == "traces")["hostPath"]["path"] == "/scratch/io"
    _agrees_with_serve(container)


def _agrees_with_serve(container: dict) -> None:
    options = {opt for param in typer.main.get_command(app).commands["serve"].params for opt in param.opts}
    given = {arg.split("=", 1)[0] for arg in container["args"]}
    assert given <= options, given - options


def test_the_agents_arguments_are_serves_options_and_its_mounts_its_settings():
    agent = _documents()["DaemonSet"]["spec"]["template"]["spec"]
    assert agent["hostPID"] is True
    container = agent["containers"][0]
    assert container["command"] == ["ioobserve", "serve"]
    _agrees_with_serve(container)
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
