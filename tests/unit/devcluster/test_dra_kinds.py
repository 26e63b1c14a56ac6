"""devcluster serves resource.k8s.io/v1 (Dynamic Resource Allocation, structured parameters): DeviceClass and
ResourceSlice cluster-scoped, ResourceClaim (with its status subresource) and ResourceClaimTemplate namespaced; its
workload controllers create a pod's claims from templates (devcluster/workloads/claims.py)."""

from __future__ import annotations

import pytest

from lahar.devcluster.workloads import claims
from lahar.devcluster.workloads.controllers import WorkloadControllers
from lahar.kube import resources
from lahar.kube.apiserver.memory import MemoryClient

NS = "c1"


@pytest.mark.parametrize(("kind", "plural", "namespaced", "subresources"), [
    ("DeviceClass", "deviceclasses", False, frozenset()),
    ("ResourceSlice", "resourceslices", False, frozenset()),
    ("ResourceClaim", "resourceclaims", True, frozenset({"status"})),
    ("ResourceClaimTemplate", "resourceclaimtemplates", True, frozenset()),
], ids=["deviceclass", "resourceslice", "resourceclaim", "resourceclaimtemplate"])
def test_dra_kinds_are_built_in(kind: str, plural: str, namespaced: bool, subresources: frozenset[str]) -> None:
    rt = resources.in_tree().get("resource.k8s.io", "v1", plural)
    assert rt is not None and rt.kind == kind
    assert (rt.namespaced, rt.subresources) == (namespaced, subresources)


def test_claim_status_is_written_through_the_status_subresource() -> None:
    c = MemoryClient()
    reg = c.registry
    c.create(reg.get("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    rt = reg.get("resource.k8s.io", "v1", "resourceclaims")
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "gpu", "namespace": NS},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}
    created = c.create(rt, claim, namespace=NS)
    allocation = {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1",
                                           "device": "gpu-0"}]},
                  "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                      {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}
    created["status"] = {"allocation": allocation, "reservedFor": [{"resource": "pods", "name": "p1", "uid": "u1"}]}
    c.update_status(rt, created, namespace=NS)
    got = c.get(rt, "gpu", namespace=NS)
    assert got["status"]["allocation"] == allocation
    assert got["status"]["reservedFor"] == [{"resource": "pods", "name": "p1", "uid": "u1"}]
    got["status"] = {}  # the main resource does not write status
    c.update(rt, got, namespace=NS)
    assert c.get(rt, "gpu", namespace=NS)["status"]["allocation"] == allocation


TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": NS},
            "spec": {"metadata": {"labels": {"team": "ml"}},
                     "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}}


def _pod(*entries: dict, statuses: list | None = None) -> dict:
    p: dict = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NS, "uid": "u-p"},
               "spec": {"resourceClaims": list(entries), "containers": [{"name": "c", "image": "busybox"}]}}
    if statuses is not None:
        p["status"] = {"resourceClaimStatuses": statuses}
    return p


TEMPLATE_CASES = [
    ("by-name-needs-nothing", _pod({"name": "gpu", "resourceClaimName": "mine"}), {"one-gpu": TEMPLATE}, [], None, []),
    ("template-creates-claim", _pod({"name": "gpu", "resourceClaimTemplateName": "one-gpu"}), {"one-gpu": TEMPLATE},
     ["p-gpu"], [{"name": "gpu", "resourceClaimName": "p-gpu"}], []),
    ("already-created", _pod({"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                             statuses=[{"name": "gpu", "resourceClaimName": "p-gpu"}]), {"one-gpu": TEMPLATE},
     [], None, []),
    ("template-missing-waits", _pod({"name": "gpu", "resourceClaimTemplateName": "one-gpu"}), {}, [], None,
     ["one-gpu"]),
]


@pytest.mark.parametrize(("pod", "templates", "created", "statuses", "waiting"), [c[1:] for c in TEMPLATE_CASES],
                         ids=[c[0] for c in TEMPLATE_CASES])
def test_template_claims(pod: dict, templates: dict, created: list, statuses: list | None, waiting: list) -> None:
    plan = claims.template_claims(pod, templates)
    assert [c["metadata"]["name"] for c in plan.create] == created
    assert (plan.statuses, plan.waiting) == (statuses, waiting)
    for c in plan.create:
        assert c["spec"] == TEMPLATE["spec"]["spec"] and c["metadata"]["labels"] == {"team": "ml"}
        assert c["metadata"]["annotations"][claims.POD_CLAIM_NAME_ANNOTATION] == "gpu"
        assert c["metadata"]["ownerReferences"][0]["uid"] == "u-p"


def test_controllers_create_the_claim_of_a_template_and_name_it_in_the_pod_status() -> None:
    c = MemoryClient()
    reg = c.registry
    c.create(reg.get("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    c.create(reg.get("resource.k8s.io", "v1", "resourceclaimtemplates"), TEMPLATE, namespace=NS)
    pod = _pod({"name": "gpu", "resourceClaimTemplateName": "one-gpu"})
    pod["metadata"].pop("uid")
    pod["spec"]["schedulerName"] = "volcano"
    c.create(reg.get("", "v1", "pods"), pod, namespace=NS)
    WorkloadControllers(c, default_scheduler=False).sync()
    got = c.get(reg.get("", "v1", "pods"), "p", namespace=NS)
    assert got["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": "p-gpu"}]
    claim = c.get(reg.get("resource.k8s.io", "v1", "resourceclaims"), "p-gpu", namespace=NS)
    assert claim["metadata"]["ownerReferences"][0]["uid"] == got["metadata"]["uid"]


ALLOCATION = {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1",
                                       "device": "gpu-0"}]}}


