"""`lahar dispatch`: list + watch the API, turn each event into reconcile tasks, pop due durable timers.

One informer per kind (Volcano kinds once their CRDs are served) resumes by resourceVersion and relists on 410 Gone;
`controllers.dispatch.route` decides the keys and inbox items; one sender thread pushes the inbox items and enqueues
the keys in order, de-duplicated in Redis, retrying while Redis is away. A Redis lease keeps one dispatcher active;
another one waits as a standby and takes over when the lease lapses.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from lahar.controllers import caches, dispatch, workqueue
from lahar.controllers.dispatch import Work
from lahar.controllers.workqueue import Key
from lahar.kube import backoff, errors
from lahar.kube.informers import Informer

__all__ = ["Dispatcher"]

log = logging.getLogger(__name__)

JOB_INDEX = "job"


def _job_index(pod: dict[str, Any]) -> list[str]:
    job = dispatch.job_of(pod)
    return [f"{pod['metadata'].get('namespace')}/{job}"] if job else []


class Dispatcher:
    """`run(stop)` blocks: standby until the lease is ours, then watch and enqueue until `stop` or the lease is lost."""

    def __init__(self, client: Any, redis: Any, *, send: Callable[[Key], bool],
                 scheduler_names: tuple[str, ...] = ("volcano",), lease_ttl: float = 15.0,
                 timer_poll_interval: float = 0.25, crd_poll_interval: float = 2.0, identity: str | None = None,
                 watch_timeout: float = 300.0, rng: Callable[[], float] = random.random,
                 on_event: Callable[[str, str, dict[str, Any], dict[str, Any] | None], None] | None = None) -> None:
        self.client = client
        self.redis = redis
        self.send = send
        self.scheduler_names = scheduler_names
        self.lease = workqueue.Lease(redis, "dispatcher", identity=identity, ttl=lease_ttl)
        self.timers = workqueue.RedisTimers(redis)
        self.inbox = workqueue.RedisInbox(redis)
        self.timer_poll_interval = timer_poll_interval
        self.crd_poll_interval = crd_poll_interval
        self.watch_timeout = watch_timeout
        self.rng = rng  # the jitter of the enqueue retry backoff
        self.on_event = on_event  # controllers.metrics.DispatchMetrics.observe under `lahar dispatch --metrics-port`
        self.informers: dict[str, Informer] = {}
        self.leading = threading.Event()
        self.stats = {"events": 0, "works": 0, "sent": 0, "deduplicated": 0, "inbox": 0, "timers": 0, "errors": 0}
        self._outbox: queue.Queue[Work] = queue.Queue()
        self._queued: set[Key] = set()
        self._seen: dict[Key, dict[str, str]] = {}  # Job/Queue key → kind → newest resourceVersion routed to it
        self._mu = threading.Lock()

    # -- routing (informer threads) ----------------------------------------------------------------------------

    def _on(self, kind: str, event: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> None:
        if self.on_event is not None:
            self.on_event(kind, event, obj, old)
        siblings: list[dict[str, Any]] = []
        job = None
        if kind == "Pod":
            name = dispatch.job_of(obj)
            pods, jobs = self.informers.get("Pod"), self.informers.get("Job")
            if name and pods is not None:
                ns = obj["metadata"].get("namespace")
                siblings = pods.by_index(JOB_INDEX, f"{ns}/{name}")
                job = jobs.get(ns, name) if jobs is not None else None
        works = dispatch.route(kind, event, obj, old, siblings=siblings, job=job,
                               scheduler_names=self.scheduler_names)
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        with self._mu:
            self.stats["events"] += 1
            for work in works:
                if kind in caches.TRACKED.get(work.key.kind, ()) and rv:
                    self._seen.setdefault(work.key, {})[kind] = str(rv)
                if not work.inbox and work.key in self._queued:
                    self.stats["deduplicated"] += 1
                    continue
                if not work.inbox:
                    self._queued.add(work.key)
                self.stats["works"] += 1
                self._outbox.put(work)

    def _handlers(self, kind: str) -> dict[str, Callable[..., None]]:
        return {
            "on_add": lambda obj: self._on(kind, dispatch.ADDED, obj),
            "on_update": lambda old, new: self._on(kind, dispatch.MODIFIED, new, old),
            "on_delete": lambda obj: self._on(kind, dispatch.DELETED, obj),
        }

    # -- sending (one thread, in order) ------------------------------------------------------------------------

    def _send_loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                work = self._outbox.get(timeout=0.2)
            except queue.Empty:
                continue
            pushed = 0
            failures = 0
            while not stop.is_set():
                try:
                    for item in work.inbox[pushed:]:
                        self.inbox.push(work.key.kind, work.key.namespace, work.key.name, item)
                        pushed += 1
                        self.stats["inbox"] += 1
                    with self._mu:
                        self._queued.discard(work.key)
                        seen = self._seen.pop(work.key, None)
                    if seen:
                        self._write_seen(work.key, seen)
                    if self.send(work.key):
                        self.stats["sent"] += 1
                    else:
                        self.stats["deduplicated"] += 1
                    break
                except Exception as e:  # noqa: BLE001 - Redis/broker away: keep the work, retry with backoff
                    self.stats["errors"] += 1
                    delay = backoff.delay(failures, base=0.1, cap=5.0, jitter="equal", rng=self.rng)
                    failures += 1
                    log.warning("enqueueing %s failed (%s); retrying in %.1fs", work.key, e, delay)
                    stop.wait(delay)

    def _write_seen(self, key: Key, seen: dict[str, str]) -> None:
        """What the worker's read cache must have seen before it serves this Job (`controllers.caches`); written
        before the task is sent. On a failure the versions go back, to be written with the retry."""
        name = caches.seen_key(workqueue.PREFIX, key.namespace, key.name, key.kind)
        try:
            pipe = self.redis.pipeline()
            pipe.hset(name, mapping=seen)
            pipe.expire(name, workqueue.INBOX_TTL)
            pipe.execute()
        except Exception:
            with self._mu:
                newer = self._seen.setdefault(key, {})
                for kind, rv in seen.items():
                    newer.setdefault(kind, rv)
            raise

    def _timer_loop(self, stop: threading.Event) -> None:
        while not stop.wait(self.timer_poll_interval):
            try:
                due = self.timers.due()
            except Exception as e:  # noqa: BLE001 - Redis away: timers wait in Redis (or are lost with it)
                log.debug("polling timers failed: %s", e)
                continue
            for key in due:
                self.stats["timers"] += 1
                self._outbox.put(Work(key))

    # -- informers ---------------------------------------------------------------------------------------------

    def _served(self, kind: str) -> Any:
        group, version, plural = dispatch.RESOURCES[kind]
        rt = self.client.registry.get(group, version, plural)
        if rt is None:
            return None
        if group == "":
            return rt
        try:
            self.client.list(rt, field_selector="metadata.name=lahar-probe")  # cheap: is the kind served?
        except (errors.NotFound, errors.BadRequest):
            return None
        except errors.ApiError as e:
            log.warning("probing %s failed: %s", plural, e)
            return None
        return rt

    def _start_informer(self, kind: str, rt: Any) -> None:
        inf = Informer(self.client, rt, watch_timeout=self.watch_timeout)
        if kind == "Pod":
            inf.add_index(JOB_INDEX, _job_index)
        self.informers[kind] = inf
        inf.add_handler(**self._handlers(kind))
        inf.start()
        log.info("dispatch: watching %s", rt.plural)
        for key in dispatch.ON_SERVED.get(kind, ()):
            self._outbox.put(Work(key))

    def _informer_loop(self, stop: threading.Event) -> None:
        # Jobs first, so a pod's Job is cached when its events arrive; Pods before PodGroups is harmless either way.
        order = ["Job", "Queue", "CronJob", "Command", "PodGroup", "Pod", "JobFlow", "JobTemplate", "Node", "HyperNode",
                 "ConfigMap"]
        while not stop.is_set():
            for kind in order:
                if kind in self.informers or stop.is_set():
                    continue
                rt = self._served(kind)
                if rt is not None:
                    self._start_informer(kind, rt)
            if len(self.informers) == len(order):
                return
            stop.wait(self.crd_poll_interval)

    # -- leadership --------------------------------------------------------------------------------------------

    def _renew(self) -> bool:
        try:
            return self.lease.acquire()
        except Exception as e:  # noqa: BLE001
            log.warning("lease renewal failed: %s", e)
            return False

    def run(self, stop: threading.Event) -> None:
        """Standby until the lease is ours, lead until it is lost, and again, until `stop` is set."""
        while not stop.is_set():
            if self._renew():
                log.info("dispatch: leading (%s)", self.lease.identity)
                self._lead(stop)
                log.info("dispatch: stepped down")
            else:
                stop.wait(max(0.2, self.lease.ttl / 5))
        with contextlib.suppress(Exception):  # Redis away at shutdown: the lease lapses by itself
            self.lease.release()

    def _lead(self, stop: threading.Event) -> None:
        inner = threading.Event()
        self.leading.set()
        threads = [threading.Thread(target=fn, args=(inner,), name=f"dispatch-{fn.__name__.strip('_')}", daemon=True)
                   for fn in (self._send_loop, self._timer_loop, self._informer_loop)]
        for t in threads:
            t.start()
        last_ok = time.monotonic()
        try:
            while not stop.wait(self.lease.ttl / 3):
                if self._renew():
                    last_ok = time.monotonic()
                    continue
                try:
                    holder = self.lease.holder()
                except Exception:  # noqa: BLE001
                    holder = None
                if holder not in (None, self.lease.identity) or time.monotonic() - last_ok > self.lease.ttl:
                    log.warning("dispatch: lease lost (holder %s)", holder)
                    break
        finally:
            inner.set()
            self.leading.clear()
            for inf in list(self.informers.values()):
                inf.stop()
            self.informers.clear()
            for t in threads:
                t.join(10)
            with self._mu:
                self._queued.clear()
            self._outbox = queue.Queue()
