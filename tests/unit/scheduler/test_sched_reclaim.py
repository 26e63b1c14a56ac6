"""reclaim: a queue below its deserved share takes resources back from reclaimable queues above theirs
(Volcano reclaim_test.go shapes as data)."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.scheduler.framework.conf import SWITCHES
from tests.builders import node, pod, podgroup, priority_class, queue, run, tiers_conf

CONF = tiers_conf("enqueue, reclaim", ["priority", "gang", "conformance"], ["predicates", "proportion", "nodeorder"])

CASES: list[dict[str, Any]] = [
    dict(id="overused-queue-gives-back-one",
         queues=[queue("q1"), queue("q2")],
         podgroups=[podgroup("pg1").min(1).phase("Running").queue("q1"), podgroup("pg2").min(1).queue("q2")],
         pods=[pod("a1").req("1", "1G").group("pg1").on("n1"), pod("a2").req("1", "1G").group("pg1").on("n1"),
               pod("a3").req("1", "1G").group("pg1").on("n1"), pod("b1").req("1", "1G").group("pg2")],
         evicted=["c1/a3"], pipelined={"c1/b1": "n1"}),
    dict(id="non-reclaimable-queue-is-spared",
         queues=[queue("q1").reclaimable(False), queue("q2")],
         podgroups=[podgroup("pg1").min(1).phase("Running").queue("q1"), podgroup("pg2").min(1).queue("q2")],
         pods=[pod("a1").req("1", "1G").group("pg1").on("n1"), pod("a2").req("1", "1G").group("pg1").on("n1"),
               pod("a3").req("1", "1G").group("pg1").on("n1"), pod("b1").req("1", "1G").group("pg2")],
         evicted=[], pipelined={}),
    dict(id="queue-within-deserved-is-spared",
         queues=[queue("q1"), queue("q2").weight(1)],
         podgroups=[podgroup("pg1").min(1).phase("Running").queue("q1"), podgroup("pg2").min(1).queue("q2")],
         pods=[pod("a1").req("1", "1G").group("pg1").on("n1"), pod("b1").req("4", "1G").group("pg2")],
         evicted=[], pipelined={}),
    dict(id="same-queue-never-reclaimed",
         queues=[queue("q1")],
         podgroups=[podgroup("pg1").min(1).phase("Running").queue("q1"), podgroup("pg2").min(1).queue("q1")],
         pods=[pod("a1").req("1", "1G").group("pg1").on("n1"), pod("a2").req("1", "1G").group("pg1").on("n1"),
               pod("a3").req("1", "1G").group("pg1").on("n1"), pod("b1").req("1", "1G").group("pg2")],
         evicted=[], pipelined={}),
]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_reclaim(case: dict[str, Any]) -> None:
    d = run(pods=case["pods"], nodes=[node("n1").alloc("3", "3G")], podgroups=case["podgroups"],
            queues=case["queues"], conf=CONF)
    assert sorted(f"{e.namespace}/{e.name}" for e in d.evictions) == case["evicted"]
    assert all(e.reason == "reclaim" for e in d.evictions)
    assert d.pipelined == case["pipelined"]


# --- upstream reclaim_test.go TestReclaim (current), case by case: the reclaim action only, one tier holding, in
# upstream's order, those of conformance, gang, proportion, capacity and priority that the case registers ----------

UPSTREAM_PCS = [priority_class("high-priority", 100000), priority_class("low-priority", 10)]
PCS3 = [priority_class("low-priority", 100), priority_class("mid-priority", 500), priority_class("high-priority", 1000)]
NEVER = {"preemptionPolicy": "Never"}


# upstream's test tier switches on only what it names (an unset switch is off in a Go-built tier)
_SWITCHES = {"conformance": ["enableReclaimable"], "gang": ["enableReclaimable", "enableJobStarving"],
             "proportion": ["enableReclaimable", "enableQueueOrder"],
             "capacity": ["enableReclaimable", "enableQueueOrder"],
             "priority": ["enableReclaimable", "enableJobOrder", "enableTaskOrder"]}


def _tier(*names: str) -> str:
    return tiers_conf("reclaim", [{"name": n, **{s: s in _SWITCHES[n] for s in SWITCHES if s != "enableHierarchy"}}
                                  for n in names])


def _never(p: pod) -> pod:
    p.obj["spec"]["preemptionPolicy"] = "Never"
    return p


def _pc_never(name: str, value: int) -> dict[str, Any]:
    return {**priority_class(name, value), **NEVER}


_STARVING = pytest.mark.xfail(strict=True, reason=(
    "an older upstream revision had no minMember on these PodGroups, and reclaim then took every job with pending "
    "tasks; lahar (like current Volcano, spec §5.3) reclaims only for starving jobs, and gang's JobStarving is "
    "ready+waiting < minMember = 0 < 0 → false. The current upstream row (minMember 1) is the next one"))
_QUEUE_PRIORITY = pytest.mark.xfail(strict=True, reason=(
    "difference: Volcano orders reclaim victims from different queues by their queue's priority (lowest first); "
    "lahar orders victims by task and job order only, so the victim from the higher-priority queue can go first"))
_NOT_OPEN = pytest.mark.xfail(strict=True, reason=(
    "difference: reclaim from a queue that is not Open (proportion). Volcano lets no job of a Closed queue reclaim; "
    "lahar's proportion does not look at the queue state when reclaiming, so a Closed queue's job that was already "
    "admitted (Inqueue) still reclaims"))
_IDLE = pytest.mark.xfail(strict=True, reason=(
    "difference: Volcano counts the node's idle resources in what a reclaim frees (the CPU is idle, 1G of memory "
    "is missing, one 1G victim is enough); lahar's proportion takes victims only from a queue holding at least the "
    "preemptor's whole request (2 CPU here), so it finds none"))


_CAPACITY_SWITCH = pytest.mark.xfail(strict=True, reason=(
    "difference: lahar's capacity refuses a queue that is not Open in its Preemptive hook only, and upstream's test "
    "tier leaves enablePreemptive unset (off in a Go-built tier); with the switch on, as in a conf file where an "
    "unset switch is on, lahar refuses too: the next row"))


def _three_overused(min_member: int) -> dict[str, Any]:
    return dict(
        queues=[queue("q1"), queue("q2")],
        podgroups=[podgroup("pg1").min(min_member).queue("q1").priority_class("low-priority"),
                   podgroup("pg2").min(min_member).queue("q2").priority_class("high-priority")],
        pods=[pod("preemptee1").req("1", "1G").group("pg1").on("n1").preemptable(False),
              pod("preemptee2").req("1", "1G").group("pg1").on("n1").preemptable(True),
              pod("preemptee3").req("1", "1G").group("pg1").on("n1").preemptable(False),
              pod("preemptor1").req("1", "1G").group("pg2")],
        nodes=[node("n1").alloc("3", "3Gi", pods=10)], pcs=UPSTREAM_PCS,
        conf=_tier("conformance", "gang", "proportion"))


UPSTREAM: list[dict[str, Any]] = [
    dict(_three_overused(0), id="two-queues-one-overused-min-member-0", marks=_STARVING, evicted=["c1/preemptee2"]),
    dict(_three_overused(1), id="two-queues-one-overused-reclaims-the-preemptable-one", evicted=["c1/preemptee2"]),
    dict(id="reclaimees-sorted-lowest-job-priority-first",
         queues=[queue("q1"), queue("q2"), queue("q3")],
         podgroups=[podgroup("pg1").min(1).queue("q1").priority_class("mid-priority"),
                    podgroup("pg2").min(1).queue("q2").priority_class("low-priority"),
                    podgroup("pg3").min(1).queue("q3").priority_class("high-priority")],
         pods=[pod("preemptee1-1").req("1", "1G").group("pg1").on("n1").preemptable(True),
               pod("preemptee1-2").req("1", "1G").group("pg1").on("n1").preemptable(True),
               pod("preemptee2-1").req("1", "1G").group("pg2").on("n1").preemptable(True),
               pod("preemptee2-2").req("1", "1G").group("pg2").on("n1").preemptable(False),
               pod("preemptor1").req("1", "1G").group("pg3")],
         nodes=[node("n1").alloc("4", "4Gi", pods=10)], pcs=PCS3,
         conf=_tier("conformance", "gang", "proportion", "priority"), evicted=["c1/preemptee2-1"]),
    dict(id="reclaimees-sorted-lowest-queue-priority-first", marks=_QUEUE_PRIORITY,
         queues=[queue("q1").priority(5), queue("q2").priority(10), queue("q3").priority(1)],
         podgroups=[podgroup(f"pg{i}").min(1).queue(f"q{i}").priority_class("mid-priority") for i in (1, 2, 3)],
         pods=[pod("preemptee1-1").req("1", "1G").group("pg1").on("n1").preemptable(True),
               pod("preemptee1-2").req("1", "1G").group("pg1").on("n1").preemptable(False),
               pod("preemptee2-1").req("1", "1G").group("pg2").on("n1").preemptable(True),
               pod("preemptee2-2").req("1", "1G").group("pg2").on("n1").preemptable(False),
               pod("preemptor1").req("1", "1G").group("pg3")],
         nodes=[node("n1").alloc("4", "4Gi", pods=10)], pcs=PCS3,
         conf=_tier("conformance", "gang", "proportion"), evicted=["c1/preemptee1-1"]),
    dict(id="preemption-policy-never-reclaims-nothing-3642",
         queues=[queue("q1").weight(5), queue("q2").weight(10)],
         podgroups=[podgroup("pg1").min(0).queue("q1").priority_class("low-priority"),
                    podgroup("pg2").min(0).queue("q2").priority_class("high-priority")],
         pods=[pod("preemptee1").req("1", "1G").group("pg1").on("n1").preemptable(True),
               _never(pod("preemptor1").req("1", "1G").group("pg2"))],
         nodes=[node("n1").alloc("1", "1Gi", pods=1)],
         pcs=[priority_class("low-priority", 100), _pc_never("high-priority", 1000)],
         conf=_tier("conformance", "gang", "proportion"), evicted=[]),
    dict(id="closed-queue-does-not-reclaim-proportion", marks=_NOT_OPEN,
         queues=[queue("q1"), queue("q2").state("Closed")],
         podgroups=[podgroup("pg1").min(1).queue("q1").phase("Running").priority_class("low-priority"),
                    podgroup("pg2").min(1).queue("q2").priority_class("high-priority")],
         pods=_three_overused(1)["pods"], nodes=[node("n1").alloc("3", "3Gi", pods=10)], pcs=UPSTREAM_PCS,
         conf=_tier("conformance", "gang", "proportion"), evicted=[]),
    dict(id="closed-queue-does-not-reclaim-capacity", marks=_CAPACITY_SWITCH,
         queues=[queue("q1"), queue("q2").state("Closed")],
         podgroups=[podgroup("pg1").min(1).queue("q1").phase("Running").priority_class("low-priority"),
                    podgroup("pg2").min(1).queue("q2").priority_class("high-priority")],
         pods=_three_overused(1)["pods"], nodes=[node("n1").alloc("3", "3Gi", pods=10)], pcs=UPSTREAM_PCS,
         conf=_tier("conformance", "gang", "capacity"), evicted=[]),
    dict(id="closed-queue-does-not-reclaim-capacity-preemptive-on",
         queues=[queue("q1"), queue("q2").state("Closed")],
         podgroups=[podgroup("pg1").min(1).queue("q1").phase("Running").priority_class("low-priority"),
                    podgroup("pg2").min(1).queue("q2").priority_class("high-priority")],
         pods=_three_overused(1)["pods"], nodes=[node("n1").alloc("3", "3Gi", pods=10)], pcs=UPSTREAM_PCS,
         conf=_tier("conformance", "gang", "capacity").replace("enablePreemptive: false", "enablePreemptive: true"),
         evicted=[]),
    dict(id="node-idle-counts-in-what-reclaim-frees", marks=_IDLE,  # cpu is idle, only 1G of memory is missing
         queues=[queue("q1").priority(1), queue("q2").priority(2), queue("q3").weight(3)],
         podgroups=[podgroup("pg1").min(0).queue("q1").phase("Running").priority_class("mid-priority"),
                    podgroup("pg2").min(0).queue("q2").phase("Running").priority_class("mid-priority"),
                    podgroup("pg3").min(1).queue("q3").priority_class("mid-priority")],
         pods=[pod("preemptee1-1").req("1", "1G").group("pg1").on("n1").preemptable(True),
               pod("preemptee2-1").req("1", "1G").group("pg2").on("n1").preemptable(True),
               pod("preemptor1").req("2", "1G").group("pg3")],
         nodes=[node("n1").alloc("10", "2Gi", pods=10)], pcs=PCS3,
         conf=_tier("conformance", "gang", "proportion", "priority"), evicted=["c1/preemptee1-1"]),
    dict(id="second-task-reclaims-when-first-is-preemption-never",
         queues=[queue("q1"), queue("q2")],
         podgroups=[podgroup("pg-victim").min(1).queue("q1").phase("Running").priority_class("low-priority"),
                    podgroup("pg-preemptor").min(2).queue("q2").priority_class("high-priority-no-preempt")],
         pods=[pod("victim-pod-no").req("1", "1G").group("pg-victim").on("n1").preemptable(False),
               pod("victim-pod").req("1", "1G").group("pg-victim").on("n1").preemptable(True),
               _never(pod("preemptor-task1-non-preemptable").req("1", "1G").group("pg-preemptor")),
               pod("preemptor-task2-preemptable").req("1", "1G").group("pg-preemptor")],
         nodes=[node("n1").alloc("2", "2G", pods=10)],
         pcs=[priority_class("low-priority", 100), _pc_never("high-priority-no-preempt", 1000),
              priority_class("high-priority-can-preempt", 900)],
         conf=_tier("conformance", "gang", "proportion", "priority"), evicted=["c1/victim-pod"]),
    dict(id="no-eviction-when-node-idle-already-fits",
         queues=[queue("q1"), queue("q2").weight(9)],
         podgroups=[podgroup("pg-victim").min(0).queue("q1").phase("Running").priority_class("low-priority"),
                    podgroup("pg-preemptor").min(1).queue("q2").priority_class("low-priority")],
         pods=[pod("victim-n1").req("2", "2G").group("pg-victim").on("n1").preemptable(True),
               pod("preemptor1").req("3", "3G").group("pg-preemptor")],
         nodes=[node("n1").alloc("10", "10G", pods=10)], pcs=UPSTREAM_PCS,
         conf=_tier("conformance", "gang", "proportion"), evicted=[]),
]


@pytest.mark.parametrize("case", [pytest.param(c, marks=c.get("marks", ())) for c in UPSTREAM],
                         ids=[c["id"] for c in UPSTREAM])
def test_reclaim_upstream(case: dict[str, Any]) -> None:
    d = run(pods=case["pods"], nodes=case["nodes"], podgroups=case["podgroups"], queues=case["queues"],
            priority_classes=case["pcs"], conf=case["conf"])
    assert sorted(f"{e.namespace}/{e.name}" for e in d.evictions) == case["evicted"]
    assert all(e.reason == "reclaim" for e in d.evictions)
