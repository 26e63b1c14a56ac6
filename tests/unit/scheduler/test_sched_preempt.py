"""preempt: within a queue, a starving higher-priority job evicts lower-priority tasks and pipelines
(Volcano preempt_test.go shapes as data)."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.scheduler.framework.conf import SWITCHES
from tests.builders import node, pod, podgroup, priority_class, queue, run, tiers_conf

CONF = tiers_conf("enqueue, allocate, preempt", ["priority", "gang", "conformance"],
                  ["predicates", "proportion", "nodeorder"])
PCS = [priority_class("low", 10), priority_class("high", 1000)]

CASES: list[dict[str, Any]] = [
    dict(id="no-preemption-when-idle-resources",
         podgroups=[podgroup("pg1").min(1).phase("Running").priority_class("low"),
                    podgroup("pg2").min(1).priority_class("high")],
         pods=[pod("a1").req("1", "1G").group("pg1").on("n1"),
               pod("b1").req("1", "1G").group("pg2")],
         nodes=[node("n1").alloc("3", "3Gi")],
         evicted=[], pipelined={}, binds={"c1/b1": "n1"}),
    dict(id="preempt-one-task-of-other-job",
         podgroups=[podgroup("pg1").min(1).phase("Running").priority_class("low"),
                    podgroup("pg2").min(1).phase("Inqueue").priority_class("high")],
         pods=[pod("a1").req("1", "1G").group("pg1").on("n1"), pod("a2").req("1", "1G").group("pg1").on("n1"),
               pod("b1").req("1", "1G").group("pg2"), pod("b2").req("1", "1G").group("pg2")],
         nodes=[node("n1").alloc("2", "2G")],
         evicted=["c1/a2"], pipelined={"c1/b1": "n1"}, binds={}),
    dict(id="preempt-enough-tasks-for-a-large-task",
         podgroups=[podgroup("pg1").min(1).phase("Running").priority_class("low"),
                    podgroup("pg2").min(1).phase("Inqueue").priority_class("high")],
         pods=[pod("a1").req("1", "1G").group("pg1").on("n1"), pod("a2").req("1", "1G").group("pg1").on("n1"),
               pod("a3").req("1", "1G").group("pg1").on("n1"),
               pod("b1").req("2", "2G").group("pg2")],
         nodes=[node("n1").alloc("3", "3G")],
         evicted=["c1/a2", "c1/a3"], pipelined={"c1/b1": "n1"}, binds={}),
    dict(id="gang-min-protects-victim-job",
         podgroups=[podgroup("pg1").min(2).phase("Running").priority_class("low"),
                    podgroup("pg2").min(1).phase("Inqueue").priority_class("high")],
         pods=[pod("a1").req("1", "1G").group("pg1").on("n1"), pod("a2").req("1", "1G").group("pg1").on("n1"),
               pod("b1").req("1", "1G").group("pg2")],
         nodes=[node("n1").alloc("2", "2G")],
         evicted=[], pipelined={}, binds={}),
    dict(id="equal-priority-does-not-preempt",
         podgroups=[podgroup("pg1").min(1).phase("Running").priority_class("high"),
                    podgroup("pg2").min(1).phase("Inqueue").priority_class("high")],
         pods=[pod("a1").req("1", "1G").group("pg1").on("n1"), pod("a2").req("1", "1G").group("pg1").on("n1"),
               pod("b1").req("1", "1G").group("pg2")],
         nodes=[node("n1").alloc("2", "2G")],
         evicted=[], pipelined={}, binds={}),
    dict(id="not-preemptable-annotation",
         podgroups=[podgroup("pg1").min(1).phase("Running").priority_class("low"),
                    podgroup("pg2").min(1).phase("Inqueue").priority_class("high")],
         pods=[pod("a1").req("1", "1G").group("pg1").on("n1").preemptable(False),
               pod("a2").req("1", "1G").group("pg1").on("n1").preemptable(False),
               pod("b1").req("1", "1G").group("pg2")],
         nodes=[node("n1").alloc("2", "2G")],
         evicted=[], pipelined={}, binds={}),
    dict(id="other-queue-is-not-preempted",
         podgroups=[podgroup("pg1").min(1).phase("Running").priority_class("low").queue("c2"),
                    podgroup("pg2").min(1).phase("Inqueue").priority_class("high")],
         pods=[pod("a1").req("1", "1G").group("pg1").on("n1"), pod("a2").req("1", "1G").group("pg1").on("n1"),
               pod("b1").req("1", "1G").group("pg2")],
         nodes=[node("n1").alloc("2", "2G")],
         evicted=[], pipelined={}, binds={}),
]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_preempt(case: dict[str, Any]) -> None:
    d = run(pods=case["pods"], nodes=case["nodes"], podgroups=case["podgroups"],
            queues=[queue("c1"), queue("c2")], priority_classes=PCS, conf=CONF)
    assert sorted(f"{e.namespace}/{e.name}" for e in d.evictions) == case["evicted"]
    assert all(e.reason == "preempt" for e in d.evictions)
    assert d.pipelined == case["pipelined"]
    assert d.bind_map() == case["binds"]


# --- upstream preempt_test.go TestPreempt, case by case (preempt action only; one tier: conformance, gang,
# priority, proportion; priority classes high=100000, low=10; queue q1) ---------------------------------------------

UPSTREAM_CONF = tiers_conf("preempt", ["conformance", "gang", "priority", "proportion"])
UPSTREAM_PCS = [priority_class("high-priority", 100000), priority_class("low-priority", 10)]


def _pg(name: str, min_member: int, roles: dict[str, int], prio: str | None = None) -> podgroup:
    pg = podgroup(name).min(min_member).queue("q1").phase("Inqueue").min_task(**roles)
    return pg.priority_class(prio) if prio else pg


def _run(pods: list, nodes: list, pgs: list, q: queue) -> Any:  # noqa: ANN401
    return run(pods=pods, nodes=nodes, podgroups=pgs, queues=[q], priority_classes=UPSTREAM_PCS, conf=UPSTREAM_CONF)


_POD_SLOTS = pytest.mark.xfail(strict=True, reason=(
    "Volcano adds `pods: 1` to every task's request (GetPodResourceRequest AddScalar(pods, 1)), so a node whose "
    "pod slots are full has no FutureIdle for the preemptor; lahar checks max pods only in the predicates plugin "
    "and its preempt fit test ignores pod slots, so nothing is evicted"))

UPSTREAM: list[dict[str, Any]] = [
    dict(id="idle-resources-no-preemption",
         pgs=[_pg("pg1", 3, {"": 3})],
         pods=[pod("preemptee1").req("1", "1G").group("pg1").on("n1"),
               pod("preemptee2").req("1", "1G").group("pg1").on("n1"),
               pod("preemptor1").req("1", "1G").group("pg1")],
         nodes=[node("n1").alloc("10", "10G", pods=10)], queue=queue("q1"), evicted=[]),
    dict(id="pipelined-jobs-no-preemption",
         pgs=[_pg("pg1", 1, {"": 2}), _pg("pg2", 1, {"": 2})],
         pods=[pod("preemptee1").req("1", "1G").group("pg1").on("n1"),
               pod("preemptee2").req("1", "1G").group("pg1").on("n1"),
               pod("preemptee3").req("1", "1G").group("pg2").on("n1"),
               pod("preemptor2").req("1", "1G").group("pg2")],
         nodes=[node("n1").alloc("3", "3G", pods=10)], queue=queue("q1"), evicted=[]),
    dict(id="one-task-of-other-job-fits-both",
         pgs=[_pg("pg1", 1, {"": 2}, "low-priority"), _pg("pg2", 1, {"": 2}, "high-priority")],
         pods=[pod("preemptee1").req("1", "1G").group("pg1").on("n1").preemptable(True),
               pod("preemptee2").req("1", "1G").group("pg1").on("n1").preemptable(False),
               pod("preemptor1").req("1", "1G").group("pg2"), pod("preemptor2").req("1", "1G").group("pg2")],
         nodes=[node("n1").alloc("2", "2G", pods=10)], queue=queue("q1"), evicted=["c1/preemptee1"]),
    dict(id="enough-tasks-for-a-large-task",
         pgs=[_pg("pg1", 1, {"": 3}, "low-priority"), _pg("pg2", 1, {"": 1}, "high-priority")],
         pods=[pod("preemptee1").req("1", "1G").group("pg1").on("n1").preemptable(True),
               pod("preemptee2").req("1", "1G").group("pg1").on("n1").preemptable(True),
               pod("preemptee3").req("1", "1G").group("pg1").on("n1").preemptable(False),
               pod("preemptor1").req("5", "5G").group("pg2")],
         nodes=[node("n1").alloc("6", "6G", pods=10)], queue=queue("q1"),
         evicted=["c1/preemptee1", "c1/preemptee2"]),
    dict(id="low-priority-job-same-queue-capability-bound-3161",
         pgs=[_pg("pg1", 0, {}, "low-priority"), _pg("pg2", 1, {"": 1}, "high-priority")],
         pods=[pod("preemptee1").req("3", "3G").group("pg1").on("n1").preemptable(True),
               pod("preemptor1").req("3", "3G").group("pg2")],
         nodes=[node("n1").alloc("12", "12G", pods=10)], queue=queue("q1").capability(cpu="4", memory="4G"),
         evicted=["c1/preemptee1"]),
    dict(id="allocatable-within-capability-no-preemption-3161",
         pgs=[_pg("pg1", 1, {}, "low-priority"), _pg("pg2", 1, {"": 1}, "high-priority")],
         pods=[pod("preemptee1").req("3", "3G").group("pg1").on("n1").preemptable(True),
               pod("preemptor1").req("3", "3G").group("pg2")],
         nodes=[node("n1").alloc("12", "12G", pods=10)], queue=queue("q1").capability(cpu="6", memory="6G"),
         evicted=[]),
    dict(id="lowest-priority-preemptable-victim-first-2232",
         pgs=[_pg("pg1", 1, {}, "low-priority"), _pg("pg2", 1, {"": 1}, "high-priority")],
         pods=[pod("preemptee1").req("1", "1G").group("pg1").on("n1").preemptable(False),
               pod("preemptee2").req("1", "1G").group("pg1").on("n1").preemptable(True),
               pod("preemptee3").req("1", "1G").group("pg1").on("n1").preemptable(True).priority(100000),
               pod("preemptor1").req("1", "1G").group("pg2")],
         nodes=[node("n1").alloc("12", "12G", pods=10)], queue=queue("q1").capability(cpu="3", memory="3G"),
         evicted=["c1/preemptee2"]),
    dict(id="burstable-preempts-best-effort-on-pod-count-3335", marks=_POD_SLOTS,
         pgs=[_pg("pg1", 0, {}, "low-priority"), _pg("pg2", 1, {"": 1}, "high-priority")],
         pods=[pod("preemptee1").group("pg1").on("n1").preemptable(True),
               pod("preemptor1").req("3", "3G").group("pg2")],
         nodes=[node("n1").alloc("12", "12G", pods=1)], queue=queue("q1").capability(cpu="6", memory="6G"),
         evicted=["c1/preemptee1"]),
    dict(id="best-effort-preempts-best-effort-3335", marks=_POD_SLOTS,
         pgs=[_pg("pg1", 0, {}, "low-priority"), _pg("pg2", 1, {"": 1}, "high-priority")],
         pods=[pod("preemptee1").group("pg1").on("n1").preemptable(True), pod("preemptor1").group("pg2")],
         nodes=[node("n1").alloc("12", "12G", pods=1)], queue=queue("q1").capability(cpu="6", memory="6G"),
         evicted=["c1/preemptee1"]),
]


@pytest.mark.parametrize("case", [pytest.param(c, marks=c.get("marks", ())) for c in UPSTREAM],
                         ids=[c["id"] for c in UPSTREAM])
def test_preempt_upstream(case: dict[str, Any]) -> None:
    d = _run(case["pods"], case["nodes"], case["pgs"], case["queue"])
    assert sorted(f"{e.namespace}/{e.name}" for e in d.evictions) == case["evicted"]
    assert all(e.reason == "preempt" for e in d.evictions)


def _never(p: pod) -> pod:
    p.obj["spec"]["preemptionPolicy"] = "Never"
    return p


def _anti_affinity(p: pod, **labels: str) -> pod:
    """Required pod anti-affinity against pods carrying `labels`, per node (kubernetes.io/hostname)."""
    p.label(**labels)
    p.obj["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": "kubernetes.io/hostname"}]}}
    return p


UPSTREAM_MORE: list[dict[str, Any]] = [
    dict(id="preemption-policy-never-preempts-nothing-3642",
         pgs=[_pg("pg1", 0, {}, "low-priority"), _pg("pg2", 1, {}, "high-priority")],
         pods=[pod("preemptee1").req("1", "1G").group("pg1").on("n1").preemptable(True),
               _never(pod("preemptor1").req("1", "1G").group("pg2"))],
         nodes=[node("n1").alloc("1", "1Gi", pods=1)], queue=queue("q1"), evicted=[]),
    dict(id="rollback-evictions-when-preemptor-exceeds-queue-capability",
         pgs=[_pg("pg1", 1, {"": 2}, "low-priority"), _pg("pg2", 1, {"": 1}, "high-priority")],
         pods=[pod("preemptee1").req("1", "1G").group("pg1").on("n1").preemptable(True),
               pod("preemptee2").req("1", "1G").group("pg1").on("n1").preemptable(True),
               pod("preemptor1").req("4", "4G").group("pg2")],
         nodes=[node("n1").alloc("10", "10G", pods=10)], queue=queue("q1").capability(cpu="3", memory="3G"),
         evicted=[]),
    dict(id="only-the-succeeding-nodes-evictions-commit",  # n1's 1-CPU victim leaves q1 over capability; n2's does not
         pgs=[_pg("pg1", 0, {}, "low-priority"), _pg("pg2", 1, {"": 1}, "high-priority"),
              _pg("pg3", 0, {}, "low-priority")],
         pods=[pod("preemptee1").req("1", "1G").group("pg1").on("n1").preemptable(True),
               pod("preemptee2").req("4", "4G").group("pg3").on("n2").preemptable(True),
               pod("preemptor1").req("3", "3G").group("pg2")],
         nodes=[node("n1").alloc("3", "3G", pods=10), node("n2").alloc("4", "4G", pods=10)],
         queue=queue("q1").capability(cpu="6", memory="6G"), evicted=["c1/preemptee2"]),
]


@pytest.mark.parametrize("case", UPSTREAM_MORE, ids=[c["id"] for c in UPSTREAM_MORE])
def test_preempt_upstream_current(case: dict[str, Any]) -> None:
    """TestPreempt's rows added since the first port: preemptionPolicy Never, rollback past capability, per-node."""
    d = _run(case["pods"], case["nodes"], case["pgs"], case["queue"])
    assert sorted(f"{e.namespace}/{e.name}" for e in d.evictions) == case["evicted"]


