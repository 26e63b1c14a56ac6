"""Prometheus metrics: one session on a small snapshot exposes every spec §7 scheduler metric with Volcano's labels."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from prometheus_client import generate_latest

from lahar.scheduler.metrics import SchedulerMetrics
from tests.unit.sched_builders import node, pod, podgroup, priority_class, queue, run, tiers_conf

CONF = tiers_conf("enqueue, allocate, preempt, reclaim, backfill", ["priority", "gang", "conformance"],
                  ["drf", "predicates", "proportion", "nodeorder"])

# name (without the `volcano_` prefix) → label names Volcano's dashboards select on
EXPECTED: list[tuple[str, tuple[str, ...]]] = [
    ("e2e_scheduling_latency_milliseconds_count", ()),
    ("open_session_duration_milliseconds_count", ()),
    ("e2e_job_scheduling_latency_milliseconds_count", ()),
    ("e2e_job_scheduling_duration", ("job_name", "queue", "job_namespace")),
    ("e2e_job_scheduling_start_time", ("job_name", "queue", "job_namespace")),
    ("e2e_job_scheduling_last_time", ("job_name", "queue", "job_namespace")),
    ("plugin_scheduling_latency_milliseconds_count", ("plugin", "OnSession")),
    ("action_scheduling_latency_milliseconds_count", ("action",)),
    ("task_scheduling_latency_milliseconds_count", ("stage",)),
    ("scheduling_stage_duration_milliseconds_count", ("stage",)),
    ("schedule_attempts_total", ("result",)),
    ("pod_preemption_victims", ()),
    ("total_preemption_attempts_total", ()),
    ("eviction_transactions_total", ("reason",)),
    ("unschedule_task_count", ("job_id",)),
    ("unschedule_job_count", ()),
    ("goroutines", ("operation",)),
    ("job_share", ("job_ns", "job_id")),
    ("job_retry_counts_total", ("job_id",)),
    *[(f"queue_{kind}_{unit}", ("queue_name",)) for kind in
      ("allocated", "request", "deserved", "capacity", "real_capacity", "inqueue")
      for unit in ("milli_cpu", "memory_bytes")],
    ("queue_allocated_scalar_resources", ("queue_name", "resource")),
    ("queue_request_scalar_resources", ("queue_name", "resource")),
    ("queue_share", ("queue_name",)),
    ("queue_weight", ("queue_name",)),
    ("queue_overused", ("queue_name",)),
    ("namespace_share", ("namespace_name",)),
    ("namespace_weight", ("namespace_name",)),
    ("namespace_weighted_share", ("namespace_name",)),
]


def _sessions():
    """Session 1: q1 runs a GPU pod, a job binds whole, q2's gang of 3 cannot fit. Session 2: a high-priority job
    preempts a low-priority one in the same queue."""
    first = run(
        nodes=[node("n1").alloc("4", "8Gi", **{"nvidia.com/gpu": "2"}), node("n2").alloc("4", "8Gi")],
        queues=[queue("q1").capability(cpu="6", memory="12Gi"), queue("q2")],
        podgroups=[podgroup("run").min(1).phase("Running").queue("q1"),
                   podgroup("new").min(2).queue("q1").created(5),
                   podgroup("big").min(3).queue("q2").created(7)],
        pods=[pod("r1").req("1", "1Gi", **{"nvidia.com/gpu": "1"}).group("run").on("n1"),
              *[pod(f"w{i}").req("1", "1Gi").group("new").created(3) for i in range(2)],
              *[pod(f"b{i}").req("3", "2Gi").group("big").created(5) for i in range(3)]],
        conf=CONF)
    second = run(
        nodes=[node("n1").alloc("2", "2Gi")], queues=[queue("c1").weight(2)],
        priority_classes=[priority_class("low", 1), priority_class("high", 100)],
        podgroups=[podgroup("lo").min(1).phase("Running").priority_class("low"),
                   podgroup("hi").min(1).priority_class("high")],
        pods=[pod("l1").req("1", "1Gi").group("lo").on("n1"), pod("l2").req("1", "1Gi").group("lo").on("n1"),
              pod("h1").req("1", "1Gi").group("hi")],
        conf=CONF)
    return first, second


def _series(text: str, name: str) -> list[dict[str, str]]:
    out = []
    for line in text.splitlines():
        m = re.match(rf"^volcano_{name}(?:\{{(.*)\}})? ", line)
        if m:
            out.append(dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or "")))
    return out


@pytest.fixture(scope="module")
def exposition() -> str:
    first, second = _sessions()
    assert first.binds and second.evictions  # the scenario exercises binds, an unschedulable gang and preemption
    m = SchedulerMetrics()
    for d in (first, second):
        m.observe(d, commit=SimpleNamespace(bind_failures={}, bind_seconds=[0.002] * len(d.binds), seconds=0.01,
                                            workers=4))
    return generate_latest(m.registry).decode()


@pytest.mark.parametrize(("name", "labels"), EXPECTED, ids=[n for n, _ in EXPECTED])
def test_metric_exposed_with_volcano_labels(exposition: str, name: str, labels: tuple[str, ...]) -> None:
    series = _series(exposition, name)
    assert series, f"volcano_{name} missing"
    assert all(set(s) == set(labels) for s in series), series


def test_values_follow_the_session(exposition: str) -> None:
    def value(name: str, **labels: str) -> float:
        for line in exposition.splitlines():
            m = re.match(rf"^volcano_{name}(?:\{{(.*)\}})? (\S+)$", line)
            if m and dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or "")) == labels:
                return float(m.group(2))
        raise AssertionError(f"no sample volcano_{name}{labels}")

    assert value("queue_weight", queue_name="q2") == 1
    assert value("queue_weight", queue_name="c1") == 2
    assert value("queue_capacity_milli_cpu", queue_name="q1") == 6000
    assert value("queue_capacity_memory_bytes", queue_name="q1") == 12 * 2**30
    assert value("queue_allocated_scalar_resources", queue_name="q1", resource="nvidia.com/gpu") == 1000
    assert value("queue_overused", queue_name="q1") in (0.0, 1.0)
    assert value("schedule_attempts_total", result="scheduled") >= 2
    assert value("job_retry_counts_total", job_id="big") == 1
    assert value("eviction_transactions_total", reason="preempt") == 1
    assert value("pod_preemption_victims") == 1
    assert value("unschedule_job_count") >= 1


def test_every_spec_scheduler_metric_is_registered() -> None:
    """The §7 scheduler list, name by name (expanded `{…}` families)."""
    names = {f.name for f in SchedulerMetrics().registry.collect()}
    spec = ["e2e_scheduling_latency_milliseconds", "open_session_duration_milliseconds",
            "e2e_job_scheduling_latency_milliseconds", "e2e_job_scheduling_duration", "e2e_job_scheduling_start_time",
            "e2e_job_scheduling_last_time", "plugin_scheduling_latency_milliseconds",
            "action_scheduling_latency_milliseconds", "task_scheduling_latency_milliseconds",
            "scheduling_stage_duration_milliseconds", "schedule_attempts", "pod_preemption_victims",
            "total_preemption_attempts", "eviction_transactions", "unschedule_task_count", "unschedule_job_count",
            "goroutines", "job_share", "job_retry_counts", "queue_share", "queue_weight", "queue_overused",
            "namespace_share", "namespace_weight", "namespace_weighted_share",
            *[f"queue_{k}_{u}" for k in ("allocated", "request", "deserved", "capacity", "real_capacity", "inqueue")
              for u in ("milli_cpu", "memory_bytes", "scalar_resources")]]
    assert {f"volcano_{n}" for n in spec} <= names
