"""The controllers' Prometheus metrics: what `lahar worker` and `lahar dispatch` serve on `--metrics-port`.

The worker's task shell (`lahar.worker`) records each reconcile in `ReconcileMetrics` (by kind and result, its
latency, lock waits, errors given up on); the dispatcher (`lahar.dispatcher`) hands every watch event to
`DispatchMetrics.observe`, which counts events and Volcano's job-phase counters; at scrape, `QueueDepth` reads the
Redis `reconcile`/`scheduling` lists, kombu's unacked hash and the durable timers, and `DispatchStats` the
dispatcher's own counters. The decisions (`result_label`, `kind_label`, `job_phase_change`, `broker_lists`) are pure.

    lahar_reconcile_total{kind,result}          result: success | error | requeue | requeue_after (controller-runtime)
    lahar_reconcile_duration_seconds{kind}      time inside the reconciler
    lahar_reconcile_lock_waits_total{kind}      a task found its key locked (the holder re-enqueues it on unlock)
    lahar_reconcile_dropped_total{kind}         an error not retried (PermanentError, or out of retries)
    volcano_job_{completed,failed}_phase_count{job_name,queue_name}   Volcano's names, `job_name` = namespace/name
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = [
    "KINDS",
    "PHASE_COUNTERS",
    "DispatchMetrics",
    "DispatchStats",
    "QueueDepth",
    "ReconcileMetrics",
    "broker_lists",
    "job_phase_change",
    "jobflow_phase_change",
    "kind_label",
    "result_label",
]

log = logging.getLogger(__name__)

KINDS = frozenset({"Job", "PodGroup", "Queue", "CronJob", "Command", "GC", "JobFlow", "JobTemplate",
                   "HyperNodeTree", "PodGroupGC"})  # = RECONCILERS
# Volcano's pkg/controllers/job/state counters: incremented when a Job enters the phase (exported, like Go's client,
# without the `_total` Python's client appends, so typed gauge: see scheduler.metrics.EXACT_COUNTERS)
PHASE_COUNTERS = {"Completed": "volcano_job_completed_phase_count", "Failed": "volcano_job_failed_phase_count"}
# Volcano's pkg/controllers/jobflow/state counters, by the flow's namespace (label `jobflow_namespace`)
FLOW_PHASE_COUNTERS = {"Succeed": "volcano_jobflow_succeed_phase_count", "Failed": "volcano_jobflow_failed_phase_count"}
# reconciles take milliseconds to a few seconds (a Job's pod fan-out); the task's hard limit is minutes
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


# -- decisions ---------------------------------------------------------------------------------------------------


def kind_label(kind: str) -> str:
    """The `kind` label: a reconciled kind, or `other` (a bad message must not mint label values)."""
    return kind if kind in KINDS else "other"


def result_label(*, error: bool, requeue_after: float | None) -> str:
    """controller-runtime's reconcile results: `error`, `requeue` (at once), `requeue_after` (a timer), `success`."""
    if error:
        return "error"
    if requeue_after is None:
        return "success"
    return "requeue" if requeue_after <= 0 else "requeue_after"


def _phase(obj: Mapping[str, Any] | None) -> str:
    return (((obj or {}).get("status") or {}).get("state") or {}).get("phase") or ""


def job_phase_change(event: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None, *,
                     default_queue: str = "default") -> tuple[str, str, str] | None:
    """(phase, job_name, queue_name) when a Job's watch event moved it into Completed or Failed, else None.

    Only a MODIFIED event whose old phase differs counts: an ADDED Job already Completed (a relist, a new leader)
    was counted by whoever saw it change, so totals count each transition once per watching dispatcher.
    """
    if event != "MODIFIED" or old is None:
        return None
    phase = _phase(obj)
    if phase not in PHASE_COUNTERS or _phase(old) == phase:
        return None
    meta = obj.get("metadata") or {}
    queue = (obj.get("spec") or {}).get("queue") or default_queue
    return phase, f"{meta.get('namespace') or ''}/{meta.get('name') or ''}", queue