def test_preempt_upstream_multi_queue_keeps_other_queues_preemptors() -> None:
    """multi-queue: visiting q1 (a running job, no preemptor) must not drain q2's preemptor tasks."""
    pgs = [podgroup("pg1").min(1).queue("q1").min_task(**{"": 1}),
           podgroup("pg2").min(0).queue("q2").priority_class("low-priority"),
           podgroup("pg3").min(1).queue("q2").min_task(**{"": 1}).priority_class("high-priority")]
    pods = [pod("q1-runner1").req("1", "1G").group("pg1").on("n1"),
            pod("q2-preemptee1").req("1", "1G").group("pg2").on("n1").preemptable(True),
            pod("q2-preemptor1").req("1", "1G").group("pg3")]
    d = run(pods=pods, nodes=[node("n1").alloc("2", "2G", pods=10)], podgroups=pgs,
            queues=[queue("q1"), queue("q2").capability(cpu="4", memory="4G")], priority_classes=UPSTREAM_PCS,
            conf=UPSTREAM_CONF)
    assert [f"{e.namespace}/{e.name}" for e in d.evictions] == ["c1/q2-preemptee1"]


# --- upstream TestTopologyAwarePreempt: the same first ten cases (TestPreempt's up to "policy never") and two of its
# own, with predicates and capacity in the tier and topology-aware preemption on; lahar has one preempt path --------

