"""The job reconciler's reads: the Job, its pods and its PodGroup, from the informer cache when `ctx.cache` is fresh
enough (`controllers.caches`), else from the API; its Queue and PriorityClasses likewise (`read_named`); and `wrote`,
which tells the cache what our writes answered."""

from __future__ import annotations

import copy
from typing import Any

from lahar.controllers import _fanout, _job_pods
from lahar.controllers.context import Context
from lahar.kube import errors
from lahar.kube.models import labels as keys

__all__ = ["owned", "read_children", "read_job", "read_named", "wrote"]


def owned(obj: dict[str, Any], uid: str) -> bool:
    return any(ref.get("controller") and ref.get("uid") == uid
               for ref in (obj.get("metadata") or {}).get("ownerReferences") or ())


def wrote(ctx: Context, kind: str, job: dict[str, Any], obj: Any) -> Any:
    """Tell the read cache (if any) what our write answered, so our next reads see it; returns `obj`."""
    if ctx.cache is not None:
        meta = job["metadata"]
        ctx.cache.wrote(kind, meta["namespace"], meta["name"], obj)
    return obj


def read_job(ctx: Context, t: Any, namespace: str, name: str) -> dict[str, Any] | None:
    if ctx.cache is not None:
        served, cached = ctx.cache.job(namespace, name)
        if served and cached is not None:  # not cached: new or gone, the API says which
            return copy.deepcopy(cached)
    try:
        raw = ctx.client.get(t.job, name, namespace=namespace)
    except errors.NotFound:
        return None
    if ctx.cache is not None:
        ctx.cache.covered("Job", namespace, name, raw["metadata"].get("resourceVersion"))
    return raw


def read_named(ctx: Context, kind: str, rt: Any, name: str) -> dict[str, Any] | None:
    """A cluster-scoped object the Job names (its Queue, a PriorityClass): from the cache when it holds it, else the
    API (None: not found). Callers only read it; it is not copied."""
    cached = ctx.cache.named(kind, name) if ctx.cache is not None else None
    if cached is not None:
        return cached
    try:
        return ctx.client.get(rt, name)
    except errors.NotFound:
        return None


def _read_pods(ctx: Context, t: Any, job: dict[str, Any]) -> list[dict[str, Any]]:
    meta = job["metadata"]
    cached = ctx.cache.pods(meta["namespace"], meta["name"]) if ctx.cache is not None else None
    if cached is not None:
        return [p for p in cached if owned(p, meta["uid"])]
    listed = ctx.client.list(t.pod, namespace=meta["namespace"], label_selector=f"{keys.JOB_NAME_KEY}={meta['name']}")
    if ctx.cache is not None:
        ctx.cache.covered("Pod", meta["namespace"], meta["name"], (listed.get("metadata") or {}).get("resourceVersion"))
    return [p for p in listed.get("items") or () if owned(p, meta["uid"])]


def _read_podgroup(ctx: Context, t: Any, job: dict[str, Any]) -> dict[str, Any] | None:
    meta = job["metadata"]
    for name in (_job_pods.podgroup_name(job), meta["name"]):  # `<job>` is the pre-UID name Volcano still reads
        served, pg = ctx.cache.podgroup(meta["namespace"], meta["name"], name) if ctx.cache is not None else (False, None)
        if not served:
            try:
                pg = ctx.client.get(t.podgroup, name, namespace=meta["namespace"])
            except errors.NotFound:
                continue
        if pg is not None and owned(pg, meta["uid"]):
            return pg
    return None


def read_children(ctx: Context, t: Any, job: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The Job's pods and its PodGroup, read side by side: two round trips to the API server in the time of one
    (on a real cluster every reconcile waits for them; Volcano's controller reads both from its informers)."""
    reads = [lambda: _read_pods(ctx, t, job), lambda: _read_podgroup(ctx, t, job)]
    done = _fanout.run(lambda read: read(), reads, ctx.pod_concurrency)
    for d in done:
        if d.error is not None:
            raise d.error
    return done[0].value, done[1].value  # type: ignore[return-value]
