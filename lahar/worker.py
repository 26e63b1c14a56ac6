"""The Celery app: `lahar.reconcile` on queue `reconcile`, the beat schedule (resync; the scheduler's session tick).

`lahar worker` consumes `reconcile`; `lahar beat` ticks; `lahar dispatch` (lahar.dispatcher) sends through `enqueue()`.
The task is a thin shell around `controllers.reconcilers.reconcile`: the per-key lock and de-duplication of
`controllers.workqueue`, the error taxonomy of `controllers.context` (decided by `workqueue.retry_after`):

    TemporaryError(delay) → retry after `delay`    errors.Conflict → short jittered retry
    PermanentError        → no retry (logged; the reconciler records the Event/condition)
    anything else         → exponential backoff with jitter, up to `max_retries` (then the resync)

Delays longer than `max_countdown` (and every `Result.requeue_after`) go to the durable Redis timers that the
dispatcher polls, never to long Celery countdowns: the Redis transport redelivers an unacked ETA message after the
visibility timeout, again and again.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from celery import Celery, signals
from kombu import Queue

from lahar.controllers import caches, dispatch, queues, reconcilers, workqueue
from lahar.controllers import metrics as ctrl_metrics
from lahar.controllers.context import Context
from lahar.controllers.workqueue import Key
from lahar.settings import Settings

__all__ = ["LOCK_TIMER", "REQUEUE_TIMER", "RETRY_TIMER", "SESSION_TASK", "Runtime", "app", "beat_schedule", "broker_task_ids",
           "enqueue",
           "register_session_task", "repair_stale_marks", "runtime"]

log = logging.getLogger(__name__)

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
RECONCILE_QUEUE, SCHEDULING_QUEUE = "reconcile", "scheduling"
SESSION_TASK = "scheduler.session"  # defined by `scheduler.tasks.register` (register_session_task)
# timer tokens the task shell uses (reconcilers use their own, e.g. a policy's)
REQUEUE_TIMER, RETRY_TIMER, LOCK_TIMER = "requeue", "retry", "lock"

settings = Settings()


@signals.setup_logging.connect
def _setup_logging(loglevel: Any = None, **_: Any) -> None:
    """Celery (worker, beat, flower, scheduler) logs through `lahar.logs` instead of configuring its own handlers."""
    from lahar import logs

    if logs.setup(level=loglevel or settings.log_level) == "json":
        import celery.apps.worker as celery_apps_worker

        celery_apps_worker.safe_say = _say_json  # its shutdown notices, written from signal handlers


def _say_json(msg: str, f: Any = None) -> None:
    """Celery's `safe_say` as a JSON line, written with one `os.write` (it runs inside signal handlers)."""
    import sys

    from lahar import logs

    record = logging.LogRecord("celery.worker", logging.WARNING, __file__, 0, str(msg).strip(), None, None)
    stream = f or sys.__stderr__
    os.write(stream.fileno(), (logs.JsonFormatter().format(record) + "\n").encode())


def beat_schedule(s: Settings) -> dict[str, dict[str, Any]]:
    """Beat entries: the resync of every key, plus the scheduler's session tick (`scheduler.session` every
    `schedule_period`, expiring after one period, so ticks behind a long session are dropped, not piled up)."""
    period = float(s.schedule_period)
    return {
        "lahar.resync": {"task": "lahar.resync", "schedule": s.resync_interval,
                         "options": {"queue": RECONCILE_QUEUE, "expires": s.resync_interval}},
        SESSION_TASK: {"task": SESSION_TASK, "schedule": period,
                       "options": {"queue": SCHEDULING_QUEUE, "expires": period}},
    }


def register_session_task() -> None:
    """Define `scheduler.session` on the app, for a process that consumes queue `scheduling` (`lahar scheduler`, or
    `lahar worker -Q ...,scheduling`). Only those import the scheduler: the reconcile workers, dispatch, beat and
    Flower send or show the task by name, and start about a second sooner without it."""
    from lahar.scheduler import tasks as scheduler_tasks

    if SESSION_TASK not in app.tasks:
        scheduler_tasks.register(app, settings)


