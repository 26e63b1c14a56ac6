"""The volume predicates (scheduler/plugins/_volumes.py): kube-scheduler's VolumeBinding, VolumeZone and
NodeVolumeLimits decisions as tables, then a session over the in-memory cluster: binding at commit and gangs whose
claims cannot all be satisfied."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from lahar.devcluster.workloads.controllers import WorkloadControllers
from lahar.kube.apiserver.memory import MemoryClient
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework.snapshot import Node
from lahar.scheduler.plugins import _volumes as vol
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_once
from tests.builders import node, pod, podgroup, queue

NS = "c1"


def sc(name: str, mode: str = "WaitForFirstConsumer", provisioner: str = "lahar.sh/local",
       topologies: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    o: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                         "provisioner": provisioner, "volumeBindingMode": mode}
    if topologies is not None:
        o["allowedTopologies"] = topologies
    return o


def pvc(name: str, cls: str = "local", size: str = "1Gi", volume: str = "") -> dict[str, Any]:
    o: dict[str, Any] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                         "metadata": {"name": name, "namespace": NS},
                         "spec": {"storageClassName": cls, "accessModes": ["ReadWriteOnce"],
                                  "resources": {"requests": {"storage": size}}}}
    if volume:
        o["spec"]["volumeName"] = volume
    return o


def pv(name: str, cls: str = "local", size: str = "10Gi", host: str | None = None, zone: str | None = None,
       claim: str = "", driver: str = "") -> dict[str, Any]:
    o: dict[str, Any] = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": {}},
                         "spec": {"storageClassName": cls, "accessModes": ["ReadWriteOnce"],
                                  "capacity": {"storage": size}}, "status": {"phase": "Available"}}
    if host:
        o["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}
    if zone:
        o["metadata"]["labels"]["topology.kubernetes.io/zone"] = zone
    if claim:
        o["spec"]["claimRef"] = {"namespace": NS, "name": claim}
        o["status"]["phase"] = "Bound"
    if driver:
        o["spec"]["csi"] = {"driver": driver, "volumeHandle": name}
    return o


def snode(name: str = "n1", zone: str = "z1") -> Node:
    return Node({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                       "topology.kubernetes.io/zone": zone}}}, 0)


def by_name(*objs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs}


ZONE_A = [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["z1"]}]}]
ZONE_B = [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["z2"]}]}]

# (claim, pvs, classes, taken) → (ok, reason, action kind, action volume)
CLAIM_CASES = [
    ("missing-claim", None, [], [], {}, (False, 'persistentvolumeclaim "data" not found', "", "")),
    ("bound-pv-here", pvc("data", volume="pv1"), [pv("pv1", host="n1", claim="data")], [sc("local")], {},
     (True, "", "", "")),
    ("bound-pv-elsewhere", pvc("data", volume="pv1"), [pv("pv1", host="n2", claim="data")], [sc("local")], {},
     (False, vol.NODE_CONFLICT, "", "")),
    ("bound-pv-missing", pvc("data", volume="gone"), [], [sc("local")], {},
     (False, "pvc(s) bound to non-existent pv(s)", "", "")),
    ("bound-pv-other-zone", pvc("data", volume="pv1"), [pv("pv1", zone="z2", claim="data")], [sc("local")], {},
     (False, vol.ZONE_CONFLICT, "", "")),
    ("bound-pv-zone-set", pvc("data", volume="pv1"), [pv("pv1", zone="z2__z1", claim="data")], [sc("local")], {},
     (True, "", "", "")),
    ("no-class", pvc("data", cls="fast"), [], [], {},
     (False, 'storageclass.storage.k8s.io "fast" not found', "", "")),
    ("immediate-unbound", pvc("data", cls="imm"), [], [sc("imm", mode="Immediate")], {},
     (False, vol.IMMEDIATE_UNBOUND, "", "")),
    ("wffc-provision", pvc("data"), [], [sc("local")], {}, (True, "", "provision", "")),
    ("wffc-topology-ok", pvc("data"), [], [sc("local", topologies=ZONE_A)], {}, (True, "", "provision", "")),
    ("wffc-topology-no", pvc("data"), [], [sc("local", topologies=ZONE_B)], {}, (False, vol.BIND_CONFLICT, "", "")),
    ("static-here", pvc("data"), [pv("pv1", host="n1")], [sc("local", provisioner=vol.NO_PROVISIONER)], {},
     (True, "", "bind", "pv1")),
    ("static-smallest-fits", pvc("data", size="5Gi"), [pv("big", size="100Gi"), pv("small", size="5Gi"),
                                                      pv("tiny", size="1Gi")],
     [sc("local", provisioner=vol.NO_PROVISIONER)], {}, (True, "", "bind", "small")),
    ("static-elsewhere", pvc("data"), [pv("pv1", host="n2")], [sc("local", provisioner=vol.NO_PROVISIONER)], {},
     (False, vol.NODE_CONFLICT, "", "")),
    ("static-taken", pvc("data"), [pv("pv1", host="n1")], [sc("local", provisioner=vol.NO_PROVISIONER)],
     {"pv1": "c1/other"}, (False, vol.BIND_CONFLICT, "", "")),
    ("static-taken-by-me", pvc("data"), [pv("pv1", host="n1")], [sc("local", provisioner=vol.NO_PROVISIONER)],
     {"pv1": "c1/data"}, (True, "", "bind", "pv1")),
    ("static-other-class", pvc("data"), [pv("pv1", cls="slow")], [sc("local", provisioner=vol.NO_PROVISIONER)], {},
     (False, vol.BIND_CONFLICT, "", "")),
    ("static-claimed-by-other", pvc("data"), [pv("pv1", claim="else")],
     [sc("local", provisioner=vol.NO_PROVISIONER)], {}, (False, vol.BIND_CONFLICT, "", "")),
    ("static-else-provision", pvc("data"), [pv("pv1", host="n2")], [sc("local")], {}, (True, "", "provision", "")),
]


@pytest.mark.parametrize(("claim", "pvs", "classes", "taken", "want"), [c[1:] for c in CLAIM_CASES],
                         ids=[c[0] for c in CLAIM_CASES])
def test_claim_on_node(claim, pvs, classes, taken, want) -> None:
    got = vol.claim_on_node(claim, snode(), name="data", namespace=NS, pvs=by_name(*pvs), classes=by_name(*classes),
                            taken=taken)
    assert (got.ok, got.reason, got.action.kind if got.action else "", got.action.volume if got.action else "") \
        == want


def test_volume_zone_can_be_switched_off() -> None:
    claim = pvc("data", volume="pv1")
    pvs = by_name(pv("pv1", zone="z2", claim="data"))
    assert not vol.claim_on_node(claim, snode(), name="data", namespace=NS, pvs=pvs, classes={}).ok
    assert vol.claim_on_node(claim, snode(), name="data", namespace=NS, pvs=pvs, classes={}, zones=False).ok


LIMIT_CASES = [
    ("under-limit", {"csi.x": 2}, {"csi.x": {"c1/old"}}, True),
    ("at-limit", {"csi.x": 1}, {"csi.x": {"c1/old"}}, False),
    ("same-claim-counts-once", {"csi.x": 1}, {"csi.x": {"c1/data"}}, True),
    ("other-driver", {"csi.y": 0}, {}, True),
    ("no-csinode", None, None, True),
]


@pytest.mark.parametrize(("limits", "attached", "ok"), [c[1:] for c in LIMIT_CASES], ids=[c[0] for c in LIMIT_CASES])
def test_node_volume_limits(limits, attached, ok) -> None:
    p = pod("p1").obj
    p["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
    got, _ = vol.pod_on_node(p, snode(), claims={"c1/data": pvc("data", volume="pv1")},
                             pvs=by_name(pv("pv1", claim="data", driver="csi.x")), classes=by_name(sc("local")),
                             csi_limits=limits, attached=attached)
    assert got.ok is ok
    assert got.reason == ("" if ok else vol.VOLUME_COUNT_EXCEEDED)


def test_pod_claims_dedups_and_skips_other_volumes() -> None:
    p = pod("p1").obj
    p["spec"]["volumes"] = [{"name": "a", "persistentVolumeClaim": {"claimName": "x"}}, {"name": "b", "emptyDir": {}},
                            {"name": "c", "persistentVolumeClaim": {"claimName": "x"}},
                            {"name": "d", "persistentVolumeClaim": {"claimName": "y"}}]
    assert vol.pod_claims(p) == ["x", "y"]


# --- a session over the in-memory cluster -----------------------------------------------------------------------

def _conf(**predicate_args: Any) -> str:
    predicates: dict[str, Any] = {"name": "predicates", **({"arguments": predicate_args} if predicate_args else {})}
    return yaml.safe_dump({"actions": "enqueue, allocate", "tiers": [
        {"plugins": [{"name": "gang"}, {"name": "priority"}]},
        {"plugins": [{"name": "proportion"}, predicates, {"name": "nodeorder"}]}]})


CONF = _conf()


def _cluster(classes: list[dict[str, Any]], pvs: list[dict[str, Any]], claims: list[str]) -> MemoryClient:
    c = MemoryClient.with_crds()
    reg = c.registry
    c.create(reg.get("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for i, z in ((1, "z1"), (2, "z2")):
        n = node(f"n{i}").alloc("8", "16Gi").obj
        n["metadata"]["labels"].update({"kubernetes.io/hostname": f"n{i}", "topology.kubernetes.io/zone": z})
        c.create(reg.get("", "v1", "nodes"), n)
    c.create(reg.get("scheduling.volcano.sh", "v1beta1", "queues"), queue("default").obj)
    pg = podgroup("pg1", NS).min(2).queue("default").obj
    pg.setdefault("status", {})["phase"] = "Inqueue"
    c.create(reg.get("scheduling.volcano.sh", "v1beta1", "podgroups"), pg, namespace=NS)
    for o in classes:
        c.create(reg.get("storage.k8s.io", "v1", "storageclasses"), o)
    for o in pvs:
        c.create(reg.get("", "v1", "persistentvolumes"), o)
    for name in claims:
        c.create(reg.get("", "v1", "persistentvolumeclaims"), pvc(name), namespace=NS)
    for i in range(2):
        p = pod(f"w{i}", NS).req(cpu="1").group("pg1").obj
        p["metadata"].pop("uid")
        p["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{i}"}}]
        c.create(reg.get("", "v1", "pods"), p, namespace=NS)
    return c


def _session(c: MemoryClient, conf_text: str = CONF, **commit: Any) -> Any:
    reg = in_tree_registry()
    conf = confs.load(conf_text, actions=reg.action_names, plugins=reg.plugin_names)
    return run_once(c, conf, registry=reg, **commit)


def _get(c: MemoryClient, plural: str, name: str, ns: str | None = None) -> dict[str, Any]:
    group = "storage.k8s.io" if plural == "storageclasses" else ""
    return c.get(c.registry.get(group, "v1", plural), name, namespace=ns)


def test_gang_with_delayed_claims_binds_and_provisions_on_the_nodes() -> None:
    c = _cluster([sc("local")], [], ["data-0", "data-1"])
    decisions, result = _session(c)
    assert sorted(result.bound) == ["c1/w0", "c1/w1"], result.bind_failures
    for i in range(2):
        node_name = _get(c, "pods", f"w{i}", NS)["spec"]["nodeName"]
        claim = _get(c, "persistentvolumeclaims", f"data-{i}", NS)
        assert claim["metadata"]["annotations"][vol.SELECTED_NODE_ANNOTATION] == node_name
    WorkloadControllers(c, default_scheduler=False).sync()  # devcluster's provisioner
    for i in range(2):
        node_name = _get(c, "pods", f"w{i}", NS)["spec"]["nodeName"]
        claim = _get(c, "persistentvolumeclaims", f"data-{i}", NS)
        assert claim["status"]["phase"] == "Bound"
        volume = _get(c, "persistentvolumes", claim["spec"]["volumeName"])
        assert volume["status"]["phase"] == "Bound"
        terms = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        assert {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]} \
            in terms[0]["matchExpressions"]


def test_gang_follows_static_pvs_to_their_nodes() -> None:
    c = _cluster([sc("local", provisioner=vol.NO_PROVISIONER)], [pv("pv-a", host="n2"), pv("pv-b", host="n2")],
                 ["data-0", "data-1"])
    _, result = _session(c)
    assert sorted(result.bound) == ["c1/w0", "c1/w1"], result.bind_failures
    assert {_get(c, "pods", f"w{i}", NS)["spec"]["nodeName"] for i in range(2)} == {"n2"}
    refs = {_get(c, "persistentvolumes", n)["spec"]["claimRef"]["name"] for n in ("pv-a", "pv-b")}
    assert refs == {"data-0", "data-1"}  # each PV assumed once within the session


def test_gang_whose_claims_cannot_all_be_satisfied_binds_nothing() -> None:
    # one static PV for two claims and no provisioner: w0 would fit, w1 never — the gang stays whole, unbound
    c = _cluster([sc("local", provisioner=vol.NO_PROVISIONER)], [pv("pv-a", host="n1")], ["data-0", "data-1"])
    decisions, result = _session(c)
    assert result.bound == [] and decisions.binds == []
    assert "claimRef" not in _get(c, "persistentvolumes", "pv-a")["spec"]
    assert not decisions.volumes


def test_pod_with_a_missing_claim_is_unschedulable_with_the_claim_named() -> None:
    c = _cluster([sc("local")], [], ["data-0"])  # data-1 missing
    decisions, result = _session(c)
    assert result.bound == []
    events = c.list(c.registry.get("", "v1", "events"), namespace=NS)["items"]
    assert any('persistentvolumeclaim "data-1" not found' in (e.get("message") or "") for e in events), \
        [e.get("message") for e in events]


def test_volume_binding_switched_off_ignores_claims() -> None:
    c = _cluster([sc("local")], [], ["data-0"])  # data-1 missing, but nobody looks
    decisions, result = _session(c, _conf(**{"predicate.VolumeBindingEnable": False}))
    assert sorted(result.bound) == ["c1/w0", "c1/w1"] and not decisions.volumes


def test_csi_attach_limit_from_csinode_keeps_pods_off_a_full_node() -> None:
    c = _cluster([sc("local")], [], ["data-0", "data-1"])
    c.create(c.registry.get("storage.k8s.io", "v1", "csinodes"), {
        "apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n1"},
        "spec": {"drivers": [{"name": "lahar.sh/local", "nodeID": "n1", "allocatable": {"count": 0}}]}})
    _, result = _session(c)
    assert sorted(result.bound) == ["c1/w0", "c1/w1"], result.bind_failures
    assert {_get(c, "pods", f"w{i}", NS)["spec"]["nodeName"] for i in range(2)} == {"n2"}


def test_two_claims_of_one_pod_take_two_static_pvs() -> None:
    c = _cluster([sc("local", provisioner=vol.NO_PROVISIONER)], [pv("pv-a", host="n1"), pv("pv-b", host="n1"),
                                                                pv("pv-c", host="n1")], ["data-0", "data-1", "x"])
    pods_rt = c.registry.get("", "v1", "pods")
    w0 = _get(c, "pods", "w0", NS)
    w0["spec"]["volumes"].append({"name": "x", "persistentVolumeClaim": {"claimName": "x"}})
    c.delete(pods_rt, "w0", namespace=NS)
    w0["metadata"] = {k: v for k, v in w0["metadata"].items() if k in ("name", "namespace", "annotations")}
    c.create(pods_rt, w0, namespace=NS)
    decisions, result = _session(c)
    assert sorted(result.bound) == ["c1/w0", "c1/w1"], result.bind_failures
    refs = [_get(c, "persistentvolumes", n)["spec"]["claimRef"]["name"] for n in ("pv-a", "pv-b", "pv-c")]
    assert sorted(refs) == ["data-0", "data-1", "x"]
