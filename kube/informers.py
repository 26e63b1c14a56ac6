"""Informers: a local, watch-fed cache of one resource type, with indexes and add/update/delete handlers.

Sits on top of any `ClusterClient` (REST or in-memory): list, then watch from the list's resourceVersion in a
thread, resume from the last version seen, relist on `errors.Gone` (reconciling what was missed), back off on
other errors. `InformerFactory` shares one informer per (type, namespace, selectors), like client-go's.

Two start-up states: `has_synced()` (the first list is in the store and its handlers have run, client-go's
HasSynced) and `is_watching()` (also the watch from that list's resourceVersion is open and, where the watch can
be asked for a bookmark, everything queued on it before the bookmark is applied: an object written between the
list and the watch is in the store). `list_seconds` / `fill_seconds` say where the first list's time went.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from lahar.kube import backoff as backoffs
from lahar.kube import errors
from lahar.kube.client import ClusterClient, Obj, Watch
from lahar.kube.resources import ResourceType

__all__ = ["Handler", "Informer", "InformerFactory", "key_of", "namespace_index"]

log = logging.getLogger(__name__)

IndexFunc = Callable[[Obj], Iterable[str] | str | None]


def key_of(obj: Obj) -> str:
    """client-go's MetaNamespaceKeyFunc: `namespace/name`, or `name` for cluster-scoped objects."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def namespace_index(obj: Obj) -> list[str]:
    """The usual `namespace` index function."""
    ns = (obj.get("metadata") or {}).get("namespace")
    return [ns] if ns else []


def _rv(obj: Obj) -> str | None:
    return (obj.get("metadata") or {}).get("resourceVersion")


def _index_values(fn: IndexFunc, obj: Obj) -> set[str]:
    out = fn(obj)
    if out is None:
        return set()
    if isinstance(out, str):
        return {out}
    return set(out)


@dataclass(frozen=True)
class Handler:
    """Callbacks run on the informer's thread, one event at a time; objects are shared, do not mutate them."""

    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj], None] | None = None


