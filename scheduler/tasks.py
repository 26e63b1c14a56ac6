"""The periodic session: Celery task `scheduler.session` on queue `scheduling`, consumed by `lahar scheduler`
(one worker process, concurrency 1, informer cache kept warm in memory).

`lahar.worker` imports this module and calls `register(app, settings)`; beat ticks every `schedule_period` with
`expires = schedule_period`, so ticks that queue up behind a long session expire instead of piling up, and a
Redis lease makes one session run cluster-wide at a time (a tick that finds it held is dropped, not queued).

Sync first: a runner runs no session until every informer its sessions read is watching (`SchedulerCache.unsynced`);
ticks before that are dropped and counted. Warm standby: every `lahar scheduler` process starts its informers at
process start, leading or not, and a tick that finds the lease held elsewhere brings the process's snapshot up to
date instead; so taking over costs the lease (at worst its TTL, when the holder died mid-session) and one session.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from lahar.kube.client import ClusterClient
from lahar.scheduler import commit as commits
from lahar.scheduler import usagesource
from lahar.scheduler.cache import ConfSource, SchedulerCache
from lahar.scheduler.framework.registry import Registry
from lahar.scheduler.metrics import SchedulerMetrics
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_session

__all__ = ["LEASE_KEY", "RedisLease", "Runner", "conf_namespaces", "configure", "default_identity", "lease_ttl",
           "register", "runner"]

log = logging.getLogger(__name__)

LEASE_KEY = "lahar:scheduler:session"
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
_RENEW = ("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) "
          "else return 0 end")


def lease_ttl(schedule_period: float) -> float:
    """The session lease's TTL: short, so a lease whose holder is gone (the scheduler SIGKILLed mid-session, or the
    release lost when Redis restarted) lapses in seconds, not a minute; a longer session keeps it by renewal."""
    return max(10.0, 5 * schedule_period)


def default_identity() -> str:
    """`<host>-<pid>`: who holds the lease, readable with `redis-cli GET lahar:scheduler:session`."""
    return f"{socket.gethostname()}-{os.getpid()}"


class RedisLease:
    """SET NX PX with a token `<identity>/<random>`; release only when the token is still ours."""

    def __init__(self, redis_client: Any, *, key: str = LEASE_KEY, ttl_seconds: float = 60.0,
                 identity: str | None = None) -> None:
        self.redis = redis_client
        self.key = key
        self.ttl_ms = int(ttl_seconds * 1000)
        self.identity = identity or default_identity()
        self.token = ""

    def holder(self) -> str:
        """The identity of whoever holds the lease now ("" when nobody does)."""
        raw = self.redis.get(self.key)
        if not raw:
            return ""
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        return text.rsplit("/", 1)[0]

    def acquire(self) -> bool:
        token = f"{self.identity}/{uuid.uuid4().hex}"
        if self.redis.set(self.key, token, nx=True, px=self.ttl_ms):
            self.token = token
            return True
        return False

    def release(self) -> None:
        if self.token:
            self.redis.eval(_RELEASE, 1, self.key, self.token)
            self.token = ""

    def renew(self) -> bool:
        """Push the expiry out by a TTL when the lease is still ours."""
        token = self.token
        return bool(token) and bool(self.redis.eval(_RENEW, 1, self.key, token, self.ttl_ms))

    @contextlib.contextmanager
    def kept(self) -> Iterator[None]:
        """Renew every TTL/3 while the body runs, so a session longer than the TTL stays the only one."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(self.ttl_ms / 3000):
                try:
                    if not self.renew():
                        return
                except Exception as e:  # noqa: BLE001 - Redis away: the lease lapses, the session finishes
                    log.warning("scheduler lease renewal failed: %s", e)

        thread = threading.Thread(target=loop, name="lahar-lease", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(5)


class Runner:
    """Everything one `lahar scheduler` process keeps between ticks: client, cache, configuration, lease."""

    def __init__(self, client: ClusterClient, *, lease: RedisLease | None = None, registry: Registry | None = None,
                 metrics: SchedulerMetrics | None = None, workers: int = 16,
                 conf_namespaces: tuple[str, ...] = ()) -> None:
        self.client = client
        self.registry = registry if registry is not None else in_tree_registry()
        self.cache = SchedulerCache(client)
        usagesource.use_client(client)  # the usage plugin's metrics-API source reads through this client
        self.metrics = metrics if metrics is not None else SchedulerMetrics()
        self.conf = ConfSource(client, self.registry, on_error=self._conf_error, namespaces=conf_namespaces)
        self.lease = lease
        self.workers = workers
        self._local = threading.Lock()
        self._started = False
        self._started_at = 0.0
        self.sync_seconds: float | None = None  # start → every informer synced, once it happened
        self.startup: dict[str, Any] = {}  # where the time to the first session went (in the first tick's result)
        self.sessions = 0

    def start(self, timeout: float | None = 60.0) -> bool:
        """Start the informers (at process start, leading or not: see the module); wait up to `timeout` for them."""
        if not self._started:
            self._started_at = time.perf_counter()
            self._started = True
        ok = self.cache.start(timeout)
        ok = self.conf.start(timeout) and ok
        return self.synced() if ok else False

    def unsynced(self) -> list[str]:
        """What the first session still waits for: the required informers not watching yet (and the conf's)."""
        waiting = self.cache.unsynced()
        if not self.conf.synced():
            waiting.append("configmaps")
        return waiting

    def synced(self) -> bool:
        if self.sync_seconds is not None:
            return True
        waiting = self.unsynced()
        if waiting:
            return False
        self.sync_seconds = time.perf_counter() - self._started_at
        self.metrics.cache_synced.set(1)
        self.metrics.cache_sync_seconds.set(self.sync_seconds)
        kinds = self.cache.sync_report()
        self.startup = {"sync_s": round(self.sync_seconds, 3), "kinds": kinds}
        log.info("scheduler cache synced in %.2fs (%s); sessions start", self.sync_seconds,
                 ", ".join(f"{k} {v['objects']}" for k, v in kinds.items()))
        return True

    def wait_synced(self, timeout: float | None = None, poll: float = 0.05) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.synced():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(poll)
        return True

    def stop(self) -> None:
        self.cache.stop()
        self.conf.stop()

    def _conf_error(self, cm: dict, message: str) -> None:
        self.metrics.conf_errors.inc()
        commits.record_event(self.client, cm, "Warning", "InvalidConfiguration",
                             f"scheduler configuration rejected, the last good one stays in force: {message}")

    def tick(self) -> dict[str, Any]:
        """One session if nobody else runs one; otherwise drop the tick."""
        if not self._local.acquire(blocking=False):
            self.metrics.sessions_skipped.inc()
            return {"skipped": "session running in this process"}
        try:
            if not self._started:
                self.start()
            if not self.synced():
                self.metrics.ticks_before_sync.inc()
                return {"skipped": f"informers not synced: {', '.join(self.unsynced())}"}
            if self.lease is not None and not self.lease.acquire():
                self.metrics.sessions_skipped.inc()
                if self.cache.incremental:  # warm standby: the snapshot follows the informers while another leads
                    self.cache.snapshot()
                return {"skipped": "session running elsewhere"}
            try:
                state = self.conf.current()
                t0 = time.perf_counter()
                with self.lease.kept() if self.lease is not None else contextlib.nullcontext():
                    snap = self.cache.snapshot()
                    t1 = time.perf_counter()
                    decisions = run_session(snap, state.conf, registry=self.registry, shared=self.cache.shared)
                    t2 = time.perf_counter()
                    result = commits.apply(self.client, decisions, workers=self.workers)
                t3 = time.perf_counter()
                self.metrics.observe(decisions, commit=result)
                out = {"session": decisions.session, "bound": len(result.bound),
                       "bind_failures": len(result.bind_failures), "evicted": len(result.evicted),
                       "pipelined": len(decisions.pipelined), "snapshot_s": round(t1 - t0, 4),
                       "session_s": round(decisions.timings.get("total", 0.0), 4), "total_s": round(t3 - t0, 4),
                       "conf": state.source, "conf_error": state.error}
                self.sessions += 1
                if self.sessions == 1:
                    self.startup.update(snapshot_s=round(t1 - t0, 3), session_s=round(t2 - t1, 3),
                                        commit_s=round(t3 - t2, 3),
                                        first_session_after_start_s=round(t3 - self._started_at, 3))
                    out["startup"] = self.startup
                return out
            finally:
                if self.lease is not None:
                    self.lease.release()
        finally:
            self._local.release()


_runner: Runner | None = None
_settings: Any = None


def configure(r: Runner | None) -> None:
    """Install the process's runner (`lahar scheduler` does this before starting the worker)."""
    global _runner
    _runner = r


def conf_namespaces(settings: Any) -> tuple[str, ...]:
    """`LAHAR_SCHEDULER_CONF_NAMESPACES` ("lahar-system,volcano-system"; empty: every namespace) as a tuple."""
    raw = str(getattr(settings, "scheduler_conf_namespaces", "") or "")
    return tuple(ns.strip() for ns in raw.split(",") if ns.strip())


def runner() -> Runner:
    """The process's runner, built from settings on first use (KUBECONFIG / in-cluster, REDIS_URL)."""
    global _runner
    if _runner is None:
        import redis

        from lahar.kube import kubeconfig
        from lahar.kube.rest import RestClient

        s = _settings
        client = RestClient(kubeconfig.load(str(s.kubeconfig) if s is not None and s.kubeconfig else None))
        lease = None
        if s is not None and s.redis_url:
            lease = RedisLease(redis.Redis.from_url(s.redis_url), ttl_seconds=lease_ttl(s.schedule_period))
        _runner = Runner(client, lease=lease, conf_namespaces=conf_namespaces(s))
    return _runner


def register(app: Any, settings: Any) -> dict[str, dict[str, Any]]:
    """Define `scheduler.session` on the Celery app; return its beat entry."""
    global _settings
    _settings = settings
    period = float(getattr(settings, "schedule_period", 1.0))

    @app.task(name="scheduler.session", ignore_result=True, acks_late=False)
    def session() -> dict[str, Any]:
        return runner().tick()

    return {"scheduler.session": {"task": "scheduler.session", "schedule": period,
                                  "options": {"queue": "scheduling", "expires": period}}}
