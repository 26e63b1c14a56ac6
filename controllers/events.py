"""Kubernetes Events from reconcilers: what `kubectl describe` shows under "Events".

`record(ctx, obj, type_, reason, message)` writes a core/v1 Event about `obj`. Like client-go's EventRecorder
(`tools/record`, its eventLogger), the process keeps an aggregation cache keyed on (involvedObject, reason, message)
that holds the Event's name, count, first and last timestamps and the resourceVersion of our last write: a first
occurrence is one create, a repeat is one merge patch of `count` and `lastTimestamp` (nothing read back). The patch
carries that resourceVersion, so a repeat another process bumped meanwhile answers Conflict and is read once and
bumped from what the server holds; an Event that expired (the API server's event TTL) is created again with the count
it had reached, as client-go does. `correlate` decides the write (pure); `record` is the thin shell around it.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

from lahar.controllers.context import Context
from lahar.kube import errors

__all__ = ["Observed", "Write", "correlate", "observed", "record"]

_SEEN_MAX = 4096  # client-go's maxLruCacheEntries
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


_seen: OrderedDict[Key, Observed] = OrderedDict()  # the aggregation cache, least recently used first
_seen_lock = threading.Lock()


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


def _get(key: Key) -> Observed | None:
    with _seen_lock:
        seen = _seen.get(key)
        if seen is not None:
            _seen.move_to_end(key)
        return seen


def _remember(key: Key, seen: Observed | None) -> None:
    with _seen_lock:
        if seen is None:
            _seen.pop(key, None)
            return
        _seen[key] = seen
        _seen.move_to_end(key)
        while len(_seen) > _SEEN_MAX:
            _seen.popitem(last=False)


def _bump_read(ctx: Context, rt: Any, name: str, namespace: str, now: str) -> Any:
    """The Event as the server holds it, count + 1: for a repeat someone else wrote (one read, then the cache)."""
    current = ctx.client.get(rt, name, namespace=namespace)
    current["count"] = int(current.get("count") or 1) + 1
    current["lastTimestamp"] = now
    return ctx.client.update(rt, current, namespace=namespace)


def _ts(ctx: Context) -> str:
    return ctx.clock().strftime("%Y-%m-%dT%H:%M:%SZ")


def _event(ctx: Context, obj: dict[str, Any], type_: str, reason: str, message: str, now: str) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    digest = hashlib.sha1(f"{meta.get('uid')}/{reason}/{message}".encode()).hexdigest()[:10]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta.get('name')}.{digest}", "namespace": meta.get("namespace") or "default"},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "type": type_,
        "reason": reason,
        "message": message,
        "source": {"component": ctx.component},
        "reportingComponent": ctx.component,
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
    }


def record(ctx: Context, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
    """Best effort: an Event that cannot be written is dropped (Events never fail a reconcile)."""
    rt = ctx.client.registry.get("", "v1", "events")
    if rt is None:
        return
    now = _ts(ctx)
    event = _event(ctx, obj, type_, reason, message, now)
    namespace = event["metadata"]["namespace"]
    involved = event["involvedObject"]
    key: Key = (namespace, str(involved["kind"]), str(involved["name"]), str(involved["uid"]), reason, message)
    seen = _get(key)
    write = correlate(seen, event=event, now=now)
    with contextlib.suppress(errors.ApiError):
        if write.verb == "patch":
            try:
                answer = ctx.client.patch(rt, write.name, write.body, namespace=namespace, patch_type="merge")
            except errors.NotFound:  # expired: again, with the count it had reached
                again = {**event, "count": int(write.body["count"])}
                if seen is not None and seen.first:
                    again["firstTimestamp"] = seen.first
                answer = ctx.client.create(rt, again, namespace=namespace)
            except errors.Conflict:  # another process bumped it since our last write
                answer = _bump_read(ctx, rt, write.name, namespace, now)
        else:
            try:
                answer = ctx.client.create(rt, write.body, namespace=namespace)
            except errors.AlreadyExists:  # another process (or this one before a restart) wrote it
                answer = _bump_read(ctx, rt, write.name, namespace, now)
        _remember(key, observed(answer))
