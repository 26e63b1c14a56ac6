"""preempt: within a queue, a starving higher-priority job evicts lower-priority tasks and pipelines
(Volcano preempt_test.go shapes as data)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.sched_builders import node, pod, podgroup, priority_class, queue, run, tiers_conf

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
