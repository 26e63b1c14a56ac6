"""capacity with a queue tree and `ancestorReclaimLevel`: Volcano's Test_capacityPlugin_AncestorReclaimScenarios
(plugins/capacity/capacity_test.go) as data: which victims a reclaim may take when leaves, parents or grandparents
are, or are not, over their deserved share."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.scheduler.framework.conf import SWITCHES
from tests.builders import node, pod, podgroup, queue, run, tiers_conf

A100, HCA = "nvidia.com/a100", "rdma/hca"


def _tier(level: int, priority: bool) -> str:
    """Upstream's Go-built tier: only the switches it names are on."""
    def only(name: str, *on: str, **extra: Any) -> dict[str, Any]:  # noqa: ANN401
        return {"name": name, **{s: s in on for s in SWITCHES}, **extra}
    plugins = [only("capacity", "enabledAllocatable", "enablePreemptive", "enableReclaimable", "enableQueueOrder",
                    "enableHierarchy", "enableJobEnqueued", arguments={"ancestorReclaimLevel": level}),
               only("predicates", "enablePredicate"), only("gang", "enableJobStarving")]
    if priority:
        plugins.append(only("priority", "enableJobOrder", "enableTaskOrder"))
    return tiers_conf("enqueue, reclaim, allocate", plugins)


def q(name: str, parent: str = "", deserved: dict[str, str] | None = None, cap: dict[str, str] | None = None) -> queue:
    b = queue(name)
    if parent:
        b.parent(parent)
    if deserved is not None:
        b.obj["spec"]["deserved"] = dict(deserved)
    if cap is not None:
        b.capability(**cap)
    return b