def jobflow_phase_change(event: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(phase, namespace) when a JobFlow's watch event moved it into Succeed or Failed, else None (once per
    transition, as `job_phase_change`)."""
    if event != "MODIFIED" or old is None:
        return None
    phase = _phase(obj)
    if phase not in FLOW_PHASE_COUNTERS or _phase(old) == phase:
        return None
    return phase, (obj.get("metadata") or {}).get("namespace") or ""


def broker_lists(queue: str, *, steps: tuple[int, ...] = (0, 3, 6, 9), sep: str = "\x06\x16") -> list[str]:
    """The Redis lists kombu keeps one Celery queue in: the queue's name for priority 0, `<queue><sep><p>` for the
    other priority steps (kombu.transport.redis `_q_for_pri`)."""
    return [queue if p == 0 else f"{queue}{sep}{p}" for p in steps]


# -- the worker: reconciles --------------------------------------------------------------------------------------


class ReconcileMetrics:
    """The task shell's counters on their own registry (under `PROMETHEUS_MULTIPROC_DIR` every pool process writes
    its own file and the serving process adds them up: `lahar worker --metrics-port`)."""

    def __init__(self, registry: CollectorRegistry | None = None, *, clock: Callable[[], float] = time.monotonic):
        self.registry = registry if registry is not None else CollectorRegistry()
        self.clock = clock
        r = self.registry
        self.reconciles = Counter("lahar_reconcile", "Reconciles run, by kind and result (success, error, requeue, "
                                  "requeue_after).", ["kind", "result"], registry=r)
        self.duration = Histogram("lahar_reconcile_duration_seconds", "Time spent in one reconcile, by kind.",
                                  ["kind"], buckets=_SECONDS, registry=r)
        self.lock_waits = Counter("lahar_reconcile_lock_waits", "Reconcile tasks that found their key locked by "
                                  "another worker (the holder re-enqueues the key when it unlocks).", ["kind"],
                                  registry=r)
        self.dropped = Counter("lahar_reconcile_dropped", "Reconcile errors not retried (PermanentError, or out of "
                               "retries: the periodic resync is the next chance).", ["kind"], registry=r)

    def observe(self, kind: str, result: str, seconds: float) -> None:
        k = kind_label(kind)
        self.reconciles.labels(k, result).inc()
        self.duration.labels(k).observe(max(0.0, seconds))

    def lock_wait(self, kind: str) -> None:
        self.lock_waits.labels(kind_label(kind)).inc()

    def drop(self, kind: str) -> None:
        self.dropped.labels(kind_label(kind)).inc()

    @contextlib.contextmanager
    def timed(self, kind: str) -> Iterator[Callable[[Any], Any]]:
        """`with m.timed(kind) as done: result = done(reconcile(...))`: an exception counts as `error`."""
        start = self.clock()
        seen: list[Any] = []

        def done(result: Any) -> Any:
            seen.append(result)
            return result

        try:
            yield done
        except BaseException:
            self.observe(kind, "error", self.clock() - start)
            raise
        requeue = getattr(seen[0], "requeue_after", None) if seen else None
        self.observe(kind, result_label(error=False, requeue_after=requeue), self.clock() - start)


# -- the dispatcher: watch events, Volcano's job-phase counters --------------------------------------------------


class _PhaseCounters(Collector):
    """Volcano's job-phase counters: a series per (job, queue), removed when the Job is deleted (as Volcano's
    DeleteJobMetrics does), so finished-and-deleted jobs do not accumulate."""

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._counts: dict[tuple[str, str, str], float] = {}

    def inc(self, phase: str, job: str, queue: str) -> None:
        with self._mu:
            self._counts[(phase, job, queue)] = self._counts.get((phase, job, queue), 0.0) + 1

    def forget(self, job: str) -> None:
        with self._mu:
            for k in [k for k in self._counts if k[1] == job]:
                del self._counts[k]

    def collect(self) -> Iterator[Metric]:
        with self._mu:
            counts = dict(self._counts)
        for phase, name in PHASE_COUNTERS.items():
            m = GaugeMetricFamily(name, f"Number of job {phase.lower()} phase", labels=["job_name", "queue_name"])
            for (p, job, queue), v in sorted(counts.items()):
                if p == phase:
                    m.add_metric([job, queue], v)
            yield m


class _FlowPhaseCounters(Collector):
    """Volcano's jobflow-phase counters: a series per namespace; a deleted JobFlow removes its namespace's series, as
    Volcano's DeleteJobFlowMetrics does."""

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._counts: dict[tuple[str, str], float] = {}

    def inc(self, phase: str, namespace: str) -> None:
        with self._mu:
            self._counts[(phase, namespace)] = self._counts.get((phase, namespace), 0.0) + 1

    def forget(self, namespace: str) -> None:
        with self._mu:
            for k in [k for k in self._counts if k[1] == namespace]:
                del self._counts[k]

    def collect(self) -> Iterator[Metric]:
        with self._mu:
            counts = dict(self._counts)
        for phase, name in FLOW_PHASE_COUNTERS.items():
            m = GaugeMetricFamily(name, f"Number of jobflow {phase.lower()} phase", labels=["jobflow_namespace"])
            for (p, ns), v in sorted(counts.items()):
                if p == phase:
                    m.add_metric([ns], v)
            yield m


