"""Kubernetes Events from reconcilers: what `kubectl describe` shows under "Events".

`record(ctx, obj, type_, reason, message)` builds a core/v1 Event about `obj` and writes it through the process's
recorder (`kube.events`, client-go's EventRecorder semantics): a first occurrence is one create, a repeat of the same
(object, reason, message) one merge patch of `count` and `lastTimestamp`; nothing is read back in steady state.
"""

from __future__ import annotations

import hashlib
from typing import Any

from lahar.controllers.context import Context
from lahar.kube import events as kube_events

__all__ = ["record"]


def _ts(ctx: Context) -> str:
    return ctx.clock().strftime("%Y-%m-%dT%H:%M:%SZ")


def record(ctx: Context, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
    """Best effort: an Event that cannot be written is dropped (Events never fail a reconcile)."""
    meta = obj.get("metadata") or {}
    digest = hashlib.sha1(f"{meta.get('uid')}/{reason}/{message}".encode()).hexdigest()[:10]
    now = _ts(ctx)
    kube_events.RECORDER.record(ctx.client, {
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
    })