def cm(cpu: str, mem: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": mem}


def gpu(n: str) -> dict[str, str]:
    return {A100: n}


def p(name: str, group: str, cpu: str, mem: str, *, on: str = "", prio: int | None = None, **scalars: str) -> pod:
    b = pod(name, "ns1").req(cpu, mem, **scalars).group(group)
    if on:
        b.on(on)
    if prio is not None:
        b.priority(prio)
    return b


def g(name: str, queue_: str, phase: str) -> podgroup:
    return podgroup(name, "ns1").queue(queue_).min(1).phase(phase)


_BIG = {A100: "4", HCA: "1001"}
N16 = node("n1").alloc("16", "16Gi", 11, **_BIG)
N2 = node("n1").alloc("2", "2Gi", 10)
ONE = {A100: "1", HCA: "1"}
ROOT16 = q("root", deserved={**cm("16", "16Gi"), A100: "4", "rdma": "1000"})

PROJECTS = [ROOT16, q("project1_root", "root", gpu("1"), gpu("2")),
            q("project1_non-preemptable", "project1_root", gpu("1"), gpu("1")),
            q("project1_preemptable", "project1_root"), q("project2_root", "root", gpu("3"), gpu("4")),
            q("project2_non-preemptable", "project2_root", gpu("3"), gpu("3")), q("project2_preemptable", "project2_root")]
LEVELS = [q("root"), q("grand-a", "root", cm("2", "2Gi"), cm("4", "4Gi")),
          q("parent-a", "grand-a", cm("2", "2Gi"), cm("2", "2Gi")), q("queue-a", "parent-a", cm("2", "2Gi"), cm("2", "2Gi")),
          q("grand-b", "root", cm("3", "3Gi"), cm("4", "4Gi")), q("parent-b", "grand-b", cm("1", "1Gi"), cm("2", "2Gi")),
          q("queue-b", "parent-b", cm("1", "1Gi"), cm("2", "2Gi"))]


def _victim_and_reclaimer(victim_q: str, reclaimer_q: str, cpu: str = "2", mem: str = "2Gi",
                          victim_gpu: str = "", reclaimer_gpu: str = "") -> dict[str, Any]:
    vs = {A100: victim_gpu} if victim_gpu else {}
    rs = {A100: reclaimer_gpu} if reclaimer_gpu else {}
    return dict(pods=[p("p-victim", "pg-victim", cpu, mem, on="n1", **vs), p("p-reclaimer", "pg-reclaimer", cpu, mem, **rs)],
                podgroups=[g("pg-victim", victim_q, "Running"), g("pg-reclaimer", reclaimer_q, "Inqueue")])


CASES: list[dict[str, Any]] = [
    dict(id="level-1-reclaims-on-parent-deserved", level=1, priority=True, nodes=[N16],
         queues=[ROOT16, q("case1_queue1", "root", gpu("1")), q("case1_queue11", "case1_queue1"), q("case1_queue2", "root")],
         podgroups=[g("pg1", "case1_queue2", "Running"), g("pg2", "case1_queue11", "Inqueue")],
         pods=[p("p1", "pg1", "1", "1Gi", on="n1", **{A100: "4", HCA: "1"}),
               p("p2", "pg2", "1", "1Gi", **ONE)],
         evicted=["ns1/p1"], pipelined={"ns1/p2": "n1"}),
    dict(id="cross-parent-reclaim-when-child-and-parent-over-deserved", level=1, priority=True, nodes=[N16],
         queues=PROJECTS,
         podgroups=[*(g(f"pg{i}", "project2_preemptable", "Running") for i in (1, 2, 3, 4)),
                    g("pg5", "project1_preemptable", "Pending")],
         pods=[*(p(f"p{i}", f"pg{i}", "1", "1Gi", on="n1", prio=2 if i < 4 else 1, **ONE)
                 for i in (1, 2, 3, 4)), p("p5", "pg5", "1", "1Gi", **ONE)],
         evicted=["ns1/p4"], pipelined={"ns1/p5": "n1"}),
    dict(id="cross-parent-reclaim-evicts-sibling-queue-victim-first", level=1, priority=True, nodes=[N16],
         queues=PROJECTS,
         podgroups=[*(g(f"pg{i}", "project2_preemptable", "Running") for i in (1, 2, 3)),
                    g("pg4_reclaimed", "project2_preemptable", "Inqueue"), g("pg5_pipelined", "project1_preemptable", "Running"),
                    g("pg6", "project2_non-preemptable", "Pending")],
         pods=[*(p(f"p{i}", f"pg{i}", "1", "1Gi", on="n1", prio=2, **ONE) for i in (1, 2, 3)),
               p("p4", "pg4_reclaimed", "1", "1Gi", **ONE),
               p("p5", "pg5_pipelined", "1", "1Gi", on="n1", **ONE),
               p("p6", "pg6", "1", "1Gi", **ONE)],
         evicted=["ns1/p3"], pipelined={"ns1/p6": "n1"}),
    dict(id="cross-parent-blocked-when-victim-child-not-over-deserved", level=1, priority=True,
         nodes=[node("n1").alloc("8", "8Gi", 11, **{A100: "1", HCA: "1001"})],
         queues=[ROOT16, q("case4_parent1", "root", gpu("1")), q("case4_child1", "case4_parent1", gpu("1")),
                 q("case4_child1_sibling", "case4_parent1"), q("case4_parent2", "root", gpu("1")),
                 q("case4_child2", "case4_parent2", gpu("1"))],
         podgroups=[g("pg1", "case4_child1", "Running"), g("pg2", "case4_child2", "Pending"),
                    g("pg3", "case4_child1_sibling", "Running")],
         pods=[p("p1", "pg1", "1", "1Gi", on="n1", **ONE),
               p("p2", "pg2", "1", "1Gi", **ONE),
               p("p3", "pg3", "1", "1Gi", on="n1", **ONE).preemptable(False)],
         evicted=[], pipelined={}),
    dict(id="level-0-reclaims-on-leaf-deserved", level=0, priority=False, nodes=[N2], queues=LEVELS,
         **_victim_and_reclaimer("queue-b", "queue-a"), evicted=["ns1/p-victim"], pipelined={"ns1/p-reclaimer": "n1"}),
    dict(id="level-1-reclaims-when-parent-check-passes", level=1, priority=False, nodes=[N2], queues=LEVELS,
         **_victim_and_reclaimer("queue-b", "queue-a"), evicted=["ns1/p-victim"], pipelined={"ns1/p-reclaimer": "n1"}),
    dict(id="level-2-blocked-when-grandparent-check-fails", level=2, priority=False, nodes=[N2], queues=LEVELS,
         **_victim_and_reclaimer("queue-b", "queue-a"), evicted=[], pipelined={}),
    dict(id="level-1-blocks-sibling-reclaim-when-leaf-deserved-unset", level=1, priority=False, nodes=[N2],
         queues=[q("root"), q("parent", "root", cm("4", "4Gi"), cm("4", "4Gi")), q("queue-a", "parent"),
                 q("queue-b", "parent")],
         **_victim_and_reclaimer("queue-b", "queue-a"), evicted=[], pipelined={}),
    dict(id="level-2-blocks-when-leaf-deserved-unset-shared-grandparent", level=2, priority=False, nodes=[N2],
         queues=[q("root"), q("grand", "root", cm("2", "2Gi"), cm("2", "2Gi")), q("parent-a", "grand"),
                 q("queue-a", "parent-a"), q("parent-b", "grand"), q("queue-b", "parent-b")],
         **_victim_and_reclaimer("queue-b", "queue-a"), evicted=[], pipelined={}),
    dict(id="level-2-blocks-in-unbalanced-tree-leaf-deserved-unset", level=2, priority=False, nodes=[N2],
         queues=[q("root"), q("grand", "root", cm("1", "1Gi"), cm("2", "2Gi")),
                 q("parent-deep", "grand", cm("1", "1Gi"), cm("2", "2Gi")), q("queue-deep", "parent-deep"),
                 q("queue-shallow", "grand")],
         **_victim_and_reclaimer("queue-deep", "queue-shallow"), evicted=[], pipelined={}),
    dict(id="level-2-blocks-when-depth-2-ancestor-not-over-deserved", level=2, priority=False,
         nodes=[node("n1").alloc("4", "4Gi", 10, **{A100: "2"})],
         queues=[q("root"), q("shallow-parent", "root", gpu("1")), q("queue-shallow", "shallow-parent", gpu("1")),
                 q("deep-grand", "root", gpu("2")), q("deep-parent", "deep-grand", gpu("1")),
                 q("queue-deep", "deep-parent", gpu("1"))],
         **_victim_and_reclaimer("queue-deep", "queue-shallow", "1", "1Gi", victim_gpu="2", reclaimer_gpu="1"),
         evicted=[], pipelined={}),
]


@pytest.mark.parametrize("case", [pytest.param(c, marks=c.get("marks", ())) for c in CASES],
                         ids=[c["id"] for c in CASES])
def test_ancestor_reclaim_upstream(case: dict[str, Any]) -> None:
    d = run(pods=case["pods"], nodes=case["nodes"], podgroups=case["podgroups"], queues=case["queues"],
            conf=_tier(case["level"], case["priority"]))
    assert sorted(f"{e.namespace}/{e.name}" for e in d.evictions) == case["evicted"]
    assert d.pipelined == case["pipelined"]


# Test_buildHierarchicalQueueAttrs_nilSafety: a hierarchical session with no queues at all, or with a job whose queue
# was deleted, binds nothing and does not crash
NIL_SAFETY: list[dict[str, Any]] = [
    dict(id="no-queues-at-all", pods=[], podgroups=[], queues=[]),
    dict(id="job-in-a-deleted-queue", pods=[p("orphan", "pg-orphan", "1", "1Gi")],
         podgroups=[g("pg-orphan", "deleted-queue", "Inqueue")], queues=[q("root")]),
]


@pytest.mark.parametrize("case", NIL_SAFETY, ids=[c["id"] for c in NIL_SAFETY])
def test_hierarchy_nil_safety_upstream(case: dict[str, Any]) -> None:
    def only(name: str, *on: str) -> dict[str, Any]:
        return {"name": name, **{s: s in on for s in SWITCHES}}
    conf = tiers_conf("allocate", [only("capacity", "enabledAllocatable", "enableReclaimable", "enableQueueOrder",
                                        "enableHierarchy", "enableJobEnqueued"),
                                   only("predicates", "enablePredicate"), only("gang", "enableJobStarving")])
    d = run(pods=case["pods"], nodes=[node("n1").alloc("4", "4Gi", 10)], podgroups=case["podgroups"],
            queues=case["queues"], conf=conf)
    assert d.bind_map() == {}
