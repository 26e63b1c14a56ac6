"""Prometheus metrics with Volcano's names (spec §7, subsystem `volcano`), so existing dashboards work.

`observe(decisions)` records one session; `registry` is this process's collector registry (served by
`lahar scheduler --metrics-port`).
"""

from __future__ import annotations

from collections import Counter as _Counter

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from scheduler.framework.nodes import ResourceIndex
from scheduler.framework.session import Decisions

__all__ = ["SchedulerMetrics"]

_MS_BUCKETS = (5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10240, 20480)


class SchedulerMetrics:
    """One set of collectors on its own registry (tests make fresh ones; no global state)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry if registry is not None else CollectorRegistry()
        ns = "volcano"
        self.e2e = Histogram("e2e_scheduling_latency_milliseconds", "E2e scheduling latency in milliseconds",
                             namespace=ns, buckets=_MS_BUCKETS, registry=r)
        self.open = Histogram("open_session_duration_milliseconds", "Open session duration in milliseconds",
                              namespace=ns, buckets=_MS_BUCKETS, registry=r)
        self.action = Histogram("action_scheduling_latency_milliseconds", "Action scheduling latency in milliseconds",
                                ["action"], namespace=ns, buckets=_MS_BUCKETS, registry=r)
        self.plugin = Histogram("plugin_scheduling_latency_milliseconds", "Plugin scheduling latency in milliseconds",
                                ["plugin", "OnSession"], namespace=ns, buckets=_MS_BUCKETS, registry=r)
        self.attempts = Counter("schedule_attempts", "Number of attempts to schedule pods, by the result",
                                ["result"], namespace=ns, registry=r)
        self.victims = Gauge("pod_preemption_victims", "Number of selected preemption victims", namespace=ns,
                             registry=r)
        self.preemption_attempts = Counter("total_preemption_attempts", "Total preemption attempts in the cluster",
                                           namespace=ns, registry=r)
        self.evictions = Counter("eviction_transactions", "Evictions by reason", ["reason"], namespace=ns,
                                 registry=r)
        self.unschedule_tasks = Gauge("unschedule_task_count", "Number of tasks could not be scheduled", ["job_id"],
                                      namespace=ns, registry=r)
        self.unschedule_jobs = Gauge("unschedule_job_count", "Number of jobs could not be scheduled", namespace=ns,
                                     registry=r)
        self.queue_allocated_cpu = Gauge("queue_allocated_milli_cpu", "Allocated CPU count for one queue",
                                         ["queue_name"], namespace=ns, registry=r)
        self.queue_allocated_mem = Gauge("queue_allocated_memory_bytes", "Allocated memory for one queue",
                                         ["queue_name"], namespace=ns, registry=r)
        self.queue_allocated_scalar = Gauge("queue_allocated_scalar_resources", "Allocated scalar resources",
                                            ["queue_name", "resource"], namespace=ns, registry=r)
        self.conf_errors = Counter("lahar_scheduler_conf_errors", "Scheduler configurations rejected (last good kept)",
                                   registry=r)
        self.sessions_skipped = Counter("lahar_scheduler_ticks_dropped",
                                        "Session ticks dropped because a session was running", registry=r)

    def observe(self, d: Decisions) -> None:
        t = d.timings
        self.e2e.observe(t.get("total", 0.0) * 1000)
        self.open.observe(t.get("open", 0.0) * 1000)
        for key, secs in t.items():
            if key.startswith("action:"):
                self.action.labels(key.split(":", 1)[1]).observe(secs * 1000)
            elif key.startswith("plugin:"):
                _, name, stage = key.split(":", 2)
                self.plugin.labels(name, stage).observe(secs * 1000)
        if d.binds:
            self.attempts.labels("scheduled").inc(len(d.binds))
        unschedulable = [c for c in d.pod_conditions if c.reason == "Unschedulable"]
        if unschedulable:
            self.attempts.labels("unschedulable").inc(len(unschedulable))
        if d.evictions:
            self.victims.set(len(d.evictions))
            self.preemption_attempts.inc()
            for reason, n in _Counter(e.reason for e in d.evictions).items():
                self.evictions.labels(reason).inc(n)
        self.unschedule_jobs.set(sum(1 for u in d.podgroups.values()
                                     if u.status.get("phase") in ("Pending", "Inqueue", "Unknown")))
        for key, u in d.podgroups.items():
            pending = sum(1 for c in unschedulable if c.namespace == u.namespace) if u.status.get("phase") in (
                "Pending", "Inqueue") else 0
            if pending:
                self.unschedule_tasks.labels(key).set(pending)
        idx = ResourceIndex()
        for q, rl in d.queues.items():
            v = idx.vector(rl)
            self.queue_allocated_cpu.labels(q).set(float(v[0]))
            self.queue_allocated_mem.labels(q).set(float(v[1]))
            for name, value in rl.items():
                if name not in ("cpu", "memory"):
                    self.queue_allocated_scalar.labels(q, name).set(float(ResourceIndex([name]).vector(
                        {name: value})[-1]))
