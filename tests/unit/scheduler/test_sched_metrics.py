"""Prometheus metrics: one session on a small snapshot exposes every spec §7 scheduler metric with Volcano's labels,
and the exported name set is exactly Volcano's (issue 13 item 8): no `_total` added by Python's client, no
`*_created` series."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from prometheus_client import generate_latest

from lahar.scheduler.metrics import SchedulerMetrics
from tests.builders import node, pod, podgroup, priority_class, queue, run, tiers_conf

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
    ("total_preemption_attempts", ()),
    ("eviction_transactions_total", ("action",)),
    ("unschedule_task_count", ("job_id",)),
    ("unschedule_job_count", ()),
    ("goroutines", ("operation",)),
    ("job_share", ("job_ns", "job_id")),
    ("job_retry_counts", ("job_id",)),
    *[(f"queue_pod_group_{state}_count", ("queue_name",))
      for state in ("inqueue", "pending", "running", "unknown", "completed")],
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
    assert value("job_retry_counts", job_id="big") == 1
    assert value("eviction_transactions_total", action="preempt") == 1
    assert value("total_preemption_attempts") == 1
    # the second session: "lo" Running, "hi" enqueued (Inqueue) in c1; the first: "big" Inqueue in q2
    assert value("queue_pod_group_running_count", queue_name="c1") == 1
    assert value("queue_pod_group_inqueue_count", queue_name="c1") == 1
    assert value("queue_pod_group_pending_count", queue_name="c1") == 0
    assert value("queue_pod_group_inqueue_count", queue_name="q2") == 1
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


# Every metric Volcano's scheduler defines, from volcano-sh/volcano pkg/scheduler/metrics/{metrics,job,namespace,
# queue}.go (Subsystem "volcano"; Go's client exports each under exactly this name), plus the queue PodGroup counts
# that Volcano's controller exports (pkg/controllers/metrics/queue.go) and lahar's scheduler exports here.
VOLCANO_SCHEDULER = {
    "counter": ["schedule_attempts_total", "total_preemption_attempts", "eviction_transactions_total",
                "job_retry_counts"],
    "histogram": ["e2e_scheduling_latency_milliseconds", "open_session_duration_milliseconds",
                  "e2e_job_scheduling_latency_milliseconds", "plugin_scheduling_latency_milliseconds",
                  "action_scheduling_latency_milliseconds", "task_scheduling_latency_milliseconds",
                  "scheduling_stage_duration_milliseconds"],
    "gauge": ["e2e_job_scheduling_duration", "e2e_job_scheduling_start_time", "e2e_job_scheduling_last_time",
              "pod_preemption_victims", "unschedule_task_count", "unschedule_job_count", "goroutines", "job_share",
              "namespace_share", "namespace_weight", "namespace_weighted_share", "queue_share", "queue_weight",
              "queue_overused",
              *[f"queue_{kind}_{unit}" for kind in ("allocated", "request", "deserved", "capacity", "real_capacity",
                                                    "inqueue")
                for unit in ("milli_cpu", "memory_bytes", "scalar_resources")]],
}
VOLCANO_CONTROLLER = [f"queue_pod_group_{s}_count" for s in ("inqueue", "pending", "running", "unknown", "completed")]
LAHAR_OWN = ["lahar_scheduler_conf_errors_total", "lahar_scheduler_ticks_dropped_total", "lahar_scheduler_cache_synced",
             "lahar_scheduler_cache_sync_seconds", "lahar_scheduler_ticks_before_sync_total"]


def _families(text: str) -> dict[str, str]:
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.M))


def test_exported_names_are_volcanos(exposition: str) -> None:
    volcano = {f"volcano_{n}" for names in VOLCANO_SCHEDULER.values() for n in names}
    volcano |= {f"volcano_{n}" for n in VOLCANO_CONTROLLER}
    assert set(_families(exposition)) == volcano | set(LAHAR_OWN)
    samples = {line.split("{")[0].split(" ")[0] for line in exposition.splitlines() if not line.startswith("#")}
    assert not [n for n in samples if n.endswith("_created")]
    assert not [n for n in samples if n.endswith("_total_total") or n in ("volcano_job_retry_counts_total",
                                                                        "volcano_total_preemption_attempts_total")]


@pytest.mark.parametrize("name", VOLCANO_SCHEDULER["histogram"])
def test_histograms_keep_their_series(exposition: str, name: str) -> None:
    assert _families(exposition)[f"volcano_{name}"] == "histogram"
    assert f"volcano_{name}_count" in exposition and f"volcano_{name}_sum" in exposition


@pytest.mark.parametrize("name", ["schedule_attempts_total", "eviction_transactions_total"])
def test_counters_named_with_total_stay_counters(exposition: str, name: str) -> None:
    assert _families(exposition)[f"volcano_{name}"] == "counter"


def test_fresh_registries_are_independent() -> None:
    a, b = SchedulerMetrics(), SchedulerMetrics()
    a.job_retries.labels("j").inc()
    assert "volcano_job_retry_counts{" not in generate_latest(b.registry).decode()
    assert 'volcano_job_retry_counts{job_id="j"} 1.0' in generate_latest(a.registry).decode()


class _Reporter:
    """A plugin that reports a queue through the MetricsReport hook, and carries an `attrs` nobody may read."""

    name = "proportion"  # the name metrics used to look up, to prove the name no longer matters

    def __init__(self, arguments: object = None, *, report: bool = True) -> None:
        self.attrs = {"q1": SimpleNamespace(allocated=[5000.0, 0.0], request=None, deserved=None,
                                            real_capability=None, inqueue=None, share=0.9)}
        if not report:
            self.report_metrics = None  # type: ignore[assignment]

    def report_metrics(self, sink: object) -> None:
        from lahar.scheduler.framework.hooks import QueueReport
        sink.queue("q1", QueueReport(allocated=[3000.0, 0.0], share=0.25))  # type: ignore[attr-defined]


@pytest.mark.parametrize(("report", "want"), [(True, (3000.0, 0.25)), (False, None)],
                         ids=["reported-through-the-hook", "plugin-attributes-are-not-read"])
def test_queue_metrics_come_from_the_report_hook(report: bool, want: tuple[float, float] | None) -> None:
    from lahar.scheduler.framework import conf as confs
    from lahar.scheduler.framework import snapshot as snapshots
    from lahar.scheduler.framework.registry import Registry
    from lahar.scheduler.framework.session import Session
    from lahar.scheduler.metrics import gather, sample_key

    registry = Registry().add_plugin("proportion", lambda a: _Reporter(a, report=report))
    c = confs.load(tiers_conf("", ["proportion"]), actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(queues=[queue("q1").build()])
    out = gather(Session(snap, c, registry, uid="s"))
    got = out.get(sample_key("queue_allocated_milli_cpu", "q1"))
    assert (None if got is None else (got, out[sample_key("queue_share", "q1")])) == want