class DispatchMetrics:
    """What the dispatcher sees: `observe(kind, event, obj, old)` is its per-event hook (never raises)."""

    def __init__(self, registry: CollectorRegistry | None = None, *, default_queue: str = "default") -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.default_queue = default_queue
        self.events = Counter("lahar_dispatch_events", "Watch events the dispatcher routed, by kind and event type.",
                              ["kind", "event"], registry=self.registry)
        self.phases = _PhaseCounters()
        self.registry.register(self.phases)
        self.flow_phases = _FlowPhaseCounters()
        self.registry.register(self.flow_phases)

    def observe(self, kind: str, event: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> None:
        try:
            self.events.labels(kind, event).inc()
            if kind == "JobFlow":
                if event == "DELETED":
                    self.flow_phases.forget((obj.get("metadata") or {}).get("namespace") or "")
                elif (flow := jobflow_phase_change(event, obj, old)) is not None:
                    self.flow_phases.inc(*flow)
                return
            if kind != "Job":
                return
            if event == "DELETED":
                meta = obj.get("metadata") or {}
                self.phases.forget(f"{meta.get('namespace') or ''}/{meta.get('name') or ''}")
                return
            change = job_phase_change(event, obj, old, default_queue=self.default_queue)
            if change is not None:
                self.phases.inc(*change)
        except Exception as e:  # noqa: BLE001 - metrics never break dispatch
            log.debug("dispatch metrics: %s", e)


class DispatchStats(Collector):
    """The dispatcher's own counters (`Dispatcher.stats`), whether it leads, and how many kinds it watches."""

    def __init__(self, dispatcher: Any) -> None:
        self.dispatcher = dispatcher

    def collect(self) -> Iterator[Metric]:
        d = self.dispatcher
        stats = dict(d.stats)
        sent = CounterMetricFamily("lahar_dispatch_enqueued", "Keys handed to the work queue: sent as a reconcile "
                                   "task, or deduplicated (one was already waiting).", labels=["outcome"])
        sent.add_metric(["sent"], stats.get("sent", 0))
        sent.add_metric(["deduplicated"], stats.get("deduplicated", 0))
        yield sent
        for key, name, doc in (("timers", "lahar_dispatch_timers_fired", "Durable timers that came due."),
                               ("inbox", "lahar_dispatch_inbox_items", "Inbox items pushed (evictions, Commands)."),
                               ("errors", "lahar_dispatch_enqueue_errors", "Failed sends, retried (Redis away).")):
            yield CounterMetricFamily(name, doc, value=stats.get(key, 0))
        yield GaugeMetricFamily("lahar_dispatch_leader", "1 while this dispatcher holds the lease.",
                                value=1.0 if d.leading.is_set() else 0.0)
        yield GaugeMetricFamily("lahar_dispatch_watches", "Kinds this dispatcher watches now.",
                                value=float(len(d.informers)))


class QueueDepth(Collector):
    """Redis read at scrape: the Celery queues' lengths, messages delivered but not acked, the durable timers.

    `redis` should fail fast (no retries, a short timeout): a scrape while Redis is away yields
    `lahar_workqueue_redis_up 0` and no depth, rather than a timeout.
    """

    def __init__(self, redis: Any, *, queues: tuple[str, ...] = ("reconcile", "scheduling"),
                 timers_key: str = "lahar:timers", unacked_key: str = "unacked",
                 clock: Callable[[], float] = time.time) -> None:
        self.redis = redis
        self.queues = queues
        self.timers_key = timers_key
        self.unacked_key = unacked_key
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily("lahar_workqueue_depth", "Messages waiting in a Celery queue (Redis lists).",
                                  labels=["queue"])
        try:
            pipe = self.redis.pipeline(transaction=False)
            for q in self.queues:
                for key in broker_lists(q):
                    pipe.llen(key)
            pipe.hlen(self.unacked_key)
            pipe.zcard(self.timers_key)
            pipe.zcount(self.timers_key, "-inf", self.clock())
            replies = [int(x or 0) for x in pipe.execute()]
        except Exception as e:  # noqa: BLE001 - Redis away: say so, export no stale depth
            log.debug("queue depth: %s", e)
            yield GaugeMetricFamily("lahar_workqueue_redis_up", "1 when the last scrape could read Redis.", value=0)
            return
        n = len(broker_lists(""))
        for i, q in enumerate(self.queues):
            depth.add_metric([q], float(sum(replies[i * n:(i + 1) * n])))
        unacked, timers, due = replies[len(self.queues) * n:]
        yield depth
        yield GaugeMetricFamily("lahar_workqueue_unacked", "Messages delivered to a worker and not yet acked "
                                "(running or reserved reconciles and sessions).", value=float(unacked))
        yield GaugeMetricFamily("lahar_workqueue_timers", "Durable timers waiting (requeue_after, long retries, "
                                "lock expiries).", value=float(timers))
        yield GaugeMetricFamily("lahar_workqueue_timers_due", "Durable timers already due and not yet popped by a "
                                "dispatcher (grows when no dispatcher leads).", value=float(due))
        yield GaugeMetricFamily("lahar_workqueue_redis_up", "1 when the last scrape could read Redis.", value=1)
