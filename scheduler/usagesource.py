"""The usage plugin's metrics source: node load read from the resource metrics API (`metrics.k8s.io/v1beta1`
NodeMetrics, what metrics-server and devcluster serve), refreshed every `metrics.interval` outside the sessions.

The scheduler conf's `metrics` block names it as Volcano's does (`type`, `address`, `interval`); the types
`metrics-server` and `metrics-api` select this source (Volcano's `prometheus`, `prometheus_adapt` and
`elasticsearch` are not read: the plugin then keeps the node annotation). `MetricsSource` keeps the last list with its
age; a failed fetch is logged once and empties it (the plugin then scores every node 0). The process's client is
installed with `use_client` (the scheduler's runner does it); `source_for` keeps one source per conf. Conversion to
percent is pure (`node_percent`). Imported by `scheduler.plugins.usage`; imports kube only.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lahar.kube import durations, quantity

__all__ = ["METRICS_API_TYPES", "Measured", "MetricsSource", "SourceConf", "node_percent", "node_size", "parse_item",
           "percent", "source_conf", "source_for",
           "stop_all", "use_client"]

log = logging.getLogger(__name__)

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
METRICS_API_TYPES = frozenset({"metrics-server", "metrics-api"})
DEFAULT_INTERVAL = 30.0
REQUEST_TIMEOUT = 5.0

Fetch = Callable[[], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class SourceConf:
    type: str
    address: str = ""  # accepted; the metrics API is read through the scheduler's own cluster client
    interval: float = DEFAULT_INTERVAL


def source_conf(metrics: Mapping[str, Any] | None) -> SourceConf | None:
    """The metrics-API source the conf's `metrics` block asks for, or None (no block, another type)."""
    metrics = metrics or {}
    kind = metrics.get("type")
    if not isinstance(kind, str) or kind.strip().lower() not in METRICS_API_TYPES:
        return None
    raw = metrics.get("interval")
    try:
        seconds = durations.parse(str(raw)) if raw is not None else 0.0
    except ValueError:
        seconds = 0.0
    address = metrics.get("address")
    return SourceConf(kind.strip().lower(), address if isinstance(address, str) else "",
                      seconds if seconds > 0 else DEFAULT_INTERVAL)


def _time(text: Any) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def _amount(rl: Mapping[str, Any], name: str, *, milli: bool) -> float | None:
    if name not in rl:
        return None
    try:
        q = quantity.parse(rl[name])
    except ValueError:
        return None
    return float(q.milli_value() if milli else q.value())


@dataclass(frozen=True, slots=True)
class Measured:
    """One NodeMetrics item, parsed: milli-CPU and bytes in use, and when."""

    cpu: float
    memory: float
    time: dt.datetime | None


def parse_item(item: Mapping[str, Any]) -> Measured | None:
    """A NodeMetrics item's usage; None when cpu or memory is missing or malformed."""
    usage = item.get("usage") or {}
    cpu, mem = _amount(usage, "cpu", milli=True), _amount(usage, "memory", milli=False)
    if cpu is None or mem is None:
        return None
    return Measured(cpu, mem, _time(item.get("timestamp")))


def node_size(node: Mapping[str, Any]) -> tuple[float, float]:
    """(milli-CPU, bytes) of the node's allocatable (capacity when absent); 0 where missing or malformed."""
    status = node.get("status") or {}
    size = status.get("allocatable") or status.get("capacity") or {}
    return _amount(size, "cpu", milli=True) or 0.0, _amount(size, "memory", milli=False) or 0.0


def percent(measured: Measured | None, size: tuple[float, float]) -> tuple[float, float, dt.datetime | None] | None:
    """(cpu %, memory %, measured at) over the node's size, as `kubectl top nodes`; None without a measure or a
    size."""
    if measured is None or size[0] <= 0 or size[1] <= 0:
        return None
    return measured.cpu / size[0] * 100.0, measured.memory / size[1] * 100.0, measured.time


def node_percent(item: Mapping[str, Any], node: Mapping[str, Any]) -> tuple[float, float, dt.datetime | None] | None:
    """`percent` of a raw NodeMetrics item over the node's allocatable (capacity when absent)."""
    return percent(parse_item(item), node_size(node))


class MetricsSource:
    """The last NodeMetrics list, parsed, by node name, refreshed by `refresh` (a background thread after `start`):
    the parsing is done there, outside the sessions."""

    def __init__(self, fetch: Fetch, interval: float = DEFAULT_INTERVAL, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.fetch, self.interval, self.clock = fetch, interval, clock
        self.items: dict[str, Measured | None] = {}
        self.fetched_at: float | None = None
        self.error: str | None = None
        self._logged = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh(self) -> bool:
        try:
            listed = self.fetch()
            items = {(i.get("metadata") or {}).get("name", ""): parse_item(i) for i in listed.get("items") or ()
                     if isinstance(i, Mapping)}
        except Exception as e:  # noqa: BLE001 - any failure of the metrics API leaves the plugin without load
            with self._lock:
                self.items, self.fetched_at, self.error = {}, None, f"{type(e).__name__}: {e}"
            if not self._logged:
                self._logged = True
                log.warning("usage: the metrics API (%s/%s nodes) cannot be read, nodes score 0 until it can: %s",
                            GROUP, VERSION, self.error)
            return False
        with self._lock:
            self.items, self.fetched_at, self.error = items, self.clock(), None
        if self._logged:
            log.info("usage: the metrics API answers again (%d nodes)", len(items))
            self._logged = False
        return True

    def snapshot(self) -> tuple[dict[str, Measured | None], float | None]:
        """The items by node and their age in seconds (None: never fetched, or the last fetch failed)."""
        with self._lock:
            age = None if self.fetched_at is None else self.clock() - self.fetched_at
            return self.items, age

    def start(self) -> None:
        if self._thread is not None:
            return

        def run() -> None:
            while not self._stop.wait(self.interval):
                self.refresh()

        self._thread = threading.Thread(target=run, name="usage-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


_client: Any = None
_sources: dict[tuple[SourceConf, int], MetricsSource] = {}
_sources_lock = threading.Lock()


def use_client(client: Any) -> None:
    """The cluster client the metrics API is read through (a `kube.rest.RestClient`: its official `ApiClient`)."""
    global _client
    _client = client


def _fetch_with(client: Any) -> Fetch:
    def fetch() -> Mapping[str, Any]:
        api = getattr(client, "api", None)
        if api is None:
            raise RuntimeError("no cluster client with an HTTP API is installed for the metrics source")
        from kubernetes import client as k8s_client

        got: Mapping[str, Any] = k8s_client.CustomObjectsApi(api).list_cluster_custom_object(
            GROUP, VERSION, "nodes", _request_timeout=REQUEST_TIMEOUT)
        return got

    return fetch


def source_for(conf: SourceConf) -> MetricsSource:
    """The process's source for `conf` and the installed client: fetched once at once, then every interval."""
    key = (conf, id(_client))
    with _sources_lock:
        src = _sources.get(key)
        if src is None:
            src = _sources[key] = MetricsSource(_fetch_with(_client), conf.interval)
            src.refresh()
            src.start()
        return src


def stop_all() -> None:
    """Stop and forget every source (a process that changes clusters, tests)."""
    with _sources_lock:
        sources = list(_sources.values())
        _sources.clear()
    for s in sources:
        s.stop()
