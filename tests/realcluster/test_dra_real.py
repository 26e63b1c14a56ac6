"""Dynamic Resource Allocation judged by the real kube-apiserver (issue 17 item 5): lahar's dispatch, worker,
scheduler and beat on the real-tier stack (tests/realcluster/lahar_stack.py), with the scheduler conf switching on
`predicate.DynamicResourceAllocationEnable` through the ConfigMap the scheduler watches.

A DeviceClass, a ResourceSlice publishing two GPUs of kwok-gpu-0 and three pods with a ResourceClaim of one GPU
each: two run on that node, their claims' `status.allocation` and `reservedFor` written through the real status
subresource (its validation is the judge); the third stays Pending with a FailedScheduling Event naming its claim,
and runs once a trainer is deleted: kube-controller-manager deallocates the claim nobody reserves (it does so only
for claims with the delete-protection finalizer lahar writes before allocating).
Then a pod with a `resourceClaimTemplateName`: kube-controller-manager's resourceclaim-controller creates its claim
(a generated name) and names it in `pod.status.resourceClaimStatuses`; lahar allocates it and the pod runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from lahar.scheduler.cache import CONFIGMAP_KEY, CONFIGMAP_NAME
from lahar.scheduler.commit import CLAIM_FINALIZER
from lahar.scheduler.plugins._dra import node_selector_for
from tests.realcluster.cluster import missing
from tests.realcluster.lahar_stack import LaharStack
from tests.support import wait_for

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("realcluster")]

DRIVER = "gpu.example.com"
GPU_NODE = "kwok-gpu-0"
CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins:
  - {name: overcommit}
  - {name: drf}
  - {name: predicates, arguments: {predicate.DynamicResourceAllocationEnable: true}}
  - {name: proportion}
  - {name: nodeorder}
"""
CONF_NS = "lahar-system"


def _pod(name: str, group: str, claim: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {"scheduling.k8s.io/group-name": group}},
            "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                     "resourceClaims": [{"name": "gpu", **claim}],
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                                   "claims": [{"name": "gpu"}]}}]}}


def _group(name: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"minMember": 1, "queue": "default"}}


def _exactly_one() -> dict[str, Any]:
    return {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER,
                                                                  "allocationMode": "ExactCount", "count": 1}}]}}


@pytest.fixture(scope="module")
def dra(lahar_stack: LaharStack) -> Iterator[tuple[LaharStack, str]]:
    """The controllers running with the DRA conf, the DeviceClass and kwok-gpu-0's slice, a namespace of its own;
    the ConfigMap, slice and class are removed afterwards (the stack is shared with the other real e2e tests)."""
    if reason := missing("kwok", "kube-controller-manager"):
        pytest.skip(reason)
    kubectl = lahar_stack.kubectl
    kubectl("create", "namespace", CONF_NS, check=False)  # AlreadyExists is fine
    kubectl.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIGMAP_NAME},
                   "data": {CONFIGMAP_KEY: CONF}}, CONF_NS)
    lahar_stack.start_controllers()
    ns = f"dra-{uuid.uuid4().hex[:6]}"
    kubectl.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    kubectl.apply(yaml.safe_dump_all([
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{GPU_NODE}-gpus"},
         "spec": {"driver": DRIVER, "nodeName": GPU_NODE,
                  "pool": {"name": GPU_NODE, "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": f"gpu-{k}", "attributes": {"model": {"string": "a100"}},
                               "capacity": {"memory": {"value": "40Gi"}}} for k in range(2)]}},
    ]))
    try:
        yield lahar_stack, ns
    finally:
        kubectl("delete", "namespace", ns, "--wait=false", check=False)
        kubectl("delete", "resourceslice", f"{GPU_NODE}-gpus", "--wait=false", check=False)
        kubectl("delete", "deviceclass", DRIVER, "--wait=false", check=False)
        kubectl("delete", "configmap", CONFIGMAP_NAME, "-n", CONF_NS, "--wait=false", check=False)


def _diagnose(stack: LaharStack, ns: str) -> str:
    describe = stack.kubectl("describe", "pods", "-n", ns, check=False).stdout[-4000:]
    claims = stack.kubectl("get", "resourceclaims", "-n", ns, "-o", "yaml", check=False).stdout[-3000:]
    logs = "\n".join(f"--- {n}\n{stack.log_tail(n, 2500)}" for n in ("scheduler", "worker"))
    return f"{describe}\n--- claims\n{claims}\n{logs}"


