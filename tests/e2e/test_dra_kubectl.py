"""Dynamic Resource Allocation on devcluster (issue 17 item 5), through the real kubectl.

`kubectl apply` a DeviceClass, a ResourceSlice publishing two GPUs on one node, three ResourceClaims of one GPU
each, and three pods (each in its own PodGroup) using one claim. Scheduler sessions run one at a time
(`scheduler.session.run_once`, DRA switched on in the predicates plugin); devcluster's simulated kubelets run what
binds. Two pods run on the GPU node with distinct devices in their claims' `status.allocation`; the third stays
Pending with a FailedScheduling Event naming its claim.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from lahar.kube import errors
from lahar.kube.rest import RestClient
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_once
from tests.builders import queue
from tests.support import scheduling_devcluster, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")]

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins:
  - {name: drf}
  - {name: predicates, arguments: {predicate.DynamicResourceAllocationEnable: true}}
  - {name: proportion}
  - {name: nodeorder}
"""
NS = "default"
DRIVER = "gpu.example.com"


DEVICE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def _manifests(gpu_node: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        DEVICE_CLASS,
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{gpu_node}-gpus"},
         "spec": {"driver": DRIVER, "nodeName": gpu_node,
                  "pool": {"name": gpu_node, "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": f"gpu-{k}", "attributes": {"model": {"string": "a100"}},
                               "capacity": {"memory": {"value": "40Gi"}}} for k in range(2)]}},
    ]
    for i in range(3):
        out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"name": f"gpu-{i}", "namespace": NS},
                    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                        "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}}]}}})
        out.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": f"pg-{i}", "namespace": NS}, "spec": {"minMember": 1, "queue": "default"}})
        out.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"trainer-{i}", "namespace": NS, "annotations": {
                "scheduling.k8s.io/group-name": f"pg-{i}", "lahar.sh/sim-duration": "600s"}},
            "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": f"gpu-{i}"}],
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                                   "claims": [{"name": "gpu"}]}}]}})
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, RestClient]]:
    with scheduling_devcluster(tmp_path_factory.mktemp("dra") / "data") as both:
        yield both


def _kubectl(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    out = subprocess.run(["kubectl", *args], env=env, input=stdin, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
    return out.stdout


def _default_queue(client: RestClient) -> None:
    """The Queue `default` (each test makes it: xdist may give each test of the module its own cluster)."""
    with contextlib.suppress(errors.AlreadyExists):
        client.create(client.registry.get("scheduling.volcano.sh", "v1beta1", "queues"), queue("default").bare())


def test_two_gpu_claims_run_and_the_third_pod_waits_for_a_device(cluster: tuple[Any, RestClient]) -> None:
    c, client = cluster
    env = dict(os.environ, KUBECONFIG=str(c.kubeconfig))
    _default_queue(client)
    nodes = sorted(n["metadata"]["name"] for n in json.loads(_kubectl(env, "get", "nodes", "-o", "json"))["items"])
    gpu_node = nodes[0]
    _kubectl(env, "apply", "-f", "-", stdin=yaml.safe_dump_all(_manifests(gpu_node)))
    assert "gpu.example.com" in _kubectl(env, "get", "deviceclasses")

    registry = in_tree_registry()
    conf = confs.load(CONF, actions=registry.action_names, plugins=registry.plugin_names)
    phases: dict[str, str] = {}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        _, result = run_once(client, conf, registry=registry)
        assert not result.bind_failures, result.bind_failures
        pods = json.loads(_kubectl(env, "get", "pods", "-n", NS, "-o", "json"))["items"]
        phases = {p["metadata"]["name"]: p["status"].get("phase", "") for p in pods}
        if sorted(phases.values()) == ["Pending", "Running", "Running"]:
            break
        time.sleep(0.5)
    assert sorted(phases.values()) == ["Pending", "Running", "Running"], _kubectl(env, "describe", "pods", "-n", NS)

    claims = {o["metadata"]["name"]: o for o in json.loads(_kubectl(env, "get", "resourceclaims", "-n", NS,
                                                                    "-o", "json"))["items"]}
    pods = {p["metadata"]["name"]: p for p in json.loads(_kubectl(env, "get", "pods", "-n", NS, "-o", "json"))["items"]}
    running = sorted(n for n, ph in phases.items() if ph == "Running")
    [waiting] = [n for n, ph in phases.items() if ph == "Pending"]
    devices = set()
    for name in running:
        claim = claims[f"gpu-{name.rsplit('-', 1)[1]}"]
        assert pods[name]["spec"]["nodeName"] == gpu_node
        [r] = claim["status"]["allocation"]["devices"]["results"]
        assert (r["request"], r["driver"], r["pool"]) == ("gpu", DRIVER, gpu_node)
        devices.add(r["device"])
        assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": name,
                                                   "uid": pods[name]["metadata"]["uid"]}]
    assert devices == {"gpu-0", "gpu-1"}
    waiting_claim = f"gpu-{waiting.rsplit('-', 1)[1]}"
    assert not (claims[waiting_claim].get("status") or {}).get("allocation")

    def failed_scheduling() -> list[str]:
        events = json.loads(_kubectl(env, "get", "events", "-n", NS, "--field-selector",
                                     f"involvedObject.name={waiting}", "-o", "json"))["items"]
        return [e["message"] for e in events if e.get("reason") == "FailedScheduling"]

    wait_for("the FailedScheduling event", lambda: bool(failed_scheduling()), 20, 0.2)
    assert any(f"claim {NS}/{waiting_claim}, request gpu" in m for m in failed_scheduling()), failed_scheduling()