def _deserved(q: queue) -> queue:
    q.obj["spec"]["deserved"] = {"cpu": "1", "memory": "1G"}
    return q.capability(cpu="1", memory="1G")


TOPOLOGY_CONF = tiers_conf("preempt", ["conformance", "gang", "priority", "proportion", "predicates",
                                       {"name": "capacity", **{s: s == "enableQueueOrder" for s in SWITCHES
                                                               if s != "enableHierarchy"}}])
_ANTI_AFFINITY = pytest.mark.xfail(strict=True, reason=(
    "difference: preempt victim choice under pod anti-affinity. Volcano's topology-aware preemption simulates each "
    "eviction and re-runs the predicates, so it evicts preemptee2, the pod the preemptor's anti-affinity term "
    "matches; lahar takes victims in victim order by resources alone, evicts preemptee1 and pipelines the "
    "preemptor beside preemptee2"))

TOPOLOGY: list[dict[str, Any]] = [dict(c, id=f"topology-{c['id']}") for c in UPSTREAM + UPSTREAM_MORE[:1]] + [
    dict(id="topology-anti-affinity-conflict-evicts-the-conflicting-pod", marks=_ANTI_AFFINITY,
         pgs=[_pg("pg1", 0, {}, "low-priority"), _pg("pg2", 0, {}, "low-priority"),
              _pg("pg3", 1, {"": 1}, "high-priority")],
         pods=[pod("preemptee1").req("1", "1G").group("pg2").on("n1").preemptable(True),
               _anti_affinity(pod("preemptee2").req("1", "1G").group("pg1").on("n1").preemptable(True), test="test"),
               _anti_affinity(pod("preemptor1").req("1", "1G").group("pg3"), test="test")],
         nodes=[node("n1").alloc("2", "2Gi", pods=2).label(**{"kubernetes.io/hostname": "n1"})],
         queue=queue("q1").capability(cpu="2", memory="2G"), evicted=["c1/preemptee2"]),
    dict(id="topology-priority-queues-preempt-inside-the-preemptors-queue",
         pgs=[_pg("pg3", 1, {}, "high-priority").queue("q2").phase("Running"),
              _pg("pg1", 0, {}, "low-priority").phase("Running"), _pg("pg2", 1, {}, "high-priority")],
         pods=[pod("preemptee2").req("1", "1G").group("pg3").on("n1").preemptable(True),
               pod("preemptee1").req("1", "1G").group("pg1").on("n1").preemptable(True),
               pod("preemptor1").req("1", "1G").group("pg2")],
         nodes=[node("n1").alloc("2", "2Gi", pods=2)],
         queues=[_deserved(queue("q1").priority(1)), _deserved(queue("q2").priority(10))], evicted=["c1/preemptee1"]),
]