def _reserved(*names: str, finalizer: bool = True) -> dict:
    meta = {"name": "c", "namespace": NS, **({"finalizers": [claims.CLAIM_FINALIZER]} if finalizer else {})}
    return {"metadata": meta, "status": {
        "allocation": ALLOCATION, "reservedFor": [{"resource": "pods", "name": n, "uid": f"u-{n}"} for n in names]}}


def _live(name: str, phase: str = "Running", uid: str = "") -> dict:
    return {"metadata": {"name": name, "uid": uid or f"u-{name}"}, "status": {"phase": phase}}


RELEASE = [
    ("all-running-unchanged", _reserved("a", "b"), {"a": _live("a"), "b": _live("b")}, None),
    ("one-gone", _reserved("a", "b"), {"a": _live("a")},
     {"allocation": ALLOCATION, "reservedFor": [{"resource": "pods", "name": "a", "uid": "u-a"}]}),
    ("last-finished-deallocates", _reserved("a"), {"a": _live("a", "Succeeded")}, {}),
    ("replaced-by-a-new-pod-of-the-same-name", _reserved("a"), {"a": _live("a", uid="u-new")}, {}),
    # the real resourceclaim-controller deallocates only a claim its scheduler protected with the finalizer
    ("last-finished-without-the-finalizer-stays-allocated", _reserved("a", finalizer=False),
     {"a": _live("a", "Succeeded")}, {"allocation": ALLOCATION}),
    ("not-reserved", {"metadata": {"name": "c"}, "status": {"allocation": ALLOCATION}}, {}, None),
]


@pytest.mark.parametrize(("claim", "pods", "want"), [r[1:] for r in RELEASE], ids=[r[0] for r in RELEASE])
def test_released_status(claim: dict, pods: dict, want: dict | None) -> None:
    assert claims.released_status(claim, pods) == want


def test_controllers_deallocate_a_claim_whose_pod_finished() -> None:
    c = MemoryClient()
    reg = c.registry
    c.create(reg.get("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    pods_rt, rt = reg.get("", "v1", "pods"), reg.get("resource.k8s.io", "v1", "resourceclaims")
    pod = _pod({"name": "gpu", "resourceClaimName": "c"})
    pod["metadata"].pop("uid")
    pod["spec"]["schedulerName"] = "volcano"
    created = c.create(pods_rt, pod, namespace=NS)
    claim = c.create(rt, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                          "metadata": {"name": "c", "namespace": NS, "finalizers": [claims.CLAIM_FINALIZER]},
                          "spec": {"devices": {"requests": []}}},
                     namespace=NS)
    claim["status"] = {"allocation": ALLOCATION, "reservedFor": [
        {"resource": "pods", "name": "p", "uid": created["metadata"]["uid"]}]}
    c.update_status(rt, claim, namespace=NS)
    controllers = WorkloadControllers(c, default_scheduler=False)
    controllers.sync()
    assert c.get(rt, "c", namespace=NS)["status"]["reservedFor"]  # the pod still runs
    created = c.get(pods_rt, "p", namespace=NS)
    created["status"] = {"phase": "Succeeded"}
    c.update_status(pods_rt, created, namespace=NS)
    controllers.sync()
    assert not c.get(rt, "c", namespace=NS).get("status")
    assert not c.get(rt, "c", namespace=NS)["metadata"].get("finalizers")  # deallocated: no longer protected
