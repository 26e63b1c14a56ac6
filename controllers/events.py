"""Kubernetes Events from reconcilers: what `kubectl describe` shows under "Events".

`record(ctx, obj, type_, reason, message)` writes a core/v1 Event about `obj`; a repeat of the same
(object, reason, message) bumps `count` on the existing Event like client-go's recorder does. A new Event is one
create; a repeat this process wrote before is a read and an update (the process remembers the last few thousand).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections import OrderedDict
from typing import Any

from lahar.controllers.context import Context
from lahar.kube import errors

__all__ = ["record"]

_SEEN_MAX = 4096
_seen: OrderedDict[str, None] = OrderedDict()  # `<namespace>/<name>` of Events this process wrote, newest last
_seen_lock = threading.Lock()


def _remember(key: str) -> None:
    with _seen_lock:
        _seen[key] = None
        _seen.move_to_end(key)
        while len(_seen) > _SEEN_MAX:
            _seen.popitem(last=False)


def _bump(ctx: Context, rt: Any, name: str, namespace: str, now: str) -> None:
    current = ctx.client.get(rt, name, namespace=namespace)
    current["count"] = int(current.get("count") or 1) + 1
    current["lastTimestamp"] = now
    ctx.client.update(rt, current, namespace=namespace)


def _ts(ctx: Context) -> str:
    return ctx.clock().strftime("%Y-%m-%dT%H:%M:%SZ")


def record(ctx: Context, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
    """Best effort: an Event that cannot be written is dropped (Events never fail a reconcile)."""
    rt = ctx.client.registry.get("", "v1", "events")
    if rt is None:
        return
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    digest = hashlib.sha1(f"{meta.get('uid')}/{reason}/{message}".encode()).hexdigest()[:10]
    name = f"{meta.get('name')}.{digest}"
    now = _ts(ctx)
    seen = f"{namespace}/{name}"
    if seen in _seen:  # a repeat this process wrote before: bump it (2 calls), as client-go's correlator does
        try:
            _bump(ctx, rt, name, namespace, now)
            return
        except errors.NotFound:
            pass
        except errors.ApiError:
            return
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
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
    # Create first: most Events are new, and a GET that answers 404 before every create doubles their API calls.
    try:
        ctx.client.create(rt, event, namespace=namespace)
        _remember(seen)
        return
    except errors.AlreadyExists:
        pass
    except errors.ApiError:
        return
    with contextlib.suppress(errors.ApiError):
        _bump(ctx, rt, name, namespace, now)
        _remember(seen)
