"""sla: waiting-time job order and the enqueue/pipeline permits (Volcano's plugins/sla/sla_test.go and the e2e
"sla permits job to be inqueue", as data)."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Session
from lahar.scheduler.plugins import sla
from lahar.scheduler.registry import in_tree_registry
from tests.builders import node, podgroup, queue, run, tiers_conf

DURATIONS = [("hours", "1h", 3600.0), ("mixed", "1h2m3s4ms5us6ns", 3723.004005006), ("micro-sign", "5µs", 5e-6),
             ("fraction", "1.5m", 90.0), ("zero", "0", 0.0), ("bad-unit", "3x", None), ("no-unit", "10", None),
             ("empty", "", None), ("negative", "-1s", -1.0)]


@pytest.mark.parametrize(("text", "seconds"), [d[1:] for d in DURATIONS], ids=[d[0] for d in DURATIONS])
def test_parse_duration(text: str, seconds: float | None) -> None:
    got = sla.parse_duration(text)
    assert got == (pytest.approx(seconds) if seconds is not None else None)


NOW = "2024-01-01T01:00:00Z"  # one hour after the builders' creation timestamps


def session(args: dict[str, Any], *pgs: podgroup) -> Session:
    snap = snapshots.build(podgroups=[p.build() for p in pgs], queues=[queue("c1").build()])
    conf = confs.load(tiers_conf("enqueue", [{"name": "sla", "arguments": args}]))
    return Session(snap, conf, in_tree_registry(), now=lambda: NOW)


JOB1 = podgroup("job1")  # no waiting time of its own
JOB2 = podgroup("job2").annotate(**{"volcano.sh/sla-waiting-time": "1h"})

ORDER_CASES = [
    # Volcano's three cases: JobOrderFn(job1, job2) and JobEnqueueable(job1)
    ("global-3m", {"sla-waiting-time": "3m"}, True, True),
    ("global-wrong-type", {"sla-waiting-time": 1}, False, True),
    ("none", {}, False, True),
]


@pytest.mark.parametrize(("args", "first", "enqueueable"), [c[1:] for c in ORDER_CASES],
                         ids=[c[0] for c in ORDER_CASES])
def test_order_and_enqueueable(args: dict[str, Any], first: bool, enqueueable: bool) -> None:
    ssn = session(args, JOB1, JOB2)
    j1, j2 = ssn.jobs["c1/job1"], ssn.jobs["c1/job2"]
    assert ssn.job_order(j1, j2) is first
    assert ssn.job_enqueueable(j1) is enqueueable


VOTES = [
    ("waited-long-enough", {"sla-waiting-time": "30m"}, podgroup("a"), "PERMIT"),
    ("not-yet", {"sla-waiting-time": "2h"}, podgroup("a"), "ABSTAIN"),
    ("annotation-beats-argument", {"sla-waiting-time": "2h"},
     podgroup("a").annotate(**{"volcano.sh/sla-waiting-time": "10m"}), "PERMIT"),
    ("bare-annotation-key", {}, podgroup("a").annotate(**{"sla-waiting-time": "10m"}), "PERMIT"),
    ("invalid-annotation-falls-back", {"sla-waiting-time": "2h"},
     podgroup("a").annotate(**{"volcano.sh/sla-waiting-time": "soon"}), "ABSTAIN"),
    ("no-waiting-time", {}, podgroup("a"), "ABSTAIN"),
]


@pytest.mark.parametrize(("args", "pg", "vote"), [v[1:] for v in VOTES], ids=[v[0] for v in VOTES])
def test_enqueueable_and_pipelined_votes(args: dict[str, Any], pg: podgroup, vote: str) -> None:
    ssn = session(args, pg)
    plugin, job = ssn.plugins["sla"], ssn.jobs["c1/a"]
    assert plugin.job_enqueueable(job).name == vote
    assert plugin.job_pipelined(job).name == vote


def test_deadline_orders_jobs() -> None:
    early = podgroup("early").created(30).annotate(**{"volcano.sh/sla-waiting-time": "1m"})
    late = podgroup("late").created(0).annotate(**{"volcano.sh/sla-waiting-time": "5m"})
    ssn = session({}, early, late)
    assert ssn.job_order(ssn.jobs["c1/early"], ssn.jobs["c1/late"]) is True


# e2e shape: a job larger than the cluster stays Pending under overcommit until its waiting time is over
ENQUEUE = [
    ("waited-forces-enqueue", "1m", "Inqueue"),
    ("still-waiting", "100000h", "Pending"),
]


@pytest.mark.parametrize(("wait", "phase"), [e[1:] for e in ENQUEUE], ids=[e[0] for e in ENQUEUE])
def test_sla_forces_enqueue_past_overcommit(wait: str, phase: str) -> None:
    conf = tiers_conf("enqueue", ["priority", "gang", {"name": "sla", "arguments": {"sla-waiting-time": wait}}],
                      ["overcommit", "drf", "proportion"])
    d = run(nodes=[node("n1").alloc("2", "4Gi")], queues=[queue("c1")],
            podgroups=[podgroup("big").phase("Pending").min(4).min_resources(cpu="8", memory="8Gi")], conf=conf)
    assert d.podgroups["c1/big"].status["phase"] == phase
