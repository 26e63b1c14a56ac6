"""enqueue: Pending PodGroups move to Inqueue while their queue's real capability has room (proportion)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import node, pod, podgroup, queue, run, tiers_conf

CONF = tiers_conf("enqueue", ["priority", "gang"], ["proportion"])

CASES: list[dict[str, Any]] = [
    dict(id="no-min-resources-always-enqueued",
         podgroups=[podgroup("pg1").min(1).phase("Pending")], queues=[queue("c1")],
         phases={"c1/pg1": "Inqueue"}),
    dict(id="fits-capability",
         podgroups=[podgroup("pg1").min(1).phase("Pending").min_resources(cpu="2", memory="2Gi")],
         queues=[queue("c1").capability(cpu="4", memory="8Gi")], phases={"c1/pg1": "Inqueue"}),
    dict(id="second-job-exceeds-capability-stays-pending",
         podgroups=[podgroup("pg1").min(1).phase("Pending").min_resources(cpu="3").created(1),
                    podgroup("pg2").min(1).phase("Pending").min_resources(cpu="3").created(2)],
         queues=[queue("c1").capability(cpu="4")], phases={"c1/pg1": "Inqueue", "c1/pg2": "Pending"}),
    dict(id="running-jobs-count-against-capability",
         podgroups=[podgroup("run").min(1).phase("Running").min_resources(cpu="3"),
                    podgroup("pg1").min(1).phase("Pending").min_resources(cpu="2")],
         pods=[pod("r1").req("3", "1Gi").group("run").on("n1")],
         queues=[queue("c1").capability(cpu="4")], phases={"c1/run": "Running", "c1/pg1": "Pending"}),
    dict(id="running-job-without-min-resources-is-all-elastic",
         podgroups=[podgroup("run").min(1).phase("Running"),
                    podgroup("pg1").min(1).phase("Pending").min_resources(cpu="2")],
         pods=[pod("r1").req("3", "1Gi").group("run").on("n1")],
         queues=[queue("c1").capability(cpu="4")], phases={"c1/run": "Running", "c1/pg1": "Inqueue"}),
    dict(id="closed-queue-rejects",
         podgroups=[podgroup("pg1").min(1).phase("Pending").min_resources(cpu="1")],
         queues=[queue("c1").state("Closed")], phases={"c1/pg1": "Pending"}),
    dict(id="cluster-total-bounds-real-capability",
         podgroups=[podgroup("pg1").min(1).phase("Pending").min_resources(cpu="16")],
         queues=[queue("c1")], phases={"c1/pg1": "Pending"}),
    dict(id="guarantee-of-another-queue-is-reserved",
         podgroups=[podgroup("pg1").min(1).phase("Pending").min_resources(cpu="6")],
         queues=[queue("c1"), queue("c2").guarantee(cpu="4")], phases={"c1/pg1": "Pending"}),
    dict(id="round-robin-across-queues",
         podgroups=[podgroup("a1").min(1).phase("Pending").queue("qa").min_resources(cpu="2"),
                    podgroup("b1").min(1).phase("Pending").queue("qb").min_resources(cpu="2")],
         queues=[queue("qa").capability(cpu="2"), queue("qb").capability(cpu="2")],
         phases={"c1/a1": "Inqueue", "c1/b1": "Inqueue"}),
]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_enqueue_phases(case: dict[str, Any]) -> None:
    d = run(pods=case.get("pods", []), nodes=[node("n1").alloc("8", "16Gi")], podgroups=case["podgroups"],
            queues=case["queues"], conf=CONF)
    assert {k: v.status["phase"] for k, v in d.podgroups.items()} == case["phases"]


def test_quota_insufficient_event() -> None:
    d = run(nodes=[node("n1").alloc("8", "16Gi")],
            podgroups=[podgroup("pg1").min(1).phase("Pending").min_resources(cpu="6")],
            queues=[queue("c1").capability(cpu="4")], conf=CONF)
    assert ("Normal", "Unschedulable", "queue resource quota insufficient") in d.podgroups["c1/pg1"].events


# --- upstream enqueue_test.go TestEnqueue, case by case (enqueue action only, no nodes; one tier: drf, proportion,
# sla with sla-waiting-time 3m, gang; queues built with weight 1 and a capability) ------------------------------------

UPSTREAM_CONF = tiers_conf("enqueue", ["drf", "proportion", {"name": "sla", "arguments": {"sla-waiting-time": "3m"}},
                                       "gang"])

UPSTREAM: list[dict[str, Any]] = [
    dict(id="inqueue-stays-inqueue",
         podgroups=[podgroup("pg1").min(2).phase("Inqueue")],
         pods=[pod("p1").req("1", "1G").group("pg1"), pod("p2").req("1", "1G").group("pg1")],
         queues=[queue("c1").capability(cpu="4", memory="4G"), queue("c2").capability(cpu="4", memory="4G")],
         phases={"c1/pg1": "Inqueue"}),
    dict(id="pending-without-min-resources-enqueued",
         podgroups=[podgroup("pg1").min(1).phase("Pending"), podgroup("pg2").min(1).phase("Pending").queue("c2")],
         pods=[pod("p1").req("3", "1G").group("pg1"), pod("p2").req("1", "1G").group("pg2")],
         queues=[queue("c1").capability(cpu="4", memory="4G"), queue("c2").capability(cpu="4", memory="4G")],
         phases={"c1/pg1": "Inqueue", "c1/pg2": "Inqueue"}),
    dict(id="running-stays-running",
         podgroups=[podgroup("pg1").min(2).phase("Running")],
         pods=[pod("p1").req("1", "1G").group("pg1").phase("Running"),
               pod("p2").req("1", "1G").group("pg1").phase("Running")],
         queues=[queue("c1").capability(cpu="4", memory="4G")], phases={"c1/pg1": "Running"}),
    dict(id="unknown-queue-not-enqueued",
         podgroups=[podgroup("pg1").min(0).phase("Pending")],
         queues=[queue("c2").capability(cpu="4", memory="4G")], phases={}),
    dict(id="queue-capability-below-min-resources-stays-pending",
         podgroups=[podgroup("pg1").min(1).phase("Pending").min_resources(cpu="8", memory="8G")],
         queues=[queue("c1").capability(cpu="1", memory="1G")], phases={"c1/pg1": "Pending"}),
]


@pytest.mark.parametrize("case", UPSTREAM, ids=[c["id"] for c in UPSTREAM])
def test_enqueue_upstream(case: dict[str, Any]) -> None:
    d = run(pods=case.get("pods", []), nodes=[], podgroups=case["podgroups"], queues=case["queues"],
            conf=UPSTREAM_CONF)
    got = {k: v.status.get("phase") for k, v in d.podgroups.items()}
    for key, phase in case["phases"].items():
        assert got.get(key) == phase, (key, got)
    if not case["phases"]:  # a job whose queue is unknown is not in the session at all
        assert all(phase != "Inqueue" for phase in got.values()), got
