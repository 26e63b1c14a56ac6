"""Writing core/v1 Events the way client-go's EventRecorder does, shared by the controllers and the scheduler.

A process keeps an aggregation cache (client-go's eventLogger, `tools/record`) keyed on (involvedObject, reason,
message) that holds the Event's name, count, first timestamp and the resourceVersion of our last write: a first
occurrence is one create, a repeat is one merge patch of `count` and `lastTimestamp` (nothing read back). The patch
carries that resourceVersion, so a repeat another process bumped meanwhile answers Conflict and is read once and
bumped from what the server holds; a create that finds the Event (another process, or this one before a restart)
does the same; an Event that expired (the API server's event TTL) is created again with the count it had reached,
as client-go does. `correlate` and `observed` are the pure core; `Recorder.record` the thin shell.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

from lahar.kube import errors
from lahar.kube.client import ClusterClient

__all__ = ["RECORDER", "Observed", "Recorder", "Write", "correlate", "key_of", "observed"]

MAX_ENTRIES = 4096  # client-go's maxLruCacheEntries
Key = tuple[str, str, str, str, str, str]  # namespace, involved kind, name, uid, reason, message


@dataclass(frozen=True)
class Observed:
    """What this process last wrote (or read) of one Event."""

    name: str
    count: int
    first: str
    resource_version: str | None


@dataclass(frozen=True)
class Write:
    """One Event write: `create` the Event `body`, or `patch` Event `name` with the merge patch `body`."""

    verb: Literal["create", "patch"]
    name: str
    body: dict[str, Any]


def key_of(event: dict[str, Any]) -> Key:
    """The aggregation key of an Event: its namespace, involved object, reason and message."""
    involved = event.get("involvedObject") or {}
    return (str((event.get("metadata") or {}).get("namespace") or ""), str(involved.get("kind") or ""),
            str(involved.get("name") or ""), str(involved.get("uid") or ""), str(event.get("reason") or ""),
            str(event.get("message") or ""))


def correlate(seen: Observed | None, *, event: dict[str, Any], now: str) -> Write:
    """The write for one occurrence of `event` (count 1, first = last = `now`), given what this process last
    observed of it: none → create it; one → patch count + 1 and lastTimestamp, preconditioned on the last known
    resourceVersion (none known: no precondition)."""
    if seen is None:
        return Write("create", event["metadata"]["name"], event)
    patch: dict[str, Any] = {"count": seen.count + 1, "lastTimestamp": now}
    if seen.resource_version:
        patch["metadata"] = {"resourceVersion": seen.resource_version}
    return Write("patch", seen.name, patch)


def observed(answer: Any) -> Observed | None:
    """What the server's answer to an Event write says about it (None: not an Event answer)."""
    if not isinstance(answer, dict) or not (answer.get("metadata") or {}).get("name"):
        return None
    meta = answer["metadata"]
    return Observed(name=meta["name"], count=int(answer.get("count") or 1),
                    first=str(answer.get("firstTimestamp") or answer.get("lastTimestamp") or ""),
                    resource_version=meta.get("resourceVersion"))


class Recorder:
    """The aggregation cache of one process (least recently used first) and the writes it decides."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._seen: OrderedDict[Key, Observed] = OrderedDict()
        self._mu = threading.Lock()

    def clear(self) -> None:
        """Forget every Event (as a new process would)."""
        with self._mu:
            self._seen.clear()

    def _get(self, key: Key) -> Observed | None:
        with self._mu:
            seen = self._seen.get(key)
            if seen is not None:
                self._seen.move_to_end(key)
            return seen

    def _remember(self, key: Key, seen: Observed | None) -> None:
        with self._mu:
            if seen is None:
                self._seen.pop(key, None)
                return
            self._seen[key] = seen
            self._seen.move_to_end(key)
            while len(self._seen) > self.max_entries:
                self._seen.popitem(last=False)

    def record(self, client: ClusterClient, event: dict[str, Any]) -> dict[str, Any] | None:
        """Write one occurrence of `event` (a complete core/v1 Event with count 1 and both timestamps); the server's
        answer, or None when the write failed (best effort: Events never fail their caller)."""
        rt = client.registry.get("", "v1", "events")
        if rt is None:
            return None
        namespace = event["metadata"].get("namespace") or "default"
        now = str(event.get("lastTimestamp") or "")
        key = key_of(event)
        seen = self._get(key)
        write = correlate(seen, event=event, now=now)
        answer = None
        with contextlib.suppress(errors.ApiError):
            if write.verb == "patch":
                try:
                    answer = client.patch(rt, write.name, write.body, namespace=namespace, patch_type="merge")
                except errors.NotFound:  # expired: again, with the count it had reached
                    again = {**event, "count": int(write.body["count"])}
                    if seen is not None and seen.first:
                        again["firstTimestamp"] = seen.first
                    answer = client.create(rt, again, namespace=namespace)
                except errors.Conflict:  # another process bumped it since our last write
                    answer = _bump_read(client, rt, write.name, namespace, now)
            else:
                try:
                    answer = client.create(rt, write.body, namespace=namespace)
                except errors.AlreadyExists:  # another process (or this one before a restart) wrote it
                    answer = _bump_read(client, rt, write.name, namespace, now)
            self._remember(key, observed(answer))
        return answer


def _bump_read(client: ClusterClient, rt: Any, name: str, namespace: str, now: str) -> Any:
    """The Event as the server holds it, count + 1: for a repeat someone else wrote (one read, then the cache)."""
    current = client.get(rt, name, namespace=namespace)
    current["count"] = int(current.get("count") or 1) + 1
    current["lastTimestamp"] = now
    return client.update(rt, current, namespace=namespace)


RECORDER = Recorder()  # the process's recorder (the worker's reconcilers, the scheduler's commit)
