"""backfill: BestEffort tasks (no requests) of non-pending jobs are placed without gang semantics."""

from __future__ import annotations

from tests.unit.sched_builders import node, pod, podgroup, queue, run, tiers_conf

CONF = tiers_conf("allocate, backfill", ["priority", "gang"], ["predicates", "proportion", "nodeorder"])


def test_best_effort_pod_is_backfilled() -> None:
    d = run(pods=[pod("p1").group("pg1")], nodes=[node("n1").alloc("2", "4Gi")],
            podgroups=[podgroup("pg1").min(1)], queues=[queue("c1")], conf=CONF)
    assert d.bind_map() == {"c1/p1": "n1"}


def test_backfill_honours_predicates_and_max_pods() -> None:
    d = run(pods=[pod("p1").group("pg1").selector(role="x"), pod("p2").group("pg1"), pod("p3").group("pg1")],
            nodes=[node("n1").alloc("2", "4Gi", pods=1), node("n2").alloc("2", "4Gi", pods=1).label(role="x")],
            podgroups=[podgroup("pg1").min(0)], queues=[queue("c1")], conf=CONF)
    binds = d.bind_map()
    assert binds["c1/p1"] == "n2"
    assert len(binds) == 2 and set(binds.values()) == {"n1", "n2"}


def test_pending_podgroup_is_not_backfilled() -> None:
    d = run(pods=[pod("p1").group("pg1")], nodes=[node("n1").alloc("2", "4Gi")],
            podgroups=[podgroup("pg1").min(1).phase("Pending")], queues=[queue("c1")],
            conf=tiers_conf("enqueue, backfill", ["gang"], ["predicates"]).replace("enqueue, ", ""))
    assert d.bind_map() == {}
