"""nodeorder plugin: kube-scheduler's score formulas (noderesources, tainttoleration, imagelocality,
interpodaffinity, podtopologyspread score tables, as data) with Volcano's weights, and Volcano's nodeorder_test."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Session
from lahar.scheduler.plugins import nodeorder
from lahar.scheduler.registry import in_tree_registry
from tests.builders import node, pod, podgroup, queue, run, tiers_conf
from tests.unit.scheduler.test_sched_predicates import ZONE, ZONES, existing, spread, term, zoned

GI = 1024.0 ** 3

RESOURCES = [
    # (id, allocatable rows, requested rows, least, most, balanced)
    ("kube-least-example", [[4000, 10000], [6000, 10000]], [[3000, 5000], [3000, 5000]], [37, 50], [62, 50],
     [87, 100]),
    ("over-capacity", [[4000, 10000]], [[5000, 5000]], [25], [75], [75]),
    ("zero-allocatable-dim-skipped", [[0, 10000]], [[100, 5000]], [50], [50], [100]),
    ("empty-node", [[4000, 8000]], [[0, 0]], [100], [0], [100]),
]


@pytest.mark.parametrize(("alloc", "req", "least", "most", "balanced"), [c[1:] for c in RESOURCES],
                         ids=[c[0] for c in RESOURCES])
def test_resource_formulas(alloc: list[list[float]], req: list[list[float]], least: list[float], most: list[float],
                           balanced: list[float]) -> None:
    a, r = np.array(alloc, dtype=float), np.array(req, dtype=float)
    assert list(nodeorder.least_allocated(a, r)) == least
    assert list(nodeorder.most_allocated(a, r)) == most
    assert list(nodeorder.balanced_allocation(a, r)) == balanced


def test_balanced_allocation_three_resources_uses_the_standard_deviation() -> None:
    a = np.array([[4000.0, 8.0, 8.0]])
    r = np.array([[2000.0, 4.0, 8.0]])  # fractions 0.5, 0.5, 1.0 → std 0.2357 → 76
    assert list(nodeorder.balanced_allocation(a, r)) == [76.0]


NORMALIZE = [
    ("all-zero-reverse", [0, 0, 0], [100, 100, 100]),
    ("reverse", [0, 1, 2], [100, 50, 0]),
    ("reverse-floor", [1, 3], [67, 0]),
]


@pytest.mark.parametrize(("counts", "want"), [c[1:] for c in NORMALIZE], ids=[c[0] for c in NORMALIZE])
def test_taint_toleration_normalize(counts: list[int], want: list[int]) -> None:
    assert list(nodeorder.reverse_normalize(np.array(counts, dtype=float))) == want


IMAGES = [
    ("below-min", 10 * 1024 * 1024, 1, 0),
    ("at-max", 1000 * 1024 * 1024, 1, 100),
    ("half-two-containers", 1000 * 1024 * 1024, 2, 49),
]


@pytest.mark.parametrize(("total", "containers", "want"), [c[1:] for c in IMAGES], ids=[c[0] for c in IMAGES])
def test_image_locality_priority(total: int, containers: int, want: int) -> None:
    assert list(nodeorder.image_locality(np.array([float(total)]), containers)) == [want]


def test_default_weights_are_volcanos() -> None:
    assert nodeorder.DEFAULT_WEIGHTS == {
        "leastrequested.weight": 1, "mostrequested.weight": 0, "balancedresource.weight": 1,
        "nodeaffinity.weight": 2, "podaffinity.weight": 2, "tainttoleration.weight": 3,
        "imagelocality.weight": 1, "podtopologyspread.weight": 2}
    p = nodeorder.NodeOrder({"tainttoleration.weight": "5", "podaffinity.weight": "x"})
    assert p.taint_weight == 5 and p.pod_affinity_weight == 2


# --- Volcano's nodeorder_test ------------------------------------------------------------------------------------

VOLCANO = [
    ("leastAllocated-strategy", {"leastrequested.weight": 1, "mostrequested.weight": 0}, "n2"),
    ("mostAllocated-strategy", {"leastrequested.weight": 0, "mostrequested.weight": 1}, "n1"),
]


@pytest.mark.parametrize(("args", "want"), [c[1:] for c in VOLCANO], ids=[c[0] for c in VOLCANO])
def test_volcano_nodeorder_strategies(args: dict[str, int], want: str) -> None:
    conf = tiers_conf("allocate", ["gang", {"name": "nodeorder", "arguments": args}])
    d = run(pods=[pod("p1").req("1", "1G").group("pg1")], podgroups=[podgroup("pg1").min(0)],
            nodes=[node("n1").alloc("2", "4Gi", pods=10), node("n2").alloc("4", "8Gi", pods=10)],
            queues=[queue("c1")], conf=conf)
    assert d.bind_map() == {"c1/p1": want}


# --- exact scores through a session ---------------------------------------------------------------------------

CONF = tiers_conf("allocate", ["gang"], ["predicates", "nodeorder"])


def scores(pods: list[Any], nodes: list[Any], name: str = "p", args: dict[str, Any] | None = None) -> dict[str, float]:
    reg = in_tree_registry()
    conf = CONF if args is None else tiers_conf("allocate", ["gang"], ["predicates", {"name": "nodeorder",
                                                                                      "arguments": args}])
    snap = snapshots.build(pods=[p.build() for p in pods], nodes=[n.build() for n in nodes],
                           podgroups=[podgroup("pg").min(1).build(), podgroup("running").min(0).build()],
                           queues=[queue("c1").build()])
    ssn = Session(snap, confs.load(conf, actions=reg.action_names, plugins=reg.plugin_names), reg)
    task = next(t for t in snap.tasks.values() if t.name == name)
    idx = np.arange(len(ssn.arrays))
    return dict(zip(ssn.arrays.names, ssn.node_scores(task, idx).tolist(), strict=True))


def test_plain_pod_scores_resources_plus_constant_taint_toleration() -> None:
    got = scores([pod("p").req("1", "2Gi").group("pg")], [node("n1").alloc("4", "8Gi"), node("n2").alloc("2", "8Gi")])
    # n1: least ⌊(75 + 75) / 2⌋ = 75, balanced 100; n2: least ⌊(50 + 75) / 2⌋ = 62, balanced ⌊(1 − .125)·100⌋ = 87
    # TaintToleration: no PreferNoSchedule taints anywhere → 100 on every node, × 3
    assert got == {"n1": 75 + 100 + 300, "n2": 62 + 87 + 300}


def test_prefer_no_schedule_taint_scores() -> None:
    nodes = [node("n1").alloc("4", "8Gi").taint("a", "1", "PreferNoSchedule").taint("b", "2", "PreferNoSchedule"),
             node("n2").alloc("4", "8Gi").taint("a", "1", "PreferNoSchedule"), node("n3").alloc("4", "8Gi")]
    base = scores([pod("p").req("1", "2Gi").group("pg")], nodes, args={"tainttoleration.weight": 0})
    got = scores([pod("p").req("1", "2Gi").group("pg")], nodes)
    assert {k: got[k] - base[k] for k in got} == {"n1": 0, "n2": 150, "n3": 300}
    tolerant = pod("p").req("1", "2Gi").group("pg").tolerate("a", "1", "PreferNoSchedule")
    got = scores([tolerant], nodes)
    assert {k: got[k] - base[k] for k in got} == {"n1": 0, "n2": 300, "n3": 300}
    d = run(pods=[pod("p").req("1", "2Gi").group("pg")], nodes=nodes, podgroups=[podgroup("pg").min(1)],
            queues=[queue("c1")], conf=CONF)
    assert d.bind_map() == {"c1/p": "n3"}


def test_preferred_node_affinity_adds_matched_weights_unnormalised() -> None:
    p = pod("p").req("1", "2Gi").group("pg")
    p.obj["spec"]["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}},
        {"weight": 3, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}},
        {"weight": 9, "preference": {}}]}}
    nodes = [node("n1").alloc("4", "8Gi").label(disk="ssd", zone="a"), node("n2").alloc("4", "8Gi").label(zone="a"),
             node("n3").alloc("4", "8Gi")]
    base = scores([copy.deepcopy(p)], nodes, args={"nodeaffinity.weight": 0})
    got = scores([p], nodes)
    assert {k: got[k] - base[k] for k in got} == {"n1": 16, "n2": 6, "n3": 0}  # (5 + 3) × 2, 3 × 2, 0


def test_image_locality_prefers_the_node_with_the_image() -> None:
    big = 800 * 1024 * 1024
    nodes = [node("n1").alloc("4", "8Gi"), node("n2").alloc("4", "8Gi")]
    nodes[1].obj["status"]["images"] = [{"names": ["registry/app:v1"], "sizeBytes": big}]
    p = pod("p").req("1", "2Gi").group("pg")
    p.obj["spec"]["containers"][0]["image"] = "registry/app:v1"
    got = scores([p], nodes)
    # scaled size = 800 MB × 1/2 nodes = 400 MB → ⌊100 · (400 − 23) / (1000 − 23)⌋ = 38
    assert got["n2"] - got["n1"] == 38


def _preferred(p: pod, kind: str, weight: int, t: dict[str, Any]) -> pod:
    p.obj["spec"].setdefault("affinity", {})[kind] = {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "podAffinityTerm": t}]}
    return p


def test_inter_pod_preferred_affinity_and_anti_affinity() -> None:
    nodes = [copy.deepcopy(n) for n in ZONES]
    db = existing("db", "b1", {"app": "db"})
    near = _preferred(pod("p").req("1", "2Gi").group("pg"), "podAffinity", 10, term({"app": "db"}, ZONE))
    base = scores([db, pod("p").req("1", "2Gi").group("pg")], nodes)
    got = scores([db, near], nodes)
    assert {k: got[k] - base[k] for k in got} == {"a1": 0, "a2": 0, "b1": 200, "b2": 200}
    far = _preferred(pod("p").req("1", "2Gi").group("pg"), "podAntiAffinity", 10, term({"app": "db"}, ZONE))
    got = scores([db, far], nodes)
    assert {k: got[k] - base[k] for k in got} == {"a1": 200, "a2": 200, "b1": 0, "b2": 0}


def test_existing_pods_terms_attract_the_incoming_pod() -> None:
    nodes = [copy.deepcopy(n) for n in ZONES]
    friend = existing("friend", "a2", {"app": "friend"})
    friend.obj["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term({"app": "web"})]}}
    p = pod("p").req("1", "2Gi").group("pg").label(app="web")
    base = scores([existing("friend", "a2", {"app": "friend"}), copy.deepcopy(p)], nodes)
    got = scores([friend, p], nodes)
    assert {k: got[k] - base[k] for k in got} == {"a1": 0, "a2": 200, "b1": 0, "b2": 0}  # hard weight 1 → 100 × 2


def test_spread_schedule_anyway_prefers_the_emptier_zone() -> None:
    nodes = [copy.deepcopy(n) for n in ZONES]
    others = [existing(f"w{i}", "a1", {"app": "web"}) for i in range(3)] + [existing("w9", "b1", {"app": "web"})]
    p = spread(pod("p").req("1", "2Gi").group("pg").label(app="web"), ZONE, when="ScheduleAnyway")
    base = scores([*copy.deepcopy(others), pod("p").req("1", "2Gi").group("pg").label(app="web")], nodes)
    got = scores([*others, p], nodes)
    delta = {k: got[k] - base[k] for k in got}
    # zone a holds 3, zone b 1: weight ln(2 + 2); raw a = round(3·1.386) = 4, b = round(1.386) = 1;
    # normalised 100 · (4 + 1 − s) / 4 → a 25, b 100; × 2
    assert delta == {"a1": 50, "a2": 50, "b1": 200, "b2": 200}
    bare = node("bare").alloc("8", "16Gi")
    got = scores([*others, spread(pod("p").req("1", "2Gi").group("pg").label(app="web"), ZONE, when="ScheduleAnyway")],
                 [*nodes, bare])
    base = scores([*others, pod("p").req("1", "2Gi").group("pg").label(app="web")], [*nodes, bare])
    assert got["bare"] - base["bare"] == 0  # a node without the topology key scores 0


def test_spread_schedule_anyway_balances_a_gang_across_zones() -> None:
    pods = []
    for i in range(4):
        pods.append(spread(pod(f"w-{i}").req("1", "1Gi").group("pg").label(app="web"), ZONE, when="ScheduleAnyway"))
    nodes = [zoned("a1", "a", cpu="64"), zoned("a2", "a", cpu="64"), zoned("b1", "b", cpu="8")]
    d = run(pods=pods, nodes=nodes, podgroups=[podgroup("pg").min(4)], queues=[queue("c1")], conf=CONF)
    zones = [n[:1] for n in d.bind_map().values()]
    assert sorted(zones) == ["a", "a", "b", "b"]


# --- upstream nodeorder_test.go TestNodeOrderPlugin, case by case: allocate with gang (job ready) and nodeorder
# (node order) alone, every weight 0 except the one under test. TestInitPlugin is not ported: it checks Go-side
# registration lists that lahar has no counterpart of (a weight of 0 simply adds nothing here) -----------------------

def _nodeorder_conf(**weights: int) -> str:
    from lahar.scheduler.framework.conf import SWITCHES
    off = {s: False for s in SWITCHES if s != "enableHierarchy"}
    names = ("leastrequested", "mostrequested", "balancedresource", "nodeaffinity", "tainttoleration", "podaffinity",
             "podtopologyspread", "imagelocality")
    args = {f"{n}.weight": weights.get(n, 0) for n in names}
    return tiers_conf("allocate", [{"name": "gang", **off, "enableJobReady": True},
                                   {"name": "nodeorder", **off, "enableNodeOrder": True, "arguments": args}])


def _preferred_zone(p: pod) -> pod:
    p.obj["spec"]["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["zone1"]}]}}]}}
    return p


def _prefers_service_s1(p: pod) -> pod:
    p.obj["spec"]["affinity"] = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": {"service": "s1"}},
                                            "topologyKey": "kubernetes.io/hostname"}}]}}
    return p


def _spread_by_zone(p: pod) -> pod:
    p.obj["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "zone",
                                                   "whenUnsatisfiable": "ScheduleAnyway",
                                                   "labelSelector": {"matchLabels": {"app": "foo"}}}]
    return p


def _host(n: node) -> node:
    return n.label(**{"kubernetes.io/hostname": n.obj["metadata"]["name"]})  # type: ignore[return-value]


NODEORDER_UPSTREAM: list[dict[str, Any]] = [
    dict(id="least-allocated", weights={"leastrequested": 1},
         pods=[pod("p1").req("1", "1G").group("pg1")],
         nodes=[node("n1").alloc("2", "4Gi", 10), node("n2").alloc("4", "8Gi", 10)], binds={"c1/p1": "n2"}),
    dict(id="most-allocated", weights={"mostrequested": 1},
         pods=[pod("p1").req("1", "1G").group("pg1")],
         nodes=[node("n1").alloc("2", "4Gi", 10), node("n2").alloc("4", "8Gi", 10)], binds={"c1/p1": "n1"}),
    dict(id="balanced-allocation-prefers-the-balanced-node", weights={"balancedresource": 10},
         pods=[pod("p1").req("1", "1Gi").group("pg1")],
         nodes=[node("n1").alloc("2", "2Gi", 10), node("n2").alloc("4", "2Gi", 10)], binds={"c1/p1": "n1"}),
    dict(id="preferred-node-affinity", weights={"nodeaffinity": 10},
         pods=[_preferred_zone(pod("p1").req("1", "1G").group("pg1"))],
         nodes=[node("n1").alloc("2", "4Gi", 10).label(zone="zone1"), node("n2").alloc("2", "4Gi", 10).label(zone="zone2")],
         binds={"c1/p1": "n1"}),
    dict(id="prefer-no-schedule-taint-avoided", weights={"tainttoleration": 10},
         pods=[pod("p1").req("1", "1G").group("pg1")],
         nodes=[node("n1").alloc("2", "4Gi", 10), node("n2").alloc("2", "4Gi", 10).taint("key1", "value1", "PreferNoSchedule")],
         binds={"c1/p1": "n1"}),
    dict(id="preferred-inter-pod-affinity", weights={"podaffinity": 10},
         pods=[pod("p1").req("1", "1G").group("pg1").label(service="s1").on("n1"),
               pod("p-noise").req("1", "1G").group("pg1").label(service="s2").on("n3"),
               _prefers_service_s1(pod("p2").req("1", "1G").group("pg1"))],
         nodes=[_host(node(f"n{i}").alloc("2", "4Gi", 10)) for i in (1, 2, 3)], binds={"c1/p2": "n1"}),
    dict(id="topology-spread-schedule-anyway-emptiest-zone", weights={"podtopologyspread": 10},
         pods=[pod("p1").req("1", "1G").group("pg1").label(app="foo").on("n1"),
               pod("p2").req("1", "1G").group("pg1").label(app="foo").on("n1"),
               pod("p3").req("1", "1G").group("pg1").label(app="foo").on("n2"),
               _spread_by_zone(pod("p4").req("1", "1G").group("pg1").label(app="foo"))],
         nodes=[node(f"n{i}").alloc("4", "4Gi", 10).label(zone=f"zone{i}") for i in (1, 2, 3)], binds={"c1/p4": "n3"}),
]


@pytest.mark.parametrize("case", NODEORDER_UPSTREAM, ids=[c["id"] for c in NODEORDER_UPSTREAM])
def test_nodeorder_upstream(case: dict[str, Any]) -> None:
    d = run(podgroups=[podgroup("pg1").min(0).queue("c1")], pods=case["pods"], nodes=case["nodes"],
            queues=[queue("c1")], conf=_nodeorder_conf(**case["weights"]))
    assert d.bind_map() == case["binds"]
