"""The dashboard's live state: one informer (list + one watch) per kind the pages read, shared by every browser,
and the fan-out that wakes each browser's event stream when something changed; and, when given its address, the
webhook's policy counters, scraped by one thread.

Part of `lahar.dashboard`; `app` reads `Hub.items(...)` to render and `Hub.subscribe()` for `/events`. Informers
come from `lahar.kube.informers` over any `ClusterClient` (the REST client in `lahar dashboard`, the in-memory one in
tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

from lahar.dashboard import gpus, nodes, views
from lahar.kube.client import ClusterClient, Obj
from lahar.kube.informers import Informer, InformerFactory

__all__ = ["KINDS", "Hub", "WebhookMetrics"]

log = logging.getLogger(__name__)

# (name the pages use, group, version, plural, label selector)
KINDS: tuple[tuple[str, str, str, str, str | None], ...] = (
    ("queues", "scheduling.volcano.sh", "v1beta1", "queues", None),
    ("podgroups", "scheduling.volcano.sh", "v1beta1", "podgroups", None),
    ("jobs", "batch.volcano.sh", "v1alpha1", "jobs", None),
    ("pods", "", "v1", "pods", None),
    ("nodes", "", "v1", "nodes", None),
    ("events", "", "v1", "events", None),
    ("hypernodes", "topology.volcano.sh", "v1alpha1", "hypernodes", None),
    ("configmaps", "", "v1", "configmaps", "lahar.sh/policy=true"),
)


HISTORY_POINTS = 60  # one sample a minute: the last hour


class _Subscriber:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.event = asyncio.Event()
        self.kinds: set[str] = set()


class Hub:
    """`start()` the informers, `items(kind)` to read, `subscribe()` for change notices, `stop()`.

    Informer handlers only bump a version and wake the subscribers (`loop.call_soon_threadsafe`): no browser
    causes any request to the API server, however many are open."""

    def __init__(self, client: ClusterClient, *, watch_timeout: float | None = 300.0,
                 sample_every: float | None = 60.0, clock: Callable[[], float] = time.time,
                 webhook_metrics: WebhookMetrics | None = None) -> None:
        self.client = client
        self.webhook_metrics = webhook_metrics
        if webhook_metrics is not None:
            webhook_metrics.on_change = lambda: self._changed("webhook-metrics")
        self.sample_every = sample_every
        self.clock = clock
        self.history: deque[tuple[float, dict[str, float]]] = deque(maxlen=HISTORY_POINTS)
        self._sampling = threading.Event()
        self._sampler: threading.Thread | None = None
        self.factory = InformerFactory(client, watch_timeout=watch_timeout)
        self.informers: dict[str, Informer] = {}
        self.version = 0
        self._lock = threading.Lock()
        self._subscribers: set[_Subscriber] = set()
        self.occupancy = nodes.Occupancy()
        self.device_pods = gpus.DevicePods()
        for name, group, version, plural, selector in KINDS:
            rt = client.registry.get(group, version, plural)
            if rt is None:
                continue
            inf = self.factory.informer(rt, label_selector=selector)
            if name == "pods":  # kept per event, so a render reads sums and groups instead of every pod
                inf.add_index(JOB_INDEX, _job_of)
                inf.add_handler(on_add=self.occupancy.put, on_update=lambda _old, new: self.occupancy.put(new),
                                on_delete=self.occupancy.remove)
                inf.add_handler(on_add=self.device_pods.put, on_update=lambda _old, new: self.device_pods.put(new),
                                on_delete=self.device_pods.remove)
            inf.add_handler(on_add=lambda _o, n=name: self._changed(n),
                            on_update=lambda _o, _n, n=name: self._changed(n),
                            on_delete=lambda _o, n=name: self._changed(n))
            self.informers[name] = inf

    # -- informers ----------------------------------------------------------------------------------------------

    def start(self) -> Hub:
        self.factory.start()
        if self.webhook_metrics is not None:
            self.webhook_metrics.start()
        if self.sample_every:
            self._sampler = threading.Thread(target=self._sample_loop, name="dashboard-shares", daemon=True)
            self._sampler.start()
        return self

    def sample(self) -> dict[str, float]:
        """Record each queue's dominant share now (the Queues page draws the last hour of them)."""
        rows = views.queue_rows(self.items("queues"), self.items("podgroups"), pods=self.items("pods"),
                                cluster=nodes.totals(self.items("nodes")))
        point = views.shares(rows)
        self.history.append((self.clock(), point))
        return point

    def _sample_loop(self) -> None:
        if not self.wait_for_sync(60):
            log.warning("dashboard: informers not synced after 60s; sampling queue shares anyway")
        while not self._sampling.is_set():
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - a bad object must not end the sampling
                log.exception("dashboard: sampling queue shares")
            self._sampling.wait(self.sample_every)

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self.factory.wait_for_sync(timeout)

    def stop(self) -> None:
        self._sampling.set()
        if self.webhook_metrics is not None:
            self.webhook_metrics.stop()
        if self._sampler is not None:
            self._sampler.join(5)
        self.factory.stop()

    def items(self, kind: str) -> list[Obj]:
        inf = self.informers.get(kind)
        return inf.list() if inf is not None else []

    def pods_by_job(self) -> Mapping[tuple[str, str], list[Obj]]:
        """The pods informer's job index as `views.job_rows` reads it: (namespace, job) → pods, looked up lazily."""
        return _ByJob(self.informers.get("pods"))

    def synced(self) -> dict[str, bool]:
        return {k: inf.has_synced() for k, inf in self.informers.items()}

    # -- fan-out ------------------------------------------------------------------------------------------------

    def _changed(self, kind: str) -> None:
        with self._lock:
            self.version += 1
            subscribers = list(self._subscribers)
        for s in subscribers:
            with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                s.loop.call_soon_threadsafe(_wake, s, kind)

    async def subscribe(self, *, interval: float = 0.5, heartbeat: float = 15.0) -> AsyncIterator[dict[str, Any]]:
        """Yields `{"version", "kinds"}` after changes, at most once per `interval` (a burst of events is one
        notice), and `{}` as a heartbeat when nothing changed for `heartbeat` seconds."""
        sub = _Subscriber(asyncio.get_running_loop())
        with self._lock:
            self._subscribers.add(sub)
        try:
            while True:
                try:
                    await asyncio.wait_for(sub.event.wait(), heartbeat)
                except TimeoutError:
                    yield {}
                    continue
                await asyncio.sleep(interval)
                sub.event.clear()
                kinds, sub.kinds = sorted(sub.kinds), set()
                yield {"version": self.version, "kinds": kinds}
        finally:
            with self._lock:
                self._subscribers.discard(sub)

    @property
    def subscribers(self) -> int:
        with self._lock:
            return len(self._subscribers)


