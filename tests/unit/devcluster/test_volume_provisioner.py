"""devcluster's simulated provisioner and PV binder (devcluster/workloads/volumes.py): `claim_plan` as a table, and
the controllers' pass over the in-memory store (StorageClass and CSINode are served)."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.devcluster.workloads import volumes as vols
from lahar.devcluster.workloads.controllers import WorkloadControllers
from lahar.kube import resources
from lahar.kube.apiserver.memory import MemoryClient

NS = "c1"


def sc(name: str = "local", mode: str = "WaitForFirstConsumer", provisioner: str = "lahar.sh/local") -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": provisioner, "volumeBindingMode": mode, "reclaimPolicy": "Delete"}


def pvc(name: str = "data", cls: str = "local", node: str = "", volume: str = "", phase: str = "Pending") -> dict:
    o: dict[str, Any] = {"metadata": {"name": name, "namespace": NS, "uid": f"u-{name}"},
                         "spec": {"storageClassName": cls, "accessModes": ["ReadWriteOnce"],
                                  "resources": {"requests": {"storage": "2Gi"}}}, "status": {"phase": phase}}
    if node:
        o["metadata"]["annotations"] = {vols.SELECTED_NODE_ANNOTATION: node}
    if volume:
        o["spec"]["volumeName"] = volume
    return o


def pv(name: str, *, host: str = "", claim: str = "", size: str = "5Gi", cls: str = "local",
       phase: str = "Available") -> dict:
    o: dict[str, Any] = {"metadata": {"name": name}, "spec": {"storageClassName": cls, "capacity": {"storage": size},
                                                             "accessModes": ["ReadWriteOnce"]},
                         "status": {"phase": phase}}
    if host:
        o["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}
    if claim:
        o["spec"]["claimRef"] = {"namespace": NS, "name": claim}
    return o


NODES = {n: {"metadata": {"name": n, "labels": {"kubernetes.io/hostname": n, "topology.kubernetes.io/zone": z}}}
         for n, z in (("n1", "z1"), ("n2", "z2"))}


def names(*objs: dict) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objs}


# (claim, classes, pvs) → (PV created?, PV bound (name or ""), reason fragment)
CASES = [
    ("wffc-waits-for-consumer", pvc(), [sc()], [], (False, "", "waiting for first consumer")),
    ("wffc-selected-provisions", pvc(node="n2"), [sc()], [], (True, "pvc-u-data", "")),
    ("wffc-selected-static-on-node", pvc(node="n2"), [sc()], [pv("a", host="n1"), pv("b", host="n2")],
     (False, "b", "")),
    ("immediate-static", pvc(cls="imm"), [sc("imm", mode="Immediate")],
     [pv("big", cls="imm", size="50Gi"), pv("fit", cls="imm", size="2Gi"), pv("small", cls="imm", size="1Gi")],
     (False, "fit", "")),
    ("immediate-provisions", pvc(cls="imm"), [sc("imm", mode="Immediate")], [], (True, "pvc-u-data", "")),
    ("claimref-by-scheduler", pvc(), [sc(provisioner=vols.NO_PROVISIONER)], [pv("s", host="n1", claim="data")],
     (False, "s", "")),
    ("no-provisioner-no-pv", pvc(node="n1"), [sc(provisioner=vols.NO_PROVISIONER)], [pv("s", host="n2")],
     (False, "", "no persistent volumes available")),
    ("no-class", pvc(cls="nope"), [], [], (False, "", 'storageclass.storage.k8s.io "nope" not found')),
    ("already-bound", pvc(volume="s", phase="Bound"), [sc()], [pv("s", claim="data", phase="Bound")],
     (False, "", "")),
]


@pytest.mark.parametrize(("claim", "classes", "pvs", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_claim_plan(claim, classes, pvs, want) -> None:
    plan = vols.claim_plan(claim, classes=names(*classes), pvs=names(*pvs), nodes=NODES)
    created, bound, reason = want
    assert (plan.create_pv is not None) is created
    assert (plan.pv_patch[0] if plan.pv_patch else "") == bound
    assert reason in plan.reason
    if bound:
        assert plan.claim_patch["spec"]["volumeName"] == bound
        assert plan.claim_status["phase"] == "Bound"


def test_provisioned_pv_carries_node_and_zone_affinity() -> None:
    plan = vols.claim_plan(pvc(node="n2"), classes=names(sc()), pvs={}, nodes=NODES)
    assert plan.create_pv is not None
    exprs = plan.create_pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"]
    assert {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n2"]} in exprs
    assert {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z2"]} in exprs
    assert plan.create_pv["metadata"]["labels"]["topology.kubernetes.io/zone"] == "z2"
    assert plan.create_pv["spec"]["claimRef"]["uid"] == "u-data"


def test_a_new_claim_gets_phase_pending() -> None:
    claim = pvc()
    del claim["status"]
    plan = vols.claim_plan(claim, classes=names(sc()), pvs={}, nodes=NODES)
    assert plan.claim_status == {"phase": "Pending"} and plan.pv_patch is None


def test_storage_kinds_are_served() -> None:
    plurals = {(rt.group, rt.plural) for rt in resources.core()}
    assert {("", "persistentvolumeclaims"), ("", "persistentvolumes"), ("storage.k8s.io", "storageclasses"),
            ("storage.k8s.io", "csinodes"), ("storage.k8s.io", "csidrivers"),
            ("storage.k8s.io", "csistoragecapacities")} <= plurals


def test_controllers_bind_an_immediate_claim_in_the_store() -> None:
    c = MemoryClient()
    reg = c.registry
    c.create(reg.get("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    c.create(reg.get("storage.k8s.io", "v1", "storageclasses"), sc("imm", mode="Immediate"))
    claim = pvc(cls="imm")
    claim["metadata"].pop("uid")
    c.create(reg.get("", "v1", "persistentvolumeclaims"), {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                                           **claim}, namespace=NS)
    WorkloadControllers(c, default_scheduler=False).sync()
    got = c.get(reg.get("", "v1", "persistentvolumeclaims"), "data", namespace=NS)
    assert got["status"]["phase"] == "Bound"
    volume = c.get(reg.get("", "v1", "persistentvolumes"), got["spec"]["volumeName"])
    assert volume["status"]["phase"] == "Bound"
    assert volume["spec"]["claimRef"]["uid"] == got["metadata"]["uid"]
    assert "nodeAffinity" not in volume["spec"]