def test_a_claim_from_a_template_is_created_allocated_and_run(cluster: tuple[Any, RestClient]) -> None:
    """devcluster creates the pod's claim from its ResourceClaimTemplate (as kube-controller-manager does) and
    names it in the pod's status; the scheduler allocates it on the other node's GPUs (two: the pod left waiting by
    the test above may take one of them now, when both tests share a cluster; run apart, this test makes its own
    Queue and DeviceClass)."""
    c, client = cluster
    env = dict(os.environ, KUBECONFIG=str(c.kubeconfig))
    _default_queue(client)
    nodes = sorted(n["metadata"]["name"] for n in json.loads(_kubectl(env, "get", "nodes", "-o", "json"))["items"])
    other = nodes[1]
    manifests = [
        DEVICE_CLASS,
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{other}-gpus"},
         "spec": {"driver": DRIVER, "nodeName": other, "pool": {"name": other, "generation": 1,
                                                                  "resourceSliceCount": 1},
                  "devices": [{"name": f"gpu-{k}", "attributes": {"model": {"string": "a100"}}}
                              for k in range(2)]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "one-gpu", "namespace": NS},
         "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
             "deviceClassName": "gpu.example.com"}}]}}}},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
         "metadata": {"name": "pg-t", "namespace": NS}, "spec": {"minMember": 1, "queue": "default"}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "templated", "namespace": NS, "annotations": {
                "scheduling.k8s.io/group-name": "pg-t", "lahar.sh/sim-duration": "600s"}},
         "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                  "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                  "containers": [{"name": "main", "image": "busybox", "resources": {
                      "requests": {"cpu": "100m", "memory": "64Mi"}, "claims": [{"name": "gpu"}]}}]}},
    ]
    _kubectl(env, "apply", "-f", "-", stdin=yaml.safe_dump_all(manifests))

    def pod() -> dict[str, Any]:
        return json.loads(_kubectl(env, "get", "pod", "templated", "-n", NS, "-o", "json"))

    wait_for("the claim named in the pod's status", lambda: bool(pod()["status"].get("resourceClaimStatuses")), 20,
             0.2)
    assert pod()["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": "templated-gpu"}]
    registry = in_tree_registry()
    conf = confs.load(CONF, actions=registry.action_names, plugins=registry.plugin_names)
    deadline = time.monotonic() + 120           # sessions and the simulated kubelet are slow on a loaded machine
    sessions: list[Any] = []
    while time.monotonic() < deadline and pod()["status"].get("phase") != "Running":
        _, result = run_once(client, conf, registry=registry)
        assert not result.bind_failures, result.bind_failures
        sessions.append(result.bound)
        time.sleep(0.5)
    got = pod()
    assert got["status"].get("phase") == "Running" and got["spec"].get("nodeName") == other, (
        got["spec"].get("nodeName"), got["status"],
        _kubectl(env, "get", "resourceclaims,events", "-n", NS, "-o", "wide"), sessions[-3:])
    claim = json.loads(_kubectl(env, "get", "resourceclaim", "templated-gpu", "-n", NS, "-o", "json"))
    [r] = claim["status"]["allocation"]["devices"]["results"]
    assert (r["request"], r["driver"], r["pool"]) == ("gpu", DRIVER, other) and r["device"] in ("gpu-0", "gpu-1")
    assert claim["metadata"]["ownerReferences"][0]["name"] == "templated"
