"""Kubernetes Events and counters for what policies have to report: a rejected ConfigMap, an Audit result.

Called by `policies.loading` when a reload fails and by the webhook's policy stage for `Audit` results; best
effort like client-go's recorder (an Event that cannot be written is dropped, a repeat bumps `count`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from lahar.kube import errors
from lahar.kube.client import ClusterClient
from lahar.policies import metrics

__all__ = ["audit_event", "record", "record_audits"]

MAX_MESSAGE = 1024


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _event(obj: Mapping[str, Any], type_: str, reason: str, message: str, component: str) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    message = message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."
    digest = hashlib.sha1(f"{meta.get('uid')}/{meta.get('name')}/{reason}/{message}".encode()).hexdigest()[:10]
    now = _now()
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{meta.get('name') or 'object'}.{digest}", "namespace": namespace},
        "involvedObject": {k: v for k, v in {
            "apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": meta.get("name"),
            "namespace": meta.get("namespace"), "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion")}.items() if v},
        "type": type_, "reason": reason, "message": message,
        "source": {"component": component}, "reportingComponent": component,
        "count": 1, "firstTimestamp": now, "lastTimestamp": now,
    }


def record(client: ClusterClient, obj: Mapping[str, Any], type_: str, reason: str, message: str, *,
           component: str = "lahar") -> dict[str, Any] | None:
    """Write (or bump) a core/v1 Event about `obj`; returns it, or None when it could not be written."""
    rt = client.registry.get("", "v1", "events")
    if rt is None:
        return None
    event = _event(obj, type_, reason, message, component)
    ns, name = event["metadata"]["namespace"], event["metadata"]["name"]
    try:
        current = client.get(rt, name, namespace=ns)
        current["count"] = int(current.get("count") or 1) + 1
        current["lastTimestamp"] = event["lastTimestamp"]
        return client.update(rt, current, namespace=ns)
    except errors.NotFound:
        pass
    except errors.ApiError:
        return None
    with contextlib.suppress(errors.ApiError):
        return client.create(rt, event, namespace=ns)
    return None


def audit_event(result: Any, obj: Mapping[str, Any], *, component: str = "lahar-webhook") -> dict[str, Any]:
    """The Event an Audit result leaves on the reviewed object (`reason: PolicyViolation`)."""
    return _event(obj, "Warning", "PolicyViolation", f"AdmissionPolicy '{result.policy}': {result.message}",
                  component)


def record_audits(client: ClusterClient | None, results: Iterable[Any], obj: Mapping[str, Any] | None, *,
                  component: str = "lahar-webhook") -> int:
    """Count every Audit result (`lahar_policy_audit_total{policy,kind}`) and, with a client and an object, leave
    an Event on it. Returns how many were counted."""
    n = 0
    for r in results:
        metrics.AUDITS.inc(policy=r.policy, kind=r.kind)
        n += 1
        if client is not None and obj is not None:
            record(client, obj, "Warning", "PolicyViolation", f"AdmissionPolicy '{r.policy}': {r.message}",
                   component=component)
    return n