app = Celery("lahar")
_redis_url = settings.redis_url or DEFAULT_REDIS_URL
app.conf.update(
    broker_url=_redis_url,
    result_backend=_redis_url,
    broker_transport_options={"visibility_timeout": settings.visibility_timeout},
    result_backend_transport_options={"visibility_timeout": settings.visibility_timeout},
    broker_connection_retry_on_startup=True,
    broker_connection_max_retries=None,
    # True would write RETRY to the result backend (the same, unreachable Redis) and kill the worker (celery#9054);
    # a reconcile that outlives the connection just fails to ack: its message is redelivered, which is harmless.
    worker_cancel_long_running_tasks_on_connection_loss=False,
    task_queues=(Queue(RECONCILE_QUEUE), Queue(SCHEDULING_QUEUE)),
    task_default_queue=RECONCILE_QUEUE,
    task_routes={"lahar.*": {"queue": RECONCILE_QUEUE}, "scheduler.*": {"queue": SCHEDULING_QUEUE}},
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_soft_time_limit=settings.reconcile_soft_time_limit,
    task_time_limit=settings.reconcile_time_limit,
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    result_expires=3600,
    # no STARTED state in the result backend (a Redis write per task): Flower shows a task as started from the
    # task-started event, and nothing polls a reconcile's state
    task_track_started=False,
    worker_send_task_events=True,
    task_send_sent_event=True,
    timezone="UTC",
    enable_utc=True,
)

app.conf.beat_schedule = beat_schedule(settings)


# -- per-process runtime -----------------------------------------------------------------------------------------


@dataclass
class Runtime:
    """Redis, the work queue, timers, inbox and (lazily) the cluster client of one process (rebuilt after fork)."""

    settings: Settings
    redis: Any
    wq: workqueue.WorkQueue
    timers: workqueue.RedisTimers
    inbox: workqueue.RedisInbox
    pid: int = field(default_factory=os.getpid)
    metrics: ctrl_metrics.ReconcileMetrics = field(default_factory=ctrl_metrics.ReconcileMetrics)
    _client: Any = None
    _cache: Any = None  # controllers.caches.JobCache, started on first use (False: not available)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def build(cls, s: Settings) -> Runtime:
        r = workqueue.connect(s.redis_url or DEFAULT_REDIS_URL)
        return cls(settings=s, redis=r,
                   wq=workqueue.WorkQueue(r, pending_ttl=s.pending_ttl, lock_ttl=s.lock_ttl),
                   timers=workqueue.RedisTimers(r), inbox=workqueue.RedisInbox(r))

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                from lahar.kube import kubeconfig
                from lahar.kube.rest import RestClient

                self._client = RestClient(kubeconfig.load(self.settings.kubeconfig))
            return self._client

    @property
    def job_cache(self) -> caches.JobCache | None:
        """The job reconciler's informer reads in this process (`LAHAR_JOB_CACHE`), once the Volcano kinds are
        served; until it has synced every read goes to the API."""
        if not self.settings.job_cache:
            return None
        client = self.client
        with self._lock:
            if self._cache is None:
                reg = client.registry
                types = {"Job": reg.get("batch.volcano.sh", "v1alpha1", "jobs"), "Pod": reg.get("", "v1", "pods"),
                         "PodGroup": reg.get("scheduling.volcano.sh", "v1beta1", "podgroups"),
                         "Queue": reg.get("scheduling.volcano.sh", "v1beta1", "queues"),
                         "PriorityClass": reg.get("scheduling.k8s.io", "v1", "priorityclasses")}
                if any(types[kind] is None for kind in caches.KINDS):
                    return None
                redis = self.redis
                self._cache = caches.JobCache(
                    client, types,
                    seen=lambda ns, name: redis.hgetall(caches.seen_key(workqueue.PREFIX, ns, name)),
                    queue_seen=lambda name: redis.hgetall(caches.seen_key(workqueue.PREFIX, "", name, "Queue"))).start()
            return self._cache or None

    def context(self) -> Context:
        return Context(client=self.client, timers=self.timers, inbox=self.inbox,
                       scheduler_names=tuple(self.settings.scheduler_names),
                       default_queue=self.settings.default_queue, pod_concurrency=self.settings.pod_concurrency,
                       cache=self.job_cache)


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def runtime() -> Runtime:
    global _runtime
    with _runtime_lock:
        if _runtime is None or _runtime.pid != os.getpid():
            _runtime = Runtime.build(settings)
        return _runtime


@signals.worker_process_init.connect
def _after_fork(**_: Any) -> None:
    global _runtime
    _runtime = None
    _heartbeat.reset()


def enqueue(key: Key, *, rt: Runtime | None = None) -> bool:
    """Send `lahar.reconcile(key)` unless one is already waiting for it; True when a task was sent."""
    rt = rt or runtime()
    task_id = f"{key.kind}.{key.namespace}.{key.name}.{uuid.uuid4().hex[:12]}"
    if not rt.wq.claim(key, task_id):
        return False
    try:
        reconcile.apply_async((key.kind, key.namespace, key.name), task_id=task_id, queue=RECONCILE_QUEUE)
    except BaseException:
        rt.wq.unclaim(key, task_id)
        raise
    return True