@pytest.mark.parametrize("case", [pytest.param(c, marks=c.get("marks", ())) for c in TOPOLOGY],
                         ids=[c["id"] for c in TOPOLOGY])
def test_topology_aware_preempt_upstream(case: dict[str, Any]) -> None:
    d = run(pods=case["pods"], nodes=case["nodes"], podgroups=case["pgs"], queues=case.get("queues", [case.get("queue")]),
            priority_classes=UPSTREAM_PCS, conf=TOPOLOGY_CONF)
    assert sorted(f"{e.namespace}/{e.name}" for e in d.evictions) == case["evicted"]


@pytest.mark.xfail(strict=True, reason=(
    "bug: lahar's preempt runs the predicates once, before evicting, and then checks only resources (future idle) "
    "after each eviction; a predicate that depends on the pods still running (here a hidden device) is not "
    "re-checked, so the preemptor is pipelined beside the preemptee and nothing is evicted. Re-running the "
    "predicates after each eviction needs releasing pods to stop counting against max pods first"))
def test_normal_preempt_rechecks_predicate_after_eviction_upstream() -> None:
    """TestNormalPreemptRechecksPredicateAfterEviction: a predicate plugin hides a device the preemptee holds (the
    preemptor does not fit beside it while it runs, though CPU and memory are idle); preempt must evict it."""
    import numpy as np

    from lahar.scheduler.framework import conf as confs
    from lahar.scheduler.framework import snapshot as snapshots
    from lahar.scheduler.framework.hooks import NodeFilter
    from lahar.scheduler.framework.snapshot import TaskStatus
    from lahar.scheduler.registry import in_tree_registry
    from lahar.scheduler.session import run_session

    class HiddenDevice:
        name = "device-fit-after-eviction"

        def __init__(self, arguments: object = None) -> None:
            self.ssn: Any = None

        def on_session_open(self, ssn: object) -> None:
            self.ssn = ssn

        def predicate(self, task: Any, nodes: Any) -> NodeFilter:  # noqa: ANN401
            ok = np.ones(len(nodes.names), dtype=bool)
            if task.name == "preemptor":
                for i in range(len(nodes.names)):
                    ok[i] = not any(t.name == "preemptee" and t.status is not TaskStatus.RELEASING
                                    for t in self.ssn.nodes[i].tasks.values())
            return NodeFilter(feasible=ok, reasons=np.array([None if f else "hidden device capacity is occupied"
                                                             for f in ok], dtype=object))

    only = {s: False for s in SWITCHES if s != "enableHierarchy"}
    tier = [{"name": "conformance", **only, "enablePreemptable": True},
            {"name": "gang", **only, "enableJobPipelined": True, "enableJobStarving": True},
            {"name": "priority", **only, "enableTaskOrder": True, "enableJobOrder": True, "enablePreemptable": True,
             "enableJobPipelined": True, "enableJobStarving": True},
            {"name": "proportion", **only, "enabledOverused": True, "enabledAllocatable": True,
             "enableQueueOrder": True},
            {"name": "device-fit-after-eviction", **only, "enablePredicate": True}]
    registry = in_tree_registry().copy().add_plugin("device-fit-after-eviction", HiddenDevice)
    conf = confs.load(tiers_conf("preempt", tier), actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(
        pods=[pod("preemptee").req("1", "1G").group("pg-low").on("n1").preemptable(True).build(),
              pod("preemptor").req("1", "1G").group("pg-high").build()],
        nodes=[node("n1").alloc("2", "2G", pods=10).build()],
        podgroups=[_pg("pg-low", 1, {"": 1}, "low-priority").build(), _pg("pg-high", 1, {"": 1}, "high-priority").build()],
        queues=[queue("q1").build()], priority_classes=UPSTREAM_PCS)
    d = run_session(snap, conf, registry=registry)
    assert [f"{e.namespace}/{e.name}" for e in d.evictions] == ["c1/preemptee"]
