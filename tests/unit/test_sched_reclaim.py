"""reclaim: a queue below its deserved share takes resources back from reclaimable queues above theirs
(Volcano reclaim_test.go shapes as data)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.sched_builders import node, pod, podgroup, queue, run, tiers_conf

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