def test_two_claims_run_on_the_gpu_node_and_the_third_waits(dra: tuple[LaharStack, str]) -> None:
    stack, ns = dra
    kubectl = stack.kubectl
    docs: list[dict[str, Any]] = []
    for i in range(3):
        docs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"gpu-{i}"},
                     "spec": _exactly_one()})
        docs += [_group(f"pg-{i}"), _pod(f"trainer-{i}", f"pg-{i}", {"resourceClaimName": f"gpu-{i}"})]
    kubectl.apply(yaml.safe_dump_all(docs), ns)

    def phases() -> dict[str, str]:
        return {p["metadata"]["name"]: p.get("status", {}).get("phase", "")
                for p in kubectl.json("get", "pods", "-n", ns)["items"]}

    try:
        wait_for("two trainers Running", lambda: sorted(phases().values()) == ["Pending", "Running", "Running"],
                 timeout=150, interval=1.0)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{_diagnose(stack, ns)}") from e
    pods = {p["metadata"]["name"]: p for p in kubectl.json("get", "pods", "-n", ns)["items"]}
    claims = {c["metadata"]["name"]: c for c in kubectl.json("get", "resourceclaims", "-n", ns)["items"]}
    running = sorted(n for n, p in pods.items() if p["status"].get("phase") == "Running")
    [waiting] = [n for n, p in pods.items() if p["status"].get("phase") == "Pending"]
    devices = set()
    for name in running:
        claim = claims[f"gpu-{name.rsplit('-', 1)[1]}"]
        assert pods[name]["spec"]["nodeName"] == GPU_NODE
        [r] = claim["status"]["allocation"]["devices"]["results"]
        assert (r["request"], r["driver"], r["pool"]) == ("gpu", DRIVER, GPU_NODE), r
        devices.add(r["device"])
        assert claim["status"]["allocation"]["nodeSelector"] == node_selector_for(GPU_NODE)
        assert claim["metadata"]["finalizers"] == [CLAIM_FINALIZER]  # what lets kcm deallocate it later
        assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": name,
                                                   "uid": pods[name]["metadata"]["uid"]}]
    assert devices == {"gpu-0", "gpu-1"}
    waiting_claim = f"gpu-{waiting.rsplit('-', 1)[1]}"
    assert not (claims[waiting_claim].get("status") or {}).get("allocation")

    def failed_scheduling() -> list[str]:
        events = kubectl.json("get", "events", "-n", ns, "--field-selector", f"involvedObject.name={waiting}")
        return [e["message"] for e in events["items"] if e.get("reason") == "FailedScheduling"]

    wait_for("the FailedScheduling event", lambda: bool(failed_scheduling()), timeout=30, interval=0.5)
    assert any(f"claim {ns}/{waiting_claim}, request gpu" in m for m in failed_scheduling()), failed_scheduling()
    # one trainer gone: kube-controller-manager drops it from its claim's reservedFor and deallocates the claim,
    # so the waiting trainer gets that device
    kubectl("delete", "pod", running[0], "-n", ns, "--wait=true", "--timeout=60s", "--grace-period=0", "--force")
    try:
        wait_for("the waiting trainer Running on the freed device",
                 lambda: phases().get(waiting) == "Running", timeout=90, interval=1.0)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{_diagnose(stack, ns)}") from e
    def freed() -> bool:
        claim = kubectl.json("get", "resourceclaim", f"gpu-{running[0].rsplit('-', 1)[1]}", "-n", ns)
        return not (claim.get("status") or {}).get("allocation") and not claim["metadata"].get("finalizers")

    wait_for("kube-controller-manager to deallocate the deleted trainer's claim", freed, timeout=30, interval=0.5)
    kubectl("delete", "pods", "--all", "-n", ns, "--wait=true", "--timeout=60s", "--grace-period=0", "--force")
    kubectl("delete", "resourceclaims", "--all", "-n", ns, "--wait=true", "--timeout=60s")


def test_a_claim_from_a_template_is_created_by_kcm_and_the_pod_runs(dra: tuple[LaharStack, str]) -> None:
    stack, ns = dra
    kubectl = stack.kubectl
    kubectl.apply(yaml.safe_dump_all([
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
         "spec": {"spec": _exactly_one()}},
        _group("pg-t"), _pod("templated", "pg-t", {"resourceClaimTemplateName": "one-gpu"}),
    ]), ns)

    def pod() -> dict[str, Any]:
        return dict(kubectl.json("get", "pod", "templated", "-n", ns))

    try:
        wait_for("the generated claim named in the pod's status",
                 lambda: bool(pod().get("status", {}).get("resourceClaimStatuses")), timeout=60, interval=0.5)
        wait_for("the templated pod Running", lambda: pod()["status"].get("phase") == "Running", timeout=150,
                 interval=1.0)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{_diagnose(stack, ns)}") from e
    got = pod()
    [status] = got["status"]["resourceClaimStatuses"]
    assert status["name"] == "gpu" and status["resourceClaimName"].startswith("templated-gpu-"), status
    assert got["spec"]["nodeName"] == GPU_NODE
    claim = kubectl.json("get", "resourceclaim", status["resourceClaimName"], "-n", ns)
    assert claim["metadata"]["ownerReferences"][0]["name"] == "templated"
    [r] = claim["status"]["allocation"]["devices"]["results"]
    assert (r["request"], r["driver"], r["pool"]) == ("gpu", DRIVER, GPU_NODE) and r["device"] in ("gpu-0", "gpu-1")
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "templated",
                                               "uid": got["metadata"]["uid"]}]
