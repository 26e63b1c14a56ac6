"""Transactional preemption and reclaim, case by case (issue 20 item 3): the shapes the property tests of
test_sched_preempt_properties.py stand on, each one a finding that lahar's preempt or reclaim got wrong before."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import node, pod, podgroup, priority_class, queue, run, tiers_conf

TIER1 = ["priority", "gang", "conformance"]
TIER2 = ["drf", "predicates", "proportion", "nodeorder"]
PREEMPT = tiers_conf("enqueue, allocate, preempt", TIER1, TIER2)
RECLAIM = tiers_conf("reclaim", TIER1, TIER2)
PCS = [priority_class("low", 10), priority_class("high", 1000)]


def _p(name: str, group: str, cpu: str, on: str | None = None, prio: int = 10) -> pod:
    p = pod(name).req(cpu, "1G").group(group).priority(prio)
    return p.on(on) if on else p


CASES: list[dict[str, Any]] = [
    # drf in tier 2 used to pick the victim once tier 1's priority named nobody (equal priority), and took j0 from 2
    # running pods to 1 below its minAvailable 2 (found by the property test)
    dict(id="later-tier-cannot-break-a-victim-gang", conf=PREEMPT,
         nodes=[node("n1").alloc("2", "8G")], queues=[queue("q1")],
         podgroups=[podgroup("j0").min(2).queue("q1").phase("Running").priority_class("low"),
                    podgroup("j1").min(1).queue("q1").priority_class("low")],
         pods=[_p("j0-0", "j0", "1", "n1"), _p("j0-1", "j0", "1", "n1"), _p("j1-0", "j1", "1")],
         evicted=[], pipelined={}),
    # volcano#5131: hi-1 fits n2 as it is, hi-0 needs lo-1 gone from n1; preempt used to skip hi-1 (no victims on
    # n2), so the gang of 2 never pipelined and nothing happened, session after session
    dict(id="preempt-places-the-member-that-needs-no-victim", conf=PREEMPT,
         nodes=[node("n1").alloc("2", "8G"), node("n2").alloc("1", "8G")], queues=[queue("q1")],
         podgroups=[podgroup("lo").min(1).queue("q1").phase("Running").priority_class("low"),
                    podgroup("hi").min(2).queue("q1").priority_class("high")],
         pods=[_p("lo-0", "lo", "1", "n1"), _p("lo-1", "lo", "1", "n1"),
               _p("hi-0", "hi", "1", prio=1000), _p("hi-1", "hi", "1", prio=1000)],
         evicted=["c1/lo-1"], pipelined={"c1/hi-0": "n2", "c1/hi-1": "n1"}),
    dict(id="reclaim-places-the-member-that-needs-no-victim", conf=RECLAIM,
         nodes=[node("n1").alloc("3", "8G"), node("n2").alloc("1", "8G")], queues=[queue("qv"), queue("qa")],
         podgroups=[podgroup("v").min(1).queue("qv").phase("Running"),
                    podgroup("a").min(2).queue("qa").phase("Inqueue")],
         pods=[_p("v-0", "v", "1", "n1"), _p("v-1", "v", "1", "n1"), _p("v-2", "v", "1", "n1"),
               _p("a-0", "a", "1"), _p("a-1", "a", "1")],
         evicted=["c1/v-2"], pipelined={"c1/a-0": "n2", "c1/a-1": "n1"}),
    # reclaim kept a's statement open (v-small evicted for a-0, a-1 fits nowhere) through b's turn, so b saw v-small
    # as already going and evicted v-big, twice what b-0 needs; a's statement was then discarded and v-small stayed
    dict(id="reclaim-never-builds-on-another-jobs-open-statement", conf=RECLAIM,
         nodes=[node("n1").alloc("3", "8G")], queues=[queue("qv"), queue("qa"), queue("qb")],
         podgroups=[podgroup("v").min(1).queue("qv").phase("Running"),
                    podgroup("a").min(2).queue("qa").phase("Inqueue"),
                    podgroup("b").min(1).queue("qb").phase("Inqueue")],
         pods=[_p("v-big", "v", "2", "n1"), _p("v-small", "v", "1", "n1"),
               _p("a-0", "a", "1"), _p("a-1", "a", "4"), _p("b-0", "b", "1")],
         evicted=["c1/v-small"], pipelined={"c1/b-0": "n1"}),
]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_transactional(case: dict[str, Any]) -> None:
    d = run(pods=case["pods"], nodes=case["nodes"], podgroups=case["podgroups"], queues=case["queues"],
            priority_classes=PCS, conf=case["conf"])
    assert sorted(f"{e.namespace}/{e.name}" for e in d.evictions) == case["evicted"]
    assert d.pipelined == case["pipelined"]
