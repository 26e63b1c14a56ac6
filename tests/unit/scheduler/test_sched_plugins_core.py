"""Core plugins in isolation: predicates (taints, affinity), nodeorder scores, proportion water-filling, gang and
priority verdicts (shapes of Volcano's plugins/*/…_test.go)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lahar.scheduler.framework.hooks import Vote
from lahar.scheduler.framework.snapshot import Node
from lahar.scheduler.plugins import nodeorder, predicates
from lahar.scheduler.plugins.proportion import QueueAttr, water_fill
from tests.builders import node, pod, podgroup, priority_class, queue, run, tiers_conf

TOLERATIONS = [
    ("equal-match", {"key": "k", "value": "v", "effect": "NoSchedule"}, {"key": "k", "value": "v",
                                                                         "effect": "NoSchedule"}, True),
    ("equal-value-differs", {"key": "k", "value": "x", "effect": "NoSchedule"}, {"key": "k", "value": "v",
                                                                                 "effect": "NoSchedule"}, False),
    ("exists-any-value", {"key": "k", "operator": "Exists"}, {"key": "k", "value": "v", "effect": "NoExecute"}, True),
    ("empty-key-exists-all", {"operator": "Exists"}, {"key": "k", "value": "v", "effect": "NoSchedule"}, True),
    ("effect-differs", {"key": "k", "value": "v", "effect": "NoExecute"}, {"key": "k", "value": "v",
                                                                           "effect": "NoSchedule"}, False),
]


@pytest.mark.parametrize(("tol", "taint", "ok"), [t[1:] for t in TOLERATIONS], ids=[t[0] for t in TOLERATIONS])
def test_tolerates(tol: dict[str, Any], taint: dict[str, Any], ok: bool) -> None:
    assert (predicates.untolerated_taint([taint], [tol]) is None) is ok


@pytest.mark.parametrize("tolerations", [
    [None, {"operator": "Exists"}],
    ["k=v:NoSchedule", {"operator": "Exists"}],
], ids=["null-entry", "string-entry"])
def test_malformed_toleration_entries_tolerate_nothing_and_crash_nothing(tolerations: list[Any]) -> None:
    """A toleration list entry that is no object tolerates nothing (kube.podspec's rule) instead of raising in
    the predicates' filter or nodeorder's PreferNoSchedule score; the well-formed entry still tolerates."""
    p = pod("p1").req(cpu="1").group("pg1")
    p.obj["spec"]["tolerations"] = tolerations
    d = run(pods=[p], nodes=[node("n1").alloc("4", "8Gi").taint("k", "v").taint("soft", effect="PreferNoSchedule")],
            podgroups=[podgroup("pg1").min(1).queue("c1")], queues=[queue("c1")])
    assert d.bind_map() == {"c1/p1": "n1"}


def test_prefer_no_schedule_is_not_a_filter() -> None:
    assert predicates.untolerated_taint([{"key": "k", "effect": "PreferNoSchedule"}], []) is None


AFFINITY = [
    ("in", [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}], True),
    ("notin", [{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}], False),
    ("exists", [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}], True),
    ("doesnotexist", [{"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}], True),
    ("gt", [{"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]}], True),
    ("lt", [{"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["8"]}]}], False),
    ("terms-ored", [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}], True),
    ("empty-term-matches-nothing", [{}], False),
]


@pytest.mark.parametrize(("terms", "ok"), [a[1:] for a in AFFINITY], ids=[a[0] for a in AFFINITY])
def test_node_selector_terms(terms: list[dict[str, Any]], ok: bool) -> None:
    n = Node(node("n1").label(zone="a", cores="16").build(), 0)
    assert predicates.match_node_selector_terms(terms, n) is ok


def test_least_allocated_and_balanced_match_kube_formulas() -> None:
    alloc = np.array([[4000.0, 10000.0], [6000.0, 10000.0]])
    requested = np.array([[3000.0, 5000.0], [3000.0, 5000.0]])
    # kube-scheduler's LeastAllocated: ((4000-3000)*100/4000 + (10000-5000)*100/10000) / 2 = (25 + 50) / 2 = 37
    assert list(nodeorder.least_allocated(alloc, requested)) == [37.0, 50.0]
    # BalancedAllocation: fractions (0.75, 0.5) → std 0.125 → 87; (0.5, 0.5) → 100
    assert list(nodeorder.balanced_allocation(alloc, requested)) == [87.0, 100.0]
    assert list(nodeorder.most_allocated(alloc, requested)) == [62.0, 50.0]


def test_nodeorder_prefers_the_emptier_node() -> None:
    d = run(podgroups=[podgroup("pg1").min(1), podgroup("busy").min(1).phase("Running")],
            pods=[pod("b").req("3", "1Gi").group("busy").on("n1"), pod("p").req("1", "1Gi").group("pg1")],
            nodes=[node("n1").alloc("4", "8Gi"), node("n2").alloc("4", "8Gi")], queues=[queue("c1")])
    assert d.bind_map() == {"c1/p": "n2"}


def _attr(name: str, weight: int, request: float, cap: float = np.inf, guarantee: float = 0.0) -> QueueAttr:
    z = np.zeros(1)
    return QueueAttr(name, weight, z.copy(), z.copy(), np.array([request]), z.copy(), z.copy(),
                     np.array([guarantee]), np.array([cap]))


WATER = [
    ("by-weight", [("a", 1, 100.0), ("b", 3, 100.0)], 100.0, {"a": 25.0, "b": 75.0}),
    ("capped-by-request-redistributes", [("a", 1, 10.0), ("b", 1, 100.0)], 100.0, {"a": 10.0, "b": 90.0}),
    ("all-satisfied", [("a", 1, 10.0), ("b", 1, 20.0)], 100.0, {"a": 10.0, "b": 20.0}),
]


@pytest.mark.parametrize(("queues", "total", "want"), [w[1:] for w in WATER], ids=[w[0] for w in WATER])
def test_proportion_water_fill(queues: list[tuple[str, int, float]], total: float, want: dict[str, float]) -> None:
    attrs = [_attr(*q) for q in queues]
    water_fill(np.array([total]), attrs)
    assert {a.name: round(float(a.deserved[0]), 6) for a in attrs} == want


def test_proportion_capability_and_guarantee() -> None:
    attrs = [_attr("a", 1, 100.0, cap=20.0), _attr("b", 1, 100.0), _attr("c", 1, 1.0, guarantee=30.0)]
    water_fill(np.array([100.0]), attrs)
    got = {a.name: round(float(a.deserved[0]), 6) for a in attrs}
    assert got == {"a": 20.0, "b": 50.0, "c": 30.0}  # c floored at its guarantee; b takes the rest


def test_gang_job_valid_messages() -> None:
    d = run(podgroups=[podgroup("pg1").min(3)], pods=[pod("p1").req("1", "1Gi").group("pg1")],
            nodes=[node("n1").alloc("4", "8Gi")], queues=[queue("c1")])
    assert d.binds == []
    from lahar.scheduler.framework.snapshot import build
    from lahar.scheduler.plugins.gang import Gang
    snap = build(pods=[pod("p1").req("1", "1Gi").group("pg1").build()], podgroups=[podgroup("pg1").min(3).build()],
                 queues=[queue("c1").build()])
    st = Gang().job_valid(snap.jobs["c1/pg1"])
    assert st is not None and st.plugin == "gang" and st.reason == "NotEnoughTasks"
    assert st.message == "Not enough valid tasks for gang-scheduling, valid: 1, min: 3"
    snap = build(pods=[pod("p1").req("1", "1Gi").group("pg1").role("ps").build()],
                 podgroups=[podgroup("pg1").min(2).min_task(ps=1, worker=1).build()], queues=[queue("c1").build()])
    st = Gang().job_valid(snap.jobs["c1/pg1"])
    assert st is not None and st.message == "Not enough valid pods of each task for gang-scheduling"
    assert Gang().job_pipelined(snap.jobs["c1/pg1"]) is Vote.REJECT


def test_priority_orders_tasks_and_jobs() -> None:
    conf = tiers_conf("allocate", ["priority", "gang"], ["predicates", "nodeorder"])
    d = run(podgroups=[podgroup("lo").min(1).priority_class("low"), podgroup("hi").min(1).priority_class("high")],
            pods=[pod("a").req("2", "1Gi").group("lo"), pod("b").req("2", "1Gi").group("hi")],
            nodes=[node("n1").alloc("2", "8Gi")], queues=[queue("c1")],
            priority_classes=[priority_class("low", 1), priority_class("high", 100)], conf=conf)
    assert d.bind_map() == {"c1/b": "n1"}
    d = run(podgroups=[podgroup("pg").min(1)],
            pods=[pod("a").req("2", "1Gi").group("pg").priority(1), pod("b").req("2", "1Gi").group("pg").priority(9)],
            nodes=[node("n1").alloc("2", "8Gi")], queues=[queue("c1")], conf=conf)
    assert d.bind_map() == {"c1/b": "n1"}


# --- upstream gang_test.go (shouldSkipUnschedulableForReleasing) and conformance_test.go, as session runs ----------

def _releasing(name: str, node_name: str | None) -> pod:
    p = pod(name).req("1", "1Gi").group("pg1").deleting()
    return p.on(node_name) if node_name else p


GANG_RELEASING: list[dict[str, Any]] = [
    dict(id="partial-termination-no-condition", min=2,
         pods=[pod("running").req("1", "1Gi").group("pg1").on("node-1"), _releasing("releasing", "node-2")],
         unschedulable=False),
    dict(id="pending-replacement-still-needs-condition", min=2,
         pods=[pod("running").req("1", "1Gi").group("pg1").on("node-1"), _releasing("releasing", "node-2"),
               pod("replacement").req("9", "1Gi").group("pg1")], unschedulable=True),
    dict(id="pipelined-replacement-still-needs-condition", min=2,  # fits only onto node-2's releasing CPU
         pods=[pod("running").req("1", "1Gi").group("pg1").on("node-1"), _releasing("releasing", "node-2"),
               pod("replacement").req("1", "1Gi").group("pg1")], unschedulable=True),
    dict(id="never-scheduled-releasing-not-counted", min=1, pods=[_releasing("releasing", None)],
         unschedulable=True),
    dict(id="scheduled-tasks-below-min-available", min=3,
         pods=[pod("running").req("1", "1Gi").group("pg1").on("node-1"), _releasing("releasing", "node-2")],
         unschedulable=True),
]


@pytest.mark.parametrize("case", GANG_RELEASING, ids=[c["id"] for c in GANG_RELEASING])
def test_gang_unschedulable_condition_with_releasing_tasks_upstream(case: dict[str, Any]) -> None:
    """A gang short of minMember only because some of its scheduled pods are terminating gets no Unschedulable
    condition (those pods still hold their slots); pending or pipelined work, or too few pods, still gets one."""
    d = run(podgroups=[podgroup("pg1").min(case["min"]).phase("Running")], pods=case["pods"],
            nodes=[node("node-1").alloc("1", "8Gi"), node("node-2").alloc("1", "8Gi"), node("node-3").alloc("0", "8Gi")],
            queues=[queue("c1")])
    conds = [c for c in d.podgroups["c1/pg1"].status.get("conditions", []) if c["type"] == "Unschedulable"]
    assert bool(conds) is case["unschedulable"], d.podgroups["c1/pg1"].status


def test_conformance_spares_kube_system_upstream() -> None:
    """TestConformancePlugin: of two preemptees, the one in kube-system is never a victim."""
    from lahar.scheduler.framework.snapshot import build
    from lahar.scheduler.plugins.conformance import Conformance
    snap = build(pods=[pod("test-pod", "kube-system").req("1", "1Gi").group("pg1").on("test-node").build(),
                       pod("test-pod", "test-namespace").req("1", "1Gi").group("pg1").on("test-node").build()],
                 podgroups=[podgroup("pg1", "kube-system").build(), podgroup("pg1", "test-namespace").build()],
                 queues=[queue("c1").build()])
    tasks = [t for j in snap.jobs.values() for t in j.tasks.values()]
    victims = Conformance().preemptable(tasks[0], sorted(tasks, key=lambda t: t.namespace))
    assert [t.namespace for t in victims or []] == ["test-namespace"]


# upstream priority_test.go TestPreempt: allocate then preempt with priority alone in the tier, its eviction votes
# (enablePreemptable, enableReclaimable) on or off; the UnifiedEvictable case is not ported (no gang preempt action)
def _priority_tier(evict: bool) -> str:
    from lahar.scheduler.framework.conf import SWITCHES
    on = {"enableTaskOrder", "enableJobOrder", "enableJobStarving"} | ({"enablePreemptable", "enableReclaimable"}
                                                                        if evict else set())
    return tiers_conf("allocate, preempt", [{"name": "priority", **{s: s in on for s in SWITCHES
                                                                      if s != "enableHierarchy"}}])


PRIORITY_PREEMPT: list[dict[str, Any]] = [
    dict(id="enable-preemptable-evicts-lower-priority-task", evict=True,
         pods=[pod("preemptee1", "ns1").req("3", "3G").group("pg1").on("node1").preemptable(True),
               pod("preemptee2", "ns1").req("3", "3G").group("pg1").on("node1").preemptable(True).priority(1000),
               pod("preemptor1", "ns2").req("3", "3G").group("pg2")],
         nodes=[node("node1").alloc("6", "6G", pods=10), node("node2").alloc("2", "2G", pods=10)],
         evicted=["ns1/preemptee1"], pipelined={"ns2/preemptor1": "node1"}),
    dict(id="disable-preemptable-evicts-nothing", evict=False,
         pods=[pod("preemptee1", "ns1").req("3", "3G").group("pg1").on("node1").preemptable(True),
               pod("preemptee2", "ns1").req("3", "3G").group("pg1").on("node2").preemptable(False),
               pod("preemptor1", "ns2").req("3", "3G").group("pg2")],
         nodes=[node("node1").alloc("3", "3G", pods=10), node("node2").alloc("3", "3G", pods=10)],
         evicted=[], pipelined={}),
]


@pytest.mark.parametrize("case", PRIORITY_PREEMPT, ids=[c["id"] for c in PRIORITY_PREEMPT])
def test_priority_preempt_upstream(case: dict[str, Any]) -> None:
    d = run(podgroups=[podgroup("pg1", "ns1").min(1).queue("q1").priority_class("low-priority"),
                       podgroup("pg2", "ns2").min(1).queue("q1").priority_class("high-priority")],
            pods=case["pods"], nodes=case["nodes"], queues=[queue("q1").capability(cpu="6", memory="6G")],
            priority_classes=[priority_class("low-priority", 100), priority_class("high-priority", 1000)],
            conf=_priority_tier(case["evict"]))
    assert sorted(f"{e.namespace}/{e.name}" for e in d.evictions) == case["evicted"]
    assert d.pipelined == case["pipelined"]