# -- lock heartbeat ----------------------------------------------------------------------------------------------


class _Heartbeat:
    """Extends the locks this process holds every lock_ttl/3, so a killed worker's lock expires within lock_ttl."""

    def __init__(self) -> None:
        self._held: dict[tuple[Key, str], None] = {}
        self._mu = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def reset(self) -> None:
        with self._mu:
            self._held.clear()
            self._thread = None
            self._pid = os.getpid()

    def hold(self, key: Key, token: str) -> None:
        with self._mu:
            self._held[(key, token)] = None
            if self._thread is None or self._pid != os.getpid():
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._loop, name="lahar-lock-heartbeat", daemon=True)
                self._thread.start()

    def drop(self, key: Key, token: str) -> None:
        with self._mu:
            self._held.pop((key, token), None)

    def _loop(self) -> None:
        stop = threading.Event()
        while not stop.wait(max(0.5, settings.lock_ttl / 3)):
            with self._mu:
                held = list(self._held)
            for key, token in held:
                try:
                    runtime().wq.extend(key, token)
                except Exception as e:  # noqa: BLE001 - Redis down: the lock may lapse; the reconcile is idempotent
                    log.warning("extending the lock of %s failed: %s", key, e)


_heartbeat = _Heartbeat()


# -- tasks -------------------------------------------------------------------------------------------------------


