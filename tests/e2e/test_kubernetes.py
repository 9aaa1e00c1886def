"""The Kubernetes manifests (deploy/kubernetes), validated offline: every resource against the
Kubernetes schemas (`kubernetes-validate`, strict: an unknown field is an error), the
kustomization lists exactly the resources there are, and the config the replicas load is the
shared-store one. They have not been run on a cluster yet (the README says so)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "deploy" / "kubernetes"
VALIDATE = Path(sys.executable).parent / "kubernetes-validate"
VERSION = "1.31.0"


def validate(*files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(VALIDATE), "--strict", "-k", VERSION, *map(str, files)],
                          capture_output=True, text=True, timeout=120)


def test_every_manifest_is_valid_and_listed_by_the_kustomization():
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    listed = sorted(kustomization["resources"])
    present = sorted(p.name for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml")
    assert listed == present, (listed, present)
    checked = validate(*(MANIFESTS / name for name in listed))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    kinds = {yaml.safe_load((MANIFESTS / name).read_text())["kind"] for name in listed}
    assert kinds == {"Secret", "ConfigMap", "Job", "Deployment", "Service"}, kinds


def test_the_validation_catches_a_wrong_field(tmp_path):
    broken = tmp_path / "deployment.yaml"
    broken.write_text((MANIFESTS / "deployment.yaml").read_text().replace("readinessProbe:", "readinesProbe:"))
    checked = validate(broken)
    assert checked.returncode != 0, checked.stdout


def test_the_replicas_config_uses_the_shared_store_and_secrets_from_the_environment():
    config = yaml.safe_load((MANIFESTS / "configmap.yaml").read_text())["data"]["sandgate.toml"]
    parsed = tomllib.loads(config)
    assert parsed["store"] == {"backend": "postgres", "url": "${DATABASE_URL}"}, parsed["store"]
    assert parsed["http"]["tokens"][0]["token"] == "${SANDGATE_TOKEN}"
    deployment = yaml.safe_load((MANIFESTS / "deployment.yaml").read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert deployment["spec"]["replicas"] == 3
