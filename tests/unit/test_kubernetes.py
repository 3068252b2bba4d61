"""docs/kubernetes/fleet.yaml is valid Kubernetes (every object against the schemas that the
``kubernetes-validate`` package ships, offline, strict: no unknown field) and is the fleet docs/fleets.md
describes: the advertised address from the pod IP, the database URL from a Secret, readiness on
``/v1/health``, a preStop that lets leases move, a headless Service for the bridges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]  # (no type information shipped)
import pytest
import yaml

from tests.support import ROOT

MANIFEST = ROOT / "docs" / "kubernetes" / "fleet.yaml"
# The oldest Kubernetes still served by the major clouds, and the newest the package knows.
VERSIONS = ("1.30.0", kubernetes_validate.latest_version())


def objects() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(Path(MANIFEST).read_text()) if doc]


def by_kind(kind: str) -> list[dict[str, Any]]:
    return [o for o in objects() if o["kind"] == kind]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_is_valid_kubernetes(version: str) -> None:
    found = objects()
    assert {o["kind"] for o in found} == {"Secret", "Service", "StatefulSet"}
    for obj in found:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{obj['kind']} {obj['metadata']['name']} is not valid Kubernetes {version}: {exc.message}")


def test_it_is_the_fleet_readme_describes() -> None:
    (statefulset,) = by_kind("StatefulSet")
    services = {s["metadata"]["name"]: s for s in by_kind("Service")}
    (secret,) = by_kind("Secret")
    pod = statefulset["spec"]["template"]
    labels = pod["metadata"]["labels"]
    (bridge,) = pod["spec"]["containers"]
    env = {e["name"]: e for e in bridge["env"]}

    # The advertised address is the pod's own IP.
    assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["ACP_BRIDGE_ADVERTISE_URL"]["value"] == "http://$(POD_IP):2468"
    assert list(env).index("POD_IP") < list(env).index("ACP_BRIDGE_ADVERTISE_URL")  # (expanded in order)
    # The database URL and the token come from the Secret, which holds both.
    for name, key in (("ACP_BRIDGE_DATABASE_URL", "database-url"), ("ACP_BRIDGE_TOKEN", "token")):
        assert env[name]["valueFrom"] == {"secretKeyRef": {"name": secret["metadata"]["name"], "key": key}}
        assert key in secret["stringData"]
    # Readiness on /v1/health; a preStop before the SIGTERM that ends the leases.
    assert bridge["readinessProbe"]["httpGet"] == {"path": "/v1/health", "port": "http"}
    assert bridge["lifecycle"]["preStop"]["exec"]["command"][0] == "sleep"
    assert pod["spec"]["terminationGracePeriodSeconds"] > int(bridge["lifecycle"]["preStop"]["exec"]["command"][1]) + 15
    # A headless Service governs the pods (bridge to bridge), another spreads the clients.
    peers = services[statefulset["spec"]["serviceName"]]
    assert peers["spec"]["clusterIP"] == "None"
    assert [p["port"] for p in peers["spec"]["ports"]] == [2468]
    clients = next(s for name, s in services.items() if name != peers["metadata"]["name"])
    for service in (peers, clients):
        assert service["spec"]["selector"].items() <= labels.items()
    assert statefulset["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # Each bridge has a workspace of its own, mounted where sessions start.
    mounts = {m["mountPath"]: m["name"] for m in bridge["volumeMounts"]}
    claims = {c["metadata"]["name"] for c in statefulset["spec"]["volumeClaimTemplates"]}
    assert mounts["/workspace"] in claims and mounts["/var/lib/acp-rest-bridge"] in claims


def test_an_invalid_object_is_caught() -> None:
    """The check is real: an unknown field and a wrong type are refused."""
    (statefulset,) = by_kind("StatefulSet")
    wrong = {**statefulset, "spec": {**statefulset["spec"], "replica": 3}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong, VERSIONS[0], strict=True)
    wrong = {**statefulset, "spec": {**statefulset["spec"], "replicas": "three"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong, VERSIONS[0], strict=True)
