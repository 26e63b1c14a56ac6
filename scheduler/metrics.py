"""Prometheus metrics with Volcano's exact names and labels (spec §7, subsystem `volcano`), so dashboards work.

`gather(ssn)` reads a session's queue/job/namespace state into plain samples just before it closes (run_session
stores them in `Decisions.counters`); `SchedulerMetrics.observe(decisions, commit=...)` records one session;
`.registry` is this process's collector registry (served by `lahar scheduler --metrics-port`). It exports what Go's
client would: no `*_created` series, and `volcano_total_preemption_attempts` / `volcano_job_retry_counts` under
those names (Python's client would add `_total`), see `VolcanoExposition`.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections import Counter as _Counter
from collections.abc import Mapping
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from lahar.scheduler.framework.session import Decisions
from lahar.scheduler.framework.snapshot import TaskStatus

__all__ = ["EXACT_COUNTERS", "SAMPLE_SEP", "SchedulerMetrics", "VolcanoExposition", "gather", "sample_key",
           "split_key"]

NS = "volcano"
# Volcano's buckets: ExponentialBuckets(5, 2, 15) for session/action/plugin, (32, 2, 10) for jobs.
_MS_BUCKETS = tuple(5.0 * 2**i for i in range(15))
_JOB_BUCKETS = tuple(32.0 * 2**i for i in range(10))
_TASK_BUCKETS = tuple(float(b) for b in np.geomspace(50, 60000, 30).round(3))
_STAGE_BUCKETS = tuple(float(b) for b in np.geomspace(0.1, 500, 20).round(4))

# Samples gathered from a session ride in `Decisions.counters` as "metric\x1flabel\x1flabel…" → value.
SAMPLE_SEP = "\x1f"
_QUEUE_RES = ("allocated", "request", "deserved", "capacity", "real_capacity", "inqueue")
# PodGroup phase → volcano_queue_pod_group_<state>_count (Volcano's controller exports them from queue.status)
_PG_STATES = {"": "pending", "Pending": "pending", "Inqueue": "inqueue", "Running": "running", "Unknown": "unknown",
              "Completed": "completed"}
# Volcano counters whose names end without `_total`: Go's client exports a counter under its exact name, Python's
# appends `_total` (and its text format ties a counter's TYPE line to that suffix), so these go out as gauges.
EXACT_COUNTERS = frozenset({f"{NS}_total_preemption_attempts", f"{NS}_job_retry_counts"})


class VolcanoExposition(Collector):
    """The metrics of `inner` as Volcano's Go client names them: no `*_created` samples (Go has none), and the
    counters of `EXACT_COUNTERS` under their own names. Pure renaming at collect time; `inner` keeps the values."""

    def __init__(self, inner: CollectorRegistry) -> None:
        self.inner = inner

    def collect(self) -> Any:
        for m in self.inner.collect():
            if m.type == "counter" and m.name in EXACT_COUNTERS:
                out = Metric(m.name, m.documentation, "gauge")
                out.samples = [s._replace(name=m.name) for s in m.samples if s.name == f"{m.name}_total"]
            else:
                out = Metric(m.name, m.documentation, m.type, m.unit)
                out.samples = [s for s in m.samples if not s.name.endswith("_created")]
            yield out


def sample_key(metric: str, *labels: str) -> str:
    return SAMPLE_SEP.join((metric, *labels))


def split_key(key: str) -> tuple[str, tuple[str, ...]]:
    metric, *labels = key.split(SAMPLE_SEP)
    return metric, tuple(labels)


def _finite(v: float) -> bool:
    return bool(np.isfinite(v))


def gather(ssn: Any) -> dict[str, float]:
    """The session's gauges as plain samples (call after the actions, before `close()`: plugins drop their state
    on close). Queue resources and shares, job shares and the cluster total are what the plugins report through
    the `MetricsReport` hook (`Session.report_metrics`: proportion or capacity, drf)."""
    out: dict[str, float] = {}
    names: tuple[str, ...] = ssn.resources.names

    def put_res(kind: str, queue: str, vec: Any) -> None:
        if vec is None:
            return
        for i, rname in enumerate(names):
            v = float(vec[i])
            if not _finite(v):
                continue
            if i == 0:
                out[sample_key(f"queue_{kind}_milli_cpu", queue)] = v
            elif i == 1:
                out[sample_key(f"queue_{kind}_memory_bytes", queue)] = v
            elif abs(v) > 0:
                out[sample_key(f"queue_{kind}_scalar_resources", queue, rname)] = v

    report = ssn.report_metrics()  # what the plugins report (MetricsReport hook); no plugin attribute is read
    states = _Counter((job.queue, _PG_STATES.get(job.phase)) for job in ssn.jobs.values())
    for name, q in ssn.queues.items():
        for state in ("inqueue", "pending", "running", "unknown", "completed"):
            out[sample_key(f"queue_pod_group_{state}_count", name)] = float(states.get((name, state), 0))
        out[sample_key("queue_weight", name)] = float(q.weight)
        if q.has_capability:
            put_res("capacity", name, q.capability)
        attr = report.queues.get(name)
        if attr is not None:
            for kind in ("allocated", "request", "deserved", "real_capacity", "inqueue"):
                put_res(kind, name, getattr(attr, kind))
            out[sample_key("queue_share", name)] = float(attr.share)
        try:
            out[sample_key("queue_overused", name)] = 1.0 if ssn.overused(q) else 0.0
        except (KeyError, AttributeError):  # a plugin without state for this queue
            out[sample_key("queue_overused", name)] = 0.0
    ns_alloc: dict[str, Any] = {}
    for uid, (share_, allocated) in report.job_shares.items():
        job = ssn.jobs.get(uid)
        if job is None:
            continue
        out[sample_key("job_share", job.namespace, job.name)] = float(share_)
        ns_alloc[job.namespace] = ns_alloc.get(job.namespace, 0) + allocated
    total = report.total
    for ns, alloc in ns_alloc.items():  # namespace dominant share; weight 1 (Volcano's default)
        share = 0.0
        if total is not None and len(total) == len(alloc):
            with np.errstate(divide="ignore", invalid="ignore"):
                r = np.where(total > 0, alloc / np.where(total > 0, total, 1), 0.0)
            share = float(r.max()) if len(r) else 0.0
        out[sample_key("namespace_share", ns)] = share
        out[sample_key("namespace_weight", ns)] = 1.0
        out[sample_key("namespace_weighted_share", ns)] = share
    pending = TaskStatus.PENDING
    for job in ssn.jobs.values():
        if not job.fit_errors and job.phase == "Running" and not job.index.get(pending):
            continue  # settled: nothing to report this session (keeps an idle session cheap)
        # gang's OnSessionClose counts a retry for every job left not ready with tasks still waiting
        if job.fit_errors and job.min_available > 0 and not job.is_ready():
            out[sample_key("job_retry", job.name)] = 1.0
        waiting = job.index.get(pending)
        if waiting:
            out[sample_key("unschedule_tasks", job.name)] = float(len(waiting))
        if job.creation:
            out[sample_key("job_created", job.namespace, job.name, job.queue)] = _epoch(job.creation)
    if ssn.decisions.binds:
        bound = {b.uid for b in ssn.decisions.binds}
        for job in ssn.jobs.values():
            for uid in bound.intersection(job.tasks):
                if job.tasks[uid].creation:
                    out[sample_key("task_created", uid)] = _epoch(job.tasks[uid].creation)
    return out


@functools.lru_cache(maxsize=65536)
def _epoch(ts: str) -> float:
    try:
        return dt.datetime.fromisoformat(ts).timestamp()
    except ValueError:
        return 0.0


class SchedulerMetrics:
    """One set of collectors on its own registry (tests make fresh ones; no global state)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self._inner = CollectorRegistry()
        self.registry.register(VolcanoExposition(r))
        self.e2e = Histogram("e2e_scheduling_latency_milliseconds",
                             "E2e scheduling latency in milliseconds (scheduling algorithm + binding)",
                             namespace=NS, buckets=_MS_BUCKETS, registry=r)
        self.open = Histogram("open_session_duration_milliseconds", "Open session duration in milliseconds",
                              namespace=NS, buckets=_MS_BUCKETS, registry=r)
        self.job_latency = Histogram("e2e_job_scheduling_latency_milliseconds",
                                     "E2e job scheduling latency in milliseconds", namespace=NS,
                                     buckets=_JOB_BUCKETS, registry=r)
        job_labels = ["job_name", "queue", "job_namespace"]
        self.job_duration = Gauge("e2e_job_scheduling_duration", "E2E job scheduling duration", job_labels,
                                  namespace=NS, registry=r)
        self.job_start = Gauge("e2e_job_scheduling_start_time", "E2E job scheduling start time", job_labels,
                               namespace=NS, registry=r)
        self.job_last = Gauge("e2e_job_scheduling_last_time", "E2E job scheduling last time", job_labels,
                              namespace=NS, registry=r)
        self.action = Histogram("action_scheduling_latency_milliseconds", "Action scheduling latency in milliseconds",
                                ["action"], namespace=NS, buckets=_MS_BUCKETS, registry=r)
        self.plugin = Histogram("plugin_scheduling_latency_milliseconds", "Plugin scheduling latency in milliseconds",
                                ["plugin", "OnSession"], namespace=NS, buckets=_MS_BUCKETS, registry=r)
        self.task_latency = Histogram("task_scheduling_latency_milliseconds",
                                      "Task scheduling latency from creation to various stages in milliseconds",
                                      ["stage"], namespace=NS, buckets=_TASK_BUCKETS, registry=r)
        self.stage = Histogram("scheduling_stage_duration_milliseconds",
                               "Duration of per-task scheduling stages (Predicate, Scoring, PreBind, Bind) in "
                               "milliseconds", ["stage"], namespace=NS, buckets=_STAGE_BUCKETS, registry=r)
        self.attempts = Counter("schedule_attempts", "Number of attempts to schedule pods, by the result. "
                                "'unschedulable' means a pod could not be scheduled, while 'error' means an internal "
                                "scheduler problem.", ["result"], namespace=NS, registry=r)
        self.victims = Gauge("pod_preemption_victims", "Number of selected preemption victims", namespace=NS,
                             registry=r)
        self.preemption_attempts = Counter("total_preemption_attempts", "Total preemption attempts in the cluster "
                                           "till now", namespace=NS, registry=r)
        self.evictions = Counter("eviction_transactions", "Total number of committed eviction transactions, by "
                                 "action", ["action"], namespace=NS, registry=r)
        self.unschedule_tasks = Gauge("unschedule_task_count", "Number of tasks could not be scheduled", ["job_id"],
                                      namespace=NS, registry=r)
        self.unschedule_jobs = Gauge("unschedule_job_count", "Number of jobs could not be scheduled", namespace=NS,
                                     registry=r)
        self.goroutines = Gauge("goroutines", "Number of running goroutines split by the work they do such as "
                                "binding (threads here).", ["operation"], namespace=NS, registry=r)
        self.job_share = Gauge("job_share", "Share for one job", ["job_ns", "job_id"], namespace=NS, registry=r)
        self.job_retries = Counter("job_retry_counts", "Number of retry counts for one job", ["job_id"],
                                   namespace=NS, registry=r)
        # queue_<kind>_{milli_cpu,memory_bytes,scalar_resources}
        self.queue_res: dict[str, Gauge] = {}
        for kind in _QUEUE_RES:
            title = kind.replace("_", " ").capitalize()
            self.queue_res[f"queue_{kind}_milli_cpu"] = Gauge(
                f"queue_{kind}_milli_cpu", f"{title} CPU count for one queue", ["queue_name"], namespace=NS,
                registry=r)
            self.queue_res[f"queue_{kind}_memory_bytes"] = Gauge(
                f"queue_{kind}_memory_bytes", f"{title} memory for one queue", ["queue_name"], namespace=NS,
                registry=r)
            self.queue_res[f"queue_{kind}_scalar_resources"] = Gauge(
                f"queue_{kind}_scalar_resources", f"{title} scalar resources for one queue",
                ["queue_name", "resource"], namespace=NS, registry=r)
        self.queue_share = Gauge("queue_share", "Share for one queue", ["queue_name"], namespace=NS, registry=r)
        self.queue_weight = Gauge("queue_weight", "Weight for one queue", ["queue_name"], namespace=NS, registry=r)
        self.queue_overused = Gauge("queue_overused", "If one queue is overused", ["queue_name"], namespace=NS,
                                    registry=r)
        self.queue_pod_groups = {
            f"queue_pod_group_{state}_count": Gauge(
                f"queue_pod_group_{state}_count", f"The number of {state.capitalize()} PodGroup in this queue",
                ["queue_name"], namespace=NS, registry=r)
            for state in ("inqueue", "pending", "running", "unknown", "completed")}
        self.namespace_share = Gauge("namespace_share", "Share for one namespace", ["namespace_name"],
                                     namespace=NS, registry=r)
        self.namespace_weight = Gauge("namespace_weight", "Weight for one namespace", ["namespace_name"],
                                      namespace=NS, registry=r)
        self.namespace_weighted_share = Gauge("namespace_weighted_share", "Weighted share for one namespace",
                                              ["namespace_name"], namespace=NS, registry=r)
        self._gauges: dict[str, Gauge] = {
            **self.queue_res, **self.queue_pod_groups, "queue_share": self.queue_share, "queue_weight": self.queue_weight,
            "queue_overused": self.queue_overused, "job_share": self.job_share,
            "namespace_share": self.namespace_share, "namespace_weight": self.namespace_weight,
            "namespace_weighted_share": self.namespace_weighted_share}
        self._scalars_seen: dict[tuple[str, str], set[str]] = {}
        self._unscheduled: set[str] = set()
        self.conf_errors = Counter("lahar_scheduler_conf_errors", "Scheduler configurations rejected (last good kept)",
                                   registry=r)
        self.sessions_skipped = Counter("lahar_scheduler_ticks_dropped",
                                        "Session ticks dropped because a session was running", registry=r)
        self.cache_synced = Gauge("lahar_scheduler_cache_synced",
                                  "1 once every informer the sessions read has synced (sessions run only then)",
                                  registry=r)
        self.cache_sync_seconds = Gauge("lahar_scheduler_cache_sync_seconds",
                                        "Seconds from the runner's start until its informers had synced", registry=r)
        self.ticks_before_sync = Counter("lahar_scheduler_ticks_before_sync",
                                         "Session ticks dropped because the informers had not synced yet", registry=r)

    def observe(self, d: Decisions, *, commit: Any = None, now: float | None = None) -> None:
        """Record one session (and, when given, its `commit.CommitResult`: bind errors, bind durations)."""
        now = dt.datetime.now(dt.UTC).timestamp() if now is None else now
        t = d.timings
        commit_s = float(getattr(commit, "seconds", 0.0) or 0.0)
        self.e2e.observe((t.get("total", 0.0) + commit_s) * 1000)
        self.open.observe(t.get("open", 0.0) * 1000)
        for key, secs in t.items():
            if key.startswith("action:"):
                self.action.labels(key.split(":", 1)[1]).observe(secs * 1000)
            elif key.startswith("plugin:"):
                _, name, stage = key.split(":", 2)
                self.plugin.labels(name, stage).observe(secs * 1000)
        failures = len(getattr(commit, "bind_failures", {}) or {})
        scheduled = len(d.binds) - failures
        if scheduled:
            self.attempts.labels("scheduled").inc(scheduled)
        if failures:
            self.attempts.labels("error").inc(failures)
        unschedulable = [c for c in d.pod_conditions if c.reason == "Unschedulable"]
        if unschedulable:
            self.attempts.labels("unschedulable").inc(len(unschedulable))
        for secs in getattr(commit, "bind_seconds", ()) or ():
            self.stage.labels("Bind").observe(secs * 1000)
        if commit is not None:
            self.goroutines.labels("binding").set(float(getattr(commit, "workers", 0) or 0))
        self.victims.set(len(d.evictions))
        if d.evictions:
            self.preemption_attempts.inc()
            for reason, n in _Counter(e.reason for e in d.evictions).items():
                self.evictions.labels(reason).inc(n)
        self._unschedulable(d, d.counters)
        self._samples(d.counters, d, now)

    def _unschedulable(self, d: Decisions, samples: Mapping[str, float]) -> None:
        self.unschedule_jobs.set(sum(1 for u in d.podgroups.values()
                                     if u.status.get("phase") in ("Pending", "Inqueue", "Unknown")))
        prefix = "unschedule_tasks" + SAMPLE_SEP
        current = {k[len(prefix):]: v for k, v in samples.items() if k.startswith(prefix)}
        for name in self._unscheduled - current.keys():  # scheduled since the last session
            self.unschedule_tasks.labels(name).set(0)
        for name, n in current.items():
            self.unschedule_tasks.labels(name).set(n)
        self._unscheduled = set(current)

    def _samples(self, samples: Mapping[str, float], d: Decisions, now: float) -> None:
        scalars: dict[tuple[str, str], set[str]] = {}
        created: dict[tuple[str, str], tuple[str, float]] = {}
        pod_created: dict[str, float] = {}
        for key, value in samples.items():
            if SAMPLE_SEP not in key:
                continue
            metric, labels = split_key(key)
            if metric == "job_retry":
                self.job_retries.labels(*labels).inc()
            elif metric == "job_created":
                ns, name, q = labels
                created[(ns, name)] = (q, value)
            elif metric == "task_created":
                pod_created[labels[0]] = value
            elif metric in self._gauges:
                self._gauges[metric].labels(*labels).set(value)
                if metric.endswith("_scalar_resources"):
                    scalars.setdefault((metric, labels[0]), set()).add(labels[1])
        queues_now = {split_key(k)[1][0] for k in samples if k.startswith("queue_weight" + SAMPLE_SEP)}
        for (metric, q), seen in self._scalars_seen.items():  # a scalar gone from a queue since it was seen reads 0
            if q not in queues_now:
                continue
            for rname in seen - scalars.get((metric, q), set()):
                self._gauges[metric].labels(q, rname).set(0)
        for k, v in scalars.items():
            self._scalars_seen.setdefault(k, set()).update(v)
        for u in d.podgroups.values():
            info = created.get((u.namespace, u.name))
            if info is None:
                continue
            q, start = info
            self.job_start.labels(u.name, q, u.namespace).set(start)
            self.job_last.labels(u.name, q, u.namespace).set(now)
            if u.changed and u.status.get("phase") == "Running" and start:
                ms = max(0.0, now - start) * 1000
                self.job_duration.labels(u.name, q, u.namespace).set(ms)
                self.job_latency.observe(ms)
        for b in d.binds:
            start = pod_created.get(b.uid)
            if start:
                self.task_latency.labels("Bound").observe(max(0.0, now - start) * 1000)