class Informer:
    """List + watch one resource type into a local store; `start()`, `wait_for_sync()`, read, `stop()`."""

    def __init__(self, client: ClusterClient, rt: ResourceType, *, namespace: str | None = None,
                 label_selector: str | None = None, field_selector: str | None = None,
                 resync: float | None = None, backoff: tuple[float, float] = (0.2, 10.0),
                 watch_timeout: float | None = 300.0, rng: Callable[[], float] = random.random) -> None:
        self.client = client
        self.rt = rt
        self.namespace = namespace if rt.namespaced else None
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.resync = resync
        self._backoff = backoff
        self._rng = rng
        self._watch_timeout = watch_timeout
        self._lock = threading.RLock()          # store and indexes
        self._dispatch = threading.RLock()      # handlers run one at a time
        self._items: dict[str, Obj] = {}
        self._indexers: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, set[str]]] = {}
        self._handlers: list[Handler] = []
        self._synced = threading.Event()
        self._watching = threading.Event()
        self._barrier = False                   # a bookmark was asked for when the first watch opened
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watch: Watch | None = None
        self._watch_lock = threading.Lock()
        self.resource_version: str | None = None
        self.relists = 0  # how many full lists were done (1 + one per Gone)
        self.list_seconds = 0.0  # the first list: the request (server, transfer, JSON decoding) ...
        self.fill_seconds = 0.0  # ... and putting its items into the store with the handlers run

    # -- reading ----------------------------------------------------------------------------------------------

    def get(self, namespace: str | None, name: str) -> Obj | None:
        key = f"{namespace}/{name}" if namespace else name
        with self._lock:
            return self._items.get(key)

    def list(self, namespace: str | None = None) -> list[Obj]:
        with self._lock:
            items = list(self._items.values())
        if namespace is not None:
            items = [o for o in items if (o.get("metadata") or {}).get("namespace") == namespace]
        return items

    def keys(self) -> list[str]:
        with self._lock:
            return sorted(self._items)

    def add_index(self, name: str, fn: IndexFunc) -> None:
        """Register an index function (obj → values); existing objects are indexed at once."""
        with self._lock:
            if name in self._indexers:
                raise ValueError(f"index {name!r} already exists")
            self._indexers[name] = fn
            index: dict[str, set[str]] = {}
            for key, obj in self._items.items():
                for value in _index_values(fn, obj):
                    index.setdefault(value, set()).add(key)
            self._indices[name] = index

    def by_index(self, name: str, value: str) -> list[Obj]:
        with self._lock:
            if name not in self._indexers:
                raise KeyError(f"no index {name!r}")
            keys = sorted(self._indices[name].get(value, ()))
            return [self._items[k] for k in keys]

    def index_values(self, name: str) -> list[str]:
        with self._lock:
            return sorted(v for v, keys in self._indices[name].items() if keys)

    # -- handlers ---------------------------------------------------------------------------------------------

    def add_handler(self, on_add: Callable[[Obj], None] | None = None,
                    on_update: Callable[[Obj, Obj], None] | None = None,
                    on_delete: Callable[[Obj], None] | None = None) -> Handler:
        """Register callbacks; objects already in the store are replayed to `on_add` (client-go semantics)."""
        handler = Handler(on_add, on_update, on_delete)
        with self._dispatch:
            self._handlers.append(handler)
            if on_add is not None:
                for obj in self.list():
                    self._safe(on_add, obj)
        return handler

    def on_add(self, fn: Callable[[Obj], None]) -> Callable[[Obj], None]:
        self.add_handler(on_add=fn)
        return fn

    def on_update(self, fn: Callable[[Obj, Obj], None]) -> Callable[[Obj, Obj], None]:
        self.add_handler(on_update=fn)
        return fn

    def on_delete(self, fn: Callable[[Obj], None]) -> Callable[[Obj], None]:
        self.add_handler(on_delete=fn)
        return fn

    @staticmethod
    def _safe(fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - one bad handler must not stop the informer
            log.exception("informer handler %r failed", fn)

    def _notify(self, kind: str, old: Obj | None, new: Obj | None) -> None:
        with self._dispatch:
            for h in self._handlers:
                if kind == "add" and h.on_add is not None:
                    self._safe(h.on_add, new)
                elif kind == "update" and h.on_update is not None:
                    self._safe(h.on_update, old, new)
                elif kind == "delete" and h.on_delete is not None:
                    self._safe(h.on_delete, old)

    # -- store mutation ---------------------------------------------------------------------------------------

    def _unindex(self, key: str, obj: Obj) -> None:
        for name, fn in self._indexers.items():
            index = self._indices[name]
            for value in _index_values(fn, obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]

    def _index(self, key: str, obj: Obj) -> None:
        for name, fn in self._indexers.items():
            for value in _index_values(fn, obj):
                self._indices[name].setdefault(value, set()).add(key)

    def _put(self, obj: Obj) -> tuple[Obj | None, Obj]:
        key = key_of(obj)
        with self._lock:
            old = self._items.get(key)
            if old is not None:
                self._unindex(key, old)
            self._items[key] = obj
            self._index(key, obj)
        return old, obj

    def _remove(self, obj: Obj) -> Obj | None:
        key = key_of(obj)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._unindex(key, old)
        return old

    def _replace(self, items: list[Obj]) -> None:
        """Reconcile the store with a fresh list: deletions missed while away, adds, and changed objects."""
        fresh = {key_of(o): o for o in items}
        with self._lock:
            gone = [(k, o) for k, o in self._items.items() if k not in fresh]
        for _, obj in gone:
            if self._remove(obj) is not None:
                self._notify("delete", obj, None)
        for obj in fresh.values():
            old, new = self._put(obj)
            if old is None:
                self._notify("add", None, new)
            elif _rv(old) != _rv(new):
                self._notify("update", old, new)

    def _apply(self, event_type: str, obj: Obj) -> None:
        if event_type in ("ADDED", "MODIFIED"):
            old, new = self._put(obj)
            self._notify("add" if old is None else "update", old, new)
        elif event_type == "DELETED":
            old = self._remove(obj)
            if old is not None:
                self._notify("delete", obj, None)

    # -- lifecycle --------------------------------------------------------------------------------------------

    def has_synced(self) -> bool:
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    def is_watching(self) -> bool:
        """Synced, and the watch that follows the first list is open with its backlog applied (see the module)."""
        return self._watching.is_set()

    def wait_for_watch(self, timeout: float | None = None) -> bool:
        return self._watching.wait(timeout)

    @property
    def started(self) -> bool:
        return bool(self._threads)

    def start(self) -> Informer:
        if self._threads:
            return self
        name = f"informer-{self.rt.plural}.{self.rt.group or 'core'}"
        self._threads.append(threading.Thread(target=self._run, name=name, daemon=True))
        if self.resync:
            self._threads.append(threading.Thread(target=self._resync_loop, name=f"{name}-resync", daemon=True))
        for t in self._threads:
            t.start()
        return self

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop watching and join the threads."""
        self._stopping.set()
        with self._watch_lock:
            w = self._watch
        if w is not None:
            w.stop()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout)

    def __enter__(self) -> Informer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _list(self) -> None:
        t0 = time.perf_counter()
        out = self.client.list(self.rt, namespace=self.namespace, label_selector=self.label_selector,
                               field_selector=self.field_selector)
        t1 = time.perf_counter()
        self._replace(out.get("items") or [])
        self.resource_version = (out.get("metadata") or {}).get("resourceVersion") or None
        self.relists += 1
        if not self._synced.is_set():
            self.list_seconds, self.fill_seconds = t1 - t0, time.perf_counter() - t1
        self._synced.set()

    def _watch_opened(self, w: Watch) -> None:
        """The first watch is open: ask it for a bookmark (queued behind the events replayed since the list) and
        count as watching once it is read; a watch that cannot be asked counts as watching now."""
        if self._watching.is_set() or self._barrier:
            return
        ask = getattr(w, "bookmark", None)
        if ask is None:
            self._watching.set()
            return
        self._barrier = True
        ask()

    def _run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                if self.resource_version is None:
                    self._list()
                self._watch_once()
                failures = 0
            except errors.Gone:
                log.info("informer %s: resourceVersion %s expired, relisting", self.rt.plural, self.resource_version)
                self.resource_version = None
            except Exception as e:  # noqa: BLE001 - any failure: back off, then resume from the last version
                if self._stopping.is_set():
                    break
                delay = self.retry_delay(failures)
                failures += 1
                log.warning("informer %s: %s; retrying in %.2fs", self.rt.plural, e, delay)
                if self._stopping.wait(delay):
                    break

    def retry_delay(self, failures: int) -> float:
        """Seconds before reconnecting after `failures` failures in a row (0 = the first): exponential from
        `backoff[0]` to `backoff[1]`, with equal jitter so that the informers of every process do not all reconnect
        at the same moment after an API-server restart."""
        base, cap = self._backoff
        return backoffs.delay(failures, base=base, cap=cap, jitter="equal", rng=self._rng)

    def _watch_once(self) -> None:
        w = self.client.watch(self.rt, namespace=self.namespace, resource_version=self.resource_version,
                              label_selector=self.label_selector, field_selector=self.field_selector,
                              allow_bookmarks=True, timeout_seconds=self._watch_timeout)
        with self._watch_lock:
            self._watch = w
        try:
            if self._stopping.is_set():
                return
            self._watch_opened(w)
            for event in w:
                obj = event["object"]
                rv = _rv(obj)
                if event["type"] != "BOOKMARK":
                    self._apply(event["type"], obj)
                elif self._barrier:
                    self._watching.set()
                if rv:
                    self.resource_version = rv
                if self._stopping.is_set():
                    return
        finally:
            with self._watch_lock:
                self._watch = None
            if not self._watching.is_set():
                self._barrier = False  # the watch ended before its bookmark: the next one asks again
            w.stop()

    def _resync_loop(self) -> None:
        assert self.resync
        while not self._stopping.wait(self.resync):
            if not self._synced.is_set():
                continue
            for obj in self.list():
                self._notify("update", obj, obj)


class InformerFactory:
    """One shared informer per (type, namespace, selectors); `start()` starts new ones, `stop()` all."""

    def __init__(self, client: ClusterClient, *, resync: float | None = None, **informer_options: Any) -> None:
        self.client = client
        self.resync = resync
        self._options = informer_options
        self._lock = threading.Lock()
        self._informers: dict[tuple[Any, ...], Informer] = {}

    def informer(self, rt: ResourceType, *, namespace: str | None = None, label_selector: str | None = None,
                 field_selector: str | None = None) -> Informer:
        key = (rt.group, rt.version, rt.plural, namespace if rt.namespaced else None, label_selector or None,
               field_selector or None)
        with self._lock:
            inf = self._informers.get(key)
            if inf is None:
                inf = Informer(self.client, rt, namespace=namespace, label_selector=label_selector,
                               field_selector=field_selector, resync=self.resync, **self._options)
                self._informers[key] = inf
            return inf

    def informers(self) -> list[Informer]:
        with self._lock:
            return list(self._informers.values())

    def start(self) -> None:
        for inf in self.informers():
            inf.start()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return all(inf.wait_for_sync(timeout) for inf in self.informers())

    def stop(self) -> None:
        informers = self.informers()
        for inf in informers:
            inf._stopping.set()
        for inf in informers:
            inf.stop()

    def __enter__(self) -> InformerFactory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
