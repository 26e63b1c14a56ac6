"""allocate: Volcano's allocate_test.go shapes as data (pods, nodes, podgroups, queues → binds), gang
all-or-nothing, pipelining onto releasing resources, and Hypothesis invariants (whole gangs, no over-commit)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lahar.kube import quantity
from tests.builders import node, pod, podgroup, queue, run, tiers_conf

CASES: list[dict[str, Any]] = [
    dict(id="prepredicate-failed-node-selector",
         podgroups=[podgroup("pg1").min(1)],
         pods=[pod("p1").req("1", "1G").group("pg1").role("master").selector(nodeRole="master"),
               pod("p2").req("1", "1G").group("pg1").role("worker").selector(nodeRole="worker")],
         nodes=[node("n1").alloc("2", "4Gi", 10).label(nodeRole="worker")],
         queues=[queue("c1")],
         binds={"c1/p2": "n1"}),
    dict(id="continue-until-min-member-met",
         podgroups=[podgroup("pg1").min(2).min_task(master=1, worker=1)],
         pods=[pod("p0").req("1", "1G").group("pg1").role("master").selector(nodeRole="master"),
               pod("p1").req("1", "1G").group("pg1").role("master").selector(nodeRole="master"),
               pod("p2").req("1", "1G").group("pg1").role("worker").selector(nodeRole="worker"),
               pod("p3").req("1", "1G").group("pg1").role("worker").selector(nodeRole="worker")],
         nodes=[node("n1").alloc("1", "2Gi", 10).label(nodeRole="master"),
                node("n2").alloc("1", "2Gi", 10).label(nodeRole="worker")],
         queues=[queue("c1")],
         binds={"c1/p0": "n1", "c1/p2": "n2"}),
    dict(id="master-min-member-unmet-break",
         podgroups=[podgroup("pg1").min(2).min_task(master=2, worker=0)],
         pods=[pod("p0").req("1", "1G").group("pg1").role("master").selector(nodeRole="master"),
               pod("p1").req("1", "1G").group("pg1").role("master").selector(nodeRole="master"),
               pod("p2").req("1", "1G").group("pg1").role("worker").selector(nodeRole="worker"),
               pod("p3").req("1", "1G").group("pg1").role("worker").selector(nodeRole="worker")],
         nodes=[node("n1").alloc("1", "2Gi", 10).label(nodeRole="master"),
                node("n2").alloc("2", "2Gi", 10).label(nodeRole="worker")],
         queues=[queue("c1")],
         binds={}),
    dict(id="one-job-two-pods-one-node",
         podgroups=[podgroup("pg1")],
         pods=[pod("p1").req("1", "1G").group("pg1"), pod("p2").req("1", "1G").group("pg1")],
         nodes=[node("n1").alloc("2", "4Gi", 10)],
         queues=[queue("c1")],
         binds={"c1/p1": "n1", "c1/p2": "n1"}),
    dict(id="two-jobs-one-node-fair-share",
         podgroups=[podgroup("pg1", "c1").queue("c1"), podgroup("pg2", "c2").queue("c2")],
         pods=[pod("pg1-p-1", "c1").req("1", "1G").group("pg1"), pod("pg1-p-2", "c1").req("1", "1G").group("pg1"),
               pod("pg2-p-1", "c2").req("1", "1G").group("pg2"), pod("pg2-p-2", "c2").req("1", "1G").group("pg2")],
         nodes=[node("n1").alloc("2", "4G", 10)],
         queues=[queue("c1"), queue("c2")],
         binds={"c1/pg1-p-1": "n1", "c2/pg2-p-1": "n1"}),
    dict(id="big-job-does-not-block-other-queue",
         podgroups=[podgroup("pg1").queue("c1"), podgroup("pg2").queue("c2")],
         pods=[pod("p1").req("3", "1G").group("pg1"), pod("p2").req("1", "1G").group("pg2")],
         nodes=[node("n1").alloc("2", "4G", 10)],
         queues=[queue("c1"), queue("c2")],
         binds={"c1/p2": "n1"}),
    dict(id="gang-all-or-nothing",
         podgroups=[podgroup("pg1").min(3)],
         pods=[pod(f"p{i}").req("2", "1Gi").group("pg1") for i in range(3)],
         nodes=[node("n1").alloc("4", "8Gi"), node("n2").alloc("1", "8Gi")],
         queues=[queue("c1")],
         binds={}),
    dict(id="gang-spreads-least-requested",
         podgroups=[podgroup("pg1").min(2)],
         pods=[pod(f"p{i}").req("2", "1Gi").group("pg1") for i in range(2)],
         nodes=[node("n1").alloc("4", "8Gi"), node("n2").alloc("4", "8Gi")],
         queues=[queue("c1")],
         binds={"c1/p0": "n1", "c1/p1": "n2"}),
    dict(id="pending-podgroup-not-enqueued-is-skipped",
         podgroups=[podgroup("pg1").min(1).phase("Pending").min_resources(cpu="3")],
         pods=[pod("p1").req("1", "1G").group("pg1")],
         nodes=[node("n1").alloc("4", "4Gi")],
         queues=[queue("c1").capability(cpu="2")],
         conf=tiers_conf("enqueue, allocate", ["gang", "proportion", "predicates", "nodeorder"]),
         binds={}),
    dict(id="pending-podgroup-enqueued-then-allocated",
         podgroups=[podgroup("pg1").min(1).phase("Pending").min_resources(cpu="1")],
         pods=[pod("p1").req("1", "1G").group("pg1")],
         nodes=[node("n1").alloc("4", "4Gi")],
         queues=[queue("c1").capability(cpu="2")],
         conf=tiers_conf("enqueue, allocate", ["gang", "proportion", "predicates", "nodeorder"]),
         binds={"c1/p1": "n1"}),
    dict(id="unknown-queue-skipped",
         podgroups=[podgroup("pg1").queue("nope")],
         pods=[pod("p1").req("1", "1G").group("pg1")],
         nodes=[node("n1").alloc("2", "4Gi")],
         queues=[queue("c1")],
         binds={}),
    dict(id="other-scheduler-pods-count-as-used",
         podgroups=[podgroup("pg1").min(1)],
         pods=[pod("x", "kube-system").req("3", "1Gi").scheduler("default-scheduler").on("n1"),
               pod("p1").req("2", "1Gi").group("pg1")],
         nodes=[node("n1").alloc("4", "8Gi"), node("n2").alloc("4", "8Gi")],
         queues=[queue("c1")],
         binds={"c1/p1": "n2"}),
    dict(id="taint-and-toleration",
         podgroups=[podgroup("pg1").min(2)],
         pods=[pod("p1").req("1", "1Gi").group("pg1").tolerate("dedicated", "gpu"),
               pod("p2").req("1", "1Gi").group("pg1")],
         nodes=[node("n1").alloc("1", "8Gi").taint("dedicated", "gpu"), node("n2").alloc("1", "8Gi")],
         queues=[queue("c1")],
         binds={"c1/p1": "n1", "c1/p2": "n2"}),
    dict(id="unschedulable-node-and-not-ready-node",
         podgroups=[podgroup("pg1").min(1)],
         pods=[pod("p1").req("1", "1Gi").group("pg1")],
         nodes=[node("n1").alloc("8", "8Gi").unschedulable(), node("n2").alloc("8", "8Gi").not_ready(),
                node("n3").alloc("1", "8Gi")],
         queues=[queue("c1")],
         binds={"c1/p1": "n3"}),
    dict(id="max-pods",
         podgroups=[podgroup("pg1").min(1)],
         pods=[pod("p1").req("1", "1Gi").group("pg1"), pod("p2").req("1", "1Gi").group("pg1")],
         nodes=[node("n1").alloc("8", "8Gi", pods=1)],
         queues=[queue("c1")],
         binds={"c1/p1": "n1"}),
    dict(id="required-node-affinity",
         podgroups=[podgroup("pg1").min(1)],
         pods=[pod("p1").req("1", "1Gi").group("pg1").affinity(
             [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b", "c"]}]}])],
         nodes=[node("n1").alloc("8", "8Gi").label(zone="a"), node("n2").alloc("8", "8Gi").label(zone="b")],
         queues=[queue("c1")],
         binds={"c1/p1": "n2"}),
    dict(id="gpu-scalar-resource",
         podgroups=[podgroup("pg1").min(1)],
         pods=[pod("p1").req("1", "1Gi", nvidia__com__gpu="2").group("pg1")],
         nodes=[node("n1").alloc("8", "8Gi"), node("n2").alloc("8", "8Gi", nvidia__com__gpu="1"),
                node("n3").alloc("8", "8Gi", nvidia__com__gpu="8")],
         queues=[queue("c1")],
         binds={"c1/p1": "n3"}),
    dict(id="closed-queue-allocates-nothing",
         podgroups=[podgroup("pg1").min(1)],
         pods=[pod("p1").req("1", "1Gi").group("pg1")],
         nodes=[node("n1").alloc("8", "8Gi")],
         queues=[queue("c1").state("Closed")],
         binds={}),
    dict(id="best-effort-left-to-backfill",
         podgroups=[podgroup("pg1").min(0)],
         pods=[pod("p1").group("pg1")],
         nodes=[node("n1").alloc("8", "8Gi")],
         queues=[queue("c1")],
         binds={}),
]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_allocate_binds(case: dict[str, Any]) -> None:
    kw = {"conf": case["conf"]} if "conf" in case else {}
    d = run(pods=case["pods"], nodes=case["nodes"], podgroups=case["podgroups"], queues=case["queues"], **kw)
    assert d.bind_map() == case["binds"]


# volcano-sh/volcano pkg/scheduler/actions/allocate/allocate_test.go (current): TestAllocate's first six cases are
# CASES above (prepredicate x3, one job / two jobs on one node, a big job not blocking another queue); below are
# TestFareShareAllocate, TestAllocateWithPVC and TestAllocateWithDRA, in our words. The network-topology tests
# (hyperNodes, subGroups) are in test_sched_network_topology.py and test_sched_subgroups.py.
FAIRSHARE_CONF = tiers_conf("allocate", [
    {"name": "drf", "enablePreemptable": True, "enableJobOrder": True},
    {"name": "proportion", "enableQueueOrder": True, "enableReclaimable": True, "enabledAllocatable": False},
    "predicates", "nodeorder"])
VOLUME_CONF = tiers_conf("allocate", ["gang", "predicates"])
DRA_CONF = tiers_conf("allocate", ["gang", {"name": "predicates",
                                            "arguments": {"predicate.DynamicResourceAllocationEnable": True}}])


def _with_pvc(p: pod, claim: str) -> pod:
    p.obj["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return p


def _storage(*pvs: str) -> dict[str, list[dict[str, Any]]]:
    """Upstream's volume objects: StorageClass `sc` (WaitForFirstConsumer), claims pvc1 and pvc2 of 1Gi in `c1`,
    and the named 2Gi PVs of that class (no node affinity)."""
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "sc"},
          "provisioner": "ignore-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}
    claims = [{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": n, "namespace": "c1"},
               "spec": {"storageClassName": "sc", "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}}, "status": {"phase": "Pending"}}
              for n in ("pvc1", "pvc2")]
    volumes = [{"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": n},
                "spec": {"storageClassName": "sc", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "2Gi"}},
                "status": {"phase": "Available"}} for n in pvs]
    return {"storageclasses": [sc], "persistentvolumeclaims": claims, "persistentvolumes": volumes}


def _with_claim(p: pod, claim: str) -> pod:
    p.obj["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    p.obj["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu", "request": "gpu"}]
    return p


def _dra(selector: str) -> dict[str, list[dict[str, Any]]]:
    """Upstream's DRA objects: DeviceClass `gpu` selecting with `selector`, claim `claim1` in `c1` for one device
    of it, and a ResourceSlice of one device on n1."""
    cls = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
           "spec": {"selectors": [{"cel": {"expression": selector}}]}}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "claim1", "namespace": "c1"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}
    rs = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-slice"},
          "spec": {"driver": "gpu.example.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1},
                   "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}}}]}}
    return {"deviceclasses": [cls], "resourceclaims": [claim], "resourceslices": [rs]}


UPSTREAM: list[dict[str, Any]] = [
    dict(id="fairshare-low-drf-share-queue-first",  # q-2 holds nothing, so it goes first and takes the room
         podgroups=[podgroup("pg-small-1", "ns-1").queue("q-1").phase("Running"),
                    podgroup("pg-large-1", "ns-1").queue("q-1"), podgroup("pg-large-2", "ns-1").queue("q-2")],
         pods=[pod("pod-small-1", "ns-1").req("1", "1G").group("pg-small-1").on("node-1"),
               pod("pod-large-1", "ns-1").req("2", "2G").group("pg-large-1"),
               pod("pod-large-2", "ns-1").req("3", "2G").group("pg-large-2")],
         nodes=[node("node-1").alloc("5", "5G", 10)], queues=[queue("q-1"), queue("q-2")], conf=FAIRSHARE_CONF,
         binds={"ns-1/pod-large-2": "node-1"}),
    dict(id="fairshare-share-updated-before-queue-pushed-back",  # q-2, then q-1 (now lower), then q-2 finds no room
         podgroups=[podgroup("pg-small-1", "ns-1").queue("q-1").phase("Running"),
                    podgroup("pg-large-1", "ns-1").queue("q-1"), podgroup("pg-small-2", "ns-1").queue("q-2"),
                    podgroup("pg-large-2", "ns-1").queue("q-2")],
         pods=[pod("pod-small-1", "ns-1").req("1", "1G").group("pg-small-1").on("node-1"),
               pod("pod-large-1", "ns-1").req("2", "2G").group("pg-large-1"),
               pod("pod-large-2", "ns-1").req("2", "2G").group("pg-large-2"),
               pod("pod-small-2", "ns-1").req("1", "1G").group("pg-small-2")],
         nodes=[node("node-1").alloc("5", "5G", 10)], queues=[queue("q-1"), queue("q-2")], conf=FAIRSHARE_CONF,
         binds={"ns-1/pod-large-1": "node-1", "ns-1/pod-large-2": "node-1"}),
    dict(id="fairshare-job-without-pending-tasks-queue-put-back",
         podgroups=[podgroup("pg-1", "ns-1").queue("q-1").phase("Running"), podgroup("pg-2", "ns-1").queue("q-1")],
         pods=[pod("pod-1", "ns-1").req("1", "1G").group("pg-1").on("node-1"),
               pod("pod-2", "ns-1").req("2", "2G").group("pg-2")],
         nodes=[node("node-1").alloc("5", "5G", 10)], queues=[queue("q-1")], conf=FAIRSHARE_CONF,
         binds={"ns-1/pod-2": "node-1"}),
    dict(id="pvc-static-pv-node-too-small",  # a gang of two 1-CPU pods, one 1-CPU node: nothing binds
         podgroups=[podgroup("pg1").min(2)],
         pods=[_with_pvc(pod("p1").req("1", "1G").group("pg1"), "pvc1"),
               _with_pvc(pod("p2").req("1", "1G").group("pg1"), "pvc2")],
         nodes=[node("n1").alloc("1", "4Gi", 10)], queues=[queue("c1")], conf=VOLUME_CONF, binds={},
         others=_storage("pv1")),
    dict(id="pvc-static-pv-node-big-enough",  # a static PV for each claim: both pods bind
         podgroups=[podgroup("pg1").min(2)],
         pods=[_with_pvc(pod("p1").req("1", "1G").group("pg1"), "pvc1"),
               _with_pvc(pod("p2").req("1", "1G").group("pg1"), "pvc2")],
         nodes=[node("n2").alloc("2", "4Gi", 10)], queues=[queue("c1")], conf=VOLUME_CONF,
         binds={"c1/p1": "n2", "c1/p2": "n2"}, others=_storage("pv1", "pv2")),
    dict(id="dra-claim-allocated",  # the class selects the node's one device: the claim gets it, the pod binds
         podgroups=[podgroup("pg1").min(1)],
         pods=[_with_claim(pod("p1").req("1", "1G").group("pg1"), "claim1")],
         nodes=[node("n1").alloc("2", "4Gi", 10)], queues=[queue("c1")], conf=DRA_CONF, binds={"c1/p1": "n1"},
         others=_dra('device.driver == "gpu.example.com"')),
    dict(id="dra-claim-cel-runtime-error",  # the DeviceClass selector fails at runtime: upstream binds nothing
         podgroups=[podgroup("pg1").min(1)],
         pods=[_with_claim(pod("p1").req("1", "1G").group("pg1"), "claim1")],
         nodes=[node("n1").alloc("2", "4Gi", 10)], queues=[queue("c1")], conf=DRA_CONF, binds={},
         others=_dra('device.attributes["gpu.example.com"].healthy')),
]


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(reason=c["xfail"], strict=True))
                                  if "xfail" in c else c for c in UPSTREAM], ids=[c["id"] for c in UPSTREAM])
def test_allocate_upstream(case: dict[str, Any]) -> None:
    d = run(pods=case["pods"], nodes=case["nodes"], podgroups=case["podgroups"], queues=case["queues"],
            conf=case["conf"], **case.get("others", {}))
    assert d.bind_map() == case["binds"]

def test_pipelines_onto_releasing_resources() -> None:
    d = run(podgroups=[podgroup("old").min(1).phase("Running"), podgroup("pg1").min(2)],
            pods=[pod("o1").req("4", "1Gi").group("old").on("n1").deleting(),
                  pod("p1").req("2", "1Gi").group("pg1"), pod("p2").req("2", "1Gi").group("pg1")],
            nodes=[node("n1").alloc("4", "8Gi")], queues=[queue("c1")])
    assert d.binds == []
    assert d.pipelined == {"c1/p1": "n1", "c1/p2": "n1"}
    assert d.podgroups["c1/pg1"].status["phase"] == "Inqueue"
    nominated = {c.name: c.nominated_node for c in d.pod_conditions}
    assert nominated == {"p1": "n1", "p2": "n1"}


def test_gang_unschedulable_condition_and_pod_reasons() -> None:
    d = run(podgroups=[podgroup("pg1").min(4)],
            pods=[pod(f"p-{i}").req("2", "1Gi").group("pg1") for i in range(4)],
            nodes=[node("n1").alloc("4", "8Gi"), node("n2").alloc("1", "8Gi"),
                   node("n3").alloc("8", "8Gi").taint("dedicated", "infra"), node("n4").alloc("1", "8Gi")],
            queues=[queue("c1")])
    assert d.binds == []
    pg = d.podgroups["c1/pg1"]
    assert pg.status["phase"] == "Inqueue"
    cond = next(c for c in pg.status["conditions"] if c["type"] == "Unschedulable")
    assert cond["reason"] == "NotEnoughResources"
    assert cond["message"].startswith("4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, "
                                      "4 minAvailable; Pending: ")
    by_name = {c.name: c for c in d.pod_conditions}  # the condition names the reasons, the Event also counts them
    assert by_name["p-0"].message == ("no node is available: Insufficient cpu, node(s) had untolerated taint "
                                      "{dedicated: infra}.")
    assert by_name["p-0"].event_message == ("0/4 nodes are available: 1 node(s) had untolerated taint "
                                            "{dedicated: infra}, 3 Insufficient cpu.")
    assert {c.reason for c in d.pod_conditions} == {"Unschedulable"}
    assert any(e[1] == "Unschedulable" for e in pg.events)


def test_running_job_stays_running_and_counts() -> None:
    d = run(podgroups=[podgroup("pg1").min(2).phase("Running")],
            pods=[pod("p1").req("1", "1Gi").group("pg1").on("n1"), pod("p2").req("1", "1Gi").group("pg1").on("n1"),
                  pod("p3").req("1", "1Gi").group("pg1").on("n1", "Succeeded")],
            nodes=[node("n1").alloc("4", "8Gi")], queues=[queue("c1")])
    st = d.podgroups["c1/pg1"].status
    assert (st["phase"], st["running"], st["succeeded"]) == ("Running", 2, 1)
    assert d.queues["c1"] == {"cpu": "2", "memory": "2Gi"}


def test_completed_phase() -> None:
    d = run(podgroups=[podgroup("pg1").min(1).phase("Running")],
            pods=[pod("p1").req("1", "1Gi").group("pg1").on("n1", "Succeeded")],
            nodes=[node("n1").alloc("4", "8Gi")], queues=[queue("c1")])
    assert d.podgroups["c1/pg1"].status["phase"] == "Completed"


def test_queue_allocated_propagates_to_ancestors() -> None:
    d = run(podgroups=[podgroup("pg1").min(1).queue("leaf")],
            pods=[pod("p1").req("1", "1Gi").group("pg1")],
            nodes=[node("n1").alloc("4", "8Gi")],
            queues=[queue("root"), queue("mid").parent("root"), queue("leaf").parent("mid")])
    assert d.bind_map() == {"c1/p1": "n1"}
    assert d.queues["leaf"] == d.queues["mid"] == d.queues["root"] == {"cpu": "1", "memory": "1Gi"}


def test_enqueue_absent_promotes_pending() -> None:
    d = run(podgroups=[podgroup("pg1").min(1).phase("Pending")], pods=[pod("p1").req("1", "1G").group("pg1")],
            nodes=[node("n1").alloc("2", "4Gi")], queues=[queue("c1")],
            conf=tiers_conf("allocate", ["gang", "predicates", "nodeorder"]))
    assert d.bind_map() == {"c1/p1": "n1"}


# --- invariants -----------------------------------------------------------------------------------------------

@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    n_nodes = draw(st.integers(1, 4))
    nodes = [node(f"n{i}").alloc(str(draw(st.integers(1, 6))), f"{draw(st.integers(1, 8))}Gi", pods=draw(
        st.integers(1, 6))) for i in range(n_nodes)]
    pgs, pods = [], []
    for j in range(draw(st.integers(1, 4))):
        size = draw(st.integers(1, 4))
        pgs.append(podgroup(f"pg{j}").min(draw(st.integers(1, size))).queue(draw(st.sampled_from(["q1", "q2"]))))
        for k in range(size):
            pods.append(pod(f"pg{j}-t-{k}").req(str(draw(st.integers(1, 3))), f"{draw(st.integers(1, 3))}Gi")
                        .group(f"pg{j}"))
    return dict(nodes=nodes, podgroups=pgs, pods=pods, queues=[queue("q1"), queue("q2").weight(2)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_gangs_whole_or_nothing_and_no_overcommit(cluster: dict[str, Any]) -> None:
    d = run(**cluster)
    bound = Counter(b.job for b in d.binds)
    for pg in cluster["podgroups"]:
        obj = pg.build()
        key = f"c1/{obj['metadata']['name']}"
        assert bound[key] == 0 or bound[key] >= obj["spec"]["minMember"]
    used: dict[str, list[float]] = {}
    count: Counter[str] = Counter()
    req = {p.build()["metadata"]["name"]: p.build()["spec"]["containers"][0]["resources"]["requests"]
           for p in cluster["pods"]}
    for b in d.binds:
        u = used.setdefault(b.node, [0.0, 0.0])
        u[0] += quantity.parse(req[b.name]["cpu"]).milli_value()
        u[1] += quantity.parse(req[b.name]["memory"]).value()
        count[b.node] += 1
    for n in cluster["nodes"]:
        a = n.build()["status"]["allocatable"]
        name = n.build()["metadata"]["name"]
        if name in used:
            assert used[name][0] <= quantity.parse(a["cpu"]).milli_value()
            assert used[name][1] <= quantity.parse(a["memory"]).value()
            assert count[name] <= int(a["pods"])
