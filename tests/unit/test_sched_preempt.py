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
