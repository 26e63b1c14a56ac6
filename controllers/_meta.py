"""Small helpers the podgroup, queue, cronjob, gc and command reconcilers share: resource types, owner references,
RFC 3339 timestamps. Plain data in, plain data out; no API calls except `rt()` reading the client's registry.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from lahar.controllers.context import Context
from lahar.kube.resources import ResourceType

__all__ = [
    "controller_of",
    "controller_ref",
    "format_time",
    "parse_time",
    "rt",
]

_TYPES: dict[str, tuple[str, str, str]] = {
    "pods": ("", "v1", "pods"),
    "namespaces": ("", "v1", "namespaces"),
    "events": ("", "v1", "events"),
    "replicasets": ("apps", "v1", "replicasets"),
    "statefulsets": ("apps", "v1", "statefulsets"),
    "deployments": ("apps", "v1", "deployments"),
    "daemonsets": ("apps", "v1", "daemonsets"),
    "batchjobs": ("batch", "v1", "jobs"),
    "vcjobs": ("batch.volcano.sh", "v1alpha1", "jobs"),
    "cronjobs": ("batch.volcano.sh", "v1alpha1", "cronjobs"),
    "podgroups": ("scheduling.volcano.sh", "v1beta1", "podgroups"),
    "queues": ("scheduling.volcano.sh", "v1beta1", "queues"),
    "commands": ("bus.volcano.sh", "v1alpha1", "commands"),
    "jobflows": ("flow.volcano.sh", "v1alpha1", "jobflows"),
    "jobtemplates": ("flow.volcano.sh", "v1alpha1", "jobtemplates"),
}


def rt(ctx: Context, name: str) -> ResourceType:
    """The resource type by lahar's short handle (`"vcjobs"`, `"podgroups"`, ...); KeyError when unknown."""
    group, version, plural = _TYPES[name]
    found = ctx.client.registry.get(group, version, plural)
    if found is None:
        raise LookupError(f"the cluster does not serve {plural}.{group or 'core'}/{version}")
    return found


def controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    """metav1.GetControllerOf: the ownerReference with `controller: true`, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def controller_ref(obj: dict[str, Any], *, api_version: str | None = None, kind: str | None = None) -> dict[str, Any]:
    """metav1.NewControllerRef: controller and blockOwnerDeletion set."""
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": api_version or obj.get("apiVersion"),
        "kind": kind or obj.get("kind"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def parse_time(value: str | None) -> dt.datetime | None:
    """An RFC 3339 timestamp (`2024-01-02T03:04:05Z`, fractional seconds or offsets allowed) as aware UTC."""
    if not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC)


def format_time(value: dt.datetime) -> str:
    """metav1.Time's wire form: second precision, UTC, `Z`."""
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