JOB_INDEX = "job"


class WebhookMetrics:
    """The webhook's `/metrics`, scraped every `every` seconds by one thread (whatever the number of browsers),
    kept as its policy counters (`views.policy_counters`) or the reason the last scrape failed. `verify` is the CA
    file of the webhook's serving certificate (or False); `on_change` is called when the counters change."""

    def __init__(self, url: str, *, verify: str | bool = True, every: float = 15.0,
                 fetch: Callable[[], str] | None = None) -> None:
        self.url = url
        self.verify = verify
        self.every = every
        self.on_change: Callable[[], None] = lambda: None
        self._fetch = fetch or self._get
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.counters: list[views.PolicyCounter] | None = None  # None: not scraped yet, or the last scrape failed
        self.error = "not scraped yet"

    def _get(self) -> str:
        import httpx

        response = httpx.get(self.url, verify=self.verify, timeout=5.0)
        response.raise_for_status()
        return response.text

    def scrape(self) -> None:
        """One scrape; a failure keeps its reason in `error` (the page shows it), never raises."""
        try:
            counters, error = views.policy_counters(self._fetch()), ""
        except Exception as e:  # noqa: BLE001 - unreachable, refused, TLS, HTTP error: all shown on the page
            counters, error = None, f"{type(e).__name__}: {e}".strip()[:200]
        changed = (counters, error) != (self.counters, self.error)
        self.counters, self.error = counters, error
        if changed:
            self.on_change()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.scrape()
            self._stop.wait(self.every)

    def start(self) -> WebhookMetrics:
        self._thread = threading.Thread(target=self._loop, name="dashboard-webhook-metrics", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


def _job_of(pod: Obj) -> str | None:
    meta = pod.get("metadata") or {}
    job = (meta.get("labels") or {}).get(views.JOB_NAME_LABEL)
    return f"{meta.get('namespace') or ''}/{job}" if job else None


class _ByJob(Mapping[tuple[str, str], list[Obj]]):
    """A read-only view of an informer's job index; only `get` and `[]` are cheap (what `job_rows` uses)."""

    def __init__(self, informer: Informer | None) -> None:
        self._inf = informer

    def __getitem__(self, key: tuple[str, str]) -> list[Obj]:
        if self._inf is None:
            raise KeyError(key)
        found = self._inf.by_index(JOB_INDEX, f"{key[0]}/{key[1]}")
        if not found:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for value in self._inf.index_values(JOB_INDEX) if self._inf else ():
            ns, _, name = value.partition("/")
            yield (ns, name)

    def __len__(self) -> int:
        return len(self._inf.index_values(JOB_INDEX)) if self._inf else 0


def _wake(sub: _Subscriber, kind: str) -> None:
    sub.kinds.add(kind)
    sub.event.set()
