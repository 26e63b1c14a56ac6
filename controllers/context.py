"""What every reconciler is handed: the cluster client, the clock, an Event recorder, durable timers, the inbox.

Error taxonomy (one place, used by the task shell in `lahar.worker`):

    TemporaryError(delay)  -> retried after `delay` seconds (Celery countdown / durable timer)
    PermanentError         -> not retried; the reconciler records an Event/condition on the object
    any other exception    -> retried with exponential backoff and jitter
    errors.Conflict (409)  -> treated as temporary with a short delay (someone else wrote first; re-read)
    errors.NotFound on the reconciled key itself -> done (the object is gone)

Reconcilers are `reconcile(ctx, namespace, name) -> Result`: level-based, idempotent, re-reading the world.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from lahar.controllers._fanout import DEFAULT_LIMIT
from lahar.controllers.caches import JobCache
from lahar.kube.client import ClusterClient

__all__ = [
    "Context",
    "Inbox",
    "MemoryInbox",
    "MemoryTimers",
    "PermanentError",
    "Result",
    "TemporaryError",
    "Timers",
    "utcnow",
]


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class Result:
    """`requeue_after` seconds → reconcile this key again then (None: only when something changes)."""

    requeue_after: float | None = None


class TemporaryError(Exception):
    def __init__(self, message: str, *, delay: float = 1.0) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentError(Exception):
    """Retrying cannot help (bad spec, missing reference); surfaced as an Event, never retried."""


class Timers(Protocol):
    """Durable delayed reconciles (survive worker restarts; not Celery ETAs, which Redis redelivers)."""

    def after(self, delay: float, kind: str, namespace: str, name: str, *, token: str = "") -> None:
        """Reconcile (kind, namespace, name) in `delay` seconds; `token` de-duplicates one timer per purpose."""

    def cancel(self, kind: str, namespace: str, name: str, *, token: str = "") -> None: ...


class Inbox(Protocol):
    """Observed happenings a level view cannot recover (a pod was deleted, a Command was issued), per object key.

    The dispatcher `push`es; a reconciler `peek`s, acts, then `ack`s what it handled (at-least-once: a crash
    between acting and acking replays the item, so acting must be idempotent).
    """

    def push(self, kind: str, namespace: str, name: str, item: dict[str, Any]) -> None: ...

    def peek(self, kind: str, namespace: str, name: str) -> list[dict[str, Any]]: ...

    def ack(self, kind: str, namespace: str, name: str, count: int) -> None:
        """Drop the first `count` items (those returned by the last peek)."""


@dataclass
class MemoryTimers:
    """Timers for unit tests and `lahar simulate`: `due(now)` pops what is due."""

    clock: Callable[[], dt.datetime] = utcnow
    pending: dict[tuple[str, str, str, str], dt.datetime] = field(default_factory=dict)

    def after(self, delay: float, kind: str, namespace: str, name: str, *, token: str = "") -> None:
        self.pending[(kind, namespace, name, token)] = self.clock() + dt.timedelta(seconds=delay)

    def cancel(self, kind: str, namespace: str, name: str, *, token: str = "") -> None:
        self.pending.pop((kind, namespace, name, token), None)

    def due(self, now: dt.datetime | None = None) -> list[tuple[str, str, str]]:
        now = now or self.clock()
        keys = [k for k, at in self.pending.items() if at <= now]
        for k in keys:
            del self.pending[k]
        return sorted({k[:3] for k in keys})


@dataclass
class MemoryInbox:
    items: dict[tuple[str, str, str], list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def push(self, kind: str, namespace: str, name: str, item: dict[str, Any]) -> None:
        with self._lock:
            self.items[(kind, namespace, name)].append(dict(item))

    def peek(self, kind: str, namespace: str, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(i) for i in self.items.get((kind, namespace, name), [])]

    def ack(self, kind: str, namespace: str, name: str, count: int) -> None:
        with self._lock:
            items = self.items.get((kind, namespace, name))
            if items:
                del items[:count]


@dataclass
class Context:
    """Everything a reconciler may touch. Tests build one over `MemoryClient` with fake time."""

    client: ClusterClient
    clock: Callable[[], dt.datetime] = utcnow
    timers: Timers = field(default_factory=MemoryTimers)
    inbox: Inbox = field(default_factory=MemoryInbox)
    scheduler_names: tuple[str, ...] = ("volcano",)
    default_queue: str = "default"
    component: str = "lahar-controllers"
    pod_concurrency: int = DEFAULT_LIMIT  # a Job's pod creates/deletes in flight at once, per process (`_fanout`)
    cache: JobCache | None = None  # the job reconciler's informer reads (`controllers.caches`); None: the API
