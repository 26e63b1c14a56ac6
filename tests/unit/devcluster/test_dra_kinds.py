"""devcluster serves resource.k8s.io/v1 (Dynamic Resource Allocation, structured parameters): DeviceClass and
ResourceSlice cluster-scoped, ResourceClaim (with its status subresource) and ResourceClaimTemplate namespaced."""

from __future__ import annotations

import pytest

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