@app.task(name="lahar.reconcile", bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def reconcile(self: Any, kind: str, namespace: str, name: str) -> dict[str, Any]:
    """Reconcile one key under its Redis lock; returns what happened (shown by Flower as the task's result)."""
    rt = runtime()
    key = Key(kind, namespace, name)
    rt.wq.started(key, self.request.id)
    token = rt.wq.lock(key)
    if token is None:
        # someone is reconciling this key: it is marked dirty and its holder re-enqueues it on unlock; should the
        # holder die, this timer reconciles the key once its lock has lapsed
        rt.timers.after(rt.wq.lock_ttl_left(key) + 0.5, kind, namespace, name, token=LOCK_TIMER)
        rt.wq.count("locked")
        rt.metrics.lock_wait(kind)
        return {"outcome": "locked"}
    _heartbeat.hold(key, token)
    counts = {"reconciles": 1, f"reconcile:{kind}": 1}  # written together, in one round trip, when it ends
    try:
        with rt.metrics.timed(kind) as done:
            result = done(reconcilers.reconcile(rt.context(), kind, namespace, name))
        _count_cache_reads(rt, counts)
        rt.wq.count_many(counts)
    except Exception as exc:  # the taxonomy: see the module docstring
        delay = workqueue.retry_after(exc, self.request.retries, max_retries=rt.settings.max_retries)
        _count_cache_reads(rt, counts)
        if delay is None:
            rt.wq.count_many({**counts, "dropped": 1})
            rt.metrics.drop(kind)
            log.warning("reconcile %s: %s: %s (not retried)", key, type(exc).__name__, exc)
            return {"outcome": "failed", "error": f"{type(exc).__name__}: {exc}"}
        rt.wq.count_many({**counts, "retries": 1})
        if delay > rt.settings.max_countdown:
            rt.timers.after(delay, kind, namespace, name, token=RETRY_TIMER)
            return {"outcome": "retry-timer", "delay": delay, "error": f"{type(exc).__name__}: {exc}"}
        raise self.retry(exc=exc, countdown=delay) from exc
    finally:
        _heartbeat.drop(key, token)
        if rt.wq.unlock(key, token):
            rt.timers.cancel(kind, namespace, name, token=LOCK_TIMER)
            enqueue(key, rt=rt)
    if result.requeue_after is not None:
        if result.requeue_after <= 0:
            enqueue(key, rt=rt)
        else:
            rt.timers.after(result.requeue_after, kind, namespace, name, token=REQUEUE_TIMER)
    return {"outcome": "ok", "requeue_after": result.requeue_after}


def _count_cache_reads(rt: Runtime, counts: dict[str, int]) -> None:
    """The job reconciler's reads served by its informers (`cache:hits`) or the API (`cache:misses`), added to
    `counts` for the work queue's counters (bench/controllers.py prints them)."""
    if rt._cache:
        for field_name, n in rt._cache.take_stats().items():
            if n:
                counts[f"cache:{field_name}"] = counts.get(f"cache:{field_name}", 0) + n


@app.task(name="lahar.resync", acks_late=True, reject_on_worker_lost=True)
def resync() -> dict[str, int]:
    """Enqueue every key (de-duplicated), so an event lost anywhere heals within one resync interval."""
    from lahar.kube import errors

    rt = runtime()
    client = rt.client
    _ensure_builtin_queues(rt)
    keys: set[Key] = set(dispatch.ALWAYS)
    for kind, (group, version, plural) in dispatch.RESOURCES.items():
        rtype = client.registry.get(group, version, plural)
        if rtype is None or kind == "ConfigMap":  # the discovery ConfigMaps route to the tree, which is in ALWAYS
            continue
        try:
            if kind == "Pod":  # plain pods waiting for a PodGroup; everything else is reached through its owner
                items = client.list(rtype, field_selector="status.phase=Pending")["items"]
            else:
                items = client.list(rtype)["items"]
        except (errors.NotFound, errors.BadRequest):  # CRD not installed yet / selector not supported
            continue
        for obj in items:
            for work in dispatch.route(kind, dispatch.RESYNC, obj, scheduler_names=rt.settings.scheduler_names):
                keys.add(work.key)
    waiting = [key for key in sorted(keys) if not enqueue(key, rt=rt)]
    repaired = repair_stale_marks(rt, waiting)
    return {"keys": len(keys), "sent": len(keys) - len(waiting) + repaired, "repaired": repaired}


def broker_task_ids(redis: Any, queues: tuple[str, ...] = (RECONCILE_QUEUE,), *,
                    now: float | None = None) -> tuple[set[str], dict[str, float]]:
    """What the Redis broker holds: the ids of the tasks waiting in `queues` (each priority list of kombu's Redis
    transport), and of those delivered to a worker and not acknowledged (kombu's `unacked` hash) with the seconds
    since their delivery (`unacked_index`); read in one MULTI, so a message moving from the queue to a worker is
    seen in one place or the other."""
    import time

    steps = (0, 3, 6, 9)  # kombu's default priority_steps; a step > 0 is the list `<queue>\x06\x16<step>`
    pipe = redis.pipeline(transaction=True)
    for q in queues:
        for step in steps:
            pipe.lrange(q if step == 0 else f"{q}\x06\x16{step}", 0, -1)
    pipe.hgetall("unacked")
    pipe.zrange("unacked_index", 0, -1, withscores=True)
    *lists, unacked, index = pipe.execute()
    now = time.time() if now is None else now
    queued = {i for i in (_task_id(p) for reply in lists for p in reply or ()) if i}
    since = {tag: float(score) for tag, score in index or ()}
    delivered: dict[str, float] = {}
    for tag, payload in (unacked or {}).items():
        task_id = _task_id(payload)
        if task_id:
            delivered[task_id] = max(0.0, now - since.get(tag, now))
    return queued, delivered


def _task_id(payload: str) -> str | None:
    """The task id of one kombu message (a list entry), or of an `unacked` entry ([message, exchange, key])."""
    try:
        message = json.loads(payload)
        if isinstance(message, list):
            message = message[0]
        task_id = (message.get("headers") or {}).get("id") or (message.get("properties") or {}).get("correlation_id")
    except (ValueError, TypeError, AttributeError, IndexError, KeyError):
        return None
    return str(task_id) if task_id else None


def repair_stale_marks(rt: Runtime, keys: list[Key]) -> int:
    """Replace the pending marks of `keys` whose task was lost (`workqueue.stale_marks`) by a new task each; returns
    how many were sent. A mark survives a Redis crash in the append-only file while its message does not (or waits,
    unacknowledged, for the visibility timeout), and would otherwise suppress every event of its key until the mark
    expires."""
    if not keys:
        return 0
    marks = rt.wq.marks(keys)
    if not any(m.age > rt.settings.pending_grace for m in marks.values()):
        return 0
    queued, delivered = broker_task_ids(rt.redis)
    stale = workqueue.stale_marks(marks, queued=queued, delivered=delivered, grace=rt.settings.pending_grace)
    repaired = 0
    for key in stale:
        rt.wq.unclaim(key, marks[key].task_id)  # only that mark: a task enqueued meanwhile keeps its own
        if enqueue(key, rt=rt):
            repaired += 1
    if stale:
        rt.wq.count("repaired", repaired)
        log.warning("resync: %d pending mark(s) named a task the broker no longer has or holds for an unreachable "
                    "worker (a Redis restart); sent %d new task(s)", len(stale), repaired)
    return repaired


def _ensure_builtin_queues(rt: Runtime) -> None:
    """`root` and the default queue exist (the queue reconciler's `ensure_builtin_queues`), once their CRD does."""
    from lahar.kube import errors

    try:
        queues.ensure_builtin_queues(rt.context())
    except (errors.NotFound, errors.ServiceUnavailable) as e:  # CRD not installed yet / API away: next resync
        log.info("builtin queues not ensured yet: %s", e)
